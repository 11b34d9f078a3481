"""Build torch_infini: the C++ extension torch_infini._C and its build metadata.

Without INFINI_RT_PREFIX / INFINI_OPS_PREFIX the extension has the built-in
host runtime only. With them it also compiles the Infini stack provider.
"""

import glob
import json
import os
import sys
from pathlib import Path

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
from build_config import (  # noqa: E402
    BuildConfigError,
    build_metadata,
    resolve_infini_stack,
)

METADATA_NAME = "_build_info.json"


def sources(stack):
    files = []
    for pattern in ("csrc/amp/*.cpp", "csrc/core/*.cpp", "csrc/distributed/*.cpp", "csrc/ops/*.cpp",
                    "csrc/python/*.cpp", "csrc/runtime/*.cpp", "csrc/runtime/host/*.cpp"):
        files += sorted(glob.glob(pattern, root_dir=ROOT))
    if stack is not None:
        files += sorted(glob.glob("csrc/runtime/infini/*.cpp", root_dir=ROOT))
    return files


try:
    STACK = resolve_infini_stack(os.environ)
except BuildConfigError as error:
    sys.exit(f"torch_infini build error: {error}")

if STACK is None:
    print("torch_infini: building with the built-in host runtime only "
          "(set INFINI_RT_PREFIX and INFINI_OPS_PREFIX to add the Infini stack)")
else:
    print("torch_infini: building with the Infini stack (InfiniRT backends: "
          f"{', '.join(STACK.rt_backends) or 'unknown'}; InfiniOps operators: "
          f"{', '.join(STACK.ops_operators) or 'none'})")

METADATA = build_metadata(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI, STACK)

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
        super().run()
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
    sources=sources(STACK),
    include_dirs=[str(ROOT / "csrc")] + (STACK.include_dirs if STACK else []),
    library_dirs=STACK.library_dirs if STACK else [],
    # InfiniOps depends on InfiniRT: link it first. Neither is bundled and no
    # rpath is stored: the loader finds them through LD_LIBRARY_PATH or the
    # system configuration (see the README).
    libraries=["infiniops", "infinirt"] if STACK else [],
    define_macros=STACK.define_macros if STACK else [],
    extra_compile_args={"cxx": ["-O2", "-Wall", "-Wno-unused-parameter"] + SANITIZE_FLAGS},
    extra_link_args=SANITIZE_FLAGS,
)

setup(
    name="torch_infini",
    packages=find_packages(include=["torch_infini", "torch_infini.*"]),
    ext_modules=[ext],
    cmdclass={"build_ext": BuildWithMetadata.with_options(no_python_abi_suffix=False)},
    package_data={"torch_infini": [METADATA_NAME]},
)
