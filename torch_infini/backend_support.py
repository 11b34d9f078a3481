"""Which ATen overloads each InfiniOps backend serves natively, without the
hardware: the support matrices kept in the package (one per supported
InfiniOps pin, ``torch_infini/data/infiniops_<pin>.json``, written by
``tools/infiniops_matrix.py``), the binding rules that say which ATen
overload reaches which InfiniOps operator, and the enforcement switch
``TORCH_INFINI_ENFORCE_BACKEND``.

A call made on infini tensors is, on an InfiniOps backend:

* ``device``: run by the device itself, not by an InfiniOps operator (views,
  allocation, copies, fills; random draws, made as the CPU makes them);
* ``native``: bound to an InfiniOps operator with a native kernel there;
* ``aten``: bound to an InfiniOps operator that has only its ATen-backed
  implementation there (InfiniOps built ``WITH_TORCH=ON``; index 8);
* ``unserved``: no InfiniOps operator serves it there. It is refused
  (``NotImplementedError``), or with ``TORCH_INFINI_CPU_FALLBACK=1`` runs on
  the CPU through the counted fallback (never for views and random operators).

``composite`` calls (ATen's device-generic decompositions, and torch-infini's
kernels that compose a call from other operators) run as their parts, which
are counted on their own.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BACKENDS",
    "CURRENT_PIN",
    "BASELINE_PIN",
    "ENFORCE_VARIABLE",
    "pins",
    "load_matrix",
    "aten_bindings",
    "generic_bindings",
    "classify",
    "Verdict",
    "served_overloads",
    "torch_device",
    "bound_by_status",
    "enforce",
    "enforcement",
]

BACKENDS = ("cpu", "nvidia", "ascend", "cambricon", "metax", "moore", "iluvatar", "hygon")
CURRENT_PIN = "1f6f9c2"
BASELINE_PIN = "2962714"
ENFORCE_VARIABLE = "TORCH_INFINI_ENFORCE_BACKEND"
DATA = pathlib.Path(__file__).resolve().parent / "data"

#: Overloads the infini device runs itself (torch-infini's own kernels in
#: csrc/ops/: views.cpp, copy.cpp, factory.cpp, fill.cpp, streams.cpp,
#: shallow_copy.cpp, and the random kernels of csrc/ops/random/, which draw as
#: the CPU draws).
#: Views by schema (a non-written alias result) are added to these.
DEVICE_RUN = frozenset({
    # views.cpp
    "aten::_reshape_alias", "aten::as_strided", "aten::unfold", "aten::view", "aten::view_as_complex",
    "aten::view_as_real",
    # copy.cpp
    "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_local_scalar_dense",
    # factory.cpp
    "aten::empty.memory_format", "aten::empty_strided", "aten::resize_", "aten::set_",
    "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset",
    # fill.cpp
    "aten::fill_.Scalar", "aten::fill_.Tensor", "aten::zero_",
    # streams.cpp, shallow_copy.cpp
    "aten::record_stream", "aten::_has_compatible_shallow_copy_type",
    # random_distributions.cpp, random_sampling.cpp
    "aten::bernoulli.out", "aten::bernoulli_.Tensor", "aten::bernoulli_.float", "aten::cauchy_",
    "aten::exponential_", "aten::geometric_", "aten::log_normal_", "aten::normal.Tensor_Tensor",
    "aten::normal.Tensor_Tensor_out", "aten::normal.Tensor_float", "aten::normal.Tensor_float_out",
    "aten::normal.float_Tensor", "aten::normal.float_Tensor_out", "aten::normal_", "aten::random_",
    "aten::random_.from", "aten::random_.to", "aten::uniform_", "aten::multinomial", "aten::multinomial.out",
    "aten::randperm.generator_out",
})

#: torch-infini's kernels that compose the call from other operators (each
#: counted on its own): the RNN cells, LSTM, dropout's mask.
COMPOSED = frozenset({
    "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl", "aten::_thnn_fused_gru_cell",
    "aten::_thnn_fused_gru_cell_backward", "aten::lstm.input", "aten::native_dropout",
})

#: Where InfiniOps deliberately differs from ATen: the hand-written
#: operators and the ATen overloads they stand for (each with its
#: functional, in-place and out= forms), and native kernels of operators
#: whose InfiniOps API is not an ATen schema's (gelu, softmax, embedding,
#: convolution: a fused or reduced argument list) that the Infini provider
#: could serve with one adaptation each.
HAND_BOUND: dict[str, tuple[str, ...]] = {
    "add": ("aten::add.out",),  # alpha
    "mul": ("aten::mul.out",),
    "gemm": ("aten::mm.out", "aten::addmm.out", "aten::bmm.out", "aten::baddbmm.out", "aten::addmv.out"),
    "cat": ("aten::cat.out",),
    "relu": ("aten::relu",),
    "silu": ("aten::silu.out",),
    "gelu": ("aten::gelu.out",),
    "sigmoid": ("aten::sigmoid.out",),
    "softmax": ("aten::_softmax.out",),  # softmax.int is CompositeImplicit: it arrives as _softmax
    "embedding": ("aten::embedding",),
    "convolution": ("aten::convolution_overrideable", "aten::convolution"),
    "rms_norm": ("aten::rms_norm",),
    "causal_softmax": ("infini::causal_softmax",),
    "silu_and_mul": ("infini::silu_and_mul",),
    "swiglu": ("infini::swiglu",),
}

#: The ATen overloads torch-infini's Infini provider serves through its
#: hand-written entries (csrc/runtime/infini/: infini_gemm.cpp,
#: infini_native.cpp's Mul/Relu/Silu limits, infini_cat.cpp,
#: infini_kernels.cpp and ops/arithmetic.cpp, ops/nn/fused.cpp), with the InfiniOps
#: operator each runs on. Functional forms reach it through their out=
#: twins. The generic binding (torch_infini/infiniops_binding.py) serves more on a
#: given install, as `python -m torch_infini --ops` lists there: this list is
#: the floor, not the whole.
PROVIDER_TODAY: dict[str, str] = {
    **dict.fromkeys(("aten::mm.out", "aten::addmm.out", "aten::addmm_", "aten::bmm.out", "aten::baddbmm.out",
                     "aten::baddbmm_", "aten::addmv.out", "aten::addmv_", "aten::mm", "aten::addmm",
                     "aten::bmm", "aten::baddbmm", "aten::addmv"), "gemm"),
    **dict.fromkeys(("aten::mul.out", "aten::mul_.Tensor", "aten::mul.Tensor"), "mul"),
    **dict.fromkeys(("aten::relu", "aten::relu_"), "relu"),
    **dict.fromkeys(("aten::silu.out", "aten::silu_", "aten::silu"), "silu"),
    **dict.fromkeys(("aten::cat.out", "aten::cat"), "cat"),
    **dict.fromkeys(("aten::add.Tensor", "aten::add_.Tensor", "aten::add.out"), "add"),
    "aten::rms_norm": "rms_norm",
    "infini::swiglu": "swiglu",
    "infini::silu_and_mul": "silu_and_mul",
    "infini::causal_softmax": "causal_softmax",
}


def pins() -> list[str]:
    """The InfiniOps pins with a support matrix in the package (short form)."""
    return sorted(p.stem.removeprefix("infiniops_") for p in DATA.glob("infiniops_*.json"))


@functools.lru_cache(maxsize=None)
def load_matrix(pin: str = CURRENT_PIN) -> dict[str, Any]:
    """The support matrix of InfiniOps ``pin`` (a commit prefix of a
    supported pin). Raises ``ValueError`` naming the supported pins."""
    matches = [p for p in pins() if p.startswith(pin[:7]) and pin.startswith(p[:len(pin)])]
    if len(matches) != 1:
        raise ValueError(f"no InfiniOps support matrix for pin '{pin}': the package has {', '.join(pins())} "
                         f"(tools/infiniops_matrix.py writes one for another pin)")
    return json.loads((DATA / f"infiniops_{matches[0]}.json").read_text())


# --- ATen's groups of overloads --------------------------------------------

def _schema_key(schema) -> tuple:
    """An overload's non-output arguments: name and type, aliasing ignored."""
    return tuple((a.name, str(a.type)) for a in schema.arguments
                 if not (a.alias_info is not None and a.alias_info.is_write and a.kwarg_only))


