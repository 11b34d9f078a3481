"""Memory management of the infini device: torch.cuda.memory's names and meanings."""

from __future__ import annotations

import collections
from typing import Any

from .. import _C
from ._utils import Device, _resolve_index


def _index(device: Device) -> int:
    return _resolve_index(device)


def memory_stats_as_nested_dict(device: Device = None) -> dict[str, Any]:
    r"""Return the result of :func:`memory_stats` as a nested dictionary."""
    return _C._memory_stats(_index(device))


def memory_stats(device: Device = None) -> dict[str, Any]:
    r"""Return a dictionary of caching allocator statistics for a given device.

    Keys follow ``torch.cuda.memory_stats``: ``"allocated_bytes.all.current"``,
    ``"reserved_bytes.large_pool.peak"``, ``"num_alloc_retries"``, ``"num_ooms"``...
    """
    result = []

    def _flatten(prefix: str, obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                _flatten(prefix + "." + k if prefix else k, v)
        else:
            result.append((prefix, obj))

    _flatten("", memory_stats_as_nested_dict(device))
    result.sort()
    return collections.OrderedDict(result)


def memory_allocated(device: Device = None) -> int:
    r"""Return the current device memory occupied by tensors in bytes."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Device = None) -> int:
    r"""Return the maximum device memory occupied by tensors in bytes (since
    the start or the last :func:`reset_peak_memory_stats`)."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Device = None) -> int:
    r"""Return the current device memory managed by the caching allocator in bytes."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Device = None) -> int:
    r"""Return the maximum device memory managed by the caching allocator in bytes."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: Device = None) -> None:
    r"""Reset the "peak" stats tracked by the infini memory allocator."""
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Device = None) -> None:
    r"""Reset the "accumulated" (historical) stats tracked by the allocator."""
    _C._reset_accumulated_memory_stats(_index(device))


def reset_max_memory_allocated(device: Device = None) -> None:
    r"""Reset the starting point in tracking maximum device memory occupied by tensors."""
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    r"""Release all unoccupied cached memory held by the caching allocator back
    to the runtime. Synchronizes the devices first, as ``cudaFree`` does."""
    _C._empty_cache()


def mem_get_info(device: Device = None) -> tuple[int, int]:
    r"""Return the global free and total device memory for a given device, from
    the runtime's ``MemGetInfo``."""
    free, total = _C._mem_get_info(_index(device))
    return int(free), int(total)


def set_per_process_memory_fraction(fraction: float, device: Device = None) -> None:
    r"""Set the memory fraction for a process: the caching allocator reserves
    at most ``fraction * total`` bytes on the device, and raises
    ``torch.OutOfMemoryError`` beyond it."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _index(device))


def memory_summary(device: Device = None, abbreviated: bool = False) -> str:
    r"""Return a human-readable printout of the current memory allocator statistics."""
    stats = memory_stats(device)
    index = _index(device)

    def fmt(n: int) -> str:
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024
        return str(n)

    rows = [
        ("Allocated memory", "allocated_bytes", fmt),
        ("Active memory", "active_bytes", fmt),
        ("Requested memory", "requested_bytes", fmt),
        ("Reserved memory", "reserved_bytes", fmt),
        ("Non-releasable memory", "inactive_split_bytes", fmt),
        ("Allocations", "allocation", str),
        ("Active allocs", "active", str),
        ("Reserved segments", "segment", str),
    ]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    lines = [
        "=" * 79,
        f" infini memory summary, device {index}".ljust(79),
        "-" * 79,
        f"{'Metric':<28}{'Cur Usage':>12}{'Peak Usage':>13}{'Tot Alloc':>13}{'Tot Freed':>13}",
        "-" * 79,
    ]
    for title, key, f in rows:
        for pool in pools:
            name = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            lines.append(f"{name:<28}" + "".join(f"{f(v):>13}" if i else f"{f(v):>12}" for i, v in enumerate(vals)))
    lines += [
        "-" * 79,
        f"Device allocs / frees: {stats.get('num_device_alloc', 0)} / {stats.get('num_device_free', 0)}   "
        f"Retries: {stats.get('num_alloc_retries', 0)}   OOMs: {stats.get('num_ooms', 0)}",
        "=" * 79,
    ]
    return "\n".join(lines) + "\n"
