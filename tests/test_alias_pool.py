"""A queued call's CPU aliases are reused only when they are exactly what
a new alias would be.

On the host runtime a queued call's kernel sees its device tensors through
CPU tensors over the same memory (aliases). A thread keeps the aliases of
earlier calls and gives one to a later call whose tensor has the same memory
and layout (``AliasPool`` in ``csrc/runtime/host/host_aliases.h``). A kernel
that changed an alias (moved its storage into host memory, resized it) or a
call where two tensors share memory must still see what CPU's kernel would
see: these loops alternate such calls with plain ones over the same memory,
and every value must equal CPU's.
"""

from __future__ import annotations

import pytest
import torch

from infini_testing import DEV, on_host

pytestmark = pytest.mark.skipif(not on_host(), reason="the host runtime's queued calls (the Infini stack "
                                                      "has no CPU aliases)")


def _on_both(program):
    """``program(device)`` on CPU and on infini; their results, on the CPU."""
    cpu = program("cpu")
    infini = program(DEV)
    torch.infini.synchronize()
    return cpu, [t.cpu() for t in infini]


def test_an_output_moved_into_host_memory_is_not_reused():
    # huber_loss.out with a 0-dim output uses it as scratch of the inputs'
    # shape: the alias's storage grows into host memory and its value is
    # copied back into device memory. Later calls writing the same device
    # memory, with the same layout, must write the device memory.
    def program(device):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(64, generator=g).to(device)
        b = torch.randn(64, generator=g).to(device)
        s = torch.randn((), generator=g).to(device)
        out = torch.empty((), device=device)
        seen = []
        for step in range(4):
            torch.ops.aten.huber_loss.out(a, b * step, 1, 1.0, out=out)
            seen.append(out.clone())
            torch.mul(s, step + 2.0, out=out)
            seen.append(out.clone())
        return seen

    cpu, infini = _on_both(program)
    for expected, got in zip(cpu, infini):
        torch.testing.assert_close(got, expected)


def test_a_resized_output_is_not_reused_with_its_old_layout():
    # sum(a, 0, out=o) resizes o from [2, 3] to [3] on the first call of each
    # round; o's memory is then written with both layouts in turn.
    def program(device):
        g = torch.Generator().manual_seed(1)
        a = torch.randn(2, 3, generator=g).to(device)
        seen = []
        for step in range(4):
            o = torch.empty(2, 3, device=device)
            torch.mul(a, step, out=o)
            seen.append(o.clone())
            torch.sum(a, 0, out=o)
            seen.append(o.clone())
            o.resize_(2, 3)
            torch.add(a, step, out=o)
            seen.append(o.clone())
        return seen

    cpu, infini = _on_both(program)
    for expected, got in zip(cpu, infini):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("name,call", [
    # The output is a view of an input: CPU's kernel reads what it writes.
    ("cumsum_into_a_shifted_view", lambda x, y: torch.add(x[:-1], y[1:], out=x[1:])),
    ("two_views_of_one_storage", lambda x, y: torch.mul(x[:4], x[4:], out=y[:4])),
    ("same_tensor_twice", lambda x, y: torch.mul(x, x, out=x)),
])
def test_tensors_sharing_memory_share_it_on_the_cpu_too(name, call):
    # Plain calls first, so that the thread holds aliases of x and y; then
    # calls where one device storage appears twice.
    def program(device):
        g = torch.Generator().manual_seed(2)
        x = torch.randn(8, generator=g).to(device)
        y = torch.randn(8, generator=g).to(device)
        seen = []
        for _ in range(3):
            seen.append(torch.mul(x, y))
            try:
                call(x, y)
                seen.append(x.clone())
                seen.append(y.clone())
            except RuntimeError as e:
                seen.append(torch.tensor(len(str(e))))
        return seen

    cpu, infini = _on_both(program)
    for expected, got in zip(cpu, infini):
        torch.testing.assert_close(got, expected)
