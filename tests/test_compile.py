"""torch.compile on infini: Inductor's C++ code generation on providers whose
device memory the host addresses (the host runtime here), in stream order;
compiled results against eager infini (and CPU). On the host runtime the
generated kernels are queued on the current stream, as CUDA's are: the
oracle for their stream, capture and error behaviour is torch.cuda's.

On the Infini stack with an accelerator backend there is no code generator:
the default backend raises naming aot_eager (tested where it applies)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import torch_infini
from infini_testing import DEV, drain_async_errors, hold

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
from conv_models import TinyResNet  # noqa: E402
from models import DecoderBlock  # noqa: E402

pytestmark = pytest.mark.skipif(not torch_infini._compile.host_addressable(),
                                reason="Inductor generates code only where the host addresses device memory")

TOL = dict(rtol=1e-4, atol=1e-5)
queued_kernels = pytest.mark.skipif(not torch_infini._compile.queues_host_kernels(),
                                    reason="generated kernels are queued only where the provider queues host work")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(params=["queued", "waits"])
def kernel_order(request, monkeypatch):
    """Both ways the wrapper keeps stream order: kernels queued on the stream
    (the host runtime), and kernels run on the calling thread after a wait
    (providers that cannot queue host functions; on the host runtime,
    kernels taking floats)."""
    if request.param == "queued" and not torch_infini._compile.queues_host_kernels():
        pytest.skip("this provider does not queue host functions")
    from torch._inductor.codegen.common import init_backend_registration

    init_backend_registration()  # sets _QUEUED_KERNELS for the provider
    monkeypatch.setattr(torch_infini._compile, "_QUEUED_KERNELS", request.param == "queued")
    return request.param


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))


def test_compiled_mlp_forward_and_backward_match_eager():
    eager = _mlp().to(DEV)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model)
    x = torch.randn(4, 16).to(DEV)
    want = eager(x)
    got = compiled(x)
    torch.testing.assert_close(got.cpu(), want.cpu(), **TOL)
    want.square().sum().backward()
    got.square().sum().backward()
    for p, q in zip(compiled_model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), **TOL)


def _decoder_or_cnn(name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if name == "decoder":  # masked softmax over a causal mask, rotary embedding, RMSNorm
        return DecoderBlock().to(DEV), torch.randn(2, 16, 64).to(DEV)
    return TinyResNet().to(DEV), torch.randn(2, 3, 16, 16).to(DEV)  # padded convolutions, batch norm


@pytest.mark.parametrize("name", ["decoder", "cnn"])
def test_inductor_compiles_the_decoder_block_and_the_cnn(name):
    """Inductor (the default backend), forward and backward; the CNN in
    training mode also updates its batch norm statistics as eager does."""
    model, x = _decoder_or_cnn(name)
    eager = copy.deepcopy(model)
    got = torch.compile(model)(x)
    want = eager(x)
    torch.testing.assert_close(got.cpu(), want.cpu(), **TOL)
    got.square().sum().backward()
    want.square().sum().backward()
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), msg=n, rtol=1e-4, atol=1e-4)
    for (n, a), b in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(a.cpu(), b.cpu(), msg=n, **TOL)


def test_compiled_kernels_wait_for_queued_work(kernel_order):
    """A generated C++ kernel (queued on the stream, or run on the calling
    thread) must see the work queued before it on the current stream (a
    delay holds the stream)."""
    from torch._inductor.utils import run_and_get_code

    fn = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)
    x = torch.randn(256).to(DEV)
    _, (code, *_) = run_and_get_code(fn, x)  # compiled
    assert ("launch_host_kernel(" in code) == (kernel_order == "queued")
    assert ("_synchronize_current_stream(-1)" in code) == (kernel_order == "waits")
    y = torch.zeros(256).to(DEV)
    hold(torch.infini.current_stream(), 50)
    y.copy_(x)  # queued behind the delay
    out = fn(y)
    torch.testing.assert_close(out.cpu(), torch.nn.functional.gelu(x.cpu()) * 2 + 1, **TOL)


def test_dynamic_shapes_compile_once():
    from torch._dynamo.utils import counters

    fn = torch.compile(lambda t: (t.sin() * t).sum(dim=-1), dynamic=True)
    counters.clear()
    for n in (5, 9, 17):
        x = torch.randn(3, n).to(DEV)
        torch.testing.assert_close(fn(x).cpu(), (x.cpu().sin() * x.cpu()).sum(dim=-1), **TOL)
    assert counters["stats"]["unique_graphs"] == 1


def test_graph_break_in_the_middle():
    def fn(t):
        a = t.cos() + 1
        print("graph break", end="\r")  # Dynamo splits here
        return (a * t).relu()

    x = torch.randn(8).to(DEV)
    torch.testing.assert_close(torch.compile(fn)(x).cpu(), fn(x).cpu(), **TOL)


def test_compiled_training_loop_of_five_steps_matches_eager():
    eager = _mlp().to(DEV)
    compiled_model = copy.deepcopy(eager)
    step_model = torch.compile(compiled_model)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = torch.optim.SGD(compiled_model.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(step)).to(DEV)
        for model, opt in ((eager, opt_e), (step_model, opt_c)):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    for p, q in zip(compiled_model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), **TOL)


def test_autocast_inside_compiled_region():
    model = _mlp().to(DEV)

    def fn(t):
        with torch.autocast("infini", dtype=torch.bfloat16):
            return model(t)

    x = torch.randn(4, 16).to(DEV)
    got = torch.compile(fn)(x)
    want = fn(x)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), rtol=2e-2, atol=2e-2)


def test_aot_eager_backend_works():
    model = _mlp().to(DEV)
    x = torch.randn(4, 16).to(DEV)
    torch.testing.assert_close(torch.compile(model, backend="aot_eager")(x).cpu(), model(x).cpu(), **TOL)


def _matmuls(a, b):
    h = torch.relu(a) * 2                  # generated, over an input written by queued work
    m = h @ b                              # extern mm
    return (m.sin() + 1) @ b.t(), m.sum()  # generated over the mm's output, then extern again


def _convolutions(a, b):
    h = torch.relu(a) * 2                                         # generated
    c = torch.nn.functional.conv2d(h[None], b, padding=1)         # extern, queued (milliseconds of work)
    return c.sin() + 1, c.sum()                                   # generated over the queued result


@pytest.mark.parametrize("fn, shapes", [(_matmuls, ((32, 32), (32, 32))),
                                        (_convolutions, ((16, 96, 96), (16, 16, 3, 3)))], ids=["mm", "conv"])
def test_mixed_extern_and_generated_kernels_keep_stream_order(fn, shapes, kernel_order):
    """A graph mixing extern kernels (mm, convolution: infini operators,
    queued) and generated C++ kernels, whose inputs are written by work
    queued just before the call (held back by a delay): every kernel must see
    the results of the work before it. New inputs each call, so a stale
    buffer shows."""
    compiled = torch.compile(fn)
    a, b = (torch.zeros(shape).to(DEV) for shape in shapes)
    compiled(a, b)  # compiled on zeros
    stream = torch.infini.current_stream()
    for i in range(2):
        gen = torch.Generator().manual_seed(i)
        a0, b0 = (torch.randn(shape, generator=gen) for shape in shapes)
        hold(stream, 30)
        a.copy_(a0.to(DEV))  # queued behind the delay
        b.copy_(b0.to(DEV))
        got = compiled(a, b)
        want = fn(a0, b0)
        torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("opt_name", ["SGD", "AdamW"])
def test_compiled_optimizer_step_matches_eager(opt_name):
    """torch.compile(opt.step): the whole update is one compiled graph on
    infini parameters; three steps match the eager optimizer's."""
    eager = _mlp().to(DEV)
    compiled_model = copy.deepcopy(eager)
    kwargs = dict(lr=0.05, momentum=0.9) if opt_name == "SGD" else dict(lr=0.01, weight_decay=0.1)
    opt_e = getattr(torch.optim, opt_name)(eager.parameters(), **kwargs)
    opt_c = getattr(torch.optim, opt_name)(compiled_model.parameters(), **kwargs)
    step = torch.compile(opt_c.step)
    for i in range(3):
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(i)).to(DEV)
        for model, opt, do_step in ((eager, opt_e, opt_e.step), (compiled_model, opt_c, step)):
            opt.zero_grad()
            model(x).square().mean().backward()
            do_step()
    for p, q in zip(compiled_model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), **TOL)
    for p in compiled_model.parameters():
        assert all(v.device.type == "infini" for v in opt_c.state[p].values() if torch.is_tensor(v) and v.dim())


