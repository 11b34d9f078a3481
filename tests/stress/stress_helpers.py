"""Helpers of the stress suite: bounded loops and resident-memory readings."""

from __future__ import annotations

import os
import time


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
