"""A grouped GEMM's findings in words: rows of C that belong to no group and were written, and a group's rows computed
from A's padding rows (records.groups). Their misreadings (another group's B) are ``report/misread.py``'s."""

from __future__ import annotations

from ..records.diagnosis import Diagnosis, Finding
from ..records.verdicts import Check

__all__ = ["GROUP_ROWS", "group_rows_text"]


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
