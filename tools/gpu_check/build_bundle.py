"""Builds the GPU check's bundle, here, into an ignored folder (default
``gpu-bundle/``): everything the check needs on a GPU machine without
network, at most 60 MiB (docs/gpu-check.md).

    python tools/gpu_check/build_bundle.py --python /path/to/py312-torch211/bin/python \\
        [--rt-prefix DIR] [--ops-prefix DIR] [--ccl-prefix DIR] [--out gpu-bundle]

- ``infini-libs.tar.xz``: ``libinfinirt.so`` and ``libinfiniops.so`` (and
  ``libinfiniccl.so`` with ``--ccl-prefix``) from the prefixes
  (``INFINI_RT_PREFIX``, ``INFINI_OPS_PREFIX``, ``INFINI_CCL_PREFIX`` by
  default), xz-compressed. Never a ``libcuda`` (a link stub there would
  shadow the machine's driver).
- ``wheels/``: torch-infini's wheel, built by ``--python`` (the GPU machine's
  Python 3.12 and PyTorch 2.11, whose headers it must be built against)
  from a copy of this checkout's tracked files in ``build/gpu-bundle/src``
  (so an in-place build of the checkout is left alone), against the
  prefixes; and the wheels the check needs that the GPU machine may lack
  (numpy for PyTorch's OpInfo database, pytest and its dependencies,
  expecttest), downloaded once by ``--python``'s pip for CPython 3.12
  manylinux.
- ``check/``: the check's scripts (this folder), run from the checkout as
  ``bash gpu-bundle/check/run_check.sh``.
- ``MANIFEST.json``: what went in, sizes, versions, the commit built.

The build's environment (``CUDA_HOME``, ``CUDA_INCLUDE_DIRS``, ``MAX_JOBS``,
...) reaches the wheel's build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_MIB = 60
#: The check's other wheels: the versions this project's tests run with.
EXTRA_WHEELS = ("numpy==2.4.6", "pytest==9.2.0", "expecttest==0.3.0")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def say(text: str) -> None:
    print(f"build_bundle: {text}", flush=True)


def run(command: list[str], log: Path | None = None, **kwargs) -> str:
    """Runs ``command``; its whole output goes to ``log`` where one is named."""
    say("$ " + " ".join(command) + (f"  (output in {log})" if log else ""))
    proc = subprocess.run(command, text=True, capture_output=True, **kwargs)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()][:40]
        sys.exit(f"build_bundle: failed ({proc.returncode}): {' '.join(command)}\n"
                 + ("\n".join(errors) if errors else proc.stdout[-4000:] + proc.stderr[-4000:])
                 + (f"\nwhole output: {log}" if log else ""))
    return proc.stdout


def library(prefix: Path, name: str) -> Path:
    for sub in ("lib", "lib64"):
        if (prefix / sub / name).is_file():
            return prefix / sub / name
    sys.exit(f"build_bundle: {name} not found in {prefix}/lib or {prefix}/lib64")


def python_facts(python: str) -> dict:
    code = ("import json, sys, torch; print(json.dumps({'python': sys.version.split()[0], 'torch': torch.__version__, "
            "'cuda': torch.version.cuda}))")
    return json.loads(run([python, "-c", code], env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")).strip())


def export_tree(tree: Path, dest: Path) -> str:
    """The tracked files of the checkout ``tree`` (as they are now) into
    ``dest``; returns its commit."""
    files = run(["git", "-C", str(tree), "ls-files", "-z"]).split("\0")
    dest.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for name in filter(None, files):
        source = tree / name
        if not source.is_file():
            continue  # deleted in the work tree
        wanted.add(name)
        target = dest / name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    # A file the checkout no longer tracks must not be built (csrc/ is globbed).
    for path in list(dest.rglob("*")):
        relative = path.relative_to(dest).as_posix()
        if path.is_file() and relative not in wanted and not relative.startswith(("build/", "dist/")) \
                and ".egg-info/" not in relative and relative.startswith(("csrc/", "torch_infini/", "tools/")) \
                and not relative.endswith((".so", "_build_info.json")):
            path.unlink()
    commit = run(["git", "-C", str(tree), "rev-parse", "HEAD"]).strip()
    dirty = run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"]).strip()
    return commit + (" (with uncommitted changes)" if dirty else "")


def build_wheel(python: str, src: Path, wheels: Path, env: dict) -> Path:
    for old in wheels.glob("torch_infini-*.whl"):
        old.unlink()
    started = time.monotonic()
    run([python, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps", "-w", str(wheels), str(src)],
        log=src.parent / "wheel-build.log", env=env, cwd=src)
    wheel = next(wheels.glob("torch_infini-*.whl"))
    say(f"wheel {wheel.name} built in {(time.monotonic() - started) / 60:.1f} min")
    return wheel


def download_extra_wheels(python: str, cache: Path) -> list[Path]:
    cache.mkdir(parents=True, exist_ok=True)
    command = [python, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.12",
               "--implementation", "cp", "-d", str(cache)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    run(command + list(EXTRA_WHEELS))
    return sorted(cache.glob("*.whl"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="Python 3.12 with PyTorch 2.11 (builds the wheel)")
    parser.add_argument("--rt-prefix", type=Path, default=os.environ.get("INFINI_RT_PREFIX"))
    parser.add_argument("--ops-prefix", type=Path, default=os.environ.get("INFINI_OPS_PREFIX"))
    parser.add_argument("--ccl-prefix", type=Path, default=os.environ.get("INFINI_CCL_PREFIX") or None)
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-bundle")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the checkout whose tracked files are built and whose check scripts go in "
                             "(default: this one)")
    parser.add_argument("--allow-other-versions", action="store_true",
                        help="build with a Python or PyTorch other than the GPU machine's 3.12 / 2.11")
    args = parser.parse_args()
    if not args.rt_prefix or not args.ops_prefix:
        sys.exit("build_bundle: name the InfiniRT and InfiniOps prefixes (--rt-prefix/--ops-prefix or "
                 "INFINI_RT_PREFIX/INFINI_OPS_PREFIX)")
    facts = python_facts(args.python)
    if not args.allow_other_versions and (not facts["python"].startswith("3.12.") or not facts["torch"].startswith("2.11.")):
        sys.exit(f"build_bundle: {args.python} has Python {facts['python']} and PyTorch {facts['torch']}; the GPU "
                 "machine has Python 3.12 and PyTorch 2.11, which the wheel must be built for")
    started = time.monotonic()
    out = args.out.resolve()
    work = ROOT / "build" / "gpu-bundle"
    if out.exists():
        shutil.rmtree(out)
    (out / "wheels").mkdir(parents=True)

    libraries = [library(args.rt_prefix, "libinfinirt.so"), library(args.ops_prefix, "libinfiniops.so")]
    if args.ccl_prefix:
        libraries.append(library(args.ccl_prefix, "libinfiniccl.so"))
    assert not any(p.name.startswith("libcuda.") for p in libraries)
    with tarfile.open(out / "infini-libs.tar.xz", "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
        for path in libraries:
            tar.add(path.resolve(), arcname=path.name)
    say(f"infini-libs.tar.xz: {(out / 'infini-libs.tar.xz').stat().st_size / 2**20:.1f} MiB")

    commit = export_tree(args.tree.resolve(), work / "src")
    env = dict(os.environ, INFINI_RT_PREFIX=str(args.rt_prefix), INFINI_OPS_PREFIX=str(args.ops_prefix),
               MAX_JOBS=os.environ.get("MAX_JOBS", "2"), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.pop("INFINI_CCL_PREFIX", None)
    if args.ccl_prefix:
        env["INFINI_CCL_PREFIX"] = str(args.ccl_prefix)
    wheel = build_wheel(args.python, work / "src", out / "wheels", env)
    extra = download_extra_wheels(args.python, work / "wheels")
    for path in extra:
        shutil.copy2(path, out / "wheels" / path.name)
    shutil.copytree(work / "src" / "tools" / "gpu_check", out / "check",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    files = sorted(p for p in out.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in files)
    manifest = {
        "built": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": commit, "python": facts["python"],
        "torch": facts["torch"], "torch_cuda": facts["cuda"], "build_minutes": round((time.monotonic() - started) / 60, 1),
        "prefixes": {"infini_rt": str(args.rt_prefix), "infini_ops": str(args.ops_prefix),
                     "infini_ccl": str(args.ccl_prefix) if args.ccl_prefix else None},
        "libraries": {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in libraries},
        "wheel": wheel.name,
        "files": {str(p.relative_to(out)): p.stat().st_size for p in files},
        "total_bytes": total,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    say(f"{out}: {total / 2**20:.1f} MiB in {len(files) + 1} files, built in {manifest['build_minutes']} min")
    if total > LIMIT_MIB * 2**20:
        sys.exit(f"build_bundle: the bundle is {total / 2**20:.1f} MiB, over the {LIMIT_MIB} MiB a check may carry")


if __name__ == "__main__":
    main()