@functools.lru_cache(maxsize=1)
def _schemas() -> dict[str, Any]:
    import torch

    return {f"{s.name}.{s.overload_name}" if s.overload_name else s.name: s
            for s in torch._C._jit_get_all_schemas()}


@functools.lru_cache(maxsize=1)
def _groups() -> dict[tuple, list[str]]:
    """(base name without a trailing _, arguments) -> the overloads sharing
    them: a functional overload, its in-place form and its out= form, as
    ATen groups them (native_functions.yaml's functional/inplace/out)."""
    groups: dict[tuple, list[str]] = {}
    for name, schema in _schemas().items():
        base = schema.name.removesuffix("_")
        # An in-place form writes self, which stays among its arguments.
        groups.setdefault((base, _schema_key(schema)), []).append(name)
    return groups


def aten_twins(overload: str) -> list[str]:
    """`overload` and its functional, in-place and out= forms."""
    schema = _schemas().get(overload)
    if schema is None:
        return [overload]
    return sorted(set(_groups().get((schema.name.removesuffix("_"), _schema_key(schema)), [overload])) | {overload})


def writes_an_input(overload: str) -> bool:
    """Whether `overload` writes an argument that is neither an output nor,
    for an in-place overload, self."""
    schema = _schemas().get(overload)
    if schema is None:
        return False
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write
               and not a.kwarg_only]
    return bool(written) and not (schema.name.endswith("_") and [a.name for a in written] == ["self"])


