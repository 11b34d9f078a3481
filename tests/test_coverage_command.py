"""``python -m torch_infini coverage``: small programs with known call
sequences, their counts checked against the calls they make, and each
overload's verdict against the support matrix of the pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torch_infini import backend_support as support
from torch_infini import coverage
from hang_guard import HANG_GUARD_S
from infini_testing import on_host

ROOT = Path(__file__).resolve().parents[1]

FORWARD = """
import sys
import torch
import torch_infini

assert sys.argv[1:] == ["--reps", "3"], sys.argv
x = torch.randn(8, 8).to("infini")
for _ in range(3):
    y = torch.mm(x, x)
for _ in range(2):
    z = torch.erf(y)
torch.ops.aten.native_layer_norm.default(z, [8], None, None, 1e-5)
"""

TRAINING = """
import sys
import torch
import torch_infini

steps = int(sys.argv[1])
torch.manual_seed(0)
x = torch.randn(4, 8).to("infini")
w1 = (torch.randn(16, 8) * 0.1).to("infini").requires_grad_()
w2 = (torch.randn(2, 16) * 0.1).to("infini").requires_grad_()
opt = torch.optim.SGD([w1, w2], lr=0.1)
for _ in range(steps):
    opt.zero_grad()
    h = torch.relu(x @ w1.t())     # mm
    loss = (h @ w2.t()).sum()      # mm
    loss.backward()                # mm for h's and w2's gradients, mm for w1's (x needs none)
    opt.step()
"""

COMPILED = """
import sys
import torch
import torch_infini

torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("infini")
f = torch.compile(mlp)
x = torch.randn(4, 8).to("infini")
with torch.no_grad():
    for _ in range(int(sys.argv[1])):
        f(x)
"""


# Written for CUDA, unmodified: .cuda(), device="cuda", torch.cuda.*. Prints
# its output and a gradient (marked lines) for the CPU oracle, and a line of
# its own for the tests of where its output goes.
CUDA_WRITTEN = """
import json
import torch

assert torch.cuda.is_available()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda()
x = torch.linspace(-2, 2, 32, device="cuda").reshape(4, 8)
y = model(x)
y.square().sum().backward()
torch.cuda.synchronize()
print("the program's own line")
print("OUTPUT", json.dumps(y.detach().cpu().tolist()))
print("GRAD", json.dumps(model[0].weight.grad.cpu().tolist()))
"""

# Known calls with bool and complex tensors, which InfiniRT has no DataType
# for: the coverage record counts them apart.
DTYPES = """
import torch
import torch_infini

x = torch.linspace(-2, 2, 8).to("infini")
m = x > 0                  # a bool result
y = torch.where(m, x, -x)  # a bool operand (the stack passes it as its bytes)
z = torch.complex(x, y)    # a complex result
w = torch.cat([z, z])      # complex operands (the stack passes them as pairs)
n = -w                     # complex operands of an operator outside that table
"""

CPU_ONLY = """
import torch

x = torch.randn(4, 8)
print("on the cpu:", tuple((x @ x.t()).shape))
"""


def _cpu_oracle() -> tuple[torch.Tensor, torch.Tensor]:
    """CUDA_WRITTEN's output and first weight's gradient, on the CPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.linspace(-2, 2, 32).reshape(4, 8)
    y = model(x)
    y.square().sum().backward()
    return y.detach(), model[0].weight.grad


def _marked(stdout: str, mark: str) -> torch.Tensor:
    line = next(line for line in stdout.splitlines() if line.startswith(mark + " "))
    return torch.tensor(json.loads(line[len(mark) + 1:]))


# coverage.run records the calls of this process's provider: the programs'
# calls below are the host runtime's (on the Infini stack some would be
# refused, others run as their decompositions). The command, which runs the
# program on the host runtime on any build, is tested on every provider.
in_process_on_host = pytest.mark.skipif(
    not on_host(), reason="coverage.run in this process counts the Infini stack's calls, not the host runtime's; "
                          "the command tests cover a build with the stack")


def _script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _calls(rep: dict, prefix: str) -> int:
    """Calls of the overloads of one operator that ran as themselves (a
    composite call is the calls of its parts)."""
    return sum(o["calls"] for o in rep["overloads"]
               if o["op"].split(".")[0] == prefix and o["status"] != "composite")


