"""Why a kernel file is not read (specs/source.py): the same words whether asked before reading it (file_problem, by
which collection and the hints pass it over) or on reading it (read_kernel_bytes, the collection error)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.source import MAX_KERNEL_FILE_BYTES, file_problem, read_kernel_bytes


def _said_on_reading(path: Path) -> str:
    with pytest.raises(KernelFileError) as refused:
        read_kernel_bytes(path, "kernels/k.cu")
    return refused.value.message


@pytest.mark.parametrize(
    ("size", "said"),
    [
        (MAX_KERNEL_FILE_BYTES + 1, "is 16,000,001 bytes; a kernel file may be at most 16,000,000 bytes"),
        (20_000_000, "is 20 MB; a kernel file may be at most 16 MB"),
    ],
    ids=["just past the limit", "well past it"],
)
def test_a_file_too_large_is_said_in_the_words_reading_it_says(tmp_path, size, said):
    """file_problem said `is 16 MB; a kernel file may be at most 16 MB` of a file one byte past the limit, which
    reading it says in bytes, the two sizes being the same in MB."""
    path = tmp_path / "k.cu"
    with open(path, "wb") as handle:
        handle.truncate(size)  # sparse: no 16 MB written
    assert file_problem(path) == _said_on_reading(path) == said


def test_a_file_that_is_not_regular_is_said_in_the_words_reading_it_says(tmp_path):
    path = tmp_path / "k.cu"
    os.mkfifo(path)
    assert file_problem(path) == _said_on_reading(path) == "is a FIFO, not a regular file"


def test_a_readable_file_within_the_limit_has_no_problem(tmp_path):
    path = tmp_path / "k.cu"
    path.write_bytes(b"x" * 100)
    assert file_problem(path) is None and file_problem(tmp_path / "missing.cu") is None
