"""The CPU reference of benchmarks/run.py, measured in a clean process.

A process that has run infini work can run CPU PyTorch slower than one that
has not: on the Infini stack's CPU backend, infini's backward ran on
PyTorch's autograd device thread, whose parallel regions opened a second
OpenMP team, and libgomp then cut every team's spin-wait short for the rest
of the process; a CPU GPT-2-tiny training step took 2.4x as long there. A
CPU reference timed in the process that runs the infini side is slowed the
same way, and hides that cost (the stack's GPT-2 step read 2.8x CPU eager,
against 5.5x a clean CPU process).

So run.py times the CPU side of its cases whose reference is CPU PyTorch
work in this process: started once per run (``python
benchmarks/clean_reference.py [--quick]``, by :class:`CleanReference`), it
never imports torch_infini (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``; it checks),
builds each case with the CPU as its device and the generators seeded as
run.py seeds them, and runs reference repetitions on request, interleaved
with run.py's infini repetitions as before. Before each side's repetition
the other process's OpenMP threads are given ``SETTLE_S`` to stop spinning
(libgomp spins for about 10 ms after a parallel region), so that neither
side runs beside the other's spinning team. run.py's ``--reference-in-process``
times the reference in its own process instead, as it did before.

The protocol is one JSON object per line each way: ``{"setup": case}``
(the reply carries ``"skip"`` when the case cannot run on the CPU),
``{"calibrate": seconds}`` -> ``{"n": calls}``, ``{"rep": calls}`` ->
``{"s": seconds}``, ``{"release": true}``; a failure replies ``{"error": text}``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SETTLE_S = 0.015


class CleanReferenceError(RuntimeError):
    """The clean reference process failed; the message is its error."""


class CleanReference:
    """run.py's side of the clean reference process."""

    def __init__(self, quick: bool) -> None:
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        cmd = [sys.executable, os.path.join(HERE, "clean_reference.py")] + (["--quick"] if quick else [])
        self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      bufsize=1)
        ready = self._read()
        self.pid = self._proc.pid
        self.torch_threads = ready["threads"]

    def _read(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            raise CleanReferenceError(f"the clean reference process exited (status {self._proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise CleanReferenceError(reply["error"])
        return reply

    def _ask(self, **request: Any) -> dict:
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def setup(self, case: str) -> Optional[str]:
        """Builds ``case`` and warms its reference up; the reason where it
        cannot run on the CPU."""
        return self._ask(setup=case).get("skip")

    def calibrate(self, target_s: float) -> int:
        return int(self._ask(calibrate=target_s)["n"])

    def rep(self, n: int) -> float:
        """Seconds for one repetition of ``n`` reference calls, after the
        other side's OpenMP threads have had time to settle."""
        time.sleep(SETTLE_S)
        seconds = float(self._ask(rep=n)["s"])
        time.sleep(SETTLE_S)
        return seconds

    def release(self) -> None:
        self._ask(release=True)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)


def serve(quick: bool) -> int:
    import torch

    import run

    if "torch_infini" in sys.modules:
        print(json.dumps({"error": "torch_infini was imported into the clean reference process "
                                   "(set TORCH_DEVICE_BACKEND_AUTOLOAD=0)"}), flush=True)
        return 1
    run.torch = torch
    run.DEV = torch.device("cpu")
    cases = {case.name: case for case in run.all_cases(quick)}
    bundle = None
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "setup" in request:
                bundle = None
                gc.collect()
                try:
                    bundle = cases[request["setup"]].setup()
                except (run.Skip, NotImplementedError) as exc:
                    reply: dict = {"skip": run.first_line(exc)}
                else:
                    bundle.reference(1)
                    reply = {"ok": True}
            elif "calibrate" in request:
                reply = {"n": run.calibrate(bundle.reference, float(request["calibrate"]))}
            elif "rep" in request:
                gc.disable()
                try:
                    reply = {"s": run._elapsed(bundle.reference, int(request["rep"]))}
                finally:
                    gc.enable()
            elif "release" in request:
                bundle = None
                gc.collect()
                reply = {"ok": True}
            else:
                reply = {"error": f"unknown request {request}"}
        except Exception as exc:  # noqa: BLE001 - reported to run.py, which fails the case
            reply = {"error": f"{type(exc).__name__}: {run.first_line(exc)}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(serve("--quick" in sys.argv[1:]))
