"""What is installed and selected: the first thing to run on a half-installed stack.

:func:`diagnostics` never raises: every part it can read is filled in, and
what went wrong (a build for another PyTorch, a native module that does not
load, a malformed TORCH_INFINI_* variable, a provider that cannot start) is
listed under ``problems``, each with its fix.
"""

from __future__ import annotations

import platform
import re
from typing import Any, Optional

from . import _env


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _in_a_checkout() -> bool:
    """Whether this package is the torch_infini/ of a source checkout (next to setup.py)."""
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "setup.py").is_file()


def fix_for(error: BaseException, stack_compiled: Optional[bool] = None) -> str:
    """What to do about ``error``, one of the failures diagnostics reports."""
    text = str(error)
    variable = re.search(r"\b(TORCH_INFINI_[A-Z_]+)='", text)
    if variable:
        name = variable.group(1)
        accepted = _env.VARIABLES.get(name, "see the README's configuration table")
        return f"set {name} to {accepted}; or unset it for the default"
    if "is refused: this torch_infini's InfiniOps is ATen-backed" in text:
        return ("install the PyTorch the problem names in this environment (and rebuild torch_infini with it), or "
                "use an InfiniOps built WITH_TORCH=OFF; meanwhile TORCH_INFINI_RT_BACKEND=cpu or "
                "TORCH_INFINI_PROVIDER=host run elsewhere")
    device_torch = re.search(r"\b(libtorch_cuda|libc10_cuda|libtorch_hip|libc10_hip)\.so", text)
    if "cannot open shared object file" in text and device_torch:
        return (f"the loader needs {device_torch.group(1)}.so, a library of a CUDA (or ROCm) build of PyTorch: "
                "InfiniOps built WITH_TORCH=ON against such a PyTorch runs its 'cuda' kernels, and this "
                "process's PyTorch has none. Install that build of PyTorch (the one InfiniOps was built with) "
                "and rebuild torch_infini with it, or use an InfiniOps built WITH_TORCH=OFF")
    if "TORCH_INFINI_PROVIDER=infini" in text or "TORCH_INFINI_RT_BACKEND=" in text:
        return ("rebuild torch_infini with INFINI_RT_PREFIX and INFINI_OPS_PREFIX set (README, 'Building "
                "against the Infini stack'), or unset TORCH_INFINI_PROVIDER / TORCH_INFINI_RT_BACKEND "
                "to use the host runtime")
    if "undefined symbol" in text:
        if stack_compiled:
            return ("the InfiniOps and InfiniRT libraries the loader finds do not match each other or this "
                    "build: rebuild InfiniOps against the InfiniRT on LD_LIBRARY_PATH, then rebuild "
                    "torch_infini (pip install --no-build-isolation -e .)")
        return "rebuild torch_infini against the installed PyTorch (pip install --no-build-isolation -e .)"
    if "cannot open shared object file" in text:
        return ("put the lib directories of the InfiniRT and InfiniOps installs on LD_LIBRARY_PATH "
                "(README, 'Building against the Infini stack'), or rebuild torch_infini without them")
    if isinstance(error, ImportError) and "build metadata" in text and "missing" in text and _in_a_checkout():
        return ("this is the torch_infini/ of a source checkout, which was never built: build it in place "
                "(pip install --no-build-isolation -e .), or run from another directory to use an installed "
                "torch_infini")
    if isinstance(error, ImportError) and ("built for PyTorch" in text or "build metadata" in text
                                           or "_GLIBCXX_USE_CXX11_ABI" in text):
        return "rebuild torch_infini against the running PyTorch: pip install --no-build-isolation -e ."
    if isinstance(error, ImportError):
        return ("reinstall torch_infini (pip install --no-build-isolation -e .), in the environment whose "
                "python runs this")
    return "see the README's Troubleshooting section"


def _problem(error: BaseException, stack_compiled: Optional[bool] = None) -> dict[str, str]:
    return {"problem": _first_line(error), "fix": fix_for(error, stack_compiled)}


