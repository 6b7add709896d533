"""Tracing wrong elements to their source, with the worker's own re-run logic driven by NumPy.

The kernels here are NumPy functions that work on the same guarded buffers the GPU worker builds,
so a read past A really reads the guard after A. No device is involved or pretended: this tests the
diagnosis rules, and tests/gpu/test_gpu.py checks the same diagnoses on real kernels on the GPU.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_gemm.judge import causes
from pytest_gemm.judge.accuracy import element_ratios
from pytest_gemm.judge.case import wrong_output
from pytest_gemm.judge.causes import Evidence, causes_of, error_map
from pytest_gemm.records.declarations import Declarations
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.outcome import Verification
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import ErrorCause
from pytest_gemm.report.failure import diagnosis_lines
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.worker.buffers import where_landed
from pytest_gemm.worker.diagnose import determinism_fault, trace
from pytest_gemm.worker.inputs import input_strategy

from support.host_device import HostKernel, cu_spec, host_case

FP32 = get_dtype("fp32")
M, N, K = 48, 40, 32


def _case(beta=0.0, **header):
    spec = cu_spec(**header)
    return Case(spec, spec.variants()[0], "fp32", Shape(M, N, K), AlphaBeta(1.0 if beta == 0 else 0.7, beta))


def _gemm(case, a, b, c, read_c):
    alpha, beta = np.float32(case.ab.alpha), np.float32(case.ab.beta)
    product = alpha * (a.astype(np.float32) @ b.astype(np.float32))
    c[...] = product + beta * c if read_c else product


def correct(case, g, a, b, c, n):
    _gemm(case, a, b, c, read_c=case.ab.beta != 0)


def reads_c(case, g, a, b, c, n):
    _gemm(case, a, b, c, read_c=True)


def reads_past_a(case, g, a, b, c, n):
    """The last row adds the element after A's end (times 0: harmless, unless it is NaN)."""
    correct(case, g, a, b, c, n)
    after = g[0].regions("A")["the guard after A"][:N].view(np.float32)
    c[-1, :] += np.float32(0) * after


def unwritten_tile(case, g, a, b, c, n):
    keep = c[:16, :16].copy()
    correct(case, g, a, b, c, n)
    c[:16, :16] = keep


def reads_c_wrongly(case, g, a, b, c, n):
    """C += A B: reads C (beta = 0 or not) and is wrong even once C is finite."""
    c[...] = c + a.astype(np.float32) @ b.astype(np.float32)


def inf_minus_inf(case, g, a, b, c, n):
    correct(case, g, a, b, c, n)
    c[5, 7] = np.float32(np.inf) - np.float32(np.inf)


def reads_past_c(case, g, a, b, c, n):
    """beta != 0, but the last row reads C one row too far (past C's end)."""
    correct(case, g, a, b, c, n)
    after = g[2].regions("C")["the guard after C"][:N].view(np.float32)
    c[-1, :] += np.float32(case.ab.beta) * after


def both(case, g, a, b, c, n):
    reads_c(case, g, a, b, c, n)
    after = g[0].regions("A")["the guard after A"][:N].view(np.float32)
    c[-1, :] += np.float32(0) * after


def _traced(kernel, case):
    host = HostKernel(case, kernel)
    prepared = host_case(host)
    data, ops = prepared.data, prepared.operands()
    prepared.launch(ops)
    gc = ops.c
    got = gc.as_float64(np, FP32)
    a64, b64 = data.a.astype(np.float64), data.b.astype(np.float64)
    truth, gscale = case.ab.alpha * (a64 @ b64), abs(case.ab.alpha) * (np.abs(a64) @ np.abs(b64))
    if data.c0 is not None:
        truth, gscale = truth + case.ab.beta * data.c0, gscale + abs(case.ab.beta) * np.abs(data.c0)
    bits = gc.matrix(np.uint32)
    unwritten = bits == FP32.poison_bits if data.c0 is None else bits == data.c0.view(np.uint32)
    ratio = element_ratios(np, got, truth, gscale, K, FP32, FP32)
    sources, emap = trace(prepared, ratio, unwritten)
    return sources, emap, host.launches


def _summary(sources):
    return [(s.cause, s.count, s.region, s.rows, s.cols) for s in sources]


