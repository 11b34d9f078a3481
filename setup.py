"""Build torch_infini: the C++ extension torch_infini._C and its build metadata.

Without INFINI_RT_PREFIX / INFINI_OPS_PREFIX the extension has the built-in
host runtime only. With them it also compiles the Infini stack provider.

Release flags (-O2, no debug information) unless TORCH_INFINI_DEBUG=1
(-O0 -g, assertions on). Progress goes to the terminal even under pip, which
hides build output without -v (tools/build_progress.py;
TORCH_INFINI_BUILD_PROGRESS=0 turns it off).
"""

import glob
import json
import os
import sys
import time
from pathlib import Path

# Before torch is imported: `import torch` would otherwise autoload the
# installed torch_infini (the torch.backends entry point) into the build
# process, which can be stale or broken, and whose _C.so this build replaces.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch  # noqa: E402
from setuptools import find_packages, setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
from build_config import (  # noqa: E402
    BuildConfigError,
    build_metadata,
    check_ops_match_rt,
    check_ops_match_torch,
    compile_flags,
    resolve_infini_ccl,
    resolve_infini_stack,
)
from infiniops_binding import (  # noqa: E402
    aten_schemas_from_torch,
    bind,
    implementations_from_symbols,
    parse_signatures,
    render_cpp,
    render_index,
)
from build_progress import open_terminal, progress_enabled, say, terminal_progress  # noqa: E402

METADATA_NAME = "_build_info.json"


#: Compiled only with the Infini stack (INFINI_RT_PREFIX / INFINI_OPS_PREFIX).
INFINI_STACK_SOURCES = "csrc/runtime/infini/"


#: Where the build writes the InfiniOps binding table it generates (never committed).
GENERATED = Path("build") / "generated" / "infini_bindings"
#: Parts of the table, compiled in parallel.
BINDING_CHUNKS = 4


def generate_bindings(stack) -> tuple[list[str], int]:
    """Writes the binding table of what the installed InfiniOps offers
    (tools/infiniops_binding.py), returning its sources and how many
    overloads it binds. Files are rewritten only when they change."""
    header = next(Path(d) / "infini" / "operator_call_instantiations.h" for d in stack.ops_include_dirs
                  if (Path(d) / "infini" / "operator_call_instantiations.h").is_file())
    library = next(Path(d) / "libinfiniops.so" for d in stack.ops_library_dirs
                   if (Path(d) / "libinfiniops.so").is_file())
    report = bind(parse_signatures(header.read_text(errors="replace")), aten_schemas_from_torch())
    implementations = implementations_from_symbols(library.read_bytes())
    out = ROOT / GENERATED
    out.mkdir(parents=True, exist_ok=True)
    texts = {f"infini_bindings_{i}.cpp": render_cpp(report, implementations, i, BINDING_CHUNKS)
             for i in range(BINDING_CHUNKS)}
    texts["infini_bindings.cpp"] = render_index(BINDING_CHUNKS)
    for name, text in texts.items():
        path = out / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return [str(GENERATED / name) for name in sorted(texts)], len(report.bindings)


def sources(stack, generated=()):
    """Every .cpp file under csrc/ (a new file or folder builds without an
    edit here), less the Infini stack provider's without the stack, plus the
    generated binding table with it."""
    files = sorted(glob.glob("csrc/**/*.cpp", root_dir=ROOT, recursive=True))
    if stack is None:
        files = [f for f in files if not f.startswith(INFINI_STACK_SOURCES)]
    return files + list(generated)


try:
    STACK = resolve_infini_stack(os.environ)
    CCL = resolve_infini_ccl(os.environ)  # INFINI_CCL_PREFIX: the c10d backend's InfiniCCL path
    FLAGS = compile_flags(os.environ)
    PROGRESS = progress_enabled(os.environ)
except (BuildConfigError, ValueError) as error:
    sys.exit(f"torch_infini build error: {error}")

if STACK is None:
    SUMMARY = ("torch_infini: building with the built-in host runtime only "
               "(set INFINI_RT_PREFIX and INFINI_OPS_PREFIX to add the Infini stack)")
else:
    SUMMARY = ("torch_infini: building with the Infini stack (InfiniRT backends: "
               f"{', '.join(STACK.rt_backends) or 'unknown'}; InfiniOps operators: "
               f"{', '.join(STACK.ops_operators) or 'none'})")

