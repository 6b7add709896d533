"""The verdict on one case: from a worker's outcome to a judged case (:class:`~pytest_gemm.records.result.CaseResult`).

This is what the pytest layer does with every outcome, as a pure function: it is tested on the
CPU with recorded outcomes, and the plugin only acts on its answer (skip, fail with the diagnosis
rendered by ``report/``, record the times). Judgement returns data: it words nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ..records.case_record import CaseRecord, gpu_identity, max_sm_clock
from ..records.declarations import Declarations
from ..records.diagnosis import MAX_OUTPUT_LINES, Diagnosis, Finding
from ..records.outcome import ErrorStats, Outcome, Verification
from ..records.result import CaseResult
from ..records.verdicts import Check, ErrorCause, Misreading, Sanity, TimingProblem, Verdict
from ..specs.cases import Case
from .metrics import summarize
from .peaks import peak_flops
from .throttle import throttle_flags

__all__ = [
    "BY_THE_BOUND",
    "LOW_PRECISION",
    "calibration",
    "diagnose",
    "explained",
    "findings",
    "judge_outcome",
    "wrong_output",
]

#: the causes of a NaN read from a guard region (an FP8 output NaN for that reason matches e4m3 read as e5m2 too)
GUARD_CAUSES = (
    ErrorCause.GUARD_A, ErrorCause.GUARD_B, ErrorCause.GUARD_C, ErrorCause.GUARD_SCALES, ErrorCause.GUARD_EPILOGUE
)  # fmt: skip
#: a failed normwise test with an error under 1% means roughly right values: lost precision, not wrong ones
LOW_PRECISION = 1e-2


def findings(result: Verification) -> tuple[Finding, ...]:
    """What is wrong with a verified output, most telling first: the misreading it matches, the bitwise
    checks, the traced sources of its wrong elements (or, untraced, its unwritten and non-finite ones), the normwise
    test, the wrong values."""
    k = result.kernel
    read = result.misread
    guarded = any(ErrorCause(source.cause) in GUARD_CAUSES for source in result.sources)
    if read is not None and read.kind == Misreading.OTHER_FP8 and guarded:  # its NaN came from a guard: read past it
        read = None
    found = (
        [Finding(read.kind, read.matched, batches=read.batches, batch_count=read.batch_count, as_read=read.as_read)]
        if read
        else []
    )
    found += [Finding(Check(fault.kind), fault.count, region=fault.where) for fault in result.faults]
    for source in result.sources:  # traced by the worker, one per source
        found.append(Finding(ErrorCause(source.cause), source.count, source.rows, source.cols, source.n_tiles,
                             source.region))  # fmt: skip
    if not result.sources:
        if k.unwritten:
            found.append(Finding(ErrorCause.UNWRITTEN, k.unwritten))
        if k.nonfinite > k.unwritten:
            found.append(Finding(Check.NONFINITE, k.nonfinite - k.unwritten))
    if k.norm_error > k.norm_tol:
        if k.norm_error < LOW_PRECISION:
            found.append(Finding(Check.LOW_PRECISION, k.bad))
        elif k.bad == 0:
            found.append(Finding(Check.NORMWISE))
    if k.bad and not result.sources:
        found.append(Finding(ErrorCause.OVER_BOUND, k.bad))
    return tuple(found)


def wrong_output(v: Verification, dtype: str, declared: Declarations | None = None) -> Diagnosis:
    """The diagnosis of an output of ``dtype`` that failed its verification (``declared``: what the kernel's header
    declares that changes its checks)."""
    return Diagnosis(
        Verdict.WRONG_OUTPUT,
        dtype,
        v.shape,
        v.alpha,
        v.beta,
        seed=v.seed,
        findings=findings(v),
        kernel=v.kernel,
        peer=v.peer,
        error_map=v.error_map,
        declared=declared or Declarations(),
    )


def diagnose(case: Case, verification: Verification) -> Diagnosis:
    """The diagnosis of a case whose output failed its verification."""
    return wrong_output(verification, case.dtype, case.declarations)


def _scalars(case: Case) -> dict[str, Any]:
    return {
        "dtype": case.dtype,
        "shape": case.shape,
        "alpha": case.ab.alpha,
        "beta": case.ab.beta,
        "declared": case.declarations,
    }


def _peak(gpu: dict[str, Any], dtype: str) -> float | None:
    try:
        major, minor = (int(v) for v in str(gpu.get("compute_capability", "0.0")).split("."))
    except ValueError:
        return None
    sm_count = int(gpu.get("sm_count") or 0)
    return peak_flops(str(gpu.get("name", "")), (major, minor), sm_count, max_sm_clock(gpu), dtype)


def _last_lines(text: str) -> str:
    """What a worker printed, its last MAX_OUTPUT_LINES lines (saying how many earlier ones were left out)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_OUTPUT_LINES:
        lines = [f"[{len(lines) - MAX_OUTPUT_LINES} earlier line(s) left out]", *lines[-MAX_OUTPUT_LINES:]]
    return "\n".join(lines)


