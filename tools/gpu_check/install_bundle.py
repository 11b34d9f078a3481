"""Unpacks the GPU check's bundle into a work folder, without pip or network.

    python tools/gpu_check/install_bundle.py BUNDLE WORK

- ``BUNDLE/infini-libs.tar.xz`` (the prebuilt Infini libraries) into ``WORK/lib``;
- every wheel of ``BUNDLE/wheels`` into ``WORK/site`` (a wheel is a zip of
  what site-packages holds), except a distribution this Python already has:
  the machine's own numpy or pytest stay in charge; torch_infini always
  comes from the bundle;
- ``WORK/env.sh``: ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` for the parts
  (the Infini libraries, then the CUDA libraries of the installed PyTorch's
  ``nvidia-*`` packages, which libinfiniops needs: cuBLAS).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import sys
import tarfile
import zipfile
from pathlib import Path


def wheel_distribution(path: Path) -> str:
    """``numpy-2.4.6-cp312-...whl`` -> ``numpy`` (normalized as the metadata's name)."""
    return re.sub(r"[-_.]+", "-", path.name.split("-", 1)[0]).lower()


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_cuda_library_dirs() -> list[str]:
    """The ``lib`` folders of the ``nvidia-*`` packages beside the installed
    PyTorch (where pip puts cuBLAS, cuDNN, NCCL, ... for CUDA builds)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return []
    nvidia = Path(spec.origin).resolve().parents[1] / "nvidia"
    return sorted(str(p) for p in nvidia.glob("*/lib") if p.is_dir())


def main() -> None:
    bundle, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    lib, site = work / "lib", work / "site"
    lib.mkdir(parents=True, exist_ok=True)
    site.mkdir(parents=True, exist_ok=True)
    with tarfile.open(bundle / "infini-libs.tar.xz") as tar:
        tar.extractall(lib, filter="data")
    report = {"libraries": sorted(str(p.relative_to(lib)) for p in lib.rglob("*") if p.is_file()),
              "unpacked": [], "kept_installed": {}}
    for wheel in sorted((bundle / "wheels").glob("*.whl")):
        name = wheel_distribution(wheel)
        version = installed(name)
        if version is not None and name != "torch-infini":
            report["kept_installed"][name] = version
            continue
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
        report["unpacked"].append(wheel.name)
    # Extension modules and libraries lose their mode bits in a zip.
    for path in list(site.rglob("*.so*")) + list(lib.rglob("*.so*")):
        path.chmod(0o755)
    libs = [str(lib)] + torch_cuda_library_dirs() + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    paths = [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    (work / "env.sh").write_text(f"export PYTHONPATH={shlex.quote(':'.join(paths))}\n"
                                 f"export LD_LIBRARY_PATH={shlex.quote(':'.join(libs))}\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
