"""What can go wrong in a worker, and how a CUDA error is told apart: sticky (the context is lost) or not."""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable

__all__ = [
    "DeviceUnavailable",
    "KernelCudaError",
    "KernelRaised",
    "LaunchRefused",
    "TooBigForDevice",
    "cuda_error_name",
    "guarded_call",
    "is_launch_error",
    "is_sticky_name",
    "kernel_traceback",
    "library_cuda_error",
    "said_briefly",
]

#: CUDA errors after which a context cannot be used again (driver and runtime spellings, normalised)
_STICKY = {
    "ILLEGALADDRESS",
    "MISALIGNEDADDRESS",
    "ILLEGALINSTRUCTION",
    "HARDWARESTACKERROR",
    "INVALIDPC",
    "INVALIDADDRESSSPACE",
    "LAUNCHFAILED",
    "LAUNCHFAILURE",
    "ASSERT",
    "LAUNCHTIMEOUT",
    "ECCUNCORRECTABLE",
    "CONTEXTISDESTROYED",
}
#: CUDA errors of a launch that was refused: nothing ran, and the context is fine
_LAUNCH = {
    "LAUNCHOUTOFRESOURCES",
    "INVALIDCONFIGURATION",
    "INVALIDVALUE",
    "NOBINARYFORGPU",
    "NOKERNELIMAGEFORDEVICE",
    "INVALIDIMAGE",
    "INVALIDPTX",
    "UNSUPPORTEDPTXVERSION",
}
_NAME = re.compile(r"\b(CUDA_ERROR_[A-Z_]+|cudaError[A-Za-z]+)")


class DeviceUnavailable(RuntimeError):
    """No usable CUDA device (no CuPy, no driver, or no GPU)."""


class LaunchRefused(RuntimeError):
    """A launch that cannot happen: the kernel needs more than the device has. Nothing ran."""

    def __init__(self, message: str, details: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.details = tuple(details)


class TooBigForDevice(RuntimeError):
    """A case whose arrays cannot fit in the device's free memory; found before anything was allocated."""

    def __init__(self, message: str, details: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.details = tuple(details)


class KernelRaised(Exception):
    """A Python kernel raised; ``details`` are the frames of its own file."""

    def __init__(self, message: str, details: list[str]) -> None:
        super().__init__(message)
        self.details = tuple(details)


class KernelCudaError(KernelRaised):
    """A CUDA error that a Python kernel's library raised (torch, Triton): CUDA's fault, as a ``.cu`` kernel's would be,
    not one of the kernel's Python; ``out_of_memory`` when torch ran out of GPU memory."""

    def __init__(self, message: str, details: list[str], out_of_memory: bool = False) -> None:
        super().__init__(message, details)
        self.out_of_memory = out_of_memory


#: how torch and Triton raise CUDA's errors: the exceptions' type names, or the words their messages start with
_LIBRARY_CUDA_TYPES = ("AcceleratorError", "OutOfMemoryError")
_LIBRARY_CUDA_WORDS = re.compile(r"^(CUDA error\b|CUDA out of memory|Triton Error \[CUDA\])")


def library_cuda_error(exc: BaseException, details: list[str]) -> KernelCudaError | None:
    """``exc`` as a :class:`KernelCudaError` where torch or Triton raised it for a CUDA error (else None): its first
    line, with the CUDA error's name where only a later line gives it."""
    text = str(exc)
    name = type(exc).__name__
    if name not in _LIBRARY_CUDA_TYPES and not _LIBRARY_CUDA_WORDS.match(text):
        return None
    first = text.splitlines()[0] if text else ""
    code = cuda_error_name(text)
    shown = f"{name}: {first}" + (f" ({code})" if code and code not in first else "")
    return KernelCudaError(shown, details, out_of_memory=name == "OutOfMemoryError" or "out of memory" in first)


def said_briefly(exc: BaseException, most: int = 200) -> str:
    """An exception as a note keeps it: its type and the first line of its message, at most ``most`` characters."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:most]


def cuda_error_name(message: str) -> str:
    """The error's name in ``message`` (``CUDA_ERROR_ILLEGAL_ADDRESS``, ``cudaErrorIllegalAddress``), or ''."""
    match = _NAME.search(message)
    return match.group(1) if match else ""


def _normal(name: str) -> str:
    return re.sub(r"[^A-Z]", "", name.upper()).removeprefix("CUDAERROR")


def is_sticky_name(name: str) -> bool:
    return _normal(name) in _STICKY


def is_launch_error(name: str) -> bool:
    return _normal(name) in _LAUNCH


def kernel_traceback(exc: BaseException, path: str, shown: str) -> list[str]:
    """The frames of ``exc`` that lie in the kernel file, as 'shown:line in function: source' lines."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    return [f"{shown}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]


def guarded_call(fn: Callable[[], object], path: str, shown: str, passthrough: tuple[type, ...]) -> None:
    """Call a Python kernel; its own exceptions become :class:`KernelRaised` (CUDA errors pass through)."""
    try:
        fn()
    except passthrough:
        raise
    except Exception as exc:
        details = kernel_traceback(exc, path, shown)
        raise library_cuda_error(exc, details) or KernelRaised(f"{type(exc).__name__}: {exc}", details) from None
