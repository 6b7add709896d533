"""Strided-batched GEMM on the CPU, with recorded-free NumPy kernels.

The kernels here are NumPy functions that address the worker's own guarded buffers through the integer arguments a
CUDA kernel gets (each operand's address, ld and batch stride), so a stride ignored really reads batch 0, and a write
past a matrix really lands in the gap the harness leaves before the next one. tests/gpu/test_gpu_batched.py runs the
same bugs as CUDA kernels on the GPU.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import Truth, sum_scale, tile_summary
from pytest_gemm.judge.case import findings, wrong_output
from pytest_gemm.judge.misread import misreading
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.outcome import Misread, Verification
from pytest_gemm.records.plain import from_plain, to_plain
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import SHAPE_SETS, Shape, ShapeError, parse_shapes
from pytest_gemm.records.storage import ORDERS, Storage
from pytest_gemm.records.verdicts import Check, Misreading
from pytest_gemm.report.failure import diagnosis_lines, failure_text
from pytest_gemm.specs.cases import AlphaBeta, Case, expand, launch_geometry
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.footprint import BATCH_GAP_ROWS, LD_PAD, case_memory, harness_ints, int_args_problem
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.signature import signature_problems
from pytest_gemm.worker.buffers import guarded, where_landed
from pytest_gemm.worker.cublas import gemm_call, stacked_layout, stored_operands
from pytest_gemm.worker.inputs import input_strategy
from pytest_gemm.worker.operands import CaseInputs

FP32 = get_dtype("fp32")
STRIDED = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c"]
ARGS = [*STRIDED, "batch"]
ALL_ORDERS = [Storage(*orders) for orders in itertools.product(*(ORDERS[op] for op in "ABC"))]


def _spec(args=ARGS, path="k.cu", **header):
    data = {"entry": "k", "args": args, "dtypes": ["fp32"], "block": [16, 16]}
    data["grid"] = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"] if "batch" in args else ["cdiv(N, 16)", "cdiv(M, 16)"]
    return spec_from_mapping({**data, **header}, path=path)


def _error(**header) -> str:
    with pytest.raises(KernelFileError) as info:
        _spec(**header)
    return str(info.value)


# -- shapes, headers, cases ---------------------------------------------------------------------


def test_a_batch_is_written_after_the_shape_and_counts_in_its_flops():
    shapes = parse_shapes("96x96x96b4,256b8,64x32x16")
    assert shapes == [Shape(96, 96, 96, 4), Shape(256, 256, 256, 8), Shape(64, 32, 16)]
    assert [s.id for s in shapes] == ["96x96x96b4", "256x256x256b8", "64x32x16"]
    assert Shape.of("96x96x96b4") == shapes[0] and Shape.from_plain_value("96x96x96b4") == shapes[0]
    assert shapes[0].flops == 4 * Shape(96, 96, 96).flops
    for bad in ("96x96x96b0", "96x96x96b", "b4"):
        with pytest.raises(ShapeError):
            parse_shapes(bad)
    assert all(s.batch > 1 for s in SHAPE_SETS["batched"])


def test_a_cu_kernel_is_batched_by_taking_batch_and_its_strides():
    spec = _spec()
    assert spec.batched and not _spec(args=["M", "N", "K", "A", "B", "C"]).batched
    geometry = launch_geometry(spec, spec.variants()[0], Shape(40, 33, 8, 5), sm_count=None)
    assert geometry.grid == (3, 3, 5)  # grid z over the batch
    assert "stride_a is a batch stride: a kernel that takes one takes the batch count" in _error(args=STRIDED)
    assert "runs strided batches by taking batch" in _error(batched=True)
    assert "the kernel takes no batch stride" in _error(args=["M", "N", "K", "A", "B", "C", "batch"], stride_type="int")
    assert "cannot be a param name" in _error(params={"batch": [1, 2]})
    maps = {"tensor_maps": {"A": {"box": [64, 64]}}}
    assert "not yet the 3-D maps of a batch" in _error(args=[*ARGS, "A_map"], **maps)
    assert "stride_type': expected the C type of stride_a, stride_b and stride_c" in _error(stride_type="long")


def test_a_python_kernel_says_batched():
    from pytest_gemm.specs.pyfile import parse_py_source

    text = (
        "from pytest_gemm import gemm_kernel\n\n"
        '@gemm_kernel(dtypes=["fp32"], batched=True)\ndef k(A, B, C, alpha, beta):\n    pass\n\n'
        '@gemm_kernel(dtypes=["fp32"])\ndef one(A, B, C, alpha, beta):\n    pass\n'
    )
    batched, one = parse_py_source("k.py", text)
    assert batched.batched and not one.batched


def test_a_kernel_of_one_gemm_skips_a_batch_and_a_batched_one_runs_a_batch_of_one():
    shapes = [Shape(64, 64, 64), Shape(64, 64, 64, 3)]
    one = expand(_spec(args=["M", "N", "K", "alpha", "beta", "A", "B", "C"]), shapes)
    reasons = {c.shape: c.skip_reason for c in one}
    assert reasons[shapes[0]] is None
    assert reasons[shapes[1]] == (
        "64x64x64b3 is a batch of 3; the kernel takes one GEMM at a time (a batched one declares batch (and "
        "stride_a, stride_b, stride_c) in args)"
    )
    assert all(c.skip_reason is None for c in expand(_spec(), shapes))
    assert next(c.id for c in expand(_spec(), shapes[1:])) == "fp32-64x64x64b3"


def test_the_strides_passed_leave_guarded_rows_between_batches_and_fit_their_type():
    spec, shape = _spec(), Shape(40, 33, 8, 5)
    ints = harness_ints(spec, shape)
    assert ints["batch"] == (5, "")
    assert ints["stride_a"] == ((40 + BATCH_GAP_ROWS) * (8 + LD_PAD), f"M + {BATCH_GAP_ROWS} rows of lda")
    assert ints["stride_c"][0] == (40 + BATCH_GAP_ROWS) * (33 + LD_PAD)
    col = harness_ints(_spec(storage={"C": "NxM"}), shape)  # C stored N x M: N rows of M (+ padding)
    assert col["stride_c"] == ((33 + BATCH_GAP_ROWS) * (40 + LD_PAD), f"N + {BATCH_GAP_ROWS} rows of ldc")
    packed_only = harness_ints(_spec(args=["M", "N", "K", "A", "B", "C", "batch"]), shape)
    assert set(packed_only) == {"M", "N", "K", "batch"}
    big = Shape(50000, 50000, 8, 2)  # stride_c = (50000 + 16) * (50000 + 16): past an int, not past a long long
    assert int_args_problem(spec, big) == (
        f"stride_c = {50016 * 50016} (M + {BATCH_GAP_ROWS} rows of ldc) is past the kernel's int arguments (at most "
        "2147483647)"
    )
    assert int_args_problem(_spec(stride_type="long long"), big) is None
    large = Shape(1024, 1024, 1024, 5)
    one, five = (case_memory(spec, "fp32", s, False).total for s in (Shape(1024, 1024, 1024), large))
    assert 4.5 * one < five < 5.5 * one  # five matrices, their gaps and their fp64 work


def test_strides_are_checked_against_the_compiled_kernel_by_their_own_type():
    spec = _spec(stride_type="long long")
    sizes = [4, 4, 4, 4, 8, 4, 8, 8, 4, 8, 4, 8, 4, 8, 4]  # int sizes, long long strides, as cuBLAS declares them
    assert signature_problems(spec, "fp32", sizes) == []
    wrong = signature_problems(_spec(), "fp32", sizes)
    assert wrong[0] == (
        "parameter 7 (stride_a) takes 8 bytes in the compiled kernel, but the harness passes 4 (stride_type 'int'); "
        "declare stride_type = 'long long' or 'size_t'"
    )


# -- a batch on the worker's buffers, run by NumPy kernels ----------------------------------------


def _address(storage: Storage, op: str, r, c, ld: int):
    """Where logical element (r, c) of ``op`` lies in one matrix of its batch."""
    return c * ld + r if storage.transposed(op) else r * ld + c


def _kernel(case: Case, g: dict, bug: str | None = None) -> None:
    """A strided-batched GEMM through the arguments a CUDA kernel gets, with at most one bug."""
    s, (m, n, k, batch) = case.storage, (case.shape.M, case.shape.N, case.shape.K, case.shape.batch)
    a, b, c = (g[op].pointer().view(np.float32) for op in "ABC")
    r, col, kk = np.arange(m)[:, None], np.arange(n)[None, :], np.arange(k)
    for i in range(batch):
        ai = 0 if bug == "a stride ignored" else i
        bi = (i + 1) % batch if bug == "next batch's B" else i
        ci = batch - 1 - i if bug == "C reversed" else i
        x = a[ai * g["A"].batch_stride + _address(s, "A", r, kk[None, :], g["A"].ld)]
        y = b[bi * g["B"].batch_stride + _address(s, "B", kk[:, None], col, g["B"].ld)]
        at = ci * g["C"].batch_stride + _address(s, "C", r, col, g["C"].ld)
        value = np.float32(case.ab.alpha) * (x @ y)
        if case.ab.beta != 0:
            value += np.float32(case.ab.beta) * c[at]
        c[at] = value
        if bug == "gap write":
            c[i * g["C"].batch_stride + g["C"].rows * g["C"].ld] = 1.0
        if bug == "reads the gap" and i < batch - 1:  # the element after this batch's A, times 0: NaN from the gap
            c[ci * g["C"].batch_stride + _address(s, "C", m - 1, col, g["C"].ld)] += (
                np.float32(0) * a[ai * g["A"].batch_stride + g["A"].rows * g["A"].ld]
            )


def _run(case: Case, bug: str | None = None, seed: int = 1):
    """Verify one case as the worker does, on the CPU: the output judged, the guards, the misreading."""
    data = input_strategy(case).draw(seed)
    g = {}
    for op, x in (("A", data.a), ("B", data.b), ("C", data.c0)):
        low = op.lower()
        fill = None if x is None else data.stored(x, op)
        g[op] = guarded(
            np, FP32, f"ld{low}" in case.spec.args, case.storage.stored_shape(op, case.shape), fill,
            batch=case.shape.batch, gap=f"stride_{low}" in case.spec.args,
        )  # fmt: skip
    with np.errstate(invalid="ignore"):
        _kernel(case, g, bug)
    a64, b64 = data.a.astype(np.float64), data.b.astype(np.float64)
    c064 = None if data.c0 is None else data.c0.astype(np.float64)
    truth = Truth.of(np, a64, b64, c064, case.ab.alpha, case.ab.beta, FP32, case.shape.batch)
    got = data.logical(g["C"].as_float64(np, FP32), "C")
    stats = truth.judge(np, got, case.shape.K, FP32, FP32)
    read = misreading(np, got, a64, b64, c064, case.ab.alpha, case.ab.beta, case.storage, FP32, FP32, truth)
    faults = [f for op in "ABC" for f in g[op].guard_faults(np, op)]
    return stats, read, faults, g


def _case(shape=None, ab=None, args=ARGS, storage=None) -> Case:
    shape, ab, storage = shape or Shape(24, 20, 12, 3), ab or AlphaBeta(1.0, 0.0), storage or Storage()
    spec = _spec(args=args, storage={op: storage.order(op) for op in "ABC"})
    return Case(spec, spec.variants()[0], "fp32", shape, ab)


@pytest.mark.parametrize("storage", ALL_ORDERS, ids=lambda s: s.text.replace(", ", "-").replace(" ", ""))
@pytest.mark.parametrize("ab", [AlphaBeta(1.0, 0.0), AlphaBeta(0.7, 1.3)], ids=["beta0", "prior"])
def test_a_right_batch_passes_in_every_order_with_its_gaps_untouched(storage, ab):
    stats, read, faults, g = _run(_case(ab=ab, storage=storage))
    assert stats.passed and read is None and faults == []
    assert g["C"].batch == 3 and g["C"].batch_stride == (g["C"].rows + BATCH_GAP_ROWS) * g["C"].ld


def test_a_kernel_that_takes_no_strides_gets_its_batch_packed():
    stats, _, faults, g = _run(_case(args=["M", "N", "K", "alpha", "A", "B", "beta", "C", "batch"]))
    assert stats.passed and faults == []
    assert [g[op].batch_stride for op in "ABC"] == [24 * 12, 12 * 20, 24 * 20]
    assert not any("gaps" in region for region in g["C"].regions("C"))


@pytest.mark.parametrize(
    ("bug", "kind", "pairs"),
    [
        ("a stride ignored", Misreading.OTHER_BATCH_A, ((1, 0), (2, 0), (3, 0))),
        ("next batch's B", Misreading.OTHER_BATCH_B, ((0, 1), (1, 2), (2, 3), (3, 0))),
        ("C reversed", Misreading.OTHER_BATCH_C, ((0, 3), (1, 2), (2, 1), (3, 0))),
    ],
)
@pytest.mark.parametrize("storage", [Storage(), Storage("KxM", "NxK", "NxM")], ids=["row", "transposed"])
@pytest.mark.parametrize("ab", [AlphaBeta(1.0, 0.0), AlphaBeta(0.7, 1.3)], ids=["beta0", "prior"])
def test_a_batch_mixed_up_is_named_batch_by_batch(bug, kind, pairs, storage, ab):
    """With beta != 0 a kernel that writes another batch's C reads that batch's C0 too: still named."""
    stats, read, faults, _ = _run(_case(Shape(24, 20, 12, 4), ab, storage=storage), bug)
    assert not stats.passed and faults == []
    assert read == Misread(kind, len(pairs) * 24 * 20, pairs, len(pairs))


def test_a_mix_up_reads_batch_by_batch_in_the_failure():
    case = _case(Shape(24, 20, 12, 4))
    stats, read, _, _ = _run(case, "a stride ignored")
    result = Verification(case.name, 1, case.shape, 1.0, 0.0, stats, None, misread=read)
    assert findings(result)[0].batches == ((1, 0), (2, 0), (3, 0))
    d = wrong_output(result, "fp32")
    lines = diagnosis_lines(d)
    assert lines[0] == (
        "matches another batch's A read (batch 1 read batch 0's A, batch 2 read batch 0's A, batch 3 read batch "
        f"0's A; 3 of 4 batches): {3 * 24 * 20} of {4 * 24 * 20} elements lie within that reading's bound"
    )
    text = failure_text(case.name, CaseResult("failed", kind="case", diagnosis=d), "replay")
    assert "(M=24, N=20, K=12, batch=4, alpha=1, beta=0)" in text
    assert "worst elements (batch, row, col)" in text and "errors in 3 of 4 32x32 tiles of C: batch 1 rows 0-23" in text
    assert from_plain(Misread, to_plain(read)) == read


def test_a_misreading_of_every_batch_is_named_as_for_one_matrix():
    """B stored N x K read as K x N in every matrix of the batch: the reading of one matrix, matrix by matrix."""
    batch, m, n, k = 3, 24, 24, 12
    case = _case(Shape(m, n, k, batch), storage=Storage(B="NxK"))
    data = input_strategy(case).draw(1)
    a64, b64 = data.a.astype(np.float64), data.b.astype(np.float64)
    stored = [b64[i * k : (i + 1) * k].T.reshape(-1) for i in range(batch)]  # each B's bytes, N x K
    read = [x.reshape(k, n) for x in stored]  # read as K x N
    got = np.concatenate([a64[i * m : (i + 1) * m] @ read[i] for i in range(batch)])
    truth = Truth.of(np, a64, b64, None, 1.0, 0.0, FP32, batch)
    assert not truth.judge(np, got, k, FP32, FP32).passed
    found = misreading(np, got, a64, b64, None, 1.0, 0.0, case.storage, FP32, FP32, truth)
    assert found == Misread(Misreading.B_ORDER, got.size)


def test_a_write_into_the_gap_between_batches_is_named_by_batch():
    _, _, faults, _ = _run(_case(Shape(24, 20, 12, 3)), "gap write")
    assert [(f.kind, f.where, f.count) for f in faults] == [
        (Check.OUT_OF_BOUNDS, "the guard after C", 1),  # the last batch's lands past C
        (Check.OUT_OF_BOUNDS, "the gap after batch 0 of C (between its rows and the next batch's), and after 1 more "
         "of its batches", 2),
    ]  # fmt: skip


def test_a_read_of_the_gap_between_batches_gives_nan():
    """The gaps hold the NaN guard: a kernel that reads A one matrix too far per batch reads NaN."""
    case = _case()
    data = input_strategy(case).draw(1)
    g = guarded(np, FP32, True, (24, 12), data.a, batch=3, gap=True)
    gap = g.pointer().view(np.float32)[24 * g.ld : 25 * g.ld]
    assert np.isnan(gap).all() and g.regions("A")["the gaps between the batches of A"].shape == (2, BATCH_GAP_ROWS, 28)


# -- the truth, the tiles and the peer -----------------------------------------------------------


def test_the_truth_of_a_batch_is_each_matrix_s_own():
    rng = np.random.default_rng(0)
    a, b, c0 = rng.standard_normal((3 * 5, 4)), rng.standard_normal((3 * 4, 6)), rng.standard_normal((3 * 5, 6))
    truth = Truth.of(np, a, b, c0, 0.5, 2.0, FP32, 3)
    for i in range(3):
        ai, bi, ci = a[5 * i : 5 * i + 5], b[4 * i : 4 * i + 4], c0[5 * i : 5 * i + 5]
        one = Truth.of(np, ai, bi, ci, 0.5, 2.0, FP32)
        for got, want in ((truth.value, one.value), (truth.gscale, one.gscale), (truth.hscale, one.hscale)):
            np.testing.assert_allclose(got[5 * i : 5 * i + 5], want)
    spreads = [sum_scale(np, a[5 * i : 5 * i + 5], b[4 * i : 4 * i + 4], c0[5 * i : 5 * i + 5], 0.5, 2.0)
               for i in range(3)]  # fmt: skip
    assert truth.spread == pytest.approx(np.sqrt(np.sum(np.square(spreads))))


def test_tiles_of_a_batch_are_counted_matrix_by_matrix():
    bad = np.zeros((3 * 40, 40), dtype=bool)
    bad[40 + 35, 3] = True  # batch 1, row 35: its second row of tiles
    listed, count, total = tile_summary(np, bad, batch=3)
    assert (listed, count, total) == (((3, 0),), 1, 3 * 2 * 2)


@pytest.mark.parametrize("storage", ALL_ORDERS, ids=lambda s: s.text.replace(", ", "-").replace(" ", ""))
def test_the_peer_runs_cublas_strided_batched_gemm_on_the_bytes_as_stored(storage):
    """cuBLAS's strided-batched GEMM, emulated on the peer's operands (each stacked, packed, in its stored order),
    computes each matrix's alpha A B + beta C0."""
    shape, batch = Shape(5, 7, 3, 4), 4
    rng = np.random.default_rng(2)
    a, b, c0 = (rng.random(s).astype(np.float32) for s in ((batch * 5, 3), (batch * 3, 7), (batch * 5, 7)))
    data = CaseInputs(a, b, c0, storage, batch)
    bits = (a.view(np.uint32), b.view(np.uint32), c0.view(np.uint32))
    stored = {k: v.view(np.float32).astype(np.float64) for k, v in stored_operands(np, data, bits, shape, FP32).items()}
    call = gemm_call(storage, shape)
    args = {name: (0, *stacked_layout(x, batch)) for name, x in stored.items()}
    flat = {name: x.reshape(-1) for name, x in stored.items()}
    for i in range(batch):

        def operand(name, trans, rows, cols, i=i):  # op(X) rows x cols, column-major, batch i
            _, ld, stride = args[name]
            x = flat[name][i * stride :]
            x = np.lib.stride_tricks.as_strided(x, (cols, rows) if trans else (rows, cols), (8, 8 * ld))
            return x.T if trans else x

        first = operand(call.first, call.trans_first, call.m, call.k)
        second = operand(call.second, call.trans_second, call.k, call.n)
        out = operand("C", False, call.m, call.n)
        out[...] = 0.5 * (first @ second) + 2.0 * out
    got = data.logical(stored["C"], "C")
    np.testing.assert_allclose(got, Truth.of(np, a.astype(float), b.astype(float), c0.astype(float), 0.5, 2.0, FP32,
                                             batch).value, rtol=1e-6)  # fmt: skip


