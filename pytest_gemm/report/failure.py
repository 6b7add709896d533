"""The text a kernel author reads when a case fails: a judged case's diagnosis in words.

Each kind of finding has its sentence here (:data:`FINDING_TEXT`), each kind of diagnosis its layout
(:func:`failure_text`); the judgement that found them (``judge/``) words nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..records.case_record import CaseRecord
from ..records.diagnosis import Diagnosis, Finding
from ..records.outcome import STREAMS_KEPT, ErrorStats, TimedCheck
from ..records.result import CaseResult
from ..records.shapes import Shape
from ..records.storage import ORDER_FLAGS, ORDERS, Storage
from ..records.verdicts import Check, ErrorCause, Misreading, TimingProblem, Verdict
from ..specs.spec import KernelSpec
from .epilogue import EPILOGUE_CHECKS, epilogue_lines
from .faults import case_scalars, fault_lines
from .grouped import GROUP_ROWS, group_rows_text, groups_line, row_namer
from .misread import misread_text
from .regression import gate_failure

__all__ = [
    "FINDING_TEXT",
    "calibration_line",
    "calibration_text",
    "declarations",
    "declared",
    "diagnosis_lines",
    "failure_text",
    "headline",
    "kernel_declarations",
    "stats_line",
]


def _x(ratio: float) -> str:
    return "inf" if ratio == float("inf") else f"{ratio:.3g}x"


def stats_line(stats: ErrorStats) -> str:
    normwise = f"normwise {stats.norm_error:.3g} = {_x(stats.norm_ratio)} of the tolerance {stats.norm_tol:.3g}"
    if math.isinf(stats.norm_tol):  # a saved run of a version that judged outputs under 16 elements per element only
        normwise = f"normwise {stats.norm_error:.3g}, not judged in this run"
    figures = ""
    if stats.calc_diff is not None and stats.cosine is not None:  # FP8 and INT8: as the peers report them
        figures = f"; calc_diff {stats.calc_diff:.3g}, cosine similarity {stats.cosine:.9f}"
    return f"max {_x(stats.max_ratio)}, median {_x(stats.median_ratio)} of the per-element bound; {normwise}{figures}"


def _where(f: Finding, d: Diagnosis) -> str:
    if f.rows is None or f.cols is None:
        return ""
    (r0, r1), (c0, c1) = f.rows, f.cols
    rows, named = f"rows {r0}-{r1}", row_namer(d)
    if named is not None:  # a grouped case's C: its groups' rows stacked
        rows = f"{named(r0)} to {named(r1)}"
    elif d.shape is not None and d.shape.batch > 1:  # a batch's C is stacked, one batch's rows after the other's
        m = d.shape.M
        rows = f"batch {r0 // m} row {r0 % m} to batch {r1 // m} row {r1 % m}"
    return f" ({rows}, columns {c0}-{c1}, {f.tiles} 32x32 tile{'s' if f.tiles != 1 else ''})"


def _ld(operand: str) -> str:
    """The argument that gives an operand's stored rows' length: lda, or an FP8 grid's ld_scale_a."""
    return f"ld_{operand}" if operand.startswith("scale") else f"ld{operand.lower()}"


def _read_past(f: Finding, d: Diagnosis) -> str:
    operand = f.region.split()[-1] if f.region else str(f.kind).split()[-1]
    side = next((word for word in ("before", "after", "padding", "gaps") if word in f.region), "")
    what = {
        "gaps": f"reads between the matrices of {operand}'s batch (past one, before the next)",
        "before": f"reads before the start of {operand}",
        "after": f"reads past the end of {operand}",
        "padding": f"reads the row padding of {operand} (between the row's end and {_ld(operand)})",
        "": f"reads past {operand}",
    }[side]
    return f"{what}: {f.count} element(s) of C are NaN from {f.region or 'its guard'}, which holds NaN{_where(f, d)}"


def _read_c(f: Finding, d: Diagnosis) -> str:
    return (
        f"reads C although beta = 0 (BLAS: C is output-only when beta = 0): {f.count} element(s) are NaN while C "
        f"holds NaN, and right once C holds finite data{_where(f, d)}; a kernel meant to read C whatever beta is "
        "declares always_reads_c = true in its header"
    )


