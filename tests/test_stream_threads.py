"""The current stream is per thread and per device, as in torch.cuda.

Thread tests submit work concurrently from several Python threads, each on its
own current stream; per-device tests run in a subprocess with two host
devices (TORCH_INFINI_HOST_DEVICES is read once per process).
"""

from __future__ import annotations

import json
import threading

import pytest
import torch

import torch_infini
from infini_testing import hold
from conftest import run_python
from hang_guard import HANG_GUARD_S

N = 1 << 14




def _run_threads(target, count: int) -> None:
    errors: list[BaseException] = []

    def wrapped(k: int) -> None:
        try:
            target(k)
        except BaseException as e:  # noqa: BLE001  (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG_GUARD_S)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]


def test_two_threads_each_with_their_own_stream_compute_correctly(device):
    hold(torch.infini.Stream(), 0)  # skip early where the hook is unavailable
    threads = 2
    adds = 40
    barrier = threading.Barrier(threads)
    seen: dict[int, dict] = {}

    def worker(k: int) -> None:
        s = torch.infini.Stream()
        base = torch.arange(N, dtype=torch.float32) * (k + 1)
        with torch.infini.stream(s):
            x = base.to(device)  # synchronous host-to-device copy on s
            barrier.wait()  # both threads submit at the same time
            hold(s, 100)
            acc = x
            for _ in range(adds):
                acc = acc + x
            idle_before_sync = s.query()
            current = torch.infini.current_stream()
            result = acc.cpu()  # synchronizes s
        seen[k] = {
            "stream": s,
            "current": current,
            "idle_before_sync": idle_before_sync,
            "ok": torch.equal(result, base * (adds + 1)),
            "after": torch.infini.current_stream(),
        }

    _run_threads(worker, threads)
    assert seen[0]["stream"] != seen[1]["stream"]
    for k in range(threads):
        assert seen[k]["current"] == seen[k]["stream"], "each thread sees its own current stream"
        assert seen[k]["ok"], f"thread {k} computed a wrong result"
        assert seen[k]["after"] == torch.infini.default_stream()
    # the delay queued on each stream was still pending after the submissions
    assert [seen[k]["idle_before_sync"] for k in range(threads)] == [False] * threads
    assert torch.infini.current_stream() == torch.infini.default_stream()


def test_many_threads_share_a_device_without_mixing_streams(device):
    threads = 4
    rounds = 25
    results: dict[int, bool] = {}

    def worker(k: int) -> None:
        s = torch.infini.Stream()
        x = (torch.arange(N, dtype=torch.float32) + k).to(device)
        with torch.infini.stream(s):
            acc = x
            for _ in range(rounds):
                acc = acc + x
                assert torch.infini.current_stream() == s
            results[k] = torch.equal(acc.cpu(), (torch.arange(N, dtype=torch.float32) + k) * (rounds + 1))

    _run_threads(worker, threads)
    assert results == {k: True for k in range(threads)}


def test_new_thread_starts_on_the_default_stream():
    mine = torch.infini.Stream()
    seen = {}

    def worker(_k: int) -> None:
        seen["initial"] = torch.infini.current_stream()
        theirs = torch.infini.Stream()
        torch.infini.set_stream(theirs)
        seen["theirs"] = theirs
        seen["after_set"] = torch.infini.current_stream()

    torch.infini.set_stream(mine)
    try:
        _run_threads(worker, 1)
        assert torch.infini.current_stream() == mine, "another thread's set_stream leaked"
    finally:
        torch.infini.set_stream(torch.infini.default_stream())
    assert seen["initial"] == torch.infini.default_stream()
    assert seen["after_set"] == seen["theirs"]


