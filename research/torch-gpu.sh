#!/usr/bin/env bash
# Issue 35 on the GPU: Triton and torch kernels given torch tensors. Each step's command, exit code, wall time and the
# lines that matter go to OUTDIR/torch-gpu.txt, full logs beside it.
# Usage: research/torch-gpu.sh OUTDIR [PARTS]   (from the repo root, after `pip install -e .`)
#   PARTS (comma-separated, default tests,tutorial,thirdparty): tests (tests/gpu/test_gpu_torch.py: the kernels of
#   tests/kernels_torch verified and timed, the broken ones' diagnoses, faults), tutorial (Triton's tutorial matmul,
#   tests/kernels_torch/triton_matmul.py, on quick, standard and edge, fp16 and bf16, B in both orders, verified),
#   thirdparty (the kernels of GEMM_THIRDPARTY_DIR, default .thirdparty/issue35: Triton's tutorial TMA matmul,
#   verified on quick, standard and edge, and timed on quick and standard)
set -uo pipefail
out="$1"
parts="${2:-tests,tutorial,thirdparty}"
sum="$out/torch-gpu.txt"
. "$(dirname "$0")/step.sh"
want tests && step tests 300 "passed|failed|FAILED|Error" "${p[@]}" tests/gpu/test_gpu_torch.py -q
want tutorial && step tutorial 300 "passed|failed|FAILED|Error" "${p[@]}" -q -m gpu \
    --gemm-kernels tests/kernels_torch/triton_matmul.py -k "not (past_a or own_stream or tf32 or no_beta)" \
    --gemm-shapes quick,standard,edge --benchmark-skip
if want thirdparty; then
    dir="${GEMM_THIRDPARTY_DIR:-.thirdparty/issue35}"
    step thirdparty-verify 200 "passed|failed|FAILED|Error|skipped" "${p[@]}" -q -m gpu --gemm-kernels "$dir" \
        --gemm-shapes quick,standard,edge --benchmark-skip
    step thirdparty-timed 200 "passed|failed|FAILED|Error|autotuned|%|host|launch-bound" "${p[@]}" -q -m gpu \
        --gemm-kernels "$dir" --gemm-shapes quick,standard -v
fi
cat "$sum"
