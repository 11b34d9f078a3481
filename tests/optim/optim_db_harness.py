"""Runs PyTorch's optimizer database (``common_optimizers.optim_db``) on
infini, CPU PyTorch as the oracle.

One case is an (optimizer, configuration, implementation) triple: every
configuration ``optim_inputs_func`` yields for the infini device, run with
each implementation the OptimizerInfo supports, named explicitly (the
per-tensor loop ``foreach=False``, ``foreach=True``, ``fused=True``,
``differentiable=True``; the default resolves to one of them, and differently
per device), each against the same implementation on CPU. A case makes
the same float32 parameters on both sides, then takes ``STEPS`` steps whose
gradients come from one deterministic objective (``closure``: the loss
``sum(p * p) + sum(c * p)`` for a fixed ``c`` per step, its gradient written
into ``p.grad``), and compares every parameter and every state tensor after
each step bit for bit (NaNs equal). Where CPU refuses a configuration
(``capturable=True`` needs an accelerator), the oracle is the same
configuration without it, and values must still agree exactly.

Bit for bit on the host runtime, which runs CPU's kernels. On the Infini
stack the arithmetic is InfiniOps' (its native ``Add`` and ``Mul`` round
otherwise than ATen's fused CPU loops, by up to a few float32 ulps per
step): there values must agree within ``torch.testing.assert_close``'s
float32 tolerances instead.
"""

from __future__ import annotations

import math

import torch

from infini_testing import on_host

DEV = torch.device("infini:0")
#: Whether results must be bit-identical to CPU's (see above).
EXACT = on_host()
STEPS = 3
SHAPES = ((5, 4), (4,), (3, 1, 2))


class CaseFailure(AssertionError):
    """A step whose infini result differs from CPU's."""


def optim_db():
    from torch.testing._internal.common_optimizers import optim_db as db

    return db


def _impl_kwargs(impl: str) -> dict:
    if impl == "for-loop":
        return {"foreach": False}
    return {} if impl == "default" else {impl: True}


def cases() -> list:
    """Every (OptimizerInfo, OptimizerInput, impl) case."""
    out = []
    for info in optim_db():
        if info.only_supports_sparse_grads:
            continue  # SparseAdam (sparse gradients only): test_optim_db tests it apart
        # Every implementation by name, each compared with the same one on CPU
        # (the default resolves to one of them, per device: foreach on infini
        # as on CUDA, the per-tensor loop on CPU, for most optimizers).
        impls = ["for-loop", "foreach"] if "foreach" in info.supported_impls else ["default"]
        impls += [i for i in ("differentiable",) if i in info.supported_impls]
        if "fused" in info.supported_impls and "cpu" in info.supports_fused_on:
            impls.append("fused")
        for optim_input in info.optim_inputs_func(device=DEV.type, dtype=torch.float32):
            if optim_input.params is not None:
                continue  # configurations with their own parameter groups use the model's shapes here too
            for impl in impls:
                if impl in optim_input.kwargs or (impl == "for-loop" and "foreach" in optim_input.kwargs):
                    continue
                out.append((info, optim_input, impl))
    return out


def case_id(info, optim_input, impl: str) -> str:
    return f"{info.name}-{optim_input.desc}-{impl}"


def _params(info, device: torch.device, differentiable: bool) -> list[torch.Tensor]:
    """The parameters (non-leaf copies of leaves that require grad, for the
    differentiable implementation, which updates them in the graph)."""
    g = torch.Generator().manual_seed(0)
    shapes = [s for s in SHAPES if len(s) == 2] if info.name == "Muon" else SHAPES  # Muon: 2-D only
    params = [torch.randn(s, generator=g).to(device) for s in shapes]
    if differentiable:
        params = [p.requires_grad_().clone() for p in params]
    return params


def _closure(params: list[torch.Tensor], step: int):
    def closure():
        g = torch.Generator().manual_seed(100 + step)
        loss = torch.zeros((), device=params[0].device)
        for p in params:
            c = torch.randn(p.shape, generator=g).to(p.device)
            with torch.no_grad():
                p.grad = 2 * p.detach() + c
                loss = loss + (p.detach() * p.detach()).sum() + (c * p.detach()).sum()
        return loss

    return closure


def _same(actual, expected, what: str) -> None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise CaseFailure(f"{what}: {type(actual).__name__}, CPU has a tensor")
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise CaseFailure(f"{what}: {actual.dtype}{tuple(actual.shape)}, CPU gives "
                              f"{expected.dtype}{tuple(expected.shape)}")
        got, want = actual.detach().cpu(), expected.detach().cpu()
        if torch.equal(got, want):
            return
        if got.is_floating_point() and bool(((got == want) | (got.isnan() & want.isnan())).all()):
            return
        if not EXACT and got.is_floating_point():
            try:
                torch.testing.assert_close(got, want, equal_nan=True)
                return
            except AssertionError as error:
                raise CaseFailure(f"{what}: {error}") from None
        diff = (got.double() - want.double()).abs().nan_to_num(0).max().item()
        raise CaseFailure(f"{what}: not bit-identical to CPU (max abs difference {diff:.3g})")
    if isinstance(expected, (list, tuple)):
        for i, (a, e) in enumerate(zip(actual, expected)):
            _same(a, e, f"{what}[{i}]")
        return
    if isinstance(expected, dict):
        if set(actual) != set(expected):
            raise CaseFailure(f"{what}: keys {sorted(actual)}, CPU has {sorted(expected)}")
        for k in expected:
            _same(actual[k], expected[k], f"{what}[{k!r}]")
        return
    if (not EXACT and isinstance(expected, float) and isinstance(actual, float)
            and math.isclose(actual, expected, rel_tol=1.3e-6, abs_tol=1e-5)):
        return  # a float32 value read back (LBFGS's prev_loss): float32's tolerance
    if actual != expected and not (expected != expected and actual != actual):
        raise CaseFailure(f"{what}: {actual!r}, CPU gives {expected!r}")


def _make(info, kwargs: dict, device: torch.device):
    params = _params(info, device, bool(kwargs.get("differentiable")))
    return params, info.optim_cls(params, **kwargs)


def run_case(info, optim_input, impl: str) -> int:
    """Runs the case; returns the steps compared."""
    kwargs = dict(optim_input.kwargs, **_impl_kwargs(impl))
    dev_params, dev_opt = _make(info, kwargs, DEV)
    try:
        cpu_params, cpu_opt = _make(info, kwargs, torch.device("cpu"))
    except (RuntimeError, ValueError):
        if not kwargs.get("capturable"):
            raise
        cpu_params, cpu_opt = _make(info, {k: v for k, v in kwargs.items() if k != "capturable"},
                                    torch.device("cpu"))
    for step in range(STEPS):
        for params, opt in ((cpu_params, cpu_opt), (dev_params, dev_opt)):
            closure = _closure(params, step)
            if info.step_requires_closure:
                opt.step(closure)
            else:
                closure()
                opt.step()
        _same(dev_params, cpu_params, f"step {step} params")
        for i, (dp, cp) in enumerate(zip(dev_params, cpu_params)):
            state_dev, state_cpu = dev_opt.state[dp], cpu_opt.state[cp]
            _same(state_dev, state_cpu, f"step {step} state of param {i}")
    torch.infini.synchronize()
    return STEPS