def test_a_kernel_that_reads_c_when_beta_is_zero_is_named_by_a_rerun():
    sources, emap, launches = _traced(reads_c, _case())
    assert _summary(sources) == [(ErrorCause.READ_C.value, M * N, "", (0, M - 1), (0, N - 1))]
    assert launches == 2  # the kernel, then once with finite data in C
    assert emap.causes == (ErrorCause.READ_C,)


def test_a_read_past_the_end_of_a_names_the_operand_and_the_side():
    sources, _, launches = _traced(reads_past_a, _case())
    assert _summary(sources) == [(ErrorCause.GUARD_A.value, N, "the guard after A", (M - 1, M - 1), (0, N - 1))]
    # the kernel, C given finite data, all guards zeroed, then each of the six guard regions (A, B, C) alone
    assert launches == 1 + 1 + 1 + 6
    line = diagnosis_lines(wrong_output(_verification(sources), "fp32"))[0]
    assert line.startswith(f"reads past the end of A: {N} element(s) of C are NaN from the guard after A")
    assert f"rows {M - 1}-{M - 1}, columns 0-{N - 1}" in line


def test_an_unwritten_tile_is_not_blamed_on_c():
    sources, emap, launches = _traced(unwritten_tile, _case())
    assert _summary(sources) == [(ErrorCause.UNWRITTEN.value, 256, "", (0, 15), (0, 15))]
    assert emap.tile == (16, 16) and emap.cell == (1, 1)
    assert {emap.cause[r][c] for r in range(16) for c in range(16)} == {ErrorCause.UNWRITTEN.value}
    assert launches == 2  # the kernel, and once with finite data in C: the tile still holds that data
    line = diagnosis_lines(wrong_output(_verification(sources), "fp32"))[0]
    assert line.startswith("unwritten output: 256 element(s) of C still hold the NaN poison: never written")
    assert "or C was read" not in line


def writes_the_prior_by_chance(case, g, a, b, c, n):
    """Ignores beta (wrong everywhere), and one element's wrong value happens to be C's prior value bit for bit."""
    prior = c[3, 4]
    c[...] = np.float32(case.ab.alpha) * (a.astype(np.float32) @ b.astype(np.float32))
    c[3, 4] = prior if n == 1 else c[3, 4]  # the first launch's: its prior data is the case's C0


def test_a_written_value_equal_to_the_prior_by_chance_is_not_called_unwritten():
    """With beta != 0 an element still bitwise equal to C's prior data is re-run with other data in C before
    it is called unwritten (a wrong fp16 value may equal the prior by chance, as a third-party kernel's did)."""
    case = _case(beta=1.3)
    sources, _, launches = _traced(writes_the_prior_by_chance, case)
    causes = {s.cause for s in sources}
    assert ErrorCause.UNWRITTEN.value not in causes, _summary(sources)
    assert launches == 2  # the kernel, and once with other data in C


def test_an_unwritten_tile_with_prior_data_is_still_unwritten():
    """The re-run with other data in C keeps a tile that was never written unwritten."""
    sources, _, launches = _traced(unwritten_tile, _case(beta=1.3))
    assert (ErrorCause.UNWRITTEN.value, 256) in [(s.cause, s.count) for s in sources]
    assert launches == 2


def test_a_kernel_that_reads_c_and_is_wrong_anyway_is_still_said_to_read_c():
    sources, _, _ = _traced(reads_c_wrongly, _case())
    assert _summary(sources) == [(ErrorCause.READ_C.value, M * N, "", (0, M - 1), (0, N - 1))]


def test_a_read_past_the_end_of_c_is_named_too():
    sources, _, _ = _traced(reads_past_c, _case(beta=1.3))
    assert _summary(sources) == [(ErrorCause.GUARD_C.value, N, "the guard after C", (M - 1, M - 1), (0, N - 1))]
    line = diagnosis_lines(wrong_output(_verification(sources), "fp32"))[0]
    assert line.startswith(f"reads past the end of C: {N} element(s) of C are NaN from the guard after C")


def test_a_nan_from_arithmetic_is_neither_poison_nor_guard_nor_c():
    sources, _, _ = _traced(inf_minus_inf, _case(beta=1.3))
    assert _summary(sources) == [(ErrorCause.ARITHMETIC.value, 1, "", (5, 5), (7, 7))]


