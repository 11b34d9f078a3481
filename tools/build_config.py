"""How torch_infini is built: Infini stack discovery and build metadata.

Pure functions of an environment mapping, so the build's checks can be tested
without building anything. ``setup.py`` is their only production caller.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

#: InfiniRT backends, as they appear in ``include/infini/rt/<backend>/``.
INFINI_RT_BACKENDS = (
    "cpu", "nvidia", "cambricon", "ascend", "metax", "moore", "iluvatar", "hygon",
)


class BuildConfigError(RuntimeError):
    """A set variable points at something that is not a usable install."""


@dataclass
class InfiniStack:
    """Where the Infini stack's headers and libraries are, and what it has."""

    rt_include_dirs: list[str]
    rt_library_dirs: list[str]
    ops_include_dirs: list[str]
    ops_library_dirs: list[str]
    cuda_include_dirs: list[str] = field(default_factory=list)
    rt_backends: list[str] = field(default_factory=list)
    # Operators InfiniOps instantiated, and whether its Add takes alpha.
    ops_operators: list[str] = field(default_factory=list)
    ops_add_has_alpha: bool = False
    # Whether its Gemm takes an optional C input before alpha (y = alpha *
    # a @ b, InfiniOps 1f6f9c2 and newer) instead of accumulating into c with
    # alpha and beta (c = alpha * a @ b + beta * c, older pins).
    ops_gemm_has_optional_c: bool = False
    # Whether its Cat takes one tensor list (InfiniOps 1f6f9c2 and newer)
    # instead of a first tensor and a list of the rest.
    ops_cat_takes_list: bool = False
    # Whether its Linear is F.linear's (input, weight[N, K], bias, out),
    # InfiniOps 1f6f9c2 and newer, rather than (a, b, bias, trans_a, trans_b, out).
    ops_linear_takes_weight: bool = False
    # InfiniRT device types (Device::Type values) with an implementation
    # (index 0) of each operator in libinfiniops, read from its symbols.
    ops_implementations: dict[str, list[int]] = field(default_factory=dict)
    # InfiniRT backends with ATen-backed implementations (index 8, InfiniOps
    # built WITH_TORCH=ON): they run PyTorch's kernels for that device, so
    # the process needs that device's PyTorch (torch_infini/aten_backed.py).
    ops_aten_backed: list[str] = field(default_factory=list)

    @property
    def include_dirs(self) -> list[str]:
        return self.ops_include_dirs + self.rt_include_dirs + self.cuda_include_dirs

    @property
    def library_dirs(self) -> list[str]:
        return self.ops_library_dirs + self.rt_library_dirs

    @property
    def define_macros(self) -> list[tuple[str, str]]:
        macros = [("TORCH_INFINI_WITH_INFINI_STACK", "1")]
        if self.ops_add_has_alpha:
            macros.append(("TORCH_INFINI_OPS_ADD_HAS_ALPHA", "1"))
        if self.ops_gemm_has_optional_c:
            macros.append(("TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C", "1"))
        if self.ops_cat_takes_list:
            macros.append(("TORCH_INFINI_OPS_CAT_TAKES_LIST", "1"))
        if self.ops_linear_takes_weight:
            macros.append(("TORCH_INFINI_OPS_LINEAR_TAKES_WEIGHT", "1"))
        for backend in self.rt_backends:
            macros.append((f"TORCH_INFINI_RT_HAS_{backend.upper()}", "1"))
        for op, device_types in sorted(self.ops_implementations.items()):
            mask = sum(1 << t for t in device_types)
            macros.append((f"TORCH_INFINI_OPS_{op.upper()}_DEVICE_MASK", str(mask)))
        return macros


def _split(value: str) -> list[str]:
    return [p for p in value.split(os.pathsep) if p]


def _dirs(env: Mapping[str, str], override: str, prefix_var: str, prefix: str,
          sub: tuple[str, ...]) -> tuple[str, list[str]]:
    """The directories named by ``override``, else ``prefix/<first of sub that exists>``."""
    if env.get(override):
        return override, _split(env[override])
    for name in sub:
        candidate = Path(prefix) / name
        if candidate.is_dir():
            return prefix_var, [str(candidate)]
    return prefix_var, [str(Path(prefix) / sub[0])]


