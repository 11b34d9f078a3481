"""torch.compile for infini: a Dynamo device interface and an Inductor backend.

Both register when PyTorch loads the modules they plug into (the device
interface with ``torch._dynamo.device_interface``; the Inductor backend with
Inductor's own backends, first needed at the first compile), so
``import torch_infini`` does not pay for importing the compiler.

Inductor generates C++ kernels (its CPU code generator) where the provider's
device memory is addressable from the host: the built-in host runtime (and
InfiniRT's CPU backend, once its provider reports ``host_addressable``). The
generated wrapper keeps the current stream's order, in one of two ways:

- Where the provider queues host functions on its streams (the host
  runtime), each C++ kernel is queued on the current stream, as a CUDA
  graph's kernels are launched: the graph runs asynchronously, in stream
  order with the eager work around it, and extern kernels (matmuls,
  convolutions, fallbacks) are infini operators, queued like any other.
- Elsewhere, C++ kernels run on the calling thread over device memory, after
  a wait for the current stream whenever something may have been queued
  since the last wait (the graph's start, a queued extern kernel).

On providers whose memory the host cannot address there is no code
generator: ``torch.compile`` with the default backend raises, naming
``backend="aot_eager"``, which works everywhere. See docs/compile.md.

AOTInductor (``torch._inductor.aoti_compile_and_package``) and the
``cpp_wrapper`` option take a C++ wrapper: torch_infini/_aoti.py.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import sys
from typing import Any, Callable

import torch

_DYNAMO_MODULE = "torch._dynamo.device_interface"
_INDUCTOR_MODULE = "torch._inductor.codegen.common"
_AOT_COMPILE_MODULE = "torch._inductor.compile_fx"


def host_addressable() -> bool:
    """Whether generated CPU code can read and write infini memory directly."""
    from . import _C

    info = _C._provider_info()
    caps = info["capabilities"]
    if "host_addressable" in caps:
        return bool(caps["host_addressable"])
    return info["provider"] == "host" or info["backend"] == "cpu"


def queues_host_kernels() -> bool:
    """Whether generated C++ kernels are queued on the current stream (the
    provider queues host functions) rather than run on the calling thread."""
    from . import _C

    return bool(_C._provider_info()["capabilities"].get("host_funcs", False)) and host_addressable()


def _provider_name() -> str:
    from . import _C

    return str(_C._provider_info()["provider"])


def _properties(device: torch.types.Device = None) -> Any:
    """torch.infini.get_device_properties, with the fields Inductor reads of
    every device (multi_processor_count: the cores the generated C++ kernels
    spread over)."""
    import os
    import types

    props = torch.infini.get_device_properties(device)
    fields = {name: getattr(props, name) for name in dir(props) if not name.startswith("_")}
    fields.setdefault("multi_processor_count", os.cpu_count() or 1)
    fields.setdefault("major", 0)
    fields.setdefault("minor", 0)
    return types.SimpleNamespace(**fields)


def _register_dynamo() -> None:
    from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

    class InfiniInterface(DeviceInterface):
        """torch.infini as Dynamo sees a device (streams, events, properties)."""

        Event = torch.infini.Event
        Stream = torch.infini.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                torch.infini.set_device(device)

            @staticmethod
            def current_device() -> int:
                return torch.infini.current_device()

            get_device_properties = staticmethod(_properties)

        current_device = staticmethod(torch.infini.current_device)
        set_device = staticmethod(torch.infini.set_device)
        device_count = staticmethod(torch.infini.device_count)
        is_available = staticmethod(torch.infini.is_available)
        stream = staticmethod(torch.infini.stream)
        current_stream = staticmethod(torch.infini.current_stream)
        set_stream = staticmethod(torch.infini.set_stream)
        synchronize = staticmethod(torch.infini.synchronize)
        get_device_properties = staticmethod(_properties)
        memory_allocated = staticmethod(torch.infini.memory_allocated)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            previous = torch.infini.current_device()
            if device >= 0 and device != previous:
                torch.infini.set_device(device)
            return previous

        exchange_device = maybe_exchange_device

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            torch.infini.set_stream(torch.infini.Stream(stream_id=stream_id, device_index=device_index,
                                                        device_type=device_type))

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return torch.infini.current_stream(device_idx).stream_id

        @staticmethod
        def get_compute_capability(device: torch.types.Device = None) -> str:
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def is_triton_capable(device: torch.types.Device = None) -> bool:
            return False

        @staticmethod
        def raise_if_triton_unavailable(device: torch.types.Device = None) -> None:
            raise RuntimeError("infini has no Triton backend")

    register_interface_for_device("infini", InfiniInterface)


def _register_inductor() -> None:
    global _QUEUED_KERNELS
    from torch._inductor.codegen.common import (
        DeviceOpOverrides,
        register_backend_for_device,
        register_device_op_overrides,
    )
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    class InfiniOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(index): return torch.infini.current_stream(index).stream_id"

        def set_device(self, device_idx: int) -> str:
            return f"torch.infini.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.infini.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.infini.device({device_idx})"

        def cpp_kernel_type(self) -> str:
            return "void*"  # the C++ wrapper's kernels are the CPU's

    class InfiniWrapperCodegen(PythonWrapperCodegen):
        """Python wrapper whose generated C++ kernels run after the stream's work."""

        @staticmethod
        def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any,
                   partition_signatures: Any = None) -> "InfiniWrapperCodegen":
            if is_subgraph:
                from torch._inductor.codegen.wrapper import SubgraphPythonWrapperCodegen

                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return InfiniWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline("from torch_infini._C import _empty_strided as empty_strided_infini")
            # current_stream().synchronize() without making a Stream object (2 us).
            self.imports.writeline("from torch_infini._C import _synchronize_current_stream")
            if _QUEUED_KERNELS:
                self.imports.writeline("from torch_infini._C import _launch_host_kernel as launch_host_kernel")
            if _protected_memory():
                self.imports.writeline(
                    "from torch_infini._C import _begin_device_memory_access, _end_device_memory_access")

        def make_allocation(self, name: str, device: torch.device, dtype: torch.dtype, shape: Any,
                            stride: Any, allocation_shape: Any = None, is_pinned: bool = False) -> str:
            from torch._inductor import config

            if device.type != "infini" or config.test_configs.track_memory_lifecycle:
                return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
            # Inductor's empty_strided_cpu/_cuda path, for infini (Inductor
            # writes torch.empty_strided for other devices, ~1 us a buffer
            # more); -1 is the current device, as device='infini' would be.
            shape_tuple = self.codegen_python_shape_tuple(shape)
            allocation = self.codegen_python_shape_tuple(shape if allocation_shape is None else allocation_shape)
            stride_tuple = self.codegen_python_shape_tuple(stride)
            index = -1 if device.index is None else device.index
            out = f"{name} = empty_strided_infini({allocation}, {stride_tuple}, {dtype}, {index})"
            if shape_tuple != allocation:
                out += f".as_strided({shape_tuple}, {stride_tuple})"
            return out

        def run_wrapper_ir_passes(self, is_inference: bool) -> None:
            super().run_wrapper_ir_passes(is_inference)
            self.lines = _order_host_kernels(self.lines, _python_wrapper_order())

        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                         triton: bool = True, **kwargs: Any) -> Any:
            from torch._inductor.virtualized import V

            device = device or V.graph.get_current_device_or_throw()  # as Inductor resolves it
            if _queued(device, kwargs.get("arg_types")):
                # Queued on the current stream, in order with the work around it.
                self.writeline(f"launch_host_kernel({kernel_name}, {kernel_name!r}, {', '.join(call_args)})")
                return None
            # The C++ kernel is called on the calling thread, like the CPU's
            # (after a wait for the stream, see _order_host_kernels).
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=torch.device("cpu"),
                                                        triton=False, **kwargs)

    if host_addressable():
        from torch._inductor import scheduler
        from torch._inductor.codegen.cpp import CppScheduling

        # The scheduler takes a node off the CPU for a GPU-like one (SIMD
        # loop groups) unless it is on "cpu"; infini's generated code is the
        # CPU's, so its nodes are scheduled as the CPU's are.
        def is_cpu(node: Any) -> bool:
            device = node.get_device()
            return device is not None and device.type in ("cpu", "infini")

        scheduler.BaseSchedulerNode.is_cpu = is_cpu  # type: ignore[method-assign]
        _use_cpu_realize_heuristics_for_infini()
        _use_cpp_backend_for_infini()
        _keep_convolution_layouts_on_infini()
        _QUEUED_KERNELS = queues_host_kernels()
        scheduling: Callable[..., Any] = CppScheduling
    else:
        from . import _C

        info = _C._provider_info()

        def scheduling(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(
                f"torch.compile's default backend (Inductor) has no code generator for infini on "
                f"{info['provider']}/{info['backend']}, whose device memory the host cannot address; "
                f"use torch.compile(model, backend='aot_eager'), which runs the captured graph's "
                f"operators on infini, or the built-in host runtime (TORCH_INFINI_PROVIDER=host)")

    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files
    from torch._inductor.virtualized import V

    from . import _aoti

    # AOTInductor's C++ wrapper (torch_infini/_aoti.py); where there is no
    # code generator there is none, and AOTInductor's compile entry refuses.
    cpp_wrapper_codegen = _aoti.install() if host_addressable() else None

    class CacheKey(CustomGraphModulePass):
        """Changes nothing in a torch.compile graph (an AOTInductor graph's
        constants move to the host, see _aoti.keep_constants_on_host); its
        uuid puts this file and _aoti.py (the code generation), the provider,
        whether kernels are queued and whether device memory is protected in
        Inductor's cache key, so a cached graph compiled by another version,
        for another provider or the other way is not reused."""

        def __call__(self, gm: torch.fx.GraphModule) -> None:
            if V.aot_compilation:
                _aoti.keep_constants_on_host(gm)

        def uuid(self) -> Any:
            return (get_hash_for_files((__file__, _aoti.__file__)), _provider_name(), _QUEUED_KERNELS,
                    _protected_memory())

    register_backend_for_device("infini", scheduling, InfiniWrapperCodegen, cpp_wrapper_codegen,
                                device_custom_pass=CacheKey())
    register_device_op_overrides("infini", InfiniOpOverrides())


#: The wrapper's line classes that queue nothing, by name (each PyTorch release has some of them).
_HOST_ONLY_LINES = ("MemoryPlanningLine", "FreeLine", "CommentLine", "KernelDefinitionLine",
                    "AssertSizeStrideLine", "GroupedAssertSizeStrideLine", "AssertAlignmentLine")
#: The wrapper's text lines that queue nothing: comments, frees, and the size and
#: alignment asserts (text before PyTorch 2.12).
_HOST_ONLY_TEXT = ("#", "del ", "assert_size_stride(", "assert_alignment(")


@dataclasses.dataclass(frozen=True)
class HostKernelOrder:
    """How a wrapper keeps its generated C++ kernels in stream order: its
    wait for the current stream, the lines around a kernel where the host
    runtime protects its device memory (TORCH_INFINI_PROTECT_DEVICE_MEMORY=1:
    the kernel is the runtime's own work, and may touch it), whether its
    kernels may be queued (then they need no wait), and the text lines that
    queue nothing (comments, declarations)."""

    sync: str
    access: tuple[str, str]
    queued: bool
    host_only_prefixes: tuple[str, ...]


def _python_wrapper_order() -> HostKernelOrder:
    """The Python wrapper's: torch_infini._C calls (see write_header)."""
    return HostKernelOrder(sync="_synchronize_current_stream(-1)",
                           access=("_begin_device_memory_access()", "_end_device_memory_access()"),
                           queued=_QUEUED_KERNELS, host_only_prefixes=_HOST_ONLY_TEXT)


def _protected_memory() -> bool:
    """Whether device memory is reachable only inside the runtime's work."""
    from . import _C

    return bool(_C._provider_info()["capabilities"].get("protected_memory", False))


# Whether generated C++ kernels are queued (queues_host_kernels()). Set in
# _register_inductor.
_QUEUED_KERNELS = False
# The types a queued kernel's arguments may have: pointers and Inductor's
# index type, which the launcher passes as machine words (at most
# _C._launch_host_kernel_max_args of them).
_WORD_ARG_TYPES = ("int64_t", "const int64_t")


def _queued(device: Any, arg_types: Any, queued_kernels: bool | None = None) -> bool:
    """Whether a C++ kernel of ``device`` with these argument types is queued
    (a graph's CPU kernels, over CPU tensors such as an optimizer's step
    counts, run on the calling thread, as on the CPU). ``queued_kernels``:
    whether the wrapper queues kernels at all (default: the Python wrapper's
    answer, ``_QUEUED_KERNELS``)."""
    if queued_kernels is None:
        queued_kernels = _QUEUED_KERNELS
    if not queued_kernels or device is None or torch.device(device).type != "infini":
        return False
    from . import _C

    most = _C._launch_host_kernel_max_args  # 0 where the ABI is not known
    if arg_types is None or not most or len(arg_types) > most:
        return False
    return all(str(t).strip().endswith("*") or str(t).strip() in _WORD_ARG_TYPES for t in arg_types)


def _runs_on_host(line: Any, queued_kernels: bool) -> bool:
    """Whether a wrapper line runs a C++ kernel over device memory on the
    calling thread (an infini kernel that is not queued; a graph's CPU
    kernels touch only CPU tensors)."""
    from torch._inductor.codegen import wrapper

    if not isinstance(line, wrapper.KernelCallLine) or line.triton:
        return False
    # Read defensively (the line's fields vary across PyTorch releases): a
    # kernel whose device is unknown is taken for an infini one and waits.
    device = getattr(line, "device", None)
    if device is not None and torch.device(device).type != "infini":
        return False
    return not _queued(device, getattr(line, "arg_types", None), queued_kernels)


def _order_host_kernels(lines: list[Any], order: HostKernelOrder) -> list[Any]:
    """The wrapper's lines with a wait for the current stream before each
    generated C++ kernel that could race queued work.

    A C++ kernel runs on the calling thread over device memory, so it must
    start after every operator queued before it: the graph's inputs may come
    from queued work, extern kernels (``mm``, fallbacks) are queued, and a
    buffer freed after a queued read can be handed out again at once (the
    caching allocator orders reuse by stream). A kernel waits only if
    something may have been queued since the last wait: consecutive C++
    kernels, and those separated only by allocations, frees, reuses, size
    asserts and comments, share one wait. Any other line counts as queued
    work. Nothing is needed after the last kernel: it has finished when its
    call returns, and extern kernels after it are in stream order."""
    from torch._inductor.codegen import wrapper
    from torch._inductor.utils import LineContext

    # Lines that queue nothing (LineContext only maps generated lines to their origin),
    # those this PyTorch has: AssertSizeStrideLine came with 2.12 (2.11 writes the
    # asserts as strings), GroupedAssertSizeStrideLine with 2.14, AssertAlignmentLine with 2.15.
    host_only = tuple(getattr(wrapper, name) for name in _HOST_ONLY_LINES if hasattr(wrapper, name)) + (LineContext,)
    ordered: list[Any] = []
    pending = True  # the graph's inputs may still be being written by queued work
    protected = _protected_memory()
    for line in lines:
        if _runs_on_host(line, order.queued):
            if pending:
                ordered.append(order.sync)
                pending = False
            if protected:
                ordered.extend((order.access[0], line, order.access[1]))
                continue
        elif isinstance(line, host_only):
            pass
        elif isinstance(line, str) and (not line.strip() or line.lstrip().startswith(order.host_only_prefixes)):
            pass
        else:
            pending = True
        ordered.append(line)
    return ordered


def _use_cpu_realize_heuristics_for_infini() -> None:
    """Makes Inductor's IR take the CPU's realize heuristics for infini.

    ``torch._inductor.ir.is_cpu`` decides, for the C++ code generator's
    sake, when a reused intermediate is stored rather than recomputed (a
    softmax's ``exp``, computed once and stored by the CPU's kernel, was
    computed twice by infini's) and how many reads or ops a fused pointwise
    node may take before it is stored. infini's kernels are the C++ code
    generator's, so infini nodes answer as the CPU's do. The function is
    used only inside ``ir.py`` and looked up there at each call."""
    import torch._inductor.ir as ir

    builtin = ir.is_cpu

    def is_cpu(x: Any) -> bool:
        return builtin(x) or ir.get_device_type(x) == "infini"

    ir.is_cpu = is_cpu  # type: ignore[assignment]


def _use_cpp_backend_for_infini() -> None:
    """Makes Inductor's codegen ask the C++ backend's questions for infini.

    Inductor's ``get_current_backend`` answers ``config.cuda_backend``
    ("triton") for any device type it does not know; the C++ code generator
    reads that answer for masked loads (their dtype comes from Triton's value
    otherwise, an ``AttributeError`` on a C++ string), low-precision upcasts
    and dtype asserts. infini's kernels are the C++ code generator's, so the
    answer for infini is "cpp"; other devices get Inductor's own answer. The
    function is bound by name in the modules that import it, so each binding
    is replaced."""
    import torch._inductor.codegen.common as common
    import torch._inductor.kernel.mm_common as mm_common
    import torch._inductor.scheduler as scheduler
    import torch._inductor.utils as inductor_utils
    from torch._inductor.virtualized import V

    builtin = inductor_utils.get_current_backend

    def get_current_backend(device_type: str | None = None) -> str:
        if not device_type:
            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == "infini" else builtin(device_type)

    for module in (inductor_utils, common, scheduler, mm_common):
        if getattr(module, "get_current_backend", None) is builtin:
            module.get_current_backend = get_current_backend  # type: ignore[attr-defined]


def _keep_convolution_layouts_on_infini() -> None:
    """Turns off Inductor's layout optimization for graphs with infini
    convolutions.

    For a device outside its CPU/XPU list Inductor applies its GPU heuristic
    and may hand convolutions channels-last inputs. The fake-tensor rule then
    predicts a contiguous output (PyTorch's convolution backend for a
    PrivateUse1 device is "Overrideable", whose memory format is contiguous)
    while infini's convolution, the CPU kernel, returns a channels-last one:
    the compiled graph's stride assert fails. Without the optimization, the
    graph keeps the layouts its inputs have."""
    from torch._inductor.graph import GraphLowering

    builtin = GraphLowering.decide_layout_opt

    def decide_layout_opt(gm: torch.fx.GraphModule, *, is_inference: bool) -> bool:
        for node in gm.graph.nodes:
            if node.target is torch.ops.aten.convolution.default:
                value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
                if isinstance(value, torch.Tensor) and value.device.type == "infini":
                    return False
        return builtin(gm, is_inference=is_inference)

    GraphLowering.decide_layout_opt = staticmethod(decide_layout_opt)  # type: ignore[method-assign]


def _hook_inductor() -> None:
    """Registers the backend when Inductor registers its own (at its first
    compile): at import time of its registry the rest of Inductor is not
    importable yet."""
    import torch._inductor.codegen.common as common

    builtin = common.init_backend_registration
    done = []

    def init_backend_registration() -> None:
        builtin()
        if not done:
            done.append(True)
            _register_inductor()

    common.init_backend_registration = init_backend_registration


def _hook_aot_compile() -> None:
    """AOTInductor's compile entry, wrapped before its first call (the
    backend registers inside it, too late for its options)."""
    from . import _aoti

    _aoti.hook_compile_fx_aot()


_REGISTER = {_DYNAMO_MODULE: _register_dynamo, _INDUCTOR_MODULE: _hook_inductor,
             _AOT_COMPILE_MODULE: _hook_aot_compile}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a registration right after PyTorch executes the module it plugs into."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _REGISTER:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                loader = spec.loader
                exec_module = loader.exec_module

                def exec_then_register(module: Any, _exec: Any = exec_module, _name: str = fullname) -> None:
                    _exec(module)
                    _REGISTER[_name]()

                loader.exec_module = exec_then_register  # type: ignore[method-assign]
                return spec
        return None


def install() -> None:
    """Registers now what is imported already, and the rest when it is."""
    pending = False
    for name, register in _REGISTER.items():
        if name not in sys.modules:
            pending = True
        elif name == _INDUCTOR_MODULE:
            _register_inductor()  # Inductor is loaded: its registry can be used now
        else:
            register()
    if pending:
        sys.meta_path.insert(0, _AfterImport())
