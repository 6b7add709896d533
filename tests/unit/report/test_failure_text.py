"""Failure messages say what is wrong, built from simulated results (no GPU)."""

from __future__ import annotations

import numpy as np

from pytest_gemm.judge.accuracy import element_bound
from pytest_gemm.judge.case import wrong_output
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.outcome import Fault, Verification
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.report.failure import diagnosis_lines, failure_text

from support.simulated import as_fp16, judged, random_operands, sequential

FP32 = get_dtype("fp32")


def _result(stats, faults=(), beta=0.0):
    return Verification("k[fp32-48x40x32]", 7, Shape(48, 40, 32), 1.0, beta, stats, stats, tuple(faults))


def diagnosis(result: Verification) -> list[str]:
    return diagnosis_lines(wrong_output(result, "fp32"))


def failure_message(result: Verification, replay: str) -> str:
    return failure_text(result.case_id, CaseResult("failed", diagnosis=wrong_output(result, "fp32")), replay)


def test_precision_downgrade_is_named():
    a, b, _ = random_operands(48, 40, 32)
    lines = diagnosis(_result(judged(sequential(a, b, operand=as_fp16), a, b)))
    assert lines[0].startswith("precision too low: normwise error")


def test_ignored_beta_is_wrong_values_not_precision():
    a, b, c0 = random_operands(48, 40, 32)
    stats = judged(sequential(a, b, c0, 0.7, 0.0), a, b, c0, 0.7, 1.3)
    lines = diagnosis(_result(stats, beta=1.3))
    assert [line.split(":")[0] for line in lines] == ["wrong values"]


def test_unwritten_faults_and_message_layout():
    a, b, _ = random_operands(48, 40, 32)
    got = sequential(a, b)
    got[32:48, :] = np.nan
    stats = judged(got, a, b, unchanged=np.isnan(got))
    result = _result(stats, [Fault("out-of-bounds write", "the guard after C", 3)])
    text = failure_message(result, replay="pytest 'x' --gemm-kernels --gemm-seed 0")
    assert "  - out-of-bounds write: 3 element(s) changed in the guard after C" in text
    assert "  - unwritten output: 640 element(s) of C still hold the NaN poison" in text
    assert "errors in 2 of 4 32x32 tiles of C: rows 32-47 x cols 0-31, rows 32-47 x cols 32-39" in text
    assert "worst elements (row, col)" in text and "(32, 0): nan" in text
    assert text.endswith("seed 7 (this case's data); replay: pytest 'x' --gemm-kernels --gemm-seed 0")
    assert "cuBLAS fp32 (peer): max" in text
    assert text.startswith("verification failed for k[fp32-48x40x32] (M=48, N=40, K=32, alpha=1, beta=0)\n")


def test_a_failure_of_the_normwise_test_alone_gets_a_bullet_of_its_own():
    """At K = 65536 an error of 0.9 bounds in every element (a misapplied beta, say) passes per element."""
    a, b, _ = random_operands(8, 8, 65536)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    truth = a64 @ b64
    got = truth + 0.9 * element_bound(np, np.abs(a64) @ np.abs(b64), truth, 65536, FP32, FP32)
    stats = judged(got, a, b)
    assert stats.bad == 0 and not stats.passed
    lines = diagnosis(_result(stats))
    assert len(lines) == 1
    assert lines[0].startswith("only the normwise test failed, every element is within its bound: normwise error ")
    assert "small errors in every element add up over C" in lines[0]


def test_a_lower_precision_that_only_the_normwise_test_sees_says_both():
    a, b, _ = random_operands(16, 16, 4096)
    got = (a.astype(np.float64) @ b.astype(np.float64)) * (1 + 1e-4)
    stats = judged(got, a, b)
    assert stats.bad == 0 and not stats.passed
    (line,) = diagnosis(_result(stats))
    assert line.startswith("precision too low: only the normwise test failed, every element is within its bound")


