"""Host memory per queued operation on the host runtime (not run in CI).

    python tools/queue_memory.py [--ops 1000]

For a few kinds of operation it holds the current stream (the test hook
``_test_enqueue_delay``), queues ``--ops`` of them from the main thread and
reports how much the resident set and the malloc heap in use (glibc's
mallinfo2, every arena) grew per queued operation (the operation's outputs
included, as the Python list keeps them) and how long one submission took. Then it shows the queue-depth bound at work: a producer
thread queues 10x the depth behind a hold, and the resident set is sampled
while the producer is blocked on the full queue.

Run it in a fresh process: the first trial of each kind is the honest one
(later ones reuse memory the allocator already took from the system)."""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import threading
import time

import torch

import torch_infini

DEV = torch.device("infini:0")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def heap_in_use() -> int:
    """Bytes malloc has handed out and not taken back (glibc, all arenas)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hold(stream: torch.Stream, ms: float) -> None:
    assert torch_infini._C._test_enqueue_delay(stream.stream_id, stream.device_index, float(ms)), \
        "this provider cannot hold a stream (host runtime only)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    args = parser.parse_args()
    count = min(args.ops, 1000)  # stay within the queue depth (1024)

    small = torch.zeros(4, device=DEV)
    square = torch.ones(64, 64, device=DEV)
    index = torch.tensor([0, 2], device=DEV)
    kinds = [
        ("x.add_(1)", lambda: small.add_(1)),
        ("x * 2 (new output)", lambda: small * 2),
        ("a @ a (64x64)", lambda: square @ square),
        ("index_select", lambda: small.index_select(0, index)),
        ("torch.cat", lambda: torch.cat([small, small])),
    ]
    for name, op in kinds:
        s = torch.infini.Stream()
        with torch.infini.stream(s):
            s.wait_stream(torch.infini.default_stream())
            for _ in range(3):
                op()
            s.synchronize()
            hold(s, 2_000)
            gc.collect()
            before, heap_before = rss(), heap_in_use()
            start = time.monotonic()
            keep = [op() for _ in range(count)]
            seconds = time.monotonic() - start
            grown, heap_grown = rss() - before, heap_in_use() - heap_before
        del keep
        s.synchronize()
        print(json.dumps({"op": name, "queued": count, "rss_per_queued_op_bytes": round(grown / count),
                          "heap_per_queued_op_bytes": round(heap_grown / count),
                          "submit_us_per_op": round(seconds / count * 1e6, 1)}), flush=True)

    # The bound: 10x the depth from a producer thread behind a 3 s hold.
    s = torch.infini.Stream()
    x = torch.zeros(4, device=DEV)
    x.add_(1).sub_(1)
    s.wait_stream(torch.infini.current_stream())
    progress = [0]

    def produce():
        with torch.infini.stream(s):
            for _ in range(10 * 1024):
                x.add_(1)
                progress[0] += 1

    hold(s, 3_000)
    gc.collect()
    before = rss()
    thread = threading.Thread(target=produce)
    thread.start()
    time.sleep(2.0)
    blocked_at, grown = progress[0], rss() - before
    thread.join()
    s.synchronize()
    assert torch.equal(x.cpu(), torch.full((4,), 10.0 * 1024))
    print(json.dumps({"producer_of": 10 * 1024, "queued_while_held": blocked_at,
                      "rss_growth_while_held_bytes": grown}), flush=True)


if __name__ == "__main__":
    main()
