"""From a worker's outcome to a verdict (pure): records, sanity, failure texts, and the plain-data boundary."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_gemm.judge.case import CaseFacts, case_facts, judge_outcome
from pytest_gemm.records.case_record import CaseRecord, max_sm_clock
from pytest_gemm.records.outcome import Failure, Outcome
from pytest_gemm.records.plain import PlainError, from_plain, to_plain
from pytest_gemm.records.request import Request, TimingSettings
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import FailureKind, Sanity
from pytest_gemm.report.regression import replay_command
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.spec import spec_from_mapping

from conftest import recorded_outcome, recorded_record, recording

GPU = recording()["facts"]


def _facts(name: str, shape=(256, 256, 256), beta: float = 0.0) -> CaseFacts:
    return CaseFacts(
        test=f"k.cu::{name}",
        name=name,
        file="k.cu",
        kernel=name.split("[")[0],
        variant="",
        dtype="fp32",
        shape=shape,
        ab="",
        alpha=1.0,
        beta=beta,
        replay=replay_command(f"k.cu::{name}", "x".join(map(str, shape)), 0),
    )


def test_requests_and_outcomes_cross_as_json_and_come_back_equal():
    request = Request("/k.cu", "k.cu", "k", (("T", 16),), "fp32", 1, 2, 3, 0.7, 1.3, 42, TimingSettings())
    assert from_plain(Request, json.loads(json.dumps(to_plain(request)))) == request
    for key in recording()["outcomes"]:
        outcome = recorded_outcome(key)
        assert from_plain(Outcome, json.loads(json.dumps(to_plain(outcome)))) == outcome


def test_a_record_with_an_unknown_field_is_refused_not_guessed():
    with pytest.raises(PlainError, match=r"Request: unknown field\(s\) surprise"):
        from_plain(Request, {**to_plain(Request("/k", "k", "k", (), "fp32", 1, 1, 1, 1.0, 0.0, 0)), "surprise": 1})


def test_a_case_record_reads_back_from_its_saved_json():
    record = recorded_record("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]")
    saved = json.loads(json.dumps(record.to_dict()))
    assert "gate" not in saved and saved["verdict"] == "ok" and saved["ci_s"] == list(record.ci_s)
    assert CaseRecord.from_dict(saved) == record


def test_a_kernel_that_keeps_state_between_launches_is_wrong_and_suspicious():
    """Recorded on the H100: the memo kernel's first three launches are right (verification's), later ones skip."""
    verdict = judge_outcome(
        _facts("memo_late[fp32-4096x4096x4096]", (4096, 4096, 4096)),
        recorded_outcome("timing_cheat_late.cu::memo_late[fp32-4096x4096x4096]"),
        GPU,
    )
    assert verdict.record is not None and verdict.record.verdict == Sanity.WRONG
    assert verdict.failure is not None
    assert "the output of the last timed launch is wrong (the first launch was right" in verdict.failure
    assert "suspicious timing: " in verdict.failure and "x faster than cuBLAS" in verdict.failure
    assert 'expect_fast = "..."' in verdict.failure


def test_failed_verification_is_a_failure_text_with_the_fault():
    name = "unwritten_tile[fp32-256x256x256]"
    verdict = judge_outcome(_facts(name), recorded_outcome(f"faults.cu::{name}"), GPU)
    assert verdict.record is None and verdict.skip is None
    assert verdict.failure.startswith(f"verification failed for {name} (M=256, N=256, K=256, alpha=1, beta=0)")
    assert "unwritten output: 1024 element(s) of C still hold the NaN poison" in verdict.failure
    assert "errors in 1 of 64 32x32 tiles of C: rows 224-255 x cols 224-255" in verdict.failure
    # the diagnosis travels as data (for the report's heatmaps), the same sentences as the text's bullets
    bullets = [line[4:] for line in verdict.failure.splitlines() if line.startswith("  - ")]
    assert verdict.diagnosis and list(verdict.diagnosis) == bullets
    assert verdict.diagnosis[0].startswith("unwritten output: 1024 element(s) of C still hold the NaN poison")


def test_only_a_failed_verification_has_a_diagnosis():
    timeout = Outcome(failure=Failure(FailureKind.TIMEOUT, "timed out after 60 s", "verify", replace_worker=True))
    assert judge_outcome(_facts("k[fp32-256x256x256]"), timeout, GPU).diagnosis == ()
    record = "01_naive.cu::sgemm_naive[fp32-4096x4096x4096]"
    verdict = judge_outcome(_facts("sgemm_naive[fp32-4096x4096x4096]", (4096,) * 3), recorded_outcome(record), GPU)
    assert verdict.record is not None and verdict.diagnosis == ()


def test_the_max_sm_clock_is_nvmls_else_cudas():
    assert max_sm_clock({"max_sm_clock_mhz": 1980, "cuda_max_sm_clock_mhz": 1755}) == 1980
    assert max_sm_clock({"max_sm_clock_mhz": None, "cuda_max_sm_clock_mhz": 1755}) == 1755
    assert max_sm_clock({}) is None


@pytest.mark.parametrize(("params", "kernel"), [({}, "k"), ({"params": {"BM": [64], "BK": [8]}}, "k[BM64-BK8]")])
def test_a_case_names_its_kernel_with_the_variant(params, kernel):
    header = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [16, 16]}
    spec = spec_from_mapping({**header, "grid": ["cdiv(N, 16)", "cdiv(M, 16)"], **params}, path="k.cu")
    (variant,) = spec.variants()
    case = Case(spec, variant, "fp32", Shape(64, 64, 64), AlphaBeta(1.0, 0.0))
    assert spec.label(variant) == kernel and case_facts(case, "k.cu::x", "", "").kernel == kernel


def test_a_skip_from_the_worker_is_a_skip():
    verdict = judge_outcome(_facts("k[fp32-1x1x1]"), Outcome(skip="no CUDA device: none here"), GPU)
    assert verdict == dataclasses.replace(verdict, skip="no CUDA device: none here", failure=None, record=None)


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
    text = judge_outcome(_facts("k[fp32-256x256x256]"), outcome, GPU).failure
    assert text.startswith(head)
    assert "  the worker printed:\n    printf from the kernel" in text
    assert text.endswith(
        "replay: pytest 'k.cu::k[fp32-256x256x256]' --gemm-kernels --gemm-shapes 256x256x256 --gemm-seed 0"
    )
    if failure.kind == FailureKind.CUDA_ERROR:
        assert "the worker's CUDA context survived this error, and the run goes on in it" in text
