"""A worker's main loop: start a backend, say hello with its device facts, then answer requests.

The backend is named ``module:attribute`` (the GPU backend by default); a backend whose start
raises an exception with a ``DeviceUnavailable`` name says there is no device, any other exception
that the worker is broken. Neither reaches the user as a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from ..isolation.protocol import receive, send
from ..records.outcome import Failure, Outcome
from ..records.plain import from_plain, to_plain
from ..records.request import Request
from ..records.verdicts import FailureKind

__all__ = ["DEFAULT_BACKEND", "main"]

DEFAULT_BACKEND = "pytest_gemm.worker.backend:GpuBackend"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the pytest process that started it goes (even mid-kernel)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _flush_c_stdio() -> None:
    """Flush C's stdout (a CUDA kernel's printf lands there) so it is on file before the outcome is sent."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _backend(name: str, cubin_cache: str | None) -> Any:
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)(cubin_cache=cubin_cache)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_gemm.worker")
    parser.add_argument("--requests", type=int, required=True, help="file descriptor requests come in on")
    parser.add_argument("--replies", type=int, required=True, help="file descriptor replies go out on")
    parser.add_argument("--backend", default=DEFAULT_BACKEND)
    parser.add_argument("--cubin-cache", default=None)
    args = parser.parse_args(argv)
    _die_with_parent()
    requests, replies = Connection(args.requests, writable=False), Connection(args.replies, readable=False)
    try:
        backend = _backend(args.backend, args.cubin_cache)
        facts = backend.facts()
    except Exception as exc:
        if type(exc).__name__ == "DeviceUnavailable":
            send(replies, "unavailable", str(exc))
        else:
            send(replies, "broken", traceback.format_exception_only(type(exc), exc)[-1].strip())
        return 0
    send(replies, "hello", {"facts": facts, "pid": os.getpid()})
    while True:
        try:
            kind, body = receive(requests)
        except (EOFError, OSError):
            return 0
        if kind != "run":
            return 0
        outcome, last = _answer(backend, body, lambda phase: send(replies, "phase", phase))
        sys.stdout.flush()
        sys.stderr.flush()
        _flush_c_stdio()
        send(replies, "outcome", to_plain(outcome))
        if last:
            return 0


def _answer(backend: Any, body: Any, notify: Any) -> tuple[Outcome, bool]:
    """The backend's outcome for one request; whatever escapes it becomes a failure, never a silent exit.

    The second value says whether this worker must end after answering (a kernel asked to exit).
    """
    try:
        return backend.run(from_plain(Request, body), notify), False
    except (SystemExit, KeyboardInterrupt) as exc:  # raised by a Python kernel: the worker ends, as asked
        message = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return Outcome(failure=Failure(FailureKind.KERNEL_RAISED, message, "verify", replace_worker=True)), True
    except Exception as exc:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]
        details = tuple(line.rstrip() for chunk in lines for line in chunk.splitlines())
        failure = Failure(FailureKind.INTERNAL, f"{type(exc).__name__}: {exc}", "", details, replace_worker=True)
        return Outcome(failure=failure), False
