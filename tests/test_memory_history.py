"""The memory timeline: torch.infini.memory._record_memory_history, _snapshot
and _dump_snapshot in torch.cuda.memory's format, checked against the
allocator's own accounting and drawn by PyTorch's own reader of that format
(torch.cuda._memory_viz: segsum, trace, trace_plot, segment_plot).
"""

from __future__ import annotations

import base64
import gc
import json
import pickle
import re

import pytest
import torch
from torch.cuda import _memory_viz

from infini_testing import hold

memory = torch.infini.memory
KiB = 1024


@pytest.fixture(autouse=True)
def _recording_off():
    """Each test starts with an empty history and leaves recording off."""
    gc.collect()
    memory._record_memory_history(None)
    yield
    memory._record_memory_history(None)


def _allocate_here(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device="infini")


def _trace(snapshot: dict) -> list[dict]:
    return snapshot["device_traces"][torch.infini.current_device()]


def _names(frames: list[dict]) -> list[str]:
    return [f["name"] for f in frames]


def test_alloc_and_free_are_traced_with_their_python_stacks():
    memory._record_memory_history(max_entries=1000)
    t = _allocate_here(3 * KiB)
    addr = t.data_ptr()
    del t
    trace = _trace(memory._snapshot())
    # A new segment's first block has the segment's address: blocks only.
    mine = [e for e in trace if e.get("addr") == addr and not e["action"].startswith("segment")]
    actions = [e["action"] for e in mine]
    assert actions[:3] == ["alloc", "free_requested", "free_completed"]
    alloc = mine[0]
    assert alloc["size"] == 3 * KiB  # 512-byte rounded, as CUDA's
    assert "_allocate_here" in _names(alloc["frames"])
    assert any(f["filename"] == __file__ for f in alloc["frames"])
    assert all(set(f) >= {"filename", "line", "name"} for f in alloc["frames"])
    # context="all": the free has the stack that dropped the tensor.
    assert "test_alloc_and_free_are_traced_with_their_python_stacks" in _names(mine[1]["frames"])
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)


def test_live_blocks_name_their_allocating_stack_and_the_accounting_agrees():
    memory._record_memory_history("state")
    keep = [_allocate_here(KiB), _allocate_here(2 << 20)]
    snapshot = memory._snapshot()
    assert _trace(snapshot) == []  # "state" keeps no trace
    blocks = {b["address"]: b for s in snapshot["segments"] for b in s["blocks"]}
    for t in keep:
        block = blocks[t.data_ptr()]
        assert block["state"] == "active_allocated"
        assert block["requested_size"] == t.numel()
        assert "_allocate_here" in _names(block["frames"])
    device = torch.infini.current_device()
    segments = [s for s in snapshot["segments"] if s["device"] == device]
    assert sum(s["allocated_size"] for s in segments) == torch.infini.memory_allocated(device)
    assert sum(s["total_size"] for s in segments) == torch.infini.memory_reserved(device)


def test_a_free_waiting_for_another_stream_is_pending_until_that_work_is_done():
    memory._record_memory_history()
    side = torch.infini.Stream()
    t = _allocate_here(KiB)
    addr = t.data_ptr()
    with torch.infini.stream(side):
        t.add_(1)  # once before the hold: a first call of a kind may run directly, waiting for the stream
    # Long enough to outlast the lines below on a loaded machine (300 ms
    # once did not): the free must find the side stream's work pending.
    hold(side, 1000)
    with torch.infini.stream(side):
        t.add_(1)  # queued behind the hold
    t.record_stream(side)
    del t
    states = {b["address"]: b["state"] for s in memory._snapshot()["segments"] for b in s["blocks"]}
    assert states[addr] == "active_pending_free"
    side.synchronize()
    torch.infini.memory_allocated()  # completes finished frees
    trace = [e["action"] for e in _trace(memory._snapshot())
             if e.get("addr") == addr and not e["action"].startswith("segment")]
    assert trace[-2:] == ["free_requested", "free_completed"]


def test_max_entries_keeps_the_last_ones_and_none_stops_and_clears():
    memory._record_memory_history(max_entries=4)
    for _ in range(5):
        _allocate_here(KiB)
    trace = _trace(memory._snapshot())
    assert len(trace) == 4
    # The newest: the last free, then the snapshot itself (as CUDA records it).
    assert [e["action"] for e in trace[-2:]] == ["free_completed", "snapshot"]
    memory._record_memory_history(None)
    _allocate_here(KiB)
    assert _trace(memory._snapshot()) == []


def test_skip_actions_and_context_alloc():
    memory._record_memory_history(context="alloc", skip_actions=["free_completed"])
    _allocate_here(KiB)
    trace = _trace(memory._snapshot())
    actions = {e["action"] for e in trace}
    assert "free_completed" not in actions and {"alloc", "free_requested"} <= actions
    frees = [e for e in trace if e["action"] == "free_requested"]
    assert all(e["frames"] == [] for e in frees)  # "alloc": stacks on allocations only
    with pytest.raises(RuntimeError, match="unknown action 'nope'"):
        memory._record_memory_history(skip_actions=["nope"])
    with pytest.raises(RuntimeError, match="enabled must be"):
        memory._record_memory_history("sometimes")


def test_out_of_memory_is_traced_with_the_free_device_memory():
    memory._record_memory_history()
    free, _total = torch.infini.mem_get_info()
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(free + (1 << 40), dtype=torch.uint8, device="infini")
    ooms = [e for e in _trace(memory._snapshot()) if e["action"] == "oom"]
    assert ooms and ooms[-1]["size"] == free + (1 << 40)
    assert "device_free" in ooms[-1] and "addr" not in ooms[-1]


def _decoded_html_snapshot(html: str) -> dict:
    files = json.loads(re.search(r"const local_files = (\[.*?\])\n", html).group(1))
    return pickle.loads(base64.b64decode(files[0]["base64"]))


def test_pytorch_memory_viz_reads_and_draws_the_snapshot(tmp_path):
    memory._record_memory_history()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("infini")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(32, 64, device="infini")).square().mean().backward()
        opt.step()
        opt.zero_grad()
    path = tmp_path / "snapshot.pickle"
    memory._dump_snapshot(str(path))
    snapshot = pickle.loads(path.read_bytes())
    # PyTorch's text readers of the format walk every segment, block and entry.
    summary = _memory_viz.segsum(snapshot)
    assert f"segments: {len(snapshot['segments'])}" in summary
    trace_text = _memory_viz.trace(snapshot)
    device = torch.infini.current_device()
    assert f"Device {device} ----" in trace_text
    assert f"{len(_trace(snapshot))} entries" in trace_text and "TOTAL MEM" in trace_text
    # The plots embed the snapshot for the memory_viz page, unchanged.
    for plot in (_memory_viz.trace_plot(snapshot), _memory_viz.segment_plot(snapshot)):
        assert "MemoryViz.js" in plot
        decoded = _decoded_html_snapshot(plot)
        assert decoded["device_traces"] == snapshot["device_traces"]
        assert decoded["segments"] == snapshot["segments"]
    alloc_names = {n for e in _trace(snapshot) if e["action"] == "alloc" for n in _names(e["frames"])}
    assert "test_pytorch_memory_viz_reads_and_draws_the_snapshot" in alloc_names