def _require_file(var: str, dirs: list[str], relative: str) -> Path:
    for d in dirs:
        candidate = Path(d) / relative
        if candidate.is_file():
            return candidate
    raise BuildConfigError(
        f"{var} is set, but {relative} was not found in {os.pathsep.join(dirs)}; "
        f"point {var} at an installed build (see README, 'Building against the Infini stack')"
    )


def rt_backends_from_header(header: Path) -> list[str]:
    """The backends an installed InfiniRT was built with, from its generated header."""
    text = header.read_text(errors="replace")
    found = re.findall(r"#include <infini/rt/(\w+)/device_\.h>", text)
    return [b for b in INFINI_RT_BACKENDS if b in found]


def ops_api_from_header(header: Path) -> tuple[list[str], bool]:
    """Instantiated operators and whether ``Add`` takes ``alpha``, from InfiniOps' header."""
    text = header.read_text(errors="replace")
    operators = sorted(set(re.findall(r"Operator<::infini::ops::(\w+)>", text)))
    add_alpha = "Operator<::infini::ops::Add>::Call<Tensor, Tensor, double, Tensor>" in text
    return operators, add_alpha


def ops_gemm_has_optional_c(header: Path) -> bool:
    """Whether InfiniOps' ``Gemm`` takes ``(a, b, optional c, alpha, beta, trans_a, trans_b, y)``.

    Older pins take ``(a, b, alpha, beta, trans_a, trans_b, c)`` and
    accumulate into ``c``; the two call conventions differ in meaning, not
    only in order, so the build must know which one the library has.
    """
    text = header.read_text(errors="replace")
    return "Operator<::infini::ops::Gemm>::Call<Tensor, Tensor, std::optional<Tensor>," in text


def ops_cat_takes_list(header: Path) -> bool:
    """Whether InfiniOps' ``Cat`` takes ``(tensors, dim, out)``; older pins take
    ``(first_input, rest_inputs, dim, out)``."""
    text = header.read_text(errors="replace")
    return "Operator<::infini::ops::Cat>::Call<std::vector<Tensor>, int64_t, Tensor>" in text


def ops_linear_takes_weight(header: Path) -> bool:
    """Whether InfiniOps' ``Linear`` takes ``(input, weight, bias, out)`` like
    ``F.linear``; older pins take ``(a, b, bias, trans_a, trans_b, out)``."""
    text = header.read_text(errors="replace")
    return "Operator<::infini::ops::Linear>::Call<Tensor, Tensor, std::optional<Tensor>, Tensor>" in text


_IMPL_SYMBOL = re.compile(rb"8OperatorINS0_(\d+)([A-Za-z_][A-Za-z0-9_]*?)ELNS_2rt6Device4TypeE(\d+)ELm0EE")
#: Device::Type::kCount: the generic (dispatching) operator, not an implementation.
_DEVICE_TYPE_COUNT = 8


def ops_implementations_from_library(library: Path) -> dict[str, list[int]]:
    """Which InfiniRT device types have ``Operator<Op, type, 0>`` in libinfiniops.

    Read from the mangled names in the library: what was compiled, not guessed.
    """
    data = library.read_bytes()
    found: dict[str, set[int]] = {}
    for match in _IMPL_SYMBOL.finditer(data):
        length, name, device_type = int(match.group(1)), match.group(2).decode(), int(match.group(3))
        if len(name) != length or device_type >= _DEVICE_TYPE_COUNT:
            continue
        found.setdefault(name, set()).add(device_type)
    return {name: sorted(types) for name, types in sorted(found.items())}


_ATEN_BACKED_SYMBOL = re.compile(rb"8OperatorINS0_(\d+)([A-Za-z_][A-Za-z0-9_]*?)ELNS_2rt6Device4TypeE(\d+)ELm8EE")
#: InfiniRT's Device::Type values, in order.
_DEVICE_TYPES = ("cpu", "nvidia", "cambricon", "ascend", "metax", "moore", "iluvatar", "hygon")


def ops_aten_backed_from_library(library: Path) -> list[str]:
    """The InfiniRT backends with an ATen-backed implementation
    (``Operator<Op, type, 8>``, InfiniOps built ``WITH_TORCH=ON``) of some
    operator in libinfiniops, read from its mangled names."""
    data = library.read_bytes()
    found: set[int] = set()
    for match in _ATEN_BACKED_SYMBOL.finditer(data):
        length, name, device_type = int(match.group(1)), match.group(2), int(match.group(3))
        if len(name) == length and device_type < len(_DEVICE_TYPES):
            found.add(device_type)
    return [_DEVICE_TYPES[t] for t in sorted(found)]


