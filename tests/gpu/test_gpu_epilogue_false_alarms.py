"""On the GPU: the fused epilogue's derived bound never cries wolf. torch's epilogue GEMM (the peer, both its ways:
cuBLASLt's own epilogue where it has one, addmm and torch's element-wise steps otherwise) is judged as a kernel with
the harness's inputs, truth and bound, over the quick and edge shape sets x activation (none, relu, gelu, gelu_tanh,
silu) x bias axis x residual x dtype (bf16, fp16, fp32) x 20 seeds (the seeds take the three pairs of scalars in
turn), and no case may fail. Needs a CUDA device.

GEMM_SWEEP_SEEDS sets the seeds (default 20; "4-19" a range of them); GEMM_SWEEP_SETS which shape sets (or shapes) run
(default quick,edge); GEMM_SWEEP_PART ``i/n`` runs every n-th of their shapes from the i-th (to split the sweep over
device calls).
"""

from __future__ import annotations

import os
import time

import pytest

from pytest_gemm.records.shapes import SHAPE_SETS, Shape
from pytest_gemm.specs.cases import AB_CASES, Case
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import Variant

from support import requires_gpu, sweep_seeds

pytestmark = [requires_gpu, pytest.mark.gpu]

SEEDS = sweep_seeds("GEMM_SWEEP_SEEDS", "20")
SETS = os.environ.get("GEMM_SWEEP_SETS", "quick,edge").split(",")
PART, PARTS = (int(n) for n in os.environ.get("GEMM_SWEEP_PART", "0/1").split("/"))
DTYPES = ("bf16", "fp16", "fp32")
#: each epilogue swept: (bias, activation, residual)
EPILOGUES = (
    ("N", None, False),
    ("N", "relu", False),
    ("N", "gelu_tanh", False),
    ("N", "gelu", True),
    ("M", "silu", True),
    (None, "relu", True),
    ("M", "gelu", False),
)


@pytest.fixture(scope="module")
def runner():
    from pytest_gemm.worker.runner import open_device

    return open_device(0)


def _case(dtype: str, epilogue: tuple, shape, seed: int) -> Case:
    bias, activation, residual = epilogue
    table = {"residual": residual, "args": ["D"]}
    table |= {"bias": bias} if bias else {}
    table |= {"activation": activation} if activation else {}
    table["args"] = [*(["bias"] if bias else []), *(["residual"] if residual else []), "D"]
    spec = spec_from_mapping({"dtypes": [dtype], "epilogue": table}, path="sweep.py", kind="py", default_name="sweep")
    return Case(spec, Variant(), dtype, shape, AB_CASES[seed % len(AB_CASES)])


def _drawn(cp, case: Case):
    """The float family's input strategy with A, B and C drawn by CuPy's generator on the device (on the host, the
    edge set's 8192-wide operands would take most of the sweep); the epilogue's bias and residual as the harness
    draws them."""
    from pytest_gemm.records.dtypes import get_dtype
    from pytest_gemm.specs.footprint import storage_dims
    from pytest_gemm.worker.buffers import np_dtype
    from pytest_gemm.worker.inputs import FloatInputs
    from pytest_gemm.worker.operands import CaseInputs

    class DeviceDrawn(FloatInputs):
        def draw(self, seed: int):
            state = cp.random.RandomState(seed)

            def draw(op: str, dtype: str):
                _, rows, cols = storage_dims(case.spec, op, case.shape)
                x = state.uniform(-1.0, 1.0, (rows, cols), dtype=cp.float32)
                storage = np_dtype(get_dtype(dtype))
                return x.get().astype(storage) if dtype == "bf16" else x.astype(storage).get()

            a, b = draw("A", case.dtype), draw("B", case.dtype)
            c0 = draw("C", case.spec.output_dtype(case.dtype)) if case.c_prior else None
            return CaseInputs(a, b, c0, case.storage)

    return DeviceDrawn(case)


def test_torch_epilogues_never_fail_the_bound(runner):
    """0 failures of the peer's epilogue GEMM over the shape sets, epilogues, dtypes and seeds."""
    from pytest_gemm.worker.epilogue_peer import lt_epilogue
    from pytest_gemm.worker.kinds import KernelStrategy
    from pytest_gemm.worker.peers import peer_strategy
    from pytest_gemm.worker.prepared import PreparedCase

    cp = runner.cp
    shapes = [s for name in SETS for s in (SHAPE_SETS[name] if name in SHAPE_SETS else [Shape.of(name)])][PART::PARTS]
    failures, judged, worst, start = [], 0, {}, time.monotonic()
    for shape in shapes:
        cp.get_default_memory_pool().free_all_blocks()
        for epilogue in EPILOGUES:
            for dtype in DTYPES:
                for seed in SEEDS:
                    case = _case(dtype, epilogue, shape, seed)
                    inputs = _drawn(cp, case)
                    peer = peer_strategy(case, inputs, runner.capability)
                    assert not peer.reason, peer.reason
                    prepared = PreparedCase(runner, case, seed, KernelStrategy(runner, case, inputs), inputs, peer)
                    with runner.stream:
                        bits = prepared.uploaded()
                        stats = prepared.peer_stats(prepared.truth(bits), bits)
                        runner.stream.synchronize()
                    judged += 1
                    way = "cuBLASLt" if lt_epilogue(case.spec.epilogue, case.ab.beta, case.c_prior) else "addmm+"
                    key = (way, epilogue, dtype)
                    worst[key] = max(worst.get(key, (0.0, "")), (1 / stats.margin, f"{shape.id} seed {seed}"))
                    if not stats.passed:
                        failures.append(f"{way} {epilogue} {dtype} {shape.id} seed {seed}: {stats}")
                        print(f"sweep: FAILED {failures[-1]}", flush=True)
        print(f"sweep: {shape.id} done at {time.monotonic() - start:.0f} s", flush=True)
    for key, (ratio, where) in sorted(worst.items(), key=str):
        print(f"sweep: {key}: worst {ratio:.3g} of the bound ({where})", flush=True)
    print(f"sweep: {judged} outputs judged, {len(failures)} failed, {time.monotonic() - start:.0f} s", flush=True)
    assert not failures, "\n".join(failures[:20])
