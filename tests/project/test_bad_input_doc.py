"""docs/bad-input.md names, for every bad input it lists, the tests that hold its answer: each named test exists."""

from __future__ import annotations

import ast
import re

from support import ROOT

DOC = ROOT / "docs" / "bad-input.md"


def _named_tests() -> list[tuple[str, str, str]]:
    """(row, test file, test function) for each test a row of the tables names."""
    named = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) not in (3, 4) or cells[-1] in ("tests", "---"):
            continue
        file = None
        refs = re.findall(r"`([\w./]*::\w+)`", cells[-1])
        assert refs, f"a row of {DOC.name} names no test: {line}"
        for ref in refs:
            head, name = ref.split("::")
            file = head or file
            named.append((cells[0], file, name))
    return named


def test_every_row_of_the_bad_input_tables_names_tests_that_exist():
    named = _named_tests()
    rows = {row for row, _, _ in named}
    numbered = {row for row in rows if re.fullmatch(r"[\d, ]+", row)}
    assert len(numbered) >= 30, sorted(rows)  # the numbered rows of the table tried, 35 and 36 as one
    assert len(rows - numbered - {"-"}) >= 4, sorted(rows)  # and what running the table again found
    missing = []
    for row, file, name in named:
        tree = ast.parse((ROOT / "tests" / file).read_text(encoding="utf-8"))
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        if name not in functions:
            missing.append(f"row {row}: {file}::{name}")
    assert not missing, missing
