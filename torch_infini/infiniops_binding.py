"""The rules binding InfiniOps operators to ATen overloads, in one place.

InfiniOps shapes its public operator API after PyTorch's on purpose (its
``docs/operator-api-alignment.md``): most operators are generated from ATen
``.out`` schemas. An operator's public signature is its ``.out`` schema
with these changes:

- ``self`` becomes ``input``;
- the outputs (keyword-only written tensors) come last, as in the schema;
- ``Scalar``/``float`` become ``double``, ``int``/``SymInt`` ``int64_t``,
  ``int[]`` ``std::vector<int64_t>``, ``ScalarType`` ``DataType``, ``str``
  ``std::string``, ``Tensor[]`` ``std::vector<Tensor>``;
- an optional ``T?`` becomes ``std::optional<T'>`` (``Tensor?[]``:
  ``std::vector<std::optional<Tensor>>``);
- ``Generator?``, ``Layout?``, ``Device?`` and ``MemoryFormat?`` are not in
  the API: the ATen-backed implementation passes ``None``.

This module is pure (no import of torch_infini, torch only to list ATen's
schemas): it reads what an installed InfiniOps offers
(``operator_call_instantiations.h``, the library's symbols) and ATen schema
strings, and says which overload binds to which operator and how each
argument converts. It is the one copy of these rules: the build
(``setup.py``, which loads this file by path before the package exists)
generates the provider's binding table from it (``render_cpp``), and the
package uses it at run time to say what each InfiniOps backend serves
(``torch_infini.backend_support``: the support matrix's generated operators
bound by :func:`bind`, as the build binds an install). No InfiniOps source
tree is read. ``python tools/infiniops_binding.py`` is its command line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

#: InfiniRT ``Device::Type`` values (``include/infini/rt/detail/device.h``).
DEVICE_TYPES = ("cpu", "nvidia", "cambricon", "ascend", "metax", "moore", "iluvatar", "hygon")
#: ``Device::Type::kCount``: the generic (dispatching) operator, not an implementation.
DEVICE_TYPE_COUNT = len(DEVICE_TYPES)
#: The implementation index of InfiniOps' ATen-backed implementations (WITH_TORCH=ON).
ATEN_BACKED_INDEX = 8

#: ATen types the API leaves out; a call binds only when they are None.
HIDDEN_TYPES = frozenset({"Layout?", "Device?", "MemoryFormat?"})

#: How one InfiniOps argument is made from the boxed ATen value: the
#: ``ArgKind`` names of ``csrc/runtime/infini/infini_binding.h``.
_KIND_BY_CPP = {
    "Tensor": "kTensor",
    "std::optional<Tensor>": "kOptionalTensor",
    "std::vector<Tensor>": "kTensorList",
    "std::vector<std::optional<Tensor>>": "kOptionalTensorList",
    "double": "kDouble",
    "std::optional<double>": "kOptionalDouble",
    "int64_t": "kInt",
    "std::optional<int64_t>": "kOptionalInt",
    "bool": "kBool",
    "std::optional<bool>": "kOptionalBool",
    "std::vector<int64_t>": "kIntList",
    "std::optional<std::vector<int64_t>>": "kOptionalIntList",
    "std::optional<std::vector<double>>": "kOptionalDoubleList",
    "DataType": "kDataType",
    "std::optional<DataType>": "kOptionalDataType",
    "std::string": "kString",
    "std::optional<std::string>": "kOptionalString",
}


def _base_cpp_type(aten_type: str) -> str | None:
    """The C++ type of a required ATen type, or None where the API has none."""
    t = aten_type
    if re.fullmatch(r"Tensor(\([a-z]!?\))?", t):
        return "Tensor"
    if t == "Tensor[]":
        return "std::vector<Tensor>"
    if t in ("Scalar", "float"):
        return "double"
    if t in ("int", "SymInt"):
        return "int64_t"
    if t == "bool":
        return "bool"
    if re.fullmatch(r"(int|SymInt)\[\d*\]", t):
        return "std::vector<int64_t>"
    if re.fullmatch(r"float\[\d*\]", t):
        return "std::vector<double>"
    if t == "ScalarType":
        return "DataType"
    if t == "str":
        return "std::string"
    return None


def cpp_type_of(aten_type: str) -> str | None:
    """The InfiniOps C++ type of an ATen schema type (``int[1]?`` ->
    ``std::optional<std::vector<int64_t>>``), or None where it has none."""
    if aten_type == "Tensor?[]":
        return "std::vector<std::optional<Tensor>>"
    if aten_type.endswith("?"):
        inner = _base_cpp_type(aten_type[:-1])
        return f"std::optional<{inner}>" if inner else None
    return _base_cpp_type(aten_type)


@dataclass(frozen=True)
class AtenArg:
    """One argument of an ATen schema."""

    name: str
    type: str          # as the schema writes it, alias annotation removed: "Tensor", "int[1]?"
    kwarg_only: bool
    written: bool      # Tensor(a!)


@dataclass(frozen=True)
class AtenSchema:
    name: str          # "aten::sum"
    overload: str      # "IntList_out"
    arguments: tuple[AtenArg, ...]

    @property
    def qualified(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def outputs(self) -> list[int]:
        """Indexes of the keyword-only written tensors (an ``.out`` overload's outputs)."""
        return [i for i, a in enumerate(self.arguments) if a.written and a.kwarg_only]


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def parse_schema(text: str) -> AtenSchema:
    """``aten::sum.IntList_out(Tensor self, int[1]? dim, ..., *, Tensor(a!) out) -> Tensor(a!)``."""
    head, _, rest = text.partition("(")
    depth, end = 1, 0
    for end, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            break
    name, _, overload = head.strip().partition(".")
    args, kwarg_only = [], False
    for part in _split_top(rest[:end]):
        if part == "*":
            kwarg_only = True
            continue
        decl = part.split("=", 1)[0].strip()
        type_text, _, arg_name = decl.rpartition(" ")
        written = "!" in type_text
        clean = re.sub(r"\([a-z]+!?\)", "", type_text)
        args.append(AtenArg(arg_name, clean, kwarg_only, written))
    return AtenSchema(name, overload, tuple(args))


def public_name(aten_name: str) -> str:
    """InfiniOps' snake-case name of an ATen operator (``_softmax`` ->
    ``internal_softmax``, ``add_`` -> ``add``)."""
    base = aten_name.split("::")[-1]
    prefix = ""
    if base.startswith("_"):
        prefix, base = "internal_", base.lstrip("_")
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    return prefix + base


def pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def operator_snake(cls: str) -> str:
    """InfiniOps' snake-case name of an operator class, the name of its
    ``base/<name>.h`` header: ``Gemm`` -> ``gemm``, ``internal::Softmax`` ->
    ``internal_softmax``, ``linalg::Cholesky`` -> ``linalg_cholesky``
    (generated operators of ATen's ``_``, ``linalg_``, ``special_`` and
    ``fft_`` families live in namespaces)."""
    *namespaces, name = cls.split("::")
    return "_".join([*namespaces, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()])


@dataclass(frozen=True)
class Param:
    """One parameter of an InfiniOps public signature."""

    cpp_type: str
    name: str


@dataclass(frozen=True)
class Conversion:
    """How InfiniOps parameter ``name`` is made: from ATen argument ``aten_index``."""

    name: str
    cpp_type: str
    kind: str          # an ArgKind name
    aten_index: int
    output: bool       # an output tensor


@dataclass(frozen=True)
class Binding:
    """An ATen overload bound to an InfiniOps operator's public signature."""

    aten: str                        # "aten::sum.IntList_out"
    operator: str                    # "Sum"
    params: tuple[Conversion, ...]   # in InfiniOps' order
    must_be_none: tuple[int, ...]    # ATen arguments the API leaves out

    @property
    def cpp_types(self) -> tuple[str, ...]:
        return tuple(p.cpp_type for p in self.params)


def expected_signature(schema: AtenSchema) -> tuple[tuple[Conversion, ...], tuple[int, ...]] | str:
    """The InfiniOps signature an ``.out`` overload corresponds to, with the
    arguments that must be None; or why it has none (a string)."""
    if not schema.outputs:
        return "not an .out overload (no keyword-only output)"
    params, hidden = [], []
    for i, arg in enumerate(schema.arguments):
        if arg.type == "Generator?":
            return "draws random numbers (the host draws them, as on the CPU)"
        if arg.type in HIDDEN_TYPES:
            hidden.append(i)
            continue
        cpp = cpp_type_of(arg.type)
        if cpp is None or cpp not in _KIND_BY_CPP:
            return f"argument {arg.name}: ATen type {arg.type} has no InfiniOps counterpart"
        if arg.written and not arg.kwarg_only:
            return "writes an argument that is not an output"
        kind = _KIND_BY_CPP[cpp]
        if arg.type in ("Scalar", "Scalar?"):
            kind = kind.replace("Double", "Scalar")  # a Scalar read as a double: checked per call
        name = "input" if arg.name == "self" else arg.name
        params.append(Conversion(name, cpp, kind, i, arg.written and arg.kwarg_only))
    if not params or params[0].cpp_type not in ("Tensor", "std::vector<Tensor>"):
        return "its first argument is not a tensor (InfiniOps picks the device from it)"
    return tuple(params), tuple(hidden)


def generated_signature(schema: AtenSchema) -> tuple[tuple[Conversion, ...], tuple[int, ...]] | str:
    """The public signature InfiniOps generates from an ATen schema: an
    ``.out`` overload's is :func:`expected_signature`; an in-place one
    (``masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value)``)
    becomes an out= form, ``MaskedFill(input, mask, value, out)``: its
    ``out`` is argument ``len(arguments)``, which the binding of the
    in-place overload itself passes as ``self``."""
    args = schema.arguments
    if not schema.outputs and args and args[0].written and not args[0].kwarg_only:
        schema = AtenSchema(schema.name, schema.overload, (
            AtenArg(args[0].name, args[0].type, False, False), *args[1:], AtenArg("out", "Tensor", True, True)))
    return expected_signature(schema)


_MAKE = re.compile(
    r"Operator<::infini::ops::((?:\w+::)*\w+)>::Make<[^;]*?>\(const Config& config, (.*?)\);", re.S)


def _normalize(cpp: str) -> str:
    cpp = re.sub(r"\bconst\b", "", cpp).replace("&", "")
    cpp = re.sub(r"\s+", " ", cpp).strip()
    cpp = re.sub(r"\s*([<>,])\s*", r"\1", cpp).replace(",", ", ")
    cpp = re.sub(r"^(::)?(infini::ops::)", "", cpp)
    return cpp.replace("std::int64_t", "int64_t")


def parse_signatures(instantiations: str) -> dict[str, list[tuple[Param, ...]]]:
    """Every public signature per operator, from the ``Make`` instantiations
    of InfiniOps' ``operator_call_instantiations.h``."""
    found: dict[str, list[tuple[Param, ...]]] = {}
    for match in _MAKE.finditer(instantiations):
        op, params_text = match.group(1), match.group(2)
        params = []
        for part in _split_top(params_text):
            type_text, _, name = part.rpartition(" ")
            params.append(Param(_normalize(type_text), name))
        signatures = found.setdefault(op, [])
        if tuple(params) not in signatures:
            signatures.append(tuple(params))
    return found


#: Where a mangled ``infini::ops::Operator<Op, Device::Type, index>`` begins:
#: ``Op``'s nested name follows (``3Abs``, ``8internal7Softmax``), then ``E``.
_OPERATOR = re.compile(rb"(_ZNK6infini3ops)?8OperatorINS0_")
#: What follows the nested name: the device type and index, then ``cl``
#: where the symbol is an ``operator()``.
_OPERATOR_ARGS = re.compile(rb"LNS_2rt6Device4TypeE(\d+)ELm(\d+)EE(cl[A-Za-z0-9_]*)?")
_SOURCE_NAME = re.compile(rb"(\d{1,3})")


def _operator_symbols(data: bytes):
    """(class, device type, index, whole symbol if an ``operator()``) for each
    mangled ``Operator<Op, device, index>`` in ``data``; the class's source
    names are length-prefixed (``8internal7Softmax`` -> ``internal::Softmax``)."""
    for match in _OPERATOR.finditer(data):
        parts, i = [], match.end()
        while (length := _SOURCE_NAME.match(data, i)) is not None:
            n = int(length.group(1))
            name = data[length.end():length.end() + n]
            if len(name) != n or not re.fullmatch(rb"[A-Za-z_][A-Za-z0-9_]*", name):
                break
            parts.append(name.decode())
            i = length.end() + n
        if not parts or data[i:i + 1] != b"E":
            continue
        args = _OPERATOR_ARGS.match(data, i + 1)
        if args is None:
            continue
        call = args.group(3) if match.group(1) else None
        yield "::".join(parts), int(args.group(1)), int(args.group(2)), (
            data[match.start():args.end()] if call else None)


def implementations_from_symbols(data: bytes) -> dict[str, dict[int, list[int]]]:
    """Which implementation indices ``Operator<Op, device type, index>`` has
    per InfiniRT device type, from the mangled names in libinfiniops (its
    dynamic symbol table or the whole file): what was compiled, not guessed."""
    found: dict[str, dict[int, set[int]]] = {}
    for name, device, index, _ in _operator_symbols(data):
        if device < DEVICE_TYPE_COUNT:
            found.setdefault(name, {}).setdefault(device, set()).add(index)
    return {op: {d: sorted(ix) for d, ix in sorted(devs.items())} for op, devs in sorted(found.items())}


@functools.lru_cache(maxsize=None)
def _cxa_demangle():
    """libstdc++'s ``__cxa_demangle`` and libc's ``free``, or None."""
    import ctypes
    import ctypes.util

    try:
        fn = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6").__cxa_demangle
        free = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]
    return fn, free


