"""The caching device allocator and the torch.cuda-named memory API.

In-process tests measure differences from a starting point: the process holds
other live device memory (one-element tensors cached for Python scalars, e.g.
by ``x + 1``, and tensors of other tests), so nothing here uses Python-scalar
ops. Settings read once per process (TORCH_INFINI_HOST_MEMORY,
TORCH_INFINI_ALLOC_CONF) and exact whole-process figures are tested in
subprocesses.
"""

from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_infini  # noqa: F401
from hang_guard import HANG_GUARD_S

KiB = 1 << 10
MiB = 1 << 20
M = torch.infini


@pytest.fixture(autouse=True)
def _no_background_frees():
    """Tensors kept alive by reference cycles (e.g. tracebacks of earlier
    tests) must not be freed by the garbage collector in the middle of a
    measurement."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def empty(nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def stats() -> dict:
    return M.memory_stats()


# --- stats follow tensor lifetimes ------------------------------------------------


def test_allocated_rises_and_falls_exactly_with_tensor_lifetimes(device):
    base = M.memory_allocated()
    a = torch.empty(1024, dtype=torch.float32, device=device)  # 4 KiB
    assert M.memory_allocated() == base + 4 * KiB
    b = empty(3 * MiB, device)
    assert M.memory_allocated() == base + 4 * KiB + 3 * MiB
    view = b[MiB:]  # views and aliases own nothing
    alias = b
    assert M.memory_allocated() == base + 4 * KiB + 3 * MiB
    del b
    assert M.memory_allocated() == base + 4 * KiB + 3 * MiB  # still referenced
    del alias
    assert M.memory_allocated() == base + 4 * KiB + 3 * MiB
    del view
    assert M.memory_allocated() == base + 4 * KiB
    del a
    assert M.memory_allocated() == base


def test_sizes_round_up_to_512_bytes_and_requested_bytes_are_exact(device):
    before = stats()
    t = torch.empty(1000, dtype=torch.float32, device=device)  # 4000 bytes asked
    after = stats()
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == 4096
    assert after["requested_bytes.all.current"] - before["requested_bytes.all.current"] == 4000
    assert after["allocation.all.current"] - before["allocation.all.current"] == 1
    del t
    assert stats()["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert stats()["requested_bytes.all.current"] == before["requested_bytes.all.current"]


def test_results_of_device_ops_are_counted(device):
    x = torch.arange(1024, dtype=torch.float32).to(device)
    base = M.memory_allocated()
    y = x + x  # a new 4 KiB tensor
    assert M.memory_allocated() == base + 4 * KiB
    y.add_(x)  # in place: nothing new
    assert M.memory_allocated() == base + 4 * KiB
    del y
    assert M.memory_allocated() == base


def test_small_and_large_pools(device):
    before = stats()
    small = empty(256 * KiB, device)
    large = empty(4 * MiB, device)
    after = stats()
    assert after["allocated_bytes.small_pool.current"] - before["allocated_bytes.small_pool.current"] == 256 * KiB
    assert after["allocated_bytes.large_pool.current"] - before["allocated_bytes.large_pool.current"] == 4 * MiB
    del small, large


def test_zero_size_tensors_use_no_memory(device):
    base = M.memory_allocated()
    t = torch.empty(0, device=device)
    assert M.memory_allocated() == base
    del t


def test_peak_and_reset_peak_memory_stats(device):
    M.reset_peak_memory_stats()
    base = M.memory_allocated()
    assert M.max_memory_allocated() == base
    assert M.max_memory_reserved() == M.memory_reserved()
    t = empty(8 * MiB, device)
    del t
    assert M.memory_allocated() == base
    assert M.max_memory_allocated() == base + 8 * MiB
    assert M.max_memory_reserved() >= base + 8 * MiB
    M.reset_peak_memory_stats()
    assert M.max_memory_allocated() == base
    assert stats()["allocated_bytes.all.peak"] == base
    M.reset_max_memory_allocated()
    assert M.max_memory_allocated() == base


def test_reset_accumulated_memory_stats(device):
    M.reset_accumulated_memory_stats()
    s = stats()
    assert s["allocation.all.allocated"] == 0
    assert s["allocation.all.freed"] == 0
    assert s["num_ooms"] == 0
    t = empty(MiB, device)
    del t
    s = stats()
    assert s["allocation.all.allocated"] == 1
    assert s["allocation.all.freed"] == 1
    assert s["allocated_bytes.all.allocated"] == MiB


# --- reserved memory and empty_cache ----------------------------------------------------


def test_reserved_memory_caches_freed_blocks(device):
    M.empty_cache()
    start = M.memory_reserved()
    t = empty(16 * MiB, device)
    held = M.memory_reserved()
    assert held >= start  # a new segment, or free room in a segment still in use
    assert held >= M.memory_allocated()
    ptr = t.data_ptr()
    del t
    assert M.memory_reserved() == held  # kept for reuse
    u = empty(16 * MiB, device)  # served from the cache: no new segment
    assert M.memory_reserved() == held
    assert u.data_ptr() == ptr
    del u
    assert M.max_memory_reserved() >= held


def test_empty_cache_lowers_reserved_to_what_is_in_use(device):
    M.empty_cache()
    start = M.memory_reserved()
    before = stats()["segment.all.current"]
    keep = empty(12 * MiB, device)
    drop = [empty(12 * MiB, device), empty(300 * KiB, device), empty(5 * MiB, device), empty(40 * MiB, device)]
    del drop
    cached = M.memory_reserved()
    assert cached >= start + 40 * MiB  # no segment of the emptied cache could hold 40 MiB
    M.empty_cache()
    reserved = M.memory_reserved()
    assert reserved < cached
    assert reserved - start <= 14 * MiB  # at most keep's own segment is left
    assert stats()["segment.all.current"] <= before + 1
    assert stats()["reserved_bytes.all.current"] == reserved
    del keep
    M.empty_cache()
    assert M.memory_reserved() == start
    assert stats()["segment.all.current"] == before


def test_empty_cache_keeps_blocks_of_live_tensors(device):
    x = torch.arange(MiB // 4, dtype=torch.float32).to(device)
    M.empty_cache()
    assert torch.equal(x.cpu(), torch.arange(MiB // 4, dtype=torch.float32))


# --- the rest of the API ------------------------------------------------------------


def test_memory_stats_keys_like_cuda(device):
    t = empty(MiB, device)
    s = stats()
    for metric in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                   "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{metric}.{pool}.{field}" in s, f"{metric}.{pool}.{field}"
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        assert key in s, key
    assert list(s) == sorted(s)  # an OrderedDict sorted by key, as torch.cuda's
    assert s["allocated_bytes.all.current"] == M.memory_allocated()
    assert s["reserved_bytes.all.current"] == M.memory_reserved()
    assert s["allocated_bytes.all.current"] == (
        s["allocated_bytes.small_pool.current"] + s["allocated_bytes.large_pool.current"]
    )
    nested = M.memory_stats_as_nested_dict()
    assert nested["reserved_bytes"]["all"]["peak"] == s["reserved_bytes.all.peak"]
    del t


def test_memory_api_accepts_device_spellings(device):
    expected = M.memory_allocated()
    for spelling in (None, 0, "infini", "infini:0", device):
        assert M.memory_allocated(spelling) == expected
        assert isinstance(M.memory_reserved(spelling), int)
        assert isinstance(M.memory_stats(spelling), dict)
    with pytest.raises(ValueError):
        M.memory_allocated("cpu")


def test_memory_summary_is_text(device):
    t = empty(MiB, device)
    text = M.memory_summary()
    assert isinstance(text, str)
    assert "Allocated memory" in text and "Reserved memory" in text
    assert "infini" in text
    assert len(M.memory_summary(abbreviated=True)) < len(text)
    assert M.memory_summary(device) == M.memory_summary(0)
    del t


def test_mem_get_info(device):
    free, total = M.mem_get_info()
    assert isinstance(free, int) and isinstance(total, int)
    assert 0 <= free <= total
    assert total == M.get_device_properties(device).total_memory
    if torch_infini.diagnostics()["provider"] != "host":
        return  # InfiniRT's CPU backend reports the whole system's memory, which moves on its own
    M.empty_cache()
    free_before, _ = M.mem_get_info(device)
    t = empty(32 * MiB, device)
    free_after, _ = M.mem_get_info(device)
    assert free_after <= free_before - 32 * MiB
    del t


def test_accelerator_memory_api_agrees(device):
    t = empty(2 * MiB, device)
    assert torch.accelerator.memory_allocated() == M.memory_allocated()
    assert torch.accelerator.memory_allocated(0) == M.memory_allocated(0)
    assert torch.accelerator.memory_reserved() == M.memory_reserved()
    assert torch.accelerator.max_memory_allocated() == M.max_memory_allocated()
    assert torch.accelerator.max_memory_reserved() == M.max_memory_reserved()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == M.memory_allocated()
    assert torch.accelerator.get_memory_info() == pytest.approx(M.mem_get_info(), rel=0.01)
    base = torch.accelerator.memory_allocated()
    del t
    assert torch.accelerator.memory_allocated() == base - 2 * MiB
    torch.accelerator.reset_peak_memory_stats()
    assert M.max_memory_allocated() == M.memory_allocated()
    torch.accelerator.empty_cache()


def test_per_process_memory_fraction_raises_out_of_memory(device):
    M.empty_cache()
    _free, total = M.mem_get_info()
    ooms = stats()["num_ooms"]
    limit = M.memory_reserved() + 8 * MiB
    try:
        M.set_per_process_memory_fraction(limit / total)
        with pytest.raises(torch.OutOfMemoryError) as info:
            empty(64 * MiB, device)
        message = str(info.value)
        assert "64.00 MiB" in message  # the size asked
        assert "infini:0" in message  # the device
        assert "allocated" in message and "reserved" in message
        assert "set_per_process_memory_fraction" in message
        assert isinstance(info.value, RuntimeError)  # torch.OutOfMemoryError is one
        assert stats()["num_ooms"] == ooms + 1
        small = empty(MiB, device)  # under the cap: still fine
        del small
    finally:
        M.set_per_process_memory_fraction(1.0)
    t = empty(64 * MiB, device)
    del t
    M.empty_cache()


def test_per_process_memory_fraction_argument_checks():
    with pytest.raises(TypeError):
        M.set_per_process_memory_fraction(1)


def test_per_process_memory_fraction_out_of_range_is_a_value_error():
    for bad in (1.5, -0.25):
        with pytest.raises(ValueError):
            M.set_per_process_memory_fraction(bad)


def test_blocks_are_pooled_per_stream(device):
    side = torch.infini.Stream()
    with torch.infini.stream(side):
        a = empty(3 * MiB + 512, device)
        ptr = a.data_ptr()
        del a
        b = empty(3 * MiB + 512, device)  # same stream: the freed block at once
        assert b.data_ptr() == ptr
        del b
    c = empty(3 * MiB + 512, device)  # another stream: not side's block
    assert c.data_ptr() != ptr
    del c


def test_mixed_size_loop_keeps_reserved_memory_bounded(device):
    rng = random.Random(20240607)
    sizes = [KiB, 3000, 100 * KiB, MiB + 512, 5 * MiB, 12 * MiB, 33 * MiB]
    side = torch.infini.Stream()
    M.empty_cache()
    start = M.memory_reserved()
    M.reset_peak_memory_stats()
    live: list[torch.Tensor] = []
    peak_live = 0
    reserved_at = {}
    for i in range(10_000):
        n = rng.choice(sizes) + rng.randrange(0, 4096)
        if i % 7 == 0:
            with torch.infini.stream(side):
                live.append(empty(n, device))
        else:
            live.append(empty(n, device))
        if len(live) > 4:
            live.pop(rng.randrange(len(live)))
        peak_live = max(peak_live, sum(t.numel() for t in live))
        if i + 1 in (2_000, 10_000):
            reserved_at[i + 1] = M.max_memory_reserved() - start
    del live
    # The cache reaches a steady state early and stops growing.
    assert reserved_at[10_000] <= 1.25 * reserved_at[2_000]
    # Bounded by a small multiple of what is alive at once (two stream pools).
    assert reserved_at[10_000] <= 4 * peak_live + 64 * MiB
    M.empty_cache()
    assert M.memory_reserved() == start


# --- subprocesses: whole-process figures and settings read once -----------------------


FRESH = r"""
import json, torch, torch_infini
M = torch.infini
out = {"allocated0": M.memory_allocated(), "reserved0": M.memory_reserved()}
free0, total = M.mem_get_info()
out["free0_is_total"] = free0 == total
ts = [torch.empty(n, dtype=torch.uint8, device="infini") for n in (512, 70000, 3 << 20, 11 << 20)]
out["allocated_live"] = M.memory_allocated()
out["expected_live"] = 512 + 70144 + (3 << 20) + (11 << 20)
out["segments_live"] = M.memory_stats()["segment.all.current"]
del ts
out["allocated_after_del"] = M.memory_allocated()
out["reserved_after_del"] = M.memory_reserved()
M.empty_cache()
out["reserved_after_empty_cache"] = M.memory_reserved()
out["segments_after_empty_cache"] = M.memory_stats()["segment.all.current"]
free1, _ = M.mem_get_info()
out["free_after_empty_cache_is_total"] = free1 == total
s = M.memory_stats()
out["device_alloc_free_balanced"] = s["num_device_alloc"] == s["num_device_free"]
print("FRESH " + json.dumps(out), flush=True)
"""


def test_blocks_split_from_a_segment_and_merge_back_with_cuda_figures(subprocess_results):
    """The figures CUDA's caching allocator gives: 512-byte rounding, a 2 MiB
    segment for small requests and 20 MiB for those up to 10 MiB, a free block
    of the same stream reused at the lowest fitting size and address, split
    remainders counted as inactive splits until merged back."""
    r = _result(subprocess_results["small_device"], "SPLITS")
    steps = r["steps"]
    # [segments, active blocks, inactive splits, their bytes, allocated, reserved]
    assert steps["a"] == [1, 1, 1, 2 * MiB - 1024, 1024, 2 * MiB]
    assert steps["a b"] == [1, 2, 1, 2 * MiB - 4096, 4096, 2 * MiB]
    # a's block is free between the segment's start and b: a split of its own.
    assert steps["b"] == [1, 1, 2, 2 * MiB - 3072, 3072, 2 * MiB]
    # 900 bytes round to 1 KiB: a's block fits exactly, is reused, not split.
    assert r["reused"] == [True, True, True]
    assert steps["b c"] == [1, 2, 1, 2 * MiB - 4096, 4096, 2 * MiB]
    assert steps["b again"] == steps["b"]
    # b's free merges it with both free neighbours: one free segment again.
    assert steps["none"] == [1, 0, 0, 0, 0, 2 * MiB]
    # 3 MiB from a 20 MiB segment: the 17 MiB rest is split off (over 1 MiB).
    assert steps["large"] == [1, 1, 1, 17 * MiB, 3 * MiB, 20 * MiB]
    assert steps["large freed"] == [1, 0, 0, 0, 0, 20 * MiB]
    assert r["reserved_after_empty_cache"] == 0


def test_fresh_process_figures_are_exact(subprocess_results):
    r = _result(subprocess_results["small_device"], "FRESH")
    assert r["allocated0"] == 0 and r["reserved0"] == 0
    assert r["free0_is_total"]
    assert r["allocated_live"] == r["expected_live"]
    assert r["segments_live"] >= 2  # small and large pools
    assert r["allocated_after_del"] == 0
    assert r["reserved_after_del"] > 0  # cached
    assert r["reserved_after_empty_cache"] == 0
    assert r["segments_after_empty_cache"] == 0
    assert r["free_after_empty_cache_is_total"]
    assert r["device_alloc_free_balanced"]


SPLITS = r"""
# Runs after FRESH, with no segment left: blocks carved from one segment per
# pool, freed and reused, with the split figures after each step.
def figures(pool):
    s = M.memory_stats()
    keys = ("segment", "active", "inactive_split", "inactive_split_bytes", "allocated_bytes", "reserved_bytes")
    return [s[f"{k}.{pool}.current"] for k in keys]
