"""Soak test of the infini device (not run in CI): a mixed workload for N
minutes, watching the process's resident memory and the allocators' stats.

    python tools/soak.py --minutes 10 [--threads 2] [--report soak.json]

Each round runs, on every worker thread and its own streams: kernels over
freshly allocated tensors (freed while still queued), cross-stream hand-offs
through events, non_blocking copies through a reused pinned buffer and a
fresh pinned one, random draws, and now and then empty_cache and an
asynchronous error that a synchronize reports. Every round's result is
compared bit for bit with the CPU. A sample (RSS, allocated/reserved device
bytes, segments taken from the runtime) is printed every --every seconds.
(The pinned host allocator's stats are not exposed to Python yet; its growth
shows in RSS.)

It fails (exit status 1) when a result differs, when a thread raises, or when
RSS after the first quarter of the run grows by more than --max-growth-mib
(a leak). Device memory must come back to (about) zero after the last round:
only the cached device scalars may stay."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import torch

import torch_infini  # noqa: F401

DEV = torch.device("infini:0")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one_round(k: int, i: int, pinned: torch.Tensor, a: torch.Stream, b: torch.Stream) -> None:
    """One round of the mixed workload; raises AssertionError on a mismatch."""
    n = 4096
    seed = k * 100_003 + i
    base = torch.arange(n, dtype=torch.float32) % 251 + float(i % 7)
    pinned.copy_(base)
    with torch.infini.stream(a):
        x = pinned.to(DEV, non_blocking=True)
        y = x * 3 - 1
        del x  # freed while queued
        done = torch.infini.Event()
        done.record()
    with torch.infini.stream(b):
        b.wait_event(done)
        y.record_stream(b)
        z = (y + 2).sum(0, keepdim=True) + y[:16].mean()
        g = torch.Generator(DEV).manual_seed(seed)
        r = torch.rand(64, device=DEV, generator=g)
        fresh = torch.empty(n, pin_memory=True)
        fresh.copy_(y, non_blocking=True)
        # Checked on b: an asynchronous error the main thread makes on the
        # default stream is reported to whoever synchronizes that stream.
        b.synchronize()
        y_cpu = base * 3 - 1
        want_z = (y_cpu + 2).sum(0, keepdim=True) + y_cpu[:16].mean()
        assert torch.equal(fresh, y_cpu), "pinned copy-back differs"
        assert torch.equal(z.cpu(), want_z), "reduction differs"
        assert torch.equal(r.cpu(), torch.rand(64, generator=torch.Generator().manual_seed(seed))), "draw differs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--max-growth-mib", type=float, default=64.0)
    parser.add_argument("--report", help="write the samples and the verdict as JSON here")
    args = parser.parse_args()

    end = time.monotonic() + args.minutes * 60
    errors: list[str] = []
    rounds = [0] * args.threads
    stop = threading.Event()

    def worker(k: int) -> None:
        a, b = torch.infini.Stream(), torch.infini.Stream()
        pinned = torch.empty(4096, pin_memory=True)  # long-lived, reused every round
        try:
            while not stop.is_set():
                one_round(k, rounds[k], pinned, a, b)
                rounds[k] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(f"thread {k}, round {rounds[k]}: {type(e).__name__}: {e}")
            stop.set()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(args.threads)]
    for t in threads:
        t.start()
    samples = []
    start = time.monotonic()
    next_sample = start
    async_errors = 0
    while time.monotonic() < end and not stop.is_set():
        now = time.monotonic()
        if now >= next_sample:
            sample = {
                "t_s": round(now - start, 1),
                "rounds": sum(rounds),
                "rss_mib": round(rss_mib(), 1),
                "allocated_mib": round(torch.infini.memory_allocated() / 2**20, 2),
                "reserved_mib": round(torch.infini.memory_reserved() / 2**20, 2),
                "num_device_alloc": torch.infini.memory_stats().get("num_device_alloc", 0),
            }
            samples.append(sample)
            print(json.dumps(sample), flush=True)
            next_sample += args.every
        # Now and then: return the cache, and make (and collect) an
        # asynchronous error, while the workers keep going.
        torch.infini.empty_cache()
        # (A valid call of the same kind first: the first of a kind runs
        # directly and would raise at the call.)
        torch.zeros(4, device=DEV).index_select(0, torch.tensor([0, 1], device=DEV))
        bad = torch.tensor([0, 10**6], device=DEV)
        torch.zeros(4, device=DEV).index_select(0, bad)
        try:
            torch.infini.synchronize()
        except RuntimeError:
            async_errors += 1
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    torch.infini.synchronize()
    torch.infini.empty_cache()
    verdict = {"rounds": sum(rounds), "async_errors_reported": async_errors, "errors": errors,
               "allocated_after_mib": round(torch.infini.memory_allocated() / 2**20, 3),
               "reserved_after_mib": round(torch.infini.memory_reserved() / 2**20, 3)}
    quarter = [s for s in samples if s["t_s"] >= args.minutes * 60 / 4]
    if len(quarter) >= 2:
        verdict["rss_growth_after_first_quarter_mib"] = round(quarter[-1]["rss_mib"] - quarter[0]["rss_mib"], 1)
    # What may stay allocated: the cached device scalars (at most 4096 of
    # 512 bytes, csrc/ops/scalar_cache.cpp); everything the rounds made is freed.
    ok = (not errors and verdict["allocated_after_mib"] <= 2.0
          and verdict.get("rss_growth_after_first_quarter_mib", 0) <= args.max_growth_mib)
    verdict["ok"] = ok
    print(json.dumps(verdict), flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"samples": samples, "verdict": verdict}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
