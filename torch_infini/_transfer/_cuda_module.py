"""``torch.cuda`` answering as ``torch.infini`` under the switch.

The module objects stay (code that imported ``torch.cuda`` or
``from torch.cuda import amp`` before the switch sees the change too); their
public names are replaced, one rule for all of ``torch.cuda``, ``.memory``,
``.random``, ``.streams``, ``.graphs``, ``.amp`` and ``.nvtx``:

1. a name ``torch.infini`` has is ``torch.infini``'s (``is_available``,
   ``set_device``, ``Stream``, ``memory_allocated``, ``manual_seed`` ...);
   their device arguments accept ``"cuda:N"`` and CUDA ``torch.device``s
   (``torch.infini``'s device parsing asks the switch);
2. CUDA's other names for the same thing (:data:`RENAMED`): ``CUDAGraph`` is
   ``InfiniGraph``, ``memory_cached`` is ``memory_reserved`` ...;
3. answers that hold on infini (:data:`ANSWERS`): ``is_tf32_supported()`` is
   False; ``torch.cuda.amp``'s ``autocast``/``GradScaler``/``custom_fwd``/
   ``custom_bwd`` are infini's; ``torch.cuda.nvtx`` ranges are profiler ranges;
4. everything else in ``torch.cuda.__all__`` (and its submodules) refuses when
   used, naming the CUDA API and what to use instead (:data:`REFUSED`).
   Exception classes and constants stay CUDA's (``except
   torch.cuda.OutOfMemoryError`` keeps working; it is ``torch.OutOfMemoryError``).

Two private names matter too: ``default_generators`` (infini's, made on first
access) and ``_lazy_init``, which PyTorch's C++ calls when a CUDA device
reaches an API the switch does not map: it raises, naming the Python line
that passed the device.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
import types
from typing import Any, Callable

import torch

from ._map import TARGET, remove, replace

#: CUDA names of things torch.infini has under another name.
RENAMED = {
    "CUDAGraph": "InfiniGraph",
    "memory_cached": "memory_reserved",
    "max_memory_cached": "max_memory_reserved",
    "reset_max_memory_cached": "reset_peak_memory_stats",
}

#: Kept as CUDA's: exception classes (``except`` clauses must keep working),
#: constants and the names of submodules whose contents are mapped one by one.
KEPT = {"default_generators", "CudaError", "DeferredCudaCallError", "OutOfMemoryError", "AcceleratorError",
        "has_half", "has_magma", "amp", "random", "memory", "streams", "graphs", "nvtx"}

_USE_ALLOCATOR = "the infini caching allocator is configured with TORCH_INFINI_ALLOC_CONF; see docs/usage.md"
_TELEMETRY = "infini reports no such driver telemetry; torch.infini.mem_get_info() and memory_stats() report memory"
_LEGACY = ("legacy typed tensors and storages are not mapped; use torch.empty(..., dtype=..., device='cuda') "
           "(or device='infini')")
_PLANNED = "torch.infini does not have it yet (tests/conformance/api_profile.json lists it as planned)"

#: What to use instead, for the names that refuse (by prefix of the name where noted).
REFUSED: dict[str, str] = {
    "CUDAPluggableAllocator": _USE_ALLOCATOR, "change_current_allocator": _USE_ALLOCATOR,
    "get_allocator_backend": _PLANNED, "caching_allocator_alloc": _PLANNED, "caching_allocator_delete": _PLANNED,
    "caching_allocator_enable": _USE_ALLOCATOR, "caching_allocator_disabled": _USE_ALLOCATOR,
    "get_per_process_memory_fraction": _PLANNED, "MemPool": _PLANNED,
    "use_mem_pool": _PLANNED, "host_memory_stats": _PLANNED, "host_memory_stats_as_nested_dict": _PLANNED,
    "reset_accumulated_host_memory_stats": _PLANNED, "reset_peak_host_memory_stats": _PLANNED,
    "can_device_access_peer": "copies between infini devices go through the host; there is no peer access to query",
    "ExternalStream": "an infini stream cannot wrap a cudaStream_t; use torch.cuda.Stream() (an infini stream)",
    "get_stream_from_external": "an infini stream cannot wrap a cudaStream_t; use torch.cuda.Stream()",
    "cudart": "there is no CUDA runtime under infini", "check_error": "there is no CUDA runtime under infini",
    "cudaStatus": "there is no CUDA runtime under infini",
    "current_blas_handle": "infini has no cuBLAS handle", "current_solver_handle": "infini has no cuSOLVER handle",
    "clock_rate": _TELEMETRY, "power_draw": _TELEMETRY, "temperature": _TELEMETRY, "utilization": _TELEMETRY,
    "memory_usage": _TELEMETRY, "device_memory_used": _TELEMETRY,
    "ipc_collect": "infini has no interprocess memory", "get_gencode_flags": "infini runs no nvcc code",
    "GreenContext": "infini has no SM partitioning", "green_contexts": "infini has no SM partitioning",
    "jiterator": "infini cannot JIT-compile CUDA source; write the function with torch operators "
                 "(torch.compile fuses them)",
    "nccl": "use torch.distributed, whose 'nccl' backend is infini's under the switch",
    "comm": "use torch.distributed collectives (init_process_group('nccl') is infini's backend under the switch)",
    "profiler": "use torch.profiler (ProfilerActivity.PrivateUse1 records infini's device time)",
    "tunable": "infini has no TunableOp GEMM tuning", "gds": "infini has no GPUDirect Storage",
    "sparse": _LEGACY, "set_sync_debug_mode": _PLANNED, "get_sync_debug_mode": _PLANNED,
    "_lazy_init": "",  # its own message (see _unmapped_cuda_device)
}
_LEGACY_PREFIXES = ("Storage", "Tensor")


class UnmappedCudaError(NotImplementedError, AttributeError):
    """A CUDA API the switch cannot map onto infini. An ``AttributeError`` too,
    so that probing code (``hasattr``, ``getattr(..., default)``) sees the
    name as absent, and a ``NotImplementedError`` for everything else."""


def _refusal_message(api: str, instead: str) -> str:
    return (f"{api} is not mapped onto infini by torch_infini's CUDA-to-infini switch: {instead}. "
            "See docs/transfer-cuda.md for what the switch maps.")


def _instead(name: str) -> str:
    if name in REFUSED:
        return REFUSED[name]
    if name.endswith(_LEGACY_PREFIXES):
        return _LEGACY
    return "torch.infini has no counterpart"


def _refusing_function(api: str, instead: str) -> Callable:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise UnmappedCudaError(_refusal_message(api, instead))

    refused.__name__ = api.rsplit(".", 1)[-1]
    refused.__qualname__ = refused.__name__
    refused.__doc__ = f"Refused under the CUDA-to-infini switch: {instead}."
    return refused


def _refusing_class(api: str, instead: str) -> type:
    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        raise UnmappedCudaError(_refusal_message(api, instead))

    name = api.rsplit(".", 1)[-1]
    return type(name, (), {"__new__": __new__, "__doc__": f"Refused under the CUDA-to-infini switch: {instead}.",
                           "__module__": api.rsplit(".", 1)[0]})


class _RefusingModule(types.ModuleType):
    """Stands in for a CUDA-only submodule: every attribute refuses."""

    def __init__(self, api: str, instead: str) -> None:
        super().__init__(api, f"Refused under the CUDA-to-infini switch: {instead}.")
        self.__dict__["_api"], self.__dict__["_instead"] = api, instead

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnmappedCudaError(_refusal_message(f"{self._api}.{name}", self._instead))


def refusal(api: str, original: Any, instead: str) -> Any:
    """What replaces ``original`` (the CUDA API ``api``) when it cannot be mapped."""
    if isinstance(original, types.ModuleType):
        return _RefusingModule(api, instead)
    if isinstance(original, type):
        return _refusing_class(api, instead)
    return _refusing_function(api, instead)


def _unmapped_cuda_device() -> None:
    """``torch.cuda._lazy_init`` under the switch. PyTorch's C++ calls it
    when a CUDA device reaches it, which means the device came through an
    API the switch does not map (every mapped one hands infini on)."""
    caller = "an unknown caller"
    inside = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.dirname(__file__)) + os.sep)
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not frame.filename.startswith(inside):
            caller = f"{frame.filename}:{frame.lineno} ({frame.line})"
            break
    raise UnmappedCudaError(
        f"A CUDA device reached PyTorch through an API that torch_infini's CUDA-to-infini switch does not map, "
        f"called from {caller}. Pass device='infini' (or an infini tensor's .device) there instead, and see "
        "docs/transfer-cuda.md for what the switch maps.")


# torch.cuda.nvtx: ranges become torch.profiler ranges (record_function), so
# the annotations of a CUDA program show in infini's profiler traces.
_nvtx_stack = threading.local()


def _nvtx_push(msg: str) -> int:
    stack = _nvtx_stack.__dict__.setdefault("ranges", [])
    stack.append(torch.ops.profiler._record_function_enter_new(msg, None))
    return len(stack) - 1


def _nvtx_pop() -> int:
    stack = _nvtx_stack.__dict__.setdefault("ranges", [])
    if not stack:
        return -1
    torch.ops.profiler._record_function_exit._RecordFunction(stack.pop())
    return len(stack)


_nvtx_started: dict[int, Any] = {}


def _nvtx_start(msg: str) -> int:
    handle = torch.ops.profiler._record_function_enter_new(msg, None)
    _nvtx_started[id(handle)] = handle
    return id(handle)


def _nvtx_end(range_id: int) -> None:
    handle = _nvtx_started.pop(range_id, None)
    if handle is not None:
        torch.ops.profiler._record_function_exit._RecordFunction(handle)


def _nvtx_mark(msg: str) -> None:
    torch.ops.profiler._record_function_exit._RecordFunction(torch.ops.profiler._record_function_enter_new(msg, None))


@contextlib.contextmanager
def _nvtx_range(msg: str, *args: Any, **kwargs: Any) -> Any:
    with torch.profiler.record_function(msg.format(*args, **kwargs)):
        yield


NVTX = {"range_push": _nvtx_push, "range_pop": _nvtx_pop, "range_start": _nvtx_start, "range_end": _nvtx_end,
        "mark": _nvtx_mark, "range": _nvtx_range}


def _is_tf32_supported() -> bool:
    """False: infini computes float32 matmuls in float32 (no TensorFloat-32)."""
    return False


def answers() -> dict[str, tuple[Any, str]]:
    """``{name: (replacement, what it is)}`` for rule 3, by submodule-qualified name."""
    amp = torch.infini.amp
    table: dict[str, tuple[Any, str]] = {
        "torch.cuda.is_tf32_supported": (_is_tf32_supported, "False: no TensorFloat-32 on infini"),
        "torch.cuda.amp.autocast": (amp.autocast, "torch.infini.amp.autocast"),
        "torch.cuda.amp.GradScaler": (amp.GradScaler, "torch.infini.amp.GradScaler"),
        "torch.cuda.amp.custom_fwd": (amp.custom_fwd, "torch.infini.amp.custom_fwd"),
        "torch.cuda.amp.custom_bwd": (amp.custom_bwd, "torch.infini.amp.custom_bwd"),
    }
    for name, fn in NVTX.items():
        table[f"torch.cuda.nvtx.{name}"] = (fn, "a torch.profiler range (record_function)")
    return table


#: PyTorch's compiler stack asks torch.cuda about the real GPU (Triton, cache
#: keys, CUDA-graph trees) and compiles infini code through infini's own
#: device interface: it keeps seeing PyTorch's torch.cuda, which in a build
#: without CUDA says there is none, as with the switch off.
COMPILER_PACKAGES = ("torch._inductor", "torch._dynamo", "torch._functorch", "torch.utils._triton")


def _compiler_keeps_cuda(new: Any, original: Any) -> Any:
    """``new`` for every caller but PyTorch's compiler stack, which keeps
    ``original`` (functions only: classes and modules are the same for all)."""
    if not callable(new) or isinstance(new, (type, types.ModuleType)) or isinstance(original, type) \
            or not callable(original):
        return new

    def answer(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith(COMPILER_PACKAGES):
            return original(*args, **kwargs)
        return new(*args, **kwargs)

    for attribute in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(answer, attribute, getattr(new, attribute))
        except (AttributeError, TypeError):
            pass
    answer.__wrapped__ = new  # type: ignore[attr-defined]
    return answer


def _public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
                 and getattr(v, "__module__", "") == module.__name__]
    return sorted(set(names))


def install() -> None:
    """Replace every public name of ``torch.cuda`` and its mapped submodules."""
    import torch.cuda.amp  # noqa: F401  (its submodules, loaded so their names are replaced too)
    import torch.cuda.nvtx  # noqa: F401

    infini = torch.infini
    table = answers()
    modules = {"torch.cuda": torch.cuda, "torch.cuda.memory": torch.cuda.memory,
               "torch.cuda.random": torch.cuda.random, "torch.cuda.streams": torch.cuda.streams,
               "torch.cuda.graphs": torch.cuda.graphs, "torch.cuda.amp": torch.cuda.amp,
               "torch.cuda.amp.autocast_mode": sys.modules["torch.cuda.amp.autocast_mode"],
               "torch.cuda.amp.grad_scaler": sys.modules["torch.cuda.amp.grad_scaler"],
               "torch.cuda.nvtx": torch.cuda.nvtx}
    area = "torch.cuda"
    for prefix, module in modules.items():
        for name in _public_names(module):
            if name in KEPT or not hasattr(module, name):
                continue
            label = f"{prefix}.{name}"
            short = f"torch.cuda.amp.{name}" if prefix.startswith("torch.cuda.amp") else label
            if short in table:
                new, what = table[short]
            elif name in RENAMED:
                new, what = getattr(infini, RENAMED[name]), f"torch.infini.{RENAMED[name]}"
            elif hasattr(infini, name) and name not in REFUSED:
                new, what = getattr(infini, name), f"torch.infini.{name}"
            else:
                new, what = refusal(label, getattr(module, name), _instead(name)), "refuses: " + _instead(name)
            replace(module, name, _compiler_keeps_cuda(new, getattr(module, name)), label, what, area)
    replace(torch.cuda, "_lazy_init", _unmapped_cuda_device, "torch.cuda._lazy_init",
            "raises, naming the caller, when a CUDA device reaches an unmapped API", area)
    # nn.DataParallel scatters and gathers through CUDA's own kernels
    # (torch._C._scatter, even on one device): refused when made.
    parallel = torch.nn.DataParallel

    def data_parallel_init(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnmappedCudaError(_refusal_message(
            "torch.nn.DataParallel", "it scatters and gathers with CUDA's kernels; use "
            "torch.nn.parallel.DistributedDataParallel (torchrun, init_process_group('nccl')), or the module "
            "itself on one device"))

    replace(parallel, "__init__", data_parallel_init, "torch.nn.DataParallel", "refuses: use DDP", area)
    replace(torch.cuda, "_is_in_bad_fork", infini._is_in_bad_fork, "torch.cuda._is_in_bad_fork",
            "torch.infini._is_in_bad_fork", area)
    # The memory timeline's private names, which users call as documented
    # (torch.cuda.memory._record_memory_history, then _dump_snapshot).
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot"):
        replace(torch.cuda.memory, name, getattr(infini.memory, name), f"torch.cuda.memory.{name}",
                f"torch.infini.memory.{name}", area)
    # default_generators: infini's, built on first access (building it counts
    # devices, which selects the runtime provider: not done at import).
    remove(torch.cuda, "default_generators")
    previous = vars(torch.cuda).get("__getattr__")

    def __getattr__(name: str) -> Any:
        if name == "default_generators":
            return infini.default_generators
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module 'torch.cuda' has no attribute {name!r}")

    replace(torch.cuda, "__getattr__", __getattr__, "torch.cuda.default_generators",
            "torch.infini.default_generators", area)