def is_view(overload: str) -> bool:
    """Whether `overload` returns a view of an input (an alias it does not write)."""
    schema = _schemas().get(overload)
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write
                                      for r in schema.returns)


def is_random(overload: str) -> bool:
    """Whether `overload` is random (takes a Generator), as the fallback decides."""
    schema = _schemas().get(overload)
    return schema is not None and any("Generator" in str(a.type) for a in schema.arguments)


# --- the binding rules ------------------------------------------------------

@functools.lru_cache(maxsize=None)
def generic_bindings(pin: str = CURRENT_PIN) -> dict[str, tuple[str, ...]]:
    """ATen overload -> the InfiniOps operators (of the pin's matrix) the
    generic binding serves it with, by the rules the build binds an install
    with (:mod:`torch_infini.infiniops_binding`).

    An operator generated from ATen ``.out`` (or in-place) schemas has those
    schemas' public signatures (that is how InfiniOps generates it:
    :func:`~torch_infini.infiniops_binding.generated_signature`), so the matrix's
    overloads are offered to :func:`~torch_infini.infiniops_binding.bind` as
    an install would offer them: what binds there (and its in-place and
    functional forms) binds here, and what the build leaves out (random
    overloads, those writing an input such as batch norm's running
    statistics) is left out here. Each bound overload serves its functional,
    in-place and out= forms: the ops layer queues a functional call as its
    out= twin."""
    from . import infiniops_binding as rules

    operators = load_matrix(pin)["operators"]
    schemas = {s.qualified: s for s in rules.aten_schemas_from_torch()}
    signatures: dict[str, list[tuple]] = {}
    name_of: dict[str, str] = {}
    for name, row in operators.items():
        name_of[row["class"]] = name
        for overload in row["aten_out"]:
            expected = rules.generated_signature(schemas[overload]) if overload in schemas else "unknown"
            if not isinstance(expected, str):
                signatures.setdefault(row["class"], []).append(
                    tuple(rules.Param(p.cpp_type, p.name) for p in expected[0]))
    bound: dict[str, set[str]] = {}
    for binding in rules.bind(signatures, schemas.values()).bindings:
        for twin in aten_twins(binding.aten):
            bound.setdefault(twin, set()).add(name_of[binding.operator])
    return {overload: tuple(sorted(ops)) for overload, ops in bound.items()}


