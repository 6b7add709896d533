"""A grouped GEMM's truth and its judging, group by group: each group's own fp64 product and bounds (its own K, its
own norm), merged into one case's statistics; the rows of C that belong to no group, which a kernel must leave as
they were; and which other group's B (FP8: or scales) a wrong group's rows match (docs/verification.md#grouped-gemm).

Pure: ``xp`` is NumPy or CuPy; arrays are logical and stacked as :class:`~pytest_gemm.records.groups.GroupPlan` says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..records.dtypes import DType
from ..records.groups import GroupPlan
from ..records.outcome import ErrorStats, Fault, Misread
from ..records.verdicts import Check, Misreading
from .accuracy import WORST, Truth, _median, element_ratios, error_stats, tile_summary
from .misread import BATCHES_LISTED as MAX_PAIRS
from .misread import MATCH

__all__ = ["GroupReading", "GroupedTruth", "group_misreading", "group_rows", "outside_faults"]


def _truth(xp: Any, a: Any, b: Any, c0: Any | None, alpha: float, beta: float, out: DType) -> Truth:
    """One group's truth; a group of no K (K-grouped) is ``beta C0`` alone."""
    if a.shape[1]:
        return Truth.of(xp, a, b, c0, alpha, beta, out)
    zero = xp.zeros((a.shape[0], b.shape[1]))
    value, gscale = zero.copy(), zero.copy()
    if c0 is not None:
        value += beta * c0
        gscale += abs(beta) * xp.abs(c0)
    spread = 0.0 if c0 is None else abs(beta) * float(xp.linalg.norm(c0))
    return Truth(value, gscale, 2 * gscale, spread)  # H = |beta C0| + R, and R = |beta C0| with no product


@dataclass
class GroupedTruth(Truth):
    """The truth of every group, stacked as C is (rows of no group: 0, never judged), and each group's own."""

    plan: GroupPlan | None = None
    groups: tuple[Truth | None, ...] = ()

    @classmethod
    def of_groups(
        cls, xp: Any, plan: GroupPlan, a64: Any, b64: Any, c064: Any | None, alpha: float, beta: float, out: DType
    ) -> GroupedTruth:
        """The truths of ``plan``'s groups, from the stacked logical A, B and prior C in float64."""
        rows, n = (
            c064.shape if c064 is not None else (plan.operand_shape("C").M * plan.operand_shape("C").batch, plan.N)
        )
        value, gscale, hscale = (xp.zeros((rows, n)) for _ in range(3))
        found: list[Truth | None] = []
        for g in range(plan.count):
            r0, r1 = plan.c_rows(g)
            k0, k1 = plan.k_range(g)
            if r0 == r1:
                found.append(None)
                continue
            a = a64[r0:r1, k0:k1] if plan.layout != "k" else a64[:, k0:k1]
            b = b64[g * plan.K : (g + 1) * plan.K] if plan.layout != "k" else b64[k0:k1]
            truth = _truth(xp, a, b, None if c064 is None else c064[r0:r1], alpha, beta, out)
            value[r0:r1], gscale[r0:r1], hscale[r0:r1] = truth.value, truth.gscale, truth.hscale
            truth.value, truth.gscale, truth.hscale = value[r0:r1], gscale[r0:r1], hscale[r0:r1]  # views, no copies
            found.append(truth)
        spread = math.sqrt(sum(t.spread**2 for t in found if t is not None))
        floor = next((t.subnormal for t in found if t is not None), None)
        batch = plan.operand_shape("C").batch
        return cls(value, gscale, hscale, spread, floor, batch, plan=plan, groups=tuple(found))

    def _k(self, group: int) -> int:
        assert self.plan is not None
        k0, k1 = self.plan.k_range(group)
        return k1 - k0

    def ratios(self, xp: Any, got: Any, k: int, dtype: DType, out: DType) -> Any:
        """Each element's |error| as a multiple of its group's bound (0 in rows of no group)."""
        ratio = xp.zeros(got.shape)
        for g, truth in self.each():
            r0, r1 = self.plan.c_rows(g)  # type: ignore[union-attr]
            args = (truth.value, truth.gscale, self._k(g), dtype, out, truth.hscale, truth.subnormal)
            ratio[r0:r1] = element_ratios(xp, got[r0:r1], *args)
        return ratio

    def each(self) -> list[tuple[int, Truth]]:
        """Each non-empty group and its truth."""
        return [(g, t) for g, t in enumerate(self.groups) if t is not None]

    def passes(self, xp: Any, got: Any, k: int, dtype: DType, out: DType) -> bool:
        """Whether every group passes its own tests (what :meth:`judge` would say, without its figures); rows of no
        group are not judged."""
        for g, truth in self.each():
            r0, r1 = self.plan.c_rows(g)  # type: ignore[union-attr]
            if not truth.passes(xp, got[r0:r1], self._k(g), dtype, out):
                return False
        return True

    def judge(
        self, xp: Any, got: Any, k: int, dtype: DType, out: DType, unchanged: Any | None = None, ratio: Any = None
    ) -> ErrorStats:
        """Every group judged by its own bounds (:func:`~.accuracy.error_stats`), merged: the counts summed, the
        worst elements of all, and the normwise test of the group that fails it most."""
        if ratio is None:
            ratio = self.ratios(xp, got, k, dtype, out)
        parts: list[tuple[int, ErrorStats]] = []
        for g, truth in self.each():
            r0, r1 = self.plan.c_rows(g)  # type: ignore[union-attr]
            stats = error_stats(
                xp, got[r0:r1], truth.value, truth.gscale, self._k(g), dtype, out,
                None if unchanged is None else unchanged[r0:r1], scale_norm=truth.spread, hscale=truth.hscale,
                subnormal=truth.subnormal, ratio=ratio[r0:r1], norms=truth.norms(xp),
            )  # fmt: skip
            parts.append((r0, stats))
        return _merged(xp, parts, ratio, self.plan, self.batch)  # type: ignore[arg-type]


