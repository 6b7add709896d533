"""A grouped case's checks that need the device (records.groups): its group arrays as the kernel gets them (inputs:
written guards and changed values are faults), and whether a group's non-finite rows came from A's padding rows (a
re-run with them zeroed). The grouped layout (``worker/layouts.py``) uses them. Part of the worker package.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..judge.accuracy import count_changed
from ..judge.grouped import group_rows
from ..records.dtypes import get_dtype
from ..records.groups import POINTER_ARGS, GroupPlan
from ..records.outcome import Fault
from ..records.storage import Storage
from ..records.verdicts import Check
from .buffers import GuardedMatrix, uint_type, upload_bits

__all__ = ["group_array_faults", "group_host", "padding_read"]


def group_host(plan: GroupPlan, name: str, operands: dict[str, GuardedMatrix], storage: Storage) -> np.ndarray:
    """Group array ``name`` of ``plan`` on the host, as one row of int32 (a row of one 0 where it is empty); a pointer
    array's 64-bit addresses into ``operands`` (A, B and C by name, as stored), each as two int32."""
    if name in POINTER_ARGS:
        return np.asarray(_addresses(plan, name[0], operands[name[0]], storage), dtype=np.uint64).view(np.int32)[None]
    values = plan.group_args()[name]
    return np.asarray(values if values else (0,), dtype=np.int32).reshape(1, -1)


def _addresses(plan: GroupPlan, op: str, matrix: GuardedMatrix, storage: Storage) -> list[int]:
    """The address of each group's first element of operand ``op``: its matrix of the batch (one matrix a group), or
    its first row of the one matrix (a column, stored transposed); one 0 where there are no groups."""
    base, size, starts = int(matrix.pointer().data.ptr), matrix.flat.itemsize, plan.starts
    found = []
    for g in range(plan.count):
        if plan.per_group(op):
            offset = g * matrix.batch_stride
        else:
            row = starts[g]
            offset = row if storage.transposed(op) else row * matrix.ld
        found.append(base + offset * size)
    return found or [0]


def group_array_faults(
    cp: Any, plan: GroupPlan, arrays: dict[str, GuardedMatrix], operands: dict[str, GuardedMatrix], storage: Storage
) -> list[Fault]:
    """Writes into the group arrays' guards, and changes to what they hold (they are inputs)."""
    found = []
    for name, array in arrays.items():
        found += array.guard_faults(cp, name)
        host = group_host(plan, name, operands, storage)
        changed = count_changed(cp, upload_bits(cp, host), array.matrix(cp.uint32))
        if changed:
            found.append(Fault(Check.INPUT_MODIFIED, f"{name} (group arrays are inputs, read-only)", changed))
    return found


def padding_read(prepared: Any, plan: GroupPlan, got: Any) -> Fault | None:
    """Launch again with A's padding rows (NaN: they belong to no group) zeroed: a group's non-finite elements that
    turn finite were computed from them. None when no group's element is non-finite, or none turns finite."""
    cp, data = prepared.cp, prepared.data
    if not plan.outside():
        return None
    nonfinite = ~cp.isfinite(got) & group_rows(cp, plan, got.shape[0])[:, None]
    if not int(nonfinite.sum()):
        return None
    ops = prepared.operands()
    dt = get_dtype(prepared.case.dtype)
    view = ops.a.matrix(uint_type(cp, dt.itemsize))  # stored order; a batch's (masked) batch x rows x cols
    view = view if view.ndim == 3 else view[None]
    per, transposed = plan.operand_shape("A").M, data.storage.transposed("A")
    for r0, r1, _ in plan.outside():  # never across two matrices: padding and slots lie within one
        b, lo = divmod(r0, per)
        if transposed:
            view[b, :, lo : lo + r1 - r0] = 0
        else:
            view[b, lo : lo + r1 - r0, :] = 0
    with prepared.device.stream:
        prepared.launch(ops)
    again = data.logical(ops.c.as_float64(cp, prepared.out), "C")
    turned = nonfinite & cp.isfinite(again)
    if not int(turned.sum()):
        return None
    rows = int(turned.any(axis=1).sum())
    return Fault(Check.PADDING_READ, f"{rows} row(s) of the groups' C", int(turned.sum()))
