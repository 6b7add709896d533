#!/usr/bin/env bash
# Regression-gate acceptance on the GPU, in a scratch copy of the project:
#   fresh baselines for sgemm_naive at 2048^3 and 4096^3 (3 alpha/beta cases each), then 5 unchanged runs,
#   5 runs with a ~10% slower naive kernel, 5 with a ~3% slower one (threshold 5%, then 2%).
# Then records the bundled kernels' baselines (quick and standard shapes) into OUTDIR/baselines.
# Usage: research/gate-acceptance.sh OUTDIR   (called by gpu-check.sh with GEMM_ACCEPTANCE=1)
set -uo pipefail
out="$1"
repo=$(pwd)
mkdir -p "$out/gate"
work=$(mktemp -d)
cp -r kernels pyproject.toml "$work"/
cd "$work"
sel=(--gemm-kernels kernels/01_naive.cu --gemm-shapes 2048,4096 -m gpu -p no:cacheprovider -q)
python3 -m pytest "${sel[@]}" --gemm-update-baselines >"$out/gate/record.log" 2>&1
echo "== fresh baselines: $(grep -E '^baselines/' "$out/gate/record.log")"
for kind in unchanged 10pct 3pct 3pct-threshold-2pct; do
    extra=()
    case $kind in
        10pct) sed 's/^#define WASTE_PERCENT .*/#define WASTE_PERCENT 10/' "$repo/tests/kernels_slow/naive_slower.cu" \
            >kernels/01_naive.cu ;;
        3pct) sed 's/^#define WASTE_PERCENT .*/#define WASTE_PERCENT 3/' "$repo/tests/kernels_slow/naive_slower.cu" \
            >kernels/01_naive.cu ;;
        3pct-threshold-2pct) extra=(--gemm-threshold 0.02) ;;
    esac
    for i in 1 2 3 4 5; do
        log="$out/gate/$kind-$i.log"
        python3 -m pytest "${sel[@]}" "${extra[@]}" --gemm-summary "$out/gate/$kind-$i.md" >"$log" 2>&1
        echo "$kind run $i (exit $?): $(grep -E '^kernel/cuBLAS time ratio' "$log")"
        grep -E "^\| \`kernels" "$out/gate/$kind-$i.md" | awk -F'|' '{print "    " $2 $3 $7}'
    done
done
cd "$repo"
rm -rf "$work"
# The bundled kernels' baselines on this GPU, for the repository.
python3 -m pytest -p no:cacheprovider --gemm-kernels kernels/ --gemm-shapes quick,standard -m gpu -q \
    --gemm-update-baselines --gemm-baselines "$out/baselines" >"$out/gate/bundled-baselines.log" 2>&1
echo "== bundled baselines: $(grep -E 'json:' "$out/gate/bundled-baselines.log")"
