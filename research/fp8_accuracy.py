"""How accurate cuBLASLt's FP8 GEMM into fp32 is on an H100, against the exact product of the dequantised operands:
on uniform data whose magnitudes change by up to 2^spread from one 128-wide block of K to the next, with normal and fast
accumulation; and on pytest-gemm's own FP8 data (``draw_quantised``, per-tensor scales). The figures behind the FP8
bound's u_in = 2^-13 and the refusal of fast accumulation (docs/verification.md, "FP8 and INT8").

Usage: python research/fp8_accuracy.py   (a GPU, torch; prints one line a measurement)
"""

from __future__ import annotations

import numpy as np
import torch

from pytest_gemm.judge.scaled import draw_quantised
from pytest_gemm.records.scales import Scales
from pytest_gemm.records.shapes import Shape

DEV = "cuda"
M = N = 256


def errors(c: torch.Tensor, truth: torch.Tensor, g: torch.Tensor) -> str:
    d = c.double() - truth
    return f"normwise {(d.norm() / truth.norm()).item():.2e}, max |err|/G {(d.abs() / g).max().item():.2e}"


def spread_sweep() -> None:
    torch.manual_seed(0)
    for spread in (0, 1, 2, 3):
        for k in (128, 512, 2048, 8192, 32768):
            blocks = k // 128
            ea = torch.randint(-spread, spread + 1, (M, blocks), device=DEV).repeat_interleave(128, 1).double()
            eb = torch.randint(-spread, spread + 1, (blocks, N), device=DEV).repeat_interleave(128, 0).double()
            x = (torch.rand(M, k, device=DEV, dtype=torch.float64) * 2 - 1) * torch.exp2(ea)
            y = (torch.rand(k, N, device=DEV, dtype=torch.float64) * 2 - 1) * torch.exp2(eb)
            sa, sb = (x.abs().max() / 448).float(), (y.abs().max() / 448).float()
            qa = (x / sa.double()).clamp(-448, 448).to(torch.float8_e4m3fn)
            qb = (y / sb.double()).clamp(-448, 448).to(torch.float8_e4m3fn)
            a, b = qa.double() * sa.double(), qb.double() * sb.double()
            truth, g = a @ b, a.abs() @ b.abs()
            for fast in (False, True):
                c = torch._scaled_mm(qa, qb.t().contiguous().t(), sa, sb, out_dtype=torch.float32, use_fast_accum=fast)
                print(f"spread 2^+-{spread} K={k:5d} fast={int(fast)}: {errors(c, truth, g)}")


def positive_sums() -> None:
    """All-positive data: where truncation shows as a bias."""
    g = torch.Generator(device=DEV).manual_seed(3)
    for k in (2048, 32768):
        x, y = torch.rand(M, k, device=DEV, generator=g), torch.rand(N, k, device=DEV, generator=g)
        sa, sb = x.amax() / 448, y.amax() / 448
        qa, qb = (x / sa).to(torch.float8_e4m3fn), (y / sb).to(torch.float8_e4m3fn)
        truth = (qa.double() * sa.double()) @ (qb.double() * sb.double()).t()
        for fast in (False, True):
            c = torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.float32, use_fast_accum=fast).double()
            rel = (c - truth) / truth
            print(
                f"positive data K={k} fast={int(fast)}: max relative error {rel.abs().max().item():.2e}, "
                f"mean {rel.mean().item():+.2e}"
            )


def harness_data() -> None:
    for k in (128, 512, 2048):
        rng = np.random.default_rng(0)
        shape, scales = Shape(M, N, k), Scales("tensor", "tensor")
        (qa, sa), (qb, sb) = (draw_quantised(rng, op, shape, "fp8_e4m3", scales) for op in "AB")
        a8 = torch.from_numpy(qa.view(np.uint8).copy()).to(DEV).view(torch.float8_e4m3fn)
        b8 = torch.from_numpy(np.ascontiguousarray(qb.T).view(np.uint8)).to(DEV).view(torch.float8_e4m3fn).t()
        a = torch.from_numpy(qa.astype(np.float64) * float(sa[0, 0])).to(DEV)
        b = torch.from_numpy(qb.astype(np.float64) * float(sb[0, 0])).to(DEV)
        s1, s2 = (torch.tensor(float(s[0, 0]), device=DEV) for s in (sa, sb))
        c = torch._scaled_mm(a8, b8, s1, s2, out_dtype=torch.float32)
        print(f"pytest-gemm's data K={k}: {errors(c, a @ b, a.abs() @ b.abs())}")


if __name__ == "__main__":
    spread_sweep()
    positive_sums()
    harness_data()
