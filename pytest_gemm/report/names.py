"""Names made from a run's data: safe file names inside an output folder, and the labels that tell kernels apart.

A saved run is data from anywhere: its dtypes, kernel names, test ids and GPU name may hold ``/``, ``..``, an
absolute path or thousands of characters. Every file name the report derives from them is made by :func:`slug`,
and every file the report writes is placed by :func:`inside`, which refuses a path that leaves its folder
(through ``..`` or a link). Kernels are told apart by their identity, file and name, never by name alone
(:func:`kernel_labels`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from ..records.case_record import CaseRecord

__all__ = ["LONGEST", "OutsideFolderError", "inside", "kernel_key", "kernel_labels", "slug"]

#: the most characters of a name :func:`slug` makes (file systems allow 255 bytes; prefixes and suffixes fit)
LONGEST = 96
_HASH = 10  # hex digits of SHA-256 that tell apart the values a name was changed from
_KEPT = re.compile(r"[a-z0-9](?:[a-z0-9_-]|\.(?!\.))*")  # kept as it is: lowercase, no two dots in a row
_HASHED = re.compile(rf"-[0-9a-f]{{{_HASH}}}$")  # how a changed name ends; a value that ends so is changed too
_UNSAFE = re.compile(r"(?:[^A-Za-z0-9._-]|\.{2,})+")  # a run of other characters and of two dots or more
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # one part of a name :func:`inside` places


class OutsideFolderError(OSError):
    """A file the report would write is not a safe name inside its folder."""


def slug(text: str, *, of: str | None = None) -> str:
    """``text`` as one safe file-name component: ASCII letters, digits, ``-``, ``_`` and ``.`` (never first, never
    two in a row), at most :data:`LONGEST` characters. A lowercase value that is such a name already is kept as it
    is; any other has its runs of other characters (and of dots) replaced by ``_`` and ends in ``-`` and 10 hex
    digits of the SHA-256 of ``of`` (the whole value the name stands for, when ``text`` is a readable part of it;
    default ``text``): distinct values get distinct names, even on a file system that ignores case."""
    whole = text if of is None else of
    if whole == text and len(text) <= LONGEST and _KEPT.fullmatch(text) and not _HASHED.search(text):
        return text
    base = _UNSAFE.sub("_", text).strip("_").lstrip(".-")[: LONGEST - _HASH - 1] or "_"
    return f"{base}-{hashlib.sha256(whole.encode('utf-8', 'surrogatepass')).hexdigest()[:_HASH]}"


def inside(folder: Path, name: str) -> Path:
    """Where the file ``name`` (safe components joined by ``/``, such as :func:`slug` makes) goes in ``folder``.

    Raises :class:`OutsideFolderError` when ``name`` is not such a name, or when the path resolves outside
    ``folder`` (a link in the folder that points away from it)."""
    parts = name.split("/")
    if not all(_COMPONENT.fullmatch(part) for part in parts):
        raise OutsideFolderError(f"refused to write {name!r} in {folder}: not a safe file name")
    path = folder.joinpath(*parts)
    if not path.resolve().is_relative_to(folder.resolve()):
        where = path.resolve()
        raise OutsideFolderError(f"refused to write {path}: a link leads to {where}, outside {folder}; remove the link")
    return path


def kernel_key(record: CaseRecord) -> tuple[str, str]:
    """A kernel variant's identity: its file and its ``name[variant]``."""
    return record.file, record.kernel


def _suffix(file: str, parts: int) -> str:
    return "/".join(file.split("/")[-parts:])


def _shortest(file: str, others: Iterable[str]) -> str:
    """The fewest trailing parts of ``file`` that no other file ends in."""
    others = [other for other in others if other != file]
    depth = len(file.split("/"))
    parts = next((n for n in range(1, depth) if all(_suffix(file, n) != _suffix(o, n) for o in others)), depth)
    return _suffix(file, parts)


def kernel_labels(records: Iterable[CaseRecord]) -> dict[tuple[str, str], str]:
    """Each kernel variant's label (by :func:`kernel_key`), the one rule of every picture and table: its
    ``name[variant]`` where no other file of the run has a kernel of that name, else the shortest trailing part of
    its file that tells it apart, then ``::`` (``kernels/01_naive.cu::sgemm_naive``)."""
    keys = list(dict.fromkeys(map(kernel_key, records)))
    files: dict[str, list[str]] = {}
    for file, kernel in keys:
        files.setdefault(kernel.split("[", 1)[0], []).append(file)
    labels = {}
    for file, kernel in keys:
        same = set(files[kernel.split("[", 1)[0]])
        labels[(file, kernel)] = kernel if len(same) == 1 else f"{_shortest(file, same)}::{kernel}"
    return labels
