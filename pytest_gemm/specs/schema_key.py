"""One row of the header schema (:mod:`.schema`): a key, where it may be written, how it is read, what it means."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .key_readers import Reading
from .kinds import KernelKind

__all__ = ["BOTH", "CU", "PY", "Key"]

BOTH = (KernelKind.CU, KernelKind.PY)
CU = (KernelKind.CU,)
PY = (KernelKind.PY,)


@dataclass(frozen=True)
class Key:
    """One header key: where it may be written, whether it must be, how it is read, and what it means.

    ``read`` gets the value the header gives and gives the :class:`KernelSpec` field of the same name. A key the header
    does not give (in every kind of file: a key a kind cannot declare still has its value there, such as a ``.cu``
    kernel's ``batched``) takes that field's default; a ``derived`` one's value follows from the keys before it, so
    its reader gets :data:`MISSING` instead. ``python`` is the decorator keyword's annotation (None: not a Python
    kernel's key)."""

    name: str
    read: Callable[[Reading, Any], Any]
    meaning: str
    kinds: tuple[KernelKind, ...] = BOTH
    required: tuple[KernelKind, ...] = ()
    python: str | None = None
    derived: bool = False
    elsewhere: str = ""  # why the kinds outside ``kinds`` cannot declare it, where "it is a key of ..." is not enough
    required_text: str = ""  # the docs' "required" column where it is not "yes" or "no"
