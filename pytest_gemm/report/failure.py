"""The text a kernel author reads when a case fails: wrong results, or what went wrong while running it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..judge.accuracy import NORM_MIN_ELEMENTS
from ..records.outcome import PHASES, ErrorSource, ErrorStats, Failure, Verification
from ..records.verdicts import ErrorCause, FailureKind

__all__ = ["declarations", "diagnosis", "failure_message", "fault_message", "stats_line"]

MAX_OUTPUT_LINES = 20  # lines of the worker's output shown with a failure


LOW_PRECISION = 1e-2  # a normwise error under 1% means roughly right values: lost precision, not wrong ones


def _x(ratio: float) -> str:
    return "inf" if ratio == float("inf") else f"{ratio:.3g}x"


def stats_line(stats: ErrorStats) -> str:
    normwise = f"normwise {stats.norm_error:.3g} = {_x(stats.norm_ratio)} of the tolerance {stats.norm_tol:.3g}"
    if math.isinf(stats.norm_tol):
        small = f"C has {stats.total} element{'s' if stats.total != 1 else ''}, under {NORM_MIN_ELEMENTS}"
        normwise = f"normwise {stats.norm_error:.3g}, not judged ({small})"
    return f"max {_x(stats.max_ratio)}, median {_x(stats.median_ratio)} of the per-element bound; {normwise}"


def _where(source: ErrorSource) -> str:
    (r0, r1), (c0, c1) = source.rows, source.cols
    tiles = f"{source.n_tiles} 32x32 tile{'s' if source.n_tiles != 1 else ''}"
    return f"rows {r0}-{r1}, columns {c0}-{c1}, {tiles}"


def _source_line(source: ErrorSource, poisoned: bool) -> str:
    """One sentence for one traced source of wrong elements, with where they sit in C."""
    cause, n, where = ErrorCause(source.cause), source.count, _where(source)
    if cause in (ErrorCause.GUARD_A, ErrorCause.GUARD_B, ErrorCause.GUARD_C):
        operand = source.region.split()[-1]
        side = {
            "before": f"reads before the start of {operand}",
            "after": f"reads past the end of {operand}",
            "padding": f"reads the row padding of {operand} (between the row's end and ld{operand.lower()})",
        }[next(word for word in ("before", "after", "padding") if word in source.region)]
        return f"{side}: {n} element(s) of C are NaN from {source.region}, which holds NaN ({where})"
    if cause is ErrorCause.READ_C:
        return (
            f"reads C although beta = 0 (BLAS: C is output-only when beta = 0): {n} element(s) are NaN while C "
            f"holds NaN, and right once C holds finite data ({where}); a kernel meant to read C whatever beta is "
            "declares always_reads_c = true in its header"
        )
    if cause is ErrorCause.UNWRITTEN:
        held = "the NaN poison" if poisoned else "their prior value"
        return f"unwritten output: {n} element(s) of C still hold {held}: never written ({where})"
    if cause is ErrorCause.ARITHMETIC:
        return (
            f"NaN or Inf from arithmetic: {n} element(s) that stay non-finite with finite data in C and every guard "
            f"region of A, B and C zeroed ({where})"
        )
    raise ValueError(f"no sentence for {cause}")


def _normwise_line(k: ErrorStats) -> str | None:
    """The normwise test's own bullet: always when it alone failed, and for a lower precision."""
    if k.norm_error <= k.norm_tol:
        return None
    only = "only the normwise test failed, every element is within its bound: " if k.bad == 0 else ""
    if k.norm_error < LOW_PRECISION:
        return (
            f"precision too low: {only}normwise error {k.norm_error:.3g} is {_x(k.norm_ratio)} the tolerance "
            f"{k.norm_tol:.3g} while no element is grossly wrong: the product is computed in lower precision "
            "than the dtype promises (e.g. fp16-rounded operands or TF32)"
        )
    if k.bad == 0:
        return (
            f"{only}normwise error {k.norm_error:.3g} is {_x(k.norm_ratio)} the tolerance {k.norm_tol:.3g}: "
            "small errors in every element add up over C (e.g. a misapplied alpha or beta at large K)"
        )
    return None


def diagnosis(result: Verification, *, always_reads_c: bool = False) -> list[str]:
    """One sentence per thing that is wrong, most telling first."""
    k = result.kernel
    poisoned = result.beta == 0 and not always_reads_c  # C held the NaN poison before the launch
    lines = [f"{fault.kind}: {fault.count} element(s) changed in {fault.where}" for fault in result.faults]
    if result.sources:  # traced by the worker: one line per source
        for source in result.sources:
            if source.cause == ErrorCause.OVER_BOUND:
                lines.append(
                    f"wrong values: {source.count} of {k.total} elements ({100.0 * source.count / k.total:.3g}%) "
                    f"exceed the per-element bound, worst {_x(k.max_ratio)} of it ({_where(source)})"
                )
            else:
                lines.append(_source_line(source, poisoned))
    else:
        if k.unwritten:
            if poisoned:
                lines.append(
                    f"unwritten output: {k.unwritten} element(s) of C still hold the NaN poison "
                    "(never written, or C was read although beta = 0 and BLAS says it must not be)"
                )
            else:
                lines.append(f"unwritten output: {k.unwritten} element(s) of C still hold their prior value")
        if k.nonfinite > k.unwritten:
            hint = (
                " (C held NaN before the launch and beta = 0: a kernel that reads C anyway, e.g. beta * C, "
                "gives NaN; BLAS says C must not be read when beta = 0)"
                if poisoned
                else ""
            )
            lines.append(f"non-finite output: {k.nonfinite - k.unwritten} element(s) are NaN or Inf{hint}")
    normwise = _normwise_line(k)
    if normwise:
        lines.append(normwise)
    if k.bad and not result.sources:
        lines.append(
            f"wrong values: {k.bad} of {k.total} elements ({100.0 * k.bad / k.total:.3g}%) exceed the "
            f"per-element bound, worst {_x(k.max_ratio)} of it"
        )
    return lines


