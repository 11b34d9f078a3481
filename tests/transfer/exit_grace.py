"""Runs a script as ``__main__`` (``python exit_grace.py SCRIPT ARGS...``) and,
when it has finished, releases the GIL for a moment before Python finalizes.

For the CPU oracle of the torchrun test only. PyTorch 2.13's own CPU DDP over
gloo aborts at exit now and then ("terminate called without an active
exception"), without torch_infini too (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``:
1 exit in 10 to 30 with one busy core beside it): ``_engine_run_backward``
stashes a ``contextvars`` context in the thread-local state, each allreduce
that DDP's hooks issue during backward captures that state, and a gloo worker
thread drops the last reference to it after the work completes. If the script
has exited by then, Python is finalizing: the worker, waiting for the GIL to
release the object, is ended by Python, and C++ terminates the process (gdb:
``ProcessGroupGloo::runLoop`` -> ``~AsyncWork`` -> ``~ThreadLocalState`` ->
``SafePyObject`` decref -> ``take_gil`` -> ``pthread_exit``). The infini side
is not wrapped: its collectives are issued from the process group's own
threads, whose thread-local state holds no Python object.
"""

from __future__ import annotations

import atexit
import runpy
import sys
import time

#: Long enough for a descheduled gloo worker to run once on a loaded machine.
GRACE_S = 0.5

if __name__ == "__main__":
    # Registered first, so it runs after the script's own exit handlers.
    atexit.register(time.sleep, GRACE_S)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