def _finite_ratio(stats: ErrorStats) -> float:
    """The worst element ratio of an output's finite elements where it is known: within the bound where every element
    over it is non-finite (those have findings of their own, which the bound never explains)."""
    return min(stats.max_ratio, 1.0) if stats.bad <= stats.nonfinite else stats.max_ratio


#: the findings that come from the accuracy bound, each with the ratio (of an output's statistics) it
#: is measured by; where the peer fails the bound, it explains such a finding of the kernel's up to the peer's own
#: ratio. Misreadings are not here (a misread output is wrong whatever the bound), nor faults, unwritten elements,
#: guard reads or non-finite ones
BY_THE_BOUND: dict[ErrorCause | Check | Misreading, Callable[[ErrorStats], float]] = {
    ErrorCause.OVER_BOUND: _finite_ratio,
    Check.NORMWISE: attrgetter("norm_ratio"),
    Check.LOW_PRECISION: attrgetter("norm_ratio"),
}


def explained(finding: Finding, kernel: ErrorStats, peer: ErrorStats) -> bool:
    """Whether a peer that fails the bound explains this finding of the kernel's output: one of the
    bound's own, with the kernel's ratio no larger than the peer's (or than 1)."""
    ratio = BY_THE_BOUND.get(finding.kind)
    return ratio is not None and ratio(kernel) <= max(1.0, ratio(peer))


def calibration(case: Case, v: Verification) -> CaseResult | None:
    """The calibration rule (docs/verification.md#how-results-are-judged): the peer is judged by the kernel's bound on
    every case, and where it fails, the bound is wrong on this case: a calibration error, skipped, unless the kernel
    has findings the peer's failure does not explain (errors beyond the peer's, a misreading, faults, ...), which fail
    it. None where the peer passes (or there is none)."""
    if v.peer is None or v.peer.passed:
        return None
    left = tuple(f for f in findings(v) if not explained(f, v.kernel, v.peer))
    diagnosis = Diagnosis(
        Verdict.CALIBRATION,
        **_scalars(case),
        seed=v.seed,
        findings=left,
        kernel=v.kernel,
        peer=v.peer,
        error_map=v.error_map if left else None,
    )
    return CaseResult("failed" if left else "skipped", kind="case", diagnosis=diagnosis)


