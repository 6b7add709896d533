"""A user's file read bounded (fileio.read_regular): a regular file only, never past its kind's limit."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from pytest_gemm.fileio import MAX_BASELINE_BYTES, MAX_RUN_BYTES, RefusedFile, read_regular, size_text


def test_a_regular_file_is_read_whole_up_to_its_limit(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(b"x" * 100)
    assert read_regular(path, 100, "a saved run") == b"x" * 100
    with pytest.raises(RefusedFile, match=r"^is 101 bytes; a saved run may be at most 100 bytes$"):
        path.write_bytes(b"x" * 101)
        read_regular(path, 100, "a saved run")


def test_a_sparse_file_past_the_limit_is_refused_by_its_size(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(MAX_RUN_BYTES + 1)
    with pytest.raises(RefusedFile, match=r"^is 1,000,000,001 bytes; a saved run may be at most 1,000,000,000 bytes$"):
        read_regular(path, MAX_RUN_BYTES, "a saved run")
    assert size_text(MAX_RUN_BYTES) == "1 GB" and size_text(MAX_BASELINE_BYTES) == "256 MB"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
        (lambda p: p.mkdir(), "is a folder, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "is a symlink to /dev/zero, a character device, not a regular file"),
    ],
    ids=["fifo", "folder", "dev-zero"],
)
def test_what_is_not_a_regular_file_is_refused_saying_what_it_is(tmp_path, make, said):
    path = tmp_path / "b.json"
    make(path)
    with pytest.raises(RefusedFile) as info:
        read_regular(path, MAX_BASELINE_BYTES, "a baseline file")  # (a FIFO without a writer: never waited for)
    assert str(info.value) == said


def test_a_socket_that_cannot_be_opened_is_named_and_a_missing_file_is_the_callers(tmp_path):
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(RefusedFile, match=r"^is a socket, not a regular file$"):
            read_regular(path, 10, "a saved run")
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "gone.json", 10, "a saved run")
    assert read_regular(Path("/proc/self/status"), 1 << 20, "a file")  # (a size of 0 that holds bytes: read)
