"""The input strategies: how a case of each input family (``specs.families``) draws its host inputs, lays out what the
kernel reads besides A, B and C (an FP8 case's grids of scales), gives the exact operands its truth is computed from,
and which misreadings of them a wrong output is compared with. :func:`input_strategy` chooses one per case, by its
family: the only place the worker tells the families apart. Part of the worker package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..judge.accuracy import Truth, count_changed
from ..judge.grouped import GroupReading
from ..judge.scale_misread import int_candidates, scale_candidates
from ..judge.scaled import dequantised, draw_int8, draw_quantised, scale_values
from ..records.dtypes import SCALE_DTYPES, DType, get_dtype
from ..records.outcome import ErrorStats, Fault
from ..records.scales import Scales
from ..records.shapes import Shape
from ..records.verdicts import Check, Misreading
from ..specs.cases import Case
from ..specs.families import family_of
from ..specs.footprint import operand_shape, per_group, storage_dims
from .buffers import GuardedMatrix, bits_to_float64, guarded, np_dtype, random_matrix, upload_bits
from .operands import CaseInputs

__all__ = ["FloatInputs", "InputStrategy", "IntegerInputs", "ScaledInputs", "input_strategy"]


def _read_only(*arrays: np.ndarray | None) -> None:
    for x in arrays:
        if x is not None:
            x.flags.writeable = False


class InputStrategy:
    """A case's inputs, as one family draws, lays out and judges them; by default what a floating-point family does
    besides drawing: nothing beside A, B and C, the truth the product of the elements themselves, no readings of its
    own."""

    def __init__(self, case: Case) -> None:
        self.case = case

    def draw(self, seed: int) -> CaseInputs:
        """The case's host inputs: the same seed always gives the same data."""
        raise NotImplementedError

    def grids(self, cp: Any, data: CaseInputs, guards: bool) -> dict[str, GuardedMatrix]:
        """What the kernel reads besides A, B and C, in fresh guarded buffers, by operand: nothing."""
        return {}

    def grid_faults(self, cp: Any, data: CaseInputs, grids: dict[str, GuardedMatrix]) -> list[Fault]:
        """Writes into those buffers' guards, and changes to what they hold (they are inputs too)."""
        return []

    def kernel_views(self, grids: dict[str, GuardedMatrix]) -> list[tuple[Any, DType]]:
        """What a Python kernel is given after A, B and C (views of those buffers, each with its dtype): nothing."""
        return []

    def exact(self, cp: Any, data: CaseInputs, a64: Any, b64: Any) -> tuple[Any, Any]:
        """The operands the truth is the product of, from A's and B's elements as float64 (logical): themselves."""
        return a64, b64

    def group_readings(
        self, cp: Any, data: CaseInputs, raw: tuple[Any, Any], exact: tuple[Any, Any], rows: Callable[[int], Any]
    ) -> dict[Misreading, GroupReading]:
        """The family's own readings of a grouped case's group g with group h's data (``raw``: A's and B's elements
        as float64, ``exact``: the truth's operands, both logical and stacked; ``rows(g)``: group g's rows of A, start
        and stop): nothing."""
        return {}

    def group_candidates(
        self, cp: Any, data: CaseInputs, bits: tuple[Any, Any], group: int, rows: tuple[int, int]
    ) -> tuple[Iterable[Any], tuple[Any, Any]]:
        """:meth:`candidates` of one group of an M-grouped case, as a GEMM of its own: its ``rows`` of the stacked A
        (start, stop), its B (the ``group``-th matrix)."""
        k, inputs = self.case.shape.K, get_dtype(self.case.dtype)
        a, b = bits[0][rows[0] : rows[1]], bits[1][group * k : (group + 1) * k]  # the group's bits alone converted
        return (), (bits_to_float64(cp, a, inputs), bits_to_float64(cp, b, inputs))

    def unreadable(self, stats: ErrorStats) -> bool:
        """Whether an output too wrong for the usual misreadings (mostly NaN) is still compared with this family's."""
        return False

    def candidates(self, cp: Any, data: CaseInputs, bits: tuple[Any, Any], truth: Truth) -> tuple[Iterable[Any], Any]:
        """The family's own misreadings (``judge.misread``'s ``extra``), and A and B (float64, logical) as the common
        readings take them."""
        inputs = get_dtype(self.case.dtype)
        return (), tuple(bits_to_float64(cp, x, inputs) for x in bits)


