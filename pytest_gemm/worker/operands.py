"""A case's data as the worker holds it: its host inputs (:class:`CaseInputs`, drawn by its input strategy) and a set
of its operands in their buffers (:class:`Operands`, made by its prepared case)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..judge.accuracy import to_host
from ..records.storage import Storage
from .buffers import GuardedMatrix, transposed_each, upload_bits

__all__ = ["CaseInputs", "Operands"]


@dataclass
class Operands:
    """One set of a case's operands in their buffers: A, B and C as the kernel stores them, and what else the kernel
    reads (an FP8 case's grids of scales), by operand."""

    a: GuardedMatrix
    b: GuardedMatrix
    c: GuardedMatrix
    grids: dict[str, GuardedMatrix] = field(default_factory=dict)
    #: a grouped case's group arrays (records.groups.GROUP_ARGS), by name
    groups: dict[str, GuardedMatrix] = field(default_factory=dict)
    #: a fused epilogue's operands (records.epilogue.EPILOGUE_ARGS: bias, residual, aux; and C, an input only, where
    #: the kernel writes D: then ``c`` is D), by name
    epilogue: dict[str, GuardedMatrix] = field(default_factory=dict)

    @property
    def by_operand(self) -> dict[str, GuardedMatrix]:
        """A, B and C by name (what a grouped kernel's pointer arrays point into)."""
        return {"A": self.a, "B": self.b, "C": self.c}

    @property
    def c_read(self) -> GuardedMatrix:
        """The C the kernel reads: ``c`` itself, or an input of its own where the kernel writes D apart from C."""
        return self.epilogue.get("C", self.c)

    def regions(self) -> dict[str, Any]:
        """Every guard region around the operands and the grids, by name ("the guard after A", "the row padding of
        scale_b"), whose NaN a wrong element may come from."""
        found = {**self.a.regions("A"), **self.b.regions("B"), **self.c.regions("C")}
        for operand, grid in self.grids.items():
            found |= grid.regions(f"scale_{operand.lower()}")
        for name in ("bias", "residual", "C"):  # what an epilogue reads (aux, an output, is checked, not traced)
            if name in self.epilogue:
                found |= self.epilogue[name].regions("input C" if name == "C" else name)
        return found  # the group arrays' guards hold integers, never NaN: checked by the layout, not traced


@dataclass(frozen=True)
class CaseInputs:
    """A case's host data (logical A, B and prior C) and each operand's storage order. A batch's matrices are
    stacked, one batch's rows after the other's: A is (batch M) x K, B (batch K) x N, C (batch M) x N."""

    a: np.ndarray
    b: np.ndarray
    c0: np.ndarray | None
    storage: Storage
    batch: int = 1
    #: an FP8 case's grids of scales, logical (A's: M-blocks x K-blocks; B's: K-blocks x N-blocks), as the kernel
    #: gets them (float32, or UE8M0 bytes); None for a case without scales
    scale_a: np.ndarray | None = None
    scale_b: np.ndarray | None = None
    #: each operand's batch (A's, B's, C's) where they differ (a grouped case's: records.groups); None: ``batch``
    batches: tuple[int, int, int] | None = None
    #: what a fused epilogue reads besides C, logical, in D's type: the bias (1 x its length) and the residual
    epilogue: dict[str, np.ndarray] = field(default_factory=dict)

    def batch_of(self, operand: str) -> int:
        """How many matrices ``operand`` stacks."""
        return self.batch if self.batches is None else self.batches["ABC".index(operand)]

    def stored(self, x: np.ndarray, operand: str, device: Any = None) -> np.ndarray:
        """``x``, logical operand ``operand`` (stacked), in the kernel's storage order (an operand stored transposed
        is stored as the transpose, each matrix of a batch its own), stacked; ``device`` (CuPy): transposed there and
        brought back, bit for bit (NumPy's strided copy takes 6 ns an element: seconds for a MoE layer's weights;
        docs/measurements.md#drawing-the-inputs)."""
        if not self.storage.transposed(operand):
            return x
        if device is None:
            return transposed_each(x, self.batch_of(operand))
        return to_host(self.stored_bits(device, x, operand)).view(x.dtype)

    def stored_bits(self, cp: Any, x: np.ndarray, operand: str) -> Any:
        """:meth:`stored`'s bits on the device (``x`` uploaded, then transposed there)."""
        bits = upload_bits(cp, x)
        return transposed_each(bits, self.batch_of(operand)) if self.storage.transposed(operand) else bits

    def logical(self, x: Any, operand: str) -> Any:
        """A stored array of operand ``operand`` seen in logical order: a view for one matrix; a batch (stacked, or
        batch x rows x cols) stacked in logical order."""
        batch = self.batch_of(operand)
        if x.ndim == 2 and batch > 1:
            x = x.reshape(batch, -1, x.shape[-1])
        if self.storage.transposed(operand):
            x = x.swapaxes(-1, -2)
        return x.reshape(-1, x.shape[-1]) if x.ndim == 3 else x
