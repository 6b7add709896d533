"""On the GPU: the accuracy rule never cries wolf on correct GEMMs, and has no blind spot at tiny outputs.

The sweep judges cuBLAS (the peer, as the harness runs it) and CuPy's own matmul as kernels, with the harness's
inputs, truth and bound, over every shape set (the batched one too) x every dtype x each declared
accumulation x 20 seeds (the seeds take the three pairs of scalars in turn), and requires no failure. Then an fp32
kernel that rounds its inputs to fp16 or TF32 must fail at 1 x 1 x 1000 and at 64 x 64 x 1 on every seed. Needs a
CUDA device.
"""

from __future__ import annotations

import itertools
import os

import pytest

from pytest_gemm.judge.accuracy import matmul
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.shapes import SHAPE_SETS, Shape
from pytest_gemm.records.storage import ORDERS
from pytest_gemm.specs.cases import AB_CASES, Case, precision
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import Variant

from support import requires_gpu

pytestmark = [requires_gpu, pytest.mark.gpu]

SEEDS = int(os.environ.get("GEMM_SWEEP_SEEDS", "20"))
#: seeds for shapes of more than 2048^3 multiply-adds (the llm set, 4096^3, the skinny edge shapes), where each seed
#: costs most of a second; GEMM_SWEEP_LARGE_SEEDS lowers it where device time is short (the closing note says so)
LARGE_SEEDS = int(os.environ.get("GEMM_SWEEP_LARGE_SEEDS", str(SEEDS)))
#: (dtype, declared accumulation, C's dtype): each dtype at its default, fp16 accumulation, and fp32 outputs
PRECISIONS = [
    ("fp32", None, None),
    ("tf32", None, None),
    ("fp16", None, None),
    ("fp16", "fp16", None),
    ("fp16", None, "fp32"),
    ("bf16", None, None),
    ("bf16", None, "fp32"),
    ("fp64", None, None),
]
#: besides the shape sets: the false alarms once raised at K = 1 (fp16 outputs below the smallest normal number)
EXTRA_SHAPES = [Shape(256, 256, 1), Shape(4096, 4096, 1)]
#: every storage order of A, B and C, on small shapes, for these (dtype, accumulation, C's dtype)
ORDER_PRECISIONS = [("fp32", None, None), ("fp16", None, None), ("fp16", None, "fp32"), ("fp16", "fp16", None)]
ORDER_SHAPES = [Shape(256, 256, 256), Shape(67, 45, 37), Shape(1, 1, 1000), Shape(64, 64, 1)]
#: GEMM_SWEEP_DTYPES=fp16,bf16 sweeps only those dtypes (a look at one, where device time is short)
DTYPES = os.environ.get("GEMM_SWEEP_DTYPES", "").split(",") if os.environ.get("GEMM_SWEEP_DTYPES") else None
#: GEMM_SWEEP_ONLY="tf32,fp16 out fp32,K=1,orders" sweeps only those precisions (as the lines print them), the
#: extra K = 1 shapes (K=1), the storage orders (orders) and the batched shapes (batched): a part of the sweep, where
#: device time is short
ONLY = set(os.environ["GEMM_SWEEP_ONLY"].split(",")) if os.environ.get("GEMM_SWEEP_ONLY") else None


@pytest.fixture(scope="module")
def runner():
    from pytest_gemm.worker.runner import open_device

    return open_device(0)


def _prepared(runner, case: Case, seed: int, inputs=None):
    """The case prepared on the GPU as the worker prepares it (its inputs drawn by ``inputs``, the case's own input
    strategy by default), with its peer; no kernel of its own is launched."""
    from pytest_gemm.worker.inputs import input_strategy
    from pytest_gemm.worker.kinds import KernelStrategy
    from pytest_gemm.worker.peers import peer_strategy
    from pytest_gemm.worker.prepared import PreparedCase

    inputs = inputs or input_strategy(case)
    peer = peer_strategy(case, inputs, runner.capability)
    return PreparedCase(runner, case, seed, KernelStrategy(runner, case, inputs), inputs, peer)


def _drawn_on_the_device(cp, case: Case):
    """The float family's input strategy, its inputs drawn by CuPy on the device (:func:`_inputs`)."""
    from pytest_gemm.worker.inputs import FloatInputs

    class DeviceDrawn(FloatInputs):
        def draw(self, seed: int):
            return _inputs(cp, self.case, seed)

    return DeviceDrawn(case)


