"""``python -m torch_infini [--ops] [--json]``: diagnostics and the operator table.

``python -m torch_infini coverage --backend NAME [--infiniops PIN] [--json [PATH]] -- script.py [args]``:
what of a program an InfiniOps backend serves natively (torch_infini/coverage.py).

The diagnostics never fail: they print every line they can, then each
problem and its fix. The exit status is 0 when an infini device can be used
and 1 when it cannot.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["coverage"]:
        from torch_infini.coverage import main as coverage_main

        return coverage_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m torch_infini", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", action="store_true", help="list the operators the selected provider runs: their support "
                        "matrix, then every operator registered for the infini device")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)

    import torch_infini
    from torch_infini.diagnostics import (diagnostics, format_diagnostics, format_operator_table,
                                          format_registered_operators)

    d = diagnostics(load_error=torch_infini._LOAD_ERROR)
    if args.ops and d["usable"]:
        rows = torch_infini.operator_table()
        registered = torch_infini.registered_operators()
        if args.json:
            print(json.dumps({"kernels": rows, "registered": registered}, indent=2))
        else:
            print(format_operator_table(rows))
            print()
            print(format_registered_operators(registered))
    elif args.json:
        print(json.dumps(d, indent=2))
    else:
        print(format_diagnostics(d))
    return 0 if d["usable"] else 1


def _run() -> int:
    """``main()``, quiet when the reader stops early (``--ops | head``)."""
    try:
        status = main()
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader has gone: nothing more can be printed, and Python's own
        # flush at exit must not fail again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(_run())
