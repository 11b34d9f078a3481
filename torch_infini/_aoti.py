"""AOTInductor for infini: ``torch._inductor.aoti_compile_and_package`` and
``aoti_load_package`` for programs exported on infini tensors.

AOTInductor writes the whole program as C++ (a model class whose ``run_impl``
calls the generated kernels and the extern operators) and links it into a
shared library that runs without Python, through PyTorch's C shim
(torch/csrc/inductor/aoti_torch/c/shim.h). For infini, on providers whose
device memory the host can address (the built-in host runtime):

- The kernels are Inductor's C++ kernels (CppScheduling, as for
  ``torch.compile``); the C++ wrapper is ``InfiniCppWrapperCodegen``, a
  subclass of Inductor's CPU one. Buffers are infini tensors
  (``aoti_torch_empty_strided`` with PrivateUse1's device type).
- Stream order: a generated kernel runs on the calling thread over device
  memory, so before one runs the wrapper waits for the current stream when
  something may have been queued since the last wait, the rule of the
  Python wrapper (``_compile._order_host_kernels``). The wait is the
  operator ``infini::_synchronize_current_stream``, called through the
  shim's dispatcher entry (``aoti_torch_call_dispatcher``): the model
  library cannot link to torch_infini._C, which Python loads privately.
  Where the host runtime protects its device memory, each kernel runs
  between ``infini::_begin_device_memory_access`` and ``_end_...``.
- Extern operators (matmuls, convolutions, fallbacks) are called through
  the dispatcher, so they are infini's operators, queued on the current
  stream: AOTInductor's proxy executor (the path it takes for operators
  without a C shim) runs them. Inductor would otherwise call
  ``aoti_torch_<device>_<op>`` C shims, which exist only for PyTorch's own
  devices (the CPU's would run CPU kernels over device memory, unordered);
  matmuls and convolutions are lowered as fallbacks for that reason, and
  any other shim call on infini is refused at compile time, naming it.
- Weights: PyTorch's AOT runtime headers know only the cpu, cuda, xpu and
  mps devices (``parse_device_str`` and ``load_constants`` in
  aoti_runtime/model_base.h), so the library keeps the program's constants
  on the host, as a CPU model does, and a constant-folding graph copies them
  to infini when the model is loaded (its first run), and again after
  they are updated: Inductor's runtime constant folding
  (``aot_inductor.use_runtime_constant_folding``), on for infini programs.
- Loading: torch_infini._C registers an AOTInductor model runner for the
  device key "infini" (csrc/core/InfiniAOTIRunner.cpp).

On providers whose memory the host cannot address (the Infini stack's
accelerators) there is no code generator: ``aoti_compile_and_package``
raises, naming the alternatives. See docs/compile.md, "AOTInductor".
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch

from . import _compile

# Operators Inductor lowers to extern kernels that its C++ wrapper calls
# through a device's C shim (aoti_torch_<device>_mm_out, ...); on infini
# they are lowered as fallbacks instead, which reach the dispatcher.
_SHIM_LOWERED_OPS = ("mm", "addmm", "bmm", "baddbmm", "_int_mm", "convolution")

# The generated C++ that keeps the kernels in stream order (see the module
# docstring). Errors of the access bracket's end are not raised: it runs in
# a destructor, and fails only without a begin.
_CPP_HELPERS = r"""
// torch_infini: stream order for the generated kernels (torch_infini/_aoti.py).
namespace {
[[maybe_unused]] AOTITorchError infini_call_operator(const char* name) {
  StableIValue no_arguments[1] = {0};
  return aoti_torch_call_dispatcher(name, "", no_arguments);
}
// Waits for the work queued on the current infini stream.
[[maybe_unused]] void infini_synchronize_current_stream() {
  AOTI_TORCH_ERROR_CODE_CHECK(infini_call_operator("infini::_synchronize_current_stream"));
}
// A generated kernel's access to protected device memory, for its scope.
struct [[maybe_unused]] InfiniDeviceMemoryAccess {
  InfiniDeviceMemoryAccess() {
    AOTI_TORCH_ERROR_CODE_CHECK(infini_call_operator("infini::_begin_device_memory_access"));
  }
  ~InfiniDeviceMemoryAccess() {
    (void)infini_call_operator("infini::_end_device_memory_access");
  }
  InfiniDeviceMemoryAccess(const InfiniDeviceMemoryAccess&) = delete;
  InfiniDeviceMemoryAccess& operator=(const InfiniDeviceMemoryAccess&) = delete;
};
}  // namespace
"""


def _cpp_wrapper_order() -> _compile.HostKernelOrder:
    """The C++ wrapper's: every kernel runs on the calling thread."""
    return _compile.HostKernelOrder(
        sync="infini_synchronize_current_stream();",
        access=("{ const InfiniDeviceMemoryAccess infini_kernel_access;", "}"),
        queued=False,
        host_only_prefixes=("//", "static constexpr ", "AtenTensorHandle ", "RAIIAtenTensorHandle ",
                            "[[maybe_unused]] ", "if (_check_aoti_runtime_check_inputs_env())"))


