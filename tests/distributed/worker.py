"""One rank of a distributed test run (launched by tests/distributed/conftest.py).

    python worker.py RANK WORLD_SIZE STORE_FILE OUT_DIR BACKEND

Rank r uses ``infini:r`` (TORCH_INFINI_HOST_DEVICES simulates the devices).
Every scenario in ``SCENARIOS`` runs in order twice: in the default group,
whose collectives work in place on the (host-addressable) device memory, and
in a second group of the same ranks created with
TORCH_INFINI_DISTRIBUTED_STAGING=1, which copies through pinned staging
buffers. Each records ``None`` (passed) or the failure's traceback under
``<scenario>@<direct|staged>`` in ``OUT_DIR/rank<r>.json``.
The oracle of every collective is the same collective on CPU tensors over
gloo, in the same group; of the training loops, a single-process CPU run on
the same global batch.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback
import warnings
from typing import Callable

import torch
import torch.distributed as dist

DTYPES = (torch.float32, torch.bfloat16, torch.int64)
FLOATS = (torch.float32, torch.bfloat16)
INTS = (torch.int64,)
CPU = torch.device("cpu")

RANK = WORLD = 0
DEV = CPU
#: The group the scenarios run in (None: the default group).
GROUP = None
#: How its collectives move infini data: "direct" (gloo in place on the
#: host-addressable device memory) or "staged" (pinned staging copies).
MODE = "direct"


def value(shape, dtype, salt=0, rank=None):
    """Deterministic small values per rank: exact in every dtype, products
    included, so the CPU and infini results must be equal bit for bit."""
    r = RANK if rank is None else rank
    g = torch.Generator().manual_seed(7919 * r + 131 * salt + 17)
    v = torch.randint(-3, 4, shape, generator=g)
    v[v == 0] = 1
    return v.to(dtype) if not dtype.is_floating_point else (v.to(torch.float64) / 2).to(dtype)


def empty(shape, dtype, device):
    # Filled, so a collective that forgets to write its output is caught.
    return torch.full(shape, 99, dtype=dtype, device=device)


# -- collectives: run(device, dtype) -> the tensors the collective wrote ------

def all_reduce_op(op):
    def run(device, dtype):
        x = value((5, 3), dtype).to(device)
        dist.all_reduce(x, op=op, group=GROUP)
        return [x]
    return run


def all_reduce_premul(tensor_factor):
    def run(device, dtype):
        x = value((5, 3), dtype).to(device)
        if device == CPU:  # gloo has no PREMUL_SUM: the definition, scaled inputs summed
            x.mul_(0.5)
            dist.all_reduce(x, group=GROUP)
        else:
            factor = torch.tensor(0.5, device=device) if tensor_factor else 0.5
            dist.all_reduce(x, op=dist._make_nccl_premul_sum(factor), group=GROUP)
        return [x]
    return run


def broadcast(device, dtype):
    x = value((4, 2), dtype).to(device)
    dist.broadcast(x, src=WORLD - 1, group=GROUP)
    return [x]


def reduce_op(op):
    def run(device, dtype):
        x = value((6,), dtype).to(device)
        dist.reduce(x, dst=0, op=op, group=GROUP)
        return [x] if RANK == 0 else []
    return run


def all_gather(device, dtype):
    outs = [empty((3, 2), dtype, device) for _ in range(WORLD)]
    dist.all_gather(outs, value((3, 2), dtype).to(device), group=GROUP)
    return outs


def all_gather_into_tensor(device, dtype):
    out = empty((WORLD * 3, 2), dtype, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_gather_into_tensor(out, value((3, 2), dtype).to(device), group=GROUP)
    return [out]


def all_gather_single(device, dtype):
    out = empty((WORLD * 4,), dtype, device)
    dist.all_gather_single(out, value((4,), dtype).to(device), group=GROUP)
    return [out]


def reduce_scatter_op(op):
    def run(device, dtype):
        out = empty((2, 3), dtype, device)
        dist.reduce_scatter(out, [value((2, 3), dtype, salt=i).to(device) for i in range(WORLD)], op=op, group=GROUP)
        return [out]
    return run


def reduce_scatter_tensor_op(op):
    def run(device, dtype):
        out = empty((2, 3), dtype, device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            dist.reduce_scatter_tensor(out, value((WORLD * 2, 3), dtype).to(device), op=op, group=GROUP)
        return [out]
    return run


def reduce_scatter_single(device, dtype):
    out = empty((5,), dtype, device)
    dist.reduce_scatter_single(out, value((WORLD * 5,), dtype).to(device), group=GROUP)
    return [out]


def all_to_all(device, dtype):
    # gloo's all_to_all takes equal sizes only (all_to_all_single: uneven).
    ins = [value((2, 2), dtype, salt=j).to(device) for j in range(WORLD)]
    outs = [empty((2, 2), dtype, device) for j in range(WORLD)]
    dist.all_to_all(outs, ins, group=GROUP)
    return outs


def all_to_all_single(device, dtype):
    splits = [RANK + j + 1 for j in range(WORLD)]
    x = value((sum(splits), 3), dtype).to(device)
    out = empty((sum(splits), 3), dtype, device)
    dist.all_to_all_single(out, x, output_split_sizes=splits, input_split_sizes=splits, group=GROUP)
    return [out]


def gather(device, dtype):
    outs = [empty((4,), dtype, device) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(value((4,), dtype).to(device), outs, dst=0, group=GROUP)
    return outs or []


def scatter(device, dtype):
    out = empty((4,), dtype, device)
    ins = [value((4,), dtype, salt=j).to(device) for j in range(WORLD)] if RANK == 0 else None
    dist.scatter(out, ins, src=0, group=GROUP)
    return [out]


def send_recv(device, dtype):
    x = value((7,), dtype).to(device)
    y = empty((7,), dtype, device)
    nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    works = [dist.isend(x, nxt, group=GROUP), dist.irecv(y, prev, group=GROUP)]
    for w in works:
        w.wait()
    return [y]


def batch_isend_irecv(device, dtype):
    x = value((5,), dtype).to(device)
    y = empty((5,), dtype, device)
    ops = [dist.P2POp(dist.isend, x, (RANK + 1) % WORLD, group=GROUP), dist.P2POp(dist.irecv, y, (RANK - 1) % WORLD, group=GROUP)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return [y]


def all_reduce_coalesced(device, dtype):
    xs = [value((3,), dtype, salt=0).to(device), value((2, 2), dtype, salt=1).to(device)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_reduce_coalesced(xs, group=GROUP)
    return xs


def all_gather_coalesced(device, dtype):
    ins = [value((3,), dtype, salt=0).to(device), value((2,), dtype, salt=1).to(device)]
    outs = [[empty((3,), dtype, device), empty((2,), dtype, device)] for _ in range(WORLD)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_gather_coalesced(outs, ins, group=GROUP)
    return [t for lst in outs for t in lst]


def coalescing_manager(kind):
    """``_coalescing_manager``: with the device, the backend's own
    start/endCoalescing; the CPU oracle takes gloo's fast path."""
    def run(device, dtype):
        cm_device = None if device == CPU else device
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with dist._coalescing_manager(device=cm_device, async_ops=True, group=GROUP) as cm:
                if kind == "all_reduce":
                    outs = [value((3,), dtype, salt=i).to(device) for i in range(2)]
                    for t in outs:
                        dist.all_reduce(t, group=GROUP)
                elif kind == "all_gather_into_tensor":
                    outs = [empty((WORLD * 2,), dtype, device) for _ in range(2)]
                    for i, t in enumerate(outs):
                        dist.all_gather_into_tensor(t, value((2,), dtype, salt=i).to(device), group=GROUP)
                else:
                    outs = [empty((2,), dtype, device) for _ in range(2)]
                    for i, t in enumerate(outs):
                        dist.reduce_scatter_tensor(t, value((WORLD * 2,), dtype, salt=i).to(device), group=GROUP)
            cm.wait()
        return outs
    return run