def _check_totals(rep: dict) -> None:
    counted = [o for o in rep["overloads"] if o["status"] != "composite"]
    assert rep["total_calls"] == sum(o["calls"] for o in counted)
    assert abs(sum(o["call_share"] for o in counted) - 1.0) < 1e-3
    for status, group in rep["groups"].items():
        members = [o for o in rep["overloads"] if o["status"] == status]
        assert group["overloads"] == len(members) and group["calls"] == sum(o["calls"] for o in members)
        for key in ("bool_calls", "complex_calls"):
            assert group[key] == sum(o[key] for o in members)
            assert all(0 <= o[key] <= o["calls"] for o in members)
    for o in rep["overloads"]:
        kind = "composite" if o["ran_on_host_as"] == ["composite"] else "native"
        verdict = support.classify(o["op"], rep["backend"], rep["infiniops"]["short"], kind=kind)
        assert o["status"] == verdict.status, o


def _status(backend: str, operator: str, pin: str = support.CURRENT_PIN) -> str:
    return support.load_matrix(pin)["operators"][operator]["backends"][backend]


@pytest.fixture(scope="module")
def forward_run(tmp_path_factory):
    return coverage.run([_script(tmp_path_factory.mktemp("fwd"), FORWARD), "--reps", "3"])


@in_process_on_host
@pytest.mark.parametrize("backend", ["nvidia", "cambricon", "hygon"])
def test_forward_counts_and_verdicts(forward_run, backend):
    assert forward_run["exit"] == 0 and forward_run["error"] is None
    rep = coverage.report(forward_run, backend)
    _check_totals(rep)
    assert _calls(rep, "aten::mm") == 3
    assert _calls(rep, "aten::erf") == 2
    assert _calls(rep, "aten::native_layer_norm") == 1
    by_op = {o["op"]: o for o in rep["overloads"]}
    mm = by_op["aten::mm"]
    # Gemm: native on NVIDIA and Cambricon; Hygon registers no native kernel.
    assert mm["status"] == ("native" if _status(backend, "gemm") == "native" else "aten")
    assert "gemm" in mm["infiniops"]
    assert {o["status"] for o in rep["overloads"] if o["op"].startswith("aten::erf")} == {_status(backend, "erf")}
    layer_norm = by_op["aten::native_layer_norm"]
    assert layer_norm["status"] == "unserved" and layer_norm["fails"] == "fallback"
    assert rep["groups"]["unserved"]["fallback"] >= 1


@in_process_on_host
def test_calls_with_bool_and_complex_tensors_are_counted_apart(tmp_path):
    result = coverage.run([_script(tmp_path, DTYPES)], time=False)
    assert result["exit"] == 0 and result["error"] is None, result["error"]
    rep = coverage.report(result, "nvidia")
    _check_totals(rep)
    by_op = {o["op"]: o for o in rep["overloads"]}
    assert (by_op["aten::gt.Scalar"]["calls"], by_op["aten::gt.Scalar"]["bool_calls"]) == (1, 1)
    where = by_op["aten::where.self"]
    assert (where["calls"], where["bool_calls"], where["complex_calls"]) == (1, 1, 0)
    assert where["reinterpreted"] == ["bool as bytes"]
    cat = by_op["aten::cat"]
    assert (cat["calls"], cat["bool_calls"], cat["complex_calls"]) == (1, 0, 1)
    assert cat["reinterpreted"] == ["complex as pairs"]
    assert by_op["aten::complex"]["complex_calls"] == 1
    neg = by_op["aten::neg"]  # -x on floats, -w on complex
    assert (neg["calls"], neg["complex_calls"], neg["reinterpreted"]) == (2, 1, [])
    counts = rep["dtype_calls"]
    assert counts["bool"]["calls"] == sum(o["bool_calls"] for o in rep["overloads"] if o["status"] != "composite")
    assert counts["complex"]["calls"] >= 3 and counts["complex"]["reinterpreted"] >= 1
    text = coverage.format_report(rep)
    assert "calls with complex tensors (InfiniRT has no complex DataType)" in text
    assert "1 complex, complex as pairs" in text and "1 bool, bool as bytes" in text
    assert rep["aten_backed_needs"] == {"torch_device": "cuda",
                                        "pytorch": "a CUDA build of PyTorch (torch.version.cuda)"}


