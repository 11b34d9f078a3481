"""The import guard: runs before the native module is loaded or anything is
renamed, so a torch_infini built for another PyTorch fails with a message
instead of a crash or a half-registered backend."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

METADATA_PATH = Path(__file__).with_name("_build_info.json")
REQUIRED_KEYS = ("torch_version", "torch_major_minor", "cxx11_abi", "infini_stack")

#: The PyTorch releases (major.minor, oldest and newest) this source builds
#: against and passes its suite with; csrc/core/TorchVersion.h's version
#: checks cover the same range. setup.py loads this file by path and refuses
#: to build against a release outside it.
SUPPORTED_TORCH = ("2.11", "2.15")


def major_minor(version: str) -> str:
    """``"2.13.0+cpu"``, ``"2.13.1"``, ``"2.13.0a0+git1"``, ``"2.13.0rc2"`` -> ``"2.13"``."""
    match = re.match(r"^\s*(\d+)\.(\d+)", str(version))
    if not match:
        raise ValueError(f"not a PyTorch version: {version!r}")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def _as_tuple(major_minor_text: str) -> tuple[int, int]:
    major, minor = major_minor_text.split(".")
    return int(major), int(minor)


def supported_releases() -> str:
    """``"PyTorch 2.11 to 2.15"``: the releases this source supports, for messages."""
    return f"PyTorch {SUPPORTED_TORCH[0]} to {SUPPORTED_TORCH[1]}"


def is_supported(torch_version: str) -> bool:
    """Whether ``torch_version``'s major.minor is within :data:`SUPPORTED_TORCH`
    (patch, local, dev and rc parts do not matter); ValueError if it is not a version."""
    oldest, newest = (_as_tuple(v) for v in SUPPORTED_TORCH)
    return oldest <= _as_tuple(major_minor(torch_version)) <= newest


def load_metadata(path: Path = METADATA_PATH) -> dict[str, Any]:
    """The build metadata, or ImportError saying what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ImportError(
            f"torch_infini: build metadata {path} is missing; the package was not built "
            "properly. Rebuild or reinstall torch_infini (pip install --no-build-isolation -e .)"
        ) from None
    except (OSError, ValueError) as error:
        raise ImportError(
            f"torch_infini: build metadata {path} is unreadable ({error}). "
            "Rebuild or reinstall torch_infini."
        ) from None
    if not isinstance(data, dict) or any(k not in data for k in REQUIRED_KEYS):
        raise ImportError(
            f"torch_infini: build metadata {path} is malformed (needs {', '.join(REQUIRED_KEYS)}). "
            "Rebuild or reinstall torch_infini."
        )
    return data


def check_compatible(metadata: dict[str, Any], torch_version: str, cxx11_abi: bool) -> None:
    """Raises ImportError unless the running PyTorch matches the build.

    The running PyTorch must be a supported release (:data:`SUPPORTED_TORCH`),
    and its major.minor and C++11 ABI flag those of the build; patch, local
    (``+cpu``), dev, alpha, beta and rc parts may differ (PyTorch keeps its
    C++ ABI within a release's patch versions).
    """
    try:
        built = major_minor(metadata["torch_major_minor"])
        built_full = str(metadata["torch_version"])
    except (KeyError, ValueError, TypeError):
        raise ImportError(
            "torch_infini: build metadata is malformed (torch_major_minor). "
            "Rebuild or reinstall torch_infini."
        ) from None
    try:
        running = major_minor(torch_version)
    except ValueError:
        raise ImportError(f"torch_infini: cannot parse the running PyTorch version {torch_version!r}") from None
    if not is_supported(torch_version):
        raise ImportError(
            f"torch_infini supports {supported_releases()}, but PyTorch {torch_version} is "
            f"running (this torch_infini was built for PyTorch {built_full}). Install a supported "
            "PyTorch, then Rebuild or reinstall torch_infini against it "
            "(pip install --no-build-isolation -e .)."
        )
    if built != running:
        raise ImportError(
            f"torch_infini was built for PyTorch {built_full} ({built}) but PyTorch "
            f"{torch_version} ({running}) is running: its C++ extension works only with the "
            "PyTorch release it was compiled against. Rebuild or reinstall torch_infini "
            f"against this PyTorch (pip install --no-build-isolation -e .); it supports {supported_releases()}."
        )
    if not isinstance(metadata["cxx11_abi"], bool):
        raise ImportError("torch_infini: build metadata is malformed (cxx11_abi). Rebuild or reinstall torch_infini.")
    if metadata["cxx11_abi"] != bool(cxx11_abi):
        raise ImportError(
            f"torch_infini was built with _GLIBCXX_USE_CXX11_ABI={int(metadata['cxx11_abi'])} "
            f"(PyTorch {built_full}) but PyTorch {torch_version} uses "
            f"_GLIBCXX_USE_CXX11_ABI={int(bool(cxx11_abi))}. Rebuild or reinstall torch_infini "
            "against this PyTorch."
        )


def check_build() -> dict[str, Any]:
    """Checks the installed build against the running PyTorch; returns the metadata."""
    import torch

    metadata = load_metadata()
    check_compatible(metadata, torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)
    return metadata