def test_two_sources_at_once_are_both_named_the_most_telling_first():
    sources, emap, _ = _traced(both, _case())
    assert [(s.cause, s.count) for s in sources] == [
        (ErrorCause.GUARD_A.value, N),
        (ErrorCause.READ_C.value, (M - 1) * N),
    ]
    assert emap.causes == (ErrorCause.GUARD_A, ErrorCause.READ_C)


def test_a_kernel_declared_to_read_c_gets_finite_c_and_passes_with_beta_zero():
    case = _case(always_reads_c=True)
    assert case.c_prior and input_strategy(case).draw(3).c0 is not None
    sources, _, _ = _traced(reads_c, case)
    assert sources == ()
    # an unwritten tile is still caught, by bit pattern: it holds the prior data, not NaN
    sources, _, _ = _traced(unwritten_tile, case)
    assert _summary(sources) == [(ErrorCause.UNWRITTEN.value, 256, "", (0, 15), (0, 15))]
    line = diagnosis_lines(wrong_output(_verification(sources), "fp32", Declarations(always_reads_c=True)))[0]
    assert "still hold their prior value: never written" in line


def _verification(sources):
    from support.simulated import judged, random_operands

    a, b, _ = random_operands(M, N, K)
    stats = judged(a @ b, a, b)
    return Verification("k[fp32]", 3, Shape(M, N, K), 1.0, 0.0, stats, None, (), None, sources)


def test_the_error_map_keeps_the_worst_value_of_each_cell():
    ratio = np.zeros((300, 200))
    ratio[299, 199] = 7.5  # one bad element in the last cell
    ratio[0, 0] = np.inf  # non-finite: shown by its cause, not its ratio
    unwritten = np.zeros_like(ratio, dtype=bool)
    unwritten[0, 0] = True
    codes = causes_of(np, ratio, unwritten, Evidence())
    emap = error_map(np, ratio, codes, tile=(64, 64), max_cells=128)
    assert emap.cell == (3, 2) and len(emap.ratio) == 100 and len(emap.ratio[0]) == 100
    assert emap.ratio[-1][-1] == 7.5 and emap.cause[-1][-1] == ErrorCause.OVER_BOUND.value
    assert emap.cause[0][0] == ErrorCause.UNWRITTEN.value and emap.ratio[0][0] == 0.0
    assert sum(word != "" for line in emap.cause for word in line) == 2
    assert emap.tile == (64, 64)


@pytest.mark.parametrize(("declared", "expected"), [("", 1), ("split-K with atomicAdd", 0)])
def test_a_kernel_whose_launches_differ_is_caught_unless_declared(declared, expected):
    case = _case(**({"nondeterministic": declared} if declared else {}))

    def jitter(case, g, a, b, c, n):
        correct(case, g, a, b, c, n)
        if n == 3:
            c[2, 3] = np.nextafter(c[2, 3], np.float32(np.inf))

    host = HostKernel(case, jitter)
    prepared = host_case(host)
    ops = prepared.operands()
    prepared.launch(ops)
    gc = ops.c
    first = gc.matrix(np.uint32).copy()
    fault = determinism_fault(prepared, gc, FP32.poison_bits, lambda: prepared.launch(ops))
    assert (fault is not None) == bool(expected)
    if fault:
        assert (fault.kind, fault.where, fault.count) == (
            "non-deterministic output",
            "C between launch 1 and launch 3 on the same inputs",
            1,
        )
        assert (gc.matrix(np.uint32) == first).all()  # the first launch's output is the one judged
    assert host.launches == (3 if expected or not declared else 1)


def test_a_kernel_that_skips_work_once_it_has_seen_the_buffer_is_said_to_remember():
    """The timing cheat (tests/kernels_broken/timing_cheat.cu): a second launch on the same C writes nothing."""

    def memo(case, g, a, b, c, n):
        if n == 1:
            correct(case, g, a, b, c, n)

    prepared = host_case(HostKernel(_case(), memo))
    ops = prepared.operands()
    prepared.launch(ops)
    fault = determinism_fault(prepared, ops.c, FP32.poison_bits, lambda: prepared.launch(ops))
    assert fault is not None and fault.count == M * N
    assert fault.where == (
        f"C between launch 1 and launch 2 on the same inputs; launch 2 left {M * N} of them unwritten, as if it "
        "remembered launch 1 (does the kernel keep state between launches?)"
    )


