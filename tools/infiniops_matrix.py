"""Write the InfiniOps support matrix of one pin: operator x backend ->
native / ATen-backed only / absent, and the ATen overloads each operator's
generated (ATen-backed) form mirrors.

    python tools/infiniops_matrix.py --repo /work/.mirror/InfiniTensor+InfiniOps/repo --pin 1f6f9c2
    python tools/infiniops_matrix.py --repo /path/to/InfiniOps --pin HEAD --out /tmp/m.json

The tree at the pin is exported (``git archive``) into a temporary folder, so
neither a checkout nor a bare mirror is touched. What is read, and why:

* ``src/base/<op>.h``: the operator classes (``class Gelu : public
  Operator<Gelu>``). An operator exists only where some implementation
  specializes ``Operator<Op, Device::Type::kX[, index]>``.
* Implementation headers, found the way InfiniOps' own wrapper generator
  (``scripts/generate_wrappers.py``) finds them: any ``*.h`` under ``src/``
  declaring ``class Operator<Op, ...>``, kept for a backend only when a folder
  of its path is named after that backend (the build's scan folders). So a
  shared CUDA kernel (``src/native/cuda/ops/<op>/kernel.h``, a template such
  as ``CudaGelu<Runtime>``) counts for NVIDIA, MetaX, Moore, Iluvatar or Hygon
  only where that backend's folder (``src/native/cuda/<backend>/ops/<op>/``)
  specializes ``Operator<Op, Device::Type::k<Backend>>`` on it. The kinds:
  ``native`` (``src/native/``, built by default), ``ninetoothed``,
  ``triton`` and ``linked`` (``src/linked/``: vendor libraries reached
  through torch) need their own build options (``WITH_NINETOOTHED``,
  ``WITH_TRITON``, ``WITH_LINKED``); ``torch`` is ATen-backed (``WITH_TORCH``).
* ATen-backed operators generated from ATen ``.out`` schemas: InfiniOps'
  ``scripts/generate_torch_ops.py`` is run on the exported tree (reading
  ``scripts/torch_ops.yaml`` and the installed PyTorch's
  ``native_functions.yaml``, as a ``WITH_TORCH=ON`` configure does) with its
  file output switched off; each generated operator gets implementation
  index 8 on every backend and mirrors the ``.out`` overloads recorded here.
  Which overloads those are depends on the installed PyTorch, whose version
  is recorded.

* ``src/torch/device_.h``: the PyTorch device each backend's ATen-backed
  implementations hand ATen their tensors on (``TorchDeviceName``: ``cuda``
  on NVIDIA, MetaX, Iluvatar and Hygon, ``mlu`` on Cambricon, ``npu`` on
  Ascend, ``musa`` on Moore): the PyTorch that must be in the process for
  them to run there.

A backend's status for an operator: ``native`` where a default-build
(``native``) implementation exists; else ``aten`` where an ATen-backed one
exists (InfiniOps built ``WITH_TORCH=ON``); else ``absent``. Optional-build
kernels (NineToothed, Triton, linked libraries) are listed per backend but do
not make an operator native. No InfiniOps source is written out: only names,
indices and paths.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import pathlib
import re
import subprocess
import sys
import tempfile
from typing import Any

BACKENDS = ("cpu", "nvidia", "ascend", "cambricon", "metax", "moore", "iluvatar", "hygon")
DEVICE_TYPE = {f"k{b.capitalize()}": b for b in BACKENDS}  # kNvidia -> nvidia
ATEN_INDEX = 8  # InfiniOps' reserved implementation index for generated ATen backends
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "torch_infini" / "data"

# class Gelu : public Operator<Gelu>, also across lines with an attribute:
# class [[deprecated("Use `SiluAndMul` instead.")]] Swiglu : public Operator<Swiglu>
_BASE_CLASS = re.compile(
    r"^class\s+(\[\[(?:[^\]]|\](?!\]))*\]\]\s*)?(\w+)\s*:\s*public\s+Operator<\s*\2\s*>", re.M)
# Operator<Op, Device::Type::kX> / <Op, Device::Type::kX, 3> / <Op, kDev, 1>
_SPECIALIZATION = re.compile(
    r"\bclass\s+Operator<\s*((?:\w+::)*\w+)\s*,\s*(Device::Type::k\w+|\w+)\s*(?:,\s*(\d+)\s*)?>")
_INSTANTIATION = re.compile(
    r"template\s+class\s+Operator<\s*((?:\w+::)*\w+)\s*,\s*Device::Type::(k\w+)\s*(?:,\s*(\d+)\s*)?>")


_NAMESPACE = re.compile(r"^namespace\s+([\w:]+)\s*\{", re.M)
# struct TorchDeviceName<Device::Type::kNvidia> { ... kValue{"cuda"}; };
_TORCH_DEVICE = re.compile(
    r"struct\s+TorchDeviceName<\s*Device::Type::(k\w+)\s*>\s*\{[^}]*?kValue\s*\{\s*\"(\w+)\"")


def _qualified(name: str) -> str:
    """A class name relative to infini::ops ("special::Erf", "Gelu")."""
    for prefix in ("::", "infini::", "ops::"):
        name = name.removeprefix(prefix)
    return name


def _git(repo: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def export_tree(repo: pathlib.Path, pin: str, into: pathlib.Path) -> dict[str, str]:
    """The tree of `repo` at `pin` written into `into`; the commit's identity."""
    commit = _git(repo, "rev-parse", f"{pin}^{{commit}}")
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return {"commit": commit, "short": commit[:7],
            "date": _git(repo, "show", "-s", "--format=%cI", commit),
            "subject": _git(repo, "show", "-s", "--format=%s", commit)}


