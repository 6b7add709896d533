#!/usr/bin/env bash
# Multi-GPU acceptance (issue: every GPU of a host). Run on a host with two or more GPUs, from the repo root.
# Usage: research/multi-gpu-acceptance.sh OUTDIR
#   MULTI_GPU_ARGS   extra pytest arguments for every run (e.g. --gemm-max-time 0.3 to fit a device call)
#   MULTI_GPU_LIMIT  seconds each run may take (default 280)
#   one.*, all.*: the main job (quick, timed, gated) on --gemm-gpus 1 and on every GPU, with nvidia-smi sampling
#   each GPU's utilisation every 0.5 s; then compare_runs.py: verdicts, and |ratio change| per case.
set -uo pipefail
out="$1"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi -L >"$out/gpus.txt" 2>&1
run() {  # name, pytest args...
    local name=$1; shift
    nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv -lms 500 >"$out/$name-smi.csv" 2>&1 &
    local smi=$!
    local t0=$(date +%s%N)
    timeout "${MULTI_GPU_LIMIT:-280}" python3 -m pytest --gemm-kernels kernels/ -p no:randomly -q -o junit_family=legacy \
        ${MULTI_GPU_ARGS:-} "$@" \
        --junitxml="$out/$name.xml" --benchmark-json="$out/$name.json" >"$out/$name.log" 2>&1
    local rc=$?
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    kill $smi 2>/dev/null
    echo "== $name: exit $rc in $((ms / 1000)).$(printf %03d $((ms % 1000))) s: $(tail -n 1 "$out/$name.log")"
    python3 - "$out/$name-smi.csv" <<'PY'
import csv, sys
from collections import defaultdict
busy = defaultdict(list)
for row in list(csv.reader(open(sys.argv[1])))[1:]:
    if len(row) >= 3 and row[2].strip().endswith("%"):
        busy[row[1].strip()].append(float(row[2].strip(" %")))
for gpu, values in sorted(busy.items()):
    print(f"   GPU {gpu}: busy in {sum(v > 0 for v in values)} of {len(values)} samples, mean {sum(values) / len(values):.1f}%")
PY
}
run warm --gemm-shapes 256 --benchmark-skip  # compile cache and CuPy's JIT cache, outside the comparison
run one --gemm-gpus 1
run all
python3 research/compare_runs.py "$out/one.xml" "$out/one.json" "$out/all.xml" "$out/all.json" | tee "$out/compare.txt"
grep -h "GPUs, one worker each\|GPU worker process" "$out/all.log"
