"""The GPU check's first part: what the machine is (machine.json).

    python tools/gpu_check/facts.py OUT_DIR [--bundle DIR] [--budget S]

The GPU (nvidia-smi), cores and memory, Python, PyTorch and its CUDA,
``python -m torch_infini`` (the provider it selected and why), and ``ldd``
of the extension, so a library found in the wrong place shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ResultFile, cuda_status, infini_status


def run(command: list[str], timeout: float = 60, env: dict | None = None) -> str:
    # Not in the checkout: `python -m` puts the working folder first on
    # sys.path, and the checkout's torch_infini/ (never built there) would
    # shadow the bundle's.
    cwd = os.environ.get("GPU_CHECK_WORK") or tempfile.gettempdir()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=dict(os.environ if env is None else env, PYTHONSAFEPATH="1"))
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{' '.join(command)}: {error}"
    return (proc.stdout + proc.stderr).strip()


def memory_gib() -> float:
    with open("/proc/meminfo") as f:
        kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    return round(kib / 2**20, 1)


def torch_facts() -> dict:
    import torch

    ok, detail = cuda_status()
    facts = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": ok, "cuda": detail}
    if ok:
        props = torch.cuda.get_device_properties(0)
        facts.update(cuda_capability=f"{props.major}.{props.minor}", cuda_memory_gib=round(props.total_memory / 2**30, 1),
                     cuda_devices=torch.cuda.device_count())
    return facts


def extension_ldd() -> str:
    """``ldd`` of the extension, with PyTorch's library folder on the search
    path as it is in the process (``import torch`` loads those libraries
    first), so a "not found" is a library the process would lack too."""
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torch_infini._C")
    if spec is None or not spec.origin:
        return "torch_infini._C not found"
    torch_lib = str(Path(torch.__file__).resolve().parent / "lib")
    search = os.pathsep.join(p for p in (os.environ.get("LD_LIBRARY_PATH", ""), torch_lib) if p)
    return spec.origin + "\n" + run(["ldd", spec.origin], env=dict(os.environ, LD_LIBRARY_PATH=search))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--bundle", type=Path)
    parser.add_argument("--budget", type=float, default=60)
    args = parser.parse_args()
    result = ResultFile(args.out, "machine.json", "machine", args.budget)
    result.update(host=platform.node(), kernel=platform.release(), cores=os.cpu_count(), memory_gib=memory_gib(),
                  python=sys.version.split()[0], ld_library_path=os.environ.get("LD_LIBRARY_PATH", ""))
    result.step("nvidia_smi", lambda: run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                                           "--format=csv,noheader"]))
    result.step("nvcc", lambda: run(["nvcc", "--version"]).splitlines()[-1:])
    result.step("torch", torch_facts)
    result.step("torch_infini", lambda: run([sys.executable, "-m", "torch_infini"], timeout=120))
    result.step("infini", infini_status)
    result.step("extension_ldd", extension_ldd)
    if args.bundle and (args.bundle / "MANIFEST.json").is_file():
        result.step("bundle", lambda: json.loads((args.bundle / "MANIFEST.json").read_text()))
    result.update(status="done")


if __name__ == "__main__":
    main()
