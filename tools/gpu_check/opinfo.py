"""OpInfo float32 forward on infini against CPU, sampled to fit its time
budget (opinfo.json): the served rate and the count of wrong values.

    python tools/gpu_check/opinfo.py OUT_DIR [--every K] [--budget S]

Runs tools/opinfo_sweep.py's crash-isolated worker over every K-th float32
forward case of PyTorch's OpInfo database (the first sample of each, run
twice on infini, CPU as the oracle). ``served`` = passed / run; ``wrong`` =
cases whose result differs from CPU's (anything but a pass, a refusal naming
InfiniOps, a crash or a timeout). Cases the budget did not reach are
``not_run``.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from common import ResultFile, infini_status, repo_root


def summary(results: dict, selected: int) -> dict:
    counts = collections.Counter(r["status"] for r in results.values())
    run = len(results)
    refusals = collections.Counter(r["message"].split(":")[0] + ": " + r["message"].split(":", 1)[-1][:90]
                                   for r in results.values() if r["status"] == "refused")
    return {
        "selected": selected, "run": run, "not_run": max(0, selected - run),
        "passed": counts["pass"], "refused": counts["refused"], "wrong": counts["fail"],
        "crashed": counts["crash"], "timed_out": counts["timeout"],
        "served_rate": round(counts["pass"] / run, 4) if run else None,
        "wrong_cases": {c: r["message"] for c, r in sorted(results.items()) if r["status"] == "fail"},
        "crashed_or_timed_out": {c: r["message"] for c, r in sorted(results.items())
                                 if r["status"] in ("crash", "timeout")},
        "top_refusals": refusals.most_common(15),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--budget", type=float, default=120)
    parser.add_argument("--case-timeout", type=float, default=30)
    args = parser.parse_args()
    result = ResultFile(args.out, "opinfo.json", "opinfo", args.budget)
    sys.path.insert(0, str(repo_root() / "tools"))
    import opinfo_sweep

    result.step("infini", infini_status)
    result.update(dtype="float32", direction="forward", every=args.every, samples_per_case=1)
    selected: dict = {}
    # Leave the part's last seconds to write the result.
    results = opinfo_sweep.sweep(1, args.case_timeout, [], ["float32"], ["forward"], args.every,
                                 max(1.0, result.left() - 5), selected=selected,
                                 on_result=lambda r: result.update(**summary(r, selected.get("count", 0))))
    result.update(**summary(results, selected.get("count", 0)), status="done")


if __name__ == "__main__":
    main()