def test_a_worker_start_failure_reads_as_a_sentence_in_each_form():
    """The phase comes before the case ("while starting the GPU worker for k[...]") or after it (a timeout)."""
    from pytest_gemm.records.diagnosis import Diagnosis
    from pytest_gemm.records.outcome import Failure
    from pytest_gemm.records.verdicts import FailureKind, Verdict

    def head(kind, message):
        fault = Diagnosis(Verdict.FAULT, "fp32", Shape(1, 2, 3), 1.0, 0.0, failure=Failure(kind, message, "start"))
        return failure_text("k[x]", CaseResult("failed", diagnosis=fault), "r").splitlines()[0]

    assert head(FailureKind.TIMEOUT, "the GPU worker did not start within 180 s") == (
        "k[x] (M=1, N=2, K=3, alpha=1, beta=0) the GPU worker did not start within 180 s while starting the GPU worker"
    )
    assert head(FailureKind.CUDA_ERROR, "the GPU was lost during the run: no GPU") == (
        "CUDA error while starting the GPU worker for k[x] (M=1, N=2, K=3, alpha=1, beta=0): the GPU was lost during "
        "the run: no GPU"
    )
    assert head(FailureKind.WORKER_DIED, "exit code 1").startswith(
        "the GPU worker died while starting the GPU worker for k[x]"
    )


def test_a_kernel_file_that_changed_the_worker_says_what_and_that_nothing_measured_is_used():
    """docs/verification.md#the-harness-unchanged: each change on a line of its own under the sentence."""
    from pytest_gemm.records.diagnosis import Diagnosis
    from pytest_gemm.records.outcome import Failure
    from pytest_gemm.records.verdicts import FailureKind, Verdict

    changed = ("cupy.cuda.get_elapsed_time replaced", "pytest_gemm.judge.gate.DEFAULT_THRESHOLD rebound")
    failure = Failure(FailureKind.HARNESS_CHANGED, f"{changed[0]} (and 1 more)", "time", changed, replace_worker=True)
    fault = Diagnosis(Verdict.FAULT, "fp32", Shape(1, 2, 3), 1.0, 0.0, failure=failure)
    lines = failure_text("k[x]", CaseResult("failed", diagnosis=fault), "r").splitlines()
    assert lines[:3] == [
        "k[x] (M=1, N=2, K=3, alpha=1, beta=0): its file's code changed pytest-gemm's worker while timing: "
        "cupy.cuda.get_elapsed_time replaced (and 1 more); nothing measured in that worker for it is used, and the "
        "worker was replaced",
        "  cupy.cuda.get_elapsed_time replaced",
        "  pytest_gemm.judge.gate.DEFAULT_THRESHOLD rebound",
    ]
    left = Failure(FailureKind.THREAD_LEFT, "later-gemm", "verify", ("later-gemm",), replace_worker=True)
    fault = Diagnosis(Verdict.FAULT, "fp32", Shape(1, 2, 3), 1.0, 0.0, failure=left)
    head = failure_text("k[x]", CaseResult("failed", diagnosis=fault), "r").splitlines()[0]
    assert head.startswith(
        "k[x] (M=1, N=2, K=3, alpha=1, beta=0): its file's code left a thread running while verifying: later-gemm;"
    )


def test_every_kind_of_finding_has_its_words_and_every_cause_its_letter():
    """A new check adds a kind and its rendering: a kind without either is caught here, not lost in a saved run."""
    from pytest_gemm.records.outcome import CAUSE_LETTERS
    from pytest_gemm.records.verdicts import Check, ErrorCause, Misreading
    from pytest_gemm.report.failure import FINDING_TEXT

    assert set(FINDING_TEXT) == set(ErrorCause) | set(Check) | set(Misreading)
    assert set(CAUSE_LETTERS) == set(ErrorCause) and len(set(CAUSE_LETTERS.values())) == len(ErrorCause)
    assert "." not in CAUSE_LETTERS.values()  # '.' is a cell within the bound
