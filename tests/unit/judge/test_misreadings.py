"""A wrong output that matches a misreading of the inputs is named, on the CPU with NumPy.

The misread outputs come from a small simulated kernel that reads and writes each matrix through its own address
function (row r, column c of an operand stored R x C at r * C + c, stored C x R at c * R + r) with fp32 arithmetic and
the output rounded to its dtype: a bug changes an address function, a buffer or a scalar, as a real kernel's would.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import error_stats, sum_scale
from pytest_gemm.judge.case import findings, wrong_output
from pytest_gemm.judge.misread import MATCH, may_be_misread, misreading
from pytest_gemm.records.declarations import Declarations
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.outcome import Misread, Verification
from pytest_gemm.records.plain import from_plain, to_plain
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.storage import LOGICAL, ORDERS, Storage
from pytest_gemm.records.verdicts import ErrorCause, Misreading
from pytest_gemm.report.failure import diagnosis_lines, failure_text, headline
from pytest_gemm.runs.data import RunData
from pytest_gemm.runs.saved import read_run, run_json

STORAGES = [Storage(*orders) for orders in itertools.product(*(ORDERS[op] for op in "ABC"))]
SHAPES = [Shape(32, 32, 32), Shape(48, 40, 24), Shape(40, 40, 24)]  # square, not square, M = N only
AB = [(1.0, 0.0), (0.7, 1.3), (-1.5, 0.0)]
C_WRITE_ONLY = "C written transposed, C0 read where it lies"  # the other way to write C transposed
#: a batch's mix-ups, tested with batches in tests/unit/worker/test_batches.py
MIXED_BATCHES = (Misreading.OTHER_BATCH_A, Misreading.OTHER_BATCH_B, Misreading.OTHER_BATCH_C)
#: the misreadings of scaled and integer GEMMs, tested in tests/unit/judge/test_scaled.py
SCALED = set(Misreading) - set(list(Misreading)[: list(Misreading).index(Misreading.OTHER_BATCH_C) + 1])
READINGS = [m for m in Misreading if m not in MIXED_BATCHES and m not in SCALED]


def _addresses(op: str, order: str, dims: dict[str, int]) -> np.ndarray:
    """Where each element of the logical operand lies in its buffer, stored in ``order``."""
    rows, cols = LOGICAL[op]
    r, c = np.indices((dims[rows], dims[cols]))
    return r * dims[cols] + c if order == f"{rows}x{cols}" else c * dims[rows] + r


def _other(op: str, order: str) -> str:
    return ORDERS[op][1 - ORDERS[op].index(order)]


class Simulated:
    """Random inputs of one case, stored in their declared orders, and a kernel with a bug that reads them."""

    def __init__(self, shape: Shape, storage: Storage, dtype: str, alpha: float, beta: float, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.dims = {"M": shape.M, "N": shape.N, "K": shape.K}
        self.storage, self.alpha, self.beta = storage, alpha, beta
        self.dt = self.out = get_dtype(dtype)
        cast = np.float16 if dtype == "fp16" else np.float32
        self.cast = cast
        a, b = (rng.standard_normal((self.dims[r], self.dims[c])).astype(cast) for r, c in (LOGICAL["A"], LOGICAL["B"]))
        self.a, self.b = a.astype(np.float64), b.astype(np.float64)
        self.c0 = rng.standard_normal((shape.M, shape.N)).astype(cast).astype(np.float64) if beta else None
        self.buffers = {op: self._store(op, x) for op, x in (("A", self.a), ("B", self.b))}
        if self.c0 is not None:
            self.buffers["C"] = self._store("C", self.c0)

    def _store(self, op: str, x: np.ndarray) -> np.ndarray:
        flat = np.empty(x.size, dtype=self.cast)
        flat[_addresses(op, self.storage.order(op), self.dims)] = x
        return flat

    def kernel(self, bug: Misreading | str | None = None) -> np.ndarray:
        """C as the kernel leaves it, read in its declared order (float64, logical M x N)."""
        order = {op: self.storage.order(op) for op in "ABC"}
        source = {"A": "A", "B": "B"}
        alpha, beta = self.alpha, self.beta
        if bug in (Misreading.A_ORDER, Misreading.B_ORDER, Misreading.C_TRANSPOSED, C_WRITE_ONLY):
            op = str(bug)[0]
            order[op] = _other(op, order[op])
        if bug == Misreading.A_AS_B:
            source["B"] = "A"
        if bug == Misreading.B_AS_A:
            source["A"] = "B"
        if bug in (Misreading.ALPHA_IGNORED, Misreading.ALPHA_BETA_IGNORED):
            alpha = 1.0
        if bug in (Misreading.BETA_IGNORED, Misreading.ALPHA_BETA_IGNORED):
            beta = 0.0
        if bug == Misreading.BETA_AS_ONE:
            beta = 1.0
        a, b = (self.buffers[source[op]][_addresses(op, order[op], self.dims)] for op in "AB")
        value = np.float32(alpha) * (a.astype(np.float32) @ b.astype(np.float32))
        c = self.buffers.get("C", np.full(self.a.shape[0] * self.b.shape[1], np.nan, self.cast)).copy()
        read_c = _addresses("C", self.storage.order("C") if bug == C_WRITE_ONLY else order["C"], self.dims)
        if beta != 0.0 and self.c0 is not None:
            value = value + np.float32(beta) * c[read_c].astype(np.float32)
        c[_addresses("C", order["C"], self.dims)] = value.astype(self.cast)
        return c[_addresses("C", self.storage.order("C"), self.dims)].astype(np.float64)

    def truth(self) -> tuple[np.ndarray, np.ndarray]:
        truth, scale = self.alpha * (self.a @ self.b), abs(self.alpha) * (np.abs(self.a) @ np.abs(self.b))
        if self.c0 is not None:
            truth, scale = truth + self.beta * self.c0, scale + abs(self.beta) * np.abs(self.c0)
        return truth, scale

    def judged(self, got: np.ndarray):
        scale_norm = sum_scale(np, self.a, self.b, self.c0, self.alpha, self.beta)
        return error_stats(np, got, *self.truth(), self.dims["K"], self.dt, self.out, scale_norm=scale_norm)

    def misreading(self, got: np.ndarray) -> Misread | None:
        return misreading(np, got, self.a, self.b, self.c0, self.alpha, self.beta, self.storage, self.dt, self.out)


def _applies(bug: Misreading | str, shape: Shape, alpha: float, beta: float) -> bool:
    if bug in (Misreading.A_AS_B, Misreading.B_AS_A):
        return shape.M == shape.N
    if bug == C_WRITE_ONLY or bug in (Misreading.BETA_IGNORED, Misreading.BETA_AS_ONE):
        return beta != 0.0
    if bug == Misreading.ALPHA_IGNORED:
        return alpha != 1.0
    if bug == Misreading.ALPHA_BETA_IGNORED:
        return alpha != 1.0 and beta != 0.0
    return True


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("storage", STORAGES, ids=lambda s: s.text.replace(", ", "-").replace(" ", ""))
@pytest.mark.parametrize("bug", [*READINGS, C_WRITE_ONLY], ids=str)
def test_each_misreading_is_named_in_every_order_shape_and_dtype(bug, storage, dtype):
    """The output of a kernel with the bug is mostly wrong, and matches that misreading and no other."""
    named = Misreading.C_TRANSPOSED if bug == C_WRITE_ONLY else bug
    ran = 0
    for shape, (alpha, beta) in itertools.product(SHAPES, AB):
        if not _applies(bug, shape, alpha, beta):
            continue
        case = Simulated(shape, storage, dtype, alpha, beta, seed=ran)
        got = case.kernel(bug)
        assert may_be_misread(case.judged(got)), (shape, alpha, beta)  # the worker would ask
        found = case.misreading(got)
        assert found is not None and found.kind == named, (shape, alpha, beta, found)
        assert found.matched >= MATCH * got.size
        ran += 1
    assert ran >= 2


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("storage", STORAGES, ids=lambda s: s.text.replace(", ", "-").replace(" ", ""))
def test_a_correct_output_a_few_wrong_tiles_and_an_unrelated_output_match_no_misreading(storage, dtype):
    for seed, (shape, (alpha, beta)) in enumerate(itertools.product(SHAPES, AB)):
        case = Simulated(shape, storage, dtype, alpha, beta, seed=seed)
        right = case.kernel()
        assert case.judged(right).passed and case.misreading(right) is None
        tiles = right.copy()
        tiles[:16, :16] = 0.0  # a tile never written
        tiles[-8:, -8:] *= 3.0
        assert not may_be_misread(case.judged(tiles)) and case.misreading(tiles) is None
        unrelated = np.random.default_rng(seed + 100).standard_normal(right.shape) * np.abs(right).max()
        assert may_be_misread(case.judged(unrelated)) and case.misreading(unrelated) is None


def test_a_misreading_with_a_few_more_wrong_elements_is_still_named_and_a_mostly_broken_one_is_not():
    """At least MATCH (99%) of the elements must match the reading: a misread kernel with an unwritten edge still
    does, one that also leaves a tenth of C unwritten does not."""
    case = Simulated(Shape(64, 64, 32), Storage(B="NxK"), "fp32", 1.0, 0.0)
    got = case.kernel(Misreading.B_ORDER)
    got[0, :20] = np.nan  # 20 of 4096 elements: under 1%
    assert may_be_misread(case.judged(got))
    assert case.misreading(got) == Misread(Misreading.B_ORDER, 64 * 64 - 20)
    got[:7, :] = np.nan  # no reading can match now: the worker does not ask
    assert not may_be_misread(case.judged(got)) and case.misreading(got) is None


def test_a_vector_is_read_the_same_in_either_order_so_only_what_changes_it_is_tried():
    """At 1 x 64 x 16 A (1 x K) and C (1 x N) read the same in either order; B does not."""
    case = Simulated(Shape(1, 64, 16), Storage(), "fp32", 1.0, 0.0)
    assert case.misreading(case.kernel(Misreading.B_ORDER)).kind == Misreading.B_ORDER
    assert case.kernel(Misreading.A_ORDER).tolist() == case.kernel().tolist()
    assert case.misreading(case.kernel()) is None


def _verification(case: Simulated, got: np.ndarray, shape: Shape) -> Verification:
    stats = case.judged(got)
    return Verification(f"k[fp32-{shape}]", 5, shape, case.alpha, case.beta, stats, None, misread=case.misreading(got))


@pytest.mark.parametrize(
    ("bug", "storage", "shape", "ab", "said"),
    [
        (Misreading.A_AS_B, Storage(), Shape(32, 32, 32), (1.0, 0.0), "matches C = A x A (B never read)"),
        (Misreading.A_AS_B, Storage(B="NxK"), Shape(32, 32, 32), (1.0, 0.0), "matches C = A x A^T (B never read)"),
        (Misreading.B_AS_A, Storage(), Shape(40, 40, 24), (1.0, 0.0), "matches B's elements read in place of A's"),
        (Misreading.B_ORDER, Storage(), Shape(48, 40, 24), (1.0, 0.0), "matches B read as N x K; the header "
         "says K x N"),
        (Misreading.B_ORDER, Storage(B="NxK"), Shape(48, 40, 24), (1.0, 0.0), "B read as K x N; the header says N x K"),
        (Misreading.A_ORDER, Storage.of_layout("col"), Shape(48, 40, 24), (1.0, 0.0), "A read as M x K; the header "
         "says K x M"),
        (Misreading.C_TRANSPOSED, Storage(), Shape(48, 40, 24), (0.7, 1.3), "matches C written N x M (transposed); "
         "the header says M x N"),
        (Misreading.ALPHA_IGNORED, Storage(), Shape(48, 40, 24), (0.7, 1.3), "matches alpha ignored (C = A B + beta C;"
         " alpha is 0.7)"),
        (Misreading.ALPHA_IGNORED, Storage(), Shape(48, 40, 24), (-1.5, 0.0), "matches alpha ignored (C = A B; "),
        (Misreading.BETA_IGNORED, Storage(), Shape(48, 40, 24), (0.7, 1.3), "matches beta ignored (C = alpha A B; "),
        (Misreading.BETA_AS_ONE, Storage(), Shape(48, 40, 24), (0.7, 1.3), "matches beta taken as 1 (C = alpha A B "
         "+ C; beta is 1.3)"),
        (Misreading.ALPHA_BETA_IGNORED, Storage(), Shape(48, 40, 24), (0.7, 1.3), "matches alpha and beta ignored "
         "(C = A B;"),
    ],
)  # fmt: skip
def test_the_failure_text_names_the_misreading_first_with_the_declared_order(bug, storage, shape, ab, said, tmp_path):
    """What a user reads, from a recorded Verification carrying the misreading."""
    case = Simulated(shape, storage, "fp32", *ab)
    verification = _verification(case, case.kernel(bug), shape)
    plain = json.loads(json.dumps(to_plain(verification)))  # it crosses the pipe as plain data
    assert from_plain(Verification, plain) == verification and plain["misread"]["kind"] == str(bug)
    declared = "" if storage.is_default else storage.text
    diagnosis = wrong_output(from_plain(Verification, plain), "fp32", Declarations(storage=storage))
    result = CaseResult("failed", kind="case", diagnosis=diagnosis)
    lines = diagnosis_lines(diagnosis)
    assert said in lines[0] and lines[0].endswith(f"of {shape.M * shape.N} elements lie within that reading's bound")
    assert lines[1].startswith("wrong values: ")  # the misreading first, then the wrong values it explains
    assert headline("k", result) == lines[0]
    text = failure_text(f"k[fp32-{shape}]", result, "pytest k.cu")
    assert text.splitlines()[1] == f"  - {lines[0]}"
    if declared:
        assert f"  declared in the header: storage {declared} (each matrix as it lies in memory" in text
    # a saved run keeps it, and reads back with every value checked
    assert CaseResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_json(RunData({"name": "GPU"}, tests={"k.cu::k": result}))))
    assert read_run(path).failures["k.cu::k"] == result


def test_the_misreading_goes_before_every_other_finding_and_only_when_found():
    case = Simulated(Shape(32, 32, 32), Storage(), "fp32", 1.0, 0.0)
    got = case.kernel(Misreading.A_AS_B)
    verification = _verification(case, got, Shape(32, 32, 32))
    kinds = [f.kind for f in findings(verification)]
    assert kinds == [Misreading.A_AS_B, ErrorCause.OVER_BOUND]
    assert findings(Verification("k", 5, Shape(32, 32, 32), 1.0, 0.0, verification.kernel, None)) == tuple(
        f for f in findings(verification) if f.kind != Misreading.A_AS_B
    )
    # a Verification recorded before misreadings were named still reads, with none
    plain = to_plain(verification)
    del plain["misread"]
    assert from_plain(Verification, plain).misread is None


def test_a_misreading_the_gpu_has_no_memory_for_is_left_out_not_failed(monkeypatch):
    """Naming the misreading is a diagnosis only; where CuPy runs out of memory for its candidates, the
    wrong output is judged without it, and any other error still propagates."""

    from pytest_gemm.judge import accuracy
    from pytest_gemm.records.dtypes import get_dtype
    from pytest_gemm.specs.cases import AlphaBeta, Case
    from pytest_gemm.specs.header import spec_from_mapping
    from pytest_gemm.worker import diagnose

    from support.host_device import HostKernel, host_case

    spec = spec_from_mapping({"dtypes": ["fp32"]}, path="k.py", kind="py", default_name="k")
    case = Case(spec, spec.variants()[0], "fp32", Shape(16, 16, 16), AlphaBeta(1.0, 0.0))
    prepared = host_case(HostKernel(case, lambda *args: None), 1)
    data = prepared.data
    a64, b64 = data.a.astype(np.float64), data.b.astype(np.float64)
    truth, gscale = a64 @ b64, np.abs(a64) @ np.abs(b64)
    got = -truth  # every element wrong: worth asking which misreading it is
    fp32 = get_dtype("fp32")
    stats = accuracy.error_stats(np, got, truth, gscale, 16, fp32, fp32, scale_norm=1.0)
    bits = (np.ascontiguousarray(data.a).view(np.uint32), np.ascontiguousarray(data.b).view(np.uint32), None)

    class OutOfMemoryError(Exception):  # CuPy's, which is no MemoryError
        pass

    def runs_out(*args, **kwargs):
        raise OutOfMemoryError("out of memory allocating 8589934592 bytes")

    monkeypatch.setattr(diagnose, "misreading", runs_out)
    truth = accuracy.Truth(truth, gscale, None, 1.0)
    assert diagnose.which_misreading(prepared, got, stats, bits, truth) is None

    def breaks(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(diagnose, "misreading", breaks)
    with pytest.raises(ValueError):
        diagnose.which_misreading(prepared, got, stats, bits, truth)
