"""compute-sanitizer from the pytest process: find it, run one case under one of its tools, read its report.

The case runs in its own process (``python -m pytest_gemm.worker.sanitize`` under the tool), never in a
GPU worker: the tools slow every launch down and need CuPy's memory pool off. The report goes to a log
file, which :func:`read_report` turns into the error count and the first report's lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..records.plain import to_plain
from ..records.request import Request

__all__ = ["SanitizerRun", "find_sanitizer", "read_report", "run_tool"]

_PREFIX = "========= "
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazard")
MAX_LINES = 14  # lines of the first report shown with a failure


def find_sanitizer() -> str | None:
    """The compute-sanitizer executable: on PATH, or in the CUDA toolkit ($CUDA_HOME, /usr/local/cuda)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "compute-sanitizer").is_file():
            return str(Path(root) / "bin" / "compute-sanitizer")
    return None


@dataclass(frozen=True)
class SanitizerRun:
    """What one tool said about one case."""

    tool: str
    errors: int | None  # the tool's error count (hazards for racecheck); None when it printed no summary
    first: tuple[str, ...]  # the first report's lines, prefix removed
    launched: bool  # the case's launch ran (False: it could not be loaded, compiled or launched)
    output: str  # what the case's process printed


def _unprefixed(line: str) -> str:
    """A log line without the tool's ``=========`` prefix (a bare prefix is a blank line)."""
    if line == _PREFIX.rstrip():
        return ""
    return line[len(_PREFIX) :] if line.startswith(_PREFIX) else line


def read_report(tool: str, log: str) -> tuple[int | None, tuple[str, ...]]:
    """The error count and the first report (its lines, without the ``=========`` prefix) of a tool's log."""
    lines = [_unprefixed(line.rstrip()) for line in log.splitlines()]
    errors = None
    for line in lines:
        match = _SUMMARY.search(line) or (_RACE_SUMMARY.search(line) if tool == "racecheck" else None)
        if match:
            errors = max(errors or 0, int(match.group(1)))
    first: list[str] = []
    for line in lines:
        if line.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY")):
            if first:
                break
            continue
        if not line.strip():
            if first:
                break
            continue
        first.append(line)
        if len(first) >= MAX_LINES:
            break
    return errors, tuple(first)


def run_tool(
    sanitizer: str, tool: str, request: Request, kernel: str, timeout: float, pin: str | None = None
) -> SanitizerRun:
    """Run ``request``'s case once under ``tool``, checking only kernels whose name contains ``kernel``.

    Raises subprocess.TimeoutExpired when it takes longer than ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory(prefix="pytest-gemm-sanitize-") as folder:
        log = Path(folder) / f"{tool}.log"
        options = ["--tool", tool, "--log-file", str(log), "--print-limit", "20", "--kernel-name", f"kns={kernel}"]
        argv = [sanitizer, *options, sys.executable, "-m", "pytest_gemm.worker.sanitize"]
        proc = subprocess.run(
            argv,
            input=json.dumps(to_plain(request)),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **({"CUDA_VISIBLE_DEVICES": pin} if pin else {})},
        )
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    errors, first = read_report(tool, text or proc.stdout)
    output = (proc.stdout + proc.stderr).strip()
    return SanitizerRun(
        tool=tool,
        errors=errors,
        first=first,
        launched="launched" in proc.stdout.splitlines(),
        output=output,
    )