def resolve_infini_stack(env: Mapping[str, str]) -> InfiniStack | None:
    """The Infini stack to compile against, or None for a host-runtime-only build.

    Raises BuildConfigError when a variable is set but does not lead to the
    headers and library it must: never a silent host-only build.
    """
    rt_prefix = env.get("INFINI_RT_PREFIX", "")
    ops_prefix = env.get("INFINI_OPS_PREFIX", "")
    overrides = ("INFINI_RT_INCLUDE_DIRS", "INFINI_RT_LIBRARY_DIRS",
                 "INFINI_OPS_INCLUDE_DIRS", "INFINI_OPS_LIBRARY_DIRS")
    if not rt_prefix and not ops_prefix and not any(env.get(v) for v in overrides):
        return None
    if not (rt_prefix or (env.get("INFINI_RT_INCLUDE_DIRS") and env.get("INFINI_RT_LIBRARY_DIRS"))):
        raise BuildConfigError(
            "INFINI_OPS_PREFIX is set but INFINI_RT_PREFIX is not: the Infini stack needs both "
            "(or INFINI_RT_INCLUDE_DIRS and INFINI_RT_LIBRARY_DIRS)")
    if not (ops_prefix or (env.get("INFINI_OPS_INCLUDE_DIRS") and env.get("INFINI_OPS_LIBRARY_DIRS"))):
        raise BuildConfigError(
            "INFINI_RT_PREFIX is set but INFINI_OPS_PREFIX is not: the Infini stack needs both "
            "(or INFINI_OPS_INCLUDE_DIRS and INFINI_OPS_LIBRARY_DIRS)")
    for var, value in (("INFINI_RT_PREFIX", rt_prefix), ("INFINI_OPS_PREFIX", ops_prefix)):
        if value and not Path(value).is_dir():
            raise BuildConfigError(f"{var}={value} is not a directory")

    rt_inc_var, rt_inc = _dirs(env, "INFINI_RT_INCLUDE_DIRS", "INFINI_RT_PREFIX", rt_prefix, ("include",))
    rt_lib_var, rt_lib = _dirs(env, "INFINI_RT_LIBRARY_DIRS", "INFINI_RT_PREFIX", rt_prefix, ("lib", "lib64"))
    ops_inc_var, ops_inc = _dirs(env, "INFINI_OPS_INCLUDE_DIRS", "INFINI_OPS_PREFIX", ops_prefix, ("include",))
    ops_lib_var, ops_lib = _dirs(env, "INFINI_OPS_LIBRARY_DIRS", "INFINI_OPS_PREFIX", ops_prefix, ("lib", "lib64"))

    rt_header = _require_file(rt_inc_var, rt_inc, "infini/rt.h")
    generated = rt_header.parent / "rt" / "generated.h"
    _require_file(rt_lib_var, rt_lib, "libinfinirt.so")
    ops_header = _require_file(ops_inc_var, ops_inc, "infini/operator_call_instantiations.h")
    ops_library = _require_file(ops_lib_var, ops_lib, "libinfiniops.so")

    backends = rt_backends_from_header(generated) if generated.is_file() else []
    operators, add_alpha = ops_api_from_header(ops_header)
    gemm_optional_c = ops_gemm_has_optional_c(ops_header)
    cat_list = ops_cat_takes_list(ops_header)
    linear_weight = ops_linear_takes_weight(ops_header)
    return InfiniStack(
        rt_include_dirs=rt_inc, rt_library_dirs=rt_lib,
        ops_include_dirs=ops_inc, ops_library_dirs=ops_lib,
        cuda_include_dirs=_split(env.get("CUDA_INCLUDE_DIRS", "")),
        rt_backends=backends, ops_operators=operators, ops_add_has_alpha=add_alpha,
        ops_gemm_has_optional_c=gemm_optional_c, ops_cat_takes_list=cat_list,
        ops_linear_takes_weight=linear_weight,
        ops_implementations=ops_implementations_from_library(ops_library),
        ops_aten_backed=ops_aten_backed_from_library(ops_library),
    )


