"""Which grouped GEMMs torch's _grouped_mm takes on this GPU (dtype x layout), and its time against a loop of one
torch.mm a group, at MoE shapes: how the grouped peer was chosen (docs/verification.md#grouped-gemm). Prints one line
per probe; run on the GPU machine: python research/grouped_peer_probe.py"""

from __future__ import annotations

import subprocess
import sys

import torch

from pytest_gemm.records.groups import Groups, group_plan
from pytest_gemm.records.shapes import SHAPE_SETS, Shape


def _time(fn, repeats: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def probe(dtype, layout: str, shape: Shape, sizes: str = "edge") -> str:
    plan = group_plan(Groups(layout, sizes=sizes), shape)
    g, n, k = plan.count, plan.N, plan.K
    dev = "cuda"
    try:
        if layout == "contiguous":
            a = torch.randn(plan.rows, k, device=dev).to(dtype)
            b = torch.randn(g, n, k, device=dev).to(dtype).transpose(-1, -2)
            offs = torch.tensor(plan.group_args()["group_ends"], dtype=torch.int32, device=dev)
            call = lambda: torch._grouped_mm(a, b, offs=offs)  # noqa: E731
            ends = plan.group_args()["group_ends"]
            starts = plan.starts
            loop = lambda: [torch.mm(a[s:e], b[i]) for i, (s, e) in enumerate(zip(starts, ends))]  # noqa: E731
        elif layout == "masked":
            a = torch.randn(g, plan.slot, k, device=dev).to(dtype)
            b = torch.randn(g, n, k, device=dev).to(dtype).transpose(-1, -2)
            call = lambda: torch._grouped_mm(a, b)  # noqa: E731
            loop = lambda: torch.bmm(a, b)  # noqa: E731
        else:
            a = torch.randn(plan.M, k, device=dev).to(dtype)
            bt = torch.randn(n, k, device=dev).to(dtype)
            b = bt.t()
            offs = torch.tensor(plan.group_args()["group_ends"], dtype=torch.int32, device=dev)
            call = lambda: torch._grouped_mm(a, b, offs=offs)  # noqa: E731
            ranges = list(zip(plan.starts, plan.group_args()["group_ends"]))
            loop = lambda: [torch.mm(a[:, s:e], b[s:e]) for s, e in ranges]  # noqa: E731
        out = call()
        torch.cuda.synchronize()
        t_grouped, t_loop = _time(call), _time(loop)
        flops = 2.0 * shape.M * n * k if layout != "k" else 2.0 * plan.M * n * shape.K
        return (
            f"{dtype} {layout} {shape.id}: ok, out {tuple(out.shape)} {out.dtype}; _grouped_mm {t_grouped:.3f} ms "
            f"({flops / t_grouped / 1e9:.0f} TFLOP/s), loop of mm {t_loop:.3f} ms"
        )
    except Exception as exc:  # noqa: BLE001: what torch refuses is the measurement
        return f"{dtype} {layout} {shape.id}: refused: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


SHAPES = [Shape(300, 256, 128, groups=4), *SHAPE_SETS["moe-deepseek-v3"][:1], *SHAPE_SETS["moe-qwen3"][:1]]


def main() -> None:
    """Each dtype and layout in a process of its own: a device-side assert ends the CUDA context it happens in."""
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for dtype in ("bfloat16", "float16", "float32"):
        for layout in ("contiguous", "masked", "k", "k-aligned"):
            subprocess.run([sys.executable, __file__, dtype, layout], check=False, timeout=120)


def one(dtype: str, layout: str) -> None:
    for shape in SHAPES:
        if layout == "k-aligned":  # each group's K a multiple of 8: K split evenly, K a multiple of 8 G
            shape = Shape(
                shape.M, shape.N, 8 * shape.groups * max(1, shape.K // (8 * shape.groups)), groups=shape.groups
            )
            print(probe(getattr(torch, dtype), "k", shape, "uniform"), flush=True)
        else:
            print(probe(getattr(torch, dtype), layout, shape), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        one(sys.argv[1], sys.argv[2])
    else:
        main()
