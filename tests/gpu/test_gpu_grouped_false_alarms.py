"""On the GPU: the grouped rule never cries wolf. torch's grouped GEMM (the peer, as the harness runs it) and a CuPy
matmul a group are judged as kernels, with the harness's inputs, truth and bounds (each group its own), over every
grouped shape set x layout (contiguous with padding rows, masked, K-grouped) x dtype (bf16, fp16, fp32) x 20 seeds
(the seeds take the three pairs of scalars in turn), and no case may fail. Needs a CUDA device.

GEMM_SWEEP_SEEDS sets the seeds (default 20; "4-19" a range of them); GEMM_SWEEP_LARGE_SEEDS the seeds of the shapes
whose B passes 10^8 elements (Mixtral's and Qwen3's prefill weights), where drawing the inputs takes seconds;
GEMM_SWEEP_SETS which shape sets (or shapes: M-grouped) run (default all five).
"""

from __future__ import annotations

import os
import time

import pytest

from pytest_gemm.records.groups import Groups
from pytest_gemm.records.shapes import SHAPE_SETS, Shape
from pytest_gemm.specs.cases import AB_CASES, Case, precision
from pytest_gemm.specs.footprint import storage_dims
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import Variant

from support import release_pools, requires_gpu, seeds_said, sweep_seeds

pytestmark = [requires_gpu, pytest.mark.gpu]

SEEDS = sweep_seeds("GEMM_SWEEP_SEEDS", "20")
LARGE_SEEDS = sweep_seeds("GEMM_SWEEP_LARGE_SEEDS", os.environ.get("GEMM_SWEEP_SEEDS", "20"))
SETS = os.environ.get("GEMM_SWEEP_SETS", "grouped,moe-deepseek-v3,moe-mixtral,moe-qwen3,moe-wgrad").split(",")
LAYOUTS = (("contiguous", 128), ("masked", 64), ("k", 1))
#: which layouts run each set's shapes: the MoE layers' (M the routed rows) M-grouped, the weight gradients' K-grouped
SET_LAYOUTS = {"grouped": ("contiguous", "masked", "k"), "moe-wgrad": ("k",)}
DTYPES = ("bf16", "fp16", "fp32")


@pytest.fixture(scope="module")
def runner():
    from pytest_gemm.worker.runner import open_device

    return open_device(0)


def _case(dtype: str, layout: str, align: int, shape: Shape, seed: int) -> Case:
    groups = {"layout": layout, "align": align, "args": ["group_ends"]}
    spec = spec_from_mapping({"dtypes": [dtype], "groups": groups}, path="sweep.py", kind="py", default_name="sweep")
    assert spec.groups == Groups(layout, align=align, args=("group_ends",))
    return Case(spec, Variant(), dtype, shape, AB_CASES[seed % len(AB_CASES)])