GENERATED_SOURCES: list[str] = []
if STACK is not None:
    GENERATED_SOURCES, BOUND = generate_bindings(STACK)
    SUMMARY += f"; {BOUND} ATen overloads bound to InfiniOps operators"

if CCL is not None:
    SUMMARY += "; InfiniCCL: " + ", ".join(CCL.library_dirs)
METADATA = build_metadata(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI, STACK, CCL)

# TORCH_INFINI_SANITIZE=address,undefined (or thread) instruments the extension
# with those sanitizers; see docs/sanitizers.md for how to run it.
SANITIZE = os.environ.get("TORCH_INFINI_SANITIZE", "").strip()
if SANITIZE and not set(SANITIZE.split(",")) <= {"address", "undefined", "thread", "leak"}:
    sys.exit(f"torch_infini build error: TORCH_INFINI_SANITIZE={SANITIZE!r}: "
             "expected a comma-separated list of address, undefined, leak, thread")
SANITIZE_FLAGS = [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer", "-g"] if SANITIZE else []


class BuildWithMetadata(BuildExtension):
    """Writes the build metadata next to the extension, on every build path
    (wheel, editable and in-place), so the import guard always finds it."""

    def run(self):
        # Under pip, stdout is a pipe to pip's log; a terminal of our own shows progress.
        terminal = open_terminal() if PROGRESS and not sys.stdout.isatty() else None
        say(SUMMARY + (" [debug build: TORCH_INFINI_DEBUG=1]" if FLAGS.debug else ""), terminal)
        if STACK is not None:
            # A link test: InfiniOps must come from a build against this InfiniRT.
            try:
                torch_lib = Path(torch.__file__).parent / "lib"
                check_ops_match_rt(STACK, os.environ.get("CXX", "c++"), (str(torch_lib),))
                # An ATen-backed InfiniOps (WITH_TORCH=ON) must come from this PyTorch.
                if check_ops_match_torch(STACK, torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI, torch_lib):
                    say("torch_infini: InfiniOps is ATen-backed (WITH_TORCH=ON) and matches this PyTorch", terminal)
            except BuildConfigError as error:
                sys.exit(f"torch_infini build error: {error}")
        started = time.monotonic()
        try:
            with terminal_progress(terminal, root=str(ROOT)):
                super().run()
            say(f"torch_infini: extension built in {time.monotonic() - started:.0f} s", terminal)
        finally:
            if terminal is not None:
                terminal.close()
        text = json.dumps(METADATA, indent=2) + "\n"
        targets = {Path(self.get_ext_fullpath("torch_infini._C")).parent,
                   ROOT / "torch_infini"} if self.inplace else {
            Path(self.get_ext_fullpath("torch_infini._C")).parent}
        for target in targets:
            target.mkdir(parents=True, exist_ok=True)
            (target / METADATA_NAME).write_text(text)

    def get_outputs(self):
        outputs = super().get_outputs()
        return outputs + [str(Path(self.get_ext_fullpath("torch_infini._C")).parent / METADATA_NAME)]


ext = CppExtension(
    name="torch_infini._C",
    sources=sources(STACK, GENERATED_SOURCES),
    include_dirs=[str(ROOT / "csrc")] + (STACK.include_dirs if STACK else []) + (CCL.include_dirs if CCL else []),
    library_dirs=(STACK.library_dirs if STACK else []) + (CCL.library_dirs if CCL else []),
    # InfiniOps depends on InfiniRT: link it first. Neither is bundled and no
    # rpath is stored: the loader finds them through LD_LIBRARY_PATH or the
    # system configuration (see the README).
    libraries=(["infiniops", "infinirt"] if STACK else []) + (CCL.libraries if CCL else []),
    define_macros=(STACK.define_macros if STACK else []) + (CCL.define_macros if CCL else []),
    extra_compile_args={"cxx": FLAGS.cxx + SANITIZE_FLAGS},
    extra_link_args=FLAGS.link + SANITIZE_FLAGS,
)

setup(
    name="torch_infini",
    packages=find_packages(include=["torch_infini", "torch_infini.*"]),
    # The torch.backends entry point's target (see pyproject.toml): outside
    # the package, so that a broken torch_infini cannot break `import torch`.
    py_modules=["torch_infini_autoload"],
    ext_modules=[ext],
    cmdclass={"build_ext": BuildWithMetadata.with_options(no_python_abi_suffix=False)},
    package_data={"torch_infini": [METADATA_NAME]},
)