def refuse_unless_host_addressable() -> None:
    """Raises where generated C++ cannot touch infini memory (the Infini
    stack's accelerators), naming what to use instead."""
    if _compile.host_addressable():
        return
    from . import _C

    info = _C._provider_info()
    raise RuntimeError(
        f"AOTInductor (torch._inductor.aoti_compile_and_package) has no code generator for infini on "
        f"{info['provider']}/{info['backend']}, whose device memory the host cannot address: its "
        f"generated C++ kernels would read device memory from the host. Run the exported program "
        f"with Python instead (ep.module(), or torch.compile(ep.module(), backend='aot_eager')), or "
        f"compile the package on the built-in host runtime (TORCH_INFINI_PROVIDER=host)")


def _on_infini(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "infini"


def _owner(gm: torch.fx.GraphModule, target: str) -> tuple[torch.nn.Module, str]:
    """The module holding a get_attr target, and the attribute's name there."""
    owner, _, leaf = target.rpartition(".")
    return (gm.get_submodule(owner) if owner else gm), leaf


def _touches_infini(model: torch.fx.GraphModule, example_inputs: Any) -> bool:
    """Whether an AOTInductor compile's program reads infini tensors (its
    inputs, parameters, buffers or tensor attributes)."""
    import itertools

    attributes = (getattr(*_owner(model, node.target), None) for node in model.graph.find_nodes(op="get_attr"))
    return any(_on_infini(t) for t in itertools.chain(
        torch.utils._pytree.tree_leaves(example_inputs), model.parameters(), model.buffers(), attributes))


def hook_compile_fx_aot() -> None:
    """Wraps Inductor's AOT entry (``compile_fx_aot``, which
    ``aoti_compile_and_package``, ``torch._inductor.aot_compile`` and
    ``torch._export.aot_compile`` reach) for infini programs: the refusal
    where there is no code generator, and the options infini's packages
    need (runtime constant folding, see the module docstring; no
    precompiled header, which Inductor would look for as
    torch/csrc/inductor/aoti_include/infini.h)."""
    import torch._inductor.compile_fx as compile_fx

    builtin = compile_fx.compile_fx_aot
    if getattr(builtin, "_infini", False):
        return

    @functools.wraps(builtin)
    def compile_fx_aot(model_: torch.fx.GraphModule, example_inputs_: Any, *args: Any, **kwargs: Any) -> Any:
        if _touches_infini(model_, example_inputs_):
            refuse_unless_host_addressable()
            patches = dict(kwargs.get("config_patches") or {})
            if patches.get("aot_inductor.use_runtime_constant_folding") is False:
                raise RuntimeError(
                    "AOTInductor on infini needs aot_inductor.use_runtime_constant_folding: the package "
                    "keeps its weights on the host and folds them onto infini when it is loaded "
                    "(PyTorch's AOT runtime knows no infini device); leave the option unset")
            patches["aot_inductor.use_runtime_constant_folding"] = True
            patches["aot_inductor.precompile_headers"] = False
            kwargs["config_patches"] = patches
        return builtin(model_, example_inputs_, *args, **kwargs)

    compile_fx_aot._infini = True  # type: ignore[attr-defined]
    compile_fx.compile_fx_aot = compile_fx_aot


def _lower_shim_ops_as_fallbacks() -> None:
    """Lowers the operators Inductor's C++ wrapper would call through a
    device C shim as fallbacks, for infini in a C++ wrapper (see
    _SHIM_LOWERED_OPS); other devices and the Python wrapper keep
    Inductor's lowerings."""
    from torch._inductor import ir, lowering
    from torch._inductor.virtualized import V

    for name in _SHIM_LOWERED_OPS:
        op = getattr(torch.ops.aten, name).default
        builtin = lowering.lowerings.get(op)
        if builtin is None or getattr(builtin, "_infini", False):
            continue
        fallback = lowering.fallback_handler(op, add_to_fallback_set=False)

        def lower(*args: Any, _builtin: Callable[..., Any] = builtin, _fallback: Callable[..., Any] = fallback,
                  **kwargs: Any) -> Any:
            if V.graph.cpp_wrapper and any(
                    isinstance(a, ir.IRNode) and (d := a.get_device()) is not None and d.type == "infini"
                    for a in torch.utils._pytree.tree_leaves((args, kwargs))):
                return _fallback(*args, **kwargs)
            return _builtin(*args, **kwargs)

        lower._infini = True  # type: ignore[attr-defined]
        lowering.lowerings[op] = lower


def _writes(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether the call ``user`` writes to its argument ``node`` (an
    in-place or out= operator)."""
    schema = getattr(user.target, "_schema", None)
    if schema is None:
        return False
    for i, argument in enumerate(schema.arguments):
        value = user.args[i] if i < len(user.args) else user.kwargs.get(argument.name)
        if value is node and argument.alias_info is not None and argument.alias_info.is_write:
            return True
    return False


def keep_constants_on_host(gm: torch.fx.GraphModule) -> None:
    """In an AOTInductor graph, replaces each infini constant (a parameter,
    buffer or tensor attribute) by a host copy under the same name, read
    through a copy to infini: the package stores the host copies, and
    runtime constant folding makes the infini ones when it is loaded (see
    the module docstring). A constant the graph writes to is refused."""
    from torch._inductor.utils import get_cloned_parameter_buffer_name
    from torch.utils._python_dispatch import _disable_current_modes

    graph = gm.graph
    changed = False
    for node in list(graph.find_nodes(op="get_attr")):
        module, leaf = _owner(gm, node.target)
        value = getattr(module, leaf, None)
        if not _on_infini(value):
            continue
        for user in node.users:
            if _writes(user, node):
                raise RuntimeError(
                    f"AOTInductor on infini: the program writes to its constant {node.target!r} "
                    f"({user.target}); infini packages keep constants read-only (export the model in "
                    f"eval mode, where buffers such as BatchNorm's running statistics are not updated)")
        with _disable_current_modes():
            host = value.detach().to("cpu")
        if isinstance(value, torch.nn.Parameter):
            host = torch.nn.Parameter(host, requires_grad=False)
        setattr(module, leaf, host)
        # A buffer's value as the package stores it: Inductor keeps a copy
        # taken before tracing (in case the program mutates it).
        original = get_cloned_parameter_buffer_name(node.target)
        if _on_infini(gm.meta.get(original)):
            with _disable_current_modes():
                gm.meta[original] = gm.meta[original].to("cpu")
        fake = node.meta.get("val")
        with graph.inserting_after(node):
            copy = graph.call_function(torch.ops.prims.device_put.default, (node, value.device))
        node.replace_all_uses_with(copy, delete_user_cb=lambda user: user is not copy)
        if fake is not None:
            node.meta["val"] = fake.fake_mode.from_tensor(host, static_shapes=True)
            copy.meta["val"] = fake
        changed = True
    if changed:
        gm.recompile()


def make_cpp_wrapper_codegen() -> type:
    """Inductor's C++ wrapper for infini (a class made once Inductor is
    loaded)."""
    from torch._inductor import ir
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.exc import CppWrapperCodegenError
    from torch._inductor.virtualized import V

    class InfiniCppWrapperCodegen(CppWrapperCpu):
        """CppWrapperCpu for infini tensors: infini buffers, extern operators
        through the dispatcher, and a wait for the stream before a kernel
        that could race queued work."""

        def __init__(self) -> None:
            self.device = "infini"
            super().__init__()
            # The kernels are the CPU code generator's, vectorized as the CPU's.
            self.needs_vec_isa = True

        @staticmethod
        def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any,
                   partition_signatures: Any = None) -> "InfiniCppWrapperCodegen":
            return InfiniCppWrapperCodegen()

        def add_device_include(self, device: str) -> None:
            # infini's kernels and the runtime's headers are the CPU's.
            super().add_device_include("cpu" if device == "infini" else device)

        def write_header(self) -> None:
            super().write_header()
            if not V.graph.is_const_graph:
                self.header.splice(_CPP_HELPERS)

        def codegen_device(self, device: torch.device) -> str:
            if device.type != "infini":
                return super().codegen_device(device)
            self.used_cached_devices.add("privateuse1")
            return f"cached_torch_device_type_privateuse1, {device.index or 0}"

        def codegen_model_constructor(self) -> None:
            # Every stored constant must be a host one (keep_constants_on_host):
            # PyTorch's AOT runtime would refuse an infini one at load.
            for name in V.graph.constants:
                if name not in V.graph.folded_constants and _on_infini(V.graph.get_original_value_of_constant(name)):
                    raise CppWrapperCodegenError(
                        f"AOTInductor on infini: the constant {name} would be stored on infini, which "
                        f"PyTorch's AOT runtime cannot load (torch_infini keeps constants on the host and "
                        f"folds them onto infini at load; this one escaped that)")
            super().codegen_model_constructor()

        @contextlib.contextmanager
        def _built_as_cpu(self) -> Iterator[None]:
            # torch.compile(..., options={"cpp_wrapper": True}): the module
            # is built as the CPU's (its build options and precompiled
            # header, which Inductor would look for as cpp_wrapper/infini.h).
            self.device = "cpu"
            try:
                yield
            finally:
                self.device = "infini"

        def _generate_end_jit(self, result: Any) -> None:
            with self._built_as_cpu():
                super()._generate_end_jit(result)

        def generate_end(self, result: Any) -> None:
            # PyTorch 2.11 and 2.12 write the JIT module's end here (there is
            # no _generate_end_jit yet).
            if V.graph.aot_mode or hasattr(CppWrapperCpu, "_generate_end_jit"):
                return super().generate_end(result)
            with self._built_as_cpu():
                super().generate_end(result)

        def run_wrapper_ir_passes(self, is_inference: bool) -> None:
            super().run_wrapper_ir_passes(is_inference)
            self.lines = _compile._order_host_kernels(self.lines, _cpp_wrapper_order())

        def generate_fallback_kernel(self, node: ir.FallbackKernel) -> None:
            if not _node_on_infini(node) or not isinstance(node.op_overload, torch._ops.OpOverload):
                return super().generate_fallback_kernel(node)
            # The dispatcher (infini's operator), not the device's C shim.
            self.generate_fallback_kernel_with_runtime_lookup(
                node.get_name(), node.python_kernel_name,
                lambda: [*node.codegen_args(), *node.codegen_kwargs()], node.op_overload,
                node.export_extern_kernel_node(), node.outputs if node.outputs else node.mutation_outputs)

        def generate_fallback_kernel_with_runtime_lookup_aot(self, op_overload: Any, raw_args: Any,
                                                             output_args: Any, raw_outputs: Any) -> None:
            # AOTInductor's proxy executor, run by the CPU's model runner
            # (csrc/core/InfiniAOTIRunner.cpp), passes the CPU for every
            # device argument.
            if any(isinstance(v, torch.device) and v.type == "infini" for v in raw_args):
                raise CppWrapperCodegenError(
                    f"AOTInductor on infini: {op_overload} takes an infini device argument, which "
                    f"AOTInductor's proxy executor would replace by the CPU")
            schema = getattr(op_overload, "_schema", None)
            if schema is not None and V.extern_kernel_nodes:
                # Only the arguments the extern node carries: the serializer
                # leaves out keyword arguments at their defaults (addmm's
                # beta and alpha), which the proxy executor then fills in,
                # while Inductor would still pass their values (an int
                # Scalar as a runtime int): the executor rejects the call.
                carried = {a.name for a in V.extern_kernel_nodes[-1].node.inputs}
                raw_args = [v if a.name in carried else None for a, v in zip(schema.arguments, raw_args)]
            super().generate_fallback_kernel_with_runtime_lookup_aot(op_overload, raw_args, output_args,
                                                                     raw_outputs)

        def generate_c_shim_extern_kernel_call(self, kernel: str, args: list[str], device: str, **kwargs: Any) -> None:
            # Device-generic shims (aoti_torch_copy_, ...) go through the
            # dispatcher; a device's own (aoti_torch_infini_...) do not exist.
            if self.get_c_shim_func_name(kernel, device).startswith("aoti_torch_infini_"):
                raise CppWrapperCodegenError(
                    f"AOTInductor on infini: {kernel} (a C shim of PyTorch's own devices) has no infini "
                    f"version, and Inductor lowered this operator to it rather than to a fallback; "
                    f"run the program with Python (ep.module()) or report the operator")
            super().generate_c_shim_extern_kernel_call(kernel, args, device, **kwargs)

        def _generate_scatter_fallback(self, output: str, inputs: list[str], cpp_kernel_name: str,
                                       python_kernel_name: str, src_is_tensor: bool, reduce: Any,
                                       kwargs: Any, device: str) -> None:
            if device == "infini":
                raise CppWrapperCodegenError(
                    f"AOTInductor on infini: {python_kernel_name} is lowered to a C shim of PyTorch's "
                    f"own devices, which has no infini version; run the program with Python (ep.module())")
            super()._generate_scatter_fallback(output, inputs, cpp_kernel_name, python_kernel_name,
                                               src_is_tensor, reduce, kwargs, device)

    return InfiniCppWrapperCodegen


def _node_on_infini(node: Any) -> bool:
    device = node.get_device()
    return device is not None and device.type == "infini"


def install() -> type:
    """Plugs AOTInductor's code generation for infini into Inductor (at its
    first compile) and returns the C++ wrapper class to register."""
    _lower_shim_ops_as_fallbacks()
    return make_cpp_wrapper_codegen()
