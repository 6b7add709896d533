"""Kernel files: read one (``.cu`` with headers, ``.py`` with ``@gemm_kernel``) into specs, and find cases in it."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from ..records.case_record import path_problem
from ..records.request import Request
from .cases import AlphaBeta, Case
from .cufile import parse_cu_source
from .errors import KernelFileError
from .includes import with_local_includes
from .pyfile import DECLARING, DECORATOR, PyFacts, parse_py_source, py_facts
from .source import (
    HEADER_START,
    HEADER_WORD,
    decode_cu,
    decode_py,
    file_problem,
    has_header,
    holds,
    is_oversize,
    read_kernel_bytes,
)
from .spec import KernelSpec, Variant

__all__ = [
    "case_from_request",
    "case_path",
    "declares_kernels",
    "is_kernel_file",
    "load_specs",
    "mentions_without_declaring",
    "message_path",
    "named_like_kernel_file",
    "read_specs",
    "shown_path",
]


def shown_path(path: Path, root: Path) -> str:
    """``path`` as messages show it: relative to the rootdir when it lies inside it, else whole (a kernel file's
    cases name it by :func:`case_path`, which refuses one outside)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def case_path(path: Path, root: Path) -> str:
    """The kernel file ``path`` as its cases' test ids, saved runs and baseline files name it: relative to the rootdir
    ``root``. :class:`KernelFileError` for a file outside the rootdir, which pytest's ids name by no path of the
    project (``::k[fp32-64x64x64]`` for a file given by itself, its path under a folder given for one outside), and
    for one whose path a saved run could not hold (:func:`~pytest_gemm.records.case_record.path_problem`, the rule
    saved runs and baseline files are read with)."""
    try:
        shown = str(path.relative_to(root))
    except ValueError:
        raise KernelFileError(
            path,
            f"lies outside the rootdir, {root}: a case's test id, its key in saved runs and baseline files, names its "
            "kernel file by its path in the rootdir; put the file, or a symlink to it, inside the rootdir, or give "
            "--rootdir a folder that holds both (the baseline folder is found relative to it)",
        ) from None
    problem = path_problem("its path", shown)
    if problem is not None:
        raise KernelFileError(
            shown,
            "cannot be named in saved runs and baseline files, which would read its path as one that leaves the "
            "project (a name that starts with a drive, such as 'C:', or a backslash, or holds '..' between "
            "backslashes): rename it",
        )
    return shown


def message_path(path: Path, root: Path) -> str:
    """``path`` as the plugin's messages show it: as :func:`shown_path` does, but whole when the rootdir is '/'
    (which an absolute option value can make it), where a path relative to it would read as relative to the
    current folder."""
    return str(path) if len(root.parts) < 2 else shown_path(path, root)


def named_like_kernel_file(path: Path) -> bool:
    """Whether the name allows ``path`` to be a kernel file: a ``.cu`` file, or a ``.py`` file other than a conftest
    (which pytest imports whatever it holds)."""
    return path.suffix == ".cu" or (path.suffix == ".py" and not path.name.startswith("conftest"))


@functools.lru_cache(maxsize=4096)
def _facts(path: str, _stamp: tuple[int, ...], every_mention: bool) -> PyFacts | None:
    try:
        data = read_kernel_bytes(Path(path), path)
    except KernelFileError:
        return None
    # leniently decoded: a file saved as UTF-16 is still seen to declare kernels (its collection says why
    # Python cannot import it)
    return py_facts(decode_cu(path, data, strict=False), every_mention=every_mention)


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What tells one version of a file from another (None when it cannot be looked at)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _py_facts(path: Path, *, test_module: bool) -> PyFacts | None:
    """A ``.py`` file's :class:`PyFacts`, read once per version of the file; None when it cannot be read. A module
    pytest imports is parsed only where it may hold a decorator; another, wherever it names gemm_kernel."""
    stamp = _stamp(path)
    if stamp is None or file_problem(path) is not None:
        return None
    return _facts(str(path), stamp, not test_module)


