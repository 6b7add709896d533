"""The one error a kernel file that cannot be used raises, naming the file, line and key at fault."""

from __future__ import annotations

from pathlib import Path

__all__ = ["KernelFileError"]


class KernelFileError(Exception):
    """A kernel file that cannot be used, with the file, line and key at fault."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, key: str | None = None):
        self.path, self.line, self.key, self.message = str(path), line, key, message
        where = f"{self.path}:{line}" if line else self.path
        what = f"key {key!r}: " if key else ""
        super().__init__(f"{where}: {what}{message}")
