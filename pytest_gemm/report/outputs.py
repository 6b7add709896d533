"""Where pytest-gemm writes, checked before anything is written, and the summary file written.

A report folder is marked as pytest-gemm's (:data:`MARKER`, written before anything else in it), so that a
folder holding files pytest-gemm did not write (a user's own ``index.html``) is refused instead of
overwritten, unless the user says to write over it. Each check returns what is wrong in words that name
the path (None: nothing found); the caller names the option that gave the path and answers (the plugin: a
usage error as the run starts; the command: status 2 before it writes). A full disk shows only when
written: the summary's write error names the path and whose it is (the option's, or
``$GITHUB_STEP_SUMMARY``'s).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MARKER",
    "STEP_SUMMARY",
    "claim_report_folder",
    "folder_problem",
    "mark_report_folder",
    "output_file_problem",
    "report_folder_problem",
    "summary_problems",
    "write_summary",
]

#: the file that marks a report folder as pytest-gemm's: such a folder may be written again
MARKER = ".pytest-gemm-report"
_MARKER_TEXT = "pytest-gemm writes this folder (a report: index.html, pictures, run.json) and may write it again.\n"
#: the environment variable naming GitHub Actions' step summary, to which the markdown summary is appended
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
_LISTED = 3  # files named when a folder is refused


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def folder_problem(folder: Path, *, write: bool = True, shown: Callable[[Path], str] = str) -> str | None:
    """Why ``folder`` cannot hold files: a file in its place or in the place of a folder above it, or (``write``)
    no file can be created in it or, when it is missing, in the nearest folder above it that exists. ``shown``:
    how the message shows a path."""
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{shown(existing)} is {'a file, not' if existing.is_file() else 'not'} a folder"
    if not write:
        return None
    try:  # a probe, removed at once: permissions alone do not tell (root, read-only file systems, /proc)
        fd, probe = tempfile.mkstemp(prefix=".pytest-gemm-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot create a file in {shown(existing)} ({_reason(exc)})"
    return None


def output_file_problem(path: Path) -> str | None:
    """Why a file cannot be written at ``path``: a folder there, a file that cannot be opened for writing (nothing
    in it changes), or a folder it would go in that cannot hold it."""
    if path.is_dir():
        return f"{path} is a folder, not a file"
    if os.path.lexists(path):
        try:  # opened to append, without blocking (a FIFO without a reader is refused, not waited for)
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        except OSError as exc:
            return f"{path} cannot be written ({_reason(exc)})"
        return None
    return folder_problem(path.parent)


def summary_problems(path: Path, label: str) -> list[str]:
    """The problems of the summary file ``path`` (given by the option ``label``) and of ``$GITHUB_STEP_SUMMARY``
    when that is set (the summary is appended to it), each naming whose path it is."""
    problems = []
    problem = output_file_problem(path)
    if problem:
        problems.append(f"{label}: {problem}")
    step = os.environ.get(STEP_SUMMARY)
    problem = output_file_problem(Path(step)) if step else None
    if problem:
        problems.append(f"${STEP_SUMMARY} (where the summary is appended): {problem}")
    return problems


def write_summary(path: Path, text: str, label: str) -> str | None:
    """Write the markdown summary to ``path`` (given by the option ``label``) and append it to
    ``$GITHUB_STEP_SUMMARY`` when that is set; what went wrong, naming the path and whose it is (None: written)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        why = folder_problem(path.parent, write=False) or _reason(exc)
        return f"cannot write the summary to {path} ({label}): {why}"
    step = os.environ.get(STEP_SUMMARY)
    if step:
        try:
            with open(step, "a", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            return f"cannot append the summary to {step} (${STEP_SUMMARY}): {_reason(exc)}"
    return None


def report_folder_problem(
    folder: Path, *, overwrite: bool, switch: str, shown: Callable[[Path], str] = str
) -> str | None:
    """Why pytest-gemm may not write a report into ``folder``: not a folder, one that cannot be written, or (unless
    ``overwrite``) one that holds files but not :data:`MARKER`; ``switch`` is the option that allows that."""
    if folder.is_dir() and not overwrite and not (folder / MARKER).is_file():
        names = sorted(p.name + "/" * p.is_dir() for p in folder.iterdir())
        if names:
            listed = ", ".join(names[:_LISTED]) + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")
            return (
                f"{shown(folder)} holds files pytest-gemm did not write ({listed}); name a new or empty folder, or "
                f"pass {switch} to write the report over them"
            )
    return folder_problem(folder, shown=shown)


def mark_report_folder(folder: Path) -> None:
    """Create ``folder`` if needed and mark it as pytest-gemm's (before anything else is written in it)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.is_file():
        marker.write_text(_MARKER_TEXT, encoding="utf-8")


def claim_report_folder(
    folder: Path, *, overwrite: bool, switch: str, shown: Callable[[Path], str] = str
) -> str | None:
    """Check ``folder`` (:func:`report_folder_problem`), then create and mark it; what is wrong, or None."""
    problem = report_folder_problem(folder, overwrite=overwrite, switch=switch, shown=shown)
    if problem:
        return problem
    try:
        mark_report_folder(folder)
    except OSError as exc:
        return f"cannot write in {shown(folder)} ({folder_problem(folder, write=False, shown=shown) or _reason(exc)})"
    return None
