#!/usr/bin/env bash
# The gate across a whole run's cases (docs/baselines.md#the-runs-false-alarms), on the GPU, in a scratch copy of
# the project: baselines recorded once for the selection with the naive kernel as tests/kernels_slow/naive_later.cu at
# 0%, then RUNS runs with each of its blocks LATER% of its time later (5, then 8), every other case unchanged. Each run's saved JSON says, per case, the gate's
# verdict; research/gate_fdr.py counts the unchanged cases that failed (false regressions), the slowed cases caught,
# and the flagged cases a re-timing cleared.
# Usage: research/gate-fdr.sh OUTDIR [pytest selection, default: kernels/ on the quick shapes]
#   RUNS      runs for each planted slowdown (default 10)
#   LATERS    the planted slowdowns, in percent of each block's time (default "5 8")
#   GATE_WORK the scratch copy, kept so that a later call goes on where this one stopped: its baselines are recorded
#             once, and a run whose JSON is already in OUTDIR is not run again (default: a temporary one, removed)
#   RECORD_ON the GPUs (CUDA_VISIBLE_DEVICES entries, e.g. "0 1") that each record the baselines, at once, one pytest
#             on each, into the same file (its lock merges them): every case then has each GPU's own record, as
#             after recording on each GPU of a host. Default: one recording, as the runs go (on every GPU seen)
set -uo pipefail
out=$(realpath -m "$1")  # absolute: the runs happen in the scratch copy
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
planted() { sed "s/^#define LATER_PERCENT .*/#define LATER_PERCENT $1/" "$repo/tests/kernels_slow/naive_later.cu" >kernels/01_naive.cu; }
if [ ! -f recorded ]; then
    planted 0
    if [ -z "${RECORD_ON:-}" ]; then
        python3 -m pytest "${sel[@]}" --gemm-update-baselines >"$out/fdr/record.log" 2>&1 && touch recorded
    else
        ok=1
        for gpu in $RECORD_ON; do
            CUDA_VISIBLE_DEVICES=$gpu python3 -m pytest "${sel[@]}" --gemm-update-baselines >"$out/fdr/record-$gpu.log" 2>&1 &
        done
        for job in $(jobs -p); do wait "$job" || ok=0; done
        cat "$out"/fdr/record-*.log >"$out/fdr/record.log"
        [ $ok = 1 ] && touch recorded
    fi
    echo "== baselines ($SECONDS s): $(grep -E 'json:|passed|failed' "$out/fdr/record.log" | tail -2)"
fi
for later in ${LATERS:-5 8}; do
    planted "$later"
    for i in $(seq 1 "${RUNS:-10}"); do
        json="$out/fdr/later$later-$i.json"
        [ -f "$json" ] && continue
        log="$out/fdr/later$later-$i.log"
        python3 -m pytest "${sel[@]}" --benchmark-json "$json.part" >"$log" 2>&1
        rc=$?
        [ -f "$json.part" ] && mv "$json.part" "$json"
        echo "later $later% run $i (exit $rc, $SECONDS s): $(grep -E '^kernel/cuBLAS time ratio' "$log")"
    done
done
cp naive.orig kernels/01_naive.cu
cd "$repo"
[ -z "${GATE_WORK:-}" ] && rm -rf "$work"
python3 research/gate_fdr.py "$out"/fdr/later*.json | tee "$out/fdr/summary.txt"
