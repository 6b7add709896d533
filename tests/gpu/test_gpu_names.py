"""On the GPU: kernels named as users name them run as any other. A namespaced template (``M6::matmulKernel6<128,
256>``-style, which NVRTC lowers to a mangled name) and a namespaced C++ kernel compile, launch and pass, and so do
Python kernels declared through an alias of the decorator.

These tests need a CUDA device and skip without one ("no CUDA device: ..."):

    pytest tests/gpu/test_gpu_names.py -p no:cacheprovider
"""

from __future__ import annotations

import pytest

from support import NAIVE_LOOP, requires_gpu

pytestmark = [requires_gpu, pytest.mark.gpu]

NAMESPACED = (
    """/* pytest-gemm
entry = "M6::tiles::matmulKernel6<BM, BN>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { BM = [16, 32], BN = [16] }
block = ["BN", "BM"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
*/
/* pytest-gemm
entry = "M6::plain_sgemm"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
namespace M6 {

__device__ void one(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
"""
    + NAIVE_LOOP
    + """}

namespace tiles {
// the template's own parameter names differ from the params: each param is #defined above the source
template <int TILE_M, int TILE_N>
__global__ void matmulKernel6(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    one(M, N, K, alpha, A, B, beta, C);
}
}  // namespace tiles

__global__ void plain_sgemm(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    one(M, N, K, alpha, A, B, beta, C);
}

}  // namespace M6
"""
)

ALIASED = """from pytest_gemm import gemm_kernel as gk
import pytest_gemm as pg


@gk(dtypes=["fp32"])
def aliased(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@pg.gemm_kernel(dtypes=["fp32"])
def through_the_module(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
"""


def test_namespaced_kernels_compile_and_pass(pytester):
    """Both kernels' compile items (NVRTC gets the name expression, the driver the lowered name) and GPU cases pass:
    2 + 1 variants x 2 architectures, then 3 variants x 2 shapes x 3 alpha/beta pairs."""
    (pytester.path / "ns.cu").write_text(NAMESPACED)
    result = pytester.runpytest(
        "--gemm-kernels", "ns.cu", "--gemm-shapes", "64,100x70x33", "--benchmark-skip", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3 * 2 + 3 * 2 * 3)


def test_a_namespaced_kernel_is_checked_by_compute_sanitizer_by_its_function_name(pytester):
    """compute-sanitizer's kernel filter gets the function's own name (a substring of its mangled name): the kernel
    is launched and checked (skipped only where compute-sanitizer is not installed)."""
    (pytester.path / "ns.cu").write_text(NAMESPACED)
    result = pytester.runpytest(
        "--gemm-kernels", "ns.cu", "-m", "gemm_sanitize", "--gemm-sanitize", "memcheck", "-rs", "-p", "no:cacheprovider"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    if outcomes.get("skipped"):
        result.stdout.fnmatch_lines(["*compute-sanitizer not found*"])
    else:
        assert outcomes.get("passed") == 2


def test_python_kernels_declared_through_an_alias_run_and_pass(pytester):
    (pytester.path / "aliased.py").write_text(ALIASED)
    result = pytester.runpytest("--gemm-kernels", "aliased.py", "--gemm-shapes", "96x64x48", "--benchmark-skip")
    result.assert_outcomes(passed=2 * 3)
