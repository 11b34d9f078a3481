"""torch_infini: PyTorch on the Infini stack.

``import torch_infini`` renames PyTorch's PrivateUse1 backend to ``infini``,
registers ``torch.infini`` (a module mirroring ``torch.cuda``), and makes
``device="infini:N"`` tensors run on one of two runtime providers:

* the Infini stack (InfiniRT + InfiniOps), when this build was compiled
  against it; it uses an InfiniRT accelerator backend with a device, else
  InfiniRT's CPU backend;
* the built-in host runtime, always available: an asynchronous accelerator
  simulated on the host (streams are worker queues, events time real work).

``TORCH_INFINI_PROVIDER=host|infini|auto`` forces the provider. Operators the
device has no kernel for raise ``NotImplementedError`` naming the operator;
nothing silently falls back to the CPU. ``python -m torch_infini`` prints what
is installed and selected; ``python -m torch_infini --ops`` lists operators.

CPU fallback (opt-in, off by default): ``TORCH_INFINI_CPU_FALLBACK=1``, or
``torch_infini.fallback.enable()`` / ``with torch_infini.fallback.enabled():``,
runs operators without an infini kernel on the CPU (inputs copied to the host,
results and in-place/``out=`` arguments copied back, ordered with the current
stream), warning once per operator. Views, random and factory operators keep
raising. ``torch_infini.fallback.allow()``/``deny()`` (or
``TORCH_INFINI_CPU_FALLBACK_ALLOW``/``_DENY``, comma-separated names such as
``aten::cumsum``, which match every overload, or ``aten::cumsum.out``) refine
it. ``torch_infini.fallback.coverage()`` reports every operator called on
infini tensors (native, fallback, unsupported; calls; time), and
``TORCH_INFINI_OP_REPORT=1`` prints that report at exit. See
``torch_infini.fallback``.

CUDA programs, unmodified (opt-in, off by default): ``import
torch_infini.transfer_to_infini`` or ``TORCH_INFINI_TRANSFER_CUDA=1`` maps
``"cuda"`` devices, ``torch.cuda.*``, autocast/GradScaler for ``"cuda"`` and
``init_process_group("nccl")`` onto infini (docs/transfer-cuda.md).

torch.distributed: the ``"infini"`` c10d backend (``torch_infini.distributed``)
runs collectives on infini tensors, stream-ordered, over gloo; a process that
uses infini picks it in ``init_process_group()`` without a backend.
``torch.multiprocessing`` shares infini tensors between processes as CUDA
shares cuda tensors, on the host runtime; on the Infini stack it refuses in
the sending call, saying what to do instead (``torch_infini.multiprocessing``).
"""

from __future__ import annotations

import sys as _sys


def _running_diagnostics() -> bool:
    """Whether this import is ``python -m torch_infini`` locating its
    ``__main__`` (Python sets ``sys.argv[0]`` to ``"-m"`` meanwhile)."""
    argv = getattr(_sys, "orig_argv", [])
    return (bool(_sys.argv) and _sys.argv[0] == "-m" and "-m" in argv
            and argv.index("-m") + 1 < len(argv) and argv[argv.index("-m") + 1] == __name__)


#: Why the package could not load, when ``python -m torch_infini`` imported it
#: (the diagnostics then explain it instead of a traceback); None otherwise.
_LOAD_ERROR: BaseException | None = None

try:
    from ._guard import check_build as _check_build

    # Before anything is renamed or the native module is loaded.
    _BUILD_INFO = _check_build()

    import torch

    from . import _C  # noqa: F401  (registers the device guard, hooks, allocator, kernels)
    from . import _aten_backed

    # Before any device is used: the provider is selected at first use.
    _aten_backed.install(_BUILD_INFO)
    from . import distributed
    from . import fallback
    from . import backend_support
    from . import decompositions
    from . import _meta_kernels
    from . import fused_ops  # torch.ops.infini.swiglu, silu_and_mul, causal_softmax
    from . import _autograd
    from . import _implementations
    from . import _compile
    from . import _dlpack
    from . import infini as _infini_module
    from . import multiprocessing as _multiprocessing
    from .diagnostics import diagnostics, operator_table, registered_operators

    from . import _flex_attention

    # flex_attention on infini: installed by the same after-import hook, when PyTorch loads its modules.
    _compile._REGISTER.update(_flex_attention.AFTER_IMPORT)
    _compile.install()  # torch.compile's device interface and Inductor backend, when PyTorch loads them
except Exception as _error:  # noqa: BLE001
    if not _running_diagnostics():
        raise
    _LOAD_ERROR = _error

__version__ = "0.1.0"

__all__ = ["diagnostics", "operator_table", "registered_operators", "distributed", "fallback", "fused_ops",
           "build_info", "__version__"]


def build_info() -> dict:
    """The build metadata: PyTorch version and ABI built against, Infini stack."""
    return dict(_BUILD_INFO)


def _register() -> None:
    torch.utils.rename_privateuse1_backend("infini")
    torch._register_device_module("infini", _infini_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True
    )


def _transfer_from_environment() -> None:
    """TORCH_INFINI_TRANSFER_CUDA=1 turns on the CUDA-to-infini switch
    (torch_infini.transfer_to_infini) as the package loads, at ``import torch``."""
    from . import _env, _transfer

    if _env.switch(_transfer.ENVIRONMENT_VARIABLE):
        _transfer.enable()


if _LOAD_ERROR is None:
    try:
        _register()
        distributed._register()
        _multiprocessing._register()
        fallback._setup_from_environment()
        backend_support._setup_from_environment()
        _autograd.install()
        _implementations.install()
        _dlpack.install()
        decompositions.install()
        _meta_kernels.install()
        _transfer_from_environment()
    except Exception as _error:  # noqa: BLE001
        if not _running_diagnostics():
            raise
        _LOAD_ERROR = _error