def demangle(symbol: bytes) -> str | None:
    """The C++ name of a mangled symbol, by libstdc++'s ``__cxa_demangle``
    (loaded already wherever PyTorch is); None where it cannot be read."""
    import ctypes

    found = _cxa_demangle()
    if found is None:
        return None
    fn, free = found
    status = ctypes.c_int(-1)
    raw = fn(symbol, None, None, ctypes.byref(status))
    if status.value != 0 or not raw:
        return None
    try:
        return ctypes.string_at(raw).decode()
    finally:
        free(raw)


def _drop_template_argument(text: str, opening: str) -> str:
    """``text`` less each ``, opening...>`` (balanced): the allocator and
    traits arguments a demangled ``std::vector``/``std::basic_string`` spells."""
    while (i := text.find(opening)) >= 0:
        depth, j = 0, i + len(opening) - 1
        while j < len(text):
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        text = text[:i] + text[j + 1:]
    return text


def canonical_type(cpp: str) -> str:
    """One spelling of a parameter type, whether it comes from InfiniOps'
    instantiation list (``std::optional<std::vector<int64_t>>``) or from a
    demangled symbol (``std::optional<std::vector<long, std::allocator<long> > >``)."""
    cpp = re.sub(r"\bconst\b|&", "", cpp)
    cpp = re.sub(r"\s+", " ", cpp).strip()
    cpp = re.sub(r"\s*([<>,])\s*", r"\1", cpp)
    cpp = cpp.replace("std::__cxx11::", "std::")
    cpp = re.sub(r"(?<![\w:])::", "", cpp)
    cpp = re.sub(r"\binfini::(ops::|rt::)?", "", cpp)
    cpp = _drop_template_argument(cpp, ",std::allocator<")
    cpp = _drop_template_argument(cpp, ",std::char_traits<")
    cpp = cpp.replace("std::basic_string<char>", "std::string")
    # InfiniOps' Tensor is InfiniRT's TensorView (an alias since InfiniRT a38977e).
    cpp = re.sub(r"\bTensorView\b", "Tensor", cpp)
    return re.sub(r"\b(std::)?int64_t\b", "long", cpp)


