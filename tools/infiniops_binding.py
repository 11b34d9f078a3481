"""Command line of the InfiniOps binding rules (torch_infini/infiniops_binding.py):

    python tools/infiniops_binding.py --torch-allowlist PREFIX   # -DINFINI_OPS_TORCH_OPS=... for InfiniOps
    python tools/infiniops_binding.py --report PREFIX            # what binds in an install, and why not the rest

It loads the rules by path, so it runs before torch-infini is built (the
InfiniOps build it configures comes first)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

RULES = Path(__file__).resolve().parents[1] / "torch_infini" / "infiniops_binding.py"


def load_rules():
    """torch_infini/infiniops_binding.py as a module, without importing the package."""
    spec = importlib.util.spec_from_file_location("infiniops_binding", RULES)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("infiniops_binding", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    raise SystemExit(load_rules().main())