@dataclass
class InfiniCCL:
    """Where InfiniCCL's headers (``infiniccl/comm.h``) and ``libinfiniccl.so`` are."""

    include_dirs: list[str]
    library_dirs: list[str]

    @property
    def define_macros(self) -> list[tuple[str, str]]:
        return [("TORCH_INFINI_WITH_INFINI_CCL", "1")]

    libraries = ["infiniccl"]


def resolve_infini_ccl(env: Mapping[str, str]) -> InfiniCCL | None:
    """InfiniCCL to compile the infini c10d backend against (``INFINI_CCL_PREFIX``,
    or ``INFINI_CCL_INCLUDE_DIRS`` and ``INFINI_CCL_LIBRARY_DIRS``), or None.

    Independent of InfiniRT and InfiniOps (InfiniCCL has its own device
    runtime). Raises BuildConfigError when a variable is set but does not
    lead to ``infiniccl/comm.h`` and ``libinfiniccl.so``."""
    prefix = env.get("INFINI_CCL_PREFIX", "")
    if not prefix and not env.get("INFINI_CCL_INCLUDE_DIRS") and not env.get("INFINI_CCL_LIBRARY_DIRS"):
        return None
    if prefix and not Path(prefix).is_dir():
        raise BuildConfigError(f"INFINI_CCL_PREFIX={prefix} is not a directory")
    if not prefix and not (env.get("INFINI_CCL_INCLUDE_DIRS") and env.get("INFINI_CCL_LIBRARY_DIRS")):
        raise BuildConfigError("INFINI_CCL_INCLUDE_DIRS and INFINI_CCL_LIBRARY_DIRS go together "
                               "(or set INFINI_CCL_PREFIX)")
    inc_var, inc = _dirs(env, "INFINI_CCL_INCLUDE_DIRS", "INFINI_CCL_PREFIX", prefix, ("include",))
    lib_var, lib = _dirs(env, "INFINI_CCL_LIBRARY_DIRS", "INFINI_CCL_PREFIX", prefix, ("lib", "lib64"))
    header = _require_file(inc_var, inc, "infiniccl/comm.h")
    if "infinicclCommInitRank" not in header.read_text(errors="replace"):
        raise BuildConfigError(f"{inc_var}: {header} is not InfiniCCL's comm.h (no infinicclCommInitRank)")
    _require_file(lib_var, lib, "libinfiniccl.so")
    return InfiniCCL(include_dirs=inc, library_dirs=lib)