@in_process_on_host
def test_time_shares_come_from_the_device_timeline(forward_run):
    rep = coverage.report(forward_run, "nvidia")
    assert rep["time"] == "device" and rep["total_time_ms"] > 0
    mm = next(o for o in rep["overloads"] if o["op"] == "aten::mm")
    assert mm["time_ms"] > 0 and 0 < mm["time_share"] <= 1
    assert sum(g["time_share"] for s, g in rep["groups"].items() if s != "composite") <= 1.0 + 1e-3


@in_process_on_host
def test_training_loop_counts(tmp_path):
    run = coverage.run([_script(tmp_path, TRAINING), "2"], time=False)
    assert run["exit"] == 0, run["error"]
    rep = coverage.report(run, "ascend")
    _check_totals(rep)
    assert _calls(rep, "aten::mm") == 5 * 2
    assert _calls(rep, "aten::relu") == 2
    assert rep["time"] == "host"


@in_process_on_host
def test_a_failing_program_is_reported_with_what_it_called(tmp_path):
    run = coverage.run([_script(tmp_path, FORWARD + "\nraise SystemExit(3)\n"), "--reps", "3"], time=False)
    assert run["exit"] == 3
    rep = coverage.report(run, "cpu")
    assert _calls(rep, "aten::mm") == 3
    run = coverage.run([_script(tmp_path, "import torch, torch_infini\ntorch.ones(2, device='infini') @ 1\n")],
                       time=False)
    assert run["exit"] == 1 and "TypeError" in run["error"]


@in_process_on_host
def test_compiled_mlp_reports_the_eager_operators_its_graph_calls(tmp_path):
    """Inductor generates C++ kernels for the host runtime: what the graph
    still calls as ATen operators are its extern kernels (the matmuls), two
    per call (compiling runs some too, the same in both runs); with
    backend="aot_eager" every operator of the graph runs eagerly, as it
    would on the Infini stack."""
    script = _script(tmp_path, COMPILED)
    reps = {}
    for calls in (1, 4):
        torch._dynamo.reset()
        run = coverage.run([script, str(calls)])
        assert run["exit"] == 0, run["error"]
        reps[calls] = coverage.report(run, "nvidia")
        _check_totals(reps[calls])
    matmuls = {n: _calls(r, "aten::addmm") + _calls(r, "aten::mm") for n, r in reps.items()}
    assert matmuls[4] - matmuls[1] == 2 * 3
    assert _calls(reps[4], "aten::relu") == 0  # fused into a generated kernel
    assert reps[4]["generated_kernels_ms"] > 0
    torch._dynamo.reset()
    run = coverage.run([script, "4"], time=False, compile_backend="aot_eager")
    assert run["exit"] == 0, run["error"]
    rep = coverage.report(run, "nvidia")
    assert _calls(rep, "aten::relu") >= 4
    assert _calls(rep, "aten::addmm") == 2 * _calls(rep, "aten::relu")
    torch._dynamo.reset()