def compare(run: Callable, dtypes) -> None:
    for dtype in dtypes:
        want = run(CPU, dtype)
        got = run(DEV, dtype)
        assert len(got) == len(want), (dtype, len(got), len(want))
        for g, w in zip(got, want):
            assert g.device == DEV, g.device
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, msg=lambda m: f"{dtype}: {m}")


R = dist.ReduceOp
COLLECTIVES: dict[str, tuple[Callable, tuple]] = {
    "all_reduce_sum": (all_reduce_op(R.SUM), DTYPES),
    "all_reduce_product": (all_reduce_op(R.PRODUCT), DTYPES),
    "all_reduce_min": (all_reduce_op(R.MIN), DTYPES),
    "all_reduce_max": (all_reduce_op(R.MAX), DTYPES),
    "all_reduce_avg": (all_reduce_op(R.AVG), FLOATS),
    "all_reduce_band": (all_reduce_op(R.BAND), INTS),
    "all_reduce_bor": (all_reduce_op(R.BOR), INTS),
    "all_reduce_bxor": (all_reduce_op(R.BXOR), INTS),
    "all_reduce_premul_sum": (all_reduce_premul(False), FLOATS),
    "all_reduce_premul_sum_tensor": (all_reduce_premul(True), FLOATS),
    "broadcast": (broadcast, DTYPES),
    "reduce_sum": (reduce_op(R.SUM), DTYPES),
    "reduce_max": (reduce_op(R.MAX), DTYPES),
    "all_gather": (all_gather, DTYPES),
    "all_gather_into_tensor": (all_gather_into_tensor, DTYPES),
    "all_gather_single": (all_gather_single, DTYPES),
    "reduce_scatter_sum": (reduce_scatter_op(R.SUM), DTYPES),
    "reduce_scatter_max": (reduce_scatter_op(R.MAX), DTYPES),
    "reduce_scatter_tensor_sum": (reduce_scatter_tensor_op(R.SUM), DTYPES),
    "reduce_scatter_tensor_avg": (reduce_scatter_tensor_op(R.AVG), FLOATS),
    "reduce_scatter_tensor_min": (reduce_scatter_tensor_op(R.MIN), DTYPES),
    "reduce_scatter_single": (reduce_scatter_single, DTYPES),
    "all_to_all": (all_to_all, DTYPES),
    "all_to_all_single": (all_to_all_single, DTYPES),
    "gather": (gather, DTYPES),
    "scatter": (scatter, DTYPES),
    "send_recv": (send_recv, DTYPES),
    "batch_isend_irecv": (batch_isend_irecv, DTYPES),
    "all_reduce_coalesced": (all_reduce_coalesced, DTYPES),
    "all_gather_coalesced": (all_gather_coalesced, DTYPES),
    "coalescing_manager_all_reduce": (coalescing_manager("all_reduce"), DTYPES),
    "coalescing_manager_all_gather_into_tensor": (coalescing_manager("all_gather_into_tensor"), DTYPES),
    "coalescing_manager_reduce_scatter_tensor": (coalescing_manager("reduce_scatter_tensor"), DTYPES),
}