def _call_parameters(demangled: str) -> tuple[str, ...] | None:
    """The canonical parameter types of a demangled ``...::operator()(...) const``."""
    head, sep, rest = demangled.partition("::operator()(")
    if not sep or not rest.endswith(") const"):
        return None
    return tuple(canonical_type(p) for p in _split_top(rest[:-len(") const")]) if p.strip())


@dataclass(frozen=True)
class Completion:
    """An ATen-backed class InfiniOps' generator left abstract, as the build
    completes it: the overloads libinfiniops defines are declared as in
    InfiniOps' own class (``Operator<Op, kDev, 8> : Op``, ``using Op::Op``);
    a class of ours derived from it overrides the skipped ones with a
    refusal (no binding calls them), so it can be made, and a call of a
    defined overload runs the library's code."""

    operator: str
    devices: tuple[int, ...]
    defined: tuple[tuple[Param, ...], ...]
    skipped: tuple[tuple[Param, ...], ...]  # public signatures it does not define

    def skips(self, cpp_types: Iterable[str]) -> bool:
        """Whether the overload of these parameter types is one InfiniOps skipped."""
        wanted = tuple(canonical_type(t) for t in cpp_types)
        return any(tuple(canonical_type(p.cpp_type) for p in sig) == wanted for sig in self.skipped)


