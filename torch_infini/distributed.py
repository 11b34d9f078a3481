"""torch.distributed on infini: the ``"infini"`` c10d backend.

``import torch_infini`` registers it for the ``infini`` and ``cpu`` devices::

    dist.init_process_group("infini")               # infini and CPU tensors
    dist.init_process_group("cpu:gloo,infini:infini")
    dist.init_process_group()                       # picks "infini", as "nccl" for CUDA

Collectives on infini tensors run on gloo (this build has no InfiniCCL
path): in place on the device memory where the provider's memory is
host-addressable (the built-in host runtime) and the tensors are contiguous,
over pinned host staging buffers otherwise (``TORCH_INFINI_DISTRIBUTED_STAGING=1``
forces those, read when a group is created). Either way they are
stream-ordered as NCCL's are on CUDA:

* a collective waits for the work queued on the current stream before it
  and returns at once, without waiting for it;
* ``work.wait()`` blocks only until gloo is done, as gloo's own ``wait``
  does, then makes the current stream wait for the results (staged ones are
  copied back on the group's communication stream); kernels queued after
  ``wait()`` see them;
* ``work.is_completed()`` is true once the results are on the device, and
  ``work.get_future()`` is a device-aware future (DDP's communication hooks
  use it).

Every collective DDP and FSDP2 use is served: ``all_reduce`` (every
``ReduceOp``; ``PREMUL_SUM`` is computed here, bitwise ops need integer
tensors and ``AVG`` floating ones), ``broadcast``, ``reduce``,
``all_gather``/``all_gather_into_tensor``, ``reduce_scatter``/
``reduce_scatter_tensor``, ``all_to_all``/``all_to_all_single``, ``gather``,
``scatter``, ``barrier``, ``send``/``recv``, their coalesced variants and
``_coalescing_manager``. CPU tensors in an ``"infini"`` group go to gloo
directly. See docs/distributed.md.
"""

from __future__ import annotations

import functools
from datetime import timedelta

import torch

from . import _C

__all__ = ["BACKEND_NAME", "is_available"]

#: The name to pass as ``backend=`` (or in ``"cpu:gloo,infini:infini"``).
BACKEND_NAME = "infini"


def is_available() -> bool:
    """Whether the ``"infini"`` c10d backend can be used (PyTorch was built
    with torch.distributed and gloo, which it runs on)."""
    dist = torch.distributed
    return bool(dist.is_available() and dist.is_gloo_available())


def _create_backend(store, rank: int, world_size: int, timeout: timedelta):
    """The creator torch.distributed calls for ``backend="infini"``."""
    from torch.distributed import ProcessGroupGloo

    host = ProcessGroupGloo(store, rank, world_size, timeout)
    return _C._create_process_group(host, rank, world_size, force_staging=_force_staging(), store=store)


def _force_staging() -> bool:
    from ._env import switch

    return switch("TORCH_INFINI_DISTRIBUTED_STAGING")


def _register() -> None:
    if not is_available():
        return
    torch.distributed.Backend.register_backend(
        BACKEND_NAME, _create_backend, devices=["cpu", "infini"]
    )
    _default_backend_is_infini_when_chosen_for_it()


def _default_backend_is_infini_when_chosen_for_it() -> None:
    """``init_process_group()`` without a backend picks the accelerator's,
    "infini", as it picks "nccl" for CUDA; but PyTorch then names the group's
    default backend GLOO (its code knows NCCL only), which the group does not
    have, so ``DistributedDataParallel`` fails ("Could not find backend type
    1 ... with name gloo"). Groups whose only backend is infini's get it as
    their default, as an explicit ``init_process_group("infini")`` does."""
    c10d = torch.distributed.distributed_c10d
    helper = c10d._new_process_group_helper
    if getattr(helper, "_infini_default_backend", False):
        return

    @functools.wraps(helper)
    def new_process_group_helper(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs):
        made = helper(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs)
        pg = made[0] if isinstance(made, tuple) else made
        if (str(backend) == c10d.Backend.UNDEFINED and isinstance(pg, c10d.ProcessGroup)
                and set(c10d.BackendConfig(backend).get_device_backend_map().values()) == {BACKEND_NAME}):
            pg._set_default_backend(c10d.ProcessGroup.BackendType.CUSTOM)
        return made

    new_process_group_helper._infini_default_backend = True
    c10d._new_process_group_helper = new_process_group_helper


def infini_ccl_status(group=None) -> tuple[bool, str]:
    """Whether ``all_reduce`` on ``group``'s infini tensors runs on InfiniCCL
    (where its backend implements it), and if not, why: this build has no
    InfiniCCL, or InfiniCCL could not create a communicator from a unique id
    (its MPI backend cannot). Other collectives always run on gloo."""
    dist = torch.distributed
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    used, why = _C._process_group_infini_ccl(pg._get_backend(torch.device("infini")))
    return bool(used), str(why)
