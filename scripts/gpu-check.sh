#!/usr/bin/env bash
# Install pytest-gemm on the GPU machine and run the GPU suite; logs and JSON go under $OUT when it is set.
# Usage: scripts/gpu-check.sh [extra pytest args for the bundled-kernel run]
set -uo pipefail
out="${OUT:-gpu-check-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
status=0
run() {  # name, pytest args...
    local name=$1; shift
    python3 -m pytest -p no:cacheprovider -rfEs -o junit_family=legacy --junitxml="$out/$name.xml" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc: $(tail -n 1 "$out/$name.log")"
    [ $rc -eq 0 ] || status=1
}
# 1. The bundled kernels, every shape set named in $GEMM_SHAPES (default: quick, edge and standard).
run kernels --gemm-kernels kernels/ --gemm-shapes "${GEMM_SHAPES:-quick,edge,standard}" "$@"
# 2. The plugin's own tests, GPU ones included (the broken-kernel fixtures, the margins).
run plugin-tests tests/ -m "gpu or not gpu"
# 3. The deliberately broken kernels, for their failure messages (these cases are meant to fail).
python3 -m pytest -p no:cacheprovider --gemm-kernels tests/kernels_broken/faults.cu \
    --gemm-shapes 256,100x100x64 -rf >"$out/broken-demo.log" 2>&1
echo "== broken-demo (failures expected): $(tail -n 1 "$out/broken-demo.log")"
exit $status
