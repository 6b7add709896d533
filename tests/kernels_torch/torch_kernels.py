"""A torch.compile'd matmul and a CUDA kernel built with torch.utils.cpp_extension.load_inline, given torch
tensors on the harness's stream."""

import torch
from torch.utils.cpp_extension import load_inline

from pytest_gemm import gemm_kernel


@torch.compile(dynamic=False)
def _compiled(A, B, C, alpha, beta):
    return alpha * (A @ B) + beta * C


@gemm_kernel(dtypes=["fp32", "fp16"], arrays="torch")
def compiled_matmul(A, B, C, alpha, beta):
    """torch.compile's matmul (cuBLAS inside, the epilogue fused by Inductor); compiled on the first call."""
    C.copy_(_compiled(A, B, C, alpha, beta) if beta else _compiled(A, B, torch.zeros_like(C), alpha, 0.0))


_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}

void sgemm(torch::Tensor A, torch::Tensor B, torch::Tensor C, double alpha, double beta) {
    int M = A.size(0), K = A.size(1), N = B.size(1);
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    sgemm_naive<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(M, N, K, alpha, A.data_ptr<float>(),
        B.data_ptr<float>(), beta, C.data_ptr<float>());
}
"""
_module = None


@gemm_kernel(dtypes=["fp32"], arrays="torch")
def inline_sgemm(A, B, C, alpha, beta):
    """A CUDA kernel built by nvcc through load_inline on the first call, launched on torch's current stream."""
    global _module
    if _module is None:
        _module = load_inline(
            "pytest_gemm_inline_sgemm",
            cpp_sources="void sgemm(torch::Tensor A, torch::Tensor B, torch::Tensor C, double alpha, double beta);",
            cuda_sources=_SOURCE,
            functions=["sgemm"],
        )
    _module.sgemm(A, B, C, alpha, beta)
