"""From a worker's outcome to a verdict (pure): records, sanity, failure texts, and the plain-data boundary."""

from __future__ import annotations

import json
import math

import pytest

from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.case_record import CaseRecord, max_sm_clock
from pytest_gemm.records.outcome import Failure, Outcome
from pytest_gemm.records.plain import PlainError, from_plain, to_plain
from pytest_gemm.records.request import Request, TimingSettings
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import ErrorCause, FailureKind, Sanity, TimingProblem, Verdict
from pytest_gemm.report.failure import diagnosis_lines, failure_text
from pytest_gemm.report.regression import replay_command
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.header import spec_from_mapping

from support import recorded_outcome, recorded_record, recording

GPU = recording()["facts"]
HEADER = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [16, 16]}


def _case(shape=(256, 256, 256), beta: float = 0.0, **header) -> Case:
    spec = spec_from_mapping({**HEADER, "grid": ["cdiv(N, 16)", "cdiv(M, 16)"], **header}, path="k.cu")
    return Case(spec, spec.variants()[0], "fp32", Shape(*shape), AlphaBeta(1.0, beta))


def _judge(name: str, outcome: Outcome, shape=(256, 256, 256)) -> tuple[CaseResult, str]:
    """The judged case and, when it failed, its failure text as the plugin raises it."""
    result = judge_outcome(_case(shape), f"k.cu::{name}", outcome, GPU)
    replay = replay_command(f"k.cu::{name}", Shape(*shape), 0)
    return result, failure_text(name, result, replay) if result.failed else ""


def test_requests_and_outcomes_cross_as_json_and_come_back_equal():
    request = Request("/k.cu", "k.cu", "k", (("T", 16),), "fp32", Shape(1, 2, 3), 0.7, 1.3, 42, TimingSettings())
    assert from_plain(Request, json.loads(json.dumps(to_plain(request)))) == request
    for key in recording()["outcomes"]:
        outcome = recorded_outcome(key)
        plain = json.loads(json.dumps(to_plain(outcome)))
        back = from_plain(Outcome, plain)
        assert "NaN" not in json.dumps(plain) and "Infinity" not in json.dumps(plain)  # strict JSON: 'nan', 'inf'
        # the same record (an error map's ratios cross as two characters each: within 1.2%, the same once crossed)
        assert to_plain(back) == plain


def test_a_record_with_an_unknown_field_is_refused_not_guessed():
    with pytest.raises(PlainError, match=r"Request: unknown field\(s\) surprise"):
        from_plain(
            Request, {**to_plain(Request("/k", "k", "k", (), "fp32", Shape(1, 1, 1), 1.0, 0.0, 0)), "surprise": 1}
        )


def test_a_case_record_reads_back_from_its_saved_json():
    record = recorded_record("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]")
    saved = json.loads(json.dumps(record.to_dict()))
    assert "gate" not in saved and saved["verdict"] == "ok" and saved["ci_s"] == list(record.ci_s)
    assert CaseRecord.from_dict(saved) == record


def test_a_kernel_that_keeps_state_between_launches_is_wrong_and_suspicious():
    """Recorded on the H100: the memo kernel's first three launches are right (verification's), later ones skip."""
    result, text = _judge(
        "memo_late[fp32-4096x4096x4096]",
        recorded_outcome("timing_cheat_late.cu::memo_late[fp32-4096x4096x4096]"),
        (4096, 4096, 4096),
    )
    assert result.timing is not None and result.timing.verdict == Sanity.WRONG and result.failed
    assert result.diagnosis.kind == Verdict.TIMING
    assert result.diagnosis.problems[0] == TimingProblem.WRONG_WHEN_TIMED
    assert TimingProblem.FASTER_THAN_CUBLAS in result.diagnosis.problems
    assert "the output of the last timed launch is wrong (the first launch was right" in text
    assert "suspicious timing: " in text and "x faster than cuBLAS" in text
    assert 'expect_fast = "..."' in text


