"""tools/build_config.py: Infini stack discovery and build metadata, on fake
installs built in tmp_path (nothing is compiled)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import build_config  # noqa: E402
from build_config import BuildConfigError, build_metadata, resolve_infini_stack  # noqa: E402

from torch_infini import _guard  # noqa: E402
from hang_guard import HANG_GUARD_S  # noqa: E402

ADD_ALPHA_LINE = "template void Operator<::infini::ops::Add>::Call<Tensor, Tensor, double, Tensor>(Tensor, Tensor, double, Tensor);"
# Gemm's full overload at InfiniOps 1f6f9c2 (optional C before alpha) and at 2962714 (accumulates into c).
GEMM_OPTIONAL_C_LINE = (
    "extern template void Operator<::infini::ops::Gemm>::Call<Tensor, Tensor, std::optional<Tensor>, "
    "std::optional<float>, std::optional<float>, std::optional<int>, std::optional<int>, Tensor>(const Handle& handle);")
CAT_LIST_LINE = ("extern template void Operator<::infini::ops::Cat>::Call<std::vector<Tensor>, int64_t, Tensor>"
                 "(const Handle& handle, const Config& config, const std::vector<Tensor>& tensors);")
CAT_FIRST_AND_REST_LINE = ("extern template void Operator<::infini::ops::Cat>::Call<Tensor, std::vector<Tensor>, "
                           "int64_t, Tensor>(const Handle& handle, const Config& config, const Tensor& first_input);")
LINEAR_WEIGHT_LINE = ("extern template void Operator<::infini::ops::Linear>::Call<Tensor, Tensor, "
                      "std::optional<Tensor>, Tensor>(const Handle& handle);")
LINEAR_TRANS_LINE = ("extern template void Operator<::infini::ops::Linear>::Call<Tensor, Tensor, "
                     "std::optional<Tensor>, bool, bool, Tensor>(const Handle& handle);")
GEMM_ALPHA_BETA_C_LINE = (
    "extern template void Operator<::infini::ops::Gemm>::Call<Tensor, Tensor, std::optional<float>, "
    "std::optional<float>, std::optional<int>, std::optional<int>, Tensor>(const Handle& handle);")


def make_rt(root: Path, lib: str = "lib64", backends=("cpu",)) -> Path:
    (root / "include" / "infini" / "rt").mkdir(parents=True)
    (root / "include" / "infini" / "rt.h").write_text("#pragma once\n")
    (root / "include" / "infini" / "rt" / "generated.h").write_text(
        "".join(f"#include <infini/rt/{b}/device_.h>\n" for b in backends))
    (root / lib).mkdir()
    (root / lib / "libinfinirt.so").write_bytes(b"")
    return root


def make_ops(root: Path, lib: str = "lib", add_alpha: bool = True, extra_ops=("Gemm",),
             gemm_line: str = GEMM_OPTIONAL_C_LINE, extra_line: str = "") -> Path:
    (root / "include" / "infini").mkdir(parents=True)
    lines = [ADD_ALPHA_LINE if add_alpha else
             "template void Operator<::infini::ops::Add>::Call<Tensor, Tensor, Tensor>(Tensor, Tensor, Tensor);"]
    lines += [f"template void Operator<::infini::ops::{op}>::Call<Tensor>(Tensor);" for op in extra_ops]
    if "Gemm" in extra_ops:
        lines.append(gemm_line)
    if extra_line:
        lines.append(extra_line)
    (root / "include" / "infini" / "operator_call_instantiations.h").write_text("\n".join(lines) + "\n")
    (root / lib).mkdir()
    (root / lib / "libinfiniops.so").write_bytes(b"")
    return root


@pytest.fixture
def rt(tmp_path) -> Path:
    return make_rt(tmp_path / "rt")


@pytest.fixture
def ops(tmp_path) -> Path:
    return make_ops(tmp_path / "ops")


def test_no_variables_is_host_only_build():
    assert resolve_infini_stack({}) is None
    assert resolve_infini_stack({"INFINI_RT_PREFIX": "", "INFINI_OPS_PREFIX": "", "PATH": "/usr/bin"}) is None


def test_only_empty_rt_prefix_is_an_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildConfigError, match="INFINI_RT_PREFIX"):
        resolve_infini_stack({"INFINI_RT_PREFIX": str(empty)})


def test_empty_rt_prefix_names_variable_and_path(tmp_path, ops):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildConfigError) as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(empty), "INFINI_OPS_PREFIX": str(ops)})
    message = str(info.value)
    assert "INFINI_RT_PREFIX" in message
    assert str(empty) in message
    assert "infini/rt.h" in message


def test_empty_ops_prefix_names_variable_and_path(tmp_path, rt):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildConfigError) as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(empty)})
    message = str(info.value)
    assert "INFINI_OPS_PREFIX" in message
    assert str(empty) in message


def test_prefix_that_is_not_a_directory(tmp_path, ops):
    missing = tmp_path / "nowhere"
    with pytest.raises(BuildConfigError, match="INFINI_RT_PREFIX") as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(missing), "INFINI_OPS_PREFIX": str(ops)})
    assert str(missing) in str(info.value)


def test_library_missing_names_variable(tmp_path, ops):
    rt = make_rt(tmp_path / "rt")
    (rt / "lib64" / "libinfinirt.so").unlink()
    with pytest.raises(BuildConfigError, match="INFINI_RT_PREFIX") as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert "libinfinirt.so" in str(info.value)


def test_only_rt_prefix_is_an_error(rt):
    with pytest.raises(BuildConfigError, match="INFINI_OPS_PREFIX"):
        resolve_infini_stack({"INFINI_RT_PREFIX": str(rt)})


def test_only_ops_prefix_is_an_error(ops):
    with pytest.raises(BuildConfigError, match="INFINI_RT_PREFIX"):
        resolve_infini_stack({"INFINI_OPS_PREFIX": str(ops)})


def test_only_an_override_is_an_error(rt):
    with pytest.raises(BuildConfigError):
        resolve_infini_stack({"INFINI_RT_INCLUDE_DIRS": str(rt / "include")})


def test_fake_install_resolves(rt, ops):
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert stack is not None
    assert stack.rt_include_dirs == [str(rt / "include")]
    assert stack.rt_library_dirs == [str(rt / "lib64")]       # lib64 picked: there is no lib/
    assert stack.ops_include_dirs == [str(ops / "include")]
    assert stack.ops_library_dirs == [str(ops / "lib")]
    assert stack.rt_backends == ["cpu"]
    assert stack.ops_operators == ["Add", "Gemm"]
    assert stack.ops_add_has_alpha is True
    assert stack.cuda_include_dirs == []
    assert stack.include_dirs == [str(ops / "include"), str(rt / "include")]
    assert stack.library_dirs == [str(ops / "lib"), str(rt / "lib64")]
    macros = dict(stack.define_macros)
    assert macros["TORCH_INFINI_WITH_INFINI_STACK"] == "1"
    assert macros["TORCH_INFINI_OPS_ADD_HAS_ALPHA"] == "1"
    assert stack.ops_gemm_has_optional_c is True
    assert macros["TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C"] == "1"
    assert macros["TORCH_INFINI_RT_HAS_CPU"] == "1"


def test_lib_preferred_over_lib64(tmp_path, ops):
    rt = make_rt(tmp_path / "rt", lib="lib")
    (rt / "lib64").mkdir()
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert stack.rt_library_dirs == [str(rt / "lib")]


def test_add_without_alpha_and_several_backends(tmp_path):
    rt = make_rt(tmp_path / "rt", backends=("nvidia", "cpu", "notabackend"))
    ops = make_ops(tmp_path / "ops", add_alpha=False, extra_ops=())
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert stack.ops_add_has_alpha is False
    assert stack.ops_operators == ["Add"]
    # In the known order, unknown names dropped.
    assert stack.rt_backends == ["cpu", "nvidia"]
    macros = dict(stack.define_macros)
    assert "TORCH_INFINI_OPS_ADD_HAS_ALPHA" not in macros
    assert macros["TORCH_INFINI_RT_HAS_NVIDIA"] == "1"


def test_gemm_accumulating_into_c_is_told_apart(tmp_path):
    """InfiniOps 2962714's Gemm (a, b, alpha, beta, trans_a, trans_b, c) gets no
    optional-C macro; a build without Gemm gets none either."""
    rt = make_rt(tmp_path / "rt")
    ops = make_ops(tmp_path / "ops", gemm_line=GEMM_ALPHA_BETA_C_LINE)
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert stack.ops_operators == ["Add", "Gemm"]
    assert stack.ops_gemm_has_optional_c is False
    assert "TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C" not in dict(stack.define_macros)
    no_gemm = make_ops(tmp_path / "no_gemm", extra_ops=())
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(no_gemm)})
    assert stack.ops_gemm_has_optional_c is False


@pytest.mark.parametrize(
    "line,attribute,macro,expected",
    [(CAT_LIST_LINE, "ops_cat_takes_list", "TORCH_INFINI_OPS_CAT_TAKES_LIST", True),
     (CAT_FIRST_AND_REST_LINE, "ops_cat_takes_list", "TORCH_INFINI_OPS_CAT_TAKES_LIST", False),
     ("", "ops_cat_takes_list", "TORCH_INFINI_OPS_CAT_TAKES_LIST", False),
     (LINEAR_WEIGHT_LINE, "ops_linear_takes_weight", "TORCH_INFINI_OPS_LINEAR_TAKES_WEIGHT", True),
     (LINEAR_TRANS_LINE, "ops_linear_takes_weight", "TORCH_INFINI_OPS_LINEAR_TAKES_WEIGHT", False),
     ("", "ops_linear_takes_weight", "TORCH_INFINI_OPS_LINEAR_TAKES_WEIGHT", False)],
    ids=["cat_list", "cat_first_and_rest", "no_cat", "linear_weight", "linear_trans", "no_linear"])
def test_cat_and_linear_signatures_are_detected(tmp_path, line, attribute, macro, expected):
    rt = make_rt(tmp_path / "rt")
    ops = make_ops(tmp_path / "ops", extra_line=line)
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert getattr(stack, attribute) is expected
    assert (macro in dict(stack.define_macros)) is expected


def test_missing_generated_header_gives_no_backends(rt, ops):
    (rt / "include" / "infini" / "rt" / "generated.h").unlink()
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert stack.rt_backends == []


def test_overrides_win_over_prefixes(tmp_path, rt, ops):
    other_rt = make_rt(tmp_path / "other_rt", lib="lib")
    other_ops = make_ops(tmp_path / "other_ops", lib="lib64")
    env = {
        "INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops),
        "INFINI_RT_INCLUDE_DIRS": os.pathsep.join([str(tmp_path / "nothing"), str(other_rt / "include")]),
        "INFINI_RT_LIBRARY_DIRS": str(other_rt / "lib"),
        "INFINI_OPS_INCLUDE_DIRS": str(other_ops / "include"),
        "INFINI_OPS_LIBRARY_DIRS": str(other_ops / "lib64"),
    }
    stack = resolve_infini_stack(env)
    assert stack.rt_include_dirs == [str(tmp_path / "nothing"), str(other_rt / "include")]
    assert stack.rt_library_dirs == [str(other_rt / "lib")]
    assert stack.ops_include_dirs == [str(other_ops / "include")]
    assert stack.ops_library_dirs == [str(other_ops / "lib64")]


def test_overrides_alone_resolve_without_prefixes(tmp_path):
    rt = make_rt(tmp_path / "rt")
    ops = make_ops(tmp_path / "ops")
    env = {
        "INFINI_RT_INCLUDE_DIRS": str(rt / "include"), "INFINI_RT_LIBRARY_DIRS": str(rt / "lib64"),
        "INFINI_OPS_INCLUDE_DIRS": str(ops / "include"), "INFINI_OPS_LIBRARY_DIRS": str(ops / "lib"),
    }
    stack = resolve_infini_stack(env)
    assert stack.rt_backends == ["cpu"]
    assert stack.ops_add_has_alpha is True


def test_override_pointing_at_nothing_names_the_override(tmp_path, rt, ops):
    empty = tmp_path / "empty_include"
    empty.mkdir()
    env = {"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops), "INFINI_OPS_INCLUDE_DIRS": str(empty)}
    with pytest.raises(BuildConfigError, match="INFINI_OPS_INCLUDE_DIRS") as info:
        resolve_infini_stack(env)
    assert str(empty) in str(info.value)


def test_cuda_include_dirs_passed_through(rt, ops):
    cuda = os.pathsep.join(["/opt/cuda/include", "/opt/cuda/targets/include"])
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops),
                                  "CUDA_INCLUDE_DIRS": cuda})
    assert stack.cuda_include_dirs == ["/opt/cuda/include", "/opt/cuda/targets/include"]
    assert stack.include_dirs[-2:] == ["/opt/cuda/include", "/opt/cuda/targets/include"]


def make_nvidia_rt(root: Path) -> Path:
    """An InfiniRT prefix built with the nvidia backend: its public header
    includes cuda_runtime.h, as InfiniRT a38977e's does."""
    make_rt(root, backends=("cpu", "nvidia"))
    native = root / "include" / "infini" / "rt" / "detail" / "native" / "cuda" / "nvidia"
    native.mkdir(parents=True)
    (native / "runtime_.h").write_text("#pragma once\n#include <utility>\n// clang-format off\n"
                                       "#include <cuda_runtime.h>\n// clang-format on\n")
    (native / "data_type_.h").write_text('#pragma once\n#  include "cuda_bf16.h"\n')
    return root


