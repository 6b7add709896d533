#!/usr/bin/env bash
# The artifacts of a suite of broken kernels at 2048 x 2048, on the CPU: a project whose kernel file declares
# VARIANTS variants (three alpha/beta cases each, at 2048x2048x2048), served by tests/synthetic_backend.py through
# the pytest_gemm_worker_backend hook (nine in ten fail, wrong in five ways; the rest pass and are timed), run with
# research/artifact-sizes.sh (REPORT=1): the terminal's lines, the JUnit XML, the saved run, the report folder,
# and pytest-gemm plot's time and folder.
#
# Usage: research/synthetic-sizes.sh OUT [VARIANTS (default 112: 303 failing cases)] [SHAPE (default 2048)]
set -euo pipefail
out=$(realpath -m "$1") variants=${2:-112} shape=${3:-2048}
root=$(cd "$(dirname "$0")/.." && pwd)
project=$(mktemp -d)
mkdir -p "$project/kernels" "$out"
values=$(seq -s, 0 $((variants - 1)))
cat >"$project/kernels/synthetic.cu" <<CU
/* pytest-gemm
entry = "synthetic<V>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { V = [$values] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
template <int V>
__global__ void synthetic(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {}
CU
cat >"$project/conftest.py" <<PY
import sys
sys.path.insert(0, "$root/tests")


def pytest_gemm_worker_backend(config):
    return "synthetic_backend:SyntheticBackend"
PY
printf '[pytest]\n' >"$project/pytest.ini"
cd "$project"
REPORT=1 "$root/research/artifact-sizes.sh" synthetic "$out" 300 kernels -- --gemm-shapes "$shape" -m "not gemm_compile"
rm -rf "$project"