def _kind(rel: pathlib.PurePath) -> str:
    parts = rel.parts
    if parts[:2] == ("src", "native"):
        return "native"
    for kind in ("linked", "ninetoothed", "triton", "torch"):
        if kind in parts:
            return kind
    return "native"


def scan_implementations(tree: pathlib.Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Class name -> backend -> implementations found in hand-written headers."""
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    src = tree / "src"
    for header in sorted(src.rglob("*.h")):
        rel = header.relative_to(tree)
        if rel.parts[1] == "base":
            continue
        text = header.read_text(errors="replace")
        folders = set(rel.parts[:-1])
        for match in _SPECIALIZATION.finditer(text):
            name = _qualified(match.group(1))
            device = match.group(2).split("::")[-1]
            index = int(match.group(3) or 0)
            kind = _kind(rel)
            if device in DEVICE_TYPE:
                backends = [DEVICE_TYPE[device]]
            else:  # a template over the device: its .cc instantiates it per device
                source = header.with_suffix(".cc")
                text_cc = source.read_text(errors="replace") if source.exists() else ""
                backends = [DEVICE_TYPE[m.group(2)] for m in _INSTANTIATION.finditer(text_cc)
                            if _qualified(m.group(1)) == name and m.group(2) in DEVICE_TYPE]
            for backend in backends:
                # The build compiles a native or linked header for a backend
                # only from a folder named after it; ATen-backed, NineToothed
                # and Triton ones come from their option's folder.
                if kind in ("native", "linked") and backend not in folders:
                    continue
                found.setdefault(name, {}).setdefault(backend, []).append(
                    {"index": index, "kind": kind, "path": str(rel)})
    return found


def torch_devices(tree: pathlib.Path) -> dict[str, str]:
    """Backend -> the PyTorch device its ATen-backed implementations run
    ATen on (``src/torch/device_.h``); empty at a pin without that file."""
    header = tree / "src" / "torch" / "device_.h"
    if not header.exists():
        return {}
    found = {DEVICE_TYPE[m.group(1)]: m.group(2) for m in _TORCH_DEVICE.finditer(header.read_text(errors="replace"))
             if m.group(1) in DEVICE_TYPE}
    return {b: found[b] for b in BACKENDS if b in found}


def generated_aten_operators(tree: pathlib.Path) -> tuple[dict[str, list[str]], str]:
    """Operator (snake name) -> the ATen ``.out`` overloads its generated
    ATen backend mirrors, as InfiniOps' generator selects them from the
    installed PyTorch; and that PyTorch's version."""
    import torch

    script = tree / "scripts" / "generate_torch_ops.py"
    if not script.exists():
        return {}, torch.__version__
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location("_infiniops_generate_torch_ops", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        captured: dict[str, list[str]] = {}

        def capture(name, ops, *, emit_base):  # noqa: ARG001  (the generator's signature)
            captured[name] = [f"aten::{op.aten_name}.{op.overload}" if op.overload else f"aten::{op.aten_name}"
                              for op in ops]
            return set()

        module._emit = capture
        module._write_text_if_changed = lambda *a, **k: False
        module._remove_stale_files = lambda *a, **k: None
        module._find_clang_format = lambda: None
        argv, sys.argv = sys.argv, [str(script)]
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                module.main()
        finally:
            sys.argv = argv
    finally:
        sys.path.remove(str(script.parent))
    return captured, torch.__version__


def build_matrix(tree: pathlib.Path, pin: dict[str, str]) -> dict[str, Any]:
    classes: dict[str, str] = {}  # snake name -> class (two headers may declare one class)
    deprecated: set[str] = set()
    for header in sorted((tree / "src" / "base").glob("*.h")):
        text = header.read_text(errors="replace")
        match = _BASE_CLASS.search(text)
        if match:
            # Generated bases of namespaced ATen operators live in a namespace
            # of their own (infini::ops::special::Erf beside infini::ops::Erf).
            spaces = _NAMESPACE.findall(text[:match.start()])
            classes[header.stem] = _qualified("::".join(spaces + [match.group(2)]))
            if match.group(1) and "deprecated" in match.group(1):
                deprecated.add(header.stem)
    implementations = scan_implementations(tree)
    generated, torch_version = generated_aten_operators(tree)
    for name in generated:  # generated bases not in src/base at older pins
        classes.setdefault(name, "".join(word.capitalize() for word in name.split("_")))  # no namespace at old pins
    operators: dict[str, Any] = {}
    for name, cls in sorted(classes.items()):
        per_backend = implementations.get(cls, {})
        if not per_backend and name not in generated:
            continue  # a base with no implementation anywhere: not an operator the library offers
        row: dict[str, Any] = {"class": cls}
        if name in deprecated:
            row["deprecated"] = True
        # The ATen overloads its generated ATen backend (index 8, every
        # backend) mirrors; empty when it has none.
        row["aten_out"] = generated.get(name, [])
        row["backends"] = {}
        row["implementations"] = {}
        for backend in BACKENDS:
            impls = sorted(per_backend.get(backend, []), key=lambda i: (i["index"], i["path"]))
            kinds = {i["kind"] for i in impls} | ({"torch"} if name in generated else set())
            row["backends"][backend] = "native" if "native" in kinds else "aten" if "torch" in kinds else "absent"
            if impls:
                row["implementations"][backend] = [f"{i['kind']}:{i['index']}:{i['path']}" for i in impls]
        operators[name] = row

    summary = {b: {s: sum(1 for r in operators.values() if r["backends"][b] == s)
                   for s in ("native", "aten", "absent")} for b in BACKENDS}
    return {
        "format": 1,
        "infiniops": {**pin, "repository": "https://github.com/InfiniTensor/InfiniOps"},
        "generated_with": {"torch": torch_version, "tool": "tools/infiniops_matrix.py",
                           "date": datetime.date.today().isoformat()},
        "backends": list(BACKENDS),
        "aten_index": ATEN_INDEX,
        "torch_devices": torch_devices(tree),
        "summary": summary,
        "operators": operators,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=pathlib.Path, required=True,
                        help="an InfiniOps git repository (checkout or bare mirror)")
    parser.add_argument("--pin", required=True, help="the commit to read (any git revision)")
    parser.add_argument("--out", type=pathlib.Path,
                        help=f"output file (default: {DEFAULT_OUT}/infiniops_<short pin>.json)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="infiniops-") as tmp:
        tree = pathlib.Path(tmp)
        pin = export_tree(args.repo, args.pin, tree)
        matrix = build_matrix(tree, pin)
    out = args.out or DEFAULT_OUT / f"infiniops_{pin['short']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(matrix, indent=1, sort_keys=False) + "\n")
    print(f"{out}: {len(matrix['operators'])} operators at InfiniOps {pin['short']} "
          f"(ATen schemas of torch {matrix['generated_with']['torch']})")
    for backend, counts in matrix["summary"].items():
        print(f"  {backend:<10} native {counts['native']:>3}  ATen-backed only {counts['aten']:>3}  "
              f"absent {counts['absent']:>3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
