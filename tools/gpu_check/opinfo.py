"""OpInfo float32 forward on infini against CPU, sampled to fit its time
budget (opinfo.json): the served rate and the count of wrong values.

    python tools/gpu_check/opinfo.py OUT_DIR [--every K] [--budget S]

Runs tools/opinfo_sweep.py's crash-isolated worker over every K-th float32
forward case of PyTorch's OpInfo database (the first sample of each, run
twice on infini, CPU as the oracle). ``served_rate`` = passed / run;
``wrong`` = cases whose result (value, dtype, shape, strides) differs from
CPU's; ``refused`` = the provider refused the call naming the operator;
``error`` = another exception than CPU's. Cases the budget did not reach
are ``not_run``.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from common import ResultFile, infini_status, repo_root


#: How tools/opinfo_sweep.py's messages start for a result that differs from
#: CPU's (opinfo_harness.CaseFailure, an AssertionError).
WRONG_VALUE = ("CaseFailure:", "AssertionError:")


def kind(record: dict) -> str:
    """A case's outcome: passed, refused (the provider refused the call,
    naming the operator: NotImplementedError), wrong (a value, dtype, shape
    or stride that differs from CPU's), error (another exception than
    CPU's), crashed or timed_out."""
    status, message = record["status"], record["message"]
    if status == "pass":
        return "passed"
    if status == "refused" or (status == "fail" and message.startswith("NotImplementedError:")):
        return "refused"
    if status == "fail":
        return "wrong" if message.startswith(WRONG_VALUE) else "error"
    return {"crash": "crashed", "timeout": "timed_out"}.get(status, status)


def summary(results: dict, selected: int) -> dict:
    kinds = {case: kind(r) for case, r in results.items()}
    counts = collections.Counter(kinds.values())
    run = len(results)
    refusals = collections.Counter(results[c]["message"].split(" (")[0][:110]
                                   for c, k in kinds.items() if k == "refused")
    return {
        "selected": selected, "run": run, "not_run": max(0, selected - run),
        **{k: counts[k] for k in ("passed", "refused", "wrong", "error", "crashed", "timed_out")},
        "served_rate": round(counts["passed"] / run, 4) if run else None,
        "wrong_cases": {c: results[c]["message"] for c, k in sorted(kinds.items()) if k == "wrong"},
        "error_cases": {c: results[c]["message"] for c, k in sorted(kinds.items()) if k == "error"},
        "crashed_or_timed_out": {c: results[c]["message"] for c, k in sorted(kinds.items())
                                 if k in ("crashed", "timed_out")},
        "top_refusals": refusals.most_common(20),
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