def u8(n):
    return torch.empty(n, dtype=torch.uint8, device="infini")
steps = {}
a = u8(1000)
a_addr = a.data_ptr()
steps["a"] = figures("small_pool")
b = u8(3000)
steps["a b"] = figures("small_pool")
del a
steps["b"] = figures("small_pool")
reused = []
for _ in range(3):
    c = u8(900)
    reused.append(c.data_ptr() == a_addr)
    steps["b c"] = figures("small_pool")
    del c
steps["b again"] = figures("small_pool")
del b
steps["none"] = figures("small_pool")
big = u8(3 << 20)
steps["large"] = figures("large_pool")
del big
steps["large freed"] = figures("large_pool")
out = {"steps": steps, "reused": reused}
M.empty_cache()
out["reserved_after_empty_cache"] = M.memory_reserved()
print("SPLITS " + json.dumps(out), flush=True)
"""


SMALL_DEVICE = r"""
import json, torch, torch_infini
M = torch.infini
out = {}
free, total = M.mem_get_info()
out["total"] = total
keep = torch.empty(8 << 20, dtype=torch.uint8, device="infini")
try:
    torch.empty(100 << 20, dtype=torch.uint8, device="infini")
    out["raised"] = None
except torch.OutOfMemoryError as e:
    out["raised"] = "OutOfMemoryError"
    out["message"] = str(e)