def make_cuda_home(root: Path, headers=("cuda_runtime.h", "cuda_bf16.h"), lib: str = "lib64") -> Path:
    (root / "include").mkdir(parents=True)
    for name in headers:
        (root / "include" / name).write_text("#pragma once\n")
    (root / lib).mkdir()
    return root


@pytest.fixture
def no_default_cuda(tmp_path, monkeypatch):
    """No CUDA toolkit at the default location, whatever this machine has."""
    monkeypatch.setattr(build_config, "DEFAULT_CUDA_HOME", tmp_path / "no-default-cuda")


def test_headers_without_cuda_need_no_cuda(rt, ops, no_default_cuda):
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    assert build_config.cuda_headers_included(stack.include_dirs) == {}
    assert (stack.cuda_include_dirs, stack.cuda_library_dirs, stack.cuda_note) == ([], [], "")


def test_nvidia_rt_headers_add_cuda_home(tmp_path, ops, no_default_cuda):
    rt = make_nvidia_rt(tmp_path / "rt")
    cuda = make_cuda_home(tmp_path / "cuda")
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops),
                                  "CUDA_HOME": str(cuda)})
    assert stack.rt_backends == ["cpu", "nvidia"]
    needed = build_config.cuda_headers_included(stack.rt_include_dirs)
    assert sorted(needed) == ["cuda_bf16.h", "cuda_runtime.h"]
    assert needed["cuda_runtime.h"].name == "runtime_.h"
    assert stack.cuda_include_dirs == [str(cuda / "include")]
    assert stack.include_dirs[-1] == str(cuda / "include")
    assert stack.cuda_library_dirs == [str(cuda / "lib64")]
    assert stack.library_dirs[-1] == str(cuda / "lib64")
    # The build log says why CUDA is needed and where it was found.
    assert "cuda_runtime.h" in stack.cuda_note and str(cuda / "include") in stack.cuda_note
    assert "CUDA_HOME" in stack.cuda_note


