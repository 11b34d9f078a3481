"""Random operators on infini: the numbers equal the CPU's for the same seed
(through torch.manual_seed and through an explicit generator), in every
layout; reseeding and state save/restore reproduce them; distributions are
checked statistically; the draws are queued on the current stream."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import torch_infini  # noqa: F401
from infini_testing import hold, needs_kernels, unserved_skips

DEV = torch.device("infini:0")


# Each test leaves the CPU and infini generators as it found them.
pytestmark = pytest.mark.usefixtures("rng_states_kept")


def probs(device, n=50):
    return torch.linspace(0.0, 1.0, n, device="cpu").to(device)


# name -> f(device, generator) -> tensor. Each runs once on the CPU and once on
# infini from the same seed; the results must be equal, element for element.
CASES = {
    "rand": lambda d, g: torch.rand(7, 9, device=d, generator=g),
    "rand_f64": lambda d, g: torch.rand(33, dtype=torch.float64, device=d, generator=g),
    "rand_f16": lambda d, g: torch.rand(33, dtype=torch.float16, device=d, generator=g),
    "rand_bf16": lambda d, g: torch.rand(33, dtype=torch.bfloat16, device=d, generator=g),
    "randn": lambda d, g: torch.randn(5, 40, device=d, generator=g),  # >= 16: CPU's vectorized path
    "randn_small": lambda d, g: torch.randn(7, device=d, generator=g),
    "randn_f64": lambda d, g: torch.randn(40, dtype=torch.float64, device=d, generator=g),
    "randint": lambda d, g: torch.randint(-5, 17, (64,), device=d, generator=g),
    "randint_i32": lambda d, g: torch.randint(100, (3, 8), dtype=torch.int32, device=d, generator=g),
    "randperm": lambda d, g: torch.randperm(50, device=d, generator=g),
    "randperm_large": lambda d, g: torch.randperm(70000, device=d, generator=g),
    "randperm_f32": lambda d, g: torch.randperm(20, dtype=torch.float32, device=d, generator=g),
    "uniform_": lambda d, g: torch.empty(4, 6, device=d).uniform_(-2, 3, generator=g),
    "normal_": lambda d, g: torch.empty(40, device=d).normal_(1.5, 0.25, generator=g),
    "normal_size": lambda d, g: torch.normal(2.0, 3.0, (30,), device=d, generator=g),
    "normal_tensor_mean": lambda d, g: torch.normal(probs(d, 30), 2.0, generator=g),
    "random_": lambda d, g: torch.empty(20, dtype=torch.int64, device=d).random_(generator=g),
    "random_to": lambda d, g: torch.empty(20, device=d).random_(10, generator=g),
    "random_from_to": lambda d, g: torch.empty(20, dtype=torch.int16, device=d).random_(-3, 9, generator=g),
    "random_from_none": lambda d, g: torch.empty(20, dtype=torch.int64, device=d).random_(5, None, generator=g),
    "bernoulli_float": lambda d, g: torch.empty(64, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_tensor": lambda d, g: torch.empty(50, device=d).bernoulli_(probs(d), generator=g),
    "bernoulli": lambda d, g: torch.bernoulli(probs(d), generator=g),
    "bernoulli_p": lambda d, g: torch.ones(40, device=d).bernoulli(0.7, generator=g),
    "bernoulli_out": lambda d, g: torch.bernoulli(probs(d), generator=g, out=torch.empty(50, device=d)),
    "exponential_": lambda d, g: torch.empty(40, device=d).exponential_(2.5, generator=g),
    "geometric_": lambda d, g: torch.empty(40, device=d).geometric_(0.2, generator=g),
    "log_normal_": lambda d, g: torch.empty(40, device=d).log_normal_(0.5, 0.3, generator=g),
    "cauchy_": lambda d, g: torch.empty(40, device=d).cauchy_(1.0, 2.0, generator=g),
    "multinomial_replacement": lambda d, g: torch.multinomial(probs(d) + 0.1, 30, True, generator=g),
    "multinomial_no_replacement": lambda d, g: torch.multinomial(probs(d) + 0.1, 20, False, generator=g),
    "multinomial_2d": lambda d, g: torch.multinomial((probs(d, 24) + 0.1).reshape(4, 6), 3, generator=g),
    "rand_like": lambda d, g: torch.rand_like(torch.zeros(3, 5, device=d)),
    "randn_like": lambda d, g: torch.randn_like(torch.zeros(3, 5, device=d)),
    "randint_like": lambda d, g: torch.randint_like(torch.zeros(3, 5, device=d), 4, 9),
}
# The *_like factories take no generator: run them from torch.manual_seed only.
NO_GENERATOR = {"rand_like", "randn_like", "randint_like"}


def run(name: str, device, seed: int, use_generator: bool) -> torch.Tensor:
    if use_generator:
        g = torch.Generator(device).manual_seed(seed)
    else:
        torch.manual_seed(seed)
        g = None
    out = CASES[name](device, g)
    assert out.device.type == torch.device(device).type
    return out.cpu()


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_numbers_as_cpu_from_torch_manual_seed(name):
    assert torch.equal(run(name, DEV, 1234, False), run(name, "cpu", 1234, False))


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_GENERATOR))
def test_same_numbers_as_cpu_from_a_generator(name):
    assert torch.equal(run(name, DEV, 99, True), run(name, "cpu", 99, True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reseeding_and_state_restore_reproduce(name):
    a = run(name, DEV, 7, False)
    assert torch.equal(run(name, DEV, 7, False), a)
    state = torch.infini.get_rng_state()
    b = CASES[name](DEV, None).cpu()
    torch.infini.set_rng_state(state)
    assert torch.equal(CASES[name](DEV, None).cpu(), b)


def test_calls_continue_the_stream_of_numbers_as_on_cpu():
    torch.manual_seed(5)
    dev = [torch.rand(3, device=DEV).cpu(), torch.randn(20, device=DEV).cpu(), torch.randperm(9, device=DEV).cpu()]
    torch.manual_seed(5)
    cpu = [torch.rand(3), torch.randn(20), torch.randperm(9)]
    for d, c in zip(dev, cpu):
        assert torch.equal(d, c)


# Layouts: the CPU kernel visits the destination in an order (and with a
# vectorized path) that depends on its strides; the infini result must match.
LAYOUTS = {
    "transposed": lambda d: torch.empty(6, 40, device=d).t(),
    "sliced": lambda d: torch.empty(6, 40, device=d)[:, ::3],
    "offset": lambda d: torch.empty(100, device=d)[13:77],
    "channels_last": lambda d: torch.empty(2, 3, 4, 5, device=d).to(memory_format=torch.channels_last),
    "permuted_3d": lambda d: torch.empty(4, 5, 6, device=d).permute(2, 0, 1),
}
FILLS = {
    "uniform_": lambda t: t.uniform_(),
    "normal_": lambda t: t.normal_(),
    "bernoulli_": lambda t: t.bernoulli_(0.5),
    "exponential_": lambda t: t.exponential_(),
    "random_": lambda t: t.random_(0, 100),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("fill", sorted(FILLS))
def test_strided_destinations_match_cpu(layout, fill):
    torch.manual_seed(11)
    d = LAYOUTS[layout](DEV)
    FILLS[fill](d)
    torch.manual_seed(11)
    c = LAYOUTS[layout]("cpu")
    FILLS[fill](c)
    assert d.stride() == c.stride()
    assert torch.equal(d.cpu(), c)


def test_non_dense_fill_leaves_the_gaps_alone():
    base = torch.full((6, 40), -7.0, device=DEV)
    base[:, ::3].uniform_()
    host = base.cpu()
    mask = torch.ones(6, 40, dtype=torch.bool)
    mask[:, ::3] = False
    assert (host[mask] == -7.0).all()
    assert ((host[:, ::3] >= 0) & (host[:, ::3] < 1)).all()


def test_empty_tensors():
    assert torch.rand(0, device=DEV).shape == (0,)
    assert torch.empty(3, 0, device=DEV).normal_().shape == (3, 0)
    assert torch.randperm(0, device=DEV).shape == (0,)


# --- statistics (large samples; bounds several standard errors wide) --------


N = 200_000


def test_uniform_and_rand_statistics():
    x = torch.rand(N, device=DEV).cpu().double()
    assert 0 <= x.min() and x.max() < 1
    assert abs(x.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(x.var() - 1 / 12) < 0.003
    y = torch.empty(N, device=DEV).uniform_(-3, 5).cpu().double()
    assert -3 <= y.min() and y.max() < 5
    assert abs(y.mean() - 1) < 0.05


def test_normal_statistics():
    x = torch.randn(N, device=DEV).cpu().double()
    assert abs(x.mean()) < 5 / math.sqrt(N)
    assert abs(x.std() - 1) < 0.01
    y = torch.empty(N, device=DEV).normal_(3, 0.5).cpu().double()
    assert abs(y.mean() - 3) < 0.01 and abs(y.std() - 0.5) < 0.005


def test_exponential_statistics():
    x = torch.empty(N, device=DEV).exponential_(4.0).cpu().double()
    assert x.min() >= 0
    assert abs(x.mean() - 0.25) < 0.005


def test_bernoulli_rate():
    for p in (0.1, 0.5, 0.9):
        x = torch.empty(N, device=DEV).bernoulli_(p).cpu()
        assert set(x.unique().tolist()) <= {0.0, 1.0}
        assert abs(x.mean().item() - p) < 5 * math.sqrt(p * (1 - p) / N)
    p = torch.tensor([0.0, 1.0]).repeat(N // 2).to(DEV)
    assert torch.equal(torch.bernoulli(p).cpu(), p.cpu())


def test_randint_range_and_spread():
    x = torch.randint(3, 13, (N,), device=DEV).cpu()
    assert x.min() == 3 and x.max() == 12
    counts = torch.bincount(x - 3, minlength=10).double()
    assert (counts - N / 10).abs().max() < 5 * math.sqrt(N / 10)


def test_randperm_is_a_permutation():
    for n in (1, 2, 100, 50_000):
        p = torch.randperm(n, device=DEV).cpu()
        assert p.dtype == torch.int64
        assert torch.equal(p.sort().values, torch.arange(n))


def test_multinomial_respects_weights():
    w = torch.tensor([0.0, 1.0, 3.0, 0.0]).to(DEV)
    s = torch.multinomial(w, N, replacement=True).cpu()
    assert set(s.unique().tolist()) == {1, 2}
    assert abs((s == 2).double().mean() - 0.75) < 0.01
    u = torch.multinomial(torch.ones(10).to(DEV), 10).cpu()
    assert torch.equal(u.sort().values, torch.arange(10))


# --- errors -----------------------------------------------------------------


def test_arguments_are_checked_as_on_cpu():
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, device=DEV).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device=DEV).normal_(0, -1)
    with pytest.raises(RuntimeError):
        torch.empty(3, device=DEV).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="negative dimension -1"):  # as on the CPU
        torch.randperm(-1, device=DEV)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        torch.multinomial(torch.ones(3).to(DEV), 5)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(torch.zeros(3).to(DEV), -1.0)


def test_internal_overlap_is_refused():
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.zeros(1, device=DEV).expand(4).uniform_()


# --- ordering on the stream -------------------------------------------------


def test_draw_is_queued_on_the_current_stream():
    """The copy of the drawn numbers is queued behind the stream's earlier
    work: it neither waits for it on the host nor overtakes it."""
    s = torch.infini.current_stream()
    x = torch.zeros(1 << 16, device=DEV)
    hold(s, 200)
    torch.manual_seed(3)
    x.uniform_()
    assert not s.query()  # returned while the stream is still held
    torch.manual_seed(3)
    assert torch.equal(x.cpu(), torch.rand(1 << 16))


def test_draw_on_a_side_stream_then_wait():
    side = torch.infini.Stream()
    torch.manual_seed(4)
    with torch.infini.stream(side):
        hold(side, 100)
        x = torch.randn(1000, device=DEV)
    torch.infini.current_stream().wait_stream(side)
    y = x + 0  # ordered after the draw by wait_stream
    torch.manual_seed(4)
    assert torch.equal(y.cpu(), torch.randn(1000))


# --- modules ----------------------------------------------------------------


def test_linear_builds_on_the_device_like_on_cpu():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3, device="infini")
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    assert layer.weight.device == DEV and layer.bias.device == DEV
    assert torch.equal(layer.weight.detach().cpu(), ref.weight.detach())
    assert torch.equal(layer.bias.detach().cpu(), ref.bias.detach())


def test_linear_trains_on_the_device():
    needs_kernels("aten::addmm", "aten::mm", "aten::mse_loss", "aten::mse_loss_backward", "aten::sum.dim_IntList")
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3, device="infini")
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    x, target = torch.randn(8, 4), torch.randn(8, 3)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        unserved_skips(lambda: F.mse_loss(layer(x.to(DEV)), target.to(DEV)).backward())
        F.mse_loss(ref(x), target).backward()
        opt.step()
        ref_opt.step()
    torch.testing.assert_close(layer.weight.detach().cpu(), ref.weight.detach())
    torch.testing.assert_close(layer.bias.detach().cpu(), ref.bias.detach())


def test_native_dropout_matches_cpu():
    needs_kernels("aten::mul.Tensor")
    x = torch.randn(6, 50)
    torch.manual_seed(21)
    out, mask = torch.native_dropout(x.to(DEV), 0.3, True)
    torch.manual_seed(21)
    ref_out, ref_mask = torch.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and torch.equal(mask.cpu(), ref_mask)
    torch.testing.assert_close(out.cpu(), ref_out)


def test_native_dropout_outside_training_and_empty():
    x = torch.randn(3, 4).to(DEV)
    out, mask = torch.native_dropout(x, 0.5, False)
    assert out.data_ptr() != x.data_ptr() and torch.equal(out.cpu(), x.cpu())
    assert mask.dtype == torch.bool and bool(mask.cpu().all())
    e = torch.empty(0, 3, device=DEV)
    assert torch.native_dropout(e, 0.5, True)[0] is e


def test_dropout_modules_in_training_match_cpu():
    needs_kernels("aten::mul.Tensor")
    x = torch.randn(8, 64)
    for seed, p in ((31, 0.1), (32, 0.5)):
        torch.manual_seed(seed)
        got = F.dropout(x.to(DEV), p, training=True).cpu()
        torch.manual_seed(seed)
        want = F.dropout(x, p, training=True)
        torch.testing.assert_close(got, want)
        assert torch.equal(got == 0, want == 0)
    drop = torch.nn.Dropout(0.25).train()
    torch.manual_seed(1)
    got = drop(x.to(DEV)).cpu()
    torch.manual_seed(1)
    torch.testing.assert_close(got, drop(x))
    kept = (got != 0).double().mean().item()
    assert abs(kept - 0.75) < 0.05


def test_dropout_backward_uses_the_mask():
    needs_kernels("aten::mul.Tensor", "aten::native_dropout_backward")
    x = torch.randn(4, 32, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    torch.manual_seed(2)
    unserved_skips(lambda: F.dropout(xd, 0.4, training=True).sum().backward())
    torch.manual_seed(2)
    F.dropout(x, 0.4, training=True).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


# Random operators with a Generator argument and no kernel of their own: they
# synchronize and draw on the host from the infini generator's CPU state.
GENERATOR_OPS = {
    "poisson": lambda t: torch.poisson(t.abs() * 3),
    "binomial": lambda t: torch.binomial(torch.full_like(t, 5.0), t.abs().clamp(max=1)),
    "standard_gamma": lambda t: torch._standard_gamma(t.abs() + 0.5),
    "sample_dirichlet": lambda t: torch._sample_dirichlet(t.abs() + 0.5),
    "rrelu": lambda t: torch.nn.functional.rrelu(t, training=True),
}


@pytest.mark.parametrize("name", sorted(GENERATOR_OPS))
def test_generator_operators_draw_the_cpus_numbers(name, rng_states_kept):
    fn = GENERATOR_OPS[name]
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    xd = x.to(DEV)
    torch.manual_seed(7)
    want = fn(x)
    torch.manual_seed(7)
    got = fn(xd)
    assert got.device == DEV
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    gen = torch.Generator(DEV).manual_seed(11)
    if name == "poisson":
        torch.testing.assert_close(torch.poisson(xd.abs(), generator=gen).cpu(),
                                   torch.poisson(x.abs(), generator=torch.Generator().manual_seed(11)), rtol=0, atol=0)


@pytest.mark.parametrize("make", [
    pytest.param(lambda d: torch.randint(0, 3, (0,), dtype=torch.complex64, device=d), id="randint_complex"),
    pytest.param(lambda d: torch.rand(0, dtype=torch.int64, device=d), id="rand_int64"),
    pytest.param(lambda d: torch.empty(0, dtype=torch.bool, device=d).uniform_(), id="uniform_bool"),
    pytest.param(lambda d: torch.empty(0, 3, dtype=torch.float32, device=d).uniform_(2.0, 1.0), id="uniform_bounds"),
])
def test_empty_draws_make_cpu_checks(make):
    """An empty draw draws nothing, but CPU checks its dtype and bounds all the
    same: infini raises the same error type with CPU's message."""
    with pytest.raises(Exception) as cpu:
        make("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        make("infini")
    assert str(dev.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_empty_draws_leave_the_generator_as_it_was():
    torch.infini.manual_seed(7)
    state = torch.infini.get_rng_state()
    torch.rand(0, device="infini")
    torch.empty(0, dtype=torch.int64, device="infini").random_(0, 5)
    assert torch.equal(torch.infini.get_rng_state(), state)
