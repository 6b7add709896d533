"""How the grouped FP8 peer was chosen (docs/verification.md#grouped-fp8): at MoE shapes (contiguous groups, sizes
'random', each group's rows padded to 128 as DeepGEMM's), the time of cuBLASLt's FP8 GEMM one group at a time through
torch against torch's one-launch grouped FP8 GEMM, for the scalings each takes: per-row / per-column (torch's
``_scaled_grouped_mm``) and DeepSeek-V3's 1 x 128 / 128 x 128 blocks (is there a grouped one?). Prints one line per
probe, median of 30 timed calls after a warm-up (CUDA events); run on the GPU machine:
python research/grouped_fp8_peer_probe.py"""

from __future__ import annotations

import statistics

import torch

from pytest_gemm.records.groups import Groups, group_plan
from pytest_gemm.records.shapes import SHAPE_SETS, Shape

F8 = torch.float8_e4m3fn


def _median_ms(fn, repeats: int = 30) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _operands(shape: Shape):
    plan = group_plan(Groups("contiguous", sizes="random", align=128), shape)
    a = torch.randn(plan.rows, plan.K, device="cuda").to(F8)
    b = torch.randn(plan.count, plan.N, plan.K, device="cuda").to(F8)  # N x K: column-major K x N each
    return plan, a, b


def probe_rowwise(shape: Shape) -> str:
    plan, a, b = _operands(shape)
    sa = torch.rand(plan.rows, device="cuda") + 0.5
    sb = torch.rand(plan.count, plan.N, device="cuda") + 0.5
    groups = [(g, s, s + n) for g, (s, n) in enumerate(zip(plan.starts, plan.sizes)) if n]
    out = torch.empty(plan.rows, plan.N, device="cuda", dtype=torch.bfloat16)

    def loop() -> None:
        for g, r0, r1 in groups:
            torch._scaled_mm(a[r0:r1], b[g].t(), sa[r0:r1, None], sb[g][None, :], out_dtype=torch.bfloat16,
                             out=out[r0:r1])  # fmt: skip

    ends = torch.tensor((*plan.starts[1:], plan.rows), dtype=torch.int32, device="cuda")
    line = f"rowwise {shape.id}: loop {_median_ms(loop):.3f} ms"
    try:
        grouped = lambda: torch._scaled_grouped_mm(  # noqa: E731
            a, b.transpose(-1, -2), sa, sb, offs=ends, out_dtype=torch.bfloat16
        )
        line += f", _scaled_grouped_mm {_median_ms(grouped):.3f} ms"
    except Exception as exc:  # what torch says where it has none
        line += f", _scaled_grouped_mm: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return line


def probe_blockwise(shape: Shape) -> str:
    plan, a, b = _operands(shape)
    kb, nb = -(-plan.K // 128), -(-plan.N // 128)
    sa = (torch.rand(kb, plan.rows, device="cuda") + 0.5).t()  # M-major
    sb = [(torch.rand(nb, -(-kb // 4) * 4, device="cuda") + 0.5).t()[:kb] for _ in range(plan.count)]
    groups = [(g, s, s + -(-n // 4) * 4) for g, (s, n) in enumerate(zip(plan.starts, plan.sizes)) if n]
    out = torch.empty(plan.rows, plan.N, device="cuda", dtype=torch.bfloat16)
    scaled = [(g, r0, r1, sa[r0:r1].t().contiguous().t()) for g, r0, r1 in groups]

    def loop() -> None:
        for g, r0, r1, s in scaled:
            torch._scaled_mm(a[r0:r1], b[g].t(), s, sb[g], out_dtype=torch.bfloat16, out=out[r0:r1])

    line = f"blockwise {shape.id}: loop {_median_ms(loop):.3f} ms"
    try:
        f = torch.nn.functional
        ends = torch.tensor((*plan.starts[1:], plan.rows), dtype=torch.int32, device="cuda")
        recipes = (f.ScalingType.BlockWise1x128, f.ScalingType.BlockWise128x128)
        f.scaled_grouped_mm(a, b.transpose(-1, -2), sa, recipes[0], torch.stack(sb), recipes[1], offs=ends,
                            output_dtype=torch.bfloat16)  # fmt: skip
        line += ", scaled_grouped_mm with blocks: ran"
    except Exception as exc:
        line += f", scaled_grouped_mm with blocks: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return line


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name())
    for shape in [*SHAPE_SETS["moe-deepseek-v3"], *SHAPE_SETS["moe-qwen3"]]:
        for probe in (probe_rowwise, probe_blockwise):
            try:
                print(probe(shape), flush=True)
            except Exception as exc:
                said = str(exc).splitlines()[0][:200]
                print(f"{probe.__name__} {shape.id}: {type(exc).__name__}: {said}", flush=True)