def _case(dtype: str, accumulate: str | None, c_dtype: str | None, shape: Shape, seed: int, storage=None) -> Case:
    data = {"dtypes": [dtype]} | ({"accumulate": accumulate} if accumulate else {})
    data |= ({"c_dtype": c_dtype} if c_dtype else {}) | ({"storage": storage} if storage else {})
    data |= {"batched": True} if shape.batch > 1 else {}
    spec = spec_from_mapping(data, path="sweep.py", kind="py", default_name="sweep")
    return Case(spec, Variant(), dtype, shape, AB_CASES[seed % len(AB_CASES)])


def _label(dtype: str, accumulate: str | None, c_dtype: str | None) -> str:
    return dtype + (f" acc {accumulate}" if accumulate else "") + (f" out {c_dtype}" if c_dtype else "")


def _inputs(cp, case: Case, seed: int):
    """The case's A, B and prior C as the harness draws them (uniform in [-1, 1), stored exactly in the dtype), drawn
    by CuPy's generator on the device: on the host, drawing the large shapes' inputs would take most of the sweep.
    The rule's claim does not depend on the generator."""
    import numpy as np

    from pytest_gemm.worker.buffers import np_dtype
    from pytest_gemm.worker.operands import CaseInputs

    state = cp.random.RandomState(seed)
    work = cp.float64 if case.dtype == "fp64" else cp.float32

    def draw(shape, dtype):
        storage = np_dtype(get_dtype(dtype))
        x = state.uniform(-1.0, 1.0, shape, dtype=work)
        return x.get().astype(storage) if dtype == "bf16" else x.astype(storage).get()

    m, n, k, batch = case.shape.M, case.shape.N, case.shape.K, case.shape.batch  # a batch's stacked
    c0 = draw((batch * m, n), case.spec.output_dtype(case.dtype)) if case.c_prior else None
    a, b = np.asarray(draw((batch * m, k), case.dtype)), np.asarray(draw((batch * k, n), case.dtype))
    return CaseInputs(a, b, c0, case.storage, batch)


def _cupy_matmul(cp, case: Case, data):
    """CuPy's own matmul as a Python kernel computes ``alpha * (A @ B) + beta * C`` (the README's example), in the
    case's dtype: for fp16, the product, its scaling and the sum are each rounded to fp16. bf16, which CuPy has no
    arithmetic for, is computed in fp32 and rounded once. None where CuPy has no such GEMM: TF32 and fp16
    accumulation are the peer's alone."""
    import numpy as np

    from pytest_gemm.worker.buffers import np_dtype, upload_bits

    if case.dtype in ("tf32", "fp64") or case.spec.accumulate:  # fp64: CuPy's matmul is the truth itself
        return None
    batch = case.shape.batch  # CuPy's batched matmul on a batch (stacked: judge.accuracy.matmul)
    if case.spec.c_dtype == "fp32":  # a mixed-output kernel in CuPy: the inputs widened, fp32 arithmetic
        a, b = (cp.asarray(x.astype(np.float32)) for x in (data.a, data.b))
        result = case.ab.alpha * matmul(a, b, batch)
        if data.c0 is not None:
            result = result + case.ab.beta * cp.asarray(data.c0)
        return result.astype(cp.float64)
    if case.dtype == "bf16":
        a, b = (cp.asarray(x.astype(np.float32)) for x in (data.a, data.b))
        result = case.ab.alpha * matmul(a, b, batch)
        if data.c0 is not None:
            result += case.ab.beta * cp.asarray(data.c0.astype(np.float32))
        return cp.asarray(result.get().astype(data.a.dtype).astype(np.float64))
    storage = np_dtype(get_dtype(case.dtype))
    a, b = upload_bits(cp, data.a).view(storage), upload_bits(cp, data.b).view(storage)
    result = case.ab.alpha * matmul(a, b, batch)
    if data.c0 is not None:
        result = result + case.ab.beta * upload_bits(cp, data.c0).view(storage)
    return result.astype(cp.float64)


