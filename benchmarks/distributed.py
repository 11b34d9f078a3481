#!/usr/bin/env python
"""all_reduce bandwidth: infini tensors (the "infini" c10d backend: gloo over
pinned host staging, stream-ordered) against CPU tensors over gloo, in the
same run.

    python benchmarks/distributed.py [--ranks N] [--sizes-mib 1 4 16 64] [--reps R] [--json PATH]

Launches N ranks (default 2) on 127.0.0.1, in one ``"cpu:gloo,infini:infini"``
group, so both sides run on the same gloo over the same sockets. For every
size the ranks run the two sides interleaved (infini rep, gloo rep, ...); a
repetition is ``--iters`` all_reduce(SUM) calls of a float32 tensor, timed
with ``time.perf_counter`` and, on the infini side, ending with
``torch.infini.synchronize()``. A repetition's time is the slowest rank's;
the table shows the median per call, the bus bandwidth
``2 (N-1)/N * bytes / time`` of each side and ``ratio = infini_GBps /
gloo_GBps`` (1: the staging costs nothing; the issue's target is >= 0.8).

JSON (``--json PATH``): one record per size, run.py's schema with the
reference named ``gloo-cpu`` and ``ratio`` as time infini / time gloo::

    {"case": "all_reduce/<size>", "infini_s": float, "reference_s": float,
     "ratio": float, "reference": "gloo-cpu",
     "extra": {"bytes": int, "ranks": int, "infini_GBps": float, "gloo_GBps": float,
               "bandwidth_ratio": float}}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20


def worker(rank: int, world: int, store: str, args: argparse.Namespace, out: str) -> None:
    import torch
    import torch.distributed as dist

    import torch_infini  # noqa: F401

    device = torch.device("infini", rank)
    torch.infini.set_device(device)
    dist.init_process_group("cpu:gloo,infini:infini", init_method=f"file://{store}",
                            rank=rank, world_size=world)
    records = []
    for size_mib in args.sizes_mib:
        numel = int(size_mib * MiB) // 4
        cpu = torch.ones(numel)
        dev = torch.ones(numel, device=device)

        def infini_rep() -> None:
            for _ in range(args.iters):
                dist.all_reduce(dev)
            torch.infini.synchronize()

        def gloo_rep() -> None:
            for _ in range(args.iters):
                dist.all_reduce(cpu)

        sides = {"infini": infini_rep, "gloo": gloo_rep}
        times: dict[str, list[float]] = {"infini": [], "gloo": []}
        for rep in range(args.reps + 1):  # the first is a warm-up
            for name, body in sides.items():
                dist.barrier()
                start = time.perf_counter()
                body()
                elapsed = torch.tensor([time.perf_counter() - start])
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank
                if rep:
                    times[name].append(elapsed.item() / args.iters)
        # The values are world_size ** calls: a power of two, exact; check them.
        expected = float(world) ** (args.iters * (args.reps + 1))
        assert torch.equal(dev.cpu(), cpu) and cpu[0].item() == expected, "wrong results"
        t_infini = statistics.median(times["infini"])
        t_gloo = statistics.median(times["gloo"])
        nbytes = numel * 4
        bus = 2 * (world - 1) / world * nbytes
        records.append({
            "case": f"all_reduce/{size_mib:g}MiB",
            "infini_s": t_infini, "reference_s": t_gloo, "ratio": t_infini / t_gloo,
            "reference": "gloo-cpu",
            "extra": {"bytes": nbytes, "ranks": world, "infini_GBps": bus / t_infini / 1e9,
                      "gloo_GBps": bus / t_gloo / 1e9, "bandwidth_ratio": t_gloo / t_infini},
        })
        del cpu, dev
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(records, f)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes-mib", type=float, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per side and size")
    p.add_argument("--iters", type=int, default=3, help="all_reduce calls per repetition")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--worker", nargs=3, metavar=("RANK", "STORE", "OUT"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        rank, store, out = args.worker
        worker(int(rank), args.ranks, store, args, out)
        return 0
    # The float32 values are ranks ** calls: keep them finite.
    assert args.ranks ** (args.iters * (args.reps + 1)) < 2 ** 100, "too many calls for exact values"
    with tempfile.TemporaryDirectory(prefix="infini-bench-") as tmp:
        env = dict(os.environ, TORCH_INFINI_HOST_DEVICES=str(args.ranks), GLOO_SOCKET_IFNAME="lo")
        store, out = os.path.join(tmp, "store"), os.path.join(tmp, "out.json")
        passthrough = ["--ranks", str(args.ranks), "--reps", str(args.reps), "--iters", str(args.iters),
                       "--sizes-mib", *map(str, args.sizes_mib)]
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *passthrough,
                                   "--worker", str(r), store, out], env=env)
                 for r in range(args.ranks)]
        deadline = time.monotonic() + args.timeout
        status = 0
        for p in procs:
            try:
                status |= p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                print("benchmark timed out", file=sys.stderr)
                return 1
        if status or not os.path.exists(out):
            print("a rank failed", file=sys.stderr)
            return 1
        with open(out) as f:
            records = json.load(f)
    print(f"all_reduce(SUM) float32, {args.ranks} ranks on 127.0.0.1, median of {args.reps} reps "
          f"x {args.iters} calls (slowest rank)")
    print(f"{'size':>8}  {'infini ms':>10}  {'gloo-cpu ms':>11}  {'infini GB/s':>11}  "
          f"{'gloo GB/s':>9}  {'bw ratio':>8}")
    for r in records:
        e = r["extra"]
        print(f"{r['case'].split('/')[1]:>8}  {r['infini_s'] * 1e3:10.2f}  {r['reference_s'] * 1e3:11.2f}  "
              f"{e['infini_GBps']:11.2f}  {e['gloo_GBps']:9.2f}  {e['bandwidth_ratio']:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
