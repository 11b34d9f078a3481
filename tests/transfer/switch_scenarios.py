"""Every mapping of the CUDA-to-infini switch, run in one process with the
switch on (tests/transfer/test_mappings.py starts it).

    TORCH_INFINI_TRANSFER_CUDA=1 python switch_scenarios.py OUT.json

Each scenario records ``None`` (passed) or its failure's traceback under its
name in OUT.json. The oracle is the same computation on the CPU (values, and
that results are on infini), and ``torch.cuda``'s documented behaviour.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import traceback
import warnings
import zipfile
from typing import Callable

import torch
import torch.nn.functional as F

INFINI = "infini"
SCENARIOS: dict[str, Callable[[], None]] = {}


def scenario(fn: Callable[[], None]) -> Callable[[], None]:
    SCENARIOS[fn.__name__] = fn
    return fn


def on_infini(t: torch.Tensor, index: int = 0) -> None:
    assert t.device == torch.device(INFINI, index), f"expected infini:{index}, got {t.device}"


def equal(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert torch.equal(a.cpu(), b.cpu()), (a, b)


CUDA_NAMES = ["cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0)]


# -- device arguments ----------------------------------------------------------

@scenario
def switch_is_on():
    import torch_infini.transfer_to_infini as transfer

    assert transfer.is_enabled()
    targets = {c.target for c in transfer.changes()}
    for name in ("torch.zeros", "torch.Tensor.to", "torch.Tensor.cuda", "torch.nn.Module.cuda", "torch.Generator",
                 "torch.cuda.is_available", "torch.distributed.init_process_group", "torch.load"):
        assert name in targets, name
    from torch_infini.diagnostics import diagnostics, format_diagnostics

    report = diagnostics()
    assert report["transfer_cuda"] is True
    assert "CUDA-to-infini switch: on" in format_diagnostics(report)


@scenario
def factories():
    for device in CUDA_NAMES:
        for make in (lambda d: torch.zeros(2, 3, device=d), lambda d: torch.ones(4, device=d),
                     lambda d: torch.full((2,), 7.0, device=d), lambda d: torch.arange(5, device=d),
                     lambda d: torch.eye(3, device=d), lambda d: torch.linspace(0, 1, 5, device=d),
                     lambda d: torch.tensor([1.0, 2.0], device=d), lambda d: torch.as_tensor([1, 2], device=d),
                     lambda d: torch.asarray([3.0], device=d), lambda d: torch.empty(2, device=d).fill_(1),
                     lambda d: torch.zeros_like(torch.ones(3), device=d), lambda d: torch.fft.fftfreq(4, device=d),
                     lambda d: torch.tril_indices(3, 3, device=d)):
            got = make(device)
            on_infini(got)
            equal(got, make("cpu"))
    # Every schema-derived factory is covered, not only these.
    from torch_infini._transfer._torch_api import device_taking_functions

    found = device_taking_functions()
    for name in ("zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "randperm", "tensor",
                 "as_tensor", "asarray", "empty_like", "zeros_like", "randn_like", "eye", "linspace", "logspace",
                 "empty_strided", "scalar_tensor", "normal", "hann_window", "sparse_coo_tensor"):
        assert name in found["torch"], name
    assert "fftfreq" in found["torch.fft"] and "nested_tensor" in found["torch.nested"]


@scenario
def random_factories_draw_cpu_numbers():
    torch.manual_seed(5)
    got = [torch.rand(4, device="cuda"), torch.randn(3, device="cuda:0"), torch.randint(9, (5,), device="cuda"),
           torch.randperm(6, device="cuda")]
    torch.manual_seed(5)
    want = [torch.rand(4), torch.randn(3), torch.randint(9, (5,)), torch.randperm(6)]
    for g, w in zip(got, want):
        on_infini(g)
        equal(g, w)


@scenario
def tensor_to_and_cuda():
    x = torch.arange(6.0).reshape(2, 3)
    for moved in (x.to("cuda"), x.to("cuda:0"), x.to(torch.device("cuda")), x.to(device="cuda"),
                  x.to("cuda", torch.float64), x.cuda(), x.cuda(0), x.cuda("cuda:0"), x.cuda(torch.device("cuda", 0)),
                  x.cuda(non_blocking=True), x.pin_memory().to("cuda", non_blocking=True)):
        on_infini(moved)
        equal(moved, x.to(moved.dtype))
    y = x.cuda()
    assert y.cuda() is y and y.to("cuda") is y, "already there: no copy, as on CUDA"
    equal(y.to("cpu"), x)


@scenario
def tensor_new_methods():
    x = torch.ones(2, device="cuda")
    on_infini(x)
    for made in (x.new_zeros(3, device="cuda"), x.new_ones(2, device="cuda:0"), x.new_full((2,), 3.0, device="cuda"),
                 x.new_empty(2, device="cuda"), x.new_tensor([1.0], device=torch.device("cuda"))):
        on_infini(made)
    cpu = torch.ones(2)
    on_infini(cpu.new_zeros(3, device="cuda"))


@scenario
def module_cuda_to_and_to_empty():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    want = net(torch.ones(2, 4))
    assert net.cuda() is net
    on_infini(net.weight)
    equal(net(torch.ones(2, 4).cuda()), want)
    for target in ("cpu", "cuda", "cpu", torch.device("cuda", 0), "cpu", 0):
        net = net.cuda(target) if isinstance(target, int) else net.to(target)
    on_infini(net.weight)
    net2 = torch.nn.Linear(4, 3, device="meta").to_empty(device="cuda")
    on_infini(net2.weight)
    net3 = torch.nn.Linear(4, 3, device="cuda")
    on_infini(net3.bias)


@scenario
def generator():
    g = torch.Generator("cuda")
    assert g.device.type == INFINI
    assert isinstance(g, torch.Generator) and isinstance(torch.Generator(), torch.Generator)
    assert torch.Generator(device=torch.device("cuda", 0)).device == torch.device(INFINI, 0)
    assert torch.Generator().device.type == "cpu"
    g.manual_seed(3)
    got = torch.rand(5, generator=g, device="cuda")
    want = torch.rand(5, generator=torch.Generator().manual_seed(3))
    on_infini(got)
    equal(got, want)
    state = g.get_state()
    a = torch.randn(3, generator=g, device="cuda")
    g.set_state(state)
    equal(torch.randn(3, generator=g, device="cuda"), a)


@scenario
def default_device():
    with torch.device("cuda"):
        on_infini(torch.zeros(2))
        on_infini(torch.nn.Linear(2, 2).weight)
    assert torch.zeros(1).device.type == "cpu"
    torch.set_default_device("cuda")
    try:
        on_infini(torch.ones(2))
        assert torch.get_default_device().type == INFINI
    finally:
        torch.set_default_device("cpu")
    assert torch.ones(1).device.type == "cpu"


def _checkpoint_saved_on_cuda(obj: dict) -> bytes:
    """A checkpoint as torch.save writes it on a CUDA machine: the same file
    as on the CPU, with the storages' location tags 'cuda:0'."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data.pkl"):
                # protocol 2 short unicode strings: 'X' + 4-byte length + bytes
                old = b"X\x03\x00\x00\x00cpu"
                assert old in data
                data = data.replace(old, b"X\x06\x00\x00\x00cuda:0")
            dst.writestr(info, data)
    return out.getvalue()


