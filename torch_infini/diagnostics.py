"""What is installed and selected: the first thing to run on a half-installed stack."""

from __future__ import annotations

import platform
from typing import Any

import torch

from . import _C
from ._guard import load_metadata


def diagnostics() -> dict[str, Any]:
    """Return the torch_infini version, the PyTorch build, the provider and
    backend in use (and why), the backends compiled in, the devices and the
    provider's capabilities, as a dict (``python -m torch_infini`` prints it)."""
    from . import __version__

    build = load_metadata()
    info = _C._provider_info()
    devices = []
    for index in range(_C._device_count()):
        free, total = _C._mem_get_info(index)
        devices.append({"index": index, "name": _C._device_name(index), "total_memory": int(total),
                        "free_memory": int(free)})
    return {
        "torch_infini": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "built_for_torch": build["torch_version"],
        "infini_stack_compiled": bool(build["infini_stack"]),
        "infini_rt_backends_compiled": list(build.get("infini_rt_backends", [])),
        "infini_ops_operators_compiled": list(build.get("infini_ops_operators", [])),
        "provider": info["provider"],
        "backend": info["backend"],
        "selection_reason": info["reason"],
        "device_count": info["device_count"],
        "devices": devices,
        "capabilities": dict(info["capabilities"]),
        "caching_allocator": bool(info["caching_allocator"]),
    }


def operator_table() -> list[dict[str, Any]]:
    """The operators the selected provider runs natively, with their support
    matrix (dtypes, alpha, broadcasting, strided inputs, kernel)."""
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
                    " where InfiniOps serves it, else refused (or the opt-in CPU fallback)")
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


def format_diagnostics(d: dict[str, Any]) -> str:
    caps = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in d["capabilities"].items())
    lines = [
        f"torch_infini {d['torch_infini']} (Python {d['python']})",
        f"PyTorch {d['torch']} (CXX11 ABI {int(d['torch_cxx11_abi'])}), built for {d['built_for_torch']}",
        f"Infini stack compiled in: {'yes' if d['infini_stack_compiled'] else 'no'}"
        + (f" (InfiniRT backends: {', '.join(d['infini_rt_backends_compiled']) or 'unknown'};"
           f" InfiniOps operators: {', '.join(d['infini_ops_operators_compiled']) or 'none'})"
           if d["infini_stack_compiled"] else ""),
        f"Provider: {d['provider']}  backend: {d['backend']}  ({d['selection_reason']})",
        f"Devices: {d['device_count']}",
    ]
    for dev in d["devices"]:
        lines.append(f"  infini:{dev['index']}  {dev['name']}  total {dev['total_memory'] / 2**30:.1f} GiB")
    lines.append(f"Capabilities: {caps}")
    lines.append(f"Caching allocator: {'on' if d['caching_allocator'] else 'off (TORCH_INFINI_ALLOC_CONF)'}")
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
