"""Which operators each model of the model suite (tests/models/) runs on the
device and which fall back to the CPU: one forward and one training step
(cross_entropy, backward, clip_grad_norm_, AdamW) per model, with the opt-in
CPU fallback on and the coverage report recording.

    python tools/model_op_coverage.py [--markdown] [model ...]

On the Infini stack, "native" operators ran on InfiniOps kernels or on the
device's own (views, copies, fills), "fallback" ones on the CPU through the
fallback; "composite" ones are ATen decompositions whose parts are counted.
Each model runs in this process, one after the other.
"""

from __future__ import annotations

import argparse
import copy
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "tests")]

import torch  # noqa: E402

import torch_infini  # noqa: E402
from torch_infini import fallback  # noqa: E402


#: Native operators that compute nothing (views, allocation, copies and fills,
#: which the device runs itself): the rest ran on InfiniOps kernels.
MEMORY = {"aten::as_strided", "aten::view", "aten::_reshape_alias", "aten::empty.memory_format",
          "aten::empty_strided", "aten::resize_", "aten::fill_.Scalar", "aten::zero_", "aten::_copy_from",
          "aten::_local_scalar_dense", "aten::set_.source_Storage_storage_offset", "aten::copy_",
          "aten::_unsafe_view", "aten::alias", "aten::detach", "aten::_to_copy", "aten::unfold",
          "aten::fill_.Tensor", "aten::_copy_from_and_resize"}


def run_model(name: str) -> dict[str, dict[str, int]]:
    """kind -> {operator: calls} for one forward and one training step."""
    import test_model_suite as suite

    model, inputs = suite._build(name)
    model = copy.deepcopy(model).to(suite.DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    kwargs = suite._on(inputs(2), suite.DEV)
    with fallback.recording():
        with torch.no_grad():
            suite._loss(model.eval(), kwargs)
        model.train()
        suite._train_step(model, opt, kwargs, autocast=False)
        torch.infini.synchronize()
    report: dict[str, dict[str, int]] = {}
    for row in fallback.coverage():
        report.setdefault(row["kind"], {})[row["op"]] = row["calls"]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="models of tests/models/test_model_suite.py (default: all)")
    parser.add_argument("--markdown", action="store_true", help="one table row per model")
    args = parser.parse_args()
    import test_model_suite as suite

    warnings.simplefilter("ignore", UserWarning)
    fallback.enable()
    info = torch_infini.diagnostics()
    print(f"provider: {info['provider']}; InfiniOps operators: "
          f"{', '.join(torch_infini.build_info().get('infini_ops_operators', [])) or 'none'}")
    if args.markdown:
        print("| model | ops computed natively | ops fallen back | native | fallback |")
        print("|---|---|---|---|---|")
    for name in args.models or sorted(suite.MODELS):
        try:
            report = run_model(name)
        except Exception as error:  # noqa: BLE001  (reported, the next model runs)
            print(f"{name}: FAILED: {type(error).__name__}: {str(error).splitlines()[0]}")
            continue
        native = sorted(op for op in report.get("native", {}) if op not in MEMORY)
        memory = sorted(op for op in report.get("native", {}) if op in MEMORY)
        fell = sorted(report.get("fallback", {}))
        short = lambda ops: ", ".join(o.replace("aten::", "") for o in ops)  # noqa: E731
        if args.markdown:
            print(f"| {name} | {len(native)} | {len(fell)} | {short(native)} | {short(fell)} |")
        else:
            print(f"\n[{name}] computed natively {len(native)}, views/memory {len(memory)}, "
                  f"fallback {len(fell)}, unsupported {len(report.get('unsupported', {}))}")
            print("  native:   " + short(native))
            print("  memory:   " + short(memory))
            print("  fallback: " + short(fell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
