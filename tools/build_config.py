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
    # Where CUDA's libraries are, when the installs' headers include CUDA's.
    cuda_library_dirs: list[str] = field(default_factory=list)
    # What the build found about CUDA, for the build log ("" when not needed).
    cuda_note: str = ""
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
        return self.ops_library_dirs + self.rt_library_dirs + self.cuda_library_dirs

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
        f"point {var} at an installed build (see docs/infini-stack.md, 'Building the stack')"
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


#: An ``#include`` of a header of NVIDIA's CUDA toolkit or of a CUDA library
#: shipped apart (cuBLAS, NCCL, ... from the package index): an install whose
#: public headers have one cannot be compiled against without CUDA's headers.
_CUDA_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]((?:cuda|cublas|cusparse|curand|cufft|cusolver|nccl|cudnn|nvtx|'
    r'vector_types|driver_types)[A-Za-z0-9_]*\.h)[>"]', re.M)


def cuda_headers_included(include_dirs: list[str]) -> dict[str, Path]:
    """The CUDA headers that an install's public headers include, each with
    the first header (sorted) that includes it; empty when none does.

    Only ``infini/`` (the installs' own tree) is read, not a system folder an
    override may also name."""
    found: dict[str, Path] = {}
    for directory in include_dirs:
        root = Path(directory) / "infini"
        if not root.is_dir():
            continue
        for header in sorted(root.rglob("*.h")):
            for name in _CUDA_INCLUDE.findall(header.read_text(errors="replace")):
                found.setdefault(name, header)
    return found


#: Where CUDA's installers put the toolkit; tests point it elsewhere.
DEFAULT_CUDA_HOME = Path("/usr/local/cuda")


def cuda_home(env: Mapping[str, str]) -> tuple[str, Path] | None:
    """Where the CUDA toolkit is, and what said so: ``CUDA_HOME``, then
    ``CUDA_PATH`` (PyTorch reads them in this order), then ``/usr/local/cuda``
    (:data:`DEFAULT_CUDA_HOME`).
    A variable that is set must name a toolkit (``include/cuda_runtime.h``)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var, "")
        if value:
            if not (Path(value) / "include" / "cuda_runtime.h").is_file():
                raise BuildConfigError(
                    f"{var}={value} is set, but {value}/include/cuda_runtime.h does not exist: "
                    f"point {var} at a CUDA toolkit (the folder with include/ and lib64/)")
            return var, Path(value)
    if (DEFAULT_CUDA_HOME / "include" / "cuda_runtime.h").is_file():
        return "its default location", DEFAULT_CUDA_HOME
    return None


def resolve_cuda(env: Mapping[str, str], include_dirs: list[str]) -> tuple[list[str], list[str], str]:
    """CUDA's include and library folders for installs whose public headers
    include CUDA's (InfiniRT's nvidia backend includes ``cuda_runtime.h``),
    and a line for the build log saying what was found and why it is needed.

    ``CUDA_INCLUDE_DIRS`` and ``CUDA_LIBRARY_DIRS`` (path lists) are used as
    given, before the toolkit's own folders; the toolkit is ``CUDA_HOME``,
    ``CUDA_PATH`` or ``/usr/local/cuda``. Every CUDA header the installs
    include must be in one of the folders (cuBLAS' from ``nvidia-cublas``
    lives apart from the toolkit: add its ``include`` to
    ``CUDA_INCLUDE_DIRS``), else BuildConfigError names the header, the
    install header that includes it and what to set."""
    extra_inc = _split(env.get("CUDA_INCLUDE_DIRS", ""))
    extra_lib = _split(env.get("CUDA_LIBRARY_DIRS", ""))
    needed = cuda_headers_included(include_dirs)
    if not needed:
        return extra_inc, extra_lib, ""
    home = cuda_home(env)
    inc, lib = list(extra_inc), list(extra_lib)
    if home is not None:
        source, root = home
        inc.append(str(root / "include"))
        lib += [str(root / name) for name in ("lib64", "lib") if (root / name).is_dir()][:1]
    for name, includer in sorted(needed.items()):
        if not any((Path(d) / name).is_file() for d in inc):
            where = f"the CUDA toolkit at {home[1]} ({home[0]})" if home else "no CUDA toolkit (CUDA_HOME, CUDA_PATH and /usr/local/cuda have none)"
            raise BuildConfigError(
                f"the Infini stack's headers include CUDA's {name} ({includer}), which is not in "
                f"{where}{' nor in CUDA_INCLUDE_DIRS' if extra_inc else ''}: set CUDA_HOME to a CUDA "
                f"toolkit, and add the folder that has {name} to CUDA_INCLUDE_DIRS where it comes "
                "apart from the toolkit (cublas_v2.h: nvidia-cublas' nvidia/cu13/include)")
    first = min(needed.items(), key=lambda item: str(item[1]))
    note = (f"the Infini stack's headers include CUDA's {', '.join(sorted(needed))} ({first[1]} includes "
            f"{first[0]}): compiling with CUDA's headers from {os.pathsep.join(inc)}"
            f"{'; libraries from ' + os.pathsep.join(lib) if lib else ''}"
            f"{f' (toolkit found by {home[0]})' if home else ''}")
    return inc, lib, note


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
    cuda_inc, cuda_lib, cuda_note = resolve_cuda(env, ops_inc + rt_inc)
    return InfiniStack(
        rt_include_dirs=rt_inc, rt_library_dirs=rt_lib,
        ops_include_dirs=ops_inc, ops_library_dirs=ops_lib,
        cuda_include_dirs=cuda_inc, cuda_library_dirs=cuda_lib, cuda_note=cuda_note,
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


def _load_guard():
    """torch_infini/_guard.py by path (the package cannot be imported before it is built):
    the one place that says which PyTorch releases are supported."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "torch_infini" / "_guard.py"
    spec = importlib.util.spec_from_file_location("torch_infini_guard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_torch_supported(torch_version: str, torch_location: str = "") -> None:
    """Raises BuildConfigError unless ``torch_version`` is a supported release:
    a build against another one would fail to compile, or build an extension
    the import guard refuses."""
    guard = _load_guard()
    if guard.is_supported(torch_version):
        return
    oldest, newest = guard.SUPPORTED_TORCH
    major, minor = (int(part) for part in newest.split("."))
    where = f" ({torch_location})" if torch_location else ""
    raise BuildConfigError(
        f"torch_infini supports {guard.supported_releases()}; this environment has PyTorch "
        f"{torch_version}{where}. Install a supported one (pip install 'torch>={oldest},<{major}.{minor + 1}') "
        "and build again.")


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
            "Rebuild InfiniOps for every InfiniRT you install (see docs/infini-stack.md, 'Building the stack')")
    if not result.ok:
        print("torch_infini: warning: the InfiniOps/InfiniRT link test failed for another reason "
              f"(not a version mismatch); continuing:\n{result.output.strip()[:2000]}", flush=True)


#: The shared libraries of PyTorch an ATen-backed InfiniOps (WITH_TORCH=ON)
#: links on every device; on NVIDIA it also links libtorch_cuda and libc10_cuda
#: (for CUDA streams), read from its own NEEDED entries.
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
    needed = needed_libraries(ops_library)
    if not any(n.startswith(("libtorch", "libc10")) for n in needed):
        return TorchMatch(needs_torch=False)
    wanted = {s for s in _dynamic_symbols(ops_library, "--undefined-only")
              if s.startswith(("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch"))}
    defined: set[str] = set()
    for name in dict.fromkeys(_TORCH_LIBRARIES + tuple(n for n in needed if n.startswith(("libtorch", "libc10")))):
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
            f"define{': ' + shown if shown else ''}. Rebuild InfiniOps in this Python environment (see "
            "docs/infini-stack.md, 'Building the stack'), or run the PyTorch it was built with")
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