def test_only_a_batch_wrong_and_finite_is_worth_the_misreadings():
    from pytest_gemm.judge.misread import may_be_misread
    from pytest_gemm.records.outcome import ErrorStats

    def stats(bad: int, nonfinite: int) -> ErrorStats:
        return ErrorStats(1e3, 1e3, bad, 400, nonfinite, 0, 1.0, 1e-6, (), (), 1, 4, 32)

    assert may_be_misread(stats(100, 0), batch=4)  # one matrix of four wrong: worth comparing batches
    assert not may_be_misread(stats(100, 0))  # as one matrix, a quarter wrong is not a misreading
    assert not may_be_misread(stats(400, 400), batch=4)  # all NaN (unwritten): nothing to match


def test_without_guards_a_batch_allocates_its_matrices_and_gaps_alone():
    """Under compute-sanitizer (no guards) nothing is allocated past the last matrix, so memcheck sees a read or
    write past it; the gaps between matrices stay (they are the stride)."""
    one = guarded(np, FP32, True, (10, 8), None, guards=False, batch=1, gap=True)
    assert one.flat.size == 10 * 24 and one.matrix(np.uint32).shape == (10, 8)
    fill = np.random.default_rng(0).random((3 * 10, 8), dtype=np.float32)
    three = guarded(np, FP32, True, (10, 8), fill, guards=False, batch=3, gap=True)
    assert three.flat.size == 2 * (10 + BATCH_GAP_ROWS) * 24 + 10 * 24
    assert np.array_equal(three.matrix(np.float32), fill.reshape(3, 10, 8))  # built on the host, then copied


