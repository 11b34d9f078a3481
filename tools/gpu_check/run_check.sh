#!/usr/bin/env bash
# The GPU check (docs/gpu-check.md). Run from the torch-infini checkout, with
# the bundle that tools/gpu_check/build_bundle.py built:
#
#   OUT=/path/to/results bash gpu-bundle/check/run_check.sh
#
# No network, no pip: the bundle's libraries and wheels are unpacked into a
# temporary folder. Each part runs under its own time limit (8 minutes in
# all) and writes its result file as soon as it starts, so a part that is
# killed or crashes never loses the others'. Files written to $OUT (7):
#   machine.json suite.json opinfo.json gpt2.json timings.json summary.md log.txt
# GPU_CHECK_PYTHON (default python3) is the interpreter with PyTorch.
# GPU_CHECK_MINUTES (default 8) scales every part's limit: 4 for a second,
# shorter run in what is left of a device lease.
set -u
CHECK=$(cd "$(dirname "$0")" && pwd)
BUNDLE=$(dirname "$CHECK")
export GPU_CHECK_REPO=$PWD
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${GPU_CHECK_PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
export GPU_CHECK_WORK=$WORK PYTHONWARNINGS=ignore PYTHONDONTWRITEBYTECODE=1
LOG=$OUT/log.txt
: > "$LOG"
: > "$WORK/parts.tsv"

MINUTES=${GPU_CHECK_MINUTES:-8}
# scaled S: S seconds of an 8-minute check, scaled to GPU_CHECK_MINUTES.
scaled() { echo $(( $1 * MINUTES / 8 )); }

# part NAME LIMIT_S COMMAND...: runs COMMAND under LIMIT_S seconds (scaled);
# its output goes to log.txt (the last 150 lines), its minutes to summary.md.
part() {
  local name=$1 limit
  limit=$(scaled "$2")
  shift 2
  local start=$(date +%s%N)
  timeout -k 5 "$limit" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  local end=$(date +%s%N)
  { echo "===== $name (exit $rc, limit ${limit}s) ====="; tail -n 150 "$WORK/$name.log"; } >> "$LOG"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( (end - start) / 1000000 ))" "$limit" >> "$WORK/parts.tsv"
}

if [ ! -f "$GPU_CHECK_REPO/tools/opinfo_sweep.py" ] || [ ! -d "$GPU_CHECK_REPO/tests" ]; then
  echo "run_check.sh: run it from the torch-infini checkout (tests/ and tools/ not found in $PWD)" | tee -a "$LOG"
  exit 2
fi
# An in-place build makes tests/conftest.py test the checkout's torch_infini/
# (built for another Python or PyTorch) instead of the bundle's wheel.
if [ -f "$GPU_CHECK_REPO/torch_infini/_build_info.json" ]; then
  echo "run_check.sh: $GPU_CHECK_REPO/torch_infini has an in-place build (_build_info.json), which the tests" \
       "would import instead of the bundle's wheel: run from a copy of the checkout without it" \
       "(docs/gpu-check.md, 'The dry run here')" | tee -a "$LOG"
  exit 2
fi
# The install is not scaled: it takes what unpacking takes.
MINUTES=8 part install 40 "$PY" "$CHECK/install_bundle.py" "$BUNDLE" "$WORK"
# shellcheck disable=SC1091
[ -f "$WORK/env.sh" ] && . "$WORK/env.sh"
# Each Python part's own budget ends a few seconds before its limit, so it
# writes its result itself.
part machine 45 "$PY" "$CHECK/facts.py" "$OUT" --bundle "$BUNDLE" --budget "$(scaled 40)"
part suite 150 "$PY" "$CHECK/suite.py" "$OUT" --budget "$(scaled 140)"
part opinfo 110 "$PY" "$CHECK/opinfo.py" "$OUT" --budget "$(scaled 100)"
part gpt2 45 "$PY" "$CHECK/gpt2.py" "$OUT" --budget "$(scaled 40)"
part timings 75 "$PY" "$CHECK/timings.py" "$OUT" --budget "$(scaled 65)"
"$PY" "$CHECK/summarize.py" "$OUT" "$WORK/parts.tsv" > "$OUT/summary.md" 2>> "$LOG"
cat "$OUT/summary.md"
rm -rf "$WORK"