def _bf16_bits(cp, x):
    """fp32 ``x`` rounded to bf16 (to nearest, ties to even, as ml_dtypes; finite values), as its bits."""
    bits = x.view(cp.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(cp.uint16)


def _drawn(cp, case: Case):
    """The float family's input strategy with its inputs drawn by CuPy's generator on the device and rounded there
    (on the host, the MoE weights would take most of the sweep); the prepared case's layout lays them out as the
    harness's."""

    from pytest_gemm.records.dtypes import get_dtype
    from pytest_gemm.worker.buffers import np_dtype
    from pytest_gemm.worker.inputs import FloatInputs
    from pytest_gemm.worker.operands import CaseInputs

    class DeviceDrawn(FloatInputs):
        def draw(self, seed: int):
            state = cp.random.RandomState(seed)

            def draw(op: str, dtype: str):
                batch, rows, cols = storage_dims(case.spec, op, case.shape)
                x = state.uniform(-1.0, 1.0, (batch * rows, cols), dtype=cp.float32)
                storage = np_dtype(get_dtype(dtype))
                return _bf16_bits(cp, x).get().view(storage) if dtype == "bf16" else x.astype(storage).get()

            a, b = draw("A", case.dtype), draw("B", case.dtype)
            c0 = draw("C", case.spec.output_dtype(case.dtype)) if case.c_prior else None
            return CaseInputs(a, b, c0, case.storage)  # the grouped layout lays them out (NaN rows, batches)

    return DeviceDrawn(case)


def _cupy_groups(cp, case: Case, bits):
    """A CuPy matmul a group, ``alpha (A_g @ B_g) + beta C0_g`` in the dtype (bf16 in fp32, rounded once), from the
    inputs' bits on the device (logical)."""
    from pytest_gemm.records.dtypes import get_dtype
    from pytest_gemm.worker.buffers import bits_to_float64, np_dtype

    plan, wide = case.plan, case.dtype == "bf16"
    types = (get_dtype(case.dtype),) * 2 + (get_dtype(case.spec.output_dtype(case.dtype)),)

    def operand(x, dt):
        return None if x is None else bits_to_float64(cp, x, dt).astype(cp.float32 if wide else np_dtype(dt))

    a, b, c0 = (operand(x, dt) for x, dt in zip(bits, types, strict=True))
    out = cp.zeros((a.shape[0] if plan.layout != "k" else plan.count * plan.M, plan.N), dtype=a.dtype)
    for g in range(plan.count):
        r0, r1 = plan.c_rows(g)
        k0, k1 = plan.k_range(g)
        a_g, b_g = (a[:, k0:k1], b[k0:k1]) if plan.layout == "k" else (a[r0:r1], b[g * plan.K : (g + 1) * plan.K])
        part = case.ab.alpha * (a_g @ b_g)
        if c0 is not None:
            part = part + case.ab.beta * c0[r0:r1]
        out[r0:r1] = part
    if wide:
        return (_bf16_bits(cp, out).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    return out.astype(cp.float64)


def test_correct_grouped_gemms_never_fail_the_bound(runner):
    """0 failures of torch's grouped GEMM and a CuPy matmul a group over the grouped shape sets, layouts, dtypes and
    seeds."""
    from pytest_gemm.worker.kinds import KernelStrategy
    from pytest_gemm.worker.peers import peer_strategy
    from pytest_gemm.worker.prepared import PreparedCase

    cp = runner.cp
    shapes = {
        s: SET_LAYOUTS.get(name, ("contiguous", "masked"))
        for name in SETS
        for s in (SHAPE_SETS[name] if name in SHAPE_SETS else [Shape.of(name)])
    }
    failures, judged, no_peer, worst, start = [], 0, {}, {}, time.monotonic()
    for shape, layouts in shapes.items():
        large = shape.K * shape.N * shape.groups > 10**8
        seeds = LARGE_SEEDS if large else SEEDS
        print(
            f"sweep: {shape.id} x {seeds_said(seeds)} ({', '.join(layouts)}) from {time.monotonic() - start:.0f} s",
            flush=True,
        )
        cp.get_default_memory_pool().free_all_blocks()  # each shape's arrays are of their own sizes
        before, shape_worst = judged, 0.0
        runs = ((lay, d, s) for lay in LAYOUTS if lay[0] in layouts for d in DTYPES for s in seeds)
        for (layout, align), dtype, seed in runs:
            case = _case(dtype, layout, align, shape, seed)
            inputs = _drawn(cp, case)
            peer = peer_strategy(case, inputs, runner.capability)
            prepared = PreparedCase(runner, case, seed, KernelStrategy(runner, case, inputs), inputs, peer)
            with runner.stream:
                bits = prepared.uploaded()
                truth = prepared.truth(bits)
                results = {"CuPy": truth.judge(cp, _cupy_groups(cp, case, bits), shape.K, *precision(case))}
                if peer.reason:
                    no_peer[(layout, dtype, peer.reason)] = no_peer.get((layout, dtype, peer.reason), 0) + 1
                else:
                    results["torch"] = prepared.peer_stats(truth, bits)
                runner.stream.synchronize()
            release_pools(cp, large)
            for who, stats in results.items():
                judged += 1
                key = (who, layout, dtype)
                worst[key] = max(worst.get(key, 0.0), 1 / stats.margin)
                shape_worst = max(shape_worst, 1 / stats.margin)
                if not stats.passed:  # said at once: a later shape that cannot run loses nothing
                    failures.append(f"{who} {layout} {dtype} {shape.id} seed {seed}: {stats}")
                    print(f"sweep: FAILED {failures[-1]}", flush=True)
        said = f"{judged - before} outputs judged, worst {shape_worst:.3g} of the bound"  # a limit loses no shape
        print(f"sweep: {shape.id} done: {said}, {time.monotonic() - start:.0f} s", flush=True)
    for (who, layout, dtype), ratio in sorted(worst.items()):
        print(f"sweep: {who} {layout} {dtype}: worst {ratio:.3g} of the bound", flush=True)
    for (layout, dtype, reason), count in sorted(no_peer.items()):
        print(f"sweep: {layout} {dtype}: no peer in {count} case(s): {reason}", flush=True)
    print(f"sweep: {judged} outputs judged, {len(failures)} failed, {time.monotonic() - start:.0f} s", flush=True)
    assert not failures, "\n".join(failures[:20])
