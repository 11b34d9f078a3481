"""Build progress a user can see under ``pip install``.

pip runs the build backend with its output captured and shows it only with
``-v`` (or after a failure), so a 5-minute compile looks like a hang. While
the extension builds, :func:`terminal_progress` routes the build's standard
output through a pipe: every line still reaches pip's log unchanged, and a
short line per step (``[12/41] 1:05 csrc/ops/add.cpp``) is also written to the
controlling terminal (``/dev/tty``), which pip does not capture. Without a
terminal (CI, a redirected shell) nothing extra is written anywhere: the log
is the same either way. ``TORCH_INFINI_BUILD_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from typing import Iterator, Optional

#: ninja's status prefix, "[finished/total] ", before each command it runs.
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
_SOURCE = re.compile(r"(?:^|\s)(\S+\.(?:cpp|cc|cxx|c|cu))(?:\s|$)")


def describe(line: str, root: str = "") -> Optional[str]:
    """The short form of one line of build output, or None for lines that are
    not a step (compiler warnings, setuptools chatter).

    ``[3/40] c++ -MMD ... -c /repo/csrc/ops/add.cpp -o ...`` -> ``[3/40] csrc/ops/add.cpp``;
    a link command (``-shared``) -> ``linking <output>``.
    """
    step = _NINJA_STEP.match(line.strip())
    if step:
        done, total, command = step.groups()
        source = _SOURCE.search(command)
        what = source.group(1) if source else command.split(" ", 1)[0]
        if root and what.startswith(root.rstrip("/") + "/"):
            what = what[len(root.rstrip("/")) + 1:]
        return f"[{done}/{total}] {what}"
    words = line.split()
    if " -shared " in f" {line} " and "-o" in words:
        index = words.index("-o")
        if index + 1 < len(words):
            return f"linking {os.path.basename(words[index + 1])}"
    return None


def progress_enabled(environ=None) -> bool:
    """TORCH_INFINI_BUILD_PROGRESS: 1 (default) or 0."""
    value = (os.environ if environ is None else environ).get("TORCH_INFINI_BUILD_PROGRESS", "")
    if value in ("", "1"):
        return True
    if value == "0":
        return False
    raise ValueError(f"TORCH_INFINI_BUILD_PROGRESS='{value}' is invalid: expected 1 (on) or 0 (off)")


class Terminal:
    """The controlling terminal, written a line at a time beside pip's spinner.

    The first line starts on a new line, below pip's "Building ..." line; each
    later line first clears what the spinner drew at the start of the line.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lines = 0

    def line(self, text: str) -> None:
        prefix = "\n" if self.lines == 0 else "\r\033[K"
        with contextlib.suppress(OSError):
            os.write(self.fd, (prefix + text + "\n").encode())
        self.lines += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_terminal(path: str = "/dev/tty") -> Optional[Terminal]:
    """The controlling terminal, or None without one."""
    try:
        return Terminal(os.open(path, os.O_WRONLY | os.O_NOCTTY))
    except OSError:
        return None


def say(message: str, terminal: Optional[Terminal]) -> None:
    """One line to the build log (stdout) and, when there is one, to the terminal."""
    print(message, flush=True)
    if terminal is not None:
        terminal.line(message)


@contextlib.contextmanager
def terminal_progress(terminal: Optional[Terminal], root: str = "",
                      prefix: str = "torch_infini build: ") -> Iterator[None]:
    """While the block runs, mirror a short form of each build step on
    ``terminal`` (from :func:`open_terminal`; None: do nothing).

    File descriptor 1 is swapped for a pipe, so the output of child processes
    (ninja, the compiler, the linker) is seen too; each line is passed on to
    the original descriptor 1 unchanged.
    """
    if terminal is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 1)
    os.close(write_end)
    started = time.monotonic()

    def pump() -> None:
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            pending = b""
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                os.write(saved, chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    short = describe(raw.decode(errors="replace"), root)
                    if short is not None:
                        elapsed = int(time.monotonic() - started)
                        terminal.line(f"{prefix}{elapsed // 60}:{elapsed % 60:02d} {short}")

    reader = threading.Thread(target=pump, name="build-progress", daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)  # closes the pipe's last write end: the reader sees EOF
        reader.join(timeout=10)
        os.close(saved)