def test_reduce_overhead_runs_the_compiled_code_without_cuda_graphs():
    """mode="reduce-overhead" asks for CUDA graphs; Inductor records a skip
    for a device that is not CUDA (as for the CPU) and runs the compiled code
    as the default mode does, forward and backward."""
    from torch._dynamo.utils import counters

    eager = _mlp().to(DEV)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, mode="reduce-overhead")
    counters.clear()
    x = torch.randn(4, 16).to(DEV)
    for _ in range(2):
        got, want = compiled(x), eager(x)
        torch.testing.assert_close(got.cpu(), want.cpu(), **TOL)
    got.sum().backward()
    want.sum().backward()
    for p, q in zip(compiled_model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), **TOL)
    assert counters["inductor"]["cudagraph_skips"] >= 1


def test_automatic_dynamic_shapes_recompile_once():
    """Without dynamic=True, the second size makes the graph dynamic; later
    sizes reuse it (two graphs for four sizes, not four)."""
    from torch._dynamo.utils import counters

    fn = torch.compile(lambda t: torch.softmax(t * 2, dim=-1))
    counters.clear()
    for n in (5, 9, 17, 33):
        x = torch.randn(3, n).to(DEV)
        torch.testing.assert_close(fn(x).cpu(), torch.softmax(x.cpu() * 2, dim=-1), **TOL)
    assert counters["stats"]["unique_graphs"] == 2


