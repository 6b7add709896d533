#!/usr/bin/env bash
# Timing acceptance on the GPU: the harness against Nsight Compute, and run-to-run stability.
# Usage: research/timing-acceptance.sh OUTDIR   (called by gpu-check.sh with GEMM_ACCEPTANCE=1)
#   ACCEPTANCE_KERNELS, ACCEPTANCE_K: the kernel file and the -k expression of the one case (default: the naive
#   kernel at 4096^3); ACCEPTANCE_NCU_NAME: its GPU kernel's name where it differs from the test's (a Triton
#   kernel is named after its @triton.jit function)
set -uo pipefail
out="$1"
mkdir -p "$out/acceptance"
case=(--gemm-kernels "${ACCEPTANCE_KERNELS:-kernels/01_naive.cu}" --gemm-shapes 4096
      -k "${ACCEPTANCE_K:-sgemm_naive and not a0.7 and not a-1.5}" -m gpu -q --gemm-timeout 300)
# 1. The same case in 5 separate runs: kernel/cuBLAS ratios should agree within 1%.
for i in 1 2 3 4 5; do
    python3 -m pytest -p no:cacheprovider "${case[@]}" --benchmark-json "$out/acceptance/repeat-$i.json" \
        >"$out/acceptance/repeat-$i.log" 2>&1 || echo "repeat $i failed"
done
# 2. The same launches under Nsight Compute (clocks left alone, caches flushed as ours are).
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/acceptance/ncu.csv" \
    python3 -m pytest -p no:cacheprovider "${case[@]}" --gemm-max-time 0 \
    --benchmark-json "$out/acceptance/under-ncu.json" >"$out/acceptance/ncu-run.log" 2>&1 || echo "ncu run failed"
python3 research/ncu_compare.py "$out/acceptance" ${ACCEPTANCE_NCU_NAME:+"$ACCEPTANCE_NCU_NAME"} \
    | tee "$out/acceptance/summary.txt"
# 3. pytest-benchmark's own command line opens the saved runs.
python3 -c "from pytest_benchmark.cli import main; main()" compare "$out/acceptance/repeat-1.json" \
    "$out/acceptance/repeat-2.json" --columns=min,median,max,rounds >"$out/acceptance/compare.txt" 2>&1
echo "== pytest-benchmark compare: exit $? ($(wc -l <"$out/acceptance/compare.txt") lines)"
