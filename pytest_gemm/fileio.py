"""Files written whole or not at all, with the mode a user expects.

A file is written to a temporary file beside it, then renamed over it, so a reader never sees half of
it and a crash leaves the old file whole. The new file keeps the old one's mode; a file that did not
exist gets the mode a plain ``open()`` would give it (0o666 less the umask), never ``tempfile``'s 0600.
Imports nothing from the package.
"""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

__all__ = ["atomic_write"]


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
