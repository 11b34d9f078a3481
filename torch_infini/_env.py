"""The TORCH_INFINI_* environment variables: one list, one way to validate.

The C++ runtime reads most of them (csrc/runtime/env.cpp); the rules are the
same on both sides: unset or empty means the default, and a set value that
does not parse is an error at first use naming the variable, the value and
the accepted forms.
"""

from __future__ import annotations

import os
from typing import Mapping

PREFIX = "TORCH_INFINI_"

#: Every variable torch_infini reads at run time, with its accepted forms
#: (the README's configuration table says the same).
VARIABLES: dict[str, str] = {
    "TORCH_INFINI_PROVIDER": "auto (default), host or infini",
    "TORCH_INFINI_RT_BACKEND": "an InfiniRT backend: cpu, nvidia, cambricon, ascend, metax, moore, iluvatar, hygon",
    "TORCH_INFINI_HOST_DEVICES": "an integer from 1 to 16 (default 1)",
    "TORCH_INFINI_HOST_MEMORY": "a positive byte count with an optional K, M or G suffix (default: physical memory)",
    "TORCH_INFINI_ALLOC_CONF": "caching:1 (default) or caching:0",
    "TORCH_INFINI_CPU_FALLBACK": "1 (on) or 0 (off, default)",
    "TORCH_INFINI_CPU_FALLBACK_ALLOW": "comma-separated ATen operator names",
    "TORCH_INFINI_CPU_FALLBACK_DENY": "comma-separated ATen operator names",
    "TORCH_INFINI_OP_REPORT": "1 (on) or 0 (off, default)",
    "TORCH_INFINI_ENFORCE_BACKEND": "BACKEND[,PIN][,torch]: an InfiniOps backend (cpu, nvidia, ascend, cambricon, "
                                    "metax, moore, iluvatar, hygon), a supported InfiniOps pin (default the "
                                    "current one), torch to admit ATen-backed operators; unset (default) is off",
    "TORCH_INFINI_DISTRIBUTED_STAGING": "1 (collectives copy through pinned host buffers) or 0 (default)",
    "TORCH_INFINI_WORKER_THREADS": "an integer from 1 to 4096 (default: the intra-op threads less one, at least 1)",
    "TORCH_INFINI_LAUNCH_BLOCKING": "1 (every queued kernel and copy finishes, and raises, before its call returns) or 0 (off, default)",
    "TORCH_INFINI_PROTECT_DEVICE_MEMORY": "1 (device memory unreadable outside the host runtime's kernels and copies) or 0 (off, default)",
    "TORCH_INFINI_VERIFY_CACHES": "1 (every cache hit on the call path is recomputed and compared) or 0 (off, default)",
    "TORCH_INFINI_TRANSFER_CUDA": "1 (the CUDA-to-infini switch is on from import torch) or 0 (off, default)",
    "TORCH_INFINI_AUTOGRAD_DEVICE_THREADS": "1 (PyTorch's autograd device threads run infini's backward; default on "
                                            "accelerator backends) or 0 (the calling thread runs it; default where "
                                            "kernels run on the host)",
}

#: Read by the build (setup.py), not at run time.
BUILD_VARIABLES: dict[str, str] = {
    "TORCH_INFINI_DEBUG": "1 (debug build: -O0 -g, assertions on) or 0 (release, default)",
    "TORCH_INFINI_BUILD_PROGRESS": "1 (progress lines on the terminal, default) or 0",
    "TORCH_INFINI_SANITIZE": "address,undefined, thread or leak (instrumented build)",
}


def invalid(name: str, value: str, accepted: str) -> RuntimeError:
    """The error for a malformed variable, worded as the C++ side words it."""
    return RuntimeError(f"{name}='{value}' is invalid: expected {accepted}")


def switch(name: str, default: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """A switch variable: exactly ``1`` (on) or ``0`` (off); unset or empty is ``default``."""
    value = (os.environ if environ is None else environ).get(name, "")
    if value == "":
        return default
    if value in ("0", "1"):
        return value == "1"
    raise invalid(name, value, "1 (on) or 0 (off)")


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Set TORCH_INFINI_* variables that torch_infini does not read (typos)."""
    env = os.environ if environ is None else environ
    known = set(VARIABLES) | set(BUILD_VARIABLES)
    return sorted(name for name in env if name.startswith(PREFIX) and name not in known)
