"""Which operators each model of the model suite (tests/models/) runs on the
device and which fall back to the CPU: one forward and one training step
(cross_entropy, backward, clip_grad_norm_, AdamW) per model, with the opt-in
CPU fallback on and the coverage report recording.

    python tools/model_op_coverage.py [--markdown] [model ...]
    python tools/model_op_coverage.py --llama-block

``--llama-block``: one Llama decoder block (RMSNorm, rotary attention under a
causal mask, SwiGLU MLP, residuals) forward and backward, written twice: as
transformers writes it (RMSNorm by hand, softmax over masked scores,
silu(gate) * up) and on the fused operators (F.rms_norm,
torch.ops.infini.causal_softmax, torch.ops.infini.silu_and_mul).

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


#: Kernels of torch-infini's own that route or compose the call (their parts
#: are counted): convolution's overrideable entries reach aten::convolution,
#: the fused RNN cells are composed of ATen operators, native_dropout draws
#: its mask from the host generator.
ROUTED = {"aten::convolution_overrideable", "aten::convolution_backward_overrideable",
          "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl",
          "aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward", "aten::native_dropout"}


def _recorded(fn) -> dict[str, dict[str, int]]:
    with fallback.recording():
        fn()
        torch.infini.synchronize()
    report: dict[str, dict[str, int]] = {}
    for row in fallback.coverage():
        report.setdefault(row["kind"], {})[row["op"]] = row["calls"]
    return report


def _rotate(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def llama_block(fused: bool, hidden: int = 32, heads: int = 4, seq: int = 12) -> dict[str, dict[str, int]]:
    """One Llama decoder block, forward and backward (see the module docstring)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    dev = torch.device("infini")
    d = hidden // heads

    def param(*shape):
        return (torch.randn(*shape, generator=g) * 0.1).to(dev).requires_grad_()

    wq, wk, wv, wo = (param(hidden, hidden) for _ in range(4))
    w_gate_up, w_down = param(4 * hidden, hidden), param(hidden, 2 * hidden)
    n1, n2 = param(hidden), param(hidden)
    x = torch.randn(2, seq, hidden, generator=g).to(dev).requires_grad_()
    pos = torch.arange(seq, dtype=torch.float32)
    freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.cat([torch.outer(pos, freq)] * 2, dim=-1)
    cos, sin = angles.cos().to(dev), angles.sin().to(dev)

    def norm(t, w):
        if fused:
            return F.rms_norm(t, (hidden,), w, 1e-6)
        variance = t.pow(2).mean(-1, keepdim=True)  # transformers' LlamaRMSNorm
        return w * (t * torch.rsqrt(variance + 1e-6))

    def step():
        h = norm(x, n1)
        q, k, v = (F.linear(h, w).view(2, seq, heads, d).transpose(1, 2) for w in (wq, wk, wv))
        q, k = q * cos + _rotate(q) * sin, k * cos + _rotate(k) * sin
        scores = (q @ k.transpose(-1, -2)) / d ** 0.5
        if fused:
            probs = torch.ops.infini.causal_softmax(scores.reshape(2 * heads, seq, seq)).view(2, heads, seq, seq)
        else:
            mask = torch.full((seq, seq), float("-inf"), device=dev).triu(1)
            probs = torch.softmax(scores + mask, dim=-1)
        attn = (probs @ v).transpose(1, 2).reshape(2, seq, hidden)
        h1 = x + F.linear(attn, wo)
        gate_up = F.linear(norm(h1, n2), w_gate_up)
        if fused:
            act = torch.ops.infini.silu_and_mul(gate_up)
        else:
            gate, up = gate_up.chunk(2, dim=-1)
            act = F.silu(gate) * up
        out = h1 + F.linear(act, w_down)
        out.sum().backward()

    return _recorded(step)


def run_model(name: str) -> dict[str, dict[str, int]]:
    """kind -> {operator: calls} for one forward and one training step."""
    import test_model_suite as suite

    model, inputs = suite._build(name)
    model = copy.deepcopy(model).to(suite.DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    kwargs = suite._on(inputs(2), suite.DEV)

    def step():
        with torch.no_grad():
            suite._loss(model.eval(), kwargs)
        model.train()
        suite._train_step(model, opt, kwargs, autocast=False)

    return _recorded(step)


def _print(name: str, report: dict[str, dict[str, int]], markdown: bool) -> None:
    ran = report.get("native", {})
    native = sorted(op for op in ran if op not in MEMORY and op not in ROUTED)
    memory = sorted(op for op in ran if op in MEMORY)
    routed = sorted(op for op in ran if op in ROUTED)
    fell = sorted(report.get("fallback", {}))
    short = lambda ops: ", ".join(o.replace("aten::", "") for o in ops)  # noqa: E731
    if markdown:
        print(f"| {name} | {len(native)} | {len(fell)} | {short(native)} | {short(fell)} |")
        return
    calls = lambda ops, kind: sum(report.get(kind, {})[o] for o in ops)  # noqa: E731
    print(f"\n[{name}] computed natively {len(native)} ({calls(native, 'native')} calls), "
          f"routed/composed by torch-infini {len(routed)}, views/memory {len(memory)}, "
          f"fallback {len(fell)} ({calls(fell, 'fallback')} calls), "
          f"unsupported {len(report.get('unsupported', {}))}")
    print("  native:   " + short(native))
    print("  routed:   " + short(routed))
    print("  memory:   " + short(memory))
    print("  fallback: " + short(fell))
    print("  composite: " + short(sorted(report.get("composite", {}))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="models of tests/models/test_model_suite.py (default: all)")
    parser.add_argument("--markdown", action="store_true", help="one table row per model")
    parser.add_argument("--llama-block", action="store_true", help="a Llama block, as written and on the fused ops")
    args = parser.parse_args()
    import test_model_suite as suite

    warnings.simplefilter("ignore", UserWarning)
    fallback.enable()
    info = torch_infini.diagnostics()
    print(f"provider: {info['provider']}; InfiniOps operators: "
          f"{', '.join(torch_infini.build_info().get('infini_ops_operators', [])) or 'none'}")
    if args.llama_block:
        for fused in (False, True):
            _print("llama block, " + ("fused operators" if fused else "as transformers writes it"),
                   llama_block(fused), args.markdown)
        return 0
    if args.markdown:
        print("| model | ops computed natively | ops fallen back | native | fallback |")
        print("|---|---|---|---|---|")
    for name in args.models or sorted(suite.MODELS):
        try:
            report = run_model(name)
        except Exception as error:  # noqa: BLE001  (reported, the next model runs)
            print(f"{name}: FAILED: {type(error).__name__}: {str(error).splitlines()[0]}")
            continue
        _print(name, report, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