def test_cuda_path_and_default_location_are_used_in_order(tmp_path, ops, monkeypatch):
    rt = make_nvidia_rt(tmp_path / "rt")
    default = make_cuda_home(tmp_path / "default", lib="lib")
    other = make_cuda_home(tmp_path / "other")
    monkeypatch.setattr(build_config, "DEFAULT_CUDA_HOME", default)
    env = {"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)}
    stack = resolve_infini_stack(env)
    assert (stack.cuda_include_dirs, stack.cuda_library_dirs) == ([str(default / "include")], [str(default / "lib")])
    assert "default location" in stack.cuda_note
    stack = resolve_infini_stack({**env, "CUDA_PATH": str(other)})
    assert stack.cuda_include_dirs == [str(other / "include")] and "CUDA_PATH" in stack.cuda_note


def test_nvidia_rt_headers_without_cuda_is_an_error(tmp_path, ops, no_default_cuda):
    rt = make_nvidia_rt(tmp_path / "rt")
    with pytest.raises(BuildConfigError) as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    message = str(info.value)
    assert "cuda_bf16.h" in message and "no CUDA toolkit" in message and "CUDA_HOME" in message
    assert str(rt / "include") in message  # the install header that includes it


def test_cuda_home_that_is_not_a_toolkit_is_an_error(tmp_path, ops, no_default_cuda):
    rt = make_nvidia_rt(tmp_path / "rt")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildConfigError, match="CUDA_HOME") as info:
        resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops), "CUDA_HOME": str(empty)})
    assert str(empty) in str(info.value)


