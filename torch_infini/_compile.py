"""torch.compile for infini: a Dynamo device interface and an Inductor backend.

Both register when PyTorch loads the modules they plug into (the device
interface with ``torch._dynamo.device_interface``; the Inductor backend with
Inductor's own backends, first needed at the first compile), so
``import torch_infini`` does not pay for importing the compiler.

Inductor generates C++ kernels (its CPU code generator) where the provider's
device memory is addressable from the host: the built-in host runtime and
InfiniRT's CPU backend. The generated wrapper keeps the current stream's
order: extern kernels (``mm``, ``addmm``, fallbacks) are infini operators,
queued like any other; before each generated C++ kernel, which runs on the
calling thread, the wrapper waits for the current stream, so the kernel never
races work queued earlier and its results are complete when it returns. On
providers whose memory the host cannot address there is no code generator:
``torch.compile`` with the default backend raises, naming
``backend="aot_eager"``, which works everywhere.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any, Callable

import torch

_DYNAMO_MODULE = "torch._dynamo.device_interface"
_INDUCTOR_MODULE = "torch._inductor.codegen.common"


def host_addressable() -> bool:
    """Whether generated CPU code can read and write infini memory directly."""
    from . import _C

    info = _C._provider_info()
    caps = info["capabilities"]
    if "host_addressable" in caps:
        return bool(caps["host_addressable"])
    return info["provider"] == "host" or info["backend"] == "cpu"


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

    class InfiniWrapperCodegen(PythonWrapperCodegen):
        """Python wrapper whose generated C++ kernels wait for the stream first."""

        @staticmethod
        def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any,
                   partition_signatures: Any = None) -> "InfiniWrapperCodegen":
            if is_subgraph:
                from torch._inductor.codegen.wrapper import SubgraphPythonWrapperCodegen

                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return InfiniWrapperCodegen()

        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                         triton: bool = True, **kwargs: Any) -> Any:
            # The kernel runs here, on the calling thread, over device memory:
            # after the work queued before it.
            self.writeline("torch.infini.current_stream().synchronize()")
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

    register_backend_for_device("infini", scheduling, InfiniWrapperCodegen)
    register_device_op_overrides("infini", InfiniOpOverrides())


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


_REGISTER = {_DYNAMO_MODULE: _register_dynamo, _INDUCTOR_MODULE: _hook_inductor}


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