def complete_abstract_aten_backed(data: bytes, implementations: dict[str, dict[int, list[int]]],
                                  signatures: Mapping[str, list[tuple[Param, ...]]]
                                  ) -> tuple[list[Completion], list[str]]:
    """The ATen-backed classes (index 8) that are abstract, completed where
    the library's symbols say which overloads it defines; the rest dropped.

    InfiniOps' generated ATen-backed class overrides each public overload it
    could map to an ATen schema; where it skipped one (at 1f6f9c2: the
    deprecated in-place overloads of ``Sub`` and ``Div``, 49 classes in all)
    the class stays abstract, and ``Make`` for it dereferences a null
    operator (a crash, not an error). Such a class has fewer ``operator()``
    symbols than the operator has public signatures. Each symbol is
    demangled and matched to a public signature; a class whose defined
    overloads all match, the same on every device, is completed
    (:class:`Completion`). Any other (no symbol to call, a symbol that
    cannot be read) loses index 8. Returns the completions and the
    operators whose index 8 was dropped."""
    calls: dict[tuple[str, int], set[bytes]] = {}
    for name, device, index, call in _operator_symbols(data):
        if call is not None and index == ATEN_BACKED_INDEX:
            calls.setdefault((name, device), set()).add(call)
    completions, dropped = [], []
    for op, devices in sorted(implementations.items()):
        wanted = signatures.get(op, [])
        abstract = [d for d, ix in devices.items()
                    if ATEN_BACKED_INDEX in ix and len(calls.get((op, d), ())) < len(wanted)]
        if not abstract:
            continue
        by_types = {tuple(canonical_type(p.cpp_type) for p in sig): sig for sig in wanted}
        defined_per_device = set()
        for d in abstract:
            params = [_call_parameters(demangle(c) or "") for c in sorted(calls.get((op, d), ()))]
            defined_per_device.add(frozenset(params) if all(p in by_types for p in params) else None)
        defined = defined_per_device.pop() if len(defined_per_device) == 1 else None
        if defined:
            completions.append(Completion(
                op, tuple(sorted(abstract)),
                tuple(sig for types, sig in by_types.items() if types in defined),
                tuple(sig for types, sig in by_types.items() if types not in defined)))
            continue
        for d in abstract:
            devices[d].remove(ATEN_BACKED_INDEX)
        dropped.append(op)
    return completions, dropped


