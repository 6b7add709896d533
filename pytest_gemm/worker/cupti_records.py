"""CUPTI's activity records read raw (used by :mod:`.cupti_buffers`): the kinds collected, where each field lies in a
record (at the offsets of cupti-python's own dtypes), and a buffer's records gathered into rows with numpy, every
field for all records of a buffer at once.

The constants are those of CUPTI 13's ``cupti_activity.h`` and ``cupti_result.h`` (the same values in 13.0 and
13.5, and in cupti-python's ``ActivityKind`` and ``Result``). The fields read (``kind``, ``start``, ``end``,
``streamId``, a kernel's ``name``) sit at the same offsets in every version of the records' structs from
``CUpti_ActivityKernel4`` to ``13``, ``CUpti_ActivityMemset4`` and ``5``, ``CUpti_ActivityMemcpy5`` to ``7``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CONCURRENT_KERNEL",
    "MEMCPY",
    "MEMSET",
    "CuptiError",
    "Layouts",
    "Row",
    "check_kinds",
    "layout_of",
    "layouts_from",
    "parse_records",
]

# CUpti_ActivityKind
MEMCPY = 1
MEMSET = 2
CONCURRENT_KERNEL = 10

KIND_FIELD = (0, np.dtype(np.int32))  # CUpti_Activity: every record starts with its CUpti_ActivityKind
WORK_FIELDS = ("kind", "start", "end", "stream_id")
KERNEL_FIELDS = (*WORK_FIELDS, "name")
#: cupti-python's dtypes for the structs of the kinds collected (their newest version is taken)
STRUCTS = {
    CONCURRENT_KERNEL: ("kernel", KERNEL_FIELDS),
    MEMSET: ("memset", WORK_FIELDS),
    MEMCPY: ("memcpy", WORK_FIELDS),
}

Row = tuple[int, int, int, int, str]  # (kind, stream id, start ns, end ns, kernel name or "")
Layouts = dict[int, dict[str, tuple[int, np.dtype]]]  # {kind: {field: (byte offset in the record, dtype)}}


class CuptiError(RuntimeError):
    """A CUPTI call failed, or a buffer could not be read."""


def parse_records(
    data: np.ndarray | bytes, offsets: Sequence[int] | np.ndarray, layouts: Layouts, read_name: Callable[[int], str]
) -> list[Row]:
    """The rows of the records at ``offsets`` in ``data`` (one buffer's valid bytes), in buffer order, those of
    kinds not in ``layouts`` left out. A field is read at its offset from the record's start; ``name`` (for the
    kinds that have it) is a pointer, read by ``read_name`` once per distinct non-null value ("" for null)."""
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data.reshape(-1).view(np.uint8)
    at = np.asarray(offsets, dtype=np.int64)
    if at.size == 0:
        return []
    kinds = _gather(buf, at, KIND_FIELD)
    keep = np.zeros(at.size, dtype=bool)
    columns = {field: np.zeros(at.size, dtype=np.uint64) for field in ("stream_id", "start", "end", "name")}
    for kind, fields in layouts.items():
        mask = kinds == kind
        if not mask.any():
            continue
        keep |= mask
        for field in columns:
            if field in fields:
                columns[field][mask] = _gather(buf, at[mask], fields[field])
    rows = np.flatnonzero(keep)
    pointers = columns["name"][rows].tolist()
    names = {pointer: read_name(pointer) for pointer in set(pointers) if pointer}
    names[0] = ""
    return list(
        zip(
            kinds[rows].tolist(),
            columns["stream_id"][rows].tolist(),
            columns["start"][rows].tolist(),
            columns["end"][rows].tolist(),
            [names[pointer] for pointer in pointers],
        )
    )


def _gather(buf: np.ndarray, at: np.ndarray, field: tuple[int, np.dtype]) -> np.ndarray:
    """The field at ``at + offset`` of each record: indexed in a view of the buffer as the field's type where every
    one is aligned to its size (as in CUPTI's 8-byte aligned records), gathered byte by byte otherwise."""
    offset, dtype = field
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    where = at + offset
    if where.size and where.max() + size > buf.size:
        raise CuptiError(f"a record's field at byte {where.max()} runs past the buffer's {buf.size} bytes")
    if not (where % size).any():
        return buf[: buf.size // size * size].view(dtype)[where // size]
    return np.ascontiguousarray(buf[where[:, None] + np.arange(size)]).view(dtype)[:, 0]


def layout_of(dtype: np.dtype, fields: Iterable[str]) -> dict[str, tuple[int, np.dtype]]:
    """The offsets and dtypes of ``fields`` in a structured dtype (a record's struct)."""
    known = dtype.fields or {}
    missing = [field for field in fields if field not in known]
    if missing:
        raise CuptiError(f"the record dtype has no field {', '.join(missing)}")
    layout = {field: (int(known[field][1]), np.dtype(known[field][0])) for field in fields}
    if layout["kind"][0] != KIND_FIELD[0] or layout["kind"][1].itemsize != KIND_FIELD[1].itemsize:
        raise CuptiError(f"the record's kind is at {layout['kind']}, not a 4-byte int at offset 0")
    return layout


def layouts_from(cupti: Any) -> Layouts:
    """The layouts of the kinds collected, from the newest ``activity_<struct><version>_dtype`` of each struct that
    the ``cupti.cupti`` module exports (``activity_kernel10_dtype`` in cupti-python 13.0)."""
    layouts: Layouts = {}
    for kind, (struct, fields) in STRUCTS.items():
        pattern = re.compile(rf"activity_{struct}(\d+)_dtype")
        versions = {int(m.group(1)): name for name in dir(cupti) if (m := pattern.fullmatch(name))}
        if not versions:
            raise CuptiError(f"cupti-python exports no activity_{struct}<version>_dtype")
        layouts[kind] = layout_of(getattr(cupti, versions[max(versions)]), fields)
    return layouts


def check_kinds(activity_kind: Any) -> None:
    """Raise unless cupti-python's ``ActivityKind`` has the values used here."""
    expected = {"CONCURRENT_KERNEL": CONCURRENT_KERNEL, "MEMSET": MEMSET, "MEMCPY": MEMCPY}
    found = {name: int(getattr(activity_kind, name)) for name in expected}
    if found != expected:
        raise CuptiError(f"cupti-python's ActivityKind is {found}, not {expected}")