def _gelu_affine(t):
    return torch.nn.functional.gelu(t) * 2 + 1


@queued_kernels
def test_compiled_graph_returns_before_the_stream_runs_it():
    """As a CUDA graph's kernels are launched, not run: behind a held stream
    the compiled call returns with its work still pending (the calling
    thread does not wait), and the result is right once the stream gets
    there."""
    fn = torch.compile(_gelu_affine)
    x = torch.randn(256).to(DEV)
    fn(x)
    stream = torch.infini.current_stream()
    stream.synchronize()
    hold(stream, 300)
    out = fn(x)
    assert not stream.query()  # the delay, and the graph behind it, pending
    stream.synchronize()
    torch.testing.assert_close(out.cpu(), _gelu_affine(x.cpu()), **TOL)


@queued_kernels
def test_compiled_graph_runs_on_the_current_side_stream():
    """Under torch.infini.stream(s) the graph's kernels go to s, in order
    after s's work, and leave the default stream free (torch.cuda's stream
    semantics)."""
    fn = torch.compile(_gelu_affine)
    x = torch.randn(256).to(DEV)
    fn(x)
    torch.infini.synchronize()
    side = torch.infini.Stream()
    hold(side, 300)
    with torch.infini.stream(side):
        out = fn(x)
    assert torch.infini.default_stream().query()
    assert not side.query()
    side.synchronize()
    torch.testing.assert_close(out.cpu(), _gelu_affine(x.cpu()), **TOL)


@queued_kernels
def test_compiled_graph_is_captured_and_replayed():
    """A compiled call inside torch.infini.graph is recorded, kernels
    included; a replay recomputes it from the captured input's new values,
    as a CUDA graph replays a compiled model's kernels."""
    fn = torch.compile(_gelu_affine)
    x = torch.randn(64).to(DEV)
    fn(x)
    side = torch.infini.Stream()
    side.wait_stream(torch.infini.current_stream())
    graph = torch.infini.InfiniGraph()
    with torch.infini.stream(side), torch.infini.graph(graph):
        out = fn(x)
    torch.infini.current_stream().wait_stream(side)
    new = torch.linspace(-3, 3, 64)
    x.copy_(new.to(DEV))
    graph.replay()
    torch.infini.synchronize()
    torch.testing.assert_close(out.cpu(), _gelu_affine(new), **TOL)


@queued_kernels
def test_a_failing_compiled_kernel_reports_at_the_next_synchronize():
    """Integer division by zero in a generated kernel: CPU raises
    RuntimeError naming ZeroDivisionError at the call; a queued kernel
    raises the same at the next synchronizing call (an asynchronous error,
    as a CUDA kernel's), and the device keeps working."""
    fn = torch.compile(lambda a, b: a // b + 1)
    a = torch.arange(8)
    zeros = torch.zeros(8, dtype=torch.long)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, zeros)
    try:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a.to(DEV), zeros.to(DEV))
            torch.infini.synchronize()
    finally:
        drain_async_errors()
    torch.testing.assert_close(fn(a.to(DEV), torch.ones(8, dtype=torch.long).to(DEV)).cpu(), a + 1)


@queued_kernels
def test_profiler_shows_compiled_kernels_on_the_device_timeline():
    """Each queued kernel is a device event named after its kernel
    (infini::host_kernel<cpp_fused_...>), as a compiled CUDA graph's Triton
    kernels are on the CUDA timeline."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn = torch.compile(_gelu_affine)
    x = torch.randn(256).to(DEV)
    fn(x)
    torch.infini.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn(x)
        torch.infini.synchronize()
    names = [e.name for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert any(name.startswith("infini::host_kernel<cpp_fused_") for name in names), names


@queued_kernels
def test_a_kernel_reading_a_cpu_scalar_sees_its_value_at_the_call():
    """A kernel that reads a CPU 0-dim tensor (passed by pointer, as an
    optimizer's step count is) must see the value it had at the call, as on
    CUDA: queued behind a held stream and reading the CPU memory later, it
    would see the caller's next write instead."""
    fn = torch.compile(lambda x, s: x * s + 1)
    x = torch.arange(8.0).to(DEV)
    s = torch.tensor(3.0)
    fn(x, s)
    torch.infini.synchronize()
    hold(torch.infini.current_stream(), 200)
    out = fn(x, s)
    s.fill_(100.0)  # the caller's next write, while the stream is still held
    torch.testing.assert_close(out.cpu(), torch.arange(8.0) * 3 + 1)
