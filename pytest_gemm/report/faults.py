"""The text of a fault: what went wrong while a worker ran a case (a crash, a refused launch, a hang, a dead worker,
a kernel file's code that changed the worker), as :mod:`.failure` shows it."""

from __future__ import annotations

from ..records.diagnosis import Diagnosis
from ..records.outcome import PHASES, Failure
from ..records.shapes import Shape
from ..records.verdicts import FailureKind

__all__ = ["case_scalars", "fault_lines"]


def case_scalars(shape: Shape, alpha: float, beta: float) -> str:
    """A case's sizes and scalars, as a failure's first line names them."""
    batch = f", batch={shape.batch}" if shape.batch != 1 else ""
    return f"M={shape.M}, N={shape.N}, K={shape.K}{batch}, alpha={alpha:g}, beta={beta:g}"


def fault_lines(name: str, d: Diagnosis, replay: str) -> list[str]:
    """What went wrong while a worker ran a case (a crash, a refused launch, a hang, a dead worker, ...)."""
    failure = d.failure or Failure(FailureKind.INTERNAL, "no failure recorded")
    where = PHASES.get(failure.phase, failure.phase or "running it")
    what = f"{name} ({case_scalars(d.shape, d.alpha, d.beta)})"
    before = f"{where} for" if failure.phase == "start" else where  # the phase said before the case
    unused = f"{failure.message}; nothing measured in that worker for it is used, and the worker was replaced"
    heads = {
        FailureKind.CUDA_ERROR: f"CUDA error while {before} {what}: {failure.message}",
        FailureKind.LAUNCH: f"cannot launch {what}: {failure.message}",
        FailureKind.TOO_BIG: f"{what} does not fit in GPU memory: it {failure.message}",
        FailureKind.TIMEOUT: f"{what} {failure.message} while {where}",
        FailureKind.WORKER_DIED: f"the GPU worker died while {before} {what}: {failure.message}",
        FailureKind.KERNEL_RAISED: f"{what}: the Python kernel raised {failure.message}",
        FailureKind.HARNESS_CHANGED: f"{what}: its file's code changed pytest-gemm's worker while {where}: {unused}",
        FailureKind.THREAD_LEFT: f"{what}: its file's code left a thread running while {where}: {unused}",
        FailureKind.INTERNAL: f"pytest-gemm internal error while {before} {what}: {failure.message}; please report it",
    }
    # the kernel file, the compiler: their messages name the file already
    lines = [heads.get(failure.kind, f"{what}: {failure.message}"), *(f"  {line}" for line in failure.details)]
    if failure.kind == FailureKind.CUDA_ERROR and failure.phase != "start":
        lines.append(
            "  the CUDA context was lost: the worker that ran this case was replaced, and the run goes on in a new one"
            if failure.replace_worker
            else "  the worker's CUDA context survived this error, and the run goes on in it"
        )
    shown = d.output.splitlines()
    if shown:
        lines.append("  the worker printed:")
        lines += [f"    {line}" for line in shown]
    lines.append(f"  replay: {replay}")
    return lines