# -- other scenarios ----------------------------------------------------------

def hold_current_stream(ms: float) -> None:
    import torch_infini

    s = torch.infini.current_stream()
    assert torch_infini._C._test_enqueue_delay(s.stream_id, s.device_index, float(ms))


def expected_sum(fill=lambda r: r + 1):
    return float(sum(fill(r) for r in range(WORLD)))


def async_ordering() -> None:
    """The collective waits for the work queued before it on the current
    stream, returns without waiting for it, and a kernel queued after
    wait() sees the result."""
    x = torch.zeros(1 << 16, device=DEV)
    hold_current_stream(2000)
    x.fill_(RANK + 1)  # queued behind the hold
    work = dist.all_reduce(x, async_op=True, group=GROUP)
    # Not a timing: had the call waited for its work, the work would be done.
    assert not work.is_completed(), "all_reduce(async_op=True) blocked the caller, or completed while its input was still being produced"
    work.wait()
    y = x * 2  # queued after wait(): must see the reduced values
    torch.testing.assert_close(y.cpu(), torch.full_like(y.cpu(), 2 * expected_sum()))
    torch.infini.synchronize()
    assert work.is_completed()


def wait_orders_other_stream() -> None:
    """wait() orders the stream current at the wait, not the one of the call."""
    side = torch.infini.Stream()
    x = torch.full((1000,), float(RANK + 1), device=DEV)
    side.wait_stream(torch.infini.current_stream())
    with torch.infini.stream(side):
        work = dist.all_reduce(x, async_op=True, group=GROUP)
    hold_current_stream(100)  # the copy-back must not be skipped past a busy consumer
    work.wait()
    y = x + 1
    torch.testing.assert_close(y.cpu(), torch.full((1000,), expected_sum() + 1))


def future_ordering() -> None:
    """get_future(): then() callbacks and value() are ordered after the result."""
    x = torch.full((256,), float(RANK + 1), device=DEV)
    fut = dist.all_reduce(x, async_op=True, group=GROUP).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    got = doubled.wait()
    torch.testing.assert_close(got.cpu(), torch.full((256,), 2 * expected_sum()))


def many_in_flight() -> None:
    """Many async collectives in flight at once complete in order, each with
    its own result."""
    xs = [torch.full((1024,), float(i * (RANK + 1)), device=DEV) for i in range(16)]
    works = [dist.all_reduce(x, async_op=True, group=GROUP) for x in xs]
    for w in reversed(works):
        w.wait()
    for i, x in enumerate(xs):
        torch.testing.assert_close(x.cpu(), torch.full((1024,), i * expected_sum()))


def barrier() -> None:
    """barrier() returns on no rank before the last one has reached it."""
    # Not a timing: the last rank arrives late and leaves a mark in the
    # group's store on its way in; every rank must see it once past.
    store = dist.distributed_c10d._get_default_store()
    if RANK == WORLD - 1:
        time.sleep(0.4)
        store.set("barrier: last rank arrived", "1")
    dist.barrier(group=GROUP)
    assert store.check(["barrier: last rank arrived"]), "barrier returned before the last rank arrived"


