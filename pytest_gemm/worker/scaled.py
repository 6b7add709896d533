"""An FP8 case's scales on the device: the guarded grids the kernel reads, the exact dequantised operands the
truth is computed from, and the checks that the kernel left its scales alone. Part of the worker package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..judge.accuracy import count_changed
from ..judge.scaled import dequantised, scale_values
from ..records.dtypes import SCALE_DTYPES, DType
from ..records.outcome import Fault
from ..records.verdicts import Check
from ..specs.cases import Case
from ..specs.scaling import Scales
from .buffers import CaseInputs, GuardedMatrix, guarded, upload_bits

__all__ = ["ScaledCase", "scale_dtype", "scaled_case"]


def scale_dtype(scales: Scales) -> DType:
    """The element type of a grid of scales, for its buffer."""
    return SCALE_DTYPES[scales.type]


@dataclass
class ScaledCase:
    """One case's grids of scales: on the host (logical, from :class:`~.buffers.CaseInputs`) and in guarded device
    buffers in their stored order, as the kernel reads them."""

    case: Case
    data: CaseInputs
    grids: dict[str, GuardedMatrix]

    @property
    def scales(self) -> Scales:
        assert self.case.spec.scales is not None
        return self.case.spec.scales

    def host(self, operand: str) -> np.ndarray:
        grid = self.data.scale_a if operand == "A" else self.data.scale_b
        assert grid is not None
        return grid

    def values(self, cp: Any, operand: str) -> Any:
        """The operand's grid of scales as float64, logical, on the device."""
        return scale_values(cp, cp.asarray(self.host(operand)), self.scales.type)

    def dequantised(self, cp: Any, operand: str, x64: Any) -> Any:
        """``x64`` (the operand's FP8 elements as float64, logical) times its scales: its exact values."""
        return dequantised(cp, x64, self.values(cp, operand), self.scales.block(operand, self.case.shape))

    def stored_view(self, operand: str) -> Any:
        """The kernel's grid as it lies in its buffer (stored order, without the rows' padding), in its own type."""
        g, dt = self.grids[operand], scale_dtype(self.scales)
        return g.matrix(np.float32 if dt.name == "fp32" else np.uint8)  # UE8M0: its bytes (CuPy has no type for it)

    def logical_view(self, operand: str) -> Any:
        """The kernel's grid seen in logical order (a view): what a Python kernel is given."""
        view = self.stored_view(operand)
        return view.T if self.scales.transposed(operand) else view

    def faults(self, cp: Any) -> list[Fault]:
        """Writes into the guards around each grid, and changes to the scales themselves (they are inputs)."""
        found = []
        for op, arg in (("A", "scale_a"), ("B", "scale_b")):
            found += self.grids[op].guard_faults(cp, arg)
            stored = self.host(op).T if self.scales.transposed(op) else self.host(op)
            changed = count_changed(cp, upload_bits(cp, stored), self.stored_view(op))
            if changed:
                found.append(Fault(Check.INPUT_MODIFIED, f"{arg} (scales are inputs, read-only)", changed))
        return found


def scaled_case(cp: Any, case: Case, data: CaseInputs, guards: bool) -> ScaledCase | None:
    """The case's grids of scales in fresh guarded buffers (each stored row padded to the header's ``align``), or None
    for a case without scales."""
    scales = case.spec.scales
    if scales is None:
        return None
    grids = {}
    for op, grid in (("A", data.scale_a), ("B", data.scale_b)):
        assert grid is not None
        stored = np.ascontiguousarray(grid.T if scales.transposed(op) else grid)
        dt, ld = scale_dtype(scales), scales.ld(op, case.shape)
        grids[op] = guarded(cp, dt, False, stored.shape, stored, guards=guards, ld=ld)
    return ScaledCase(case, data, grids)
