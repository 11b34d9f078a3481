"""The verification mode of the call path's caches
(TORCH_INFINI_VERIFY_CACHES=1, docs/caches.md): every cache hit recomputes
its answer and compares. Run over the tests that change state between
calls of the same operation, and a sample of OpInfo under another default
dtype: they pass, every hit agrees, and there were hits to verify.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_python

TESTS = Path(__file__).resolve().parent
VERIFIED_FILES = [
    "ops/test_cache_state.py",
    "ops/test_default_dtype_opinfo.py",
    "ops/test_repeated_calls.py",
]


def test_the_state_tests_and_an_opinfo_sample_under_verification():
    env = dict(os.environ, TORCH_INFINI_VERIFY_CACHES="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         *[str(TESTS / f) for f in VERIFIED_FILES]],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=1200)
    tail = result.stdout[-3000:]
    assert result.returncode == 0, tail + result.stderr[-2000:]
    found = re.search(r"cache verification: (\d+) hits verified, (\d+) differences", result.stdout)
    assert found, tail
    verified, differences = int(found.group(1)), int(found.group(2))
    assert differences == 0 and verified > 100, tail


def test_a_hit_under_another_state_is_recomputed_not_reused():
    """int / int is of the default dtype. Where the stack has no kernel for
    div (InfiniOps WITH_TORCH=OFF), every call is refused alike, and the
    hits verified are the refused-decompositions cache's, keyed by the
    default dtype too."""
    result = run_python("""
        import torch, torch_infini
        a = torch.arange(1, 7, dtype=torch.int32).reshape(2, 3).to('infini')
        def divided_dtype():
            try:
                return (a / a).dtype
            except NotImplementedError as refusal:
                assert 'InfiniOps' in str(refusal) and 'aten::div' in str(refusal), refusal
                return 'refused'
        got = [divided_dtype() for _ in range(3)]
        torch.set_default_dtype(torch.float64)
        got += [divided_dtype() for _ in range(2)]
        assert got in ([torch.float32] * 3 + [torch.float64] * 2, ['refused'] * 5), got
        counts = torch_infini._C._cache_verification()
        # 3 hits (a second and third call, then a second under float64): the
        # layouts cache's, or the refused decompositions'; the Infini
        # stack's binding adds its own caches' hits.
        assert counts['enabled'] and counts['verified'] >= 3 and counts['differences'] == 0, counts
        print('OK')
    """, env={"TORCH_INFINI_VERIFY_CACHES": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def test_the_mode_is_off_by_default():
    """In a process started without the variable (the suite itself may run
    under the mode)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_INFINI_VERIFY_CACHES"}
    result = subprocess.run(
        [sys.executable, "-c", "import torch_infini; print(torch_infini._C._cache_verification())"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(
        {"enabled": False, "verified": 0, "differences": 0, "verified_by_cache": {}})


def test_an_aliased_call_is_tried_on_cpu_once_per_key_and_every_hit_verified():
    """A written argument that is the memory of one the call reads
    (torch.mul(x, 0.5, out=x); an optimizer's foreach x.mul_(beta) runs so on
    the Infini stack; on the host runtime, where mul is an entry of the
    element-wise table and never reaches the generic kernel,
    torch.div(x, 2.0, out=x)): CPU's verdict on copies aliased alike
    (ops/aten/aten_cpu_checks.h, cpu_error_on_aliases) is remembered where CPU
    accepts. A call laid out by a meta run asks: on the host runtime, every
    call queued while a graph is captured. Under the mode each repeat of the
    call is a hit tried again; a call CPU refuses, aliased as index_select
    into its own input is, raises CPU's error after accepted ones; and the
    replayed work equals CPU's."""
    result = run_python("""
        import torch, torch_infini
        graphs = torch_infini.diagnostics()['capabilities']['graphs']
        if torch_infini.diagnostics()['provider'] == 'host':
            def halve(t):
                torch.div(t, 2.0, out=t)
        else:  # InfiniOps without ATen (WITH_TORCH=OFF) has no div
            def halve(t):
                torch.mul(t, 0.5, out=t)

        def laid_out_by_meta(fn):
            # The host runtime: captured, then replayed. The Infini stack
            # lays out every call by a meta run.
            if not graphs:
                fn()
                return
            graph = torch.infini.InfiniGraph()
            with torch.infini.graph(graph):
                fn()
            graph.replay()

        x_cpu = torch.randn(4, 3)
        x = x_cpu.to('infini')
        def three_halvings():
            for _ in range(3):
                halve(x)
        laid_out_by_meta(three_halvings)
        for _ in range(3):
            torch.mul(x_cpu, 0.5, out=x_cpu)
        assert torch.equal(x.cpu(), x_cpu), (x.cpu(), x_cpu)
        hits = torch_infini._C._cache_verification()
        assert hits['differences'] == 0, hits
        assert hits['verified_by_cache'].get('aliased calls CPU accepts', 0) >= 2, hits

        def error_of(x, index):
            try:
                torch.index_select(x, 0, index, out=x)
            except RuntimeError as e:
                return str(e)
            return None
        cpu_error = error_of(torch.randn(4, 3), torch.tensor([0, 1, 2, 3]))
        assert cpu_error is not None
        y = torch.randn(4, 3, device='infini')
        index = torch.tensor([0, 1, 2, 3], device='infini')
        errors = []
        def refused_among_accepted():
            for _ in range(2):
                errors.append(error_of(y, index))
                halve(y)
        laid_out_by_meta(refused_among_accepted)
        assert errors == [cpu_error] * 2, (errors, cpu_error)
        print('OK')
    """, env={"TORCH_INFINI_VERIFY_CACHES": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def test_a_refusal_within_another_decomposition_is_cached_apart():
    """An overload met again within its own decomposition is not decomposed
    again, so what a decomposition is refused for depends on the
    decompositions running around it (on an Infini stack without arange,
    arange's decomposition calls cumsum, whose decomposition calls arange).
    Here tril and triu decompose into each other (on any provider, through
    the kernels' hook): triu refused alone, then within tril, must not give
    the refusal cached for the other; a second tril reproduces its own."""
    result = run_python("""
        import torch, torch_infini
        from torch_infini import _C, decompositions

        def as_the_other(name):
            def run(x, diagonal=0):
                got = _C._decompose_as_kernel_for_test(name, '', x, diagonal)
                if isinstance(got, str):
                    raise NotImplementedError(f'{name} refused ({got})')
                return got
            return run

        table = dict(decompositions.decomposition_table())
        table['aten::tril'] = as_the_other('aten::triu')
        table['aten::triu'] = as_the_other('aten::tril')
        decompositions._table = table
        x = torch.ones(3, 3).to('infini')
        refused = [_C._decompose_as_kernel_for_test(name, '', x, 0) for name in ('aten::triu', 'aten::tril', 'aten::tril')]
        assert refused == ['aten::tril refused (aten::triu refused ())',
                           'aten::triu refused (aten::tril refused ())',
                           'aten::triu refused (aten::tril refused ())'], refused
        counts = _C._cache_verification()
        assert counts['verified'] >= 1 and counts['differences'] == 0, counts
        print('OK')
    """, env={"TORCH_INFINI_VERIFY_CACHES": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def run_index_select_program(program: str) -> None:
    """Runs ``program`` under the mode: it prints OK, or UNSERVED where this
    build's InfiniOps has no index_select (the test is then skipped)."""
    result = run_python(program, env={"TORCH_INFINI_VERIFY_CACHES": "1"})
    assert result.returncode == 0, result.stderr
    if result.stdout.strip() == "UNSERVED":
        pytest.skip("index_select is not served by this build's InfiniOps")
    assert result.stdout.strip() == "OK"


def test_an_error_of_the_values_is_not_a_stale_hit():
    """A queued call whose device values CPU refuses (an index out of range)
    raises at the next synchronization, as on CUDA. The mode's recompute
    with those values raises too: that is the data, not the key, so the hit
    verifies against CPU's checks on zero-filled copies, and the error
    still reaches the synchronizing call."""
    run_index_select_program("""
        import torch, torch_infini
        x = torch.randn(4, 3).to('infini')
        try:
            x.index_select(0, torch.tensor([0, 1]).to('infini'))  # learned
        except NotImplementedError:  # a stack whose InfiniOps lacks it
            print('UNSERVED')
            raise SystemExit
        torch.infini.synchronize()
        index = torch.tensor([0, 7]).to('infini')
        try:
            # Queued, raised at the read; where streams run each call as it
            # is made (the Infini stack's CPU backend), at the call.
            x.index_select(0, index).cpu()
            raised = None
        except (RuntimeError, IndexError) as e:
            raised = str(e)
        assert raised is not None and 'out of range' in raised, raised
        counts = torch_infini._C._cache_verification()
        if torch_infini._C._provider_info()["capabilities"]["async_execution"]:
            assert counts['verified_by_cache'].get('layouts', 0) >= 1, counts
        assert counts['differences'] == 0, counts
        print('OK')
    """)


def test_an_error_pending_when_a_later_hit_is_verified_stays_the_programs():
    """The recompute of a later call's hit copies that call's device values
    to CPU, which waits on the stream where the failed call ran. That wait
    leaves the stream's error pending: the program's next synchronization
    reports it, as it does without the mode (it was taken and dropped
    there, and the failed call's output read as if nothing had failed)."""
    run_index_select_program("""
        import torch, torch_infini
        x = torch.arange(4.).to('infini') + 10
        try:
            x.index_select(0, torch.tensor([0, 1]).to('infini'))  # learned
        except NotImplementedError:  # a stack whose InfiniOps lacks it
            print('UNSERVED')
            raise SystemExit
        (x / 5).cpu()  # learned
        bad = torch.tensor([2, 99]).to('infini')
        raised = []
        try:
            x.index_select(0, bad)  # queued where streams run asynchronously
            after = x / 5  # a hit, verified by copying x to CPU
            torch.infini.current_stream().synchronize()
        except (RuntimeError, IndexError) as e:
            raised.append(str(e))
        assert len(raised) == 1 and 'out of range' in raised[0], raised
        torch.infini.synchronize()  # reported once
        assert torch.equal((x / 5).cpu(), (torch.arange(4.) + 10) / 5)
        counts = torch_infini._C._cache_verification()
        if torch_infini._C._provider_info()["capabilities"]["async_execution"]:
            assert torch.equal(after.cpu(), (torch.arange(4.) + 10) / 5)
            assert counts['verified_by_cache'].get('layouts', 0) >= 2, counts
        assert counts['differences'] == 0, counts
        print('OK')
    """)
