"""The README's two quick-start commands are what CI runs, verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands(readme: str) -> tuple[str, str]:
    """The first two bash blocks of the README's quick start: set-up, then tests."""
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert len(blocks) >= 2, "the quick start needs the set-up and the test command"
    return blocks[0].strip(), blocks[1].strip()


def test_ci_runs_the_readme_commands_verbatim():
    setup, tests = quick_start_commands((ROOT / "README.md").read_text())
    assert "\n" not in setup and "\n" not in tests, "each is one command"
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert setup in ci_lines
    assert tests in ci_lines
    assert ci_lines.index(setup) < ci_lines.index(tests)


def test_the_set_up_command_needs_no_other_index():
    """The CPU wheel index is documented for other machines, never required."""
    setup, _ = quick_start_commands((ROOT / "README.md").read_text())
    assert "pip install torch==2.13.0 " in setup
    assert "--index-url" not in setup and "download.pytorch.org" not in setup


def test_readme_links_stay_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)[^)]*\)", readme):
        if target.startswith("https://"):
            continue
        assert not target.startswith(".."), target
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
