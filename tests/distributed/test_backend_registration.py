"""The "infini" c10d backend's registration: its names, and the default
backend of a process that uses infini (as NCCL's for CUDA)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

import torch_infini

from conftest import run_python
from hang_guard import HANG_GUARD_S
from infini_testing import on_host


def test_registered_for_infini_and_cpu():
    assert torch_infini.distributed.is_available()
    assert dist.Backend.default_device_backend_map["infini"] == "infini"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"  # unchanged
    assert dist.Backend.backend_capability["infini"] == ["cpu", "infini"]
    assert dist.Backend("infini") == "infini"


def test_init_process_group_without_backend_picks_infini(tmp_path):
    result = run_python(f"""
        import torch, torch.distributed as dist
        import torch_infini
        dist.init_process_group(init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
        x = torch.full((4,), 3.0, device="infini")
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        assert torch.equal(x.cpu(), torch.full((4,), 3.0))
        # As with CUDA (cuda:nccl): the accelerator's default backend only.
        assert dist.get_backend_config() == "infini:infini", dist.get_backend_config()
        pg = dist.distributed_c10d._get_default_group()
        assert pg._get_backend(torch.device("infini")).name() == "infini"
        # InfiniCCL: all_reduce on it, or the reason it is not (this build has
        # none; its MPI backend cannot make a communicator from a unique id).
        used, why = torch_infini.distributed.infini_ccl_status()
        if torch_infini._C._infini_ccl_compiled():
            assert used != bool(why), (used, why)
        else:
            assert (used, why) == (False, "this build has no InfiniCCL (build with INFINI_CCL_PREFIX set)")
        try:
            dist.all_gather_into_tensor(torch.empty(4), x)
        except RuntimeError as e:
            assert "must all be on the CPU or all on infini:0, got a mix" in str(e), str(e)
        else:
            raise AssertionError("mixing CPU and infini tensors did not raise")
        dist.destroy_process_group()
        print("OK")
    """, env={"GLOO_SOCKET_IFNAME": "lo", "PYTHONWARNINGS": "ignore"}, timeout=HANG_GUARD_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")


@pytest.mark.skipif(not on_host(), reason="one device per rank needs the host runtime's TORCH_INFINI_HOST_DEVICES "
                                          "(InfiniRT's CPU backend has one device)")
def test_init_process_group_without_backend_then_ddp_in_two_processes(tmp_path):
    """The third form docs/distributed.md shows, in 2 processes with DDP:
    after one step the ranks' parameters agree and equal a single-process
    CPU step on the whole batch."""
    import subprocess
    import sys

    script = tmp_path / "ddp_no_backend.py"
    script.write_text(f"""
import sys, torch, torch.distributed as dist
import torch_infini
rank = int(sys.argv[1])
dist.init_process_group(init_method="file://{tmp_path / 'store'}", rank=rank, world_size=2)
torch.infini.set_device(rank)
torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
ref = torch.nn.Linear(4, 3)
ref.load_state_dict(model.state_dict())
x, y = torch.randn(8, 4), torch.randn(8, 3)
ddp = torch.nn.parallel.DistributedDataParallel(model.to(f"infini:{{rank}}"))
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
part = slice(4 * rank, 4 * rank + 4)
torch.nn.functional.mse_loss(ddp(x[part].to(f"infini:{{rank}}")), y[part].to(f"infini:{{rank}}")).backward()
opt.step()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
torch.nn.functional.mse_loss(ref(x), y).backward()
ref_opt.step()
for got, want in zip(model.parameters(), ref.parameters()):
    torch.testing.assert_close(got.detach().cpu(), want.detach())
dist.destroy_process_group()
print("OK", rank)
""")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONWARNINGS="ignore", TORCH_INFINI_HOST_DEVICES="2",
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=HANG_GUARD_S) for p in procs]
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r}:\n{err[-3000:]}"
        assert out.strip() == f"OK {r}", out