@dataclass
class BindingReport:
    """What binding found: the bindings, and why the rest of the operators have none."""

    bindings: list[Binding] = field(default_factory=list)
    unbound_operators: dict[str, str] = field(default_factory=dict)


def bind(signatures: Mapping[str, list[tuple[Param, ...]]],
         schemas: Iterable[AtenSchema]) -> BindingReport:
    """Binds every ATen ``.out`` overload whose expected InfiniOps signature
    (``expected_signature``) an installed operator has, names and types."""
    classes = {operator_snake(op): op for op in signatures}
    by_public: dict[str, list[AtenSchema]] = {}
    for schema in schemas:
        if schema.name.startswith("aten::"):
            public = public_name(schema.name)
            by_public.setdefault(classes.get(public, pascal(public)), []).append(schema)
    report = BindingReport()
    for op in sorted(signatures):
        # Arguments are matched by name and type: a few operators order them
        # otherwise than ATen (IndexSelect(input, index, dim, out)).
        offered = {tuple(sorted((p.cpp_type, p.name) for p in sig)): sig for sig in signatures[op]}
        bound = False
        for schema in sorted(by_public.get(op, []), key=lambda s: s.qualified):
            expected = generated_signature(schema)
            if isinstance(expected, str):
                continue
            params, hidden = expected
            signature = offered.get(tuple(sorted((p.cpp_type, p.name) for p in params)))
            if signature is not None:
                by_name = {p.name: p for p in params}
                ordered = tuple(by_name[p.name] for p in signature)
                if not schema.outputs:  # an in-place schema: InfiniOps' out is self
                    ordered = tuple(Conversion(p.name, p.cpp_type, p.kind, 0 if p.output else p.aten_index,
                                               p.output) for p in ordered)
                report.bindings.append(Binding(schema.qualified, op, ordered, hidden))
                bound = True
        if not bound:
            report.unbound_operators[op] = (
                "no ATen .out overload of that name" if op not in by_public
                else "no ATen .out overload with its signature")
    report.bindings.extend(_inplace_bindings(report.bindings, by_public))
    report.bindings.extend(_functional_bindings(report.bindings, by_public))
    # An in-place overload InfiniOps generated itself and that its .out form
    # also serves: the first binding stands.
    unique = {}
    for b in report.bindings:
        unique.setdefault(b.aten, b)
    report.bindings = sorted(unique.values(), key=lambda b: b.aten)
    return report