out["num_ooms"] = M.memory_stats()["num_ooms"]
# still usable: allocate something small and compute
x = torch.arange(1024, dtype=torch.float32).to("infini")
out["usable"] = torch.equal((x + x).cpu(), torch.arange(1024, dtype=torch.float32) * 2)
# before raising, the allocator frees its cache and retries once: 40 MiB cached
# for the default stream cannot serve a side stream, but is released for it
del keep
cached = torch.empty(40 << 20, dtype=torch.uint8, device="infini")
del cached
out["reserved_cached"] = M.memory_reserved()
side = M.Stream()
retries = M.memory_stats()["num_alloc_retries"]
with M.stream(side):
    big = torch.empty(40 << 20, dtype=torch.uint8, device="infini")
out["retry_succeeded"] = big.numel() == 40 << 20
out["retries"] = M.memory_stats()["num_alloc_retries"] - retries
print("RESULT " + json.dumps(out), flush=True)
torch.accelerator.empty_host_cache()  # must not crash with the device initialized
print("ALIVE", flush=True)
"""


@pytest.fixture(scope="module")
def small_device(subprocess_results) -> dict:
    return _result(subprocess_results["small_device"])


def test_out_of_memory_on_a_small_device_raises_out_of_memory_error(small_device):
    assert small_device["total"] == 64 * MiB
    assert small_device["raised"] == "OutOfMemoryError"
    assert small_device["num_ooms"] == 1


def test_out_of_memory_message_names_size_device_and_figures(small_device):
    message = small_device["message"]
    assert "100.00 MiB" in message
    assert "infini:0" in message
    assert "allocated" in message and "reserved" in message
    assert "64.00 MiB total" in message


def test_process_stays_usable_after_out_of_memory(small_device):
    assert small_device["usable"] is True


def test_allocator_frees_its_cache_and_retries_before_failing(small_device):
    assert small_device["reserved_cached"] >= 40 * MiB
    assert small_device["retry_succeeded"] is True
    assert small_device["retries"] == 1


CACHING_OFF = r"""
import json, torch, torch_infini
M = torch.infini
hook = torch_infini._C._test_enqueue_delay
default = M.default_stream()
out = {"caching": torch_infini._C._provider_info()["caching_allocator"]}
x = torch.empty(1 << 20, dtype=torch.uint8, device="infini")
out["allocated_live"] = M.memory_allocated()
out["reserved_live"] = M.memory_reserved()
y = torch.arange(1000, dtype=torch.float32).to("infini")
out["compute_ok"] = torch.equal((y + y).cpu(), torch.arange(1000, dtype=torch.float32) * 2)
del y
M.synchronize()
# Free while the stream is busy (the block must wait for it), then synchronize.
hook(default.stream_id, 0, 100.0)
del x
M.synchronize()
out["allocated_after_del_sync"] = M.memory_allocated()
out["reserved_after_del_sync"] = M.memory_reserved()
M.empty_cache()
out["reserved_after_empty_cache"] = M.memory_reserved()
w = torch.empty(1, dtype=torch.uint8, device="infini")  # any allocator call
M.synchronize()
out["reserved_with_one_byte_live"] = M.memory_reserved()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def caching_off(subprocess_results) -> dict:
    return _result(subprocess_results["caching_off"])