def _unwritten(f: Finding, d: Diagnosis) -> str:
    if f.rows is not None:  # traced: the worker told unwritten elements from C read
        held = "the NaN poison" if d.poisoned else "their prior value"
        return f"unwritten output: {f.count} element(s) of C still hold {held}: never written{_where(f, d)}"
    if d.poisoned:
        return (
            f"unwritten output: {f.count} element(s) of C still hold the NaN poison "
            "(never written, or C was read although beta = 0 and BLAS says it must not be)"
        )
    return f"unwritten output: {f.count} element(s) of C still hold their prior value"


def _arithmetic(f: Finding, d: Diagnosis) -> str:
    return (
        f"NaN or Inf from arithmetic: {f.count} element(s) that stay non-finite with finite data in C and every guard "
        f"region of A, B and C zeroed{_where(f, d)}"
    )


def _wrong_values(f: Finding, d: Diagnosis) -> str:
    total = d.kernel.total if d.kernel else 0
    worst = f", worst {_x(d.kernel.max_ratio)} of it" if d.kernel else ""
    share = f" ({100.0 * f.count / total:.3g}%)" if total else ""
    return f"wrong values: {f.count} of {total} elements{share} exceed the per-element bound{worst}{_where(f, d)}"


def _nonfinite(f: Finding, d: Diagnosis) -> str:
    hint = (
        " (C held NaN before the launch and beta = 0: a kernel that reads C anyway, e.g. beta * C, "
        "gives NaN; BLAS says C must not be read when beta = 0)"
        if d.poisoned
        else ""
    )
    return f"non-finite output: {f.count} element(s) are NaN or Inf{hint}"


def _normwise(f: Finding, d: Diagnosis) -> str:
    k = d.kernel
    assert k is not None
    only = "only the normwise test failed, every element is within its bound: " if k.bad == 0 else ""
    if f.kind == Check.LOW_PRECISION:
        return (
            f"precision too low: {only}normwise error {k.norm_error:.3g} is {_x(k.norm_ratio)} the tolerance "
            f"{k.norm_tol:.3g} while no element is grossly wrong: the product is computed in lower precision "
            "than the dtype promises (e.g. fp16-rounded operands or TF32)"
        )
    return (
        f"{only}normwise error {k.norm_error:.3g} is {_x(k.norm_ratio)} the tolerance {k.norm_tol:.3g}: "
        "small errors in every element add up over C (e.g. a misapplied alpha or beta at large K)"
    )


def _bitwise(f: Finding, d: Diagnosis) -> str:
    return f"{f.kind}: {f.count} element(s) changed in {f.region}"


def _graph_replay(f: Finding, d: Diagnosis) -> str:
    what = f"{f.count} element(s) over the bound" if f.count else "over the normwise bound"
    return f"{f.kind}: {what} in {f.region} (its own launches are right)"


def _batch_variant(f: Finding, d: Diagnosis) -> str:
    return f"{f.kind}: {f.count} row(s) differ bit for bit between {f.region} (it declares batch_invariant = true)"


#: each kind of finding in words (a new check adds its kind here and nothing else)
FINDING_TEXT: dict[ErrorCause | Check | Misreading, Callable[[Finding, Diagnosis], str]] = {
    ErrorCause.GUARD_A: _read_past,
    ErrorCause.GUARD_B: _read_past,
    ErrorCause.GUARD_C: _read_past,
    ErrorCause.GUARD_SCALES: _read_past,
    ErrorCause.GUARD_EPILOGUE: _read_past,
    ErrorCause.READ_C: _read_c,
    ErrorCause.UNWRITTEN: _unwritten,
    ErrorCause.ARITHMETIC: _arithmetic,
    ErrorCause.OVER_BOUND: _wrong_values,
    Check.OUT_OF_BOUNDS: _bitwise,
    Check.INPUT_MODIFIED: _bitwise,
    Check.NONDETERMINISTIC: _bitwise,
    Check.BATCH_VARIANT: _batch_variant,
    Check.GRAPH_REPLAY: _graph_replay,
    Check.NONFINITE: _nonfinite,
    Check.LOW_PRECISION: _normwise,
    Check.NORMWISE: _normwise,
    **dict.fromkeys(GROUP_ROWS, group_rows_text),
    **EPILOGUE_CHECKS,
    **dict.fromkeys(Misreading, misread_text),
}


