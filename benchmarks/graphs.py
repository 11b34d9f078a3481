#!/usr/bin/env python
"""Graph replay vs eager: the decoder-block forward of benchmarks/models.py.

    python benchmarks/graphs.py [--quick] [--reps N] [--iters N] [--json PATH] [--check]

The block (RMSNorm, rotary embedding, causal attention, SiLU-gated MLP) is
many small kernels: eager dispatch pays its per-operator cost on every call,
a replay queues the captured kernels again without it. Both sides run in one
process, interleaved (eager rep, replay rep, ...); one repetition is
``--iters`` forwards, then ``torch.infini.synchronize()`` before the clock
stops. The table shows the median wall time per forward of each side and
their ratio (replay / eager; the target on the host runtime is at most 0.5),
and the process CPU time (user + sys) per forward, which is less sensitive to
other load on the machine. The replay's output is checked against eager's
first. ``--check`` makes a ratio above the target the exit status 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import torch_infini  # noqa: E402,F401

from models import DecoderBlock  # noqa: E402

TARGET = 0.5


def timed(body, iters: int) -> tuple[float, float]:
    """Wall and CPU seconds per call of ``iters`` calls of ``body``, synchronized."""
    torch.infini.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iters):
        body()
    torch.infini.synchronize()
    return (time.perf_counter() - wall) / iters, (time.process_time() - cpu) / iters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a few seconds)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per side (default 5 quick, 11 full)")
    parser.add_argument("--iters", type=int, default=None, help="forwards per repetition (default 20 quick, 50 full)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--check", action="store_true", help=f"exit 1 if replay/eager exceeds {TARGET}")
    args = parser.parse_args()
    reps = args.reps or (5 if args.quick else 11)
    iters = args.iters or (20 if args.quick else 50)

    info = torch_infini.diagnostics()
    if not info["capabilities"]["graphs"]:
        print(f"graphs: provider {info['provider']}/{info.get('backend')} has no graph capture "
              "(capabilities.graphs=no); nothing to measure")
        return 0

    torch.manual_seed(0)
    model = DecoderBlock(max_seq=args.seq).to("infini").eval()
    static_x = torch.randn(args.batch, args.seq, 64, device="infini")

    with torch.no_grad():
        side = torch.infini.Stream()
        side.wait_stream(torch.infini.current_stream())
        with torch.infini.stream(side):
            for _ in range(3):
                model(static_x)
        torch.infini.current_stream().wait_stream(side)
        graph = torch.infini.InfiniGraph()
        with torch.infini.graph(graph):
            static_y = model(static_x)
        graph.replay()
        expected = model(static_x)
        torch.testing.assert_close(static_y, expected)

        def eager() -> None:
            model(static_x)

        def replay() -> None:
            graph.replay()

        for body in (eager, replay):  # warm both
            timed(body, 2)
        gc.disable()
        eager_wall, eager_cpu, replay_wall, replay_cpu = [], [], [], []
        try:
            for _ in range(reps):
                w, c = timed(eager, iters)
                eager_wall.append(w)
                eager_cpu.append(c)
                w, c = timed(replay, iters)
                replay_wall.append(w)
                replay_cpu.append(c)
        finally:
            gc.enable()

    ew, rw = statistics.median(eager_wall), statistics.median(replay_wall)
    ec, rc = statistics.median(eager_cpu), statistics.median(replay_cpu)
    ratio, cpu_ratio = rw / ew, rc / ec
    print(f"provider {info['provider']}, decoder block forward, batch {args.batch}, seq {args.seq}, "
          f"{reps} reps x {iters} forwards, interleaved")
    print(f"{'side':8} {'wall/forward':>14} {'cpu/forward':>14}")
    print(f"{'eager':8} {ew * 1e6:11.1f} us {ec * 1e6:11.1f} us")
    print(f"{'replay':8} {rw * 1e6:11.1f} us {rc * 1e6:11.1f} us")
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"replay/eager: wall {ratio:.3f}, cpu {cpu_ratio:.3f} ({verdict} the {TARGET} target)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"case": "graphs/decoder_block_forward", "eager_s": ew, "replay_s": rw, "ratio": ratio,
                       "eager_cpu_s": ec, "replay_cpu_s": rc, "cpu_ratio": cpu_ratio, "reps": reps,
                       "iters": iters, "provider": info["provider"]}, f, indent=1)
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
