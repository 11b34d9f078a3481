#!/usr/bin/env python
"""The walk of one call through our C++: which of our functions it enters, in
which files, in order (issue 45's measure of how far a newcomer has to read).

    python tools/walk_call.py [--case div|div_at_once|mul_table|refused] [--json PATH] [--list]

Needs a debug build (``TORCH_INFINI_DEBUG=1``: ``-O0 -g``, so that no
function of ours is inlined away) of the checkout it runs from. It runs
the case under gdb: the call is made a few times first (so the measured one
is a steady-state call: its plan and layouts are cached), then once more
between two sentinel system calls, with a breakpoint on every function in
namespace ``torch_infini`` whose source is under ``csrc/``. Each hit is
one entry into one of our functions.

The figures:

* **stops**: entries into our functions, consecutive entries of the same
  function counted once (a loop over a call's tensors calling one lambda
  is one stop);
* **files**: the source files those functions are in (headers included:
  an inline helper is read where it is written);
* **returns**: stops whose file was visited before, and left (the reader
  goes back to a file already read);
* **implicit**: of the stops, the special members the compiler wrote (a
  struct's copy constructor, destructor or assignment, defined by no line
  of ours): a ``-O0`` build stops in them, a reader has nothing to read
  there. The walk is printed with and without them.

Each program keeps each result alive, so that freeing it (the
allocator's work when the tensor dies, not the call's) stays out of the
walk.

The program makes the call twice, a sentinel before, between and after;
the walk is the calling thread's, in the second call (see :func:`walk`). gdb's ``rbreak``
misses a few functions (``key_of`` in the layout cache, for one), the same
ones in every build: compare walks taken with this tool, not with a walk
read off the source.

The cases:

* ``div``: ``torch.div`` of two 1Ki float32 tensors, a generic-kernel call
  (div has no kernel of its own; until 2026-12-07 this case was ``mul``,
  which is now an entry of the element-wise table);
* ``div_at_once``: the same call right after a synchronize, as a loop
  of small synchronous ops makes it: run at once on the calling thread
  (``HostStream::run_now``), where ``div`` is queued;
* ``mul_table``: ``torch.mul`` as ``div``, served by the element-wise table
  (``ops/arithmetic.cpp``) without the generic kernel;
* ``refused``: ``torch.erfinv`` of a float32 tensor on the host runtime
  under ``TORCH_INFINI_ENFORCE_BACKEND=nvidia`` (InfiniOps has no native
  kernel for it on NVIDIA, so the call is refused as the stack there would
  refuse it: through the one exit, the CPU fallback being off), caught.

All run on the host runtime (``TORCH_INFINI_PROVIDER=host``): a debug
build without the stack serves them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def _two_calls(call: str, at_once: bool) -> str:
    """A program making ``call`` on two 1Ki float32 tensors ``a`` and ``b``
    five times, then twice between sentinels; with ``at_once``, each call
    is followed by a synchronize, as a loop of small synchronous ops makes
    it (so it runs at once on the calling thread, not queued)."""
    sync = "torch.infini.synchronize()\n"
    return f"""
import os, torch, torch_infini
a = torch.ones(1024, device="infini"); b = torch.ones(1024, device="infini")
for _ in range(5):
    {call}
    {sync if at_once else ""}
{"" if at_once else sync}os.getppid()
first = {call}
{sync if at_once else ""}os.getppid()
second = {call}
os.getppid()
{sync}"""


PROGRAMS = {
    "div": _two_calls("torch.div(a, b)", at_once=False),
    "div_at_once": _two_calls("torch.div(a, b)", at_once=True),
    "mul_table": _two_calls("torch.mul(a, b)", at_once=False),
    "refused": """
import os, torch, torch_infini
a = torch.ones(4, device="infini")
def call():
    try:
        torch.erfinv(a)
    except (NotImplementedError, RuntimeError) as error:
        return str(error)
for _ in range(3):
    call()
torch.infini.synchronize()
os.getppid()
call()
os.getppid()
message = call()
os.getppid()
print("REFUSAL:", message.splitlines()[0][:200] if message else "(served)")
""",
}

#: The provider of each case.
ENVIRONMENTS = {"div": {"TORCH_INFINI_PROVIDER": "host"},
                "div_at_once": {"TORCH_INFINI_PROVIDER": "host"},
                "mul_table": {"TORCH_INFINI_PROVIDER": "host"},
                "refused": {"TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_ENFORCE_BACKEND": "nvidia"}}

GDB_SCRIPT = r"""
import gdb, json
gdb.execute("set pagination off")
gdb.execute("set breakpoint pending on")
gdb.execute("set print thread-events off")
gdb.execute("handle SIGUSR1 SIGUSR2 SIGPIPE nostop noprint pass")
sentinel = gdb.Breakpoint("getppid")
gdb.execute("run")
sentinel.enabled = False
gdb.execute("rbreak ^torch_infini::", to_string=True)
# rbreak also matches the PLT stubs of our functions (``...@plt``): a
# breakpoint there is not an entry into our code, and gdb 13 stepping off
# one corrupted the call (SIGSEGV in queue_call, never seen without gdb).
for b in gdb.breakpoints():
    if b is not sentinel and "@plt" in (b.location or ""):
        b.delete()