def declarations(*, always_reads_c: bool = False, nondeterministic: str = "") -> list[str]:
    """What a kernel's header declares that changes how it is checked, in words."""
    lines = []
    if always_reads_c:
        lines.append("always_reads_c = true: C holds finite prior data in its beta = 0 cases too")
    if nondeterministic:
        lines.append(f"nondeterministic ({nondeterministic}): its launches are not compared bit for bit")
    return lines


def _scalars(shape: tuple[int, int, int], alpha: float, beta: float) -> str:
    m, n, k = shape
    return f"M={m}, N={n}, K={k}, alpha={alpha:g}, beta={beta:g}"


def failure_message(
    result: Verification,
    *,
    dtype: str,
    replay: str,
    always_reads_c: bool = False,
    nondeterministic: str = "",
    lines: Sequence[str] | None = None,
) -> str:
    """The text of a failed verification; ``lines``: its :func:`diagnosis`, when the caller has it already."""
    k = result.kernel
    m, n, _ = result.shape
    if lines is None:
        lines = diagnosis(result, always_reads_c=always_reads_c)
    out = [f"verification failed for {result.case_id} ({_scalars(result.shape, result.alpha, result.beta)})"]
    out += [f"  - {line}" for line in lines]
    out += [
        f"  declared in the header: {line}"
        for line in declarations(always_reads_c=always_reads_c, nondeterministic=nondeterministic)
    ]
    out.append(f"  kernel: {stats_line(k)}")
    if k.n_bad_tiles:
        t = k.tile
        listed = ", ".join(
            f"rows {r * t}-{min((r + 1) * t, m) - 1} x cols {c * t}-{min((c + 1) * t, n) - 1}" for r, c in k.bad_tiles
        )
        if k.n_bad_tiles == k.n_tiles:
            out.append(f"  errors in all {k.n_tiles} {t}x{t} tiles of C")
        else:
            more = "" if k.n_bad_tiles <= len(k.bad_tiles) else ", ..."
            out.append(f"  errors in {k.n_bad_tiles} of {k.n_tiles} {t}x{t} tiles of C: {listed}{more}")
    if k.bad:
        out.append("  worst elements (row, col): got, expected, error/bound")
        out += [f"    ({r}, {c}): {g!r}, {e!r}, {_x(ratio)}" for r, c, g, e, ratio in k.worst]
    if result.peer is not None:
        out.append(f"  cuBLAS {dtype} (peer): {stats_line(result.peer)}")
    out.append(f"  seed {result.seed} (this case's data); replay: {replay}")
    return "\n".join(out)


def fault_message(
    failure: Failure,
    *,
    case: str,
    shape: tuple[int, int, int],
    alpha: float,
    beta: float,
    replay: str,
    output: str = "",
) -> str:
    """What went wrong while a worker ran a case (a crash, a refused launch, a hang, a dead worker, ...)."""
    where = PHASES.get(failure.phase, failure.phase or "running it")
    what = f"{case} ({_scalars(shape, alpha, beta)})"
    before = f"{where} for" if failure.phase == "start" else where  # the phase said before the case
    kind = failure.kind
    if kind == FailureKind.CUDA_ERROR:
        head = f"CUDA error while {before} {what}: {failure.message}"
    elif kind == FailureKind.LAUNCH:
        head = f"cannot launch {what}: {failure.message}"
    elif kind == FailureKind.TIMEOUT:
        head = f"{what} {failure.message} while {where}"
    elif kind == FailureKind.WORKER_DIED:
        head = f"the GPU worker died while {before} {what}: {failure.message}"
    elif kind == FailureKind.KERNEL_RAISED:
        head = f"{what}: the Python kernel raised {failure.message}"
    elif kind == FailureKind.INTERNAL:
        head = f"pytest-gemm internal error while {before} {what}: {failure.message}; please report it"
    else:  # the kernel file, the compiler: their messages name the file already
        head = f"{what}: {failure.message}"
    lines = [head, *(f"  {line}" for line in failure.details)]
    if kind == FailureKind.CUDA_ERROR and failure.phase != "start":
        lines.append(
            "  the CUDA context was lost: the worker that ran this case was replaced, and the run goes on in a new one"
            if failure.replace_worker
            else "  the worker's CUDA context survived this error, and the run goes on in it"
        )
    shown = [line for line in output.splitlines() if line.strip()]
    if shown:
        more = len(shown) - MAX_OUTPUT_LINES
        lines.append(
            "  the worker printed:" + (f" (last {MAX_OUTPUT_LINES} of {len(shown)} lines)" if more > 0 else "")
        )
        lines += [f"    {line}" for line in shown[-MAX_OUTPUT_LINES:]]
    lines.append(f"  replay: {replay}")
    return "\n".join(lines)
