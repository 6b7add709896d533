"""Files read bounded and written whole, with the mode a user expects; why a file operation failed, in words.

A user's file (a kernel file, a saved run, a baseline file) is read by :func:`read_regular`: a regular file only,
opened without blocking and checked on the open file (a FIFO never hangs a run, a link to ``/dev/zero`` never fills
its memory), and at most its kind's size limit (``MAX_*_BYTES``). A file is written to a temporary file beside it,
then renamed over it, so a reader never sees half of it and a crash leaves the old file whole. The new file keeps the
old one's mode; a file that did not exist gets the mode a plain ``open()`` would give it (0o666 less the umask),
never ``tempfile``'s 0600. :func:`os_reason` words an ``OSError`` the same way for every reader and writer. Imports
nothing from the package.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

__all__ = [
    "MAX_BASELINE_BYTES",
    "MAX_RUN_BYTES",
    "RefusedFile",
    "atomic_write",
    "not_regular",
    "os_reason",
    "read_regular",
    "size_text",
]

#: The largest saved run read (pytest-benchmark's JSON, a report's ``run.json``), read whole and then parsed. Measured
#: on a real H200 run's --benchmark-json (677 cases, 573 of them timed, 6.4 MB): 9.5 KB a case, a timed case's
#: benchmark 8.4 KB on average and 15.7 KB at 480 samples (pytest-benchmark keeps each sample, indented);
#: --benchmark-save-data adds the kernel's and cuBLAS's samples (2 x samples numbers, 44 bytes each as written),
#: 24 KB a timed case on average, 58 KB at 480 samples. So 1 GB holds about 100,000 cases, 40,000 with their samples
MAX_RUN_BYTES = 1_000_000_000
#: The largest baseline file read: the bundled one holds 1002 entries (most with two GPUs' records) in 1.55 MB; with
#: the most GPUs' records an entry keeps (8) it would be 3.5 MB, so 256 MB holds over 70,000 entries whatever they keep
MAX_BASELINE_BYTES = 256_000_000

#: what a file is that is not a regular file, by its mode
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class RefusedFile(ValueError):
    """A file that was not read: not a regular file, or larger than its kind's limit. The message says which,
    without the file's name (``is a FIFO, not a regular file``), for the caller to put after it."""


def size_text(size: int) -> str:
    """A file size as people read it: ``2.1 GB``, ``16 MB``, ``300 bytes``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def not_regular(mode: int, path: Path | None = None) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (``is a symlink to /dev/zero, a character device, not
    a regular file``; ``path`` names the link), None when it is one."""
    if stat.S_ISREG(mode):
        return None
    kind = next((kind for test, kind in _KINDS if test(mode)), "a special file")
    link = f"a symlink to {os.path.realpath(path)}, " if path is not None and os.path.islink(path) else ""
    return f"is {link}{kind}, not a regular file"


def _too_large(size: int, limit: int, what: str) -> str:
    said, most = size_text(size), size_text(limit)
    if said == most:  # just past it: in bytes, so the two differ
        said, most = f"{size:,} bytes", f"{limit:,} bytes"
    return f"is {said}; {what} may be at most {most}"


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` (its symlinks followed), at most ``limit`` of them; ``what`` names the
    kind of file in a refusal (``a saved run``).

    Opened without blocking and checked on the open file, so nothing swapped in between is read; a file that grows
    past ``limit`` while read is refused too. :class:`RefusedFile` for a file that is not regular or too large; an
    ``OSError`` (no such file, no permission) is the caller's to word.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        try:  # a socket cannot be opened at all: say what it is
            kind = not_regular(os.stat(path).st_mode, Path(path))
        except OSError:
            kind = None
        if kind is not None:
            raise RefusedFile(kind) from None
        raise
    try:
        st = os.fstat(fd)
        kind = not_regular(st.st_mode, Path(path))
        if kind is not None:
            raise RefusedFile(kind)
        if st.st_size > limit:
            raise RefusedFile(_too_large(st.st_size, limit, what))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise RefusedFile(_too_large(len(data), limit, what))
    return data


def os_reason(exc: OSError, path: Path, shown: Callable[[Path], str] = str) -> str:
    """Why a file operation on ``path`` failed, in words: a folder on its path that is a file (or not a folder at
    all), or the system's reason. ``shown``: how the message shows a path."""
    for folder in Path(path).parents:
        if os.path.lexists(folder):
            if not folder.is_dir():
                return f"{shown(folder)} is {'a file, not' if folder.is_file() else 'not'} a folder"
            break
    return exc.strerror or str(exc)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, keeping its mode; ``durable``: on disk before the rename.

    The temporary file (``.NAME.XXXXXXXX.tmp``, hidden) is removed when anything fails; an ``OSError`` is
    the caller's to word.
    """
    path = Path(path)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            with suppress(FileNotFoundError):  # a new file keeps what it was created with: open()'s mode
                os.fchmod(handle.fileno(), stat.S_IMODE(os.stat(path).st_mode))  # the old file's mode
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, empty, hidden file in ``path``'s folder, opened for writing with open()'s mode."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")