class FloatInputs(InputStrategy):
    """Floating point: A, B and (beta != 0) a prior C, drawn zero-mean in [-1, 1) and stored exactly in the kernel's
    element type."""

    def draw(self, seed: int) -> CaseInputs:
        """Each operand's matrices stacked (a batch's, or a grouped case's as its layout lays them out)."""
        case = self.case
        dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        rng = np.random.default_rng(seed)
        dims = {op: storage_dims(case.spec, op, case.shape) for op in "ABC"}
        stacked = {op: (batch * rows, cols) for op, (batch, rows, cols) in dims.items()}
        a = random_matrix(rng, stacked["A"], np_dtype(dt))
        b = random_matrix(rng, stacked["B"], np_dtype(dt))
        c0 = random_matrix(rng, stacked["C"], np_dtype(out)) if case.c_prior else None
        _read_only(a, b, c0)
        return CaseInputs(a, b, c0, case.storage, case.shape.batch)


class IntegerInputs(InputStrategy):
    """INT8: integers in [-127, 127], summed in int32 and judged bit for bit; its misreading: 16-bit sums."""

    def draw(self, seed: int) -> CaseInputs:
        case, rng = self.case, np.random.default_rng(seed)
        m, n, k, batch = case.shape.M, case.shape.N, case.shape.K, case.shape.batch
        a, b = draw_int8(rng, batch * m, k), draw_int8(rng, batch * k, n)
        _read_only(a, b)
        return CaseInputs(a, b, None, case.storage, batch)

    def candidates(self, cp: Any, data: CaseInputs, bits: tuple[Any, Any], truth: Truth) -> tuple[Iterable[Any], Any]:
        return int_candidates(cp, truth.value, truth.gscale), super().candidates(cp, data, bits, truth)[1]