def group_rows(xp: Any, plan: GroupPlan, rows: int) -> Any:
    """Which rows of the stacked C belong to a group."""
    inside = xp.zeros(rows, dtype=bool)
    for g in range(plan.count):
        r0, r1 = plan.c_rows(g)
        inside[r0:r1] = True
    return inside


def _merged(xp: Any, parts: list[tuple[int, ErrorStats]], ratio: Any, plan: GroupPlan, batch: int) -> ErrorStats:
    def failing(stats: ErrorStats) -> float:
        if stats.norm_error in (0.0, math.inf):
            return stats.norm_error
        return stats.norm_error / stats.norm_tol

    worst_norm = max((s for _, s in parts), key=failing)
    worst = sorted(
        ((r + r0, c, got, truth, q) for r0, s in parts for r, c, got, truth, q in s.worst), key=lambda w: -w[4]
    )[:WORST]
    inside = group_rows(xp, plan, ratio.shape[0])
    tiles, n_bad, n_tiles = tile_summary(xp, (ratio > 1.0) & inside[:, None], batch=batch)
    judged = ratio[inside].ravel()
    return replace(
        worst_norm,
        max_ratio=max(s.max_ratio for _, s in parts),
        median_ratio=_median(xp, judged) if judged.size else 0.0,
        bad=sum(s.bad for _, s in parts),
        total=sum(s.total for _, s in parts),
        nonfinite=sum(s.nonfinite for _, s in parts),
        unwritten=sum(s.unwritten for _, s in parts),
        worst=tuple(worst),
        bad_tiles=tiles,
        n_bad_tiles=n_bad,
        n_tiles=n_tiles,
    )


def outside_faults(xp: Any, plan: GroupPlan, unchanged: Any, allowed: bool) -> list[Fault]:
    """The rows of C that belong to no group and were written (``unchanged``: where C still holds what it started
    as, stacked and logical), by kind: an empty masked group's slot, rows past a masked group's end, a contiguous
    group's padding; each Fault's ``where`` lists the groups. None when the kernel may write them (``allowed``)."""
    if allowed:
        return []
    found: dict[Check, tuple[list[int], int]] = {}
    for r0, r1, g in plan.outside():
        written = int((~unchanged[r0:r1]).any(axis=1).sum())
        if not written:
            continue
        kind = Check.PADDING_WRITTEN
        if plan.layout == "masked":
            kind = Check.EMPTY_GROUP if plan.sizes[g] == 0 else Check.PAST_GROUP_END
        groups, rows = found.get(kind, ([], 0))
        found[kind] = ([*groups, g], rows + written)
    return [Fault(kind, _groups_text(kind, groups), rows) for kind, (groups, rows) in found.items()]