def test_header_apart_from_the_toolkit_comes_from_cuda_include_dirs(tmp_path, no_default_cuda):
    """cuBLAS' headers come from nvidia-cublas, not the toolkit: a missing one
    is named, and CUDA_INCLUDE_DIRS supplies it (searched first)."""
    rt = make_nvidia_rt(tmp_path / "rt")
    ops = make_ops(tmp_path / "ops")
    (ops / "include" / "infini" / "blas.h").write_text("#include <cublas_v2.h>\n")
    cuda = make_cuda_home(tmp_path / "cuda")
    env = {"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops), "CUDA_HOME": str(cuda)}
    with pytest.raises(BuildConfigError, match="cublas_v2.h") as info:
        resolve_infini_stack(env)
    assert str(ops / "include" / "infini" / "blas.h") in str(info.value)
    cublas = tmp_path / "cublas"
    (cublas / "include").mkdir(parents=True)
    (cublas / "include" / "cublas_v2.h").write_text("#pragma once\n")
    stack = resolve_infini_stack({**env, "CUDA_INCLUDE_DIRS": str(cublas / "include"),
                                  "CUDA_LIBRARY_DIRS": str(cublas / "lib")})
    assert stack.cuda_include_dirs == [str(cublas / "include"), str(cuda / "include")]
    assert stack.cuda_library_dirs == [str(cublas / "lib"), str(cuda / "lib64")]


@pytest.mark.parametrize(
    "version,expected",
    [("2.13.0+cpu", "2.13"), ("2.13.1", "2.13"), ("2.13.0a0+git123", "2.13"), ("2.13.0rc1", "2.13"),
     ("2.13.0.dev20260101", "2.13"), ("02.013.0", "2.13"), ("10.1", "10.1")],
)
def test_torch_major_minor(version, expected):
    assert build_config.torch_major_minor(version) == expected


@pytest.mark.parametrize("version", ["2.11.0", "2.11.0+cu130", "2.13.0+cpu", "2.14.1", "2.15.0", "2.15.3rc1"])
def test_supported_torch_builds(version):
    assert build_config.check_torch_supported(version) is None


@pytest.mark.parametrize("version", ["2.10.0", "2.16.0", "2.16.0.dev20270101", "3.0.0"])
def test_unsupported_torch_is_refused_before_compiling(version):
    with pytest.raises(BuildConfigError) as info:
        build_config.check_torch_supported(version, "/venv/lib/torch")
    message = str(info.value)
    assert "supports PyTorch 2.11 to 2.15" in message
    assert f"PyTorch {version} (/venv/lib/torch)" in message
    assert "pip install 'torch>=2.11,<2.16'" in message


@pytest.mark.parametrize("bad", ["", "2", "abc", "v2.13"])
def test_torch_major_minor_rejects(bad):
    with pytest.raises(ValueError):
        build_config.torch_major_minor(bad)


def test_build_metadata_host_only():
    meta = build_metadata("2.13.0+cpu", True, None)
    expected = {
        "schema": 1,
        "torch_version": "2.13.0+cpu",
        "torch_major_minor": "2.13",
        "cxx11_abi": True,
        "infini_stack": False,
        "infini_rt_backends": [],
        "infini_ops_operators": [],
        "infini_ops_add_has_alpha": False,
    }
    assert {k: meta.get(k) for k in expected} == expected
    assert set(_guard.REQUIRED_KEYS) <= set(meta)
    # Anything else it records about the stack is empty without one.
    for key in set(meta) - set(expected):
        assert key.startswith("infini_") and not meta[key], key


def test_build_metadata_with_stack(rt, ops):
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    meta = build_metadata("2.13.0a0+git123", 1, stack)
    assert meta["torch_major_minor"] == "2.13"
    assert meta["cxx11_abi"] is True
    assert meta["infini_stack"] is True
    assert meta["infini_rt_backends"] == ["cpu"]
    assert meta["infini_ops_operators"] == ["Add", "Gemm"]
    assert meta["infini_ops_add_has_alpha"] is True
    assert meta["infini_ops_gemm_has_optional_c"] is True


def test_build_metadata_satisfies_import_guard(tmp_path):
    """What the build writes is what the import guard accepts."""
    import json

    import torch

    meta = build_metadata(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI, None)
    path = tmp_path / "_build_info.json"
    path.write_text(json.dumps(meta))
    loaded = _guard.load_metadata(path)
    _guard.check_compatible(loaded, torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)


def test_setup_py_exits_on_bad_prefix_before_compiling(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(os.environ, INFINI_RT_PREFIX=str(empty))
    for var in ("INFINI_OPS_PREFIX", "INFINI_RT_INCLUDE_DIRS", "INFINI_RT_LIBRARY_DIRS",
                "INFINI_OPS_INCLUDE_DIRS", "INFINI_OPS_LIBRARY_DIRS"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "setup.py", "--name"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "INFINI_RT_PREFIX" in output
    assert "torch_infini build error" in output


def test_ops_implementations_are_read_from_library_symbols(tmp_path):
    """Which backends implement an operator comes from libinfiniops' mangled
    names: Operator<Add, Device::Type 0 (cpu), 0> counts, the generic
    Operator<Add, kCount=8, 0> does not."""
    bc = build_config
    lib = tmp_path / "libinfiniops.so"
    lib.write_bytes(
        b"\x00junk_ZN6infini3ops8OperatorINS0_3AddELNS_2rt6Device4TypeE0ELm0EEclE\x00"
        b"_ZN6infini3ops8OperatorINS0_3AddELNS_2rt6Device4TypeE8ELm0EE4CallE\x00"
        b"_ZN6infini3ops8OperatorINS0_4GemmELNS_2rt6Device4TypeE1ELm0EEclE\x00"
    )
    assert bc.ops_implementations_from_library(lib) == {"Add": [0], "Gemm": [1]}


def test_aten_backed_backends_are_read_from_library_symbols(tmp_path):
    """Operator<Op, type, 8> (InfiniOps built WITH_TORCH=ON) makes a backend
    ATen-backed: the process then needs that device's PyTorch
    (torch_infini/_aten_backed.py); a native index or a mangled length that
    does not match its name does not count."""
    bc = build_config
    lib = tmp_path / "libinfiniops.so"
    lib.write_bytes(
        b"_ZN6infini3ops8OperatorINS0_3AbsELNS_2rt6Device4TypeE0ELm8EEclE\x00"
        b"_ZN6infini3ops8OperatorINS0_4GemmELNS_2rt6Device4TypeE1ELm8EEclE\x00"
        b"_ZN6infini3ops8OperatorINS0_4GemmELNS_2rt6Device4TypeE3ELm0EEclE\x00"
        b"_ZN6infini3ops8OperatorINS0_9GemmELNS_2rt6Device4TypeE4ELm8EEclE\x00"
    )
    assert bc.ops_aten_backed_from_library(lib) == ["cpu", "nvidia"]
    lib.write_bytes(b"_ZN6infini3ops8OperatorINS0_3AbsELNS_2rt6Device4TypeE0ELm0EEclE\x00")
    assert bc.ops_aten_backed_from_library(lib) == []


def test_build_metadata_records_the_aten_backed_backends(rt, ops):
    stack = resolve_infini_stack({"INFINI_RT_PREFIX": str(rt), "INFINI_OPS_PREFIX": str(ops)})
    stack.ops_aten_backed = ["cpu", "nvidia"]
    assert build_metadata("2.13.0", True, stack)["infini_ops_aten_backed"] == ["cpu", "nvidia"]
    assert build_metadata("2.13.0", True, None)["infini_ops_aten_backed"] == []


# --- InfiniCCL (INFINI_CCL_PREFIX) -------------------------------------------------


def _fake_ccl(root: Path, header: str = "infinicclResult_t infinicclCommInitRank(void);\n") -> Path:
    (root / "include" / "infiniccl").mkdir(parents=True)
    (root / "include" / "infiniccl" / "comm.h").write_text(header)
    (root / "lib").mkdir()
    (root / "lib" / "libinfiniccl.so").write_bytes(b"")
    return root


def test_infini_ccl_absent_without_the_variables():
    from build_config import resolve_infini_ccl

    assert resolve_infini_ccl({}) is None


def test_infini_ccl_prefix_found(tmp_path):
    from build_config import resolve_infini_ccl

    ccl = resolve_infini_ccl({"INFINI_CCL_PREFIX": str(_fake_ccl(tmp_path / "ccl"))})
    assert ccl.include_dirs == [str(tmp_path / "ccl" / "include")]
    assert ccl.library_dirs == [str(tmp_path / "ccl" / "lib")]
    assert ("TORCH_INFINI_WITH_INFINI_CCL", "1") in ccl.define_macros and ccl.libraries == ["infiniccl"]
    assert build_metadata("2.13.0", True, None, ccl)["infini_ccl"] is True


@pytest.mark.parametrize("break_it", ["missing", "no_library", "other_comm_h"])
def test_infini_ccl_prefix_that_is_not_an_install_is_an_error(tmp_path, break_it):
    from build_config import resolve_infini_ccl

    root = tmp_path / "ccl"
    if break_it != "missing":
        _fake_ccl(root, header="int unrelated(void);\n" if break_it == "other_comm_h" else
                  "infinicclResult_t infinicclCommInitRank(void);\n")
        if break_it == "no_library":
            (root / "lib" / "libinfiniccl.so").unlink()
    with pytest.raises(BuildConfigError, match="INFINI_CCL_PREFIX"):
        resolve_infini_ccl({"INFINI_CCL_PREFIX": str(root)})