def test_a_wrong_checked_timed_output_fails_the_case_named_by_its_round():
    """docs/verification.md#fresh-inputs-for-timed-launches: the memo kernel's outcome as the fresh-input check would
    stop it (its third timed launch returned the second's result): no speed, the round named, the run's data kept."""
    import dataclasses

    from pytest_gemm.records.outcome import TimedCheck

    outcome = recorded_outcome("timing_cheat_late.cu::memo_late[fp32-4096x4096x4096]")
    wrong = TimedCheck(3, 3, outcome.timing.last_output, "previous round", checked=1)
    stopped = dataclasses.replace(outcome.timing, kernel_s=(), reference_s=(), fresh=True, checked=1, wrong_round=wrong)
    result, text = _judge("memo_late[fp32-4096x4096x4096]", dataclasses.replace(outcome, timing=stopped), (4096,) * 3)
    assert result.failed and result.timing is None and result.diagnosis.kind == Verdict.TIMING
    assert result.diagnosis.problems == (TimingProblem.WRONG_WHEN_TIMED,) and result.diagnosis.timed == wrong
    assert (
        "correct when verified, wrong when timed: round 3 of 3 returned the previous round's result (each timed "
        "launch had inputs of its own; 1 timed output(s) checked)"
    ) in text
    plain = json.dumps(to_plain(result.diagnosis))  # it crosses as JSON and comes back with the round (NaNs: as text)
    assert json.dumps(to_plain(from_plain(type(result.diagnosis), json.loads(plain)))) == plain


def test_timed_outputs_that_passed_again_without_their_figures_pass_and_a_wrong_one_still_fails():
    """The worker keeps the figures of the last timed outputs only where one failed (the verdicts alone otherwise)."""
    import dataclasses

    outcome = recorded_outcome("01_naive.cu::sgemm_naive[fp32-512x512x512]")
    run = outcome.timing
    passed = dataclasses.replace(outcome, timing=dataclasses.replace(run, last_output=None, reference_output=None))
    result, _ = _judge("sgemm_naive[fp32-512x512x512]", passed, (512,) * 3)
    assert result.outcome == "passed" and result.timing is not None and result.timing.verdict == Sanity.OK
    # the figures of an output 12 of whose elements are past their bound (verification's, so made wrong)
    wrong = dataclasses.replace(outcome.verification.kernel, max_ratio=3.0, bad=12)
    failed = dataclasses.replace(outcome, timing=dataclasses.replace(run, last_output=wrong))
    result, text = _judge("sgemm_naive[fp32-512x512x512]", failed, (512,) * 3)
    assert result.failed and result.diagnosis.problems[0] == TimingProblem.WRONG_WHEN_TIMED, text


def test_failed_verification_is_a_failure_text_with_the_fault():
    name = "unwritten_tile[fp32-256x256x256]"
    result, text = _judge(name, recorded_outcome(f"faults.cu::{name}"))
    assert result.timing is None and result.failed
    assert text.startswith(f"verification failed for {name} (M=256, N=256, K=256, alpha=1, beta=0)")
    assert "unwritten output: 1024 element(s) of C still hold the NaN poison" in text
    assert "errors in 1 of 64 32x32 tiles of C: rows 224-255 x cols 224-255" in text
    # the diagnosis is data: its kind and facts; the text's bullets are its findings in words
    diagnosis = result.diagnosis
    assert diagnosis.kind == Verdict.WRONG_OUTPUT and diagnosis.findings[0].kind == ErrorCause.UNWRITTEN
    assert diagnosis.findings[0].count == 1024 and diagnosis.findings[0].rows is None  # recorded before tracing
    bullets = [line[4:] for line in text.splitlines() if line.startswith("  - ")]
    assert diagnosis_lines(diagnosis) == bullets