class ScaledInputs(InputStrategy):
    """FP8: each operand quantised block by block with its grid of scales (docs/verification.md#fp8-and-int8); the
    grids lie in guarded buffers of their own, stored as the header says; the truth is the product of exactly the
    dequantised operands; the misreadings of the scales and of the other FP8 format."""

    @property
    def scales(self) -> Scales:
        scales = self.case.spec.scales
        assert scales is not None
        return scales

    @property
    def scale_dtype(self) -> DType:
        return SCALE_DTYPES[self.scales.type]

    def own(self, operand: str) -> Shape:
        """The shape of one matrix of ``operand`` with its batch: the case's, or a grouped operand's (one a group)."""
        return operand_shape(self.case.spec, operand, self.case.shape)

    def draw(self, seed: int) -> CaseInputs:
        """Each matrix of each operand quantised with its own grid (a grouped operand: one a group, each group's
        scales its own), the matrices and their grids stacked."""
        case, rng = self.case, np.random.default_rng(seed)
        drawn = []
        for op in "AB":
            own = self.own(op)
            # neighbouring matrices of a batch differ in size by 2x (64x across each seventh: sizes 2^-3 to 2^3 in
            # turn), so that even their per-tensor UE8M0 scales differ and another group's shows
            gains = [2.0 ** (i % 7 - 3) for i in range(own.batch)] if own.batch > 1 else [1.0]
            parts = [draw_quantised(rng, op, own, case.dtype, self.scales, gain) for gain in gains]
            drawn.append(tuple(np.concatenate([part[i] for part in parts]) for i in range(2)))
        (a, sa), (b, sb) = drawn
        _read_only(a, b, sa, sb)
        return CaseInputs(a, b, None, case.storage, case.shape.batch, sa, sb)

    def _host(self, data: CaseInputs, operand: str) -> np.ndarray:
        grid = data.scale_a if operand == "A" else data.scale_b
        assert grid is not None
        return grid

    def _stored(self, data: CaseInputs, operand: str) -> np.ndarray:
        """The grids of ``operand`` as stored: each matrix's in its stored order, stacked."""
        grid, batch = self._host(data, operand), self.own(operand).batch
        if not self.scales.transposed(operand):
            return grid
        rows, cols = grid.shape[0] // batch, grid.shape[1]
        return grid.reshape(batch, rows, cols).transpose(0, 2, 1).reshape(batch * cols, rows)

    def grids(self, cp: Any, data: CaseInputs, guards: bool) -> dict[str, GuardedMatrix]:
        """Each operand's grids of scales in a fresh guarded buffer, each stored row padded to the header's ``align``
        (a grouped operand's one after the other, a group's grid ``rows x ld_scale`` elements after the last's)."""
        found = {}
        for op in "AB":
            stored = np.ascontiguousarray(self._stored(data, op))
            ld = self.scales.ld(op, self.own(op))
            found[op] = guarded(cp, self.scale_dtype, False, stored.shape, stored, guards=guards, ld=ld)
        return found

    def stored_view(self, grid: GuardedMatrix) -> Any:
        """A grid as it lies in its buffer (stored order, without the rows' padding), in its own type (UE8M0: its
        bytes, which CuPy has no type for)."""
        return grid.matrix(np.float32 if self.scale_dtype.name == "fp32" else np.uint8)

    def logical_view(self, grids: dict[str, GuardedMatrix], operand: str) -> Any:
        """A grid seen in logical order (a view): what a Python kernel is given; a grouped operand's grids one a
        group, groups first (3-D)."""
        view = self.stored_view(grids[operand])
        own = self.own(operand)
        if per_group(self.case.spec, operand, self.case.shape):
            rows = view.shape[0] // own.batch
            view = view.reshape(own.batch, rows, view.shape[1])
            return view.transpose(0, 2, 1) if self.scales.transposed(operand) else view
        return view.T if self.scales.transposed(operand) else view

    def kernel_views(self, grids: dict[str, GuardedMatrix]) -> list[tuple[Any, DType]]:
        """Each grid of scales, logical: ``fn(A, B, C, scale_a, scale_b, **params)``."""
        return [(self.logical_view(grids, op), self.scale_dtype) for op in "AB"]

    def grid_faults(self, cp: Any, data: CaseInputs, grids: dict[str, GuardedMatrix]) -> list[Fault]:
        found = []
        for op, arg in (("A", "scale_a"), ("B", "scale_b")):
            found += grids[op].guard_faults(cp, arg)
            changed = count_changed(cp, upload_bits(cp, self._stored(data, op)), self.stored_view(grids[op]))
            if changed:
                found.append(Fault(Check.INPUT_MODIFIED, f"{arg} (scales are inputs, read-only)", changed))
        return found

    def values(self, cp: Any, data: CaseInputs, operand: str) -> Any:
        """An operand's grid of scales as float64, logical, on the device."""
        return scale_values(cp, cp.asarray(self._host(data, operand)), self.scales.type)

    def _values_once(self, cp: Any, data: CaseInputs, operand: str) -> Any:
        """:meth:`values`, made once for the strategy's inputs (a grouped diagnosis asks it for each group)."""
        kept = self.__dict__.setdefault("_grids64", {})
        if (operand, id(data)) not in kept:
            kept[(operand, id(data))] = self.values(cp, data, operand)
        return kept[(operand, id(data))]

    def _dequantised(self, cp: Any, data: CaseInputs, operand: str, x64: Any) -> Any:
        own = self.own(operand)
        return dequantised(cp, x64, self.values(cp, data, operand), self.scales.block(operand, own), own.batch)

    def exact(self, cp: Any, data: CaseInputs, a64: Any, b64: Any) -> tuple[Any, Any]:
        """Each operand's FP8 elements times its scales: its exact values."""
        return self._dequantised(cp, data, "A", a64), self._dequantised(cp, data, "B", b64)

    def group_readings(
        self, cp: Any, data: CaseInputs, raw: tuple[Any, Any], exact: tuple[Any, Any], rows: Callable[[int], Any]
    ) -> dict[Misreading, GroupReading]:
        """Group g's B elements with group h's grid of B's scales (B one matrix a group); masked, group g's rows of A
        with slot h's grid of A's scales (its rows' scales, or its one scale), times its own B."""
        found: dict[Misreading, GroupReading] = {}
        spec, shape, k = self.case.spec, self.case.shape, self.case.shape.K
        if per_group(spec, "B", shape):
            own, grid = self.own("B"), self.values(cp, data, "B")
            per, block = grid.shape[0] // own.batch, self.scales.block("B", own)

            def other_scales(g: int, h: int) -> Any:
                return dequantised(cp, raw[1][g * k : (g + 1) * k], grid[h * per : (h + 1) * per], block)

            found[Misreading.OTHER_GROUP_SCALES] = other_scales
        if per_group(spec, "A", shape):
            own_a, grid_a = self.own("A"), self.values(cp, data, "A")
            per_a, block_a = grid_a.shape[0] // own_a.batch, self.scales.block("A", own_a)

            def other_a_scales(g: int, h: int) -> Any:
                r0, r1 = rows(g)
                mine = grid_a[h * per_a : (h + 1) * per_a]  # slot h's grid
                mine = mine[: r1 - r0] if block_a[0] == 1 else mine  # the rows' scales, or the slot's one
                return dequantised(cp, raw[0][r0:r1], mine, block_a), exact[1][g * k : (g + 1) * k]

            found[Misreading.OTHER_GROUP_A_SCALES] = other_a_scales
        return found

    def unreadable(self, stats: ErrorStats) -> bool:
        written_nan = stats.nonfinite - stats.unwritten  # FP8 read as the other format writes NaN, not its poison
        return 2 * written_nan > stats.total

    def candidates(self, cp: Any, data: CaseInputs, bits: tuple[Any, Any], truth: Truth) -> tuple[Iterable[Any], Any]:
        """The scales' and the format's slips; the common readings take the exact (dequantised) operands."""
        inputs = get_dtype(self.case.dtype)
        other = get_dtype(family_of(inputs.name).other(inputs.name))
        a64, b64 = (bits_to_float64(cp, x, inputs) for x in bits)
        others = tuple(bits_to_float64(cp, x, other) for x in bits)
        grids = self.values(cp, data, "A"), self.values(cp, data, "B")
        exact = self.exact(cp, data, a64, b64)
        return scale_candidates(cp, (a64, b64), grids, exact, self.scales, self.case.shape, others), exact

    def group_candidates(
        self, cp: Any, data: CaseInputs, bits: tuple[Any, Any], group: int, rows: tuple[int, int]
    ) -> tuple[Iterable[Any], tuple[Any, Any]]:
        """The scales' and the format's slips of one group, as a GEMM of its own: its ``rows`` of the stacked A with
        their scales (a masked slot's grid, or its rows of the one grid), its B with its own grid."""
        scales, (r0, r1), n, k = self.scales, rows, self.case.shape.N, self.case.shape.K
        inputs = get_dtype(self.case.dtype)
        other = get_dtype(family_of(inputs.name).other(inputs.name))
        rows_of = (slice(r0, r1), slice(group * k, (group + 1) * k))
        values = tuple(bits_to_float64(cp, x[part], inputs) for x, part in zip(bits, rows_of))  # the group's alone
        others = tuple(bits_to_float64(cp, x[part], other) for x, part in zip(bits, rows_of))
        grids = []
        for op in "AB":
            grid, own = self._values_once(cp, data, op), self.own(op)
            per = grid.shape[0] // own.batch
            mine = grid[group * per : (group + 1) * per] if own.batch > 1 else grid  # its matrix's grid
            if op == "A" and scales.block("A", own)[0] == 1:  # one scale row a row of A: the group's rows
                start = r0 - group * own.M if own.batch > 1 else r0  # within its slot, or the one A
                mine = mine[start : start + r1 - r0]
            grids.append(mine)
        shape = Shape(r1 - r0, n, k)
        exact = tuple(dequantised(cp, v, g, scales.block(op, shape)) for v, g, op in zip(values, grids, "AB"))
        return scale_candidates(cp, values, (grids[0], grids[1]), exact, scales, shape, others), exact


#: each input family's strategy, by the family's name (specs.families)
STRATEGIES: dict[str, type[InputStrategy]] = {"float": FloatInputs, "FP8": ScaledInputs, "INT8": IntegerInputs}


def input_strategy(case: Case) -> InputStrategy:
    """The case's input strategy: the one place the worker chooses it."""
    return STRATEGIES[family_of(case.dtype).name](case)
