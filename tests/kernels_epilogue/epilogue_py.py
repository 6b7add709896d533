"""Fused epilogues as Python kernels: torch's own (the peer's two ways: cuBLASLt's epilogue through
torch._addmm_activation, and addmm followed by torch's bias add, activation and residual add)."""

from pytest_gemm import gemm_kernel


@gemm_kernel(
    dtypes=["bf16", "fp16", "fp32"],
    arrays="torch",
    epilogue={"bias": "N", "activation": "gelu", "residual": True, "args": ["bias", "residual", "D"]},
)
def torch_gelu_residual(A, B, C, alpha, beta, bias, residual, D):
    import torch
    import torch.nn.functional as F

    x = torch.addmm(C, A, B, beta=beta, alpha=alpha)  # beta = 0 ignores C (and its NaN)
    D.copy_(F.gelu(x + bias) + residual)


@gemm_kernel(
    dtypes=["bf16", "fp16", "fp32"],
    arrays="torch",
    alpha_beta=False,
    epilogue={"bias": "N", "activation": "gelu_tanh", "args": ["bias"]},
)
def torch_lt_gelu_tanh(A, B, C, bias):
    import torch

    torch._addmm_activation(bias, A, B, use_gelu=True, out=C)


@gemm_kernel(
    dtypes=["bf16", "fp16", "fp32"],
    arrays="torch",
    alpha_beta=False,
    epilogue={"bias": "M", "activation": "silu", "args": ["bias"]},
)
def torch_silu_bias_m(A, B, C, bias):
    import torch
    import torch.nn.functional as F

    C.copy_(F.silu(torch.mm(A, B) + bias[:, None]))
