"""AOTInductor on infini (torch_infini/_aoti.py): a program exported on infini
tensors, compiled and packaged with torch._inductor.aoti_compile_and_package,
loaded with aoti_load_package and run on fresh infini inputs, against eager
infini; its generated C++ kernels wait for the work queued on the stream
before them. Where the host cannot address device memory (the Infini
stack's accelerators) the compile is refused, naming the alternatives
(tested on any provider, the decision forced)."""

from __future__ import annotations

import zipfile

import pytest
import torch
from torch import nn

import torch_infini
from infini_testing import DEV, hold

generates_code = pytest.mark.skipif(not torch_infini._compile.host_addressable(),
                                    reason="AOTInductor generates code only where the host addresses device "
                                           "memory (the refusal is tested below)")


class MlpWithTail(nn.Module):
    """Linear-ReLU-Linear (addmm externs, a C++ kernel between them), a
    pointwise tail, an mm extern, and a C++ kernel reading an input."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.mlp(x)
        return torch.sigmoid(h) * 2 + 1, torch.mm(h, w), w.cos() - 1


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(4, 16, generator=gen), torch.randn(8, 5, generator=gen)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """The model (eager, on infini), its package's path and the loaded
    package: compiled once for the module (a C++ build of a minute on
    two busy cores)."""
    torch.manual_seed(0)
    model = MlpWithTail().to(DEV).eval()
    example = tuple(t.to(DEV) for t in _inputs(0))
    exported = torch.export.export(model, example)
    path = torch._inductor.aoti_compile_and_package(
        exported, package_path=str(tmp_path_factory.mktemp("aoti") / "mlp_with_tail.pt2"))
    return model, path, torch._inductor.aoti_load_package(path)


@generates_code
def test_package_gives_eager_values_on_infini(package):
    model, _, loaded = package
    for seed in (1, 2):
        x, w = (t.to(DEV) for t in _inputs(seed))
        got = loaded(x, w)
        want = model(x, w)
        assert len(got) == len(want)
        for g, e in zip(got, want):
            assert g.device.type == "infini"
            torch.testing.assert_close(g.cpu(), e.cpu())


@generates_code
def test_package_waits_for_work_queued_before_the_call(package):
    """Inputs written by work still queued behind a held stream: the
    package's C++ kernels (on the calling thread) must run after it."""
    model, _, loaded = package
    x0, w0 = _inputs(3)
    x = torch.zeros(4, 16, device=DEV)
    w = torch.zeros(8, 5, device=DEV)
    stream = torch.infini.current_stream()
    for _ in range(2):
        hold(stream, 50)
        x.copy_(x0.to(DEV)).add_(1)  # queued behind the delay
        w.copy_(w0.to(DEV)).mul_(2)
        got = loaded(x, w)
        want = model((x0 + 1).to(DEV), (w0 * 2).to(DEV))
        for g, e in zip(got, want):
            torch.testing.assert_close(g.cpu(), e.cpu())


@generates_code
def test_package_wrapper_orders_kernels_and_dispatches_externs(package):
    """The generated C++: a wait for the stream before the first kernel,
    infini buffers, extern operators through the dispatcher (the proxy
    executor), never a CPU C shim over device memory."""
    _, path, _ = package
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".wrapper.cpp"))
        code = archive.read(name).decode()
    run = code[code.index("::run_impl("):]
    assert run.index("infini_synchronize_current_stream();") < run.index("cpp_fused_")
    assert "cached_torch_device_type_privateuse1" in run
    assert "aoti_torch_proxy_executor_call_function" in run
    assert "aoti_torch_cpu_" not in code


@generates_code
def test_updated_constants_are_folded_onto_infini_again(package):
    """The package keeps its weights on the host and folds them onto infini
    when loaded; new weights (host tensors, by their names in the model)
    are folded again before the next run."""
    model, path, _ = package
    loaded = torch._inductor.aoti_load_package(path)  # its own constants
    x, w = (t.to(DEV) for t in _inputs(4))
    torch.testing.assert_close(loaded(x, w)[0].cpu(), model(x, w)[0].cpu())
    other = MlpWithTail().eval()
    loaded.load_constants({k: v for k, v in other.state_dict().items()}, check_full_update=True)
    other = other.to(DEV)
    for g, e in zip(loaded(x, w), other(x, w)):
        torch.testing.assert_close(g.cpu(), e.cpu())


@generates_code
def test_torch_compile_cpp_wrapper_option_keeps_stream_order():
    """torch.compile(..., options={"cpp_wrapper": True}) takes the same C++
    wrapper (its extern operators through the dispatcher, without the
    proxy executor): eager's values, behind queued work."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MlpWithTail().to(DEV).eval()
    compiled = torch.compile(model, options={"cpp_wrapper": True})
    x0, w0 = _inputs(5)
    x = torch.zeros(4, 16, device=DEV)
    w = torch.zeros(8, 5, device=DEV)
    try:
        with torch.no_grad():
            compiled(x, w)  # compiled here
            hold(torch.infini.current_stream(), 50)
            x.copy_(x0.to(DEV)).add_(1)  # queued behind the delay
            w.copy_(w0.to(DEV)).mul_(2)
            got = compiled(x, w)
            want = model((x0 + 1).to(DEV), (w0 * 2).to(DEV))
    finally:
        torch._dynamo.reset()
    for g, e in zip(got, want):
        assert g.device.type == "infini"
        torch.testing.assert_close(g.cpu(), e.cpu())


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x * self.count


@generates_code
def test_a_program_writing_to_its_buffer_is_refused():
    """A package stores its constants on the host and folds them onto infini
    at load (docs/compile.md): a buffer the program updates in place is
    refused at compile time, naming it (before any C++ is built)."""
    exported = torch.export.export(Counter().to(DEV).eval(), (torch.randn(3, device=DEV),))
    with pytest.raises(RuntimeError, match=r"writes to its constant 'count' \(aten\.copy_\.default\)"):
        torch._inductor.aoti_compile_and_package(exported)


def test_refused_where_the_host_cannot_address_device_memory(monkeypatch):
    """The Infini stack's accelerators: no code generator, a message naming
    the reason and what to use instead (forced here on any provider)."""
    monkeypatch.setattr(torch_infini._compile, "host_addressable", lambda: False)
    model = MlpWithTail().to(DEV).eval()
    exported = torch.export.export(model, tuple(t.to(DEV) for t in _inputs(0)))
    with pytest.raises(RuntimeError, match=r"AOTInductor .* has no code generator for infini on .*cannot "
                                           r"address.*ep\.module\(\).*TORCH_INFINI_PROVIDER=host"):
        torch._inductor.aoti_compile_and_package(exported)