#: where each kind of written row lies, before the groups it lists
_WHERE = {
    Check.PADDING_WRITTEN: "the padding rows after group",
    Check.PAST_GROUP_END: "the slot of group",
    Check.EMPTY_GROUP: "the slot of empty group",
}


def _groups_text(kind: Check, groups: list[int]) -> str:
    more = f" and {len(groups) - MAX_PAIRS} more" if groups[MAX_PAIRS:] else ""
    return f"{_WHERE[kind]}{'s' if len(groups) > 1 else ''} {', '.join(map(str, groups[:MAX_PAIRS]))}{more}"


def _tried(g: int, count: int) -> list[int]:
    """The groups whose B group ``g`` may have read by the usual slips: the first, the neighbours, the last."""
    return [h for h in dict.fromkeys((0, g - 1, g + 1, count - 1)) if 0 <= h < count and h != g]


#: a reading of group g's data with group h's: (g, h) -> the float64 K x N B it gives, or (its rows of A, B) where
#: the reading is of A too
GroupReading = Callable[[int, int], Any]


def group_misreading(
    xp: Any, truth: GroupedTruth, got: Any, a64: Any, readings: Mapping[Misreading, GroupReading], c064: Any | None,
    alpha: float, beta: float, dtype: DType, out: DType,
) -> Misread | None:  # fmt: skip
    """Which reading of another group's data the wrong groups' rows match (M-grouped layouts), group by group: ``(g,
    h)`` pairs, group g's rows computed with group h's B (``readings``' :attr:`~Misreading.OTHER_GROUP_B`) or, for
    FP8, with its own B's elements and group h's scales. Where each group that read another's B is only in part
    wrong and h is empty, it is an empty group that was not skipped (its tile computed over the next group's first
    rows). The kind with the most groups is named; None when no wrong group matches."""
    plan = truth.plan
    if plan is None or plan.layout == "k":
        return None
    ratio = truth.ratios(xp, got, plan.K, dtype, out)
    found: dict[Misreading, tuple[list[tuple[int, int]], int, int]] = {}
    for g, _ in truth.each():
        r0, r1 = plan.c_rows(g)
        bad = ratio[r0:r1] > 1.0
        wrong = int(bad.sum())
        if wrong < plan.N:  # less than a row's worth: not a group's B
            continue
        match = _group_match(xp, plan, g, (r0, r1), bad, got, a64, readings, c064, alpha, beta, dtype, out)
        if match is not None:
            kind, h, hits = match
            pairs, matched, partial = found.get(kind, ([], 0, 0))
            empty = kind == Misreading.OTHER_GROUP_B and plan.sizes[h] == 0
            partial += empty and wrong < MATCH * (r1 - r0) * plan.N  # a tile over the next group
            found[kind] = ([*pairs, (g, h)], matched + hits, partial)
    if not found:
        return None
    kind, (pairs, matched, partial) = max(found.items(), key=lambda item: len(item[1][0]))
    if kind == Misreading.OTHER_GROUP_B and partial == len(pairs):
        kind = Misreading.EMPTY_GROUP_COMPUTED
    return Misread(kind, matched, tuple(pairs[:MAX_PAIRS]), len(pairs))


def _group_match(
    xp: Any, plan: GroupPlan, g: int, rows: tuple[int, int], bad: Any, got: Any, a64: Any,
    readings: Mapping[Misreading, GroupReading], c064: Any | None, alpha: float, beta: float, dtype: DType, out: DType,
) -> tuple[Misreading, int, int] | None:  # fmt: skip
    """The first reading (kind, the other group h, the wrong elements it matches) that group ``g``'s wrong rows
    match, trying the groups the usual slips reach."""
    r0, r1 = rows
    wrong = int(bad.sum())
    for h in _tried(g, plan.count):
        for kind, read in readings.items():
            given = read(g, h)
            a, b = given if isinstance(given, tuple) else (a64[r0:r1], given)
            other = _truth(xp, a, b, None if c064 is None else c064[r0:r1], alpha, beta, out)
            args = (other.value, other.gscale, plan.K, dtype, out, other.hscale, other.subnormal)
            hits = int(((element_ratios(xp, got[r0:r1], *args) <= 1.0) & bad).sum())
            if hits >= MATCH * wrong:  # the wrong rows (a tile that computed the wrong group's, perhaps) match
                return kind, h, hits
    return None
