"""A grouped GEMM's findings in words: rows of C that belong to no group and were written, and a group's rows computed
from A's padding rows (records.groups); and where a row of its stacked C lies (a group's row, or padding). Their
misreadings (another group's B) are ``report/misread.py``'s."""

from __future__ import annotations

from collections.abc import Callable

from ..records.diagnosis import Diagnosis, Finding
from ..records.groups import Groups, group_plan
from ..records.shapes import Shape
from ..records.verdicts import Check

__all__ = ["GROUP_ROWS", "group_rows_text", "groups_line", "row_namer"]


#: what each grouped GEMM's check means, after its count of rows (records.groups)
GROUP_ROWS = {
    Check.PADDING_WRITTEN: "a contiguous group's padding rows belong to no group and must keep what C held",
    Check.PAST_GROUP_END: "a masked slot's rows past its group's count belong to no group and must keep what C held",
    Check.EMPTY_GROUP: "a group of no rows has nothing to compute; its slot must keep what C held",
    Check.PADDING_READ: "they turn finite when A's padding rows (NaN, belonging to no group) are zeroed",
}


def group_rows_text(f: Finding, d: Diagnosis) -> str:
    unit = "element(s)" if f.kind == Check.PADDING_READ else "row(s)"
    allowed = "" if f.kind == Check.PADDING_READ else " (a kernel that may write them declares writes_padding)"
    return f"{f.kind}: {f.count} {unit} in {f.region}: {GROUP_ROWS[Check(f.kind)]}{allowed}"


def row_namer(d: Diagnosis) -> Callable[[int], str] | None:
    """For a grouped case, a function naming a row of its stacked C: ``group 3 row 12``, or the padding after a
    group; None for another case."""
    groups, shape = d.declared.groups, d.shape
    if groups is None or shape is None or not shape.groups:
        return None
    plan = group_plan(groups, shape)
    spans = [(*plan.c_rows(g), g, "row") for g in range(plan.count)]
    spans += [(r0, r1, g, "padding") for r0, r1, g in plan.outside()]

    def name(row: int) -> str:
        for r0, r1, g, what in spans:
            if r0 <= row < r1:
                return f"group {g} row {row - r0}" if what == "row" else f"the padding after group {g}"
        return f"row {row}"

    return name


#: group sizes a failure lists before "..."
_SIZES_LISTED = 16


def groups_line(groups: Groups, shape: Shape | None = None) -> str:
    """A grouped kernel's declaration in words, with the group sizes of ``shape`` where given."""
    padding = f", rows padded to {groups.align}" if groups.align > 1 else ""
    padding += ", may write rows of no group (writes_padding)" if groups.writes_padding else ""
    line = f"groups: {groups.layout} layout{padding}, sizes {groups.sizes!r}"
    if shape is not None and shape.groups:
        sizes = group_plan(groups, shape).sizes
        listed = ", ".join(map(str, sizes[:_SIZES_LISTED])) + (", ..." if len(sizes) > _SIZES_LISTED else "")
        line += f" (at {shape.id}, {'k' if groups.layout == 'k' else 'rows'} per group: {listed})"
    return line
