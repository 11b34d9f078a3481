"""The switch's changes to PyTorch's device-taking API outside ``torch.cuda``.

Interception points, and why these: PyTorch parses device strings in C++
(``c10::Device``), with no hook, and a ``TorchFunctionMode`` would see every
operator call (a Python round trip per kernel, per thread) to act on the few
that take a device. So the switch replaces the Python-visible entry points
that take a device, found generically where PyTorch says which they are:

* every function of ``torch``, ``torch.fft``, ``torch.special``,
  ``torch.linalg``, ``torch.nested`` and ``torch.sparse`` whose ATen schema (or
  Python signature) has a ``device`` argument (``torch.zeros``, ``arange``,
  ``*_like``, ``tensor``, ``fft.fftfreq``, ``nested.nested_tensor`` ...), plus
  ``torch.asarray`` (parsed in C++, no schema);
* every ``Tensor`` method whose schema has one (``to``, ``new_*``,
  ``pin_memory``, ``is_pinned``) plus ``new_tensor``, and ``Tensor.cuda``;
* ``nn.Module.to``/``to_empty``/``cuda``, ``UntypedStorage``/``TypedStorage``
  ``.cuda`` and ``UntypedStorage(..., device=)``;
* ``torch.Generator`` (a subclass standing in for it: ``isinstance`` and
  ``issubclass`` answer for the real class), ``torch.set_default_device`` and
  ``with torch.device("cuda"):`` (``DeviceContext``);
* ``torch.load``'s ``map_location`` and the location tags of a checkpoint
  saved on CUDA (``serialization.default_restore_location``);
* ``DataLoader(pin_memory_device=)``;
* autocast and its state functions, ``GradScaler``, ``custom_fwd``/``custom_bwd``.

``torch.device("cuda")`` itself stays a CUDA device object (its type cannot
be replaced, and code that checks ``device.type == "cuda"`` then takes its
CUDA path, whose calls are mapped); what it reaches is mapped.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from ._map import mapping_devices, map_arguments, names_cuda, replace, to_infini, wrap_each, TARGET

#: Namespaces whose device-taking functions are mapped, with the ATen name prefix of their operators.
_NAMESPACES = {"torch": "", "torch.fft": "fft_", "torch.special": "special_", "torch.linalg": "linalg_",
               "torch.nested": "nested_", "torch.sparse": "sparse_"}

#: Device-taking functions the schemas do not show (parsed by PyTorch's C++ argument parser).
_WITHOUT_SCHEMA = {"torch": ["asarray"]}

#: Device-taking Tensor methods the schemas do not show.
_TENSOR_METHODS_WITHOUT_SCHEMA = ["new_tensor"]

#: Replaced on their own (not by the generic device mapping).
_SEPARATE = {"Generator", "set_default_device", "load"}


def _aten_names_taking_a_device() -> set[str]:
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::") and any(a.name == "device" for a in schema.arguments):
            names.add(schema.name[len("aten::"):])
    return names


def device_taking_functions() -> dict[str, list[str]]:
    """``{namespace: [function names]}``: the public functions the switch maps,
    read from PyTorch's operator schemas and Python signatures."""
    aten = _aten_names_taking_a_device()
    found: dict[str, list[str]] = {}
    for namespace, prefix in _NAMESPACES.items():
        module = _module(namespace)
        names = set(_WITHOUT_SCHEMA.get(namespace, []))
        for name in dir(module):
            if name.startswith("_") or name in _SEPARATE:
                continue
            value = getattr(module, name)
            if inspect.isfunction(value):
                value = inspect.unwrap(value)  # (the switch's own wrappers, once it is on)
            if inspect.isfunction(value):
                try:
                    params = inspect.signature(value).parameters
                except (TypeError, ValueError):
                    continue
                if "device" in params:
                    names.add(name)
            elif callable(value) and not isinstance(value, type) and prefix + name in aten:
                names.add(name)
        found[namespace] = sorted(names)
    return found


def tensor_methods() -> list[str]:
    """The ``Tensor`` methods taking a device, from the schemas."""
    aten = _aten_names_taking_a_device()
    names = {n for n in aten if not n.startswith("_") and hasattr(torch.Tensor, n)}
    return sorted(names | set(_TENSOR_METHODS_WITHOUT_SCHEMA))


def _module(dotted: str) -> Any:
    module = torch
    for part in dotted.split(".")[1:]:
        module = getattr(module, part)
    return module


def _index(device: Any) -> Any:
    """``Tensor.cuda``'s ``device`` argument as an infini device: ``None`` is
    the current device, an ``int`` an index."""
    if device is None:
        return torch.device(TARGET, torch.infini.current_device())
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device(TARGET, device)
    device = to_infini(device)
    if isinstance(device, str):
        device = torch.device(device)
    if device.type != TARGET:
        raise ValueError(f"Invalid device, must be cuda device (mapped to infini), but got: {device}")
    return device if device.index is not None else torch.device(TARGET, torch.infini.current_device())


def _tensor_cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False,
                 memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
    """``Tensor.cuda()`` under the switch: a copy on the infini device of the
    same index (the current one by default), or ``self`` when already there."""
    return self.to(_index(device), non_blocking=non_blocking, memory_format=memory_format)