@pytest.mark.parametrize("ldc", [False, True])
def test_writes_past_the_end_of_c_are_located_and_mapped(ldc):
    """Rows past M written (a missing row check): the fault says where, as if C went on, and the map keeps it."""
    case = _case(**({"args": ["M", "N", "K", "alpha", "beta", "A", "B", "C", "ldc"]} if ldc else {}))
    prepared = host_case(HostKernel(case, correct))
    ops = prepared.operands()
    prepared.launch(ops)
    gc = ops.c
    assert gc.stray_writes(np).shape == (0, 3) and gc.guard_faults(np, "C") == []  # C alone written
    after = gc.regions("C")["the guard after C"][: 3 * gc.ld].reshape(3, gc.ld)
    after[:, :N] = np.float32(1.0).view(np.uint32)  # rows M to M + 2, every column of C
    if ldc:
        gc.regions("C")["the row padding of C"][7, :2] = 0  # two elements of row 7's padding
    faults = where_landed(gc.guard_faults(np, "C"), gc.stray_writes(np), gc.rows, gc.cols, col=False)
    wheres = [f.where for f in faults]
    assert wheres[0] == f"the guard after C; as if the matrix went on, at rows {M} to {M + 2}, columns 0 to {N - 1}"
    if ldc:
        assert wheres[1] == (
            "the row padding of C (between the row's end and ld); as if the matrix went on, at rows 7, "
            f"columns {N} to {N + 1}"
        )
    # the same storage, read as a column-major matrix: its rows are C's columns
    (flipped, *_) = where_landed(gc.guard_faults(np, "C"), gc.stray_writes(np), gc.rows, gc.cols, col=True)
    assert flipped.where.endswith(f"; as if the matrix went on, at rows 0 to {N - 1}, columns {M} to {M + 2}")
    strays = gc.outside(gc.stray_writes(np), transposed=False)
    assert len(strays) == 3 * N + (2 if ldc else 0)
    rects = causes.outside_cells(strays, (1, 1))
    assert sum(n for *_, n in rects) == len(strays)
    assert {(r, c) for r, c, h, w, _ in rects for r in range(r, r + h) for c in range(c, c + w)} == {
        tuple(p) for p in strays.tolist()
    }


def test_many_writes_outside_c_are_pooled_into_at_most_the_cap():
    rows, cols = np.meshgrid(np.arange(-300, 0), np.arange(500), indexing="ij")  # 300 rows before C
    rects = causes.outside_cells(np.stack([rows.ravel(), cols.ravel()], 1), (8, 4), max_cells=100)
    assert len(rects) <= 100
    assert sum(n for *_, n in rects) == 300 * 500
    assert min(r for r, *_ in rects) == -300 and max(r + h for r, _, h, _, _ in rects) == 0  # boxes of the writes


def test_a_box_of_writes_outside_c_never_covers_c_where_a_cell_straddles_its_edges():
    """M = 1001 with 8 x 8 cells: the last cell row holds C's last row and the first rows after it."""
    padding = [(1000, c) for c in range(1001, 1008)]  # row 1000's padding (ld > N = 1001)
    after = [(1001, c) for c in range(0, 5)]  # the first row after C
    rects = causes.outside_cells(np.array(padding + after), (8, 8))
    assert (1000, 1001, 1, 7, 7) in rects  # right of C, in its last row: not below C
    assert (1001, 0, 1, 5, 5) in rects


def _tile(case, sm_count):
    """The error map's tile of a .cu kernel's case (worker.kinds.CudaKernel), on a GPU of ``sm_count`` SMs."""
    from pytest_gemm.worker.kinds import CudaKernel

    from support.host_device import HostDevice

    device = HostDevice()
    device.sm_count = sm_count
    return CudaKernel(device, case, input_strategy(case)).tile()


