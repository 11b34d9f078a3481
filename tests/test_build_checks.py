"""The build's own checks and output, without building torch_infini:

* the InfiniOps/InfiniRT link test (tools/build_config.py), on fake installs
  whose two libraries are compiled here from a few lines of C++: an InfiniOps
  built against the InfiniRT it is linked with passes, one built against
  another InfiniRT is refused with the rebuild instruction;
* the compile flags (release by default, TORCH_INFINI_DEBUG=1 for debug);
* the progress lines a pip user sees (tools/build_progress.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import build_config  # noqa: E402
import build_progress  # noqa: E402
from build_config import BuildConfigError, InfiniStack  # noqa: E402
from hang_guard import HANG_GUARD_S  # noqa: E402

CXX = shutil.which(os.environ.get("CXX", "c++"))

# InfiniRT before and after an ABI change (as a38977e changed TensorView):
# the old one defines ndim() out of line, the new one no longer does.
RT_OLD = """
namespace infini::rt {
struct TensorView { int ndim() const; int rank_; };
int TensorView::ndim() const { return rank_; }
int device_count() { return 1; }
}
"""
RT_NEW = """
namespace infini::rt {
int device_count() { return 1; }
int tensor_view_abi_v2() { return 2; }
}
"""
# InfiniOps code that calls into InfiniRT, compiled against the old headers.
OPS = """
namespace infini::rt {
struct TensorView { int ndim() const; int rank_; };
int device_count();
}
namespace infini::ops {
int add_rank(const infini::rt::TensorView& t) { return t.ndim() + infini::rt::device_count(); }
}
"""


def _shared_library(directory: Path, name: str, source: str, *link: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / f"{name}.cpp"
    src.write_text(source)
    out = directory / f"lib{name}.so"
    subprocess.run([CXX, "-shared", "-fPIC", "-o", str(out), str(src), *link], check=True, timeout=HANG_GUARD_S,
                   capture_output=True)
    return out


def _stack(rt_lib: Path, ops_lib: Path) -> InfiniStack:
    return InfiniStack(rt_include_dirs=[], rt_library_dirs=[str(rt_lib)],
                       ops_include_dirs=[], ops_library_dirs=[str(ops_lib)])


@pytest.fixture(scope="module")
def fake_installs(tmp_path_factory) -> dict[str, InfiniStack]:
    """An InfiniOps built against the old InfiniRT, next to the old and the new InfiniRT."""
    if CXX is None:
        pytest.skip("needs a C++ compiler to make the fake libraries")
    root = tmp_path_factory.mktemp("link_test")
    old_rt = root / "rt-old" / "lib"
    new_rt = root / "rt-new" / "lib"
    ops = root / "ops" / "lib"
    _shared_library(old_rt, "infinirt", RT_OLD)
    _shared_library(new_rt, "infinirt", RT_NEW)
    _shared_library(ops, "infiniops", OPS, f"-L{old_rt}", "-linfinirt")
    return {"matching": _stack(old_rt, ops), "stale": _stack(new_rt, ops)}


def test_matching_builds_pass_the_link_test(fake_installs, tmp_path):
    result = build_config.link_ops_against_rt(fake_installs["matching"], CXX, tmp_path)
    assert result.ok, result.output
    assert result.missing_rt_symbols == []
    build_config.check_ops_match_rt(fake_installs["matching"], CXX)  # does not raise


def test_stale_infiniops_is_refused_with_the_rebuild_instruction(fake_installs, tmp_path):
    stack = fake_installs["stale"]
    result = build_config.link_ops_against_rt(stack, CXX, tmp_path)
    assert not result.ok
    assert result.missing_rt_symbols == ["infini::rt::TensorView::ndim() const"], result.output
    with pytest.raises(BuildConfigError) as caught:
        build_config.check_ops_match_rt(stack, CXX)
    message = str(caught.value)
    assert "infini::rt::TensorView::ndim() const" in message
    assert "was built against another InfiniRT" in message
    assert "Rebuild and reinstall InfiniOps against this InfiniRT" in message
    assert stack.rt_library_dirs[0] in message and stack.ops_library_dirs[0] in message


def test_other_link_failures_are_not_called_a_mismatch(fake_installs, tmp_path, capsys):
    """A missing library is not a version mismatch: reported, not fatal."""
    stack = _stack(tmp_path / "no-rt", Path(fake_installs["matching"].ops_library_dirs[0]))
    result = build_config.link_ops_against_rt(stack, CXX, tmp_path)
    assert not result.ok and result.missing_rt_symbols == []
    build_config.check_ops_match_rt(stack, CXX)
    assert "link test failed for another reason" in capsys.readouterr().out


def test_undefined_symbol_parsing_covers_ld_and_lld():
    ld = "/usr/bin/ld: /x/libinfiniops.so: undefined reference to `infini::rt::TensorView::ndim() const'"
    lld = "ld.lld: error: undefined reference due to --no-allow-shlib-undefined: _ZNK6infini2rt10TensorView4ndimEv"
    names = [next(g for g in m.groups() if g) for m in build_config._UNDEFINED.finditer(ld + "\n" + lld)]
    assert names == ["infini::rt::TensorView::ndim() const", "_ZNK6infini2rt10TensorView4ndimEv"]
    assert all(build_config._infini_symbol(n) for n in names)
    assert not build_config._infini_symbol("cudaMalloc")


# --- an ATen-backed InfiniOps (WITH_TORCH=ON) and the running PyTorch ----------------

# A "PyTorch" of one version defines c10::version_a(std::string); the other
# has renamed it. The ATen-backed InfiniOps was compiled against the first.
TORCH_A = """#include <string>
namespace c10 { int version_a(const std::string& s) { return (int)s.size(); } }
"""
TORCH_B = """#include <string>
namespace c10 { int version_b(const std::string& s) { return (int)s.size(); } }
"""
OPS_WITH_TORCH = """#include <string>
namespace c10 { int version_a(const std::string& s); }
namespace infini::ops { int aten_backed() { return c10::version_a("x"); } }
"""


@pytest.fixture(scope="module")
def torch_installs(tmp_path_factory) -> dict[str, Path]:
    if CXX is None:
        pytest.skip("needs a C++ compiler to make the fake libraries")
    root = tmp_path_factory.mktemp("torch_match")
    _shared_library(root / "torch-a", "c10", TORCH_A)
    _shared_library(root / "torch-b", "c10", TORCH_B)
    _shared_library(root / "ops", "infiniops", OPS_WITH_TORCH, f"-L{root / 'torch-a'}", "-lc10")
    _shared_library(root / "ops-plain", "infiniops", "namespace infini::ops { int f() { return 1; } }")
    return {"a": root / "torch-a", "b": root / "torch-b", "ops": root / "ops", "plain": root / "ops-plain"}


def _ops_stack(directory: Path) -> InfiniStack:
    return InfiniStack(rt_include_dirs=[], rt_library_dirs=[], ops_include_dirs=[],
                       ops_library_dirs=[str(directory)])


def test_infiniops_without_torch_needs_no_match(torch_installs):
    assert build_config.check_ops_match_torch(_ops_stack(torch_installs["plain"]), "2.13.0", True,
                                              torch_installs["b"]) is False


def test_aten_backed_infiniops_of_this_torch_passes(torch_installs):
    match = build_config.ops_torch_match(torch_installs["ops"] / "libinfiniops.so", torch_installs["a"])
    assert match.needs_torch and match.missing == []
    abi = match.ops_cxx11_abi
    assert abi is not None
    assert build_config.check_ops_match_torch(_ops_stack(torch_installs["ops"]), "2.13.0", abi,
                                              torch_installs["a"]) is True


def test_aten_backed_infiniops_of_another_torch_names_both(torch_installs):
    with pytest.raises(BuildConfigError) as caught:
        build_config.check_ops_match_torch(_ops_stack(torch_installs["ops"]), "2.12.1", True,
                                           torch_installs["b"])
    message = str(caught.value)
    assert "another PyTorch than the running PyTorch 2.12.1" in message
    assert str(torch_installs["b"]) in message and "version_a" in message
    assert "Rebuild InfiniOps in this Python environment" in message


def test_symbols_of_the_device_libraries_it_links_count(tmp_path):
    """On NVIDIA, an ATen-backed InfiniOps also links libc10_cuda (CUDA
    streams): its symbols are looked up there too, not reported missing."""
    if CXX is None:
        pytest.skip("needs a C++ compiler to make the fake libraries")
    torch_dir = tmp_path / "torch"
    _shared_library(torch_dir, "c10", TORCH_A)
    _shared_library(torch_dir, "c10_cuda", "namespace c10::cuda { int stream_from_external(int i) { return i; } }")
    _shared_library(tmp_path / "ops", "infiniops",
                    OPS_WITH_TORCH + "namespace c10::cuda { int stream_from_external(int); }\n"
                    "namespace infini::ops { int on_stream() { return c10::cuda::stream_from_external(1); } }\n",
                    f"-L{torch_dir}", "-lc10", "-lc10_cuda")
    match = build_config.ops_torch_match(tmp_path / "ops" / "libinfiniops.so", torch_dir)
    assert match.needs_torch and match.missing == []
    (torch_dir / "libc10_cuda.so").unlink()  # a CPU-only PyTorch: the CUDA symbol is missing
    assert any("stream_from_external" in s for s in
               build_config.ops_torch_match(tmp_path / "ops" / "libinfiniops.so", torch_dir).missing)


def test_aten_backed_infiniops_of_another_abi_is_refused(torch_installs):
    abi = build_config.ops_torch_match(torch_installs["ops"] / "libinfiniops.so", torch_installs["a"]).ops_cxx11_abi
    with pytest.raises(BuildConfigError, match="compiled with the (pre-)?C\\+\\+11 ABI"):
        build_config.check_ops_match_torch(_ops_stack(torch_installs["ops"]), "2.13.0", not abi,
                                           torch_installs["a"])


# --- compile flags ----------------------------------------------------------------


def test_release_flags_have_no_debug_information():
    flags = build_config.compile_flags({})
    assert flags.debug is False
    assert "-O2" in flags.cxx and flags.cxx.index("-g0") > flags.cxx.index("-O2")
    assert "-g" not in flags.cxx and "-g0" in flags.link
    assert build_config.compile_flags({"TORCH_INFINI_DEBUG": "0"}) == flags


def test_debug_switch():
    flags = build_config.compile_flags({"TORCH_INFINI_DEBUG": "1"})
    assert flags.debug is True
    assert {"-O0", "-g", "-UNDEBUG"} <= set(flags.cxx)


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_malformed_debug_switch_names_itself(value):
    with pytest.raises(BuildConfigError, match=f"TORCH_INFINI_DEBUG='{value}' is invalid: expected 1"):
        build_config.compile_flags({"TORCH_INFINI_DEBUG": value})


# --- progress -----------------------------------------------------------------------


def test_describe_shortens_ninja_steps_and_the_link():
    root = "/repo"
    compile_line = ("[3/40] c++ -MMD -MF /tmp/b/csrc/ops/add.o.d -O2 -c -c /repo/csrc/ops/add.cpp "
                    "-o /tmp/b/csrc/ops/add.o -std=c++20")
    assert build_progress.describe(compile_line, root) == "[3/40] csrc/ops/add.cpp"
    link = "x86_64-linux-gnu-g++ -shared /tmp/b/a.o /tmp/b/b.o -L/t/lib -lc10 -o build/lib/torch_infini/_C.so"
    assert build_progress.describe(link, root) == "linking _C.so"
    assert build_progress.describe("/repo/csrc/ops/add.cpp:3:1: warning: unused", root) is None
    assert build_progress.describe("running build_ext", root) is None


def test_progress_switch():
    assert build_progress.progress_enabled({}) is True
    assert build_progress.progress_enabled({"TORCH_INFINI_BUILD_PROGRESS": "0"}) is False
    with pytest.raises(ValueError, match="TORCH_INFINI_BUILD_PROGRESS='no' is invalid"):
        build_progress.progress_enabled({"TORCH_INFINI_BUILD_PROGRESS": "no"})


def test_progress_reaches_the_terminal_and_the_log_file_and_the_output_is_unchanged(tmp_path):
    """A child process writes ninja-like lines to descriptor 1, as ninja does
    under pip: the build's output (the original stdout) gets every line as it
    was; the terminal (a file here) and the progress log one short line per
    step."""
    terminal_file = tmp_path / "tty"
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys
        sys.path.insert(0, {str(REPO / 'tools')!r})
        import build_progress
        terminal = build_progress.open_terminal({str(terminal_file)!r})
        log = build_progress.open_log({str(tmp_path)!r})
        lines = ["[1/2] c++ -c /repo/csrc/a.cpp -o a.o", "csrc/a.cpp:1: warning: something",
                 "[2/2] c++ -c /repo/csrc/b.cpp -o b.o"]
        build_progress.say("summary", [terminal, log])
        with build_progress.build_progress([terminal, log], root="/repo"):
            print("from python")
            subprocess.run(["printf", "%s\\n", *lines], check=True)
        log.close()
        terminal.close()
        print("after")
        """
    )
    terminal_file.write_text("")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["summary", "from python", "[1/2] c++ -c /repo/csrc/a.cpp -o a.o",
                                        "csrc/a.cpp:1: warning: something", "[2/2] c++ -c /repo/csrc/b.cpp -o b.o",
                                        "after"]
    # Below pip's line first, then each line clears the spinner's leftovers.
    shown = terminal_file.read_bytes().decode()  # bytes: read_text() would turn \r into \n
    first, second, third = shown.split("\r\033[K")
    assert first == "\nsummary\n"
    assert second.startswith("torch_infini build: 0:0") and second.endswith(" [1/2] csrc/a.cpp\n")
    assert third.startswith("torch_infini build: 0:0") and third.endswith(" [2/2] csrc/b.cpp\n")
    # The log: plain lines, nothing a terminal would interpret.
    logged = (tmp_path / build_progress.LOG_NAME).read_text().splitlines()
    assert logged[0] == "summary"
    assert [line.split(" ", 3)[3] for line in logged[1:]] == ["[1/2] csrc/a.cpp", "[2/2] csrc/b.cpp"]
    assert all(line.startswith("torch_infini build: 0:0") for line in logged[1:])


def test_without_sinks_nothing_changes(capfd):
    with build_progress.build_progress([]):
        print("plain")
    assert capfd.readouterr().out == "plain\n"
    assert build_progress.open_terminal("/nonexistent/tty") is None


def test_progress_log_is_skipped_where_the_tree_is_read_only(tmp_path):
    (tmp_path / "build").write_text("a file where the folder would be")
    assert build_progress.open_log(tmp_path) is None


def test_editable_builds_keep_objects_where_the_in_place_build_looks():
    """setup.py points the editable install's build_temp at the folder a plain
    `setup.py build_ext --inplace` uses: setuptools' own default, read from a
    build_ext command nobody configured."""
    from setuptools import Distribution

    plain = Distribution({"name": "probe"}).get_command_obj("build_ext")
    plain.ensure_finalized()
    assert build_config.stable_build_temp(Distribution({"name": "probe"})) == plain.build_temp
    assert plain.build_temp.startswith("build")
