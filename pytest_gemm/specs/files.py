"""Kernel files: read one (``.cu`` with headers, ``.py`` with ``@gemm_kernel``) into specs, and find cases in it."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from ..records.request import Request
from .cases import AlphaBeta, Case
from .pyfile import PyFacts, parse_py_source, py_facts
from .source import decode_cu, decode_py, file_problem, has_header, read_kernel_bytes
from .spec import KernelFileError, KernelSpec, Variant, parse_cu_source

__all__ = [
    "case_from_request",
    "declares_kernels",
    "is_kernel_file",
    "load_specs",
    "mentions_without_declaring",
    "named_like_kernel_file",
    "read_specs",
    "shown_path",
    "source_hash",
]


def shown_path(path: Path, root: Path) -> str:
    """``path`` as ids and messages show it: relative to the rootdir when it lies inside it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _is_test_module_name(path: Path) -> bool:
    return path.name.startswith("test_")


def named_like_kernel_file(path: Path) -> bool:
    """Whether the name alone makes ``path`` a kernel file when it cannot be read (a FIFO, a device, too large):
    a ``.cu`` file, or a ``.py`` file that is neither a test module nor a conftest."""
    if path.suffix == ".cu":
        return True
    return path.suffix == ".py" and not path.name.startswith("conftest") and not _is_test_module_name(path)


@functools.lru_cache(maxsize=4096)
def _facts(path: str, _stamp: tuple[int, ...]) -> PyFacts | None:
    try:
        data = read_kernel_bytes(Path(path), path)
    except KernelFileError:
        return None
    # leniently decoded: a file saved as UTF-16 is still seen to declare kernels (its collection says why
    # Python cannot import it)
    return py_facts(decode_cu(path, data, strict=False))


def _py_facts(path: Path) -> PyFacts | None:
    """A ``.py`` file's :class:`PyFacts`, read once per version of the file; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if file_problem(path) is not None:
        return None
    return _facts(str(path), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))


def is_kernel_file(path: Path) -> bool:
    """Whether pytest-gemm collects this file (its headers or decorators decide the rest): every ``.cu`` file;
    a ``.py`` file whose syntax tree holds a ``gemm_kernel`` decorator anywhere (a misplaced one is an error to
    show), or that cannot be read at all (the collection says why). A ``test_*.py`` file is one only when it
    declares kernels and no tests: a test module that uses or mentions gemm_kernel stays a test module."""
    if path.suffix == ".cu":
        return True
    if path.suffix != ".py" or path.name.startswith("conftest"):
        return False
    facts = _py_facts(path)
    if _is_test_module_name(path):
        return facts is not None and facts.declares and not facts.test_module
    if facts is None:
        return named_like_kernel_file(path)
    return facts.declares or (facts.mentions and not facts.parses)


def declares_kernels(path: Path) -> bool:
    """Whether the file declares at least one kernel (a ``.cu`` header, or ``@gemm_kernel`` in a ``.py`` file).

    For the hints: a file that is not regular, or too large, is skipped (False), never read.
    """
    if file_problem(path) is not None or not is_kernel_file(path):
        return False
    if path.suffix == ".py":
        facts = _py_facts(path)
        return facts is not None and facts.declares
    try:
        return has_header(decode_cu(path, read_kernel_bytes(path, str(path)), strict=False))
    except KernelFileError:
        return False


def mentions_without_declaring(path: Path) -> bool:
    """Whether a ``.py`` file (not a test module) names gemm_kernel without declaring a kernel with it."""
    if path.suffix != ".py" or not named_like_kernel_file(path):
        return False
    facts = _py_facts(path)
    return facts is not None and facts.mentions and facts.parses and not facts.declares


def read_specs(path: Path, shown: str) -> tuple[list[KernelSpec], str]:
    """The kernels a file declares and the SHA-256 of the bytes they were read from; ``shown`` is the path used
    in ids and messages (relative to the rootdir).

    A ``.cu`` file without a header is no kernel file: it declares nothing, whatever its bytes.
    """
    data = read_kernel_bytes(path, shown)
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".py":
        return parse_py_source(shown, decode_py(shown, data)), digest
    return parse_cu_source(shown, decode_cu(shown, data)), digest


def load_specs(path: Path, shown: str) -> list[KernelSpec]:
    """The kernels a file declares (:func:`read_specs` without the hash)."""
    return read_specs(path, shown)[0]


def source_hash(path: Path) -> str:
    """SHA-256 of the kernel file's bytes (what a baseline notes to tell a changed kernel)."""
    return hashlib.sha256(read_kernel_bytes(path, str(path))).hexdigest()


def case_from_request(request: Request, specs: list[KernelSpec]) -> Case:
    """The case a request names, among the specs of its kernel file (read again by whoever runs it)."""
    spec = next((s for s in specs if s.name == request.kernel), None)
    if spec is None:
        raise KernelFileError(request.shown, f"has no kernel named {request.kernel!r} any more")
    variant = Variant(tuple((name, int(value)) for name, value in request.params))
    declared = [(name, set(values)) for name, values in spec.params]  # not every variant: there may be many
    same = [name for name, _ in variant.params] == [name for name, _ in declared]
    if not same or any(value not in values for (_, value), (_, values) in zip(variant.params, declared)):
        raise KernelFileError(request.shown, f"{spec.name} has no variant {variant.id!r} any more", key="params")
    if request.dtype not in spec.dtypes:
        raise KernelFileError(request.shown, f"{spec.name} no longer declares dtype {request.dtype}", key="dtypes")
    return Case(spec, variant, request.dtype, request.shape, AlphaBeta(request.alpha, request.beta))
