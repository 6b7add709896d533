"""The ``pytest-gemm`` command as a test runs it: :func:`cli` calls its ``main`` in this process (a subprocess's start
and imports cost about half a second a call, hundreds of calls in the suite), with what a user's shell gives it: the
working directory, the environment, text streams that escape what they cannot encode. A command that draws (``plot``,
``merge --report``) draws here too: the suite imports what drawing imports before any test (``tests/conftest.py``), so
that no pytester run puts a half-imported matplotlib back in ``sys.modules``. (``plot`` of a run with many error maps
forks processes to draw them, ``report/folder.py``: a test that draws that many from an xdist worker, which has
threads of its own, runs the command in a process.) A test that needs what only a process has (a signal, a umask of
its own, a time limit, a stream that cannot encode) runs ``python -m pytest_gemm.cli`` itself."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from pathlib import Path

__all__ = ["cli"]


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``pytest-gemm ARGS`` run in ``cwd`` with ``env`` added to the environment: its exit status, stdout and stderr,
    as a subprocess would give them (an exception it lets out is printed as Python prints one, status 1)."""
    from pytest_gemm.cli import main

    out, err = _stream(), _stream()
    before, here = dict(os.environ), os.getcwd()
    try:
        os.chdir(cwd)
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors, --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(before)
    return subprocess.CompletedProcess([sys.executable, "-m", "pytest_gemm.cli", *args], code, _text(out), _text(err))
