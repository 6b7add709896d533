"""Guards on pytest's walk through the kernel folders (with --gemm-kernels): each kernel file collected once
whatever symlinks lead to it (under the first of its paths the run collects), no symlink loop descended, and a
kernel file that is not a regular file (a FIFO, a link to a device) shown as a collection error instead of being
passed over in silence.

What a guard did is said after collection, in :func:`walk_notes`' lines (under pytest-xdist, passed on by the
workers, which collect, and said at the end of the run: :func:`pass_on_notes`, :func:`heard_notes`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..specs.files import is_kernel_file, message_path, named_like_kernel_file
from ..specs.source import file_problem
from .passed_on import heard, pass_on

__all__ = [
    "heard_notes",
    "ignore_in_walk",
    "imported_by_pytest",
    "note_collected",
    "pass_on_notes",
    "unreadable_entries",
    "walk_notes",
]

_SEEN = pytest.StashKey[dict[str, Path]]()  # a kernel file's real path -> the path it was first collected as
_NOTES = pytest.StashKey[list[str]]()
#: the key under which an xdist worker passes its notes to the controlling process
WORKER_KEY = "gemm_walk"


def imported_by_pytest(path: Path, config: pytest.Config, *, named: bool = False) -> bool:
    """Whether pytest's python plugin imports ``path`` as a test module: a ``.py`` file named on the command line
    (``named``), or one matching python_files."""
    if path.suffix != ".py":
        return False
    return named or any(fnmatch.fnmatch(path.name, pattern) for pattern in config.getini("python_files"))


def _notes(config: pytest.Config) -> list[str]:
    return config.stash.setdefault(_NOTES, [])


def _in_run(path: Path, config: pytest.Config) -> bool:
    """Whether ``path`` is one of the run's paths or lies under one, as written (symlinks not followed, as pytest
    matches them): pytest also lists the folders above a path it is given, and keeps nothing else from them. True
    where an argument is no path (``--pyargs``'s module names), which this cannot tell."""
    here = os.path.abspath(path)
    for arg in config.args:
        given = os.path.abspath(Path(config.invocation_params.dir, arg.split("::")[0]))
        if here == given or here.startswith(given.rstrip(os.sep) + os.sep) or not os.path.exists(given):
            return True
    return False


def note_collected(config: pytest.Config, path: Path) -> Path:
    """Record that ``path`` is collected as a kernel file; the path its real file was first collected as. A path
    outside the run's paths (in a folder above one, which pytest lists and then drops) is not recorded."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return path
    if not _in_run(path, config):
        return path
    return config.stash.setdefault(_SEEN, {}).setdefault(real, path)


def _loops(path: Path) -> str | None:
    """Where a symlinked folder leads, when that is a folder that holds it (a loop); None otherwise."""
    if not path.is_symlink():
        return None
    try:
        target = path.resolve(strict=True)
        holders = {parent.resolve() for parent in path.parents}
    except (OSError, RuntimeError):  # gone, or too many levels of links: pytest's walk does not enter it either
        return None
    return str(target) if target in holders else None


def _walked_to(real: Path, config: pytest.Config) -> Path | None:
    """The path without symlinks by which pytest's walk of the run's paths reaches the file ``real`` (its real
    path), when it does: that path is the one collected, and any other way to it is passed over."""
    for arg in config.args:
        root = Path(config.invocation_params.dir, arg.split("::")[0])
        try:
            parts = real.relative_to(root.resolve()).parts
        except (ValueError, OSError, RuntimeError):
            continue
        folders = [root.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if not any(config.hook.pytest_ignore_collect(collection_path=folder, config=config) for folder in folders):
            return root.joinpath(*parts)
    return None


def ignore_in_walk(collection_path: Path, config: pytest.Config, *, kernel_files: bool) -> bool | None:
    """pytest_ignore_collect's answer: True for a symlink loop, or (``kernel_files``: a --gemm-kernels run) a kernel
    file already collected by another path (each said in a note); None to leave the path to pytest and others."""
    path = collection_path
    if path.is_dir():
        target = _loops(path)
        if target is None:
            return None
        if _in_run(path, config):  # else a folder above a run's path lists it, and pytest drops it: nothing to say
            _notes(config).append(
                f"pytest-gemm: {message_path(path, config.rootpath)}/ is a symlink to {target}, a folder that holds "
                "it: not descended (a symlink loop)"
            )
        return True
    if not kernel_files or not named_like_kernel_file(path) or file_problem(path) is not None:
        return None
    if not is_kernel_file(path, test_module=imported_by_pytest(path, config)):
        return None
    if not _in_run(path, config):
        return None  # listed in a folder above a run's path: pytest drops it
    real = os.path.realpath(path)
    first = _walked_to(Path(real), config) if real != os.path.abspath(path) else None
    if first is None or os.path.abspath(first) == os.path.abspath(path):
        first = note_collected(config, path)
        if first == path:
            return None
    shown, original = message_path(path, config.rootpath), message_path(first, config.rootpath)
    _notes(config).append(
        f"pytest-gemm: {shown} is {original} (the same file, through a symlink): collected once, as {original}"
    )
    return True


def unreadable_entries(collector: pytest.Directory) -> list[Path]:
    """The entries of a folder that are named like kernel files but are not regular files (a FIFO, a link to a
    device), which pytest's walk passes over; collected, they are errors that say what they are."""
    found = []
    try:
        entries = sorted(os.scandir(collector.path), key=lambda entry: entry.name)
    except OSError:
        return []
    for entry in entries:
        path = Path(entry.path)
        try:
            regular_or_dir = entry.is_file() or entry.is_dir()
        except OSError:
            continue
        if regular_or_dir or not named_like_kernel_file(path) or file_problem(path) is None:
            continue  # pytest's own, or a dangling symlink (an editor's lock file, say): nothing to read
        ignored = not collector.session.isinitpath(path) and collector.ihook.pytest_ignore_collect(
            collection_path=path, config=collector.config
        )
        if not ignored:
            found.append(path)
    return found


def walk_notes(config: pytest.Config) -> list[str]:
    """What the guards did, for the lines after collection."""
    return list(config.stash.get(_NOTES, []))


def pass_on_notes(config: pytest.Config) -> None:
    """After collection, on an xdist worker: its notes, for the controlling process (:func:`heard_notes`)."""
    pass_on(config, WORKER_KEY, walk_notes(config))


def heard_notes(config: pytest.Config, workeroutput: Mapping[str, Any]) -> list[str]:
    """The notes an xdist worker passed on that the controlling process has not said yet (each worker walks alike)."""
    return heard(workeroutput, WORKER_KEY, _notes(config))[0]