def judge_outcome(
    case: Case, test: str, outcome: Outcome, gpu: dict[str, Any], *, source_sha256: str = "", save_raw: bool = False
) -> CaseResult:
    """The judged case ``test`` (its node id) from ``outcome``; ``gpu`` holds the worker's device facts."""
    if outcome.skip is not None:
        return CaseResult("skipped", outcome.skip, kind="case")
    verification = outcome.verification
    margin = verification.kernel.margin if verification is not None else None
    if outcome.failure is not None:
        output = _last_lines(outcome.output)
        diagnosis = Diagnosis(Verdict.FAULT, **_scalars(case), failure=outcome.failure, output=output)
        return CaseResult("failed", kind="case", diagnosis=diagnosis, margin=margin)
    if verification is None:
        return CaseResult("failed", kind="case", diagnosis=Diagnosis(Verdict.NO_RESULT, **_scalars(case)))
    streams = verification.other_streams or (outcome.timing.other_streams if outcome.timing else ())
    if streams:  # neither waited for nor timed where it runs: no record, no speed, no gate
        diagnosis = Diagnosis(Verdict.TIMING, **_scalars(case), problems=(TimingProblem.OTHER_STREAM,), streams=streams)
        return CaseResult("failed", kind="case", diagnosis=diagnosis, margin=margin)
    miscalibrated = calibration(case, verification)
    if miscalibrated is not None:
        return miscalibrated
    if not verification.passed:
        return CaseResult("failed", kind="case", diagnosis=diagnose(case, verification), margin=margin)
    if outcome.timing is None:  # not timed; where timing was asked for, why (its message)
        return CaseResult("passed", outcome.untimed, kind="case", margin=margin)
    run = outcome.timing
    if run.wrong_round is not None:  # a checked timed output failed: timing stopped there, no speed to claim
        wrong = run.wrong_round
        diagnosis = Diagnosis(Verdict.TIMING, **_scalars(case), problems=(TimingProblem.WRONG_WHEN_TIMED,),
                              kernel=wrong.stats, timed=wrong)  # fmt: skip
        return CaseResult("failed", kind="case", diagnosis=diagnosis, margin=margin)
    record = _record(case, test, outcome, gpu, source_sha256, save_raw)
    problems, kernel, peer = [], None, None
    if run.reference_output is not None and not run.reference_output.passed:
        problems.append(TimingProblem.REFERENCE_WRONG)
        peer = run.reference_output
    if record.verdict == Sanity.WRONG:
        problems.append(TimingProblem.WRONG_WHEN_TIMED)
        kernel = run.last_output
    problems += record.suspicious
    if not problems:
        return CaseResult("passed", kind="case", margin=margin, timing=record)
    if problems == [TimingProblem.REFERENCE_WRONG]:  # the calibration rule on the timed launches too
        diagnosis = Diagnosis(Verdict.CALIBRATION, **_scalars(case), seed=verification.seed,
                              problems=tuple(problems), kernel=run.last_output, peer=peer)  # fmt: skip
        return CaseResult("skipped", kind="case", diagnosis=diagnosis, margin=margin, timing=record)
    diagnosis = Diagnosis(Verdict.TIMING, **_scalars(case), problems=tuple(problems), kernel=kernel, peer=peer)
    return CaseResult("failed", kind="case", diagnosis=diagnosis, margin=margin, timing=record)


def _measured_rows(outcome: Outcome) -> bool | None:
    """Whether the case's rows of C came out the same at a smaller M (None: not checked)."""
    rows = outcome.verification.batch_rows if outcome.verification is not None else None
    return rows.invariant if rows is not None else None


def _graph_refused(outcome: Outcome) -> str | None:
    """Why a CUDA graph could not capture the case's launch ('' where it did; None: not checked)."""
    graph = outcome.verification.graph if outcome.verification is not None else None
    return graph.refused if graph is not None and not graph.skipped else None


def _record(case: Case, test: str, outcome: Outcome, gpu: dict[str, Any], source: str, save_raw: bool) -> CaseRecord:
    run = outcome.timing
    assert run is not None
    metrics = summarize(
        run,
        flops=case.shape.flops,
        peak_flops=_peak(gpu, case.dtype),
        throttle=throttle_flags(outcome.nvml_before, outcome.nvml_after),
        expect_fast=case.spec.expect_fast,
    )
    wrong = run.last_output is not None and not run.last_output.passed
    sanity = Sanity.WRONG if wrong else (Sanity.SUSPICIOUS if metrics["suspicious"] else Sanity.OK)
    return CaseRecord(
        test=test,
        file=case.spec.path,
        kernel=case.spec.label(case.variant),
        variant=case.variant.id,
        gpu=str(gpu.get("name", "")),
        gpu_id=gpu_identity(gpu),
        source_sha256=source,
        regression_threshold=case.spec.regression_threshold,
        dtype=case.dtype,
        accumulate=case.spec.accumulate,
        peer=run.peer,
        library_gemm=case.spec.library_gemm,
        shape=case.shape,
        ab=case.ab.id,
        alpha=case.ab.alpha,
        beta=case.ab.beta,
        verdict=sanity,
        nvml_before=outcome.nvml_before or {},
        nvml_after=outcome.nvml_after or {},
        raw={"kernel_s": list(run.kernel_s), "cublas_s": list(run.reference_s)} if save_raw else None,
        autotuned=outcome.autotuned,
        unchecked_streams=outcome.verification.unchecked_streams if outcome.verification else "",
        fresh_inputs=run.fresh,
        checked_outputs=run.checked,
        persisting_l2=run.persisting_l2,
        batch_invariant=_measured_rows(outcome),
        graph_refused=_graph_refused(outcome),
        **metrics,
    )
