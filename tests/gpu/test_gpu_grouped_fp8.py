"""On the GPU: grouped FP8 GEMMs (docs/verification.md#grouped-fp8). Right kernels pass, contiguous and masked, each
group's B with its own scales; a kernel that applies another group's scales fails and is named so; and the peer,
cuBLASLt's FP8 GEMM a group at a time, judged as a kernel over the grouped and MoE shape sets x the three scaling
modes x layouts x 20 seeds never fails the bound. Needs a CUDA device (Hopper for the peer).

GEMM_SWEEP_SEEDS sets the sweep's seeds (default 20; "4-19" a range of them), GEMM_SWEEP_LARGE_SEEDS those of shapes
whose B passes 10^8 elements (default 2); GEMM_SWEEP_SETS its shape sets or shapes (default every M-grouped set).
"""

from __future__ import annotations

import os
import time

import pytest

from pytest_gemm.records.groups import Groups, group_plan
from pytest_gemm.records.shapes import SHAPE_SETS, Shape, parse_shapes
from pytest_gemm.specs.cases import AB_CASES, Case, precision
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import Variant

from support import (
    TESTS,
    failure_section,
    outcomes_in,
    release_pools,
    requires_gpu,
    run_kernel_files,
    seeds_said,
    sweep_seeds,
)

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = SHAPE_SETS["grouped"]
MOE = SHAPE_SETS["moe-deepseek-v3"][-1]
SEEDS = sweep_seeds("GEMM_SWEEP_SEEDS", "20")
#: the seeds of the shapes whose B passes 10^8 elements (Mixtral's and Qwen3's prefill weights; their fp64 truth takes
#: seconds a seed)
LARGE_SEEDS = sweep_seeds("GEMM_SWEEP_LARGE_SEEDS", "2")
SETS = os.environ.get("GEMM_SWEEP_SETS", "grouped,moe-deepseek-v3,moe-mixtral,moe-qwen3").split(",")
SCALINGS = ({"A": "1x128", "B": "128x128"}, {"A": "row", "B": "col"}, {"A": "tensor", "B": "tensor"})
LAYOUTS = (("contiguous", 128), ("masked", 64))


@pytest.fixture(scope="module")
def fp8_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("grouped_fp8")
    shapes = f"grouped,{MOE.id}"
    return run_kernel_files(work, TESTS / "kernels_grouped", ("grouped_fp8.cu",), "--gemm-shapes", shapes)


def _names(kernel: str, shapes) -> set[str]:
    return {f"{kernel}[fp8_e4m3-{s.id}]" for s in shapes}


@pytest.mark.parametrize("kernel", ["fp8_grouped_contiguous", "fp8_grouped_masked"])
def test_right_grouped_fp8_kernels_pass(fp8_run, kernel):
    outcomes = outcomes_in(fp8_run)
    expected = _names(kernel, [*SHAPES, MOE])
    assert {name: outcomes.get(name) for name in expected} == dict.fromkeys(expected, "PASSED"), fp8_run[-6000:]


def test_another_groups_scales_are_named(fp8_run):
    """Every shape with two or more non-empty groups fails, named as another group's scales, group by group."""
    shapes = [s for s in [*SHAPES, MOE] if sum(1 for n in group_plan(Groups("contiguous", align=4), s).sizes if n) > 1]
    outcomes = outcomes_in(fp8_run)
    expected = _names("fp8_grouped_other_scales", shapes)
    assert {name: outcomes.get(name) for name in expected} == dict.fromkeys(expected, "FAILED"), fp8_run[-6000:]
    for name in expected:
        text = failure_section(fp8_run, name)
        assert "another group's scales applied" in text and "B scaled by group" in text, text


def test_the_grouped_fp8_peer_is_timed_beside_the_kernel(fp8_run):
    """A timed grouped FP8 row is flagged with its peer, cuBLASLt's FP8 GEMM a group at a time."""
    assert "vs cuBLASLt FP8 a group" in fp8_run, fp8_run[-6000:]


@pytest.fixture(scope="module")
def runner():
    from pytest_gemm.worker.runner import open_device

    return open_device(0)


def _case(scales: dict, layout: str, align: int, shape: Shape, seed: int) -> Case:
    groups = {"layout": layout, "align": align, "args": ["group_ends"]}
    header = {"dtypes": ["fp8_e4m3"], "scales": scales, "groups": groups, "storage": {"B": "NxK"}}
    spec = spec_from_mapping(header, path="sweep.py", kind="py", default_name="sweep")
    return Case(spec, Variant(), "fp8_e4m3", shape, AB_CASES[0])