def test_tile_outlines_come_from_a_2d_grid_only():
    assert _tile(_case(), 132) == (16, 16)
    one_d = _case(grid=["cdiv(M * N, 256)"], block=[256])
    assert _tile(one_d, 132) is None
    # a persistent grid's blocks walk many tiles: its size says nothing of a tile (at 128 SMs it divides the probe)
    persistent = _case(grid=["min(cdiv(N, 16), SM_COUNT)", "cdiv(M, 16)"])
    assert _tile(persistent, 128) is None


def test_the_workers_warm_up_takes_every_re_run_of_a_diagnosis(tmp_path):
    """The worker warms up on a wrong kernel whose diagnosis takes each re-run, so that CuPy compiles the kernels
    those need before any case's time limit runs (tests/gpu/test_gpu.py runs the warm-up itself on the GPU)."""
    import importlib.util

    from pytest_gemm.worker import backend

    path = tmp_path / "warm_up.py"
    path.write_text(backend._WARM_UP_KERNEL, encoding="utf-8")
    module_spec = importlib.util.spec_from_file_location("warm_up_for_test", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert {name for name, _, _ in backend._WARM_UP_CASES} == {"warm_up", "warm_up_wrong"}

    def wrong(case, g, a, b, c, n):
        module.warm_up_wrong(a, b, c, np.float32(case.ab.alpha), np.float32(case.ab.beta))

    def right(case, g, a, b, c, n):
        module.warm_up(a, b, c, np.float32(case.ab.alpha), np.float32(case.ab.beta))

    causes_seen = set()
    for beta in (0.0, 1.3):
        sources, _, launches = _traced(wrong, _case(beta=beta))
        causes_seen |= {s.cause for s in sources}
        assert launches >= (2 + 4 if beta == 0 else 1 + 4)  # C given finite data (beta = 0); clean + each guard
        assert _traced(right, _case(beta=beta))[0] == ()
    assert causes_seen == {ErrorCause.READ_C.value, ErrorCause.ARITHMETIC.value}


def _stored(emap):
    import json

    from pytest_gemm.records.plain import to_plain

    return json.loads(json.dumps(to_plain(emap)))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rows": "x"}, "rows and cols must be whole numbers of at least 1"),
        ({"cell": [0, 2]}, "ErrorMap.cell: expected two whole numbers of at least 1"),
        ({"tile": [32]}, "ErrorMap.tile: expected two whole numbers of at least 1"),
        ({"outside": [[1, 2, 3]]}, "ErrorMap.outside: expected rectangles of five whole numbers"),
        ({"ratio": ["000"]}, "a row of stored ratios has an odd number of characters"),
        ({"ratio": ["0000"]}, "ErrorMap.ratio: expected 3 rows of 2 cells for its size and cell"),
        ({"cause": ["..", "..", "?."]}, "ErrorMap.cause: expected rows of"),
    ],
)
def test_a_stored_map_that_does_not_fit_its_own_size_is_refused(change, message):
    from pytest_gemm.records.outcome import ErrorMap
    from pytest_gemm.records.plain import PlainError, from_plain

    emap = ErrorMap(5, 4, (2, 2), ((0.5, 0.1),) * 3, (("", "unwritten"),) * 3, (2, 2))
    assert from_plain(ErrorMap, _stored(emap)) == emap
    with pytest.raises(PlainError, match=re.escape(message)):
        from_plain(ErrorMap, {**_stored(emap), **change})


def test_writes_outside_c_pooled_for_a_saved_run_never_cover_c():
    """Rectangles after C's last row and in its row padding lie close at C's corner: they merge each with its own."""
    from pytest_gemm.records.outcome import ErrorMap

    after = [(100 + i, j, 1, 1, 1) for i in range(4) for j in range(0, 100, 3)]  # rows past C
    padding = [(i, 100 + j, 1, 1, 1) for i in range(0, 100, 2) for j in range(3)]  # columns past its rows
    emap = ErrorMap(100, 100, (1, 1), ((0.1,) * 100,) * 100, (("",) * 100,) * 100, outside=tuple(after + padding))
    pooled = emap.pooled(64)
    assert len(pooled.outside) <= 64 and sum(r[4] for r in pooled.outside) == len(after) + len(padding)
    for r, c, h, w, _ in pooled.outside:
        assert r >= 100 or c >= 100, (r, c, h, w)  # each box on one side of C
        assert not (r < 100 and c < 100 and r + h > 0 and c + w > 0)