def test_caching_can_be_disabled(caching_off):
    assert caching_off["caching"] is False
    assert caching_off["allocated_live"] == 1 << 20
    assert caching_off["reserved_live"] == 1 << 20  # exact size: no rounding, no segment
    assert caching_off["compute_ok"] is True
    assert caching_off["allocated_after_del_sync"] == 0
    assert caching_off["reserved_with_one_byte_live"] == 1


def test_without_caching_reserved_drops_when_tensors_are_freed(caching_off):
    assert caching_off["reserved_after_del_sync"] == 0


def test_without_caching_empty_cache_releases_freed_blocks(caching_off):
    assert caching_off["reserved_after_empty_cache"] == 0


def test_invalid_alloc_conf_names_the_variable(subprocess_results):
    proc = subprocess_results["bad_conf"]
    assert proc.returncode != 0
    assert "TORCH_INFINI_ALLOC_CONF" in proc.stderr
    assert "maybe" in proc.stderr


def test_accelerator_empty_host_cache_does_not_crash(subprocess_results):
    proc = subprocess_results["small_device"]
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    assert "ALIVE" in proc.stdout


BAD_CONF = r"""
import torch, torch_infini
torch.empty(4, device="infini")
"""

SCRIPTS = {
    # One process for all three (each subprocess costs a torch import): the
    # exact figures of a fresh process first, then those of splits and merges,
    # then out-of-memory on a 64 MiB device.
    # The host runtime's device size is configurable: exact figures and OOM are
    # tested there, whichever provider this build selects by default.
    "small_device": (FRESH + SPLITS + SMALL_DEVICE, {"TORCH_INFINI_HOST_MEMORY": "64M", "TORCH_INFINI_PROVIDER": "host"}),
    "caching_off": (CACHING_OFF, {"TORCH_INFINI_ALLOC_CONF": "caching:0"}),
    "bad_conf": (BAD_CONF, {"TORCH_INFINI_ALLOC_CONF": "caching:maybe"}),
}


@pytest.fixture(scope="module")
def subprocess_results() -> dict[str, subprocess.CompletedProcess]:
    """Every subprocess of this file, started together (each imports torch)."""
    running = {}
    for name, (code, env) in SCRIPTS.items():
        full_env = dict(os.environ)
        full_env.update(env)
        running[name] = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    results = {}
    for name, proc in running.items():
        try:
            out, err = proc.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results


def _result(proc: subprocess.CompletedProcess, tag: str = "RESULT") -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(tag + " ")]
    assert lines, f"no {tag} line (exit status {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(lines[-1][len(tag) + 1:])