def test_correct_gemms_never_fail_the_bound(runner):
    """0 failures of cuBLAS and CuPy's matmul over the shape sets, dtypes, accumulations and seeds."""
    import time

    cp = runner.cp
    sets = ("quick", "standard", "edge", "llm", "batched")
    shapes = list(dict.fromkeys(s for name in sets for s in SHAPE_SETS[name]))
    shapes += EXTRA_SHAPES
    lines = [(p, shape, None) for p in PRECISIONS for shape in shapes]
    orders = [dict(zip("ABC", o)) for o in itertools.product(*ORDERS.values())]
    lines += [(p, shape, order) for p in ORDER_PRECISIONS for order in orders for shape in ORDER_SHAPES]
    failures, judged, worst, start = [], 0, {}, time.monotonic()
    done = None
    for (dtype, accumulate, c_dtype), shape, order in lines:
        if DTYPES is not None and dtype not in DTYPES:
            continue
        label = _label(dtype, accumulate, c_dtype)
        if ONLY is not None and not (
            label in ONLY
            or ("K=1" in ONLY and shape in EXTRA_SHAPES)
            or ("orders" in ONLY and order)
            or ("batched" in ONLY and shape.batch > 1)
        ):
            continue
        if (label, bool(order)) != done:
            print(f"sweep: {label}{' orders' if order else ''} from {time.monotonic() - start:.0f} s", flush=True)
            done = (label, bool(order))
        for seed in range(LARGE_SEEDS if shape.flops > 2 * 2048**3 else SEEDS):
            case = _case(dtype, accumulate, c_dtype, shape, seed, order)
            prepared = _prepared(runner, case, seed, _drawn_on_the_device(cp, case))
            data = prepared.data
            with runner.stream:
                bits = prepared.uploaded()
                truth = prepared.truth(bits)
                results = {"cuBLAS": prepared.peer_stats(truth, bits)}
                mine = _cupy_matmul(cp, case, data)
                if mine is not None:
                    dt, out = precision(case)
                    results["CuPy"] = truth.judge(cp, mine, shape.K, dt, out)
                runner.stream.synchronize()
            for who, stats in results.items():
                judged += 1
                key = (who, _label(dtype, accumulate, c_dtype))
                worst[key] = max(worst.get(key, 0.0), 1 / stats.margin)
                if not stats.passed:
                    where = f" ({case.storage.text})" if order else ""
                    failures.append(f"{who} {case.name}{where} seed {seed}: max {stats.max_ratio:.3g}x, normwise "
                                    f"{stats.norm_ratio:.3g}x")  # fmt: skip
                    print(f"sweep: FAILED {failures[-1]}", flush=True)
            del truth, results, mine, prepared, data
    for (who, label), ratio in sorted(worst.items()):
        print(f"sweep: {who} {label}: worst {ratio:.3g} of the bound")
    large = sum(s.flops > 2 * 2048**3 for s in shapes)
    print(
        f"sweep: {judged} outputs judged over {len(shapes)} shapes ({large} of them past 2048^3, {LARGE_SEEDS} seeds; "
        f"the others {SEEDS} seeds) x {len(PRECISIONS)} precisions, and {len(ORDER_SHAPES)} shapes x {len(orders)} "
        f"storage orders x {len(ORDER_PRECISIONS)} precisions, in {time.monotonic() - start:.0f} s, "
        f"{len(failures)} failed"
    )
    if ("cuBLAS", "tf32") in worst:  # cuBLAS's tf32 peer rounds its inputs (it is TF32, not fp32)
        assert worst[("cuBLAS", "tf32")] > 0.005, worst[("cuBLAS", "tf32")]
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("cheat", ["fp16", "tf32"])
@pytest.mark.parametrize("shape", [Shape(1, 1, 1000), Shape(2, 2, 1000), Shape(64, 64, 1)], ids=str)
def test_rounded_inputs_are_caught_at_tiny_outputs(runner, cheat, shape):
    """An fp32 kernel that rounds its inputs to fp16 or TF32 fails on every seed where K is 1 and from
    2 x 2 x 1000 up; at 1 x 1 x 1000, a single sum of 1000 rounding errors of either sign, about 2.5% of seeds
    cancel to within a correct kernel's error (simulated: docs/verification.md), so 90% must fail there."""
    cp = runner.cp
    caught = 0
    for seed in range(SEEDS):
        case = _case("fp32", None, None, shape, seed)
        prepared = _prepared(runner, case, seed)
        data = prepared.data
        with runner.stream:
            truth = prepared.truth(prepared.uploaded())
            a, b = cp.asarray(data.a), cp.asarray(data.b)
            if cheat == "fp16":
                a, b = a.astype(cp.float16).astype(cp.float32), b.astype(cp.float16).astype(cp.float32)
            else:  # TF32: 10 explicit mantissa bits, rounded to nearest
                a, b = (((x.view(cp.uint32) + 0x1000) & 0xFFFFE000).view(cp.float32) for x in (a, b))
            got = case.ab.alpha * (a @ b)
            if data.c0 is not None:
                got += case.ab.beta * cp.asarray(data.c0)
            dt, out = precision(case)
            stats = truth.judge(cp, got.astype(cp.float64), shape.K, dt, out)
        caught += not stats.passed
    assert caught >= (0.9 * SEEDS if shape == Shape(1, 1, 1000) else SEEDS), (caught, SEEDS)
