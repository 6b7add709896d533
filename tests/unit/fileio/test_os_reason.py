"""Why a file operation failed, in one helper's words (fileio.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from support import ROOT


def test_one_helper_words_why_a_file_operation_failed(tmp_path):
    """A folder on the path that is a file, one that is no folder at all, or the system's reason, in
    the same words wherever a file is read or written; only pytest_gemm/fileio.py reads an OSError's strerror."""
    from pytest_gemm.fileio import os_reason

    (tmp_path / "file.txt").write_text("x\n")

    def failed(path: Path) -> OSError:
        try:
            path.read_bytes()
        except OSError as exc:
            return exc
        raise AssertionError(path)

    under = tmp_path / "file.txt" / "deeper" / "run.json"
    assert os_reason(failed(under), under) == f"{tmp_path / 'file.txt'} is a file, not a folder"
    assert os_reason(failed(under), under, shown=lambda p: p.name) == "file.txt is a file, not a folder"
    assert os_reason(failed(Path("/dev/null/x")), Path("/dev/null/x")) == "/dev/null is not a folder"
    assert os_reason(failed(tmp_path / "gone.json"), tmp_path / "gone.json") == "No such file or directory"
    package = ROOT / "pytest_gemm"
    readers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "strerror"
    )
    assert readers == ["fileio.py"]
