"""Pass rates of PyTorch's OpInfo database on infini, per dtype and direction.

Runs every case of tests/ops/opinfo_harness.py in a worker process, restarted
after a crash (the crashing case is recorded as ``crash``) or a hang (a case
over --timeout seconds is recorded as ``timeout``), so one bad operator cannot
hide the rest. Prints the pass rates and writes every case's outcome as JSON.

    python tools/opinfo_sweep.py --json /tmp/opinfo.json [--samples 3] [--only NAME ...] [--dtype float32 ...]

On the Infini stack a ``fail`` is split into ``refused`` (the provider
refused the call, naming InfiniOps) and ``wrong`` (anything else: a value,
dtype, stride or error that differs from CPU's).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(start: int, samples: int, only: list[str], dtypes: list[str] = ()) -> None:
    """Runs cases from index `start`, one JSON line each on stdout."""
    sys.path[:0] = [str(ROOT / "tests" / "ops"), str(ROOT / "tests")]  # the harness, infini_testing
    import torch  # noqa: F401
    import torch_infini  # noqa: F401
    import opinfo_harness as h

    all_cases = h.cases()
    for i in range(start, len(all_cases)):
        op, dtype, direction = all_cases[i]
        cid = h.case_id(op, dtype, direction)
        if only and cid.rsplit("-", 2)[0] not in only:
            continue
        if dtypes and cid.rsplit("-", 2)[1] not in dtypes:
            continue
        print(json.dumps({"index": i, "case": cid, "status": "start"}), flush=True)
        try:
            h.run_case(op, dtype, direction, samples)
            status, message = "pass", ""
        except Exception as e:  # noqa: BLE001
            status = "refused" if ("InfiniOps" in str(e) and "TORCH_INFINI_PROVIDER=host" in str(e)) else "fail"
            message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        print(json.dumps({"index": i, "case": cid, "status": status, "message": message}), flush=True)
    print(json.dumps({"done": True}), flush=True)


def sweep(samples: int, timeout: float, only: list[str], dtypes: list[str] = ()) -> dict:
    results: dict[str, dict] = {}
    start = 0
    while True:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(start), "--samples", str(samples)]
                                + sum([["--only", o] for o in only], [])
                                + sum([["--dtype", d] for d in dtypes], []),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        current = None
        began = time.monotonic()
        done = False
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buffer = ""
        while True:
            ready = sel.select(timeout=1.0)
            if current is not None and time.monotonic() - began > timeout:
                proc.kill()
                results[current["case"]] = {"status": "timeout", "message": f"over {timeout} s"}
                start = current["index"] + 1
                break
            if not ready:
                if proc.poll() is not None:
                    pass
                else:
                    continue
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                if current is not None:
                    results[current["case"]] = {"status": "crash", "message": f"exit {proc.returncode}"}
                    start = current["index"] + 1
                else:
                    done = True
                break
            record = json.loads(line)
            if record.get("done"):
                done = True
                proc.wait()
                break
            if record["status"] == "start":
                current, began = record, time.monotonic()
            else:
                results[record["case"]] = {"status": record["status"], "message": record["message"]}
                current = None
        if done:
            return results


def summarize(results: dict) -> str:
    groups = collections.defaultdict(collections.Counter)
    for cid, r in results.items():
        _, dtype, direction = cid.rsplit("-", 2)
        groups[(dtype, direction)][r["status"]] += 1
    lines = ["| dtype | direction | cases | pass | refused | fail | crash | timeout | pass rate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (dtype, direction), c in sorted(groups.items()):
        total = sum(c.values())
        lines.append(f"| {dtype} | {direction} | {total} | {c['pass']} | {c['refused']} | {c['fail']} | {c['crash']} | "
                     f"{c['timeout']} | {100 * c['pass'] / total:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--dtype", action="append", default=[], help="only cases of this dtype (float32, ...)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.samples, args.only, args.dtype)
        return
    results = sweep(args.samples, args.timeout, args.only, args.dtype)
    print(summarize(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