#: what a file too large to read whole is searched for: what would make it a kernel file (its size is then said), and
#: the text each match holds
_MARKS = {".cu": (HEADER_START, HEADER_WORD), ".py": (DECLARING, DECORATOR)}


@functools.lru_cache(maxsize=256)
def _holds_mark(path: str, _stamp: tuple[int, ...]) -> bool:
    return holds(Path(path), *_MARKS[Path(path).suffix])


def is_kernel_file(path: Path, *, test_module: bool) -> bool:
    """Whether pytest-gemm collects ``path`` as a kernel file (its headers or decorators decide the rest).

    ``test_module``: the file is pytest's to import as a test module (it matches python_files; without
    --gemm-kernels, any module pytest imports). Then it is a kernel file only when it declares kernels and defines
    no tests, whatever its name; one that cannot be read, is too large or is not valid Python is left to pytest,
    which says what is wrong. Otherwise every ``.cu`` file is one, and every ``.py`` file (not a conftest) whose
    syntax tree holds a gemm_kernel decorator (a misplaced one is an error to show), that names gemm_kernel but is
    not valid Python, or that cannot be read (its collection says why). A regular file too large to read is one only
    when it holds a header's start (``.cu``) or what may be a decorator (``.py``): its collection says its size. A
    file that is not regular (a FIFO, a device), which pytest would block on, is one whatever it is named: its
    collection says what it is.
    """
    if not named_like_kernel_file(path):
        return False
    if file_problem(path) is not None:
        if not is_oversize(path):
            return True  # not a regular file
        stamp = _stamp(path)
        return not test_module and stamp is not None and _holds_mark(str(path), stamp)
    if path.suffix == ".cu":
        return True
    facts = _py_facts(path, test_module=test_module)
    if test_module:
        return facts is not None and facts.declares and not facts.test_module
    return facts is None or facts.declares or facts.broken


def declares_kernels(path: Path, *, test_module: bool) -> bool:
    """Whether the file declares at least one kernel (a ``.cu`` header, or ``@gemm_kernel`` in a ``.py`` file);
    ``test_module`` as for :func:`is_kernel_file`.

    For the hints: a file that is not regular, or too large, is skipped (False), never read.
    """
    if file_problem(path) is not None or not is_kernel_file(path, test_module=test_module):
        return False
    if path.suffix == ".py":
        facts = _py_facts(path, test_module=test_module)
        return facts is not None and facts.declares
    try:
        return has_header(decode_cu(path, read_kernel_bytes(path, str(path)), strict=False))
    except KernelFileError:
        return False


def mentions_without_declaring(path: Path) -> bool:
    """Whether a ``.py`` file (not a conftest, nor a module of tests) names gemm_kernel without declaring a kernel
    with it."""
    if path.suffix != ".py" or not named_like_kernel_file(path):
        return False
    facts = _py_facts(path, test_module=False)
    return facts is not None and facts.mentions and not (facts.broken or facts.declares or facts.test_module)


def read_specs(path: Path, shown: str) -> tuple[list[KernelSpec], str]:
    """The kernels a file declares and the SHA-256 of the bytes they were read from; ``shown`` is the path used
    in ids and messages (relative to the rootdir).

    A ``.cu`` file without a header is no kernel file: it declares nothing, whatever its bytes.
    """
    data = read_kernel_bytes(path, shown)
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".py":
        return parse_py_source(shown, decode_py(shown, data)), digest
    text = decode_cu(shown, data)
    source = with_local_includes(path, text, shown)
    if source != text:  # what it includes is part of the kernel: a changed header is a changed kernel
        digest = hashlib.sha256(source.encode()).hexdigest()
    return parse_cu_source(shown, text, source), digest


def load_specs(path: Path, shown: str) -> list[KernelSpec]:
    """The kernels a file declares (:func:`read_specs` without the hash)."""
    return read_specs(path, shown)[0]


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