def _module_cuda(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
    """``Module.cuda()`` under the switch: parameters and buffers moved to the
    infini device of the same index (the current one by default)."""
    target = _index(device)
    return self._apply(lambda t: t.to(target))


def _storage_cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
    """``Storage.cuda()`` under the switch: a copy on the infini device."""
    return self.to(device=_index(device), non_blocking=non_blocking)


class _RealGeneratorChecks(type(torch._C.Generator)):  # type: ignore[misc]
    """Makes ``isinstance``/``issubclass`` against the stand-in answer for
    PyTorch's own generator class."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch._C.Generator)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, torch._C.Generator)


class Generator(torch._C.Generator, metaclass=_RealGeneratorChecks):
    r"""``torch.Generator`` under the switch: ``torch.Generator("cuda")`` makes
    an infini generator. Instances are PyTorch's own generators."""

    def __new__(cls, device: Any = "cpu") -> torch._C.Generator:  # type: ignore[misc]
        return torch._C.Generator(to_infini(device))


def _restore_location(original: Any) -> Any:
    def default_restore_location(storage: Any, location: str) -> Any:
        return original(storage, to_infini(location))

    default_restore_location.__doc__ = original.__doc__
    return default_restore_location


# functools.wraps keeps the original signature visible (inspect.signature
# follows __wrapped__): Dynamo binds autocast's arguments by that signature.

def _grad_scaler_init(original: Any) -> Any:
    # GradScaler's device defaults to "cuda": the default is mapped too.
    @functools.wraps(original)
    def __init__(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        original(self, to_infini(device), *args, **kwargs)

    return __init__


def _mapping_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        args, kwargs = map_arguments(args, kwargs)
        original(self, *args, **kwargs)

    return __init__


def _untyped_storage_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    args, kwargs = map_arguments(args, kwargs)
    return torch._C.StorageBase.__new__(cls, *args, **kwargs)


def _legacy_cuda_default(original: Any, takes_device_first: bool) -> Any:
    """The autocast state functions whose device argument defaults to CUDA
    (``torch.is_autocast_enabled()``, ``set_autocast_enabled(True)``): with
    no device they now mean infini, and a CUDA device is mapped."""

    def function(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = map_arguments(args, kwargs)
        if takes_device_first and not (args and isinstance(args[0], str)) and "device_type" not in kwargs:
            args = (TARGET, *args)
        return original(*args, **kwargs)

    function.__name__ = getattr(original, "__name__", "function")
    function.__doc__ = original.__doc__
    return function


def install() -> None:
    """Make every change listed in the module docstring."""
    # DeviceContext (``with torch.device(...)``, set_default_device) matches
    # the functions it receives against this cached set: build it from the
    # original functions before they are replaced.
    import torch.utils._device as device_context

    device_context._device_constructors()

    area = "device arguments"
    for namespace, names in device_taking_functions().items():
        wrap_each(_module(namespace), names, namespace, area)
    wrap_each(torch.Tensor, tensor_methods(), "torch.Tensor", area)
    replace(torch.Tensor, "cuda", _tensor_cuda, "torch.Tensor.cuda", "copies to the infini device", area)

    wrap_each(torch.nn.Module, ["to", "to_empty"], "torch.nn.Module", area)
    replace(torch.nn.Module, "cuda", _module_cuda, "torch.nn.Module.cuda", "moves to the infini device", area)
    for storage in (torch.UntypedStorage, torch.TypedStorage):
        replace(storage, "cuda", _storage_cuda, f"torch.{storage.__name__}.cuda", "copies to the infini device", area)
    replace(torch.UntypedStorage, "__new__", staticmethod(_untyped_storage_new), "torch.UntypedStorage(device=)",
            "device naming cuda becomes infini", area)

    replace(torch, "Generator", Generator, "torch.Generator", "Generator('cuda') makes an infini generator", area)
    wrap_each(torch, ["set_default_device"], "torch", area)
    replace(device_context.DeviceContext, "__init__", _mapping_init(device_context.DeviceContext.__init__),
            "with torch.device('cuda'):", "the default device becomes infini", area)

    import torch.serialization as serialization

    wrap_each(torch, ["load"], "torch", area)
    serialization.load = torch.load
    replace(serialization, "default_restore_location", _restore_location(serialization.default_restore_location),
            "torch.serialization.default_restore_location", "storages tagged cuda load onto infini", area)

    import torch.utils.data as data

    replace(data.DataLoader, "__init__", _mapping_init(data.DataLoader.__init__), "torch.utils.data.DataLoader",
            "pin_memory_device='cuda' becomes infini", area)

    _install_amp()


def _install_amp() -> None:
    area = "mixed precision"
    autocast = torch.amp.autocast_mode.autocast
    replace(autocast, "__init__", _mapping_init(autocast.__init__), "torch.autocast / torch.amp.autocast",
            "device_type='cuda' becomes infini", area)
    scaler = torch.amp.grad_scaler.GradScaler
    replace(scaler, "__init__", _grad_scaler_init(scaler.__init__), "torch.amp.GradScaler",
            "device 'cuda' (the default) becomes infini", area)
    for owner, prefix in ((torch.amp, "torch.amp"), (torch.amp.autocast_mode, "torch.amp.autocast_mode")):
        for name in ("custom_fwd", "custom_bwd", "is_autocast_available"):
            if getattr(owner, name, None) is not None:
                wrap_each(owner, [name], prefix, area)
    for name in ("get_autocast_dtype", "set_autocast_dtype", "is_autocast_enabled", "set_autocast_enabled"):
        replace(torch, name, _legacy_cuda_default(getattr(torch, name), takes_device_first=True), f"torch.{name}",
                "device_type 'cuda' (and no device, which meant CUDA) is infini", area)
    replace(torch, "get_autocast_gpu_dtype", lambda: torch.get_autocast_dtype(TARGET), "torch.get_autocast_gpu_dtype",
            "answers for infini", area)
    replace(torch, "set_autocast_gpu_dtype", lambda dtype: torch.set_autocast_dtype(TARGET, dtype),
            "torch.set_autocast_gpu_dtype", "sets infini's", area)


__all__ = ["install", "device_taking_functions", "tensor_methods", "names_cuda", "mapping_devices"]