def _functional_bindings(bindings: list[Binding], by_public: Mapping[str, list[AtenSchema]]) -> list[Binding]:
    """Functional overloads (``relu``) served by a bound ``.out`` overload
    whose inputs are its arguments, writing the results the ops layer
    allocated: output ``k`` is ATen argument ``len(arguments) + k`` (the
    ops layer reaches most functional overloads through their ``.out`` twin
    already; these are the ones whose twin has no CPU kernel of its own)."""
    schemas = {s.qualified: s for group in by_public.values() for s in group}
    found = []
    for binding in bindings:
        out = schemas.get(binding.aten)
        if out is None:
            continue
        # An .out overload's inputs; an in-place one's arguments (one output).
        inputs = [(a.name, a.type) for a in out.arguments if not (a.written and a.kwarg_only)]
        count = len(out.outputs) or 1
        for schema in by_public.get(binding.operator, []):
            if (schema.name.endswith("_") or schema.outputs or any(a.written for a in schema.arguments)
                    or [(a.name, a.type) for a in schema.arguments] != inputs):
                continue
            base = len(schema.arguments)
            outputs = iter(range(base, base + count))
            params = tuple(
                Conversion(p.name, p.cpp_type, p.kind, next(outputs) if p.output else p.aten_index, p.output)
                for p in binding.params)
            found.append(Binding(schema.qualified, binding.operator, params, binding.must_be_none))
    return found


def _inplace_bindings(bindings: list[Binding], by_public: Mapping[str, list[AtenSchema]]) -> list[Binding]:
    """In-place overloads (``abs_``, ``mul_.Tensor``) served by a bound
    ``.out`` overload with ``out=self``: where the in-place arguments are the
    ``.out`` overload's inputs (names and types) and it has one output."""
    schemas = {s.qualified: s for group in by_public.values() for s in group}
    found = []
    for binding in bindings:
        out = schemas[binding.aten]
        if len(out.outputs) != 1:
            continue
        inputs = [(a.name, a.type) for a in out.arguments if not (a.written and a.kwarg_only)]
        for schema in by_public.get(binding.operator, []):
            args = schema.arguments
            if (not schema.name.endswith("_") or not args or not args[0].written
                    or args[0].kwarg_only or any(a.written for a in args[1:])):
                continue
            if [(a.name, a.type) for a in args] != inputs:
                continue
            params = tuple(
                Conversion(p.name, p.cpp_type, p.kind, 0 if p.output else p.aten_index, p.output)
                for p in binding.params)
            found.append(Binding(schema.qualified, binding.operator, params, binding.must_be_none))
    return found


def torch_allowlist(report: BindingReport) -> list[str]:
    """The ATen operator names for InfiniOps' ``WITH_TORCH=ON`` allowlist
    (``-DINFINI_OPS_TORCH_OPS=...``) that the bound operators come from."""
    return sorted({b.aten.split("::")[1].split(".")[0] for b in report.bindings})


def aten_schemas_from_torch() -> list[AtenSchema]:
    """The running PyTorch's ATen schemas (the only impure function here)."""
    import torch

    return [parse_schema(str(s)) for s in torch._C._jit_get_all_schemas()
            if s.name.startswith("aten::")]


def _cpp_name(op: str) -> str:
    """A C++ identifier for operator ``op`` (``internal::Softmax`` -> ``internal_Softmax``)."""
    return op.replace("::", "_")