def diagnostics(load_error: Optional[BaseException] = None) -> dict[str, Any]:
    """Return the torch_infini version, the PyTorch build, the provider and
    backend in use (and why), the backends compiled in, the devices and the
    provider's capabilities, as a dict (``python -m torch_infini`` prints it).

    Never raises. A part that cannot be read is None, and ``problems`` lists
    each failure (``problem``, ``fix``); ``usable`` says whether an infini
    device can be used. ``load_error`` is the exception that kept the
    package from loading, when there is one.
    """
    from . import __version__

    d: dict[str, Any] = {
        "torch_infini": __version__, "python": platform.python_version(),
        "torch": None, "torch_cxx11_abi": None, "built_for_torch": None,
        "infini_stack_compiled": None, "infini_rt_backends_compiled": [], "infini_ops_operators_compiled": [],
        "infini_ops_aten_backed": [],
        "provider": None, "backend": None, "selection_reason": None, "device_count": 0, "devices": [],
        "capabilities": {}, "caching_allocator": None, "transfer_cuda": False, "problems": [], "usable": False,
    }
    problems = d["problems"]
    try:
        import torch

        d["torch"] = torch.__version__
        d["torch_cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    except Exception as error:  # noqa: BLE001
        problems.append(_problem(error))
    try:
        from ._guard import load_metadata

        build = load_metadata()
        d["built_for_torch"] = build["torch_version"]
        d["infini_stack_compiled"] = bool(build["infini_stack"])
        d["infini_rt_backends_compiled"] = list(build.get("infini_rt_backends", []))
        d["infini_ops_operators_compiled"] = list(build.get("infini_ops_operators", []))
        d["infini_ops_aten_backed"] = list(build.get("infini_ops_aten_backed", []))
    except Exception as error:  # noqa: BLE001
        if load_error is None or str(error) != str(load_error):
            problems.append(_problem(error))
    if load_error is not None:
        problems.append(_problem(load_error, d["infini_stack_compiled"]))
    else:
        _runtime(d)
    try:
        from . import _transfer

        d["transfer_cuda"] = _transfer.is_enabled()
    except Exception:  # noqa: BLE001  (PyTorch itself cannot load: reported above)
        pass
    for name in _env.unknown_variables():
        problems.append({"problem": f"{name} is set, but torch_infini reads no such variable",
                         "fix": f"check the spelling; the variables are {', '.join(_env.VARIABLES)}"})
    return d


def _runtime(d: dict[str, Any]) -> None:
    """The provider, devices and capabilities, or the problem that hides them."""
    try:
        from . import _C

        count = _C._device_count()
        info = _C._provider_info()
        d.update(provider=info["provider"], backend=info["backend"], selection_reason=info["reason"],
                 device_count=info["device_count"], capabilities=dict(info["capabilities"]),
                 caching_allocator=bool(info["caching_allocator"]))
        for index in range(count):
            free, total = _C._mem_get_info(index)
            d["devices"].append({"index": index, "name": _C._device_name(index), "total_memory": int(total),
                                 "free_memory": int(free)})
        d["usable"] = count > 0
        if count == 0:
            d["problems"].append({"problem": "the runtime reports no infini device",
                                  "fix": "see the README's Troubleshooting section"})
    except Exception as error:  # noqa: BLE001
        d["problems"].append(_problem(error, d["infini_stack_compiled"]))


def operator_table() -> list[dict[str, Any]]:
    """The operators the selected provider runs natively, with their support
    matrix (dtypes, alpha, broadcasting, strided inputs, kernel)."""
    from . import _C

    return [dict(entry) for entry in _C._op_support()]


# Operator namespaces whose PrivateUse1 kernels are torch_infini's own.
_OWN_NAMESPACES = ("aten",)


def _family(op: str) -> str:
    """"aten::add_.Tensor" -> "aten::add": the operator without overload or in-place mark."""
    return op.split(".", 1)[0].rstrip("_")


def registered_operators() -> list[dict[str, Any]]:
    """Every operator with a kernel registered for the infini device
    (PrivateUse1), sorted: ``op``, ``native`` (a torch_infini kernel that runs
    on the device with the selected provider; the operator table gives the
    dtypes and arguments it supports where they are limited) and ``note``.
    Operators not listed reach the boxed fallback: they raise
    ``NotImplementedError``, or run on the CPU when the opt-in CPU fallback is
    on (see ``torch_infini.fallback``)."""
    import torch

    from . import _C

    info = _C._provider_info()
    provider = info["provider"] if info["provider"] == "host" else f"{info['provider']}/{info['backend']}"
    # The support matrix of "aten::add.Tensor" holds for add_ and add.out too.
    limited = {_family(row["op"]): row for row in _C._op_support()}
    generic = {row["op"]: row["sync_reason"] for row in _C._generic_aten_ops()}
    rows = []
    for name in sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")):
        namespace = name.split("::", 1)[0]
        if namespace in _OWN_NAMESPACES:
            note = f"native on {provider}"
            if name in generic:
                reason = generic[name]
                note += (f", synchronizing ({reason})" if reason else ", queued") + (
                    " (ATen's CPU kernel)" if info["provider"] == "host" else
                    " where InfiniOps serves it, else as PyTorch's decomposition where it has one and its "
                    "parts are served, else refused (or the opt-in CPU fallback)")
            row = limited.get(_family(name))
            if row is not None:
                note += f" (dtypes: {', '.join(row['dtypes'])}; kernel: {row['kernel']})"
            rows.append({"op": name, "native": True, "note": note})
        elif namespace == "c10d":
            rows.append({"op": name, "native": False,
                         "note": "registered by PyTorch's distributed package: it dispatches to a ProcessGroup "
                                 "backend, and torch_infini provides none"})
        else:
            rows.append({"op": name, "native": False, "note": f"registered by the '{namespace}' library"})
    return rows


def _unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)


