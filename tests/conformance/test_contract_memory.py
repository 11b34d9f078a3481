"""Memory contracts: torch.cuda's memory API names and meanings for the
caching allocator. Sizes are multiples of 512 bytes, so "exact" holds for
every allocator in the style of CUDA's. Run on every backend (see conftest.py).

Only tensors created here (torch.empty and adds of device tensors) are
counted, as differences from a starting point: other live tensors (the
backend's caches, other tests) may exist.
"""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _no_background_frees():
    """No garbage collection (of tensors other tests left in reference
    cycles) in the middle of a measurement."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _empty(dev: torch.device, nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=dev)


@pytest.mark.covers("memory_allocated")
def test_memory_allocated_follows_tensor_lifetimes(mod, dev):
    base = mod.memory_allocated(dev)
    a = _empty(dev, MiB)
    assert mod.memory_allocated(dev) == base + MiB
    b = _empty(dev, 4096)
    assert mod.memory_allocated() == base + MiB + 4096
    alias = a.view(1024, 1024)  # a view owns no memory
    del a
    assert mod.memory_allocated(dev) == base + MiB + 4096
    del alias
    assert mod.memory_allocated(dev) == base + 4096
    del b
    assert mod.memory_allocated(dev) == base


@pytest.mark.covers("max_memory_allocated", "reset_peak_memory_stats", "max_memory_reserved")
def test_peaks_and_their_reset(mod, dev):
    mod.reset_peak_memory_stats(dev)
    assert mod.max_memory_allocated(dev) == mod.memory_allocated(dev)
    assert mod.max_memory_reserved(dev) == mod.memory_reserved(dev)
    base = mod.memory_allocated(dev)
    t = _empty(dev, 2 * MiB)
    del t
    assert mod.memory_allocated(dev) == base
    assert mod.max_memory_allocated(dev) >= base + 2 * MiB
    assert mod.max_memory_reserved(dev) >= mod.memory_reserved(dev)
    mod.reset_peak_memory_stats()
    assert mod.max_memory_allocated(dev) == base


@pytest.mark.covers("reset_max_memory_allocated")
def test_reset_max_memory_allocated(mod, dev):
    t = _empty(dev, 2 * MiB)
    del t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in torch.cuda (FutureWarning)
        mod.reset_max_memory_allocated(dev)
    assert mod.max_memory_allocated(dev) == mod.memory_allocated(dev)


@pytest.mark.covers("memory_reserved", "empty_cache")
def test_reserved_memory_is_cached_until_empty_cache(mod, dev):
    mod.empty_cache()
    start = mod.memory_reserved(dev)
    t = _empty(dev, 32 * MiB)
    assert mod.memory_reserved(dev) >= start  # a new segment, or room in one in use
    assert mod.memory_reserved(dev) >= mod.memory_allocated(dev)
    held = mod.memory_reserved(dev)
    del t
    assert mod.memory_reserved(dev) == held  # cached, not returned
    mod.empty_cache()
    assert mod.memory_reserved(dev) == start


@pytest.mark.covers("memory_stats", "memory_stats_as_nested_dict")
def test_memory_stats_use_cuda_key_names(mod, dev):
    t = _empty(dev, MiB)
    stats = mod.memory_stats(dev)
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "allocated_bytes.all.allocated",
        "allocated_bytes.all.freed",
        "allocated_bytes.large_pool.current",
        "allocated_bytes.small_pool.current",
        "reserved_bytes.all.current",
        "reserved_bytes.all.peak",
        "active_bytes.all.current",
        "requested_bytes.all.current",
        "allocation.all.current",
        "segment.all.current",
        "num_alloc_retries",
        "num_ooms",
    ):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == mod.memory_allocated(dev)
    assert stats["reserved_bytes.all.current"] == mod.memory_reserved(dev)
    nested = mod.memory_stats_as_nested_dict(dev)
    assert nested["allocated_bytes"]["all"]["current"] == stats["allocated_bytes.all.current"]
    assert nested["num_ooms"] == stats["num_ooms"]
    del t


@pytest.mark.covers("reset_accumulated_memory_stats")
def test_reset_accumulated_memory_stats(mod, dev):
    mod.reset_accumulated_memory_stats(dev)
    stats = mod.memory_stats(dev)
    assert stats["allocation.all.allocated"] == 0
    assert stats["allocated_bytes.all.freed"] == 0
    t = _empty(dev, MiB)
    del t
    stats = mod.memory_stats(dev)
    assert stats["allocation.all.allocated"] == 1
    assert stats["allocated_bytes.all.allocated"] == MiB
    assert stats["allocated_bytes.all.freed"] == MiB


@pytest.mark.covers("memory_summary")
def test_memory_summary_is_text(mod, dev):
    text = mod.memory_summary(dev)
    assert isinstance(text, str)
    assert "Allocated memory" in text
    assert "Active allocs" in text
    assert isinstance(mod.memory_summary(abbreviated=True), str)


@pytest.mark.covers("mem_get_info")
def test_mem_get_info(mod, dev):
    free, total = mod.mem_get_info(dev)
    assert isinstance(free, int) and isinstance(total, int)
    assert 0 <= free <= total
    assert total > 0
    assert len(mod.mem_get_info()) == 2  # the current device


@pytest.mark.covers("set_per_process_memory_fraction")
def test_memory_fraction_caps_the_allocator(mod, dev, backend):
    mod.empty_cache()
    _free, total = mod.mem_get_info(dev)
    limit = mod.memory_reserved(dev) + 16 * MiB
    try:
        mod.set_per_process_memory_fraction(min(1.0, limit / total), dev)
        with pytest.raises(torch.OutOfMemoryError) as info:
            _empty(dev, 64 * MiB)
        assert f"{backend}" in str(info.value).lower()
    finally:
        mod.set_per_process_memory_fraction(1.0, dev)
    t = _empty(dev, 64 * MiB)  # the cap is gone
    del t
    with pytest.raises(TypeError):
        mod.set_per_process_memory_fraction(1, dev)


@pytest.mark.covers("set_per_process_memory_fraction")
def test_memory_fraction_out_of_range_is_a_value_error(mod, dev):
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError):
            mod.set_per_process_memory_fraction(bad, dev)


@pytest.mark.covers("memory_snapshot")
def test_memory_snapshot_segments_account_for_the_allocator(mod, dev):
    keep = [_empty(dev, MiB), _empty(dev, 4096)]
    segments = [s for s in mod.memory_snapshot() if s["device"] == dev.index]
    assert segments, "memory_snapshot lists no segment of the device"
    for seg in segments:
        assert {"address", "total_size", "allocated_size", "active_size", "stream", "segment_type",
                "blocks"} <= set(seg)
        assert seg["segment_type"] in ("small", "large")
        # The blocks tile the segment, in address order.
        address = seg["address"]
        for block in seg["blocks"]:
            assert block["address"] == address
            assert block["state"] in ("active_allocated", "active_pending_free", "inactive")
            address += block["size"]
        assert address == seg["address"] + seg["total_size"]
        assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"]
                                            if b["state"] == "active_allocated")
    assert sum(s["total_size"] for s in segments) == mod.memory_reserved(dev)
    assert sum(s["allocated_size"] for s in segments) == mod.memory_allocated(dev)
    addresses = {b["address"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated"}
    assert {t.data_ptr() for t in keep} <= addresses


@pytest.mark.covers("list_gpu_processes")
def test_list_gpu_processes_names_this_process(mod, dev):
    import os
    import re

    keep = _empty(dev, MiB)  # noqa: F841  (reserved memory to report)
    lines = mod.list_gpu_processes(dev).splitlines()
    assert len(lines) == 2
    match = re.fullmatch(r"process\s+(\d+) uses\s+([\d.]+) MB GPU memory", lines[1])
    assert match, lines[1]
    assert int(match.group(1)) == os.getpid()
    assert float(match.group(2)) == pytest.approx(mod.memory_reserved(dev) / MiB, abs=1e-3)