@pytest.mark.parametrize("transposed", [False, True])
def test_writes_outside_a_batch_are_mapped_onto_the_stacked_matrices(transposed):
    rows, cols = (20, 24) if transposed else (24, 20)  # C stored N x M when transposed (M = 24, N = 20)
    g = guarded(np, FP32, True, (rows, cols), None, batch=3, gap=True)
    after = g.pointer()[2 * g.batch_stride + rows * g.ld :]
    after[1] = 0  # row `rows` of the last matrix (as if it went on), column 1
    g.pointer()[rows * g.ld + 2] = 0  # the gap after batch 0
    g.pointer()[g.batch_stride + 3 * g.ld + cols] = 0  # batch 1, row 3, its padding's first element
    strays = g.stray_writes(np)
    assert sorted(map(tuple, strays.tolist())) == [(0, rows, 2), (1, 3, cols), (2, rows, 1)]
    outside = sorted(map(tuple, g.outside(strays, transposed).tolist()))
    if transposed:  # logical row = stored column, in the stacked M = cols rows of each batch
        assert outside == [(1 * cols + cols, 3), (2 * cols + 1, rows)]
    else:
        assert outside == [(1 * rows + 3, cols), (2 * rows + rows, 1)]  # the gap's write is left out
    faults = g.guard_faults(np, "C")
    landed = [f.where for f in where_landed(faults, strays, rows, cols, transposed)]
    assert landed[0].startswith("the guard after C; as if the matrix went on, at rows")
    assert any(w.startswith("the gap after batch 0 of C") and "as if" not in w for w in landed)


