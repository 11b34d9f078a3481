"""A decomposition's replay (csrc/ops/aten/decomposition_replay.h).

On the Infini stack an overload InfiniOps lacks runs as PyTorch's Python
decomposition; its first run for a key is recorded at the dispatcher and
later calls of that key replay the recorded operator calls from C++. The
host runtime has a kernel for every overload, so these tests drive the
stack's path directly (``_C._decompose_as_kernel_for_test``: the same
replay cache, recorder and checks), with CPU's kernels as the oracle: every
call, recorded or replayed, must be CPU's, and a call whose decomposition
read what the key does not hold (a value, a data-dependent shape) must run
its Python again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from torch_infini import _C, decompositions
from infini_testing import DEV, on_host

aten = torch.ops.aten


def _as_kernel(overload: torch._ops.OpOverload, *args, **kwargs):
    schema = overload._schema
    got = _C._decompose_as_kernel_for_test(schema.name, schema.overload_name, *args, **kwargs)
    if isinstance(got, str) and not on_host() and "InfiniOps" in got:
        pytest.skip(f"an operator the decomposition calls is unserved on this InfiniOps build: {got}")
    assert not isinstance(got, str), f"refused: {got}"
    return got


def _on_device(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEV)
    if isinstance(value, list):
        return [_on_device(v) for v in value]
    return value


def _counts() -> dict[str, int]:
    recorded, replayed, not_replayable = _C._decomposition_replay_counts()
    return {"recorded": recorded, "replayed": replayed, "not_replayable": not_replayable}


def _delta(before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in _counts().items()}


def _programs(overload: torch._ops.OpOverload) -> tuple[int, list[str]]:
    """(replayable programs, why each other key's runs are not) for the
    overload."""
    schema = overload._schema
    return _C._decomposition_replays_of(schema.name + (f".{schema.overload_name}" if schema.overload_name else ""))


def _assert_cpus(got, expected) -> None:
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e is None:  # an undefined result (a gradient not asked for)
            assert g is None
            continue
        assert g.device.type == "infini"
        assert (g.dtype, g.shape, g.stride()) == (e.dtype, e.shape, e.stride())
        torch.testing.assert_close(g.cpu(), e, rtol=1.3e-6, atol=1e-5)


# Overloads whose decompositions read only what the key holds, with a
# maker of new arguments of the same metadata: each is recorded once, then
# replayed.
REPLAYED = {
    "native_layer_norm": (aten.native_layer_norm.default,
                          lambda: (torch.randn(2, 12, 32), [32], torch.randn(32), torch.randn(32), 1e-5)),
    "native_layer_norm_backward": (aten.native_layer_norm_backward.default,
                                   lambda: (torch.randn(3, 8), torch.randn(3, 8), [8], torch.randn(3, 1),
                                            torch.rand(3, 1) + 0.5, torch.randn(8), torch.randn(8),
                                            [True, True, True])),
    "var_mean": (aten.var_mean.correction, lambda: (torch.randn(2, 6, 4), [1, 2])),
    "trace": (aten.trace.default, lambda: (torch.randn(5, 5),)),
    "flip": (aten.flip.default, lambda: (torch.randn(2, 3, 4), [0, 2])),
    "roll": (aten.roll.default, lambda: (torch.randn(2, 3, 4), [1, -2], [1, 2])),
    "hardswish_backward": (aten.hardswish_backward.default, lambda: (torch.randn(7), torch.randn(7) * 4)),
    "pixel_shuffle": (aten.pixel_shuffle.default, lambda: (torch.randn(1, 8, 3, 3), 2)),
    "embedding_dense_backward": (aten.embedding_dense_backward.default,
                                 lambda: (torch.randn(2, 5, 4), torch.randint(0, 10, (2, 5)), 10, -1, False)),
    # Undefined results: the gradient of the input is not asked for.
    "convolution_backward_of_weight_and_bias": (
        aten.convolution_backward.default,
        lambda: (torch.randn(1, 2, 3, 3), torch.randn(1, 3, 5, 5), torch.randn(2, 3, 3, 3), [2], [1, 1], [0, 0],
                 [1, 1], False, [0, 0], 1, [False, True, True])),
    # An operator whose shape may depend on the data, called where its meta
    # function computes it from the arguments' metadata.
    "index_by_integers": (aten.index.Tensor, lambda: (torch.randn(4, 5), [None, torch.randint(0, 5, (3,))])),
    "native_dropout_backward": (aten.native_dropout_backward.default,
                                lambda: (torch.randn(4, 5), torch.rand(4, 5) > 0.5, 2.0)),
}


@pytest.mark.parametrize("case", sorted(REPLAYED))
def test_a_repeated_call_is_replayed_and_is_cpus(case):
    overload, make = REPLAYED[case]
    before = _counts()
    for _ in range(3):  # recorded, then replayed twice, each on new values
        args = make()
        expected = overload(*args)
        got = _as_kernel(overload, *[_on_device(a) for a in args])
        _assert_cpus(got, expected)
    delta = _delta(before)
    assert delta["replayed"] >= 2, delta
    assert _programs(overload)[0] >= 1


# Decompositions that read values (a data-dependent shape, a count): each
# call runs the Python code, and is CPU's for its own values.
NOT_REPLAYED = {
    "nonzero": (aten.nonzero.default, lambda: (torch.randn(4, 5) > 0,)),
    "index_by_mask": (aten.index.Tensor, lambda: (torch.randn(4, 5), [torch.randn(4) > 0])),
    "masked_select": (aten.masked_select.default, lambda: (torch.randn(3, 4), torch.randn(4) > 0)),
    "unique": (aten._unique2.default, lambda: (torch.randint(0, 6, (9,)), True, True, True)),
}


@pytest.mark.parametrize("case", sorted(NOT_REPLAYED))
def test_a_decomposition_reading_values_runs_its_python_each_call(case):
    overload, make = NOT_REPLAYED[case]
    replayable_before, why_not_before = _programs(overload)  # other keys' (another test's)
    shapes = set()
    for i in range(4):
        torch.manual_seed(i)
        args = make()
        expected = overload(*args)
        got = _as_kernel(overload, *[_on_device(a) for a in args])
        _assert_cpus(got, expected)
        # (Its parts may be replayed: on the stack some decompose too.)
        replayable, why_not = _programs(overload)
        assert replayable == replayable_before and len(why_not) > len(why_not_before)
        assert all(any(reason in why for reason in ("what the data decides", "returns a", "to the host"))
                   for why in why_not), why_not
        shapes.add(tuple(tuple(t.shape) for t in (got if isinstance(got, (tuple, list)) else [got])))
    assert len(shapes) > 1, "the cases' values should give results of several shapes"


def test_each_number_argument_is_its_own_key():
    x = torch.randn(3, 8)
    for eps in (1e-5, 1e-1, 1e-5, 10.0):
        expected = aten.native_layer_norm.default(x, [8], None, None, eps)
        _assert_cpus(_as_kernel(aten.native_layer_norm.default, x.to(DEV), [8], None, None, eps), expected)
    for alpha in (2, 3, 2, -1):
        a, b = torch.randn(5), torch.randn(5)
        expected = aten.sub.Tensor(a, b, alpha=alpha)
        _assert_cpus(_as_kernel(aten.sub.Tensor, a.to(DEV), b.to(DEV), alpha=alpha), expected)


def test_a_cpu_scalar_argument_is_keyed_by_its_value():
    """A CPU scalar's value can be read on the host without an operator
    call (float(t)): a replay is for that value only."""
    x = torch.randn(6)
    for value in (2.0, -3.0, 2.0):
        other = torch.tensor(value)
        expected = aten.sub.Tensor(x, other)
        _assert_cpus(_as_kernel(aten.sub.Tensor, x.to(DEV), other), expected)


def test_the_default_dtype_is_part_of_the_key():
    """linspace's result dtype is the default dtype: a replay recorded under
    float32 is not the call under float64."""
    previous = torch.get_default_dtype()
    try:
        for dtype in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(dtype)
            expected = aten.linspace.default(-1.0, 2.0, 7)
            got = _as_kernel(aten.linspace.default, -1.0, 2.0, 7, device=torch.device(DEV))
            assert got.dtype == dtype
            _assert_cpus(got, expected)
    finally:
        torch.set_default_dtype(previous)


def test_offsets_and_aliasing_are_replayed_as_called():
    base = torch.randn(4, 6)
    on_device = base.to(DEV)
    for rows in (slice(0, 2), slice(2, 4), slice(1, 3)):  # one key per offset
        _assert_cpus(_as_kernel(aten.flip.default, on_device[rows], [1]), aten.flip.default(base[rows], [1]))
    x = torch.randn(5)
    d = x.to(DEV)
    _assert_cpus(_as_kernel(aten.sub.Tensor, d, d, alpha=2), aten.sub.Tensor(x, x, alpha=2))
    y = torch.randn(5)
    _assert_cpus(_as_kernel(aten.sub.Tensor, d, y.to(DEV), alpha=2), aten.sub.Tensor(x, y, alpha=2))


def test_an_out_overload_is_written_by_each_replay():
    for _ in range(3):
        x = torch.randn(3, 4)
        out = torch.empty(3, 4, device=DEV)
        got = _as_kernel(aten.flip.out, x.to(DEV), [0], out=out)
        assert got.data_ptr() == out.data_ptr()
        torch.testing.assert_close(out.cpu(), torch.flip(x, [0]))


def test_a_replay_skips_the_meta_calls_that_only_learned_metadata():
    """arange's decomposition learns its length from a meta arange (whose
    checks are CPU's); the replay skips that call and the meta tensor it
    wrote, and still gives CPU's values, each call a new out."""
    before = _counts()
    for _ in range(3):
        out = torch.empty(0, dtype=torch.int64, device=DEV)
        got = _as_kernel(aten.arange.start_out, 3, 40, 3, out=out)
        assert got.data_ptr() == out.data_ptr()
        assert torch.equal(out.cpu(), torch.arange(3, 40, 3))
    assert _delta(before)["replayed"] == 2
    programs = _C._decomposition_replayed_operators_of("aten::arange.start_out")
    assert programs and all(ops for ops in programs), programs
    for ops in programs:
        assert "aten::arange.start_out" not in ops and "aten::empty.memory_format" not in ops, ops


def test_a_warning_is_issued_by_every_call():
    """The replay would not warn: a run that warned runs its Python each
    time (arange's resize of a non-empty out of another size)."""
    for _ in range(2):
        out = torch.empty(3, device=DEV)
        with pytest.warns(UserWarning, match="will be resized"):
            _as_kernel(aten.arange.start_out, 0, 5, 1, out=out)
        torch.testing.assert_close(out.cpu(), torch.arange(0.0, 5.0))


def _with_decomposition(monkeypatch, name: str, fn) -> None:
    table = dict(decompositions.decomposition_table())
    table[name] = fn
    monkeypatch.setattr(decompositions, "_table", table)


@pytest.mark.parametrize("reads", ["item", "tolist", "cpu"])
def test_a_decomposition_reading_a_value_on_the_host_is_not_replayed(monkeypatch, reads):
    """A value read back into Python may steer the code: such a run is
    never replayed, whichever way it reads it."""
    def trace(x):
        d = torch.diagonal(x)
        total = {"item": lambda: d.sum().item(), "tolist": lambda: sum(d.tolist()),
                 "cpu": lambda: float(d.cpu().sum())}[reads]()
        return d.sum() * 0 + total if total > 0 else d.sum()

    _with_decomposition(monkeypatch, "aten::trace", trace)
    for i in range(3):
        torch.manual_seed(i)
        x = torch.randn(4, 4)
        got = _as_kernel(aten.trace.default, x.to(DEV))
        torch.testing.assert_close(got.cpu(), torch.trace(x))
        replayable, why_not = _programs(aten.trace.default)
        assert replayable == 0 and len(why_not) == 1
        assert any(reason in why_not[0] for reason in ("what the data decides", "returns a", "to the host")), why_not


def test_a_decomposition_declining_its_arguments_is_not_run(monkeypatch):
    """PyTorch's decompositions may return NotImplemented for arguments
    they do not take (adaptive_max_pool's): the call is not decomposed."""
    x = torch.randn(3, 3)
    _with_decomposition(monkeypatch, "aten::trace", lambda t: NotImplemented)
    schema = aten.trace.default._schema
    assert _C._decompose_as_kernel_for_test(schema.name, schema.overload_name, x.to(DEV)) == ""
    monkeypatch.undo()  # the table again: trace decomposes again
    torch.testing.assert_close(_as_kernel(aten.trace.default, x.to(DEV)).cpu(), torch.trace(x))


def test_a_decomposition_declining_some_sizes_still_serves_the_others(monkeypatch):
    """Declining is per call (adaptive_max_pool's declines sizes that do not
    divide): after an odd-sized call it declined, an even-sized one of the
    same overload, ranks and dtype is decomposed, as CPU computes it."""
    def trace(t):
        return NotImplemented if t.shape[0] % 2 else torch.diagonal(t).sum()
    _with_decomposition(monkeypatch, "aten::trace", trace)
    schema = aten.trace.default._schema
    for _ in range(2):  # the second time from whatever the first left
        assert _C._decompose_as_kernel_for_test(schema.name, schema.overload_name,
                                                torch.randn(3, 3).to(DEV)) == ""
        x = torch.randn(4, 4)
        torch.testing.assert_close(_as_kernel(aten.trace.default, x.to(DEV)).cpu(), torch.trace(x))


def test_replacing_the_table_forgets_the_recorded_runs(monkeypatch):
    x = torch.randn(3, 3)
    for _ in range(2):
        torch.testing.assert_close(_as_kernel(aten.trace.default, x.to(DEV)).cpu(), torch.trace(x))
    _with_decomposition(monkeypatch, "aten::trace", lambda t: torch.diagonal(t).sum() * 2)
    torch.testing.assert_close(_as_kernel(aten.trace.default, x.to(DEV)).cpu(), torch.trace(x) * 2)


_VERIFY = textwrap.dedent("""
    import torch, torch_infini
    from torch_infini import _C, decompositions
    aten = torch.ops.aten
    def call(x):
        s = aten.trace.default._schema
        return _C._decompose_as_kernel_for_test(s.name, s.overload_name, x)
    x = torch.randn(4, 4)
    got = call(x.to("infini"))
    if isinstance(got, str):
        print("refused:", got)
        raise SystemExit(0)
    for _ in range(3):
        torch.testing.assert_close(call(x.to("infini")).cpu(), torch.trace(x))
    print("verified", _C._decomposition_replay_counts())
    # Code reading what the key does not hold: the next hit differs.
    flag = {"double": False}
    table = dict(decompositions.decomposition_table())
    def trace(t):
        return torch.diagonal(t).sum() * (2 if flag["double"] else 1)
    table["aten::trace"] = trace
    decompositions._table = table
    call(x.to("infini"))
    flag["double"] = True
    call(x.to("infini"))
""")


def test_the_verification_mode_records_each_hit_again_and_finds_a_difference():
    env = dict(os.environ, TORCH_INFINI_VERIFY_CACHES="1")
    result = subprocess.run([sys.executable, "-c", _VERIFY], env=env, capture_output=True, text=True, timeout=300)
    if result.returncode == 0 and result.stdout.startswith("refused:") and not on_host():
        pytest.skip(f"trace's decomposition calls an operator unserved on this InfiniOps build: {result.stdout}")
    assert "verified" in result.stdout, result.stderr
    assert result.returncode != 0
    assert "decomposition replays" in result.stderr and "aten::trace" in result.stderr, result.stderr


_WARNED_ONCE = textwrap.dedent("""
    import warnings
    import torch, torch_infini
    from torch_infini import _C, decompositions
    aten = torch.ops.aten
    # A decomposition that warns on its first run only, as PyTorch's
    # TORCH_WARN_ONCE warnings do (searchsorted's of a non-contiguous input,
    # inside isin's decomposition).
    warned = {"yet": False}
    def trace(t):
        if not warned["yet"]:
            warned["yet"] = True
            warnings.warn("once per process")
        return torch.diagonal(t).sum()
    table = dict(decompositions.decomposition_table())
    table["aten::trace"] = trace
    decompositions._table = table
    s = aten.trace.default._schema
    x = torch.randn(4, 4)
    for _ in range(3):
        got = _C._decompose_as_kernel_for_test(s.name, s.overload_name, x.to("infini"))
        if isinstance(got, str):
            print("refused:", got)
            raise SystemExit(0)
        torch.testing.assert_close(got.cpu(), torch.trace(x))
    print("verified", _C._decomposition_replay_counts())
""")


def test_a_warning_issued_once_per_process_is_not_a_stale_replay():
    """A run that warned is not replayed; a later run of the same key that
    does not warn (the warning is PyTorch's once per process) records a
    replayable sequence. Which warnings have fired is no key's, and running
    the Python every time is right either way: the verification mode takes
    it, where it raised "stale" before."""
    env = dict(os.environ, TORCH_INFINI_VERIFY_CACHES="1")
    result = subprocess.run([sys.executable, "-W", "always", "-c", _WARNED_ONCE], env=env, capture_output=True,
                            text=True, timeout=300)
    if result.returncode == 0 and result.stdout.startswith("refused:") and not on_host():
        pytest.skip(f"trace's decomposition calls an operator unserved on this InfiniOps build: {result.stdout}")
    assert result.returncode == 0, result.stderr
    assert "verified" in result.stdout, result.stderr