@scenario
def load_map_location_and_cuda_checkpoints():
    state = {"w": torch.arange(4.0), "b": torch.ones(2, dtype=torch.int64)}
    saved = io.BytesIO()
    torch.save(state, saved)
    for location in ("cuda", "cuda:0", torch.device("cuda"), {"cpu": "cuda:0"}):
        loaded = torch.load(io.BytesIO(saved.getvalue()), map_location=location)
        for k in state:
            on_infini(loaded[k])
            equal(loaded[k], state[k])
    # a checkpoint saved on CUDA loads onto infini, with and without map_location
    cuda_file = _checkpoint_saved_on_cuda(state)
    for kwargs in ({}, {"map_location": "cuda"}, {"map_location": {"cuda:0": "cuda:0"}}):
        loaded = torch.load(io.BytesIO(cuda_file), **kwargs)
        for k in state:
            on_infini(loaded[k])
            equal(loaded[k], state[k])
    loaded = torch.load(io.BytesIO(cuda_file), map_location="cpu")
    assert loaded["w"].device.type == "cpu"


@scenario
def storages():
    s = torch.UntypedStorage(16, device="cuda")
    assert s.device.type == INFINI
    c = torch.UntypedStorage(8).cuda()
    assert c.device == torch.device(INFINI, 0)
    t = torch.arange(3.0).untyped_storage().cuda()
    assert t.device.type == INFINI


