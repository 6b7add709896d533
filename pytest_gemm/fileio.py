"""Files written whole or not at all, with the mode a user expects; why a file operation failed, in words.

A file is written to a temporary file beside it, then renamed over it, so a reader never sees half of
it and a crash leaves the old file whole. The new file keeps the old one's mode; a file that did not
exist gets the mode a plain ``open()`` would give it (0o666 less the umask), never ``tempfile``'s 0600.
:func:`os_reason` words an ``OSError`` the same way for every reader and writer. Imports nothing from the package.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

__all__ = ["atomic_write", "os_reason"]


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