def refusals() -> None:
    """Reductions gloo cannot compute fail at the call, naming why (no rank
    issues anything, so the group stays usable)."""
    for op, dtype, words in ((R.BAND, torch.float32, "needs integer tensors"),
                             (R.AVG, torch.int64, "ReduceOp.AVG of Long")):
        x = torch.ones(3, dtype=dtype, device=DEV)
        try:
            dist.all_reduce(x, op=op, group=GROUP)
        except RuntimeError as e:
            assert words in str(e), str(e)
        else:
            raise AssertionError(f"all_reduce({op}) on {dtype} did not raise")
    x = torch.ones(3, device=DEV)
    dist.all_reduce(x, group=GROUP)
    torch.testing.assert_close(x.cpu(), torch.full((3,), float(WORLD)))


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def training_loop(wrap: Callable[[torch.nn.Module], torch.nn.Module], full_params) -> None:
    """5 SGD steps on rank-local slices of a global batch; the parameters
    must equal a single-process CPU run on the whole batch."""
    reference = make_model()
    model = wrap(copy.deepcopy(reference).to(DEV))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    per_rank = 4
    for _ in range(5):
        x = torch.randn(per_rank * WORLD, 8, generator=g)
        y = torch.randn(per_rank * WORLD, 4, generator=g)
        local = slice(per_rank * RANK, per_rank * (RANK + 1))
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[local].to(DEV)), y[local].to(DEV)).backward()
        opt.step()
        opt_ref.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        opt_ref.step()
    got = full_params(model)
    want = list(reference.parameters())
    assert len(got) == len(want)
    for p, q in zip(got, want):
        assert p.device == DEV, p.device
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


def ddp() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    # Tiny buckets: one all_reduce per parameter, several in flight at once.
    training_loop(lambda m: DDP(m, bucket_cap_mb=1e-4, process_group=GROUP),
                  lambda m: list(m.module.parameters()))


def fsdp2() -> None:
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("infini", (WORLD,)) if GROUP is None else DeviceMesh.from_group(GROUP, "infini")

    def wrap(m):
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)  # 16 rows over 3 ranks: uneven shards
        fully_shard(m, mesh=mesh)
        return m

    training_loop(wrap, lambda m: [p.full_tensor() for p in m.parameters()])


def copy_mode() -> None:
    """The group moves infini data the way this run asked for."""
    import torch_infini

    pg = GROUP if GROUP is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(DEV)
    assert backend.name() == "infini", backend.name()
    staged = torch_infini._C._process_group_stages(backend)
    # Device memory reachable only by the runtime's own work (the host
    # runtime's protection mode) is always staged: gloo's threads may not touch it.
    protected = torch_infini._C._provider_info()["capabilities"]["protected_memory"]
    assert staged == (MODE == "staged" or protected), (MODE, staged, protected)


SCENARIOS: dict[str, Callable[[], None]] = {
    "copy_mode": copy_mode,
    **{f"collective:{name}": (lambda run=run, dtypes=dtypes: compare(run, dtypes))
       for name, (run, dtypes) in COLLECTIVES.items()},
    "async_ordering": async_ordering,
    "wait_orders_other_stream": wait_orders_other_stream,
    "future_ordering": future_ordering,
    "many_in_flight": many_in_flight,
    "barrier": barrier,
    "refusals": refusals,
    "ddp": ddp,
    "fsdp2": fsdp2,
}


def main() -> None:
    global RANK, WORLD, DEV
    rank, world, store_file, out_dir, backend = sys.argv[1:6]
    RANK, WORLD = int(rank), int(world)
    import torch_infini  # noqa: F401

    global GROUP, MODE
    DEV = torch.device("infini", RANK)
    torch.infini.set_device(DEV)
    dist.init_process_group(backend, init_method=f"file://{store_file}", rank=RANK, world_size=WORLD)
    # A second group of the same ranks with staging forced (read at creation).
    os.environ["TORCH_INFINI_DISTRIBUTED_STAGING"] = "1"
    staged = dist.new_group(backend=backend)
    del os.environ["TORCH_INFINI_DISTRIBUTED_STAGING"]
    results: dict[str, str | None] = {}
    for MODE, GROUP in (("direct", None), ("staged", staged)):
        for name, scenario in SCENARIOS.items():
            key = f"{name}@{MODE}"
            print(f"rank {RANK}: {key}", flush=True)  # the log shows where a run hangs
            try:
                scenario()
                torch.infini.synchronize()
                results[key] = None
            except Exception:
                results[key] = traceback.format_exc()
            # A failed scenario can leave a rank behind: line the ranks up again.
            dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{RANK}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