def test_stream_context_in_a_thread_does_not_affect_the_main_thread():
    entered = threading.Event()
    release = threading.Event()
    s = torch.infini.Stream()

    def worker(_k: int) -> None:
        with torch.infini.stream(s):
            entered.set()
            release.wait(timeout=HANG_GUARD_S)

    t = threading.Thread(target=worker, args=(0,))
    t.start()
    try:
        assert entered.wait(timeout=HANG_GUARD_S)
        assert torch.infini.current_stream() == torch.infini.default_stream()
    finally:
        release.set()
        t.join(timeout=HANG_GUARD_S)


PER_DEVICE = r"""
import json, threading
import torch, torch_infini

M = torch.infini
out = {"count": M.device_count()}
hook = torch_infini._C._test_enqueue_delay
s0, s1 = M.Stream(device=0), M.Stream(device=1)
out["stream_devices"] = [s0.device_index, s1.device_index]

# the current stream is per device
M.set_stream(s1)  # like torch.cuda.set_stream: the stream's device becomes current
out["device_after_set_stream"] = M.current_device()
out["dev1_is_s1"] = M.current_stream(1) == s1
out["dev0_untouched"] = M.current_stream(0) == M.default_stream(0)
M.set_stream(M.default_stream(1))
M.set_device(0)

# the context manager selects a stream on the other device and restores both
with M.stream(s1):
    out["ctx_device"] = M.current_device()
    out["ctx_current"] = M.current_stream() == s1
    out["ctx_dev0"] = M.current_stream(0) == M.default_stream(0)
out["after_ctx_device"] = M.current_device()
out["after_ctx_dev1_default"] = M.current_stream(1) == M.default_stream(1)

# work on device 1's stream is asynchronous and independent of device 0
x = torch.arange(4096, dtype=torch.float32).to("infini:1")
with M.stream(s1):
    hook(s1.stream_id, 1, 250.0)
    y = x + x
out["dev1_pending"] = s1.query()
out["dev0_idle"] = M.default_stream(0).query()
M.synchronize(0)
out["dev1_pending_after_sync0"] = s1.query()
M.synchronize(1)
out["dev1_done_after_sync1"] = s1.query()
with M.device(1):
    out["dev1_result_ok"] = torch.equal(y.cpu(), torch.arange(4096, dtype=torch.float32) * 2)

# per thread and per device: a thread starts on device 0 with default streams
M.set_device(1)
M.set_stream(s1)
seen = {}
def worker():
    seen["device"] = M.current_device()
    seen["dev1_default"] = M.current_stream(1) == M.default_stream(1)
    M.set_device(0)
t = threading.Thread(target=worker); t.start(); t.join()
out["thread_device"] = seen["device"]
out["thread_dev1_default"] = seen["dev1_default"]
out["main_still_dev1"] = M.current_device() == 1 and M.current_stream() == s1
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def per_device() -> dict:
    proc = run_python(PER_DEVICE, env={"TORCH_INFINI_HOST_DEVICES": "2", "TORCH_INFINI_PROVIDER": "host"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_two_host_devices(per_device):
    assert per_device["count"] == 2
    assert per_device["stream_devices"] == [0, 1]


def test_current_stream_is_per_device(per_device):
    assert per_device["device_after_set_stream"] == 1
    assert per_device["dev1_is_s1"] is True
    assert per_device["dev0_untouched"] is True


def test_stream_context_on_another_device_restores_both(per_device):
    assert per_device["ctx_device"] == 1
    assert per_device["ctx_current"] is True
    assert per_device["ctx_dev0"] is True
    assert per_device["after_ctx_device"] == 0
    assert per_device["after_ctx_dev1_default"] is True


def test_devices_run_independently(per_device):
    assert per_device["dev1_pending"] is False
    assert per_device["dev0_idle"] is True
    assert per_device["dev1_pending_after_sync0"] is False
    assert per_device["dev1_done_after_sync1"] is True
    assert per_device["dev1_result_ok"] is True


def test_device_and_streams_are_per_thread(per_device):
    assert per_device["thread_device"] == 0
    assert per_device["thread_dev1_default"] is True
    assert per_device["main_still_dev1"] is True