def diagnosis_lines(d: Diagnosis) -> list[str]:
    """One sentence per thing that is wrong, most telling first (what the report and the summary list); a calibration
    error's own sentence last."""
    lines = [FINDING_TEXT[f.kind](f, d) for f in d.findings]
    return [*lines, calibration_text(d)] if d.kind == Verdict.CALIBRATION else lines or list(d.said)


def calibration_text(d: Diagnosis) -> str:
    """A calibration error: which bound the peer fails (in its timed launches, where those did), by how
    much, and what follows: the kernel is not judged by it, or, where it failed, only for what the peer's failure
    does not explain (its findings, its own timing problems)."""
    p, k = d.peer, d.kernel
    over = [f"the per-element bound by {_x(p.max_ratio)} ({p.bad} of {p.total} elements)"] if p and p.bad else []
    over += [f"the normwise tolerance by {_x(p.norm_ratio)}"] if p and p.norm_error > p.norm_tol else []
    when = " in its timed launches" if TimingProblem.REFERENCE_WRONG in d.problems else ""
    kernel = f" (the kernel: {_x(k.max_ratio)} per element, {_x(k.norm_ratio)} normwise)" if k else ""
    follows = "the bound, not the kernel, is wrong here, so the kernel's values are not judged by it"
    if d.findings:
        follows = "the bound is wrong here, so the kernel is failed only for what that does not explain"
    if d.kind == Verdict.TIMING:
        follows = "the bound is wrong here; the kernel is failed for its own problems"
    return (
        f"pytest-gemm calibration error: cuBLAS (the peer) fails {' and '.join(over) or 'the bound'}{when} on this "
        f"case{kernel}; {follows}; please report it"
    )


def calibration_line(count: int) -> str:
    """The end of a run that met calibration errors: on how many cases the kernel was not judged by the bound."""
    return (
        f"pytest-gemm: {count} calibration error(s): cuBLAS (the peer) failed the accuracy bound on {count} case(s), "
        "where the bound, not the kernel, is wrong; their kernels were not judged by it (each such skipped case's "
        "reason, -rs, names the bound); please report them"
    )


def declarations(
    *, always_reads_c: bool = False, nondeterministic: str = "", storage: str = "", accumulate: str = ""
) -> list[str]:
    """What a kernel's header declares that changes how it is checked, in words (``storage``: each operand's order,
    '' when all are row-major; ``accumulate``: '' for the default)."""
    lines = []
    if storage:
        lines.append(f"storage {storage} (each matrix as it lies in memory: rows of contiguous elements)")
    if accumulate:
        lines.append(
            f'accumulate = "{accumulate}": judged by {accumulate} accumulation\'s error bound, and timed against '
            f"cuBLAS accumulating in {accumulate}"
        )
    if always_reads_c:
        lines.append("always_reads_c = true: C holds finite prior data in its beta = 0 cases too")
    if nondeterministic:
        lines.append(f"nondeterministic ({nondeterministic}): its launches are not compared bit for bit")
    return lines


def declared(d: Diagnosis) -> list[str]:
    """:func:`declarations` of a failed case's kernel, as its diagnosis holds them (a grouped one's groups too)."""
    dec = d.declared
    storage = "" if dec.storage.is_default else dec.storage.text
    lines = declarations(
        always_reads_c=dec.always_reads_c,
        nondeterministic=dec.nondeterministic,
        storage=storage,
        accumulate=dec.accumulate,
    )
    return lines + ([groups_line(dec.groups, d.shape)] if dec.groups is not None else []) + epilogue_lines(dec.epilogue)