def render_completions(completions: Iterable[Completion]) -> str:
    """C++ header completing the abstract ATen-backed classes
    (:class:`Completion`), included by every part of the binding table."""
    lines = [
        "// Generated at build time by torch_infini/infiniops_binding.py from the installed",
        "// InfiniOps' symbols. Not committed. See complete_abstract_aten_backed there.",
        "#pragma once",
        "#include <infini/ops.h>",
        "",
        '#include "runtime/infini/aten_backed_completion.h"',
        "",
    ]
    for c in completions:
        name, op = _cpp_name(c.operator), f"::infini::ops::{c.operator}"
        guard = f"INFINI_OPS_TORCH_{operator_snake(c.operator).upper()}_H_"
        defined = "\n".join(
            f"  void operator()({', '.join(f'{p.cpp_type} {p.name}' for p in sig)}) const override;"
            for sig in c.defined)
        # Not `override`: a public signature may be a constructor's or a
        # non-virtual convenience overload's (Add(input, other, out)) rather
        # than a pure virtual one; where it is one, this overrides it.
        skipped = "\n".join(
            f"  void operator()({', '.join(p.cpp_type for p in sig)}) const {{\n"
            f'    refuse_skipped_overload("{c.operator}");\n  }}'
            for sig in c.skipped)
        cases = "\n".join(
            f"      case {d}: return make_completed<::infini::ops::Operator<{op}>, "
            f"{name}Made<static_cast<::infini::ops::Device::Type>({d})>>(args...);"
            for d in c.devices)
        lines += [
            f"// {c.operator}: InfiniOps' ATen-backed class, as libinfiniops defines it",
            f"// (InfiniOps does not install it; {guard} is its guard).",
            f"#ifndef {guard}",
            "namespace infini::ops {",
            "template <Device::Type kDev>",
            f"class Operator<{c.operator}, kDev, {ATEN_BACKED_INDEX}> : public {c.operator} {{",
            " public:",
            f"  using {c.operator}::{c.operator.rpartition('::')[2]};",
            defined,
            "};",
            "}  // namespace infini::ops",
            "#endif",
            "namespace torch_infini::runtime::infini::completed {",
            "using namespace ::infini::ops;  // Tensor, DataType",
            "template <::infini::ops::Device::Type kDev>",
            f"struct {name}Made final : ::infini::ops::Operator<{op}, kDev, {ATEN_BACKED_INDEX}> {{",
            f"  using Base = ::infini::ops::Operator<{op}, kDev, {ATEN_BACKED_INDEX}>;",
            "  using Base::Base;",
            skipped,
            "};",
            f"struct {name} {{",
            "  static constexpr bool kCompleted = true;",
            "  template <typename... Args>",
            f"  static std::unique_ptr<::infini::ops::Operator<{op}>> make(int device_type, const Args&... args) {{",
            "    switch (device_type) {",
            cases,
            "    }",
            "    return nullptr;",
            "  }",
            "};",
            "}  // namespace torch_infini::runtime::infini::completed",
            "",
        ]
    return "\n".join(lines)


def render_cpp(report: BindingReport, implementations: Mapping[str, Mapping[int, list[int]]],
               chunk: int, chunks: int, completions: Iterable[Completion] = ()) -> str:
    """C++ source of part ``chunk`` (of ``chunks``) of the binding table,
    for ``csrc/runtime/infini/infini_binding.h``; an operator with a
    :class:`Completion` is made through it where it runs ATen-backed (its
    skipped overloads have no index 8)."""
    completed = {c.operator: c for c in completions}
    mine = [b for i, b in enumerate(report.bindings) if i % chunks == chunk]
    lines = [
        "// Generated at build time by torch_infini/infiniops_binding.py from the installed",
        "// InfiniOps (operator_call_instantiations.h and libinfiniops' symbols). Not committed.",
        '#include "runtime/infini/infini_binding.h"',
        '#include "infini_completions.h"',
        "",
        "namespace torch_infini::runtime::infini {",
        "namespace {",
        "using namespace ::infini::ops;  // Tensor, DataType and the operators",
        "}  // namespace",
        "",
        f"void add_generated_bindings_{chunk}(std::vector<Binding>& table) {{",
    ]
    for b in mine:
        types = ", ".join(b.cpp_types)
        conversions = ", ".join(
            f"{{ArgKind::{p.kind}, {p.aten_index}, {'true' if p.output else 'false'}}}" for p in b.params)
        none = ", ".join(str(i) for i in b.must_be_none)
        completion = completed.get(b.operator)
        skipped = completion is not None and completion.skips(b.cpp_types)
        impls = ", ".join(
            f"{{{device}, {index}}}"
            for device, indices in sorted(implementations.get(b.operator, {}).items())
            for index in indices if not (skipped and index == ATEN_BACKED_INDEX))
        maker = f"completed::{_cpp_name(b.operator)}" if completion is not None else "NotCompleted"
        lines.append(
            f'  table.push_back(make_binding<::infini::ops::{b.operator}, {maker}, {types}>(\n'
            f'      "{b.aten}", "{b.operator}", {{{conversions}}}, {{{none}}}, {{{impls}}}));')
    lines += ["}", "", "}  // namespace torch_infini::runtime::infini", ""]
    return "\n".join(lines)