@scenario
def pinned_memory_and_dataloader():
    x = torch.arange(4.0)
    assert x.pin_memory().is_pinned()
    dataset = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(4, 2))
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, pin_memory=True, pin_memory_device="cuda")
    assert loader.pin_memory_device == INFINI
    batches = list(loader)
    assert all(b[0].is_pinned() for b in batches)
    equal(torch.cat([b[0] for b in batches]), dataset.tensors[0])


# -- torch.cuda ----------------------------------------------------------------

@scenario
def cuda_device_management():
    cuda, infini = torch.cuda, torch.infini
    assert cuda.is_available() is True and cuda.is_initialized() == infini.is_initialized()
    assert cuda.device_count() == infini.device_count() >= 1
    cuda.set_device("cuda:0")
    cuda.set_device(torch.device("cuda", 0))
    cuda.set_device(0)
    assert cuda.current_device() == 0
    with cuda.device("cuda:0"):
        assert cuda.current_device() == 0
    with cuda.device_of(torch.ones(1, device="cuda")):
        pass
    assert cuda.get_device_name() == infini.get_device_name(0)
    props = cuda.get_device_properties("cuda:0")
    assert props.total_memory == infini.get_device_properties(0).total_memory
    assert cuda.get_device_capability() == (0, 0) == cuda.get_device_capability(torch.device("cuda"))
    assert cuda.is_bf16_supported() == infini.is_bf16_supported()
    assert cuda.is_tf32_supported() is False
    cuda.synchronize()
    cuda.synchronize("cuda:0")
    cuda.init()


@scenario
def cuda_streams_and_events():
    cuda = torch.cuda
    s = cuda.Stream()
    assert isinstance(s, torch.infini.Stream) and isinstance(s, cuda.Stream)
    assert cuda.Stream(device="cuda:0").device_index == 0
    x = torch.arange(4.0, device="cuda")
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        y = x * 2
    cuda.current_stream().wait_stream(s)
    equal(y, torch.arange(4.0) * 2)
    assert cuda.current_stream() == torch.infini.current_stream()
    assert cuda.default_stream("cuda:0") == torch.infini.default_stream(0)
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    z = x @ x
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and end.query()
    equal(z, torch.arange(4.0) @ torch.arange(4.0))


@scenario
def cuda_memory_statistics():
    cuda = torch.cuda
    cuda.synchronize()
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()
    before = cuda.memory_allocated()
    x = torch.empty(1024 * 256, device="cuda")  # 1 MiB
    assert cuda.memory_allocated() - before == x.numel() * 4
    assert cuda.memory_allocated("cuda:0") == torch.infini.memory_allocated(0)
    assert cuda.max_memory_allocated() >= cuda.memory_allocated()
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    assert cuda.memory_cached() == cuda.memory_reserved()
    assert cuda.memory_stats()["allocated_bytes.all.current"] == cuda.memory_allocated()
    free, total = cuda.mem_get_info()
    assert 0 < free <= total
    assert "infini" in cuda.memory_summary() or "Memory" in cuda.memory_summary()
    del x
    cuda.empty_cache()
    assert torch.cuda.memory.memory_allocated() == before


@scenario
def memory_timeline():
    # A CUDA program's memory-timeline calls, as PyTorch documents them.
    torch.cuda.memory._record_memory_history(max_entries=100)
    x = torch.empty(1024, device="cuda")
    addr = x.data_ptr()
    del x
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    actions = [e["action"] for e in snapshot["device_traces"][0]
               if e.get("addr") == addr and not e["action"].startswith("segment")]
    assert actions[:2] == ["alloc", "free_requested"], actions
    assert any(f["name"] == "memory_timeline" for f in snapshot["device_traces"][0][0]["frames"])
    assert torch.cuda.memory_snapshot() == torch.infini.memory_snapshot()


