"""Helpers of the stress suite: bounded loops and resident-memory readings."""

from __future__ import annotations

import os
import threading
import time
from hang_guard import HANG_GUARD_S


def rss_bytes() -> int:
    """This process's resident set size, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Deadline:
    """A wall-clock budget: ``while budget.left(): ...`` runs for ``seconds``."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> bool:
        return time.monotonic() < self.end


def run_threads(target, count: int) -> list:
    """Runs target(k) for k in range(count), each on its own thread, bounded
    in time; returns their results, and fails with every thread's error."""
    results: list = [None] * count
    errors: list = []

    def wrap(k):
        try:
            results[k] = target(k)
        except BaseException as e:  # reported below, with the thread's index
            errors.append((k, e))

    threads = [threading.Thread(target=wrap, args=(k,), daemon=True) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG_GUARD_S)
        assert not t.is_alive(), "a thread did not finish in time"
    assert not errors, errors
    return results