def format_diagnostics(d: dict[str, Any], backends: Optional[str] = None) -> str:
    """The text ``python -m torch_infini`` prints: every line it can (and
    `backends`, the per-backend table, where given), then each problem and
    its fix."""
    abi = "unknown" if d["torch_cxx11_abi"] is None else str(int(d["torch_cxx11_abi"]))
    stack = d["infini_stack_compiled"]
    lines = [
        f"torch_infini {d['torch_infini']} (Python {d['python']})",
        f"PyTorch {_unknown(d['torch'])} (CXX11 ABI {abi}), built for {_unknown(d['built_for_torch'])}",
        f"Infini stack compiled in: {'unknown' if stack is None else 'yes' if stack else 'no'}"
        + (f" (InfiniRT backends: {', '.join(d['infini_rt_backends_compiled']) or 'unknown'};"
           f" InfiniOps operators: {', '.join(d['infini_ops_operators_compiled']) or 'none'})"
           if stack else ""),
    ]
    if stack:
        aten_backed = d.get("infini_ops_aten_backed", [])
        lines.append("InfiniOps ATen-backed (WITH_TORCH=ON) on: " + (
            ", ".join(aten_backed) + " (its ATen-backed implementations run that device's PyTorch kernels in this "
            "process)" if aten_backed else "none (native kernels only)"))
    if d["provider"] is not None:
        lines.append(f"Provider: {d['provider']}  backend: {d['backend']}  ({d['selection_reason']})")
        lines.append(f"Devices: {d['device_count']}")
        for dev in d["devices"]:
            lines.append(f"  infini:{dev['index']}  {dev['name']}  total {dev['total_memory'] / 2**30:.1f} GiB")
        caps = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in d["capabilities"].items())
        lines.append(f"Capabilities: {caps}")
        lines.append(f"Caching allocator: {'on' if d['caching_allocator'] else 'off (TORCH_INFINI_ALLOC_CONF)'}")
    else:
        lines.append("Provider: none could start (see the problem below)")
        lines.append("Devices: 0")
    lines.append("CUDA-to-infini switch: " + (
        "on" if d.get("transfer_cuda") else "off (TORCH_INFINI_TRANSFER_CUDA=1 or import torch_infini.transfer_to_infini)"))
    if backends:
        lines.append(backends)
    for problem in d["problems"]:
        lines.append(f"Problem: {problem['problem']}")
        lines.append(f"  Fix: {problem['fix']}")
    lines.append("Status: " + ("usable" if d["usable"] else "the infini device cannot be used"))
    return "\n".join(lines)