@scenario
def cuda_random():
    cuda = torch.cuda
    cuda.manual_seed(11)
    got = torch.rand(4, device="cuda")
    want = torch.rand(4, generator=torch.Generator().manual_seed(11))
    equal(got, want)
    cuda.manual_seed_all(12)
    assert cuda.initial_seed() == 12
    state = cuda.get_rng_state()
    a = torch.randn(3, device="cuda")
    cuda.set_rng_state(state)
    equal(torch.randn(3, device="cuda"), a)
    assert cuda.default_generators[0] is torch.infini.default_generators[0]
    assert torch.cuda.random.get_rng_state_all()[0].equal(torch.infini.get_rng_state_all()[0])
    with torch.random.fork_rng(device_type="cuda"):
        torch.rand(2, device="cuda")
    equal(torch.randn(3, device="cuda"), torch.randn(3, generator=_after(12, 3)))


def _after(seed: int, draws: int) -> torch.Generator:
    g = torch.Generator().manual_seed(seed)
    torch.randn(draws, generator=g)
    return g


@scenario
def autocast_and_grad_scaler():
    linear = torch.nn.Linear(4, 4).cuda()
    x = torch.randn(2, 4, device="cuda")
    for ctx in (torch.autocast("cuda", dtype=torch.bfloat16), torch.amp.autocast(device_type="cuda",
                dtype=torch.bfloat16), torch.cuda.amp.autocast(dtype=torch.bfloat16)):
        with ctx:
            assert torch.is_autocast_enabled() and torch.is_autocast_enabled("cuda")
            assert torch.is_autocast_enabled(INFINI) and torch.get_autocast_dtype("cuda") == torch.bfloat16
            out = linear(x)
        assert out.dtype == torch.bfloat16, "autocast('cuda') must reach infini's autocast"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = torch.nn.functional.linear(x.cpu(), linear.weight.cpu(), linear.bias.cpu())
        equal(out, want)
    assert not torch.is_autocast_enabled("cuda")
    for scaler in (torch.amp.GradScaler("cuda"), torch.amp.GradScaler(), torch.cuda.amp.GradScaler(),
                   torch.amp.GradScaler(device="cuda")):
        assert scaler._device == INFINI, scaler._device
    scaler = torch.amp.GradScaler("cuda", init_scale=4.0)
    loss = linear(x).sum()
    scaler.scale(loss).backward()
    opt = torch.optim.SGD(linear.parameters(), lr=0.1)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0 * scaler.get_growth_factor() ** 0 or scaler.get_scale() > 0


@scenario
def custom_fwd_and_bwd():
    class Double(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a):
            ctx.dtype = a.dtype
            return a * 2

        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, grad):
            return grad * 2

    class Triple(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx, a):
            return a * 3

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx, grad):
            return grad * 3

    a = torch.ones(3, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = Double.apply(a)
        out3 = Triple.apply(a)
    assert out.dtype == torch.float32 and out3.dtype == torch.float32, "cast_inputs applied on infini"
    (out.sum() + out3.sum()).backward()
    equal(a.grad, torch.full((3,), 5.0, dtype=torch.bfloat16))


@scenario
def cuda_graphs():
    assert torch.cuda.CUDAGraph is torch.infini.InfiniGraph
    x = torch.ones(4, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2
    x.fill_(3.0)
    g.replay()
    torch.cuda.synchronize()
    equal(y, torch.full((4,), 6.0))
    assert not torch.cuda.is_current_stream_capturing()


@scenario
def nvtx_ranges_are_profiler_ranges():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.cuda.nvtx.range_push("infini-nvtx-push")
        torch.ones(2, device="cuda").sum()
        torch.cuda.nvtx.range_pop()
        with torch.cuda.nvtx.range("infini-nvtx-range"):
            torch.ones(2, device="cuda").sum()
        torch.cuda.nvtx.mark("infini-nvtx-mark")
    names = {e.name for e in prof.events()}
    assert {"infini-nvtx-push", "infini-nvtx-range", "infini-nvtx-mark"} <= names, names


@scenario
def backends_cuda_flags():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        got = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), is_causal=True)
    torch.testing.assert_close(got.cpu(), want)
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_math=True):
        got = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda())
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False