sentinel.enabled = True
seen = sentinel.hit_count
call = 0
hits = []
while True:
    gdb.execute("continue", to_string=True)
    if sentinel.hit_count > seen:
        seen = sentinel.hit_count
        call += 1
        if call == 2:
            break
        continue
    frame = gdb.selected_frame()
    sal = frame.find_sal()
    path = sal.symtab.filename if sal.symtab else "?"
    hits.append([frame.name() or "?", path, sal.line, gdb.selected_thread().num, call])
with open(OUT, "w") as f:
    json.dump(hits, f)
gdb.execute("delete")
gdb.execute("continue", to_string=True)
"""


#: gdb's number of the thread that makes the call (the process's first).
CALLER_THREAD = 1


def walk(hits: list[list]) -> dict:
    """Stops, files and returns of a list of [function, file, line, thread,
    call]: the calling thread's (a stream worker's are the provider's), in
    the second of the two calls (the first after the breakpoints are set
    can miss a cache the warm-up filled: under gdb it was not a
    steady-state call)."""
    hits = [h for h in hits if h[3] == CALLER_THREAD and h[4] == 1 and "/csrc/" in h[1]]
    stops = []
    for name, path, line, thread, _call in hits:
        rel = path[path.index("/csrc/") + 1:]
        if stops and stops[-1]["function"] == name:
            continue
        stops.append({"function": name, "file": rel, "thread": thread,
                      "implicit": is_implicit_member(name, ROOT / rel, line)})
    result = count(stops)
    written = count([stop for stop in stops if not stop["implicit"]])
    result["implicit"] = result["stops"] - written["stops"]
    result["without_implicit"] = {key: written[key] for key in ("stops", "files", "returns")}
    return result


def is_implicit_member(function: str, source: Path, line: int) -> bool:
    """Whether ``function`` is a constructor, destructor or assignment the
    compiler wrote: gdb places those on the line that opens their struct."""
    name = function.split("(")[0]
    parts = name.split("::")
    special = len(parts) >= 2 and (parts[-1] in (parts[-2], "~" + parts[-2]) or
                                   parts[-1].startswith("operator="))
    if not special:
        return False
    try:
        text = source.read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return False
    return text.startswith(("struct ", "class "))


def count(stops: list[dict]) -> dict:
    """Stops, files and returns of a walk (see the module's docstring)."""
    seen: set[str] = set()
    returns = 0
    previous = None
    per_file: dict[str, int] = {}
    for stop in stops:
        f = stop["file"]
        if f != previous and f in seen:
            returns += 1
        seen.add(f)
        previous = f
        per_file[f] = per_file.get(f, 0) + 1
    return {"stops": len(stops), "files": len(seen), "returns": returns,
            "per_file": dict(sorted(per_file.items(), key=lambda kv: -kv[1])),
            "walk": stops}


def run_case(case: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "program.py"
        program.write_text(PROGRAMS[case])
        out = Path(tmp) / "hits.json"
        script = Path(tmp) / "walk.py"
        script.write_text(f"OUT = {str(out)!r}\n" + GDB_SCRIPT)
        env = dict(os.environ, **ENVIRONMENTS[case], PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            ["gdb", "-q", "-batch", "-x", str(script), "--args", sys.executable, str(program)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
        if not out.exists():
            raise SystemExit(f"walk_call: gdb left no trace\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        hits = json.loads(out.read_text())
        result = walk(hits)
        result["hits"] = hits
        result["case"] = case
        result["output"] = [line for line in proc.stdout.splitlines() if line.startswith("REFUSAL:")]
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    parser.add_argument("--json", help="write the walks to this file")
    parser.add_argument("--list", action="store_true", help="print every stop")
    args = parser.parse_args()
    results = []
    for case in args.case:
        result = run_case(case)
        results.append(result)
        bare = result["without_implicit"]
        print(f"{case}: {result['stops']} stops in {result['files']} files, "
              f"{result['returns']} returns to a file already left; without the "
              f"{result['implicit']} implicit special members: {bare['stops']} stops in "
              f"{bare['files']} files, {bare['returns']} returns {' '.join(result['output'])}")
        for f, n in result["per_file"].items():
            print(f"    {n:3d}  {f}")
        if args.list:
            for stop in result["walk"]:
                mark = " (implicit)" if stop["implicit"] else ""
                print(f"      {stop['file']:40s} {stop['function']}{mark}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