def torch_major_minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``; raises ValueError on anything else."""
    match = re.match(r"^(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"not a PyTorch version: {version!r}")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def build_metadata(torch_version: str, cxx11_abi: bool, stack: InfiniStack | None,
                   ccl: InfiniCCL | None = None) -> dict:
    """What the import guard checks at import time, and the diagnostics show."""
    return {
        "infini_ccl": ccl is not None,
        "schema": 1,
        "torch_version": torch_version,
        "torch_major_minor": torch_major_minor(torch_version),
        "cxx11_abi": bool(cxx11_abi),
        "infini_stack": stack is not None,
        "infini_rt_backends": list(stack.rt_backends) if stack else [],
        "infini_ops_operators": list(stack.ops_operators) if stack else [],
        "infini_ops_add_has_alpha": bool(stack.ops_add_has_alpha) if stack else False,
        "infini_ops_gemm_has_optional_c": bool(stack.ops_gemm_has_optional_c) if stack else False,
        "infini_ops_cat_takes_list": bool(stack.ops_cat_takes_list) if stack else False,
        "infini_ops_linear_takes_weight": bool(stack.ops_linear_takes_weight) if stack else False,
        "infini_ops_implementations": dict(stack.ops_implementations) if stack else {},
        "infini_ops_aten_backed": list(stack.ops_aten_backed) if stack else [],
    }


@dataclass
class CompileFlags:
    """The compiler and linker flags of torch_infini._C."""

    debug: bool
    cxx: list[str]
    link: list[str]


def compile_flags(env: Mapping[str, str]) -> CompileFlags:
    """Release flags (-O2, no debug information) unless TORCH_INFINI_DEBUG=1,
    which builds -O0 with debug information and assertions (NDEBUG undone:
    Python's own flags define it)."""
    value = env.get("TORCH_INFINI_DEBUG", "")
    if value not in ("", "0", "1"):
        raise BuildConfigError(f"TORCH_INFINI_DEBUG='{value}' is invalid: expected 1 (debug build) or 0 (release)")
    warnings = ["-Wall", "-Wno-unused-parameter"]
    if value == "1":
        return CompileFlags(debug=True, cxx=["-O0", "-g", "-UNDEBUG"] + warnings, link=["-g"])
    # -g0 last: Python's CFLAGS, which setuptools puts first, carry -g.
    return CompileFlags(debug=False, cxx=["-O2", "-g0"] + warnings, link=["-g0"])


#: How GNU ld and lld name a symbol that a shared library needs and none
#: provides: "... undefined reference to `infini::rt::X'" (ld) or
#: "undefined reference due to --no-allow-shlib-undefined: X" / "undefined symbol: X" (lld).
_UNDEFINED = re.compile(r"undefined (?:reference to [`']([^'`]+)['`]|reference due to [^:]+: (.+)|symbol: (.+))")

_LINK_TEST_SOURCE = "int main() { return 0; }\n"


@dataclass
class LinkTest:
    """The outcome of linking a program against libinfiniops and libinfinirt."""

    ok: bool
    # Symbols in InfiniRT's namespace that libinfiniops needs and libinfinirt lacks.
    missing_rt_symbols: list[str]
    output: str


def _infini_symbol(name: str) -> bool:
    return name.startswith(("infini::", "_ZN6infini", "_ZNK6infini")) or "infini::rt" in name


def link_ops_against_rt(stack: InfiniStack, compiler: str, workdir: Path,
                        dependency_dirs: tuple[str, ...] = ()) -> LinkTest:
    """Link an empty program against libinfiniops and libinfinirt (in that
    order, every library kept: --no-as-needed). The linker then checks that
    every symbol libinfiniops needs is defined, as the loader would at import."""
    import subprocess

    source = workdir / "infini_link_test.cpp"
    source.write_text(_LINK_TEST_SOURCE)
    command = [compiler, str(source), "-o", str(workdir / "infini_link_test"), "-Wl,--no-as-needed"]
    for directory in stack.ops_library_dirs + stack.rt_library_dirs:
        command += [f"-L{directory}", f"-Wl,-rpath-link,{directory}"]
    # Where libinfiniops' other dependencies are (PyTorch's, for WITH_TORCH=ON).
    command += [f"-Wl,-rpath-link,{directory}" for directory in dependency_dirs]
    command += ["-linfiniops", "-linfinirt"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        return LinkTest(ok=False, missing_rt_symbols=[], output=f"{' '.join(command)}: {error}")
    output = proc.stdout + proc.stderr
    missing = []
    for match in _UNDEFINED.finditer(output):
        name = next(g for g in match.groups() if g).strip()
        if _infini_symbol(name) and name not in missing:
            missing.append(name)
    return LinkTest(ok=proc.returncode == 0, missing_rt_symbols=missing, output=output)


def check_ops_match_rt(stack: InfiniStack, compiler: str = "c++", dependency_dirs: tuple[str, ...] = ()) -> None:
    """Raises BuildConfigError when libinfiniops needs InfiniRT symbols that
    the libinfinirt being built against lacks: InfiniOps was built against
    another InfiniRT (each InfiniRT commit may change its ABI), and importing
    torch_infini would fail with "undefined symbol". Any other link failure
    (a dependency the linker cannot find) is reported, not fatal: the link
    of torch_infini itself says more."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="torch_infini_link_test_") as tmp:
        result = link_ops_against_rt(stack, compiler, Path(tmp), dependency_dirs)
    if result.missing_rt_symbols:
        shown = ", ".join(result.missing_rt_symbols[:3])
        more = len(result.missing_rt_symbols) - 3
        raise BuildConfigError(
            f"libinfiniops.so (in {os.pathsep.join(stack.ops_library_dirs)}) was built against another InfiniRT: "
            f"it needs {shown}{f' and {more} more' if more > 0 else ''}, which libinfinirt.so "
            f"(in {os.pathsep.join(stack.rt_library_dirs)}) does not define. Rebuild and reinstall InfiniOps "
            "against this InfiniRT (INFINI_RT_ROOT pointing at its prefix), then rebuild torch_infini. "
            "Rebuild InfiniOps for every InfiniRT you install (see README, 'Building against the Infini stack')")
    if not result.ok:
        print("torch_infini: warning: the InfiniOps/InfiniRT link test failed for another reason "
              f"(not a version mismatch); continuing:\n{result.output.strip()[:2000]}", flush=True)


#: The shared libraries of PyTorch an ATen-backed InfiniOps (WITH_TORCH=ON) links.
_TORCH_LIBRARIES = ("libtorch_cpu.so", "libtorch.so", "libc10.so", "libtorch_python.so")


def _dynamic_symbols(library: Path, *flags: str) -> set[str]:
    import subprocess

    proc = subprocess.run(["nm", "-D", *flags, str(library)], capture_output=True, text=True, timeout=300)
    return {line.split()[-1] for line in proc.stdout.splitlines() if line.split()}


def needed_libraries(library: Path) -> list[str]:
    """The DT_NEEDED entries of a shared library (``readelf -d``)."""
    import subprocess

    proc = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, timeout=60)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", proc.stdout)


@dataclass
class TorchMatch:
    """Whether an ATen-backed libinfiniops can run in the running PyTorch."""

    needs_torch: bool
    # PyTorch symbols libinfiniops needs that the running PyTorch lacks.
    missing: list[str] = field(default_factory=list)
    # The C++ ABI those symbols were compiled with, where they tell it.
    ops_cxx11_abi: bool | None = None


def ops_torch_match(ops_library: Path, torch_lib_dir: Path) -> TorchMatch:
    """Reads which PyTorch symbols an InfiniOps library needs and whether the
    PyTorch in ``torch_lib_dir`` defines them all (a libtorch of another
    major.minor or C++ ABI does not)."""
    if not any(n.startswith(("libtorch", "libc10")) for n in needed_libraries(ops_library)):
        return TorchMatch(needs_torch=False)
    wanted = {s for s in _dynamic_symbols(ops_library, "--undefined-only")
              if s.startswith(("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch"))}
    defined: set[str] = set()
    for name in _TORCH_LIBRARIES:
        if (torch_lib_dir / name).is_file():
            defined |= _dynamic_symbols(torch_lib_dir / name, "--defined-only")
    missing = sorted(wanted - defined)
    strings = [s for s in wanted if "basic_string" in s or "__cxx11" in s]
    abi = None if not strings else any("__cxx11" in s for s in strings)
    return TorchMatch(needs_torch=True, missing=missing, ops_cxx11_abi=abi)


def check_ops_match_torch(stack: InfiniStack, torch_version: str, cxx11_abi: bool, torch_lib_dir: Path) -> bool:
    """Raises BuildConfigError when libinfiniops was built WITH_TORCH=ON
    against another PyTorch than the running one (another major.minor or C++
    ABI: symbols it needs are missing), naming both. Returns whether it
    needs PyTorch at all."""
    library = next((Path(d) / "libinfiniops.so" for d in stack.ops_library_dirs
                    if (Path(d) / "libinfiniops.so").is_file()), None)
    if library is None:
        return False
    match = ops_torch_match(library, torch_lib_dir)
    if not match.needs_torch:
        return False
    abi_of = {True: "the C++11 ABI", False: "the pre-C++11 ABI", None: "an unknown C++ ABI"}
    if match.missing or (match.ops_cxx11_abi is not None and match.ops_cxx11_abi != cxx11_abi):
        shown = ", ".join(match.missing[:3])
        raise BuildConfigError(
            f"{library} was built WITH_TORCH=ON against another PyTorch than the running "
            f"PyTorch {torch_version} ({abi_of[cxx11_abi]}, {torch_lib_dir}): it was compiled with "
            f"{abi_of[match.ops_cxx11_abi]} and needs {len(match.missing)} symbols this PyTorch does not "
            f"define{': ' + shown if shown else ''}. Rebuild InfiniOps in this Python environment (see README, "
            "'Building against the Infini stack'), or run the PyTorch it was built with")
    return True


def stable_build_temp(distribution) -> str:
    """The object folder `python setup.py build_ext` uses by default: what
    setuptools' build command picks when nobody overrides it
    (build/temp.<platform>-<python tag>). The editable install builds there
    too, so that a later in-place build finds its objects."""
    from setuptools.command.build import build

    default = build(distribution)
    default.ensure_finalized()
    return default.build_temp