def _command(*args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TORCH_INFINI_TRANSFER_CUDA", None)  # the command's own switch is under test
    return subprocess.run([sys.executable, "-m", "torch_infini", "coverage", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def test_the_command_json_and_summary(tmp_path):
    """--json alone: stdout is the JSON only; the program's prints go to stderr."""
    script = _script(tmp_path, FORWARD + "\nprint('the program prints this')\n")
    done = _command("--backend", "cambricon", "--infiniops", support.BASELINE_PIN, "--json", "--no-time",
                    "--", script, "--reps", "3")
    assert done.returncode == 0, done.stderr
    rep = json.loads(done.stdout)
    assert "the program prints this" in done.stderr
    assert rep["backend"] == "cambricon" and rep["infiniops"]["short"] == support.BASELINE_PIN
    assert rep["provider"] == "host"
    assert rep["cuda_switch"] == "applied" and rep["ran_on_infini"] is True
    assert _calls(rep, "aten::mm") == 3
    done = _command("--backend", "cambricon,cpu", "--no-time", "--", script, "--reps", "3")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for backend in ("cambricon", "cpu"):
        title = f"torch-infini coverage: {script} on InfiniOps {support.CURRENT_PIN}, backend {backend} "
        assert text.count(title) == 1
        summary = text[text.index(title):].splitlines()[:8]
        assert any(line.lstrip().startswith(f"not served on {backend}") for line in summary)
    assert text.count("aten::native_layer_norm") == 2


def test_a_program_written_for_cuda_runs_unmodified(tmp_path):
    """The command applies the CUDA-to-infini switch itself: the program's
    results equal CPU PyTorch's, its calls are counted, and the report says
    the switch was applied. Without the switch the same program fails."""
    script = _script(tmp_path, CUDA_WRITTEN)
    done = _command("--backend", "nvidia", "--no-time", "--", script)
    assert done.returncode == 0, done.stdout + done.stderr
    output, grad = _cpu_oracle()
    torch.testing.assert_close(_marked(done.stdout, "OUTPUT"), output)
    torch.testing.assert_close(_marked(done.stdout, "GRAD"), grad)
    report_text = done.stdout[done.stdout.index("torch-infini coverage: "):]
    assert coverage.CUDA_SWITCH["applied"] in report_text
    assert "the program ended with exit status" not in report_text
    assert "made no call on the infini device" not in report_text
    addmm = next(line.split() for line in report_text.splitlines() if line.strip().startswith("aten::addmm "))
    assert int(addmm[1]) == 2  # the two Linear layers' forward

    done = _command("--backend", "nvidia", "--no-time", "--no-cuda-switch", "--", script)
    assert done.returncode == 1
    assert coverage.CUDA_SWITCH["off"] in done.stdout
    assert "the program ended with exit status 1" in done.stdout


def test_a_cpu_only_program_is_reported_as_such(tmp_path):
    """A program that never touches infini gets a plain sentence, not a
    table of zeros."""
    script = _script(tmp_path, CPU_ONLY)
    done = _command("--backend", "ascend", "--no-time", "--", script)
    assert done.returncode == 0, done.stderr
    assert "on the cpu: (4, 4)" in done.stdout
    assert "the program made no call on the infini device: it ran on the CPU" in done.stdout
    assert "native on ascend" not in done.stdout
    run = coverage.run([script], time=False)
    rep = coverage.report(run, "ascend")
    assert run["exit"] == 0 and rep["ran_on_infini"] is False and rep["total_calls"] == 0
    run = coverage.run([_script(tmp_path, CPU_ONLY + "raise SystemExit(4)\n")], time=False)
    text = coverage.format_report(coverage.report(run, "ascend"))
    assert "the program ended with exit status 4" in text
    assert "the program made no call on the infini device before it ended" in text


def test_json_path_is_clean_json_and_the_program_prints_on_the_terminal(tmp_path):
    script = _script(tmp_path, CUDA_WRITTEN)
    path = tmp_path / "report.json"
    done = _command("--backend", "nvidia", "--no-time", "--json", str(path), "--", script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the program's own line" in done.stdout
    assert f"the report as JSON: {path}" in done.stdout
    assert done.stdout.count("torch-infini coverage: ") == 1  # the text report too
    checked = subprocess.run([sys.executable, "-m", "json.tool", str(path)], capture_output=True, text=True,
                             timeout=HANG_GUARD_S)
    assert checked.returncode == 0, checked.stderr
    rep = json.loads(checked.stdout)
    assert "the program's own line" not in path.read_text()
    assert rep["script"] == script and rep["backend"] == "nvidia" and rep["exit"] == 0
    assert rep["cuda_switch"] == "applied" and rep["ran_on_infini"] is True
    assert _calls(rep, "aten::addmm") == 2
    _check_totals(rep)


@pytest.mark.parametrize("args, message", [
    (["--backend", "nvidia", "--json", "program.py"], "the report would overwrite a Python file"),
    (["--backend", "nvidia", "--json", "/no/such/folder/report.json"], "no folder /no/such/folder"),
    (["--backend", "cuda"], "unknown InfiniOps backend 'cuda'"),
    (["--backend", "nvidia", "--infiniops", "abcdef1"], "no InfiniOps support matrix for pin 'abcdef1'"),
    (["--backend", "nvidia", "--"], "no program"),
])
def test_the_command_refuses_an_unknown_backend_or_pin(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        coverage.main([*args, "--", "x.py"] if args[-1] != "--" else args)
    assert stop.value.code == 2 and message in capsys.readouterr().err