def format_registered_operators(rows: list[dict[str, Any]]) -> str:
    native = [row for row in rows if row["native"]]
    other = [row for row in rows if not row["native"]]
    lines = [f"Operators registered for infini: {len(native)} native"]
    lines += [f"  {row['op']}  {row['note']}" for row in native]
    if other:
        lines.append(f"Registered for PrivateUse1 by other libraries (not infini kernels): {len(other)}")
        lines += [f"  {row['op']}" for row in other]
        notes = sorted({row["note"] for row in other})
        lines += [f"  ({note})" for note in notes]
    lines.append("Every other operator raises NotImplementedError, or runs on the CPU with the opt-in "
                 "CPU fallback (TORCH_INFINI_CPU_FALLBACK=1; see torch_infini.fallback).")
    return "\n".join(lines)


def format_operator_table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        flags = [name for name in ("alpha", "broadcast", "strided") if row.get(name)]
        lines.append(f"{row['op']}")
        lines.append(f"    dtypes: {', '.join(row['dtypes'])}")
        lines.append(f"    supports: {', '.join(flags) or '-'}; kernel: {row['kernel']}")
    return "\n".join(lines)


def backend_table(pin: Optional[str] = None) -> list[dict[str, Any]]:
    """Per InfiniOps backend at `pin` (default the current pin): how many of
    the ATen overloads bound to an InfiniOps operator it serves natively,
    how many only ATen-backed (and the PyTorch that then needs), how many
    not at all (``torch_infini.backend_support``'s support matrix)."""
    from . import _aten_backed, backend_support

    pin = pin or backend_support.CURRENT_PIN
    rows = []
    for backend in backend_support.BACKENDS:
        found = backend_support.bound_by_status(backend, pin)
        rows.append({"backend": backend, "native": len(found["native"]), "aten": len(found["aten"]),
                     "absent": len(found["absent"]), "torch_device": backend_support.torch_device(backend, pin),
                     "aten_needs": _aten_backed.needed_pytorch(backend)})
    return rows


def format_backend_table(rows: list[dict[str, Any]], pin: str) -> str:
    """The text of :func:`backend_table` (``python -m torch_infini``)."""
    total = rows[0]["native"] + rows[0]["aten"] + rows[0]["absent"] if rows else 0
    lines = [f"InfiniOps {pin} per backend: the {total} ATen overloads bound to an InfiniOps operator, as each "
             "backend serves them (support matrix of the pin; ATen-backed needs InfiniOps built WITH_TORCH=ON and, "
             "in the process, the PyTorch named)",
             f"  {'backend':<10} {'native':>6} {'ATen-backed':>11} {'absent':>6}  ATen-backed runs PyTorch's kernels of"]
    for row in rows:
        lines.append(f"  {row['backend']:<10} {row['native']:>6} {row['aten']:>11} {row['absent']:>6}  "
                     f"'{row['torch_device']}': {row['aten_needs']}")
    lines.append("  (python -m torch_infini --backend NAME lists them; python -m torch_infini coverage --backend NAME "
                 "-- prog.py weighs them by a program's calls)")
    return "\n".join(lines)


def format_backend_overloads(backend: str, pin: str) -> str:
    """Every bound overload of `backend` at `pin`, by how it is served
    (``python -m torch_infini --backend NAME``)."""
    from . import _aten_backed, backend_support

    found = backend_support.bound_by_status(backend, pin)
    titles = {"native": f"native on {backend}",
              "aten": f"ATen-backed only (InfiniOps WITH_TORCH=ON; needs {_aten_backed.needed_pytorch(backend)})",
              "absent": f"absent on {backend} (no InfiniOps operator bound to it is there)"}
    lines = [f"InfiniOps {pin}, backend {backend}: the ATen overloads bound to an InfiniOps operator"]
    for status, title in titles.items():
        lines.append(f"{title}: {len(found[status])}")
        lines += [f"  {overload}" for overload in found[status]]
    return "\n".join(lines)
