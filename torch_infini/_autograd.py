"""Where infini's backward runs: on the thread that calls it, where kernels run on the host.

PyTorch's autograd engine runs the backward of a non-CPU device on a thread
of its own per device index (``pt_autograd_N``), while the calling thread
waits. On providers whose kernels run on the host (the built-in host runtime,
InfiniRT's CPU backend), that thread runs CPU kernels itself: the matmuls
the generic kernel runs directly when the stream is idle, and every C++
kernel of a compiled backward graph. Each thread that opens an OpenMP
parallel region gets a team of its own, so the process then holds two teams
(the caller's and the autograd thread's), more OpenMP threads than cores on
a small machine. libgomp then cuts its spin-wait short (its "throttled"
spin count, for every team, for the rest of the process): each parallel
region wakes its threads through the kernel, and a compiled decoder-block
forward on the CPU took 1.3 ms instead of 0.25 ms after one infini training
step (benchmarks/compile.py; docs/host-runtime.md has the figures).

So on those providers the importing thread runs infini's backward itself,
as the CPU's is run: ``torch.autograd.set_multithreading_enabled(False)``
for that thread. Results, streams and devices are unchanged (the engine
guards each node's stream and device wherever it runs); what changes is
only which thread runs the backward (and ``torch.autograd.
is_multithreading_enabled()`` reads False there). Other threads keep
PyTorch's default. ``TORCH_INFINI_AUTOGRAD_DEVICE_THREADS=1`` keeps
PyTorch's device threads; on accelerator backends that is the default.

With device threads, the process waits a moment at exit
(:func:`_let_device_threads_finish`): PyTorch's ``_engine_run_backward``
stashes a Python object (the caller's ``contextvars`` context) in the
state each backward carries, and the device thread drops the last
reference to it just after the caller's ``backward()`` returns. A script
that exits right then finalizes Python while that thread waits for the GIL
to release the object; Python ends the thread, and C++ terminates the
process ("terminate called without an active exception", about one exit in
three on a two-core machine).
"""

from __future__ import annotations

import atexit
import time

import torch

from . import _env

VARIABLE = "TORCH_INFINI_AUTOGRAD_DEVICE_THREADS"


def device_threads_by_default() -> bool:
    """Whether the provider's kernels run off the host (then PyTorch's
    per-device autograd threads are kept by default).

    Asked of the provider's ``host_kernels`` capability: where the kernels
    compute on host cores. Not of ``host_addressable`` (whether host code
    may use device memory in place), which InfiniRT's CPU backend does not
    report: asked that, its backward ran on the device thread, and after one
    training step on the stack a CPU GPT-2-tiny step in the same process took
    2.4x as long (benchmarks/run.py, ``beside/...``)."""
    from . import _C

    return not bool(_C._provider_info()["capabilities"]["host_kernels"])


def install() -> None:
    """Runs infini's backward on the importing thread unless kept on
    PyTorch's autograd device threads (see the module's docstring)."""
    try:
        # The provider's start validates the variable too: a malformed value
        # (or a provider that cannot start) makes every device use raise,
        # naming it, and there is then no infini backward to place. Raising
        # here instead would fail torch's backend autoload with a message
        # of its own.
        keep = _env.switch(VARIABLE, default=device_threads_by_default())
    except RuntimeError:
        return
    if not keep:
        torch._C._set_multithreading_enabled(False)
    else:
        atexit.register(_let_device_threads_finish)


#: How long the exit waits, with the GIL released, for an autograd device
#: thread to drop what the last backward left it (microseconds of work).
EXIT_GRACE_S = 0.05


def _let_device_threads_finish() -> None:
    """Releases the GIL briefly at exit, before Python finalizes, so that an
    autograd device thread still holding the last backward's state can
    release its Python objects (see the module's docstring)."""
    time.sleep(EXIT_GRACE_S)
