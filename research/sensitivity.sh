#!/usr/bin/env bash
# The regression gate's sensitivity at --gemm-threshold 0.01 (issue: measurement fidelity and speed), in a scratch
# copy of the project: fresh baselines for sgemm_naive at 4096^3 (its 3 alpha/beta cases), then RUNS unchanged runs
# (none may regress) and RUNS runs of tests/kernels_slow/naive_slower.cu at 2% more work (every case should regress).
# Usage: research/sensitivity.sh OUTDIR [RUNS]   (default 5; from the repository root, on a GPU machine)
set -uo pipefail
out="$1"
runs="${2:-5}"
repo=$(pwd)
mkdir -p "$out"
work=$(mktemp -d)
cp -r kernels pyproject.toml "$work"/
cd "$work"
sel=(--gemm-kernels kernels/01_naive.cu --gemm-shapes 4096 -m gpu -p no:cacheprovider -q --gemm-threshold 0.01)
python3 -m pytest "${sel[@]}" --gemm-update-baselines >"$out/record.log" 2>&1
echo "== fresh baselines: $(tail -n 1 "$out/record.log")"
for kind in unchanged 2pct; do
    [ "$kind" = 2pct ] && sed 's/^#define WASTE_PERCENT .*/#define WASTE_PERCENT 2/' \
        "$repo/tests/kernels_slow/naive_slower.cu" >kernels/01_naive.cu
    for i in $(seq 1 "$runs"); do
        python3 -m pytest "${sel[@]}" --gemm-summary "$out/$kind-$i.md" >"$out/$kind-$i.log" 2>&1
        echo "$kind run $i (exit $?): $(tail -n 1 "$out/$kind-$i.log")"
        grep -E "^\| \`kernels" "$out/$kind-$i.md" | awk -F'|' '{print "    " $2 $3 $7}'
    done
done
cd "$repo"
rm -rf "$work"
