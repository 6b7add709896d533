"""A grouped GEMM's groups, as records: what a kernel declares (:class:`Groups`, the header's ``groups`` key) and what
one case's groups are (:class:`GroupPlan`): each group's size, where its rows lie in A and C, and the integer arrays a
kernel is given to find them (docs/kernel-files.md#grouped-gemm).

A grouped shape ``MxNxKgG`` is G GEMMs that share N and K (M-grouped layouts: one weight matrix B_g a group, the
experts of an MoE layer) or M and N (the K-grouped layout: an MoE layer's weight gradient). The sizes split the
shape's M (its K, K-grouped) over the groups, drawn from the declared distribution by a generator seeded with the
shape alone, so a shape's groups are the same in every run and in every M-grouped layout (its timings compare):

* ``contiguous``: A is one matrix of every group's rows, one group after the other, each group's rows padded to a
  multiple of ``align`` (padding rows belong to no group); B is G matrices K x N; C is one matrix as A;
* ``masked``: A is G slots of ``slot`` rows (the largest group, rounded up to ``align``), group g's rows the first
  ``sizes[g]`` of its slot; B is G matrices; C is G slots as A;
* ``k``: A (M x K) and B (K x N) are one matrix each, group g's part of K a range of columns of A and of rows of B;
  C is G matrices M x N, one a group.

Rows of C that belong to no group (padding, a slot past its group's end) must keep what they held unless the kernel
declares ``writes_padding``; rows of A there hold NaN, so a kernel that reads them as data writes NaN.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from .shapes import Shape

__all__ = [
    "DISTRIBUTIONS", "GROUP_ARGS", "LAYOUTS", "PER_GROUP", "POINTER_ARGS", "TINY_GROUP",
    "GroupPlan", "Groups", "group_plan",
]  # fmt: skip

#: each layout, and what it is
LAYOUTS = {
    "contiguous": "every group's rows in one A and one C, one group after the other (padded to align)",
    "masked": "a fixed slot of rows a group in A and C, its first rows valid",
    "k": "K split into ranges, one a group; C one matrix a group (weight gradients)",
}
#: each distribution of group sizes, and what it is
DISTRIBUTIONS = {
    "edge": "random, with an empty group and a group smaller than a tile (from 3 groups)",
    "random": "imbalanced at random, as routed tokens are (a flat Dirichlet's weights)",
    "uniform": "as equal as the total allows",
}
#: the operands that are one matrix a group, in each layout (the others are one matrix over all groups)
PER_GROUP = {"contiguous": "B", "masked": "ABC", "k": "C"}
#: the rows of a group "smaller than a tile" in the edge distribution
TINY_GROUP = 5
#: the integer arrays (int32) a grouped kernel may take, and what each holds
GROUP_ARGS = {
    "group_ends": "each group's end (its last row + 1, K-grouped its last k + 1): cumulative, torch's offs",
    "group_offsets": "each group's first row (K-grouped: first k), then the end of the last: G + 1 values",
    "group_rows": "each group's rows (K-grouped: its K), DeepGEMM's masked_m",
    "group_index": "each row of A's group, -1 for a padding row, DeepGEMM's m_indices (contiguous only)",
    "A_ptrs": "each group's A: the address of its first element (CUTLASS's pointer-array grouped GEMM), 64-bit",
    "B_ptrs": "each group's B: the address of its first element, 64-bit",
    "C_ptrs": "each group's C: the address of its first element, 64-bit",
}
#: the group arrays that hold addresses (a .cu kernel's ``T**``), not integers from the plan: made for each set of
#: operands (M-grouped layouts only)
POINTER_ARGS = ("A_ptrs", "B_ptrs", "C_ptrs")


@dataclass(frozen=True)
class Groups:
    """What a grouped kernel declares: its layout, the distribution its group sizes are drawn from, the multiple
    each group's rows are padded to (contiguous) or each slot rounded up to (masked), which group arrays a Python
    kernel is given after C (in order), and whether it may write C's rows that belong to no group."""

    layout: str
    sizes: str = "edge"
    align: int = 1
    args: tuple[str, ...] = ()
    writes_padding: bool = False

    def __post_init__(self) -> None:
        """The one rule of a valid ``groups`` table: each refusal a ValueError naming the entry at fault."""
        if not isinstance(self.layout, str) or self.layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {', '.join(map(repr, LAYOUTS))}, got {self.layout!r}")
        if not isinstance(self.sizes, str) or self.sizes not in DISTRIBUTIONS:
            raise ValueError(f"sizes: expected one of {', '.join(map(repr, DISTRIBUTIONS))}, got {self.sizes!r}")
        if type(self.align) is not int or not 1 <= self.align <= 1024:
            raise ValueError(f"align: expected an integer from 1 to 1024, got {self.align!r}")
        if self.layout == "k" and self.align != 1:
            raise ValueError("align: a K-grouped layout has no padding (align = 1)")
        for arg in self.args:
            if arg not in GROUP_ARGS:
                raise ValueError(f"args: expected names from {', '.join(GROUP_ARGS)}, got {arg!r}")
        if self.layout == "k" and set(self.args) & set(POINTER_ARGS):
            raise ValueError("args: pointer arrays give each group's matrices; K-grouped, groups are ranges of K")
        if self.layout != "contiguous" and "group_index" in self.args:
            raise ValueError(f"args: group_index lists the rows of a contiguous A; a {self.layout!r} layout has none")
        if len(set(self.args)) != len(self.args):
            raise ValueError(f"args: a group array named twice in {list(self.args)}")
        if not isinstance(self.writes_padding, bool):
            raise ValueError(f"writes_padding: expected true or false, got {self.writes_padding!r}")
        if self.layout == "k" and self.writes_padding:
            raise ValueError("writes_padding: a K-grouped C has no rows outside the groups")


