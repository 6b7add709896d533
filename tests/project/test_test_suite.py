"""Rules for this project's own tests."""

from __future__ import annotations

import ast

from support import ROOT


def test_no_test_calls_a_bare_pytest_gemm_executable():
    """A test that calls a bare `pytest-gemm` fails where the virtual environment's bin is not on PATH: every test
    runs the command as `sys.executable -m pytest_gemm.cli`."""
    bare = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value == "pytest-gemm":
                    bare.append(f"{path.name}:{node.lineno}")
    assert bare == []
