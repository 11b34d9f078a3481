"""Exit while a daemon thread waits in torch.infini.synchronize (or
empty_cache): the process must exit cleanly, status 0, not abort with
"terminate called without an active exception". See docs/reliability.md."""

from __future__ import annotations

import pytest

from conftest import run_python
from infini_testing import on_host
from hang_guard import HANG_GUARD_S

pytestmark = pytest.mark.skipif(not on_host(), reason="holds the stream with the host runtime's test hook")

EXIT_WHILE_WAITING = """
import threading, time, torch, torch_infini
s = torch.infini.current_stream()
x = torch.empty(12 * 2**20, dtype=torch.uint8, device="infini")  # a segment of its own
assert torch_infini._C._test_enqueue_delay(s.stream_id, s.device_index, {hold_ms})
x[:16].fill_(1)  # queued behind the hold
del x  # cached, its stream busy: empty_cache waits for it too
threading.Thread(target={target}, daemon=True).start()
time.sleep(0.05)
print("main thread exits", flush=True)
"""


@pytest.mark.parametrize("target", ["torch.infini.synchronize", "torch.infini.empty_cache"])
def test_exit_while_a_daemon_thread_waits(target, hold_ms=600):
    """The daemon thread wakes while the interpreter finalizes (which takes
    over a second with torch loaded) and must end without aborting."""
    result = run_python(EXIT_WHILE_WAITING.format(target=target, hold_ms=float(hold_ms)), timeout=HANG_GUARD_S)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "terminate called" not in result.stderr
    assert "main thread exits" in result.stdout
