"""The README's two commands are what CI runs, verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks_after(readme: str, heading: str) -> str:
    section = readme.split(heading, 1)[1]
    match = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert match, f"no bash block after {heading!r}"
    return match.group(1).strip()


def test_ci_runs_the_readme_commands_verbatim():
    readme = (ROOT / "README.md").read_text()
    setup = _bash_blocks_after(readme, "## Set up and run the quick start")
    tests = _bash_blocks_after(readme, "## Run the tests")
    assert "\n" not in setup and "\n" not in tests, "each is one command"
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert setup in ci_lines
    assert tests in ci_lines
    assert ci_lines.index(setup) < ci_lines.index(tests)