def render_index(chunks: int, implementations: Mapping[str, Mapping[int, list[int]]] | None = None,
                 completions: Iterable[Completion] = ()) -> str:
    """C++ source gathering the ``chunks`` parts of the table, and every
    operator's implementations (hand-written entries choose among them and
    make them by InfiniOps' ``Make``, so a completed class's index 8, which
    only the table can make, is left out)."""
    completed = {c.operator for c in completions}
    implementations = {op: {d: [i for i in ix if not (op in completed and i == ATEN_BACKED_INDEX)]
                            for d, ix in devs.items()}
                       for op, devs in (implementations or {}).items()}
    decls = "\n".join(f"void add_generated_bindings_{i}(std::vector<Binding>& table);" for i in range(chunks))
    calls = "\n".join(f"    add_generated_bindings_{i}(table);" for i in range(chunks))
    impls = "\n".join(
        f'      {{"{op}", {{{", ".join(f"{{{d}, {i}}}" for d, ix in sorted(devs.items()) for i in ix)}}}}},'
        for op, devs in sorted(implementations.items()))
    return (
        "// Generated at build time by torch_infini/infiniops_binding.py. Not committed.\n"
        '#include "runtime/infini/infini_binding.h"\n\n'
        "namespace torch_infini::runtime::infini {\n\n"
        f"{decls}\n\n"
        "const std::vector<Binding>& generated_bindings() {\n"
        "  static const std::vector<Binding> table = [] {\n"
        "    std::vector<Binding> table;\n"
        f"{calls}\n"
        "    return table;\n"
        "  }();\n"
        "  return table;\n"
        "}\n\n"
        "const std::vector<Implementation>& operator_implementations(const std::string& op) {\n"
        "  static const std::unordered_map<std::string, std::vector<Implementation>> table = {\n"
        f"{impls}\n"
        "  };\n"
        "  static const std::vector<Implementation> none;\n"
        "  const auto it = table.find(op);\n"
        "  return it == table.end() ? none : it->second;\n"
        "}\n\n"
        "}  // namespace torch_infini::runtime::infini\n")


def keeps_tensor_metadata(header_text: str) -> bool:
    """Whether an InfiniOps base class keeps each tensor's metadata as the
    classes generated from ATen schemas do (``input_shape_``, ...), which
    the generated ATen-backed implementation reads. A hand-written base that
    keeps other metadata (``Convolution`` at 1f6f9c2: ``conv_detail::Metadata``)
    cannot take one: InfiniOps' ``WITH_TORCH=ON`` build fails to compile it."""
    return "_shape_" in header_text


def bindable_aten_names(schemas: Iterable[AtenSchema], operator_headers: Iterable[str]) -> list[str]:
    """ATen operator names with an ``.out`` overload the rules can bind and an
    InfiniOps operator header (``include/base/<name>.h``, any build installs
    all of them; pass only those that keeps_tensor_metadata): the allowlist of
    an InfiniOps ``WITH_TORCH=ON`` build that gives torch-infini every
    operator it can bind."""
    headers = set(operator_headers)
    return sorted({s.name.split("::")[1] for s in schemas
                   if s.name.startswith("aten::") and public_name(s.name) in headers
                   and not isinstance(expected_signature(s), str)})


def main(argv: list[str] | None = None) -> int:
    """``python tools/infiniops_binding.py --torch-allowlist PREFIX``: the
    comma-separated allowlist for InfiniOps' ``-DINFINI_OPS_TORCH_OPS``, from
    an installed InfiniOps (any build: its operator headers) or its source
    tree's ``src/base``; ``--report PREFIX``: what binds in that install, and
    why the rest does not."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--torch-allowlist", action="store_true")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("prefix", help="an InfiniOps install prefix (or source tree)")
    args = parser.parse_args(argv)
    from pathlib import Path

    schemas = aten_schemas_from_torch()
    prefix = Path(args.prefix)
    base = next((d for d in (prefix / "include" / "base", prefix / "src" / "base") if d.is_dir()), None)
    if args.torch_allowlist:
        if base is None:
            parser.error(f"{prefix}: no include/base (or src/base) operator headers")
        headers = (h.stem for h in base.glob("*.h") if keeps_tensor_metadata(h.read_text(errors="replace")))
        print(",".join(bindable_aten_names(schemas, headers)))
    header = prefix / "include" / "infini" / "operator_call_instantiations.h"
    if args.report:
        if not header.is_file():
            parser.error(f"{header} does not exist")
        report = bind(parse_signatures(header.read_text(errors="replace")), schemas)
        for b in report.bindings:
            print(f"{b.aten} -> infini::ops::{b.operator}")
        for op, why in sorted(report.unbound_operators.items()):
            print(f"infini::ops::{op}: not bound ({why})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
