"""summary.md of the GPU check: each part's status and minutes, then the
figures of each result file.

    python tools/gpu_check/summarize.py OUT_DIR PARTS_TSV
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(out: Path, name: str) -> dict:
    try:
        return json.loads((out / name).read_text())
    except (OSError, json.JSONDecodeError) as error:
        return {"status": f"no result ({type(error).__name__})"}


def fmt(value) -> str:
    if isinstance(value, dict) and "value" in value:
        return f"{value['value']:.4g}"
    if isinstance(value, dict) and "error" in value:
        return f"error: {value['error']}"
    return str(value)


def main() -> None:
    out, parts = Path(sys.argv[1]), Path(sys.argv[2])
    lines = ["# GPU check", "", "| part | exit | minutes | limit (s) |", "|---|---|---|---|"]
    total = 0.0
    for row in parts.read_text().splitlines():
        name, rc, ms, limit = row.split("\t")
        minutes = int(ms) / 60000
        total += minutes
        note = " (killed at its limit)" if rc in ("124", "137") else ""
        lines.append(f"| {name} | {rc}{note} | {minutes:.2f} | {limit} |")
    lines.append(f"| total | | {total:.2f} | |")

    machine = load(out, "machine.json")
    torch_facts = machine.get("torch", {}) if isinstance(machine.get("torch"), dict) else {}
    infini = machine.get("infini", {}) if isinstance(machine.get("infini"), dict) else {}
    lines += ["", "## Machine", "",
              f"- GPU: {machine.get('nvidia_smi', '?')}; cores {machine.get('cores')}, {machine.get('memory_gib')} GiB",
              f"- PyTorch {torch_facts.get('torch')} (CUDA {torch_facts.get('torch_cuda')}); cuda: {torch_facts.get('cuda')}",
              f"- infini: provider {infini.get('provider')}, backend {infini.get('backend')} ({infini.get('reason')})"]

    suite = load(out, "suite.json")
    lines += ["", "## Stack suite (a bounded part of tests/, suite.json)", "",
              f"- status: {suite.get('status')}; shards {suite.get('shards')}; stopped by budget: "
              f"{suite.get('stopped_by_budget')}",
              f"- collected {suite.get('collected')}: {suite.get('counts')}",
              f"- failures: {suite.get('failures_total')} (first {suite.get('failures_listed')} in suite.json)"]

    opinfo = load(out, "opinfo.json")
    lines += ["", "## OpInfo float32 forward, infini vs CPU (opinfo.json)", "",
              f"- status: {opinfo.get('status')}; one case in {opinfo.get('every')}: selected {opinfo.get('selected')}, "
              f"run {opinfo.get('run')}, not run {opinfo.get('not_run')}",
              f"- served {opinfo.get('passed')} (rate {opinfo.get('served_rate')}), refused {opinfo.get('refused')}, "
              f"wrong values {opinfo.get('wrong')}, other errors {opinfo.get('error')}, crashed/timed out "
              f"{(opinfo.get('crashed') or 0) + (opinfo.get('timed_out') or 0)}"]

    gpt2 = load(out, "gpt2.json")
    lines += ["", "## GPT-2-tiny training losses (gpt2.json)", "", f"- status: {gpt2.get('status')}"]
    for device, losses in (gpt2.get("losses") or {}).items():
        lines.append(f"- {device}: {losses}")
    if gpt2.get("infini_fallback_ops"):
        lines.append(f"- operators run on the CPU by the fallback (calls): {gpt2['infini_fallback_ops']}")
    lines.append(f"- largest difference from CPU: {gpt2.get('max_abs_diff_from_cpu')}")

    timings = load(out, "timings.json")
    lines += ["", "## Timings, infini vs cuda (timings.json)", "", f"- status: {timings.get('status')}", "",
              "| case | unit | infini | cuda | note |", "|---|---|---|---|---|"]
    for case, record in (timings.get("cases") or {}).items():
        if isinstance(record, dict):
            notes = [record["note"]] if record.get("note") else []
            if "infini_with_cpu_fallback" in record:
                notes.append(f"infini with the CPU fallback: {fmt(record['infini_with_cpu_fallback'])} "
                             f"(on the CPU, calls: {record.get('infini_fallback_ops')})")
            lines.append(f"| {case} | {record.get('unit')} | {fmt(record.get('infini'))} | {fmt(record.get('cuda'))} | "
                         f"{'; '.join(notes)} |")
        else:
            lines.append(f"| {case} | | {record} | | |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