def test_a_diagnosis_crosses_as_json_and_comes_back_equal():
    name = "unwritten_tile[fp32-256x256x256]"
    result, _ = _judge(name, recorded_outcome(f"faults.cu::{name}"))
    back = CaseResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert to_plain(back) == to_plain(result) and back.diagnosis.findings[0].kind == ErrorCause.UNWRITTEN
    assert math.isinf(back.diagnosis.kernel.max_ratio) and math.isnan(back.diagnosis.kernel.worst[0][2])


def test_a_failure_of_the_worker_is_a_fault_diagnosis_and_a_pass_has_none():
    timeout = Outcome(failure=Failure(FailureKind.TIMEOUT, "timed out after 60 s", "verify", replace_worker=True))
    result, _ = _judge("k[fp32-256x256x256]", timeout)
    assert result.diagnosis.kind == Verdict.FAULT and result.diagnosis.failure.kind == FailureKind.TIMEOUT
    record = "01_naive.cu::sgemm_naive[fp32-4096x4096x4096]"
    result, _ = _judge("sgemm_naive[fp32-4096x4096x4096]", recorded_outcome(record), (4096,) * 3)
    assert result.timing is not None and result.diagnosis is None and result.outcome == "passed"


def test_the_max_sm_clock_is_nvmls_else_cudas():
    assert max_sm_clock({"max_sm_clock_mhz": 1980, "cuda_max_sm_clock_mhz": 1755}) == 1980
    assert max_sm_clock({"max_sm_clock_mhz": None, "cuda_max_sm_clock_mhz": 1755}) == 1755
    assert max_sm_clock({}) is None


@pytest.mark.parametrize(("params", "kernel"), [({}, "k"), ({"params": {"BM": [64], "BK": [8]}}, "k[BM64-BK8]")])
def test_a_case_names_its_kernel_with_the_variant(params, kernel):
    case = _case((4096, 4096, 4096), **params)
    result = judge_outcome(case, "k.cu::x", recorded_outcome("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]"), GPU)
    assert case.spec.label(case.variant) == kernel and result.timing.kernel == kernel


def test_a_skip_from_the_worker_is_a_skip():
    result, _ = _judge("k[fp32-1x1x1]", Outcome(skip="no CUDA device: none here"))
    assert result == CaseResult("skipped", "no CUDA device: none here", kind="case")


@pytest.mark.parametrize(
    ("failure", "head"),
    [
        (
            Failure(FailureKind.TIMEOUT, "timed out after 60 s", "time", replace_worker=True),
            "k[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0) timed out after 60 s while timing",
        ),
        (
            Failure(FailureKind.WORKER_DIED, "signal 9 (SIGKILL)", "compile", replace_worker=True),
            "the GPU worker died while compiling k[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0): "
            "signal 9 (SIGKILL)",
        ),
        (
            Failure(FailureKind.CUDA_ERROR, "out of GPU memory: 1 TB", "verify"),
            "CUDA error while verifying k[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0): out of GPU memory",
        ),
        (
            Failure(FailureKind.INTERNAL, "KeyError: 'x'", "verify", ("line 1", "line 2"), replace_worker=True),
            "pytest-gemm internal error while verifying k[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0): "
            "KeyError: 'x'; please report it",
        ),
    ],
)
def test_every_failure_kind_names_the_case_the_phase_and_how_to_replay(failure, head):
    outcome = Outcome(failure=failure, output="printf from the kernel\n")
    _, text = _judge("k[fp32-256x256x256]", outcome)
    assert text.startswith(head)
    assert "  the worker printed:\n    printf from the kernel" in text
    assert text.endswith(
        "replay: pytest 'k.cu::k[fp32-256x256x256]' --gemm-kernels --gemm-shapes 256x256x256 --gemm-seed 0"
    )
    if failure.kind == FailureKind.CUDA_ERROR:
        assert "the worker's CUDA context survived this error, and the run goes on in it" in text
