"""Compiled kernels kept on disk, keyed by everything that decides the cubin.

The key hashes the source (with the variant's params), its path, the entry, the compiler
options, the architecture and the NVRTC version. Each entry is two files written atomically
(``KEY.cubin``, then ``KEY.json`` with the lowered name and ptxas's log), so processes sharing
the folder (pytest-xdist workers, GPU workers) never read half an entry; a file written again keeps
its mode (``fileio.atomic_write``). The plugin keeps the folder in pytest's cache directory, which
``--cache-clear`` empties.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..fileio import atomic_write

__all__ = ["CubinCache", "cache_key"]


def cache_key(source: str, path: str, name_expr: str, options: tuple[str, ...], arch: str, compiler: str) -> str:
    text = json.dumps([source, path, name_expr, list(options), arch, compiler])
    return hashlib.sha256(text.encode()).hexdigest()


class CubinCache:
    """A folder of compiled kernels; unreadable or half-written entries count as missing."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def get(self, key: str) -> tuple[str, str, bytes] | None:
        """(lowered name, compiler log, cubin) for ``key``, or None."""
        try:
            meta = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            cubin = (self.folder / f"{key}.cubin").read_bytes()
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("size") != len(cubin):
            return None
        return str(meta.get("lowered_name", "")), str(meta.get("log", "")), cubin

    def put(self, key: str, lowered_name: str, log: str, cubin: bytes) -> None:
        """Store an entry; a folder that cannot be written only means no caching."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._write(self.folder / f"{key}.cubin", cubin)
            meta = {"lowered_name": lowered_name, "log": log, "size": len(cubin)}
            self._write(self.folder / f"{key}.json", json.dumps(meta).encode())
        except OSError:
            pass

    def _write(self, path: Path, data: bytes) -> None:
        atomic_write(path, data, durable=False)  # a lost entry is only compiled again