@dataclass(frozen=True)
class GroupPlan:
    """One case's groups: the layout, each group's size (rows; K-grouped: its K) and the padding multiple, over a
    shape's N and its ungrouped dimension (K; K-grouped: M)."""

    layout: str
    sizes: tuple[int, ...]
    align: int
    M: int
    N: int
    K: int

    @property
    def imports(self) -> tuple[str, ...]:
        """The libraries its groups' peers are reached through (worker/grouped_peer.py, worker/grouped_fp8_peer.py)."""
        return ("torch",)

    @property
    def count(self) -> int:
        return len(self.sizes)

    def _padded(self, size: int) -> int:
        return -(-size // self.align) * self.align

    @property
    def starts(self) -> tuple[int, ...]:
        """Where each group begins: its first row of A and C (contiguous), its first k (K-grouped), its slot's first
        row (masked)."""
        found, at = [], 0
        for size in self.sizes:
            found.append(at)
            at += self.slot if self.layout == "masked" else size if self.layout == "k" else self._padded(size)
        return tuple(found)

    @property
    def slot(self) -> int:
        """A masked slot's rows: the largest group's, rounded up to ``align`` (at least one row)."""
        return self._padded(max(1, *self.sizes))

    @property
    def rows(self) -> int:
        """The rows of A (and of C) in all: with padding (contiguous), every slot's (masked); K-grouped, M."""
        if self.layout == "k":
            return self.M
        if self.layout == "masked":
            return self.slot * self.count
        return sum(self._padded(size) for size in self.sizes)

    def per_group(self, operand: str) -> bool:
        """Whether ``operand`` is one matrix a group (a Python kernel gets it 3-D, groups first, even for one group):
        B in M-grouped layouts, A and C too when masked, C when K-grouped."""
        return operand in PER_GROUP[self.layout]

    def operand_shape(self, operand: str) -> Shape:
        """The shape whose ``stored_shape`` and batch give ``operand``'s matrices: contiguous A and C one matrix of
        :attr:`rows` rows, B a batch of G; masked, every operand a batch of G (A and C of :attr:`slot` rows);
        K-grouped, A and B one matrix over the whole K, C a batch of G."""
        if self.layout == "k":
            return Shape(self.M, self.N, self.K, self.count if operand == "C" else 1)
        if self.layout == "masked":
            return Shape(self.slot, self.N, self.K, self.count)
        return Shape(self.rows, self.N, self.K, self.count if operand == "B" else 1)

    def c_rows(self, group: int) -> tuple[int, int]:
        """Group ``group``'s rows of the stacked logical C (and, M-grouped, of A): start, stop."""
        if self.layout == "k":
            return group * self.M, (group + 1) * self.M
        start = self.starts[group]
        return start, start + self.sizes[group]

    def k_range(self, group: int) -> tuple[int, int]:
        """Group ``group``'s part of K: all of it, except K-grouped."""
        if self.layout != "k":
            return 0, self.K
        start = self.starts[group]
        return start, start + self.sizes[group]

    def outside(self) -> tuple[tuple[int, int, int], ...]:
        """The rows of C (stacked, logical) that belong to no group, as (start, stop, the group before them): a
        contiguous group's padding, a masked slot past its group's end. K-grouped: none."""
        if self.layout == "k":
            return ()
        found = []
        for g, size in enumerate(self.sizes):
            end = self.starts[g] + (self.slot if self.layout == "masked" else self._padded(size))
            if self.starts[g] + size < end:
                found.append((self.starts[g] + size, end, g))
        return tuple(found)

    def group_args(self) -> dict[str, tuple[int, ...]]:
        """Every group array (:data:`GROUP_ARGS`) of this plan, by name."""
        ends = tuple(start + size for start, size in zip(self.starts, self.sizes))
        found = {
            "group_ends": ends,
            "group_offsets": (*self.starts, ends[-1] if ends else 0),
            "group_rows": self.sizes,
        }
        if self.layout != "k":
            index = [-1] * self.rows
            for g, (start, size) in enumerate(zip(self.starts, self.sizes)):
                index[start : start + size] = [g] * size
            found["group_index"] = tuple(index)
        return found

    @property
    def ints(self) -> dict[str, int]:
        """The integers a ``.cu`` grouped kernel is given: ``M``, the rows of one A (its slot, masked), ``N``, ``K``
        (all of it, K-grouped) and ``num_groups``."""
        a = self.operand_shape("A")
        return {"M": a.M, "N": self.N, "K": self.K, "num_groups": self.count}


def _sizes(total: int, count: int, distribution: str, seed: str) -> tuple[int, ...]:
    """``total`` split over ``count`` groups by ``distribution``, drawn by a generator seeded with ``seed``."""
    if distribution == "uniform" or count == 1:
        return tuple(total // count + (1 if g < total % count else 0) for g in range(count))
    rng = random.Random(seed)
    fixed: dict[int, int] = {}
    if distribution == "edge" and count >= 3:
        fixed = {count // 2: 0, 0: min(TINY_GROUP, total)}  # an empty group in the middle, a tiny first one
    free = [g for g in range(count) if g not in fixed]
    left = total - sum(fixed.values())
    weights = [rng.gammavariate(1.0, 1.0) for _ in free]
    cuts = [int(left * w / sum(weights)) for w in weights]
    for i in range(left - sum(cuts)):  # the remainder, one row at a time, to the largest weights
        cuts[sorted(range(len(free)), key=lambda j: -weights[j])[i % len(free)]] += 1
    sizes = dict(fixed) | dict(zip(free, cuts))
    return tuple(sizes[g] for g in range(count))


@lru_cache(maxsize=256)
def group_plan(groups: Groups, shape: Shape) -> GroupPlan:
    """The groups of ``shape`` (``MxNxKgG``) for a kernel that declares ``groups``: the same in every run."""
    total = shape.K if groups.layout == "k" else shape.M
    seed = f"{'k' if groups.layout == 'k' else 'm'}:{groups.sizes}:{shape.id}"  # M-grouped layouts: the same groups
    sizes = _sizes(total, shape.groups, groups.sizes, seed)
    return GroupPlan(groups.layout, sizes, groups.align, shape.M, shape.N, shape.K)
