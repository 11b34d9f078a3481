"""torch.multiprocessing and infini tensors, against CUDA's semantics: the
receiver maps the sender's memory (in-place writes are seen on both sides),
the memory outlives the process that made it while another holds it, and
DataLoader workers started with spawn return infini tensors. Where the
provider cannot share (the Infini stack), the sending call raises, naming
the reason, Queue.put included (its pickling would fail in a feeder thread).

The spawned children run ipc_worker.py; each wait is bounded.
"""

from __future__ import annotations

import io
import multiprocessing
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.multiprocessing as mp

import torch_infini
from torch_infini import multiprocessing as infini_mp

from infini_testing import hold

from . import ipc_worker

#: Bounds every wait on a child (a spawned interpreter imports torch first).
CHILD_TIMEOUT_S = 120

SHARES = torch_infini.diagnostics()["provider"] == "host"
needs_sharing = pytest.mark.skipif(not SHARES, reason="the Infini stack cannot share device memory "
                                   "(InfiniRT has no IPC API); test_refused_on_the_stack covers it")


def _dumps(obj) -> bytes:
    buf = io.BytesIO()
    ForkingPickler(buf).dump(obj)
    return buf.getvalue()


@needs_sharing
@pytest.mark.parametrize("make", [
    lambda: torch.arange(6.0, device="infini"),
    lambda: torch.nn.Parameter(torch.arange(6.0, device="infini")),
    lambda: torch.arange(12.0, device="infini").view(3, 4).t()[1:],
    lambda: torch.arange(6, dtype=torch.int16, device="infini"),
], ids=["tensor", "parameter", "transposed_view", "int16"])
def test_a_pickled_infini_tensor_shares_its_memory(make):
    sent = make()
    expected = sent.detach().cpu()
    received = ForkingPickler.loads(_dumps(sent))
    assert type(received) is type(sent)
    assert (received.dtype, received.shape, received.stride(), received.storage_offset(),
            received.requires_grad, received.device) == \
        (sent.dtype, sent.shape, sent.stride(), sent.storage_offset(), sent.requires_grad, sent.device)
    torch.testing.assert_close(received.detach().cpu(), expected)
    with torch.no_grad():
        received.add_(1)
    torch.infini.synchronize()
    torch.testing.assert_close(sent.detach().cpu(), expected + 1)  # the same memory


@needs_sharing
def test_views_of_one_storage_arrive_as_one_storage():
    base = torch.arange(10.0, device="infini")
    a, b = ForkingPickler.loads(_dumps((base[:5], base[5:])))
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    storage = ForkingPickler.loads(_dumps(base.untyped_storage()))
    assert storage.device == base.device and storage.nbytes() == base.untyped_storage().nbytes()
    assert storage.data_ptr() == a.untyped_storage().data_ptr()


@needs_sharing
def test_sending_waits_for_queued_work():
    t = torch.zeros(1 << 16, device="infini")
    for _ in range(20):
        t.add_(1)  # queued, not yet run
    received = ForkingPickler.loads(_dumps(t))
    assert torch.equal(received.cpu(), torch.full((1 << 16,), 20.0))


@needs_sharing
def test_releasing_shared_memory_does_not_wait_for_the_device():
    """The last reference to shared device memory often goes away on a thread
    that holds the GIL, which a thread running queued work may need: the
    memory is unmapped once the streams have passed that point, and the
    release returns at once, here while another stream is held."""
    received = ForkingPickler.loads(_dumps(torch.arange(4.0, device="infini")))
    torch.infini.synchronize()
    s = torch.infini.Stream()
    hold(s, 3000)
    after_hold = torch.infini.Event()
    after_hold.record(s)
    del received  # the sender's tensor is gone already: the last reference
    returned_while_held = not after_hold.query()
    torch.infini.synchronize()
    assert returned_while_held, "releasing shared memory waited for the held stream"


