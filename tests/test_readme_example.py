"""The README's headline example, as written, scaled up until a missing
stream wait would show: it must compute what the CPU computes, every time.

The side stream's `z = y + 1` is only ordered after `y = x + x.t()` by the
example's `s.wait_stream(current_stream())`; without it, on the host runtime
(a worker thread per stream), `z` is read from a `y` not yet written in most
runs at 512 x 512.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[1] / "README.md"
SIZE = 512
RUNS = 40


def headline_example() -> str:
    section = README.read_text().split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)\n```", section, re.S)
    assert match, "no python example under 'Using it'"
    return match.group(1)


def scaled(code: str, size: int) -> str:
    scaled_code, count = re.subn(r"torch\.randn\(4, 4\)", f"torch.randn({size}, {size})", code)
    assert count == 1, "the example's input is expected to be torch.randn(4, 4)"
    return scaled_code


def test_the_example_is_correct_as_printed():
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(headline_example(), "README.md", "exec"), namespace)
    x = namespace["x"].cpu()
    torch.testing.assert_close(namespace["z"].cpu(), x + x.t() + 1, rtol=0, atol=0)
    assert "tensor(" in out.getvalue()


def test_the_example_scaled_up_matches_the_cpu_every_time():
    code = compile(scaled(headline_example(), SIZE), "README.md (scaled)", "exec")
    wrong = 0
    for _ in range(RUNS):
        namespace: dict = {}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)
        x = namespace["x"].cpu()
        if not torch.equal(namespace["z"].cpu(), x + x.t() + 1):
            wrong += 1
    assert wrong == 0, f"{wrong} of {RUNS} runs computed a wrong z"