def test_the_strided_batched_call_passes_each_operand_its_own_stride():
    """gemm_runner's call to cuBLAS's strided-batched GEMM, recorded, is the one the emulated cuBLAS computes right
    (each operand's address, ld and stride where cuBLAS takes them)."""
    from pytest_gemm.worker.cublas import gemm_runner

    calls = []

    class Cublas:
        def gemmStridedBatchedEx(self, *args):
            calls.append(args)

        def gemmEx(self, *args):
            raise AssertionError("a batch is one strided-batched call")

    storage, shape = Storage("KxM", "NxK", "MxN"), Shape(5, 7, 3, 4)
    bind = gemm_runner(Cublas(), 1, storage, shape, FP32, FP32, None, 0.5, 2.0)
    bind({"A": (100, 5, 1000), "B": (200, 3, 2000), "C": (300, 7, 3000)})()
    (args,) = calls
    call = gemm_call(storage, shape)
    assert args[1:6] == (int(call.trans_first), int(call.trans_second), call.m, call.n, call.k)
    first, second = ("A", "B") if call.first == "A" else ("B", "A")
    expected = {"A": (100, 5, 1000), "B": (200, 3, 2000)}
    assert (args[7], args[9], args[10]) == expected[first]
    assert (args[11], args[13], args[14]) == expected[second]
    assert (args[16], args[18], args[19], args[20]) == (300, 7, 3000, 4)