@functools.lru_cache(maxsize=None)
def aten_bindings(pin: str = CURRENT_PIN) -> dict[str, tuple[str, ...]]:
    """ATen overload -> the InfiniOps operators (of the pin's matrix) that
    serve it: the generic binding's (:func:`generic_bindings`), and the
    hand-written operators' of :data:`HAND_BOUND` with their functional,
    in-place and out= forms."""
    operators = load_matrix(pin)["operators"]
    bound = {overload: set(ops) for overload, ops in generic_bindings(pin).items()}
    for name, overloads in HAND_BOUND.items():
        if name in operators:
            for overload in overloads:
                for twin in aten_twins(overload):
                    bound.setdefault(twin, set()).add(name)
    return {overload: tuple(sorted(ops)) for overload, ops in bound.items()}


@dataclass(frozen=True)
class Verdict:
    """How one ATen overload fares on one backend at one pin."""

    status: str  # device, native, aten, unserved, composite
    operators: tuple[str, ...] = ()  # the InfiniOps operators bound to it
    # Served by torch-infini's Infini provider at that status on an InfiniOps
    # that has the operator: bound generically, or one of its hand-written
    # entries. False for a native kernel whose API differs from ATen's and
    # that no entry adapts yet (HAND_BOUND only: Softmax for _softmax, ...).
    today: bool = False
    fails: str = ""  # for unserved: "refused" or "fallback" (with TORCH_INFINI_CPU_FALLBACK=1)
    # For unserved: PyTorch has a decomposition the provider runs it as, where
    # the operators it calls are served (torch_infini.decompositions); only
    # otherwise does it fail as `fails` says.
    decomposes: bool = False


_RANK = {"native": 0, "aten": 1, "absent": 2}


