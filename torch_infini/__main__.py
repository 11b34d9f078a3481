"""``python -m torch_infini [--ops] [--json]``: diagnostics, the operator table, and per InfiniOps backend
how many bound overloads are native there and how many need ATen-backed InfiniOps with that device's PyTorch.

``python -m torch_infini --backend NAME [--infiniops PIN]``: those overloads, listed, for one backend.

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
    parser.add_argument("--backend", metavar="NAME", help="list, for InfiniOps backend NAME, the bound overloads "
                        "that are native there, ATen-backed only, or absent")
    parser.add_argument("--infiniops", metavar="PIN", help="the InfiniOps pin of the per-backend table "
                        "(default the current one)")
    args = parser.parse_args(argv)

    import torch_infini
    from torch_infini import backend_support
    from torch_infini.diagnostics import (backend_table, diagnostics, format_backend_overloads, format_backend_table,
                                          format_diagnostics, format_operator_table, format_registered_operators)

    pin = args.infiniops or backend_support.CURRENT_PIN
    try:
        pin = backend_support.load_matrix(pin)["infiniops"]["short"]
    except ValueError as error:
        parser.error(str(error))
    if args.backend is not None:
        if args.backend not in backend_support.BACKENDS:
            parser.error(f"unknown InfiniOps backend '{args.backend}': expected one of "
                         f"{', '.join(backend_support.BACKENDS)}")
        if args.json:
            print(json.dumps(backend_support.bound_by_status(args.backend, pin), indent=2))
        else:
            print(format_backend_overloads(args.backend, pin))
        return 0
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
    else:
        try:
            table = backend_table(pin)
        except Exception as error:  # noqa: BLE001  (the diagnostics never fail: PyTorch itself may not load)
            table = None
            d["problems"].append({"problem": f"the per-backend table cannot be made: {type(error).__name__}: {error}",
                                  "fix": "see the problems above"})
        if args.json:
            print(json.dumps({**d, "infiniops_backends": {"pin": pin, "backends": table}}, indent=2))
        else:
            print(format_diagnostics(d, format_backend_table(table, pin) if table else None))
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
