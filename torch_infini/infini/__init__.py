"""torch.infini: the infini device module, mirroring torch.cuda.

Registered by ``import torch_infini`` as ``torch.infini``.
"""

from __future__ import annotations

import torch

from ._device import (
    _is_in_bad_fork,
    _lazy_init,
    current_device,
    device,
    device_count,
    device_of,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    set_device,
    synchronize,
)
from .graphs import (
    InfiniGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from ._sync_debug import get_sync_debug_mode, set_sync_debug_mode
from .amp import get_amp_supported_dtype
from .memory import (
    empty_cache,
    list_gpu_processes,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from . import amp, random
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

#: Raised when the device runs out of memory: PyTorch's own class, as
#: ``torch.cuda.OutOfMemoryError`` is, so ``except torch.OutOfMemoryError``
#: and ``except torch.infini.OutOfMemoryError`` catch the same errors.
OutOfMemoryError = torch.OutOfMemoryError

__all__ = [
    "Event",
    "InfiniGraph",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "amp",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_device_name",
    "get_amp_supported_dtype",
    "get_arch_list",
    "get_device_capability",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "get_sync_debug_mode",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "is_initialized",
    "list_gpu_processes",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "random",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
]


def __getattr__(name: str):
    # torch.cuda.default_generators, made on first access: building it counts
    # devices, which selects the runtime provider (not done at import).
    if name == "default_generators":
        from .random import _default_generators

        return _default_generators()
    # torch.cuda._initialized is a flag that torch.utils.checkpoint (and other
    # code) reads to decide whether to save and restore the device's RNG
    # state; here it is read live from the runtime, never stale.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