def classify(overload: str, backend: str, pin: str = CURRENT_PIN, kind: str = "native") -> Verdict:
    """How `overload` ("aten::mm.out") would run on `backend` at InfiniOps
    `pin`. `kind` is how it ran on the host runtime (the coverage record's:
    ``composite`` calls run as their parts)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown InfiniOps backend '{backend}': expected one of {', '.join(BACKENDS)}")
    operators = load_matrix(pin)["operators"]
    bound = aten_bindings(pin).get(overload, ())
    statuses = sorted((operators[op]["backends"][backend] for op in bound), key=_RANK.__getitem__)
    best = statuses[0] if statuses else "absent"
    # Served as well as InfiniOps could: by the generic binding at the same
    # status (an ATen-backed internal::Softmax does not make _softmax's
    # native Softmax served), or by a hand-written entry on a native kernel.
    generic = sorted((operators[op]["backends"][backend] for op in generic_bindings(pin).get(overload, ())),
                     key=_RANK.__getitem__)
    today = best != "absent" and (generic[:1] == [best] or (
        best == "native" and overload in PROVIDER_TODAY
        and operators.get(PROVIDER_TODAY[overload], {}).get("backends", {}).get(backend) == "native"))
    if kind == "composite" or overload in COMPOSED:
        # Ran as its parts on the host runtime, and they are counted: where an
        # InfiniOps operator would serve it whole (embedding), `operators` says so.
        return Verdict("composite", bound, today)
    if best == "native":
        return Verdict("native", bound, today)
    if overload in DEVICE_RUN or is_view(overload):
        return Verdict("device", bound, True)
    if overload == "aten::rms_norm":
        # Decomposed by torch-infini where no fused kernel serves it.
        return Verdict("composite", bound, today)
    if best == "aten":
        return Verdict("aten", bound, today)
    fails = "refused" if is_random(overload) else "fallback"
    return Verdict("unserved", bound, today, fails, decomposes=_decomposes(overload))


def _decomposes(overload: str) -> bool:
    """Whether the Infini provider tries PyTorch's decomposition of `overload`
    (non-random, writing only out= arguments: the kernel's rule)."""
    from .decompositions import decomposition_table

    return not is_random(overload) and overload in decomposition_table()


def torch_device(backend: str, pin: str = CURRENT_PIN) -> str:
    """The PyTorch device `backend`'s ATen-backed implementations run ATen's
    kernels on at InfiniOps `pin` (``"cuda"`` for ``"nvidia"``, ``"npu"``
    for ``"ascend"``): that device's PyTorch must be in the process for
    them to run (:mod:`torch_infini._aten_backed`)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown InfiniOps backend '{backend}': expected one of {', '.join(BACKENDS)}")
    return load_matrix(pin)["torch_devices"][backend]


def bound_by_status(backend: str, pin: str = CURRENT_PIN) -> dict[str, list[str]]:
    """The ATen overloads bound to an InfiniOps operator at `pin`
    (:func:`aten_bindings`), by how `backend` serves them: ``native`` (an
    operator bound to it has a native kernel there), ``aten`` (ATen-backed
    only: InfiniOps built ``WITH_TORCH=ON``, running PyTorch's kernels for
    :func:`torch_device`), ``absent`` (none of its operators is there)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown InfiniOps backend '{backend}': expected one of {', '.join(BACKENDS)}")
    operators = load_matrix(pin)["operators"]
    found: dict[str, list[str]] = {"native": [], "aten": [], "absent": []}
    for overload, ops in sorted(aten_bindings(pin).items()):
        best = min((operators[op]["backends"][backend] for op in ops), key=_RANK.__getitem__)
        found[best].append(overload)
    return found


def served_overloads(backend: str, pin: str = CURRENT_PIN, with_torch: bool = False) -> list[str]:
    """Every overload the enforcement lets run for `backend`: those bound to
    an operator native there (ATen-backed ones too, `with_torch`), and what
    the device runs itself (its own kernels and every view)."""
    served = set(DEVICE_RUN) | COMPOSED
    served |= {name for name in _schemas() if is_view(name)}
    wanted = {"native", "aten"} if with_torch else {"native"}
    operators = load_matrix(pin)["operators"]
    for overload, ops in aten_bindings(pin).items():
        if any(operators[op]["backends"][backend] in wanted for op in ops):
            served.add(overload)
    return sorted(served)


def parse_enforcement(value: str) -> tuple[str, str, bool]:
    """``BACKEND[,PIN][,torch]`` -> (backend, pin, with_torch). Raises
    ``RuntimeError`` naming the variable on a malformed value."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    accepted = (f"BACKEND[,PIN][,torch] with BACKEND one of {', '.join(BACKENDS)} and PIN one of "
                f"{', '.join(pins())} (default {CURRENT_PIN})")
    if not parts or parts[0] not in BACKENDS:
        raise RuntimeError(f"{ENFORCE_VARIABLE}='{value}' is invalid: expected {accepted}")
    backend, rest = parts[0], parts[1:]
    with_torch = "torch" in rest
    rest = [p for p in rest if p != "torch"]
    if len(rest) > 1:
        raise RuntimeError(f"{ENFORCE_VARIABLE}='{value}' is invalid: expected {accepted}")
    pin = rest[0] if rest else CURRENT_PIN
    try:
        pin = load_matrix(pin)["infiniops"]["short"]
    except ValueError:
        raise RuntimeError(f"{ENFORCE_VARIABLE}='{value}' is invalid: expected {accepted}") from None
    return backend, pin, with_torch


def enforce(backend: str | None, pin: str = CURRENT_PIN, with_torch: bool = False) -> None:
    """Make the host runtime refuse (or, with the CPU fallback on, run
    through the fallback) every call `backend` would not serve natively at
    InfiniOps `pin` (ATen-backed ones too, with `with_torch`). ``None``
    turns enforcement off."""
    from . import _C

    if backend is None:
        _C._backend_policy_clear()
        return
    if backend not in BACKENDS:
        raise ValueError(f"unknown InfiniOps backend '{backend}': expected one of {', '.join(BACKENDS)}")
    short = load_matrix(pin)["infiniops"]["short"]
    setting = ",".join([backend, short] + (["torch"] if with_torch else []))
    _C._backend_policy_enforce(backend, short, setting, served_overloads(backend, short, with_torch))


def enforcement() -> tuple[str, str] | None:
    """(backend, pin) while enforcement is on, else ``None``."""
    from . import _C

    backend, pin = _C._backend_policy_target()
    return (backend, pin) if backend else None


def _setup_from_environment() -> None:
    """At import: TORCH_INFINI_ENFORCE_BACKEND, where set."""
    value = os.environ.get(ENFORCE_VARIABLE, "")
    if value:
        enforce(*parse_enforcement(value))
