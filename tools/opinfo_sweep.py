"""Pass rates of PyTorch's OpInfo database on infini, per dtype and direction.

Runs every case of tests/ops/opinfo_harness.py in a worker process, restarted
after a crash (the crashing case is recorded as ``crash``) or a hang (a case
over --timeout seconds is recorded as ``timeout``), so one bad operator cannot
hide the rest. Prints the pass rates and writes every case's outcome as JSON.

    python tools/opinfo_sweep.py --json /tmp/opinfo.json [--samples 3] [--only NAME ...] [--dtype float32 ...]
        [--direction forward] [--every K] [--budget SECONDS]

``--every K`` takes every K-th case (of those the other filters keep, in
op_db order): a sample spread over the whole database. ``--budget`` stops
starting cases after that many seconds; the cases not reached are counted
as ``not run``, never as passed.

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


def worker(start: int, samples: int, only: list[str], dtypes: list[str] = (), directions: list[str] = (),
           every: int = 1) -> None:
    """Runs cases from index `start`, one JSON line each on stdout."""
    sys.path[:0] = [str(ROOT / "tests" / "ops"), str(ROOT / "tests")]  # the harness, infini_testing
    import torch  # noqa: F401
    import torch_infini  # noqa: F401
    import opinfo_harness as h

    all_cases = h.cases()
    kept = [i for i, (op, dtype, direction) in enumerate(all_cases)
            if keep(h.case_id(op, dtype, direction), only, dtypes, directions)][::every]
    print(json.dumps({"selected": len(kept)}), flush=True)
    for i in kept:
        if i < start:
            continue
        op, dtype, direction = all_cases[i]
        cid = h.case_id(op, dtype, direction)
        print(json.dumps({"index": i, "case": cid, "status": "start"}), flush=True)
        try:
            h.run_case(op, dtype, direction, samples)
            status, message = "pass", ""
        except Exception as e:  # noqa: BLE001
            status = "refused" if ("InfiniOps" in str(e) and "TORCH_INFINI_PROVIDER=host" in str(e)) else "fail"
            message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        print(json.dumps({"index": i, "case": cid, "status": status, "message": message}), flush=True)
    print(json.dumps({"done": True}), flush=True)


def keep(cid: str, only, dtypes, directions) -> bool:
    """Whether the case ``<op>-<dtype>-<direction>`` passes the filters."""
    name, dtype, direction = cid.rsplit("-", 2)
    return (not only or name in only) and (not dtypes or dtype in dtypes) and (not directions or direction in directions)


def sweep(samples: int, timeout: float, only: list[str], dtypes: list[str] = (), directions: list[str] = (),
          every: int = 1, budget: float | None = None, on_result=None, selected: dict | None = None) -> dict:
    """Every selected case's outcome, keyed by case id. With ``budget``
    (seconds), no case starts after it and the worker is stopped; the cases
    not reached are missing from the result (``selected["count"]`` says how
    many were selected). ``on_result(results)`` is called after each case."""
    results: dict[str, dict] = {}
    start = 0
    deadline = None if budget is None else time.monotonic() + budget
    selected = {} if selected is None else selected
    while True:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(start), "--samples", str(samples),
                                 "--every", str(every)]
                                + sum([["--only", o] for o in only], [])
                                + sum([["--dtype", d] for d in dtypes], [])
                                + sum([["--direction", d] for d in directions], []),
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
            if deadline is not None and time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return results
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
            if "selected" in record:
                selected["count"] = record["selected"]
                continue
            if record.get("done"):
                done = True
                proc.wait()
                break
            if record["status"] == "start":
                current, began = record, time.monotonic()
            else:
                results[record["case"]] = {"status": record["status"], "message": record["message"]}
                current = None
                if on_result is not None:
                    on_result(results)
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
    parser.add_argument("--direction", action="append", default=[], choices=("forward", "backward"))
    parser.add_argument("--every", type=int, default=1, help="every K-th selected case")
    parser.add_argument("--budget", type=float, help="seconds after which no case starts")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.samples, args.only, args.dtype, args.direction, args.every)
        return
    selected: dict = {}
    results = sweep(args.samples, args.timeout, args.only, args.dtype, args.direction, args.every, args.budget,
                    selected=selected)
    print(summarize(results))
    if selected.get("count", 0) > len(results):
        print(f"not run (budget): {selected['count'] - len(results)} of {selected['count']} selected cases")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