def kernel_declarations(spec: KernelSpec) -> list[str]:
    """:func:`declarations` of a kernel, whatever its variant: an order that a param sweeps is said as both."""
    params = dict(spec.params)
    orders = []
    for flag, op in ORDER_FLAGS.items():
        values = params.get(flag, (int(spec.storage.transposed(op)),))
        orders.append(f"{op} {' or '.join(dict.fromkeys(ORDERS[op][int(bool(v))] for v in values))}")
    storage = ", ".join(orders)
    return declarations(
        always_reads_c=spec.always_reads_c,
        nondeterministic=spec.nondeterministic,
        storage="" if storage == Storage().text else storage,
        accumulate=spec.accumulate,
    )


def _wrong_output(name: str, d: Diagnosis, replay: str) -> list[str]:
    out = [f"verification failed for {name} ({case_scalars(d.shape, d.alpha, d.beta)})"]
    out += [f"  - {line}" for line in diagnosis_lines(d)]
    out += [f"  declared in the header: {line}" for line in declared(d)]
    k = d.kernel
    if k is not None:
        out.append(f"  kernel: {stats_line(k)}")
        named = row_namer(d)  # a grouped case's rows are named by group; its tiles counted (the findings say where)
        out += _tiles(k, d.shape) if named is None else [f"  errors in {k.n_bad_tiles} of {k.n_tiles} tiles of C"]
        if k.bad:
            batch, m = d.shape.batch, d.shape.M
            where = "(group row, col)" if named else "(batch, row, col)" if batch > 1 else "(row, col)"
            out.append(f"  worst elements {where}: got, expected, error/bound")
            at = (lambda r, c: f"{r // m}, {r % m}, {c}") if batch > 1 else (lambda r, c: f"{r}, {c}")
            at = (lambda r, c: f"{named(r)}, {c}") if named is not None else at
            out += [f"    ({at(r, c)}): {g!r}, {e!r}, {_x(ratio)}" for r, c, g, e, ratio in k.worst]
    if d.peer is not None:
        out.append(f"  cuBLAS {d.dtype} (peer): {stats_line(d.peer)}")
    out.append(f"  seed {d.seed} (this case's data); replay: {replay}")
    return out


