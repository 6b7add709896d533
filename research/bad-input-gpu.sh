#!/usr/bin/env bash
# The bad-input rows of issue 33 that need a GPU, run as a user would (docs/bad-input.md; GPU-marked tests of these rows run with `-m gpu`); each step's command,
# exit code, wall time and the lines that matter go to OUTDIR/bad-input-gpu.txt, full logs beside it.
# Usage: research/bad-input-gpu.sh OUTDIR   (from the repo root, after `pip install -e .`)
set -uo pipefail
out="$1"
sum="$out/bad-input-gpu.txt"
. "$(dirname "$0")/step.sh"
: >"$sum"  # a fresh summary each run
naive=kernels/01_naive.cu
# row 2: buffers past the GPU's memory fail before anything is allocated, with the numbers
step too-big 300 "does not fit|needs at least|GB" "${p[@]}" --gemm-kernels $naive --gemm-shapes 100000x100000x100000 \
    -m gpu --benchmark-skip
# and near the GPU's memory: a case whose need fits is run (24576^3 fp32: about 42 GB counted), and one at the edge
# (32768^3: about 75 GB counted of an H100's 80) runs, or fails as out of memory, saying so
step fits-large 300 "does not fit|out of memory|passed|failed" "${p[@]}" --gemm-kernels kernels/03_1d_thread_tile.cu \
    --gemm-shapes 24576 -m gpu --benchmark-skip -k "fp32-24576x24576x24576]"
step near-limit 300 "does not fit|out of memory|memory|passed|failed" "${p[@]}" --gemm-kernels kernels/03_1d_thread_tile.cu \
    --gemm-shapes 32768 -m gpu --benchmark-skip -k "fp32-32768x32768x32768]"
# row 3: a shape past the kernel's int arguments is skipped at collection, with the reason
step past-int 300 "past the kernel|SKIPPED|skipped" "${p[@]}" --gemm-kernels $naive --gemm-shapes 3000000000x1x1 -m gpu
# row 73: a selection that leaves no GPU case is said, and a usage error under --gemm-require-gpu
step no-case 300 "no GPU case|error" "${p[@]}" --gemm-kernels $naive --gemm-dtypes fp64 -m gpu
step no-case-required 300 "no GPU case|error" "${p[@]}" --gemm-kernels $naive --gemm-dtypes fp64 --gemm-require-gpu
# row 62: a compile past --gemm-compile-timeout fails its variant, on the compile items and in the GPU worker
slow=$(mktemp -d)
cp tests/kernels_slow/slow_compile.cu "$slow/slow.cu"
step slow-compile 300 "compil|within|limit" "${p[@]}" --gemm-kernels "$slow/slow.cu" --gemm-shapes 256 --benchmark-skip \
    --gemm-compile-timeout 5
# the compile cache: every bundled variant compiled after --cache-clear, then none (this machine's cores)
step compile-cold 300 "passed|failed" python3 -m pytest -p no:randomly -q --gemm-kernels kernels/ -m gemm_compile --cache-clear
step compile-warm 300 "passed|failed" python3 -m pytest -p no:randomly -q --gemm-kernels kernels/ -m gemm_compile
# the README's sample run: crashing, hanging and refusing fixtures among correct kernels
step readme-sample 300 "^(spin_forever|raises|the GPU worker died|cannot launch|CUDA error)" python3 -m pytest \
    --gemm-kernels tests/kernels_faults tests/kernels_broken/faults.cu kernels/01_naive.cu \
    --gemm-shapes 256,100x100x64 --gemm-timeout 10 --benchmark-skip
cat "$sum"
