"""Memory management of the infini device: torch.cuda.memory's names and meanings."""

from __future__ import annotations

import collections
import sys
from typing import Any, Literal

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


def list_gpu_processes(device: Device = None) -> str:
    r"""Return a human-readable printout of the processes using memory of a given device.

    Like :func:`torch.cuda.list_gpu_processes`, in its format. An infini
    device's memory belongs to the process that allocated it (there is no
    driver to ask about other processes), so the printout names this process
    and the memory its caching allocator reserves, or says that it has none.

    Args:
        device (torch.device or int, optional): selected device. Returns the
            printout for the current device if :attr:`device` is ``None``
            (default).
    """
    import os

    index = _index(device)
    reserved = memory_reserved(index)
    lines = [f"infini:{index}"]
    if reserved == 0:
        lines.append("no processes are running")
    else:
        lines.append(f"process {os.getpid():>10d} uses {reserved / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)


def memory_snapshot(mempool_id: Any = None) -> list[dict[str, Any]]:
    r"""Return a snapshot of the infini memory allocator state across all devices.

    The segments of :func:`_snapshot`, as :func:`torch.cuda.memory_snapshot`
    returns them. Interpreting the output requires familiarity with the
    memory allocator internals.
    """
    if mempool_id is not None:
        raise NotImplementedError("torch.infini.memory_snapshot: mempool_id is not supported; "
                                  "filter the segments by their 'segment_pool_id'")
    return _C._memory_snapshot()["segments"]


def _record_memory_history(
    enabled: Literal["state", "all"] | None = "all",
    context: Literal["state", "alloc", "all"] | None = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
    device: Device = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    r"""Enable recording of stack traces associated with memory allocations, as
    :func:`torch.cuda.memory._record_memory_history` does, so you can tell what
    allocated any piece of memory in :func:`_snapshot`.

    In addition to keeping stack traces with each current allocation and free,
    this also records a history of all alloc/free events, up to
    ``max_entries`` (the last ones are kept). Use :func:`_snapshot` or
    :func:`_dump_snapshot` to retrieve it, and ``torch.cuda._memory_viz`` (or
    pytorch.org/memory_viz) to visualize it.

    Args:
        enabled: ``None`` disables recording (and clears the history);
            ``"state"`` keeps information for currently allocated memory;
            ``"all"`` additionally keeps a history of all alloc/free calls.
        context: ``None`` records no tracebacks; ``"state"`` for currently
            allocated memory; ``"alloc"`` also for alloc calls; ``"all"`` also
            for free calls.
        stacks: ``"python"`` for Python and TorchScript frames; ``"all"``
            adds C++ frames.
        max_entries: the most alloc/free events kept.
        device: accepted for compatibility; recording covers every device,
            as CUDA's does.
        clear_history: clear the history when enabling.
        compile_context, global_record_annotations: accepted for
            compatibility; infini records neither.
        skip_actions: actions not to record (``"alloc"``, ``"free_requested"``,
            ``"free_completed"``, ``"segment_alloc"``, ``"segment_free"``,
            ``"oom"``, ``"snapshot"``).
    """
    if isinstance(enabled, bool):  # the legacy form: enabled=True/False
        enabled, context = ("all", "all") if enabled else (None, None)
    _C._record_memory_history(enabled, context, stacks, max_entries, clear_history,
                              list(skip_actions or ()))


def _snapshot(device: Device = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    r"""Save a snapshot of infini memory state at the time it was called, in
    :func:`torch.cuda.memory._snapshot`'s format: ``segments`` (each with its
    ``blocks`` and the stack ``frames`` that allocated them, while
    :func:`_record_memory_history` records) and ``device_traces`` (per
    device, the recorded ``alloc``/``free_requested``/``free_completed``/
    ``segment_alloc``/``segment_free``/``oom``/``snapshot`` actions).
    """
    s = _C._memory_snapshot()
    if augment_with_fx_traces:
        from torch._utils import _augment_memory_snapshot_stack_traces

        s = _augment_memory_snapshot_stack_traces(s)
    return s


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    r"""Save a pickled version of the :func:`_snapshot` dictionary to a file,
    which the interactive viewer at pytorch.org/memory_viz opens."""
    import pickle

    s = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(s, f)
