"""Triton matmuls given torch tensors, after Triton's matmul tutorial (fp16/bf16 in, fp32 accumulation, alpha and
beta added), and the same kernel with one bug each: a mask one past A's end, a launch on a stream of its own, tl.dot
in TF32 on fp32 inputs, and beta ignored."""

import torch
import triton
import triton.language as tl

from pytest_gemm import gemm_kernel

CONFIGS = [
    triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 32}, num_stages=4, num_warps=4),
]


@triton.jit
def _matmul(
    a,
    b,
    c,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    alpha,
    beta,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PAST_A: tl.constexpr,
    IGNORE_BETA: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        k_end = K + 1 if PAST_A else K  # the bug: one element past each row of A's end
        x = tl.load(
            a + rm[:, None] * sam + ks[None, :] * sak, mask=(rm[:, None] < M) & (ks[None, :] < k_end), other=0.0
        )
        y = tl.load(b + ks[:, None] * sbk + rn[None, :] * sbn, mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y, input_precision=PRECISION)
    out = alpha * acc
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    at = c + rm[:, None] * scm + rn[None, :] * scn
    if not IGNORE_BETA:  # noqa: SIM102 (a constexpr, then a value)
        if beta != 0.0:
            out += beta * tl.load(at, mask=mask, other=0.0).to(tl.float32)
    tl.store(at, out.to(c.dtype.element_ty), mask=mask)


# C is read and written (beta): each config tried starts from the same C
_autotuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"], restore_value=["c"])(_matmul)


def _launch(
    A, B, C, alpha, beta, past_a=False, ignore_beta=False, precision="ieee", tuned=True, bm=64, bn=64, stages=3
):
    M, K = A.shape
    N = B.shape[1]
    args = (A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1), alpha, beta)
    flags = {"PAST_A": past_a, "IGNORE_BETA": ignore_beta, "PRECISION": precision}
    if tuned:
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
        _autotuned[grid](*args, **flags)
    else:
        _matmul[(triton.cdiv(M, bm), triton.cdiv(N, bn))](*args, BM=bm, BN=bn, BK=32, num_stages=stages, **flags)


@gemm_kernel(dtypes=["fp16", "bf16"], arrays="torch", params={"B_NxK": [0, 1]})
def triton_matmul(A, B, C, alpha, beta, B_NxK):
    """Triton's tutorial matmul, autotuned over two tile shapes; B in either order (its strides say which)."""
    _launch(A, B, C, alpha, beta)


@gemm_kernel(dtypes=["fp16"], arrays="torch")
def triton_matmul_pinned(A, B, C, alpha, beta):
    """triton_matmul in the config its autotuner picks on an H100 at 4096^3 (BM 128, BN 128, BK 32, 4 warps, 4
    stages), pinned: under Nsight Compute, which serialises every launch, the autotuner picks another, so the
    comparison with it needs one config."""
    _launch(A, B, C, alpha, beta, tuned=False, bm=128, bn=128, stages=4)


@gemm_kernel(dtypes=["fp16"], arrays="torch", description="WRONG on purpose: reads one element past each row of A")
def triton_past_a(A, B, C, alpha, beta):
    _launch(A, B, C, alpha, beta, past_a=True, tuned=False)


@gemm_kernel(dtypes=["fp16"], arrays="torch", description="WRONG on purpose: launches on a stream of its own")
def triton_own_stream(A, B, C, alpha, beta):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _launch(A, B, C, alpha, beta, tuned=False)


@gemm_kernel(dtypes=["fp32"], arrays="torch", description="WRONG on purpose: tl.dot in TF32 on fp32 inputs")
def triton_tf32(A, B, C, alpha, beta):
    _launch(A, B, C, alpha, beta, precision="tf32", tuned=False)


@gemm_kernel(dtypes=["fp16"], arrays="torch", description="WRONG on purpose: beta ignored (C = alpha A B)")
def triton_no_beta(A, B, C, alpha, beta):
    _launch(A, B, C, alpha, beta, ignore_beta=True, tuned=False)
