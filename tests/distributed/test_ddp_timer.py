"""DDP's runtime statistics on infini (csrc/distributed/InfiniTimer.cpp): the
Reducer finds a timer for the device type, so its forward, backward compute
and communication times are measured (on the device's events), as on CUDA,
and PyTorch does not warn that it collects them only for CPU and CUDA."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from hang_guard import HANG_GUARD_S

SCRIPT = r"""
import json, os, torch, torch.distributed as dist, torch_infini
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("cpu:gloo,infini:infini", rank=0, world_size=1)
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64).to("infini"))
for _ in range(12):  # DDP samples its statistics from the first iterations on
    ddp(torch.randn(8, 64, device="infini")).sum().backward()
data = ddp._get_ddp_logging_data()
print(json.dumps({k: data.get(k) for k in
                  ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time")}))
"""


def test_ddp_measures_its_runtime_statistics_on_infini():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, nanoseconds in stats.items():
        assert isinstance(nanoseconds, int) and nanoseconds > 0, (key, stats)
    assert "Time stats are currently only collected" not in proc.stderr, proc.stderr[-4000:]
