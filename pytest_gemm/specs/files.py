"""Kernel files: read one (``.cu`` with headers, ``.py`` with ``@gemm_kernel``) into specs, and find cases in it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..records.request import Request
from .cases import AlphaBeta, Case
from .pyfile import parse_py_source
from .spec import KernelFileError, KernelSpec, Variant, decode_source, has_header, parse_cu_source

__all__ = [
    "case_from_request",
    "declares_kernels",
    "is_kernel_file",
    "load_specs",
    "shown_path",
    "source_hash",
]


def shown_path(path: Path, root: Path) -> str:
    """``path`` as ids and messages show it: relative to the rootdir when it lies inside it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def is_kernel_file(path: Path) -> bool:
    """Whether pytest-gemm should look inside this file (its headers or decorators decide the rest)."""
    if path.suffix == ".cu":
        return True
    if path.suffix != ".py" or path.name.startswith(("test_", "conftest")):
        return False
    try:
        return "gemm_kernel" in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def declares_kernels(path: Path) -> bool:
    """Whether the file declares at least one kernel (a ``.cu`` header, or ``@gemm_kernel`` in a ``.py`` file)."""
    if not is_kernel_file(path):
        return False
    if path.suffix == ".py":
        return True
    try:
        return has_header(path.read_bytes().decode("utf-8", errors="replace"))
    except OSError:
        return False


def load_specs(path: Path, shown: str) -> list[KernelSpec]:
    """The kernels a file declares; ``shown`` is the path used in ids and messages (relative to the rootdir).

    A ``.cu`` file without a header is no kernel file: it declares nothing, whatever its bytes.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KernelFileError(shown, f"cannot read the file: {exc}") from None
    if path.suffix == ".py":
        try:
            return parse_py_source(shown, data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise KernelFileError(shown, f"cannot read the file: {exc}") from None
    return parse_cu_source(shown, decode_source(shown, data))


def source_hash(path: Path) -> str:
    """SHA-256 of the kernel file's bytes (what a baseline notes to tell a changed kernel)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def case_from_request(request: Request, specs: list[KernelSpec]) -> Case:
    """The case a request names, among the specs of its kernel file (read again by whoever runs it)."""
    spec = next((s for s in specs if s.name == request.kernel), None)
    if spec is None:
        raise KernelFileError(request.shown, f"has no kernel named {request.kernel!r} any more")
    variant = Variant(tuple((name, int(value)) for name, value in request.params))
    if variant not in spec.variants():
        raise KernelFileError(request.shown, f"{spec.name} has no variant {variant.id!r} any more", key="params")
    if request.dtype not in spec.dtypes:
        raise KernelFileError(request.shown, f"{spec.name} no longer declares dtype {request.dtype}", key="dtypes")
    return Case(spec, variant, request.dtype, request.shape, AlphaBeta(request.alpha, request.beta))