@needs_sharing
def test_shared_memory_released_by_a_queued_kernel_stays_valid_for_it():
    """A queued kernel holding the last reference releases the memory on the
    thread that runs it, after it ran: the values are right and nothing
    waits for itself."""
    s = torch.infini.Stream()
    s.wait_stream(torch.infini.current_stream())
    received = ForkingPickler.loads(_dumps(torch.arange(1 << 14, dtype=torch.float32, device="infini")))
    torch.infini.synchronize()
    hold(s, 200)
    with torch.infini.stream(s):
        doubled = received * 2  # queued behind the hold, reading the shared memory
    del received
    s.synchronize()
    assert torch.equal(doubled.cpu(), torch.arange(1 << 14, dtype=torch.float32) * 2)


@needs_sharing
def test_a_spawned_childs_in_place_write_is_seen_by_the_parent():
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    t = torch.arange(4.0, device="infini")
    child = ctx.Process(target=ipc_worker.add_in_place, args=(t, done))
    child.start()
    try:
        assert done.get(timeout=CHILD_TIMEOUT_S) == "infini"
    finally:
        child.join(CHILD_TIMEOUT_S)
    assert child.exitcode == 0
    torch.testing.assert_close(t.cpu(), torch.arange(4.0) + 100)


@needs_sharing
def test_a_received_tensor_outlives_its_producer():
    ctx = mp.get_context("spawn")
    queue, release = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=ipc_worker.produce, args=(queue, release))
    child.start()
    try:
        t = queue.get(timeout=CHILD_TIMEOUT_S)
        assert t.device.type == "infini"
        t[0] = -1
        torch.infini.synchronize()
        release.put("written")
        # The producer reads our write through its own mapping.
        assert queue.get(timeout=CHILD_TIMEOUT_S) == [-1.0] + [2.0 * i for i in range(1, 8)]
        release.put("exit")
    finally:
        child.join(CHILD_TIMEOUT_S)
    assert child.exitcode == 0
    # The producer has dropped it and exited: the memory lives on here.
    t.mul_(2)
    assert t.cpu().tolist() == [-2.0] + [4.0 * i for i in range(1, 8)]


@needs_sharing
def test_dataloader_spawn_workers_return_infini_tensors():
    loader = torch.utils.data.DataLoader(ipc_worker.InfiniRange(), batch_size=2, num_workers=2,
                                         multiprocessing_context="spawn", timeout=CHILD_TIMEOUT_S)
    batches = list(loader)
    assert all(b.device.type == "infini" for b in batches)
    want = [torch.stack([torch.full((3,), float(i)) for i in (j, j + 1)]) for j in range(0, 6, 2)]
    for got, expected in zip(batches, want, strict=True):
        torch.testing.assert_close(got.cpu(), expected)


def test_refused_in_the_sending_call_where_the_provider_cannot_share(monkeypatch):
    """The stack's refusal, checked on any provider: pickling raises the
    reason, and Queue.put raises it in the caller, not in its feeder thread."""
    reason = "cannot share here: send tensor.cpu() instead"
    if SHARES:
        monkeypatch.setattr(infini_mp, "sharing_unsupported_reason", lambda: reason)
        monkeypatch.setattr(torch_infini._C, "_share_storage",
                            lambda t: (_ for _ in ()).throw(RuntimeError(reason)))
    else:
        reason = infini_mp.sharing_unsupported_reason()
        assert "InfiniRT has no IPC API" in reason and "tensor.cpu()" in reason
    t = torch.ones(3, device="infini")
    with pytest.raises(RuntimeError) as info:
        _dumps(t)
    assert str(info.value) == reason
    queue = multiprocessing.get_context("spawn").Queue()
    with pytest.raises(RuntimeError) as info:
        queue.put({"batch": [t]})
    assert str(info.value) == reason
    queue.put(torch.ones(3))  # CPU tensors still go
    assert torch.equal(queue.get(timeout=CHILD_TIMEOUT_S), torch.ones(3))


def test_cpu_tensors_still_share():
    t = torch.arange(6.0)
    shared = ForkingPickler.loads(_dumps(t))
    assert torch.equal(shared, t)
    assert shared.is_shared()
