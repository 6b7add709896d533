"""The verdict on one case: from a worker's outcome to a skip, a failure text, or a timed record.

This is what the pytest layer does with every outcome, as a pure function: it is tested on the
CPU with recorded outcomes, and the plugin only acts on its answer (skip, fail, record the times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..records.case_record import CaseRecord, gpu_identity, max_sm_clock
from ..records.outcome import Outcome
from ..records.verdicts import Sanity
from ..report.failure import diagnosis, failure_message, fault_message, stats_line
from ..specs.cases import Case
from .metrics import summarize
from .peaks import peak_flops
from .throttle import throttle_flags

__all__ = ["CaseFacts", "CaseVerdict", "case_facts", "judge_outcome"]


@dataclass(frozen=True)
class CaseFacts:
    """What the pytest side knows of a case, beside its outcome."""

    test: str  # node id
    name: str  # kernel[id]
    file: str
    kernel: str  # kernel[variant]
    variant: str
    dtype: str
    shape: tuple[int, int, int]
    ab: str
    alpha: float
    beta: float
    replay: str  # the command that runs this case alone
    source_sha256: str = ""
    regression_threshold: float | None = None
    expect_fast: str = ""
    always_reads_c: bool = False  # header declarations that change the checks
    nondeterministic: str = ""


def case_facts(case: Case, test: str, replay: str, source_sha256: str) -> CaseFacts:
    """The facts of a collected case (``test``: its node id)."""
    return CaseFacts(
        test=test,
        name=case.name,
        file=case.spec.path,
        kernel=case.spec.label(case.variant),
        variant=case.variant.id,
        dtype=case.dtype,
        shape=(case.shape.M, case.shape.N, case.shape.K),
        ab=case.ab.id,
        alpha=case.ab.alpha,
        beta=case.ab.beta,
        replay=replay,
        source_sha256=source_sha256,
        regression_threshold=case.spec.regression_threshold,
        expect_fast=case.spec.expect_fast,
        always_reads_c=case.spec.always_reads_c,
        nondeterministic=case.spec.nondeterministic,
    )


@dataclass(frozen=True)
class CaseVerdict:
    """What to do with a case: skip it, fail it with ``failure``, and/or record its timing."""

    skip: str | None = None
    failure: str | None = None
    record: CaseRecord | None = None
    margin: float | None = None  # how far inside the verification bounds the output was
    diagnosis: tuple[str, ...] = ()  # a failed verification: one sentence per thing wrong, as ``failure`` lists them


def _peak(gpu: dict[str, Any], dtype: str) -> float | None:
    try:
        major, minor = (int(v) for v in str(gpu.get("compute_capability", "0.0")).split("."))
    except ValueError:
        return None
    sm_count = int(gpu.get("sm_count") or 0)
    return peak_flops(str(gpu.get("name", "")), (major, minor), sm_count, max_sm_clock(gpu), dtype)


def judge_outcome(case: CaseFacts, outcome: Outcome, gpu: dict[str, Any], *, save_raw: bool = False) -> CaseVerdict:
    """The verdict on ``outcome``; ``gpu`` holds the worker's device facts."""
    if outcome.skip is not None:
        return CaseVerdict(skip=outcome.skip)
    verification = outcome.verification
    margin = verification.kernel.margin if verification is not None else None
    if outcome.failure is not None:
        text = fault_message(
            outcome.failure,
            case=case.name,
            shape=case.shape,
            alpha=case.alpha,
            beta=case.beta,
            replay=case.replay,
            output=outcome.output,
        )
        return CaseVerdict(failure=text, margin=margin)
    if verification is None:
        return CaseVerdict(failure=f"{case.name}: the worker returned no result; replay: {case.replay}")
    if not verification.passed:
        lines = tuple(diagnosis(verification, always_reads_c=case.always_reads_c))
        text = failure_message(
            verification,
            dtype=case.dtype,
            replay=case.replay,
            always_reads_c=case.always_reads_c,
            nondeterministic=case.nondeterministic,
            lines=lines,
        )
        return CaseVerdict(failure=text, margin=margin, diagnosis=lines)
    if outcome.timing is None:
        return CaseVerdict(margin=margin)
    return _timed(case, outcome, gpu, margin, save_raw)


def _timed(case: CaseFacts, outcome: Outcome, gpu: dict[str, Any], margin: float | None, save_raw: bool) -> CaseVerdict:
    run = outcome.timing
    assert run is not None
    m, n, k = case.shape
    metrics = summarize(
        run,
        flops=2 * m * n * k,
        peak_flops=_peak(gpu, case.dtype),
        throttle=throttle_flags(outcome.nvml_before, outcome.nvml_after),
        expect_fast=case.expect_fast,
    )
    wrong = run.last_output is not None and not run.last_output.passed
    sanity = Sanity.WRONG if wrong else (Sanity.SUSPICIOUS if metrics["suspicious"] else Sanity.OK)
    record = CaseRecord(
        test=case.test,
        file=case.file,
        kernel=case.kernel,
        variant=case.variant,
        gpu=str(gpu.get("name", "")),
        gpu_id=gpu_identity(gpu),
        source_sha256=case.source_sha256,
        regression_threshold=case.regression_threshold,
        dtype=case.dtype,
        shape=f"{m}x{n}x{k}",
        ab=case.ab,
        alpha=case.alpha,
        beta=case.beta,
        verdict=sanity,
        nvml_before=outcome.nvml_before or {},
        nvml_after=outcome.nvml_after or {},
        raw={"kernel_s": list(run.kernel_s), "cublas_s": list(run.reference_s)} if save_raw else None,
        **metrics,
    )
    if run.reference_output is not None and not run.reference_output.passed:
        text = (
            f"{case.name}: the cuBLAS launches timed alongside produced a wrong result "
            f"({stats_line(run.reference_output)}); this is a pytest-gemm bug, please report it with: {case.replay}"
        )
        return CaseVerdict(failure=text, record=record, margin=margin)
    problems = []
    if wrong:
        assert run.last_output is not None
        problems.append(
            "the output of the last timed launch is wrong (the first launch was right: does the kernel "
            f"keep state between launches?): {stats_line(run.last_output)}"
        )
    problems += [f"suspicious timing: {text}" for text in record.suspicious]
    if problems:
        hint = 'If this speed is real, say why in the kernel header: expect_fast = "...".' if record.suspicious else ""
        text = "\n".join([f"{case.name}:", *problems, hint, f"replay: {case.replay}"]).strip()
        return CaseVerdict(failure=text, record=record, margin=margin)
    return CaseVerdict(record=record, margin=margin)