def _device_drawn(cp, case: Case):
    """The FP8 input strategy with each matrix drawn and quantised on the device (torch's e4m3 rounding, as
    ml_dtypes'), by the harness's recipe: magnitudes that change by up to 4x from 128 x 128 block to block and 2x
    from fine block to block, scales the block's amax / 448 in fp32. The MoE weights on the host would take most of
    the sweep."""
    import numpy as np
    import torch

    from pytest_gemm.judge.scaled import FP8_MAX
    from pytest_gemm.records.storage import LOGICAL
    from pytest_gemm.worker.inputs import ScaledInputs
    from pytest_gemm.worker.operands import CaseInputs

    class DeviceDrawn(ScaledInputs):
        def draw(self, seed: int):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            found = []
            for op in "AB":
                own = self.own(op)
                rows, cols = (getattr(own, d) for d in LOGICAL[op])
                br, bc = self.scales.block(op, own)
                fine = (1, 128) if op == "A" else (128, 1)
                elements, grids = [], []
                for i in range(own.batch):
                    x = torch.rand((rows, cols), generator=gen, device="cuda", dtype=torch.float32) * 2 - 1
                    x *= 2.0 ** (i % 7 - 3) if own.batch > 1 else 1.0  # each matrix of a batch its own size
                    for block, spread in (((128, 128), 2.0), (fine, 1.0)):
                        gr, gc = -(-rows // block[0]), -(-cols // block[1])
                        u = torch.rand((gr, gc), generator=gen, device="cuda") * 2 * spread - spread
                        x *= torch.exp2(u).repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[:rows, :cols]
                    gr, gc = -(-rows // br), -(-cols // bc)
                    padded = torch.zeros((gr * br, gc * bc), device="cuda")
                    padded[:rows, :cols] = x.abs()
                    scale = padded.reshape(gr, br, gc, bc).amax(dim=(1, 3)) / FP8_MAX["fp8_e4m3"]
                    scale[scale == 0] = 1.0
                    spread = scale.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
                    q = (x / spread).clamp(-448, 448).to(torch.float8_e4m3fn)
                    elements.append(q.view(torch.uint8).cpu().numpy())
                    grids.append(scale.cpu().numpy())
                import ml_dtypes

                found.append((np.concatenate(elements).view(ml_dtypes.float8_e4m3fn), np.concatenate(grids)))
            (a, sa), (b, sb) = found
            return CaseInputs(a, b, None, case.storage, case.shape.batch, sa, sb)

    return DeviceDrawn(case)


def test_the_grouped_fp8_peer_never_fails_the_bound(runner):
    """0 failures of cuBLASLt's FP8 GEMM a group at a time over the M-grouped shape sets, layouts, scaling modes and
    seeds."""
    from pytest_gemm.worker.kinds import KernelStrategy
    from pytest_gemm.worker.peers import peer_strategy
    from pytest_gemm.worker.prepared import PreparedCase

    cp = runner.cp
    shapes = parse_shapes(",".join(SETS))
    failures, judged, no_peer, worst, start = [], 0, {}, {}, time.monotonic()
    for shape in shapes:
        large = shape.K * shape.N * shape.groups > 10**8
        seeds = LARGE_SEEDS if large else SEEDS
        print(f"sweep: {shape.id} x {seeds_said(seeds)} from {time.monotonic() - start:.0f} s", flush=True)
        cp.get_default_memory_pool().free_all_blocks()
        before, shape_worst = judged, 0.0
        for (layout, align), scales, seed in ((lay, sc, s) for lay in LAYOUTS for sc in SCALINGS for s in seeds):
            case = _case(scales, layout, align, shape, seed)
            inputs = _device_drawn(cp, case)
            peer = peer_strategy(case, inputs, runner.capability)
            mode = f"{scales['A']}/{scales['B']}"
            if peer.reason:
                no_peer[(layout, mode, peer.reason)] = no_peer.get((layout, mode, peer.reason), 0) + 1
                continue
            prepared = PreparedCase(runner, case, seed, KernelStrategy(runner, case, inputs), inputs, peer)
            with runner.stream:
                bits = prepared.uploaded()
                stats = prepared.peer_stats(prepared.truth(bits), bits)
                runner.stream.synchronize()
            release_pools(cp, large)
            judged += 1
            key = (layout, mode)
            worst[key] = max(worst.get(key, 0.0), 1 / stats.margin)
            shape_worst = max(shape_worst, 1 / stats.margin)
            if not stats.passed:
                failures.append(f"{layout} {mode} {shape.id} seed {seed}: {stats}")
                print(f"sweep: FAILED {failures[-1]}", flush=True)
        said = f"{judged - before} outputs judged, worst {shape_worst:.3g} of the bound"  # a limit loses no shape
        print(f"sweep: {shape.id} done: {said}, {time.monotonic() - start:.0f} s", flush=True)
    for (layout, mode), ratio in sorted(worst.items()):
        print(f"sweep: {layout} {mode}: worst {ratio:.3g} of the bound ({precision(case)[1].name} out)", flush=True)
    for (layout, mode, reason), count in sorted(no_peer.items()):
        print(f"sweep: {layout} {mode}: no peer in {count} case(s): {reason}", flush=True)
    print(f"sweep: {judged} outputs judged, {len(failures)} failed, {time.monotonic() - start:.0f} s", flush=True)
    assert judged and not failures, "\n".join(failures[:20])