def _tiles(k: ErrorStats, shape: Shape) -> list[str]:
    if not k.n_bad_tiles:
        return []
    t, m, n = k.tile, shape.M, shape.N
    if k.n_bad_tiles == k.n_tiles:
        return [f"  errors in all {k.n_tiles} {t}x{t} tiles of C"]
    tm = -(-m // t)  # a batch's tile rows are stacked (judge.accuracy.tile_summary)

    def tile(r: int, c: int) -> str:
        batch = f"batch {r // tm} " if shape.batch > 1 else ""
        r %= tm
        return f"{batch}rows {r * t}-{min((r + 1) * t, m) - 1} x cols {c * t}-{min((c + 1) * t, n) - 1}"

    listed = ", ".join(tile(r, c) for r, c in k.bad_tiles)
    more = "" if k.n_bad_tiles <= len(k.bad_tiles) else ", ..."
    return [f"  errors in {k.n_bad_tiles} of {k.n_tiles} {t}x{t} tiles of C: {listed}{more}"]


#: what a wrong timed output matched (records.outcome.RETURNED), as its sentence says it
_RETURNED = {
    "previous round": "returned the previous round's result",
    "same buffers": "returned an earlier result of the same buffers (a cache keyed by their addresses?)",
    "as verified": "returned the result for the inputs as verified (a result kept from verification?)",
    "unwritten": "left C unwritten, as if it remembered an earlier launch",
}


def timed_round(check: TimedCheck) -> str:
    """A checked timed launch that was wrong (docs/verification.md#fresh-inputs-for-timed-launches), in words."""
    what = _RETURNED.get(check.returned, "was wrong")
    return (
        f"correct when verified, wrong when timed: round {check.round} of {check.rounds} {what} "
        f"(each timed launch had inputs of its own{', and was a CUDA graph replay' if check.replayed else ''}; "
        f"{check.checked} timed output(s) checked)"
    )


def _problem(problem: TimingProblem, d: Diagnosis, record: CaseRecord | None) -> str:
    if problem == TimingProblem.WRONG_WHEN_TIMED:
        stats = stats_line(d.kernel) if d.kernel else "no statistics"
        if d.timed is not None:
            return f"{timed_round(d.timed)}: {stats}"
        return (
            "the output of the last timed launch is wrong (the first launch was right: does the kernel "
            f"keep state between launches?): {stats}"
        )
    if problem == TimingProblem.OTHER_STREAM:
        streams = ", ".join(map(str, d.streams[:STREAMS_KEPT])) + (", ..." if len(d.streams) > STREAMS_KEPT else "")
        return (
            f"launched GPU work on CUDA stream(s) {streams} (CUPTI's ids), not on the harness's stream, where it is "
            "waited for and timed: launch on CuPy's current stream, which the harness sets for every Python kernel, "
            "or, in a kernel that declares arrays=\"torch\", on torch's (the harness sets torch's only then: a kernel "
            "that launches through torch or Triton declares it); it is not timed, and not gated"
        )
    if record is None:
        return f"suspicious timing: {problem}"
    if problem == TimingProblem.ABOVE_PEAK:
        return (
            f"suspicious timing: {record.tflops:.1f} TFLOP/s is above this GPU's peak of "
            f"{record.peak_tflops or 0:.1f} TFLOP/s"
        )
    return (
        f"suspicious timing: {1 / record.ratio:.2f}x faster than cuBLAS "
        f"({record.median_s * 1e6:.1f} us vs {record.cublas_median_s * 1e6:.1f} us)"
    )


def _timing(name: str, d: Diagnosis, record: CaseRecord | None, replay: str) -> list[str]:
    """The kernel's own timing problems, then cuBLAS's timed output failing the bound (a calibration error)
    said beside them."""
    problems = [_problem(p, d, record) for p in d.problems if p != TimingProblem.REFERENCE_WRONG]
    if TimingProblem.REFERENCE_WRONG in d.problems:
        problems.append(calibration_text(d))
    problems = problems or ["no timing problem recorded"]
    suspicious = any(p in (TimingProblem.ABOVE_PEAK, TimingProblem.FASTER_THAN_CUBLAS) for p in d.problems)
    hint = ['If this speed is real, say why in the kernel header: expect_fast = "...".'] if suspicious else []
    return [f"{name}: {problems[0]}", *problems[1:], *hint, f"replay: {replay}"]


def headline(name: str, result: CaseResult) -> str:
    """What is wrong with a failed case, in one line (the report page's, for a case without findings)."""
    d = result.diagnosis
    if d is None or d.kind == Verdict.NO_RESULT:
        return result.message or "the worker returned no result"
    if d.kind in (Verdict.WRONG_OUTPUT, Verdict.CALIBRATION):
        return (diagnosis_lines(d) or ["verification failed"])[0]
    return failure_text(name, result, "").splitlines()[0].removeprefix(f"{name}: ")


def failure_text(name: str, result: CaseResult, replay: str) -> str:
    """The whole failure text of a failed case ``name`` (``kernel[id]``), or the one-line reason a calibration error's
    case is skipped with; ``replay``: the command that runs it alone."""
    d = result.diagnosis
    gate = result.timing.gate if result.timing is not None else None
    if d is None and gate is not None and gate.fails:
        assert result.timing is not None
        return gate_failure(result.timing, gate)
    if d is None:
        return f"{name}: {result.message or 'failed'}; replay: {replay}"
    if d.kind == Verdict.CALIBRATION and not result.failed:  # skipped: the reason, on one line
        return f"{name}: {calibration_text(d)}; replay: {replay}"
    if d.kind == Verdict.FAULT:
        return "\n".join(fault_lines(name, d, replay))
    if d.kind in (Verdict.WRONG_OUTPUT, Verdict.CALIBRATION):
        return "\n".join(_wrong_output(name, d, replay))
    if d.kind == Verdict.TIMING:
        return "\n".join(_timing(name, d, result.timing, replay))
    return f"{name}: the worker returned no result; replay: {replay}"
