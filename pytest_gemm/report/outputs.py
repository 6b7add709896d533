"""Where pytest-gemm writes, checked before anything is written, and the summary file written.

A report folder is marked as pytest-gemm's (:data:`MARKER`, written before anything else in it), so that a
folder holding files pytest-gemm did not write (a user's own ``index.html``) is refused instead of
overwritten, unless the user says to write over it. An unmarked folder that holds only what pytest-gemm
writes in a report folder (:func:`foreign_entries`: a report of a version before the marker) is pytest-gemm's
too, and marked when claimed. Each check returns what is wrong in words that name the path (None: nothing
found); the caller names the option that gave the path and answers (the plugin: a usage error as the run
starts; the command: status 2 before it writes). A full disk shows only when written: the summary's write
error names the path and whose it is (the option's, or ``$GITHUB_STEP_SUMMARY``'s).
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..fileio import MAX_BASELINE_BYTES, MAX_RUN_BYTES, RefusedFile, os_reason, read_regular
from ..specs.files import declares_kernels
from .names import slug

__all__ = [
    "GATE_CHART",
    "HEATMAPS",
    "MARKER",
    "PAGE",
    "PCT_CHART",
    "RUN_FILE",
    "STEP_SUMMARY",
    "chart_name",
    "claim_report_folder",
    "folder_problem",
    "foreign_entries",
    "heatmap_name",
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

# What pytest-gemm writes in a report folder (report/folder.py), by name
PAGE = "index.html"  # the page
RUN_FILE = "run.json"  # the run a report folder was drawn from, written beside it by pytest --gemm-report
PCT_CHART = "pct-cublas.png"  # each kernel as % of cuBLAS at one shape
GATE_CHART = "gate.png"  # the gate: each case's change against its baseline
HEATMAPS = "errors"  # the folder of the failed cases' heatmaps
_CHARTS = "tflops-"  # each dtype's throughput chart: this, its dtype, .png
_RUN_KEYS = frozenset({"machine_info", "benchmarks", "datetime", "gemm"})  # runs.saved.run_json's keys
_PNG = b"\x89PNG\r\n\x1a\n"
_DRAWN = b"tEXtSoftware\x00pytest-gemm"  # every picture pytest-gemm draws says so (report/style.py save)
_HEAD = 4096  # bytes of a page or picture read to tell whose it is
_BASELINE_KEYS = frozenset({"schema", "gpu", "entries"})  # a baseline file's keys (baselines/store.py render)


def chart_name(dtype: str) -> str:
    """The throughput chart of ``dtype``, relative to the report folder (``tflops-fp32.png``; :func:`.names.slug`)."""
    return f"{_CHARTS}{slug(dtype)}.png"


def heatmap_name(test: str) -> str:
    """A failed case's heatmap, relative to the report folder: its test's name, and unique per test id
    (:func:`.names.slug`)."""
    return f"{HEATMAPS}/{slug(test.split('::')[-1], of=test)}.png"


def _head(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(_HEAD)


def _drawn(path: Path) -> bool:
    """A picture pytest-gemm drew: a PNG that names pytest-gemm as its software."""
    head = _head(path)
    return head.startswith(_PNG) and _DRAWN in head


def _page(path: Path) -> bool:
    """pytest-gemm's report page (report/html.py: every version's title says so)."""
    return b"<title>pytest-gemm report" in _head(path)


def _run(path: Path) -> bool:
    """A run as pytest-gemm writes it beside a report: JSON of run_json's keys alone (pytest-benchmark's own JSON,
    which has more, is a file the user chose to put there)."""
    try:
        raw = json.loads(read_regular(path, MAX_RUN_BYTES, "a saved run"))
    except (RefusedFile, ValueError, RecursionError):  # too large, not JSON (UnicodeDecodeError is a ValueError), or
        return False  # nested past reading
    return isinstance(raw, dict) and set(raw) <= _RUN_KEYS and isinstance(raw.get("gemm"), dict)


def _ours(path: Path, known: Callable[[str], Callable[[Path], bool] | None]) -> bool:
    """Whether ``path`` is a regular file (never a link) of a name pytest-gemm writes, and reads as it writes it."""
    test = known(path.name)
    try:
        return test is not None and stat.S_ISREG(os.lstat(path).st_mode) and test(path)
    except OSError:
        return False


def _top(name: str) -> Callable[[Path], bool] | None:
    """How to tell the file ``name`` of a report folder's top is pytest-gemm's (None: pytest-gemm writes no such
    file there)."""
    if name in (PCT_CHART, GATE_CHART) or fnmatch.fnmatchcase(name, f"{_CHARTS}*.png"):
        return _drawn
    return {PAGE: _page, RUN_FILE: _run}.get(name)


def _heatmap(name: str) -> Callable[[Path], bool] | None:
    """How to tell a file of the heatmaps' folder is pytest-gemm's: a picture it drew."""
    return _drawn if name.endswith(".png") else None


def foreign_entries(folder: Path) -> list[str]:
    """The entries of ``folder`` that pytest-gemm did not write there, sorted (a folder's name ends in '/'): all but
    its page, run, charts and heatmaps, each read to tell it is pytest-gemm's. Hidden entries (a file manager's
    ``.DS_Store``, the marker) are nobody's. Empty: a report folder of pytest-gemm's. Raises ``OSError`` when the
    folder cannot be listed."""
    foreign = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.name == HEATMAPS and entry.is_dir() and not entry.is_symlink():
            pngs = sorted(p for p in entry.iterdir() if not p.name.startswith("."))
            foreign += [f"{HEATMAPS}/{p.name}" + "/" * p.is_dir() for p in pngs if not _ours(p, _heatmap)]
        elif not _ours(entry, _top):
            foreign.append(entry.name + "/" * entry.is_dir())
    return foreign


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
        return f"cannot create a file in {shown(existing)} ({os_reason(exc, existing / '.probe', shown)})"
    return None


def output_file_problem(path: Path, *, folders: bool = True) -> str | None:
    """Why a file cannot be written at ``path``: a folder there, a file that cannot be opened for writing (nothing
    in it changes), or a folder it would go in that cannot hold it: with ``folders`` (the writer creates the folders
    it needs), the nearest one that exists; without, its own folder, which must exist."""
    if path.is_dir():
        return f"{path} is a folder, not a file"
    if os.path.lexists(path):
        try:  # opened to append, without blocking (a FIFO without a reader is refused, not waited for)
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        except OSError as exc:
            return f"{path} cannot be written ({os_reason(exc, path)})"
        kept = _never_written_over(path)
        return f"{path} is {kept}, which pytest-gemm never writes over; name another file" if kept else None
    if not folders and not path.parent.is_dir():
        return folder_problem(path.parent, write=False) or f"no such folder: {path.parent} (none is created for it)"
    return folder_problem(path.parent)


def _never_written_over(path: Path) -> str | None:
    """What an existing file is that no output may replace (a kernel file, a baseline file), or None."""
    if declares_kernels(path, test_module=False):  # (declaring kernels beside tests still makes it one)
        return "a kernel file"
    try:
        if path.suffix != ".json":
            return None
        data = json.loads(read_regular(path, MAX_BASELINE_BYTES, "a baseline file"))
    except (OSError, RefusedFile, ValueError, RecursionError):  # no such file, not a regular one or too large
        return None
    return "a baseline file" if isinstance(data, dict) and data.keys() >= _BASELINE_KEYS else None


def _summary_files(path: Path, label: str) -> list[tuple[Path, str, bool]]:
    """Where the markdown summary goes, the one rule of its check and its write: (the file, whose it is, whether it
    is pytest-gemm's own): the summary file (given by the option ``label``), written whole, its folders created; and
    ``$GITHUB_STEP_SUMMARY`` when set, a file the CI provides, appended to, in a folder that must exist."""
    step = os.environ.get(STEP_SUMMARY)
    return [(path, label, True), *([(Path(step), f"${STEP_SUMMARY}", False)] if step else [])]


def summary_problems(path: Path, label: str) -> list[str]:
    """The problems of the summary file ``path`` (given by the option ``label``) and of ``$GITHUB_STEP_SUMMARY``
    when that is set (the summary is appended to it), each naming whose path it is."""
    problems = []
    for file, whose, own in _summary_files(path, label):
        problem = output_file_problem(file, folders=own)
        if problem:
            problems.append(f"{whose}{'' if own else ' (where the summary is appended)'}: {problem}")
    return problems


def write_summary(path: Path, text: str, label: str) -> str | None:
    """Write the markdown summary to ``path`` (given by the option ``label``) and append it to
    ``$GITHUB_STEP_SUMMARY`` when that is set; what went wrong, naming the path and whose it is (None: written)."""
    for file, whose, own in _summary_files(path, label):
        try:
            if own:
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(text, encoding="utf-8")
            else:
                with open(file, "a", encoding="utf-8") as handle:
                    handle.write(text)
        except OSError as exc:
            return f"cannot {'write' if own else 'append'} the summary to {file} ({whose}): {os_reason(exc, file)}"
    return None


def report_folder_problem(
    folder: Path, *, overwrite: bool, switch: str, shown: Callable[[Path], str] = str
) -> str | None:
    """Why pytest-gemm may not write a report into ``folder``: not a folder, one that cannot be written, or (unless
    ``overwrite``) one that holds files pytest-gemm did not write (:func:`foreign_entries`) and not :data:`MARKER`;
    ``switch`` is the option that allows that."""
    if folder.is_dir() and not overwrite and not (folder / MARKER).is_file():
        try:
            names = foreign_entries(folder)
        except OSError as exc:
            return f"cannot look in {shown(folder)} ({os_reason(exc, folder, shown)})"
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
        return f"cannot write in {shown(folder)} ({os_reason(exc, folder / MARKER, shown)})"
    return None
