#!/usr/bin/env bash
# The bundled kernels' speed against cuBLAS (issue 18's tables): the default variant of steps 8, 10, 11 and 12 (step
# 12 with B stored K x N and N x K: 'hgemm_wgmma_ws' selects hgemm_wgmma_ws_nxk_* too) and both variants of step 13
# (FP8, against cuBLASLt's FP8 GEMM with the same block scales) at 4096^3 and 8192^3 (alpha 1, beta 0) in RUNS
# separate pytest runs, then the tensor-core steps on the llm shapes LLM_RUNS times; research/kernel_speed.py prints
# the tables from the saved benchmark JSON (tables.md: every shape; square.md: 4096^3 and 8192^3 side by side).
# Usage: research/kernel-speed.sh OUT [RUNS (default 3)] [LLM_RUNS (default 1)]
#   KERNELS: which kernel files (space-separated; default every step above), e.g. KERNELS=kernels/13_fp8_wgmma.cu
set -uo pipefail
out=${1:?usage: research/kernel-speed.sh OUT [RUNS] [LLM_RUNS]}
runs=${2:-3}
llm_runs=${3:-1}
mkdir -p "$out"
defaults="(sgemm_warp_tile and BN256-BK32) or (hgemm_mma_fp16 and BK32-STAGES4) or (hgemm_mma_bf16 and BK32-STAGES3)"
defaults+=" or (hgemm_mma_tma and TILE_N128) or hgemm_mma_ws or (hgemm_wgmma_bf16 and STAGES4) or (hgemm_wgmma_ws and CLUSTER1-EPI1)"
defaults+=" or fp8_wgmma_ws"
every="kernels/08_warp_tiling.cu kernels/10_mma_sync.cu kernels/10_mma_sync_ws.cu kernels/11_wgmma_tma.cu"
every+=" kernels/12_wgmma_ws.cu kernels/13_fp8_wgmma.cu"
read -r -a files <<<"${KERNELS:-$every}"
tensor_cores=()  # the llm shapes: every step but the fp32 one
for f in "${files[@]}"; do [[ $f == *08_warp_tiling.cu ]] || tensor_cores+=("$f"); done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv >"$out/gpu.txt" 2>&1
for i in $(seq 1 "$runs"); do
    python3 -m pytest -q -p no:randomly -p no:cacheprovider --gemm-kernels "${files[@]}" --gemm-shapes 4096,8192 \
        -k "($defaults) and (4096x4096x4096] or 8192x8192x8192])" --benchmark-json "$out/square-$i.json" \
        >"$out/square-$i.log" 2>&1
    echo "square run $i: exit $?: $(tail -n 1 "$out/square-$i.log")"
done
[ ${#tensor_cores[@]} -eq 0 ] && llm_runs=0  # (an empty file list would make pytest take the ini's kernels/)
for i in $(seq 1 "$llm_runs"); do
    python3 -m pytest -q -p no:randomly -p no:cacheprovider --gemm-kernels "${tensor_cores[@]}" --gemm-shapes llm \
        -k "($defaults) and not (a0.7b1.3 or a-1.5b0)" --benchmark-json "$out/llm-$i.json" >"$out/llm-$i.log" 2>&1
    echo "llm run $i: exit $?: $(tail -n 1 "$out/llm-$i.log")"
done
python3 research/kernel_speed.py "$out"/square-*.json "$out"/llm-*.json | tee "$out/tables.md"
python3 research/kernel_speed.py --square "$out"/square-*.json | tee "$out/square.md"