@scenario
def refusals_name_the_api():
    cases = [(lambda: torch.cuda.current_blas_handle(), "torch.cuda.current_blas_handle"),
             (lambda: torch.cuda.jiterator._create_jit_fn("x"), "torch.cuda.jiterator._create_jit_fn"),
             (lambda: torch.cuda.FloatTensor(2), "torch.cuda.FloatTensor"),
             (lambda: torch.cuda.ExternalStream(0), "torch.cuda.ExternalStream"),
             (lambda: torch.cuda.memory.CUDAPluggableAllocator("x.so", "a", "f"),
              "torch.cuda.memory.CUDAPluggableAllocator"),
             (lambda: torch.cuda.nccl.version(), "torch.cuda.nccl.version"),
             (lambda: torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda()), "torch.nn.DataParallel")]
    for call, api in cases:
        try:
            call()
        except NotImplementedError as error:
            message = str(error)
            assert api in message and "not mapped onto infini" in message and "docs/transfer-cuda.md" in message, \
                message
        else:
            raise AssertionError(f"{api} did not refuse")
    assert not hasattr(torch.cuda.jiterator, "_create_jit_fn"), "probing code sees the CUDA-only API as absent"
    # exception classes stay catchable
    assert issubclass(torch.cuda.OutOfMemoryError, Exception)
    # a CUDA device that reaches PyTorch's C++ through an API the switch does
    # not map: refused, naming the Python line that passed it
    try:
        torch._C._VariableFunctions.zeros(2, device="cuda")
    except Exception as error:  # noqa: BLE001
        message = str(error)
        assert "does not map" in message and "switch_scenarios.py" in message, message
    else:
        raise AssertionError("an unmapped CUDA device was not refused")


@scenario
def compile_under_the_switch():
    """Dynamo traces through the mapped functions and autocast('cuda'); Inductor
    (which keeps seeing PyTorch's own torch.cuda) compiles for infini."""
    import torch_infini

    def step(x, w):
        bias = torch.ones(w.shape[1], device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = x.to("cuda") @ w
        return (y.float() + bias).relu()

    x, w = torch.randn(4, 8), torch.randn(8, 3)
    backend = "inductor" if torch_infini._compile.host_addressable() else "aot_eager"
    got = torch.compile(step, backend=backend)(x, w.cuda())
    on_infini(got)
    assert got.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = x @ w
    torch.testing.assert_close(got.cpu(), (want.float() + 1).relu())


# -- torch.distributed (one process; several: the example's tests) ------------------

@scenario
def distributed_nccl_is_infini():
    import torch.distributed as dist

    assert dist.is_nccl_available()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("nccl", "cpu:gloo,cuda:nccl"):
            store = dist.FileStore(os.path.join(tmp, f"store-{len(backend)}"), 1)
            dist.init_process_group(backend, store=store, rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
            try:
                assert "infini" in str(dist.get_backend_config()), dist.get_backend_config()
                x = torch.arange(3.0, device="cuda")
                dist.all_reduce(x)
                equal(x, torch.arange(3.0))
                model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 2).cuda(), device_ids=[0])
                model(torch.ones(1, 3, device="cuda")).sum().backward()
                mesh = dist.init_device_mesh("cuda", (1,))
                assert mesh.device_type == INFINI
            finally:
                dist.destroy_process_group()


@scenario
def fsdp2_on_a_cuda_mesh():
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", store=dist.FileStore(os.path.join(tmp, "s"), 1), rank=0, world_size=1)
        try:
            torch.manual_seed(0)
            ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            model.load_state_dict(ref.state_dict())
            model.cuda()
            fully_shard(model, mesh=dist.init_device_mesh("cuda", (1,)))
            opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
            x = torch.randn(3, 4)
            model(x.cuda()).sum().backward()
            ref(x).sum().backward()
            opt.step()
            ref_opt.step()
            got = model[0].weight.full_tensor()
            on_infini(got)
            torch.testing.assert_close(got.cpu(), ref[0].weight.detach())
        finally:
            dist.destroy_process_group()


def main() -> None:
    warnings.simplefilter("ignore")
    out = sys.argv[1]
    only = sys.argv[2:] or list(SCENARIOS)
    results = {}
    for name in only:
        try:
            SCENARIOS[name]()
            results[name] = None
        except BaseException:  # noqa: BLE001
            results[name] = traceback.format_exc()
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
