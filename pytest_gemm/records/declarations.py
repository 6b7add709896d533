"""What a kernel's header declares that changes how its cases are checked, as one typed record.

A case's :class:`Declarations` travel with its diagnosis (``records.diagnosis``), so that the report layer words a
failure with the orders, accumulation and scales the kernel declared, from data and never from sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .epilogue import Epilogue
from .groups import Groups
from .scales import Scales
from .storage import Storage

__all__ = ["Declarations"]


@dataclass(frozen=True)
class Declarations:
    """The declarations of one case's kernel that change its checks (docs/verification.md#declarations)."""

    storage: Storage = field(default_factory=Storage)  # each operand's order in the case's variant
    accumulate: str = ""  # a declared accumulation ("fp16"); '' for the dtype's default
    always_reads_c: bool = False  # C holds finite prior data in its beta = 0 cases too
    nondeterministic: str = ""  # why its launches are not compared bit for bit ('' when they are)
    scales: Scales | None = None  # an FP8 kernel's scales
    groups: Groups | None = None  # a grouped kernel's layout and group sizes (where its rows lie)
    epilogue: Epilogue | None = None  # a fused epilogue (what D is), or D written apart from C

    @property
    def default(self) -> bool:
        """Whether the kernel declares nothing that changes its checks."""
        return self == Declarations()
