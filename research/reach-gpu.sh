#!/usr/bin/env bash
# Issue 34 on the GPU: storage orders, size types, declared accumulation, the mixed-output peer, misreadings, the
# false-alarm sweep, step 12's N x K variant and third-party kernels; each step's command, exit code, wall time and
# the lines that matter go to OUTDIR/reach-gpu.txt, full logs beside it.
# Usage: research/reach-gpu.sh OUTDIR [PARTS]   (from the repo root, after `pip install -e .`)
#   PARTS (comma-separated, default all but thirdparty): orders, batched, sweep, step12, step12-time, thirdparty,
#   batched-time (the strided-batched kernels timed against cuBLAS's strided-batched GEMM)
#   GEMM_TIME_RUNS how many timed runs of step 12 (default 3: the median of 3 runs)
#   GEMM_SWEEP_SEEDS seeds of the false-alarm sweep (default 20); GEMM_THIRDPARTY_DIR (default .thirdparty/issue34)
set -uo pipefail
out="$1"
parts="${2:-orders,batched,sweep,step12,step12-time}"
sum="$out/reach-gpu.txt"
. "$(dirname "$0")/step.sh"
sweep_pattern="sweep:|passed|failed|Error"
# The correctness steps share the GPU: the sweep runs beside the others (none of them is timed); timing runs alone.
if want sweep; then
    step sweep "${GEMM_SWEEP_LIMIT:-560}" "$sweep_pattern" "${p[@]}" tests/gpu/test_gpu_false_alarms.py -q -s &
fi
want orders && step orders 150 "passed|failed|Error|FAILED|matches|parameter" \
    "${p[@]}" tests/gpu/test_gpu_orders.py tests/gpu/test_gpu_misreadings.py -k "orders or cupy" -q
want batched && step batched 200 "passed|failed|FAILED|Error|matches|gap" \
    "${p[@]}" tests/gpu/test_gpu_batched.py -q
want step12 && step step12 120 "passed|failed|FAILED|Error" \
    "${p[@]}" --gemm-kernels kernels/12_wgmma_ws.cu --gemm-shapes quick,100x640x72 --benchmark-skip -q -k nxk
want thirdparty && step thirdparty 200 "passed|failed|FAILED|Error|skipped|  - " "${p[@]}" -q \
    --gemm-kernels "${GEMM_THIRDPARTY_DIR:-.thirdparty/issue34}" \
    --gemm-shapes quick,2048,256x256x32,256x256x64,100x120x64 --benchmark-skip
wait
want batched-time && step batched-time 150 "passed|failed|FAILED|Error|sgemm_batched|%" "${p[@]}" -q \
    --gemm-kernels tests/kernels_batched/batched.cu --gemm-shapes 512x512x128b16,2048x2048x2048b4 \
    -k "(sgemm_batched and BKxN-CMxN) or batched_long_strides"
if want step12-time; then
    for i in $(seq 1 "${GEMM_TIME_RUNS:-3}"); do
        step "step12-time-$i" 150 "passed|failed|FAILED|Error" "${p[@]}" -q --gemm-kernels kernels/12_wgmma_ws.cu \
            --gemm-shapes 4096,8192 -k "CLUSTER1-EPI1 and (4096x4096x4096] or 8192x8192x8192])" \
            --benchmark-json "$out/square-$i.json"
    done
    step step12-speed 60 "\|" python3 research/kernel_speed.py --square "$out"/square-*.json
fi
cat "$sum"
