"""The peer of a grouped FP8 case: cuBLASLt's FP8 GEMM one group at a time, each with its group's own scales, through
torch (``fp8_peer``); for contiguous groups scaled per row and per column, torch's ``_scaled_grouped_mm`` (one launch,
faster where measured). torch has no grouped FP8 GEMM with DeepSeek-V3's 1 x 128 / 128 x 128 scales
(research/grouped_fp8_peer_probe.py, docs/verification.md#grouped-fp8). In the loop each group's rows are computed
rounded up to a multiple of 4 (cuBLASLt's 1 x 128 blocks take no other M) into its own padding, which the group's
peer may write. Copies in cuBLASLt's layouts (B column-major, the scales' own layouts) are made once per set of
operands, outside the timed call. torch is imported here (or ahead, by a standby). Part of the worker package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType
from ..records.groups import GroupPlan
from ..records.scales import Scales
from ..specs.cases import Case
from .cublas import Bind
from .fp8_peer import needs_copy, peer_scales, scaled_gemm
from .grouped_peer import operand_view

__all__ = ["grouped_fp8_runner", "no_grouped_fp8_peer", "one_launch_peer", "peer_rows"]

#: the rows cuBLASLt's FP8 GEMM with 1 x 128 blocks takes a multiple of
_ROWS = 4


def peer_rows(plan: GroupPlan, scales: Scales, group: int) -> int:
    """The rows of group ``group`` the peer computes: its own, rounded up to 4 with 1 x 128 blocks of A."""
    size = plan.sizes[group]
    return -(-size // _ROWS) * _ROWS if scales.granularity("A") == "1x128" else size


def no_grouped_fp8_peer(case: Case, scales: Scales) -> str | None:
    """Why a grouped FP8 case has no peer beyond what an FP8 case's rules say (None: the loop is its peer)."""
    plan = case.plan
    assert plan is not None
    for g, size in enumerate(plan.sizes):
        room = plan.slot if plan.layout == "masked" else -(-size // plan.align) * plan.align  # its rows and padding
        if peer_rows(plan, scales, g) > room:
            where = f"slot of {plan.slot} rows" if plan.layout == "masked" else f"padding (groups align = {plan.align})"
            return (
                f"cuBLASLt's FP8 GEMM with 1 x 128 blocks takes M a multiple of 4: group {g}'s {size} rows have "
                f"no room to round up into in its {where}; declare align a multiple of 4"
            )
    return None


def grouped_fp8_runner(
    cp: Any, case: Case, scales: Scales, values: tuple[Any, Any], out: DType, device: int, stream: int
) -> Bind:
    """A function that, given each operand's (device address, leading dimension, batch stride) by name, as stored,
    returns a function queueing one cuBLASLt FP8 GEMM a non-empty group on ``stream`` (the harness's, on ``device``),
    writing C; ``values``: A's and B's grids (float64, logical, stacked as the operands are)."""
    import torch

    plan = case.plan
    assert plan is not None
    external = torch.cuda.ExternalStream(stream, device=torch.device("cuda", device))
    fp8, out_type = torch.float8_e4m3fn, getattr(torch, out.storage)
    groups = [g for g in range(plan.count) if plan.sizes[g]]
    grid_b = values[1].shape[0] // plan.count
    copy = needs_copy(scales, plan.K)
    one_launch = one_launch_peer(plan, scales, out)
    own: dict[int, tuple[Any, Any]] = {}
    with torch.cuda.stream(external):  # each group's scales, on the harness's stream before any GEMM reads them
        for g in [] if one_launch else groups:
            grid_a = _rows_of_a(values[0], scales, plan, g)
            own[g] = peer_scales(torch, scales, (grid_a, values[1][g * grid_b : (g + 1) * grid_b]))
    if one_launch:
        with torch.cuda.stream(external):  # per row of A (every row, padding too), per column of each group's B
            offs = torch.tensor((*plan.starts[1:], plan.rows), dtype=torch.int32, device="cuda")
            rowwise = (torch.from_dlpack(values[0]).float().reshape(-1), torch.from_dlpack(values[1]).float())

    def bind(operands: dict[str, tuple[int, int, int]]) -> Callable[[], None]:
        torch.cuda.set_stream(external)
        a, b, c = (operand_view(torch, cp, case, op, operands[op], out.itemsize if op == "C" else 1,
                                out_type if op == "C" else fp8) for op in "ABC")  # fmt: skip
        a = a.reshape(-1, plan.K) if a.stride(-1) == 1 else a.contiguous().reshape(-1, plan.K)  # row-major, stacked
        c = c.reshape(-1, plan.N)  # row-major (no peer for a C stored N x M), stacked
        if one_launch:
            b = b if b.stride(-2) == 1 else b.transpose(-1, -2).contiguous().transpose(-1, -2)  # K contiguous

            def grouped() -> None:  # torch writes a C of its own: its allocation and copy are in the peer's time
                torch.cuda.set_stream(external)
                c.copy_(torch._scaled_grouped_mm(a, b, *rowwise, offs=offs, out_dtype=out_type))

            return grouped
        calls = []
        for g in groups:
            r0, rows = plan.starts[g], peer_rows(plan, scales, g)
            b_g = b[g]
            b_g = b_g if b_g.stride(0) == 1 else b_g.t().contiguous().t()  # column-major K x N
            calls.append((a[r0 : r0 + rows], b_g, *own[g], c[r0 : r0 + rows]))

        def gemm() -> None:
            torch.cuda.set_stream(external)
            for a_g, b_g, scale_a, scale_b, c_g in calls:
                scaled_gemm(torch, a_g, b_g, scale_a, scale_b, c_g, copy)

        return gemm

    return bind


def one_launch_peer(plan: GroupPlan, scales: Scales, out: DType) -> bool:
    """Whether torch's ``_scaled_grouped_mm`` (one launch for every group) is the peer: contiguous groups scaled per
    row of A and per column of each B, written as bf16. It was 1.1x to 10x faster than the loop at the DeepSeek-V3 and
    Qwen3 shapes (H200, research/grouped_fp8_peer_probe.py); with 1 x 128 / 128 x 128 blocks torch has no grouped
    GEMM ("No gemm implementation was found")."""
    return (
        plan.layout == "contiguous"
        and (scales.granularity("A"), scales.granularity("B")) == ("row", "col")
        and out.name == "bf16"
    )


def _rows_of_a(grid: Any, scales: Scales, plan: GroupPlan, g: int) -> Any:
    """Group ``g``'s part of A's grid (float64, logical, stacked as A is): the scales of the rows the peer computes,
    its slot's one scale (masked), or the one scale of the whole A (contiguous)."""
    if scales.granularity("A") == "tensor":
        return grid[g : g + 1] if plan.layout == "masked" else grid
    return grid[plan.starts[g] : plan.starts[g] + peer_rows(plan, scales, g)]
