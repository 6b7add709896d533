"""The text a kernel author reads when a case fails: wrong results, or what went wrong while running it."""

from __future__ import annotations

from ..records.outcome import PHASES, ErrorStats, Failure, Verification
from ..records.verdicts import FailureKind

__all__ = ["diagnosis", "failure_message", "fault_message", "stats_line"]

MAX_OUTPUT_LINES = 20  # lines of the worker's output shown with a failure


LOW_PRECISION = 1e-2  # a normwise error under 1% means roughly right values: lost precision, not wrong ones


def _x(ratio: float) -> str:
    return "inf" if ratio == float("inf") else f"{ratio:.3g}x"


def stats_line(stats: ErrorStats) -> str:
    return (
        f"max {_x(stats.max_ratio)}, median {_x(stats.median_ratio)} of the per-element bound; "
        f"normwise {stats.norm_error:.3g} = {_x(stats.norm_ratio)} of the tolerance {stats.norm_tol:.3g}"
    )


def diagnosis(result: Verification) -> list[str]:
    """One sentence per thing that is wrong, most telling first."""
    k = result.kernel
    lines = []
    for fault in result.faults:
        lines.append(f"{fault.kind}: {fault.count} element(s) changed in {fault.where}")
    if k.unwritten:
        if result.beta == 0:
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
            if result.beta == 0
            else ""
        )
        lines.append(f"non-finite output: {k.nonfinite - k.unwritten} element(s) are NaN or Inf{hint}")
    low_precision = k.norm_tol < k.norm_error < LOW_PRECISION
    if low_precision:
        lines.append(
            f"precision too low: normwise error {k.norm_error:.3g} is {_x(k.norm_ratio)} the tolerance "
            f"{k.norm_tol:.3g} while no element is grossly wrong: the product is computed in lower precision "
            "than the dtype promises (e.g. fp16-rounded operands or TF32)"
        )
    if k.bad:
        lines.append(
            f"wrong values: {k.bad} of {k.total} elements ({100.0 * k.bad / k.total:.3g}%) exceed the "
            f"per-element bound, worst {_x(k.max_ratio)} of it"
        )
    return lines


def failure_message(result: Verification, *, dtype: str, replay: str) -> str:
    k = result.kernel
    m, n, kk = result.shape
    out = [
        f"verification failed for {result.case_id} (M={m}, N={n}, K={kk}, alpha={result.alpha:g}, beta={result.beta:g})"
    ]
    out += [f"  - {line}" for line in diagnosis(result)]
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


def _scalars(shape: tuple[int, int, int], alpha: float, beta: float) -> str:
    m, n, k = shape
    return f"M={m}, N={n}, K={k}, alpha={alpha:g}, beta={beta:g}"


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
    kind = failure.kind
    if kind == FailureKind.CUDA_ERROR:
        head = f"CUDA error while {where} {what}: {failure.message}"
    elif kind == FailureKind.LAUNCH:
        head = f"cannot launch {what}: {failure.message}"
    elif kind == FailureKind.TIMEOUT:
        head = f"{what} {failure.message} while {where}"
    elif kind == FailureKind.WORKER_DIED:
        head = f"the GPU worker died while {where} {what}: {failure.message}"
    elif kind == FailureKind.KERNEL_RAISED:
        head = f"{what}: the Python kernel raised {failure.message}"
    elif kind == FailureKind.INTERNAL:
        head = f"pytest-gemm internal error while {where} {what}: {failure.message}; please report it"
    else:  # the kernel file, the compiler: their messages name the file already
        head = f"{what}: {failure.message}"
    lines = [head, *(f"  {line}" for line in failure.details)]
    if kind == FailureKind.CUDA_ERROR:
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
