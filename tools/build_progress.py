"""Build progress a user can see under ``pip install``, terminal or not.

pip runs the build backend with its output captured and shows it only with
``-v`` (or after a failure), so a long compile looks like a hang. While the
extension builds, :func:`build_progress` routes the build's standard output
through a pipe: every line still reaches pip's log unchanged, and a short
line per step (``[12/41] 1:05 csrc/ops/add.cpp``) is also written

* to the progress log, ``build/torch_infini-build.log`` in the source tree
  (rewritten by every build, flushed line by line, so ``tail -f`` follows
  it in CI, a container, or a shell run by a tool), and
* to the controlling terminal (``/dev/tty``) when there is one, which pip
  does not capture.

``TORCH_INFINI_BUILD_PROGRESS=0`` turns both off.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator, Optional, Protocol

#: Where the progress log is written, relative to the source tree.
LOG_NAME = Path("build") / "torch_infini-build.log"

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


class Sink(Protocol):
    """Somewhere a progress line goes."""

    def line(self, text: str) -> None: ...

    def close(self) -> None: ...


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


class LogFile:
    """The progress log: one plain line per message, flushed as written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "w", encoding="utf-8", buffering=1)

    def line(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.file.write(text + "\n")

    def close(self) -> None:
        self.file.close()


def open_terminal(path: str = "/dev/tty") -> Optional[Terminal]:
    """The controlling terminal, or None without one."""
    try:
        return Terminal(os.open(path, os.O_WRONLY | os.O_NOCTTY))
    except OSError:
        return None


def open_log(root: Path) -> Optional[LogFile]:
    """The progress log under ``root`` (its folder made), or None where it
    cannot be written (a read-only tree: the build goes on without it)."""
    path = Path(root) / LOG_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return LogFile(path)
    except OSError:
        return None


def say(message: str, sinks: Iterable[Sink] = ()) -> None:
    """One line to the build's output (stdout) and to each sink."""
    print(message, flush=True)
    for sink in sinks:
        sink.line(message)


@contextlib.contextmanager
def build_progress(sinks: Iterable[Sink], root: str = "",
                   prefix: str = "torch_infini build: ") -> Iterator[None]:
    """While the block runs, write a short form of each build step to every
    sink (none: do nothing).

    File descriptor 1 is swapped for a pipe, so the output of child processes
    (ninja, the compiler, the linker) is seen too; each line is passed on to
    the original descriptor 1 unchanged.
    """
    sinks = list(sinks)
    if not sinks:
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
                        for sink in sinks:
                            sink.line(f"{prefix}{elapsed // 60}:{elapsed % 60:02d} {short}")

    reader = threading.Thread(target=pump, name="build-progress", daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)  # closes the pipe's last write end: the reader sees EOF
        reader.join(timeout=10)
        os.close(saved)
