#!/usr/bin/env bash
# The gate across a whole run's cases (docs/baselines.md#the-runs-false-alarms), on the GPU, in a scratch copy of
# the project: baselines recorded once for the selection, then RUNS runs with the naive kernel WASTE% slower (5, then
# 8: tests/kernels_slow/naive_slower.cu), every other case unchanged. Each run's saved JSON says, per case, the gate's
# verdict; research/gate_fdr.py counts the unchanged cases that failed (false regressions), the slowed cases caught,
# and the flagged cases a re-timing cleared.
# Usage: research/gate-fdr.sh OUTDIR [pytest selection, default: kernels/ on the quick shapes]
#   RUNS      runs for each planted slowdown (default 10)
#   WASTES    the planted slowdowns, in percent of K (default "5 8")
#   GATE_WORK the scratch copy, kept so that a later call goes on where this one stopped: its baselines are recorded
#             once, and a run whose JSON is already in OUTDIR is not run again (default: a temporary one, removed)
set -uo pipefail
out="$1"
shift
repo=$(pwd)
mkdir -p "$out/fdr"
work=${GATE_WORK:-$(mktemp -d)}
mkdir -p "$work"
[ -d "$work/kernels" ] || cp -r kernels pyproject.toml "$work"/
cd "$work"
sel=("$@")
[ ${#sel[@]} -eq 0 ] && sel=(--gemm-kernels kernels/ --gemm-shapes quick)
sel+=(-m gpu -q)  # the scratch copy's compile cache: only the recording compiles
[ -f naive.orig ] || cp kernels/01_naive.cu naive.orig
if [ ! -f recorded ]; then
    python3 -m pytest "${sel[@]}" --gemm-update-baselines >"$out/fdr/record.log" 2>&1 && touch recorded
    echo "== baselines ($SECONDS s): $(grep -E 'json:|passed|failed' "$out/fdr/record.log" | tail -2)"
fi
for waste in ${WASTES:-5 8}; do
    sed "s/^#define WASTE_PERCENT .*/#define WASTE_PERCENT $waste/" "$repo/tests/kernels_slow/naive_slower.cu" \
        >kernels/01_naive.cu
    for i in $(seq 1 "${RUNS:-10}"); do
        json="$out/fdr/waste$waste-$i.json"
        [ -f "$json" ] && continue
        log="$out/fdr/waste$waste-$i.log"
        python3 -m pytest "${sel[@]}" --benchmark-json "$json.part" >"$log" 2>&1
        rc=$?
        [ -f "$json.part" ] && mv "$json.part" "$json"
        echo "waste $waste% run $i (exit $rc, $SECONDS s): $(grep -E '^kernel/cuBLAS time ratio' "$log")"
    done
done
cp naive.orig kernels/01_naive.cu
cd "$repo"
[ -z "${GATE_WORK:-}" ] && rm -rf "$work"
python3 research/gate_fdr.py "$out"/fdr/waste*.json | tee "$out/fdr/summary.txt"
