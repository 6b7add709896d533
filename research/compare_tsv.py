"""Compare two runs' outcomes and kernel/cuBLAS ratios from the NAME.tsv files research/artifact-sizes.sh writes.

    python research/compare_tsv.py BEFORE.tsv AFTER.tsv

Tests are matched by their name (the part after the file, as older files have it), counting repeats, so that two
compile items of one name in two files are two tests. Prints whether every outcome is the same, and how far the
ratios of the cases timed in both moved: median, 95th percentile and largest |change|, and how many within 1%
and 2%.
"""

from __future__ import annotations

import sys
from collections import Counter
from statistics import median


def _read(path: str) -> tuple[Counter, dict[str, float]]:
    outcomes, ratios = Counter(), {}
    with open(path, encoding="utf-8") as lines:
        rows = list(lines)
    for line in rows:
        test, outcome, ratio = line.rstrip("\n").split("\t")
        name = test.split("::", 1)[-1]
        outcomes[(name, outcome)] += 1
        if ratio:
            ratios[name] = float(ratio)
    return outcomes, ratios


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    (first, first_ratio), (second, second_ratio) = _read(argv[0]), _read(argv[1])
    same = first == second
    print(f"outcomes: {sum(first.values())} and {sum(second.values())} tests; the same: {same}")
    for (name, outcome), count in sorted((first - second).items()):
        print(f"  only in {argv[0]}: {name} {outcome} x{count}")
    for (name, outcome), count in sorted((second - first).items()):
        print(f"  only in {argv[1]}: {name} {outcome} x{count}")
    moved = sorted(abs(second_ratio[t] / first_ratio[t] - 1) for t in first_ratio.keys() & second_ratio.keys())
    if moved:
        p95 = moved[min(len(moved) - 1, int(0.95 * len(moved)))]
        print(
            f"ratios: {len(moved)} timed in both; |change| median {100 * median(moved):.2f}%, p95 {100 * p95:.2f}%, "
            f"max {100 * moved[-1]:.2f}%; within 1%: {sum(m < 0.01 for m in moved)}, "
            f"within 2%: {sum(m < 0.02 for m in moved)}"
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