def _batch_kernel(bug: str | None = None):
    """The batched NumPy kernel as the worker's strategy launches it (for the diagnosis re-runs, which launch again)."""
    from support.host_device import HostKernel

    def fn(case, g, a, b, c, n):
        _kernel(case, dict(zip("ABC", g)), bug)

    return fn, HostKernel


def test_a_read_across_the_gap_between_batches_is_traced_to_it():
    from pytest_gemm.judge.accuracy import element_ratios
    from pytest_gemm.worker.diagnose import determinism_fault, trace

    from support.host_device import host_case

    case = _case(Shape(24, 20, 12, 3))
    fn, kernel = _batch_kernel("reads the gap")
    prepared = host_case(kernel(case, fn), 1)
    data, ops = prepared.data, prepared.operands()
    prepared.launch(ops)
    a64, b64 = data.a.astype(np.float64), data.b.astype(np.float64)
    truth = Truth.of(np, a64, b64, None, 1.0, 0.0, FP32, 3)
    got = data.logical(ops.c.as_float64(np, FP32), "C")
    ratio = element_ratios(np, got, truth.value, truth.gscale, 12, FP32, FP32, truth.hscale, truth.subnormal)
    unwritten = data.logical(ops.c.matrix(np.uint32), "C") == FP32.poison_bits
    sources, _ = trace(prepared, ratio, unwritten)
    (source,) = sources
    assert source.region == "the gaps between the batches of A" and source.count == 2 * 20
    assert source.rows == (23, 24 + 23) and source.n_tiles == 2  # the last row of batches 0 and 1
    result = Verification(case.name, 1, case.shape, 1.0, 0.0, truth.judge(np, got, 12, FP32, FP32), None,
                          sources=sources)  # fmt: skip
    line = diagnosis_lines(wrong_output(result, "fp32"))[0]
    assert line.startswith("reads between the matrices of A's batch (past one, before the next): 40 element(s)")
    assert "(batch 0 row 23 to batch 1 row 23, columns 0-19, 2 32x32 tiles)" in line
    fn, kernel = _batch_kernel()
    right = host_case(kernel(case, fn), 1)
    right.launch(ops)
    assert determinism_fault(right, ops.c, FP32.poison_bits, lambda: right.launch(ops)) is None
