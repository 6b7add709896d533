"""A worker's main loop: start a backend, say hello with its device facts, then answer requests.

The backend is named ``module:attribute`` (the GPU backend by default); a backend whose start
raises an exception with a ``DeviceUnavailable`` name says there is no device, any other exception
that the worker is broken. Neither reaches the user as a traceback. When the GPU backend finds no
device, the worker asks the driver itself why (no libcuda at all, no GPU, a driver too old), since
CUDA's runtime says "insufficient driver" for all of these.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import importlib.util
import os
import signal
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..isolation.protocol import TIME_PHASE, receive, send
from ..records.outcome import Failure, Outcome, cuda_version, internal_failure
from ..records.plain import from_plain, to_plain
from ..records.request import IMPORTS, Request
from ..records.verdicts import FailureKind
from .compile_watch import CompileWatch

__all__ = ["DEFAULT_BACKEND", "DriverState", "main", "no_device_reason"]

DEFAULT_BACKEND = "pytest_gemm.worker.backend:GpuBackend"
_PR_SET_PDEATHSIG = 1
_LIBCUDA = "libcuda.so.1"


@dataclass(frozen=True)
class DriverState:
    """What the CUDA driver API says, asked directly (no context is created)."""

    load_error: str | None = None  # libcuda could not be loaded
    version: int = 0  # cuDriverGetVersion: 12040 is CUDA 12.4; 0 when unknown
    init_error: str | None = None  # cuInit's error name (CUDA_ERROR_NO_DEVICE...)
    devices: int = 0


def _driver_state() -> DriverState:
    try:
        cuda = ctypes.CDLL(_LIBCUDA)
    except OSError as exc:
        return DriverState(load_error=str(exc))
    version, count, name = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_char_p()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    code = cuda.cuInit(0)
    if code != 0:
        cuda.cuGetErrorName(code, ctypes.byref(name))
        error = name.value.decode() if name.value else f"CUDA error {code}"
        return DriverState(version=version.value, init_error=error)
    cuda.cuDeviceGetCount(ctypes.byref(count))
    return DriverState(version=version.value, devices=count.value)


def no_device_reason(backend_reason: str, driver: DriverState, visible: str | None = None) -> str:
    """Why there is no device, from the driver's side when it knows better than the backend's message."""
    cuda = f"CUDA {cuda_version(driver.version)}" if driver.version else "CUDA version unknown"
    if driver.load_error is not None:
        return f"no NVIDIA driver: {_LIBCUDA} cannot be loaded"
    if driver.init_error == "CUDA_ERROR_STUB_LIBRARY":
        return f"{_LIBCUDA} is the CUDA toolkit's stub library, not an NVIDIA driver"
    if driver.init_error in (None, "CUDA_ERROR_NO_DEVICE") and driver.devices == 0:
        shown = "" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r})"
        return f"the NVIDIA driver ({cuda}) finds no GPU{shown}"
    if driver.init_error is not None:
        return f"the NVIDIA driver ({cuda}) cannot start: {driver.init_error}"
    if "insufficient" in backend_reason.lower():
        return f"the NVIDIA driver supports {cuda}, too old for CuPy's CUDA runtime ({backend_reason})"
    return backend_reason


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the pytest process that started it goes (even mid-kernel)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _flush_c_stdio() -> None:
    """Flush C's stdout (a CUDA kernel's printf lands there) so it is on file before the outcome is sent."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _backend(name: str, cubin_cache: str | None, warmed: bool) -> Any:
    module, _, attribute = name.partition(":")
    extra = {"warmed": True} if warmed else {}  # only to a backend that asked for standby workers
    return getattr(importlib.import_module(module), attribute)(cubin_cache=cubin_cache, **extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_gemm.worker")
    parser.add_argument("--requests", type=int, required=True, help="file descriptor requests come in on")
    parser.add_argument("--replies", type=int, required=True, help="file descriptor replies go out on")
    parser.add_argument("--backend", default=DEFAULT_BACKEND)
    parser.add_argument("--cubin-cache", default=None)
    parser.add_argument(
        "--warmed", action="store_true", help="an earlier worker of this run warmed the caches up (a short warm-up)"
    )
    parser.add_argument(
        "--import", dest="imports", action="append", choices=IMPORTS, default=[], help="a library to import ahead"
    )
    args = parser.parse_args(argv)
    _die_with_parent()
    requests, replies = Connection(args.requests, writable=False), Connection(args.replies, readable=False)
    try:
        backend = _backend(args.backend, args.cubin_cache, args.warmed)
        if args.imports:  # what must come first (CUPTI's clock) set up, before the hello: nothing after it uses the GPU
            getattr(backend, "before_imports", lambda: None)()
        facts = backend.facts()
    except Exception as exc:
        if type(exc).__name__ == "DeviceUnavailable":
            reason = str(exc)
            if args.backend == DEFAULT_BACKEND:
                with contextlib.suppress(Exception):  # the backend's reason is still a reason
                    reason = no_device_reason(reason, _driver_state(), os.environ.get("CUDA_VISIBLE_DEVICES"))
            send(replies, "unavailable", reason)
        else:
            send(replies, "broken", traceback.format_exception_only(type(exc), exc)[-1].strip())
        return 0
    # a backend whose start is costly asks the pool to keep a standby worker started (isolation.workers)
    send(replies, "hello", {"facts": facts, "pid": os.getpid(), "standby": bool(getattr(backend, "standby", False))})
    said = _import_ahead(replies, args.imports) if args.imports else []  # the libraries of IMPORTS the pool knows of
    # The watch thread sends progress too: every message goes out with its lock held.
    watch = CompileWatch(lambda phase: send(replies, "phase", phase)).start()

    def notify(phase: str) -> None:
        with watch.lock:
            first = phase == TIME_PHASE != watch.phase
            watch.enter(phase)
            send(replies, "phase", phase)
            if first:  # the pool says when nothing else of its own uses the GPU (isolation.protocol)
                kind, _ = receive(requests)
                if kind != "go":
                    raise RuntimeError(f"the pytest process sent {kind!r} where it says when to time")

    while True:
        try:
            kind, body = receive(requests)
        except (EOFError, OSError):
            return 0
        if kind == "next":  # the case likely to come next, before this one's request (worker.next_inputs)
            with contextlib.suppress(Exception):
                getattr(backend, "expect_next", lambda request: None)(from_plain(Request, body))
            continue
        if kind != "run":
            return 0
        outcome, last = _answer(backend, body, notify, watch)
        sys.stdout.flush()
        sys.stderr.flush()
        _flush_c_stdio()
        with watch.lock:
            watch.enter("")
            said = _say_imported(replies, said)  # a case that imported one needs no other worker for it
            send(replies, "outcome", to_plain(outcome))
        if last:
            return 0


def _import_ahead(replies: Connection, imports: list[str]) -> list[str]:
    """Import ``imports`` (of IMPORTS) after the hello, on the CPU alone, those installed; then say which this worker
    has (always: the pool waits for the answer before it gives this worker a case). A library that fails to import is
    left to the case that needs it, which says why."""
    for name in imports:
        if importlib.util.find_spec(name) is not None:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    return _say_imported(replies, None)


def _say_imported(replies: Connection, said: list[str] | None) -> list[str]:
    """Tell the pool which of IMPORTS this worker has imported, where that changed since ``said`` (always for None);
    what it now has."""
    held = [name for name in IMPORTS if name in sys.modules]
    if held != said:
        send(replies, "imported", held)
    return held


def _answer(backend: Any, body: Any, notify: Any, watch: CompileWatch) -> tuple[Outcome, bool]:
    """The backend's outcome for one request; whatever escapes it becomes a failure, never a silent exit.

    The second value says whether this worker must end after answering (a kernel asked to exit). CuPy's own
    compiles in a phase get at most the request's compile limit of progress.
    """
    try:
        request = from_plain(Request, body)
        watch.cap = request.compile_timeout
        return backend.run(request, notify), False
    except (SystemExit, KeyboardInterrupt) as exc:  # raised by a Python kernel: the worker ends, as asked
        message = f"{type(exc).__name__}: {exc}".rstrip(": ")
        phase = watch.phase or "verify"  # the phase it was raised in (a Python kernel's setup call, or verification)
        return Outcome(failure=Failure(FailureKind.KERNEL_RAISED, message, phase, replace_worker=True)), True
    except Exception as exc:
        return Outcome(failure=internal_failure(exc, "")), False
