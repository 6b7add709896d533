"""What the xdist workers of one run share: a folder made once for all of them, and the GPU, one test at a time.

``xdist_group`` marks keep a module on one worker and the GPU tests in one process under ``--dist loadgroup``, but
pytest 9.2 ignores them silently (xdist's grouping changes a test's id, which pytest 9.2 no longer lets it do:
pytest-dev/pytest-xdist#1386), so neither may rest on them. Both follow pytest-xdist's own recipe: a file lock in a
folder every worker can see.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

__all__ = ["GPU_LOCK", "made_once"]

#: held by a GPU test from its setup to its teardown: never two at once on the host's GPUs, whichever process runs
#: them (xdist's workers, or another pytest of the same user)
GPU_LOCK = Path(tempfile.gettempdir()) / f"pytest-gemm-tests-gpu-{os.getuid() if hasattr(os, 'getuid') else 0}.lock"


def made_once(config: pytest.Config, factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name``, made by ``make(folder)`` once for the whole run: by the first xdist worker that asks, the
    others waiting for it and then reading it (a make that raised is made again by the next to ask)."""
    worker = getattr(config, "workerinput", None)  # an xdist worker's (no xdist, or -p no:xdist: None)
    if worker is None:  # this process alone
        folder = factory.mktemp(name)
        make(folder)
        return folder
    folder = factory.getbasetemp().parent / f"{name}-{worker['testrunuid']}"  # this run's, wherever basetemp is
    with FileLock(f"{folder}.lock"):
        done = folder.parent / f"{folder.name}.made"  # beside it: the folder holds what make wrote, nothing else
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder
