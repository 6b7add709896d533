"""The pytest glue: options, collection of kernel files, and the session that runs and reports cases.

The entry point pytest loads (``pytest11``). Everything stateful lives in one
:class:`~.session.GemmSession`, kept in ``config.stash`` and registered as a plugin.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..options import OptionError, label
from ..specs.files import is_kernel_file
from . import hookspecs
from .configure import add_options, read
from .facts import RunFacts
from .items import KernelFile, UnimportedKernelFile
from .session import GemmSession
from .stash import SESSION
from .terminal import kernel_file_hints
from .walk import ignore_in_walk, imported_by_pytest, note_collected, pass_on_notes, unreadable_entries, walk_notes

__all__ = ["SESSION", "GemmSession"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """pytest-benchmark's own tables repeat pytest-gemm's timing table group by group: a pytest-gemm run shows them
    when asked for (-v, --benchmark-verbose, --benchmark-compare, ...), through pytest-benchmark's own
    --benchmark-quiet, set before its session reads it (its JSON, compare and other options work as ever)."""
    quiet = hasattr(config.option, "benchmark_quiet") and config.getoption("gemm_kernels", False)
    if quiet and not RunFacts.of(config).benchmark_tables:
        config.option.benchmark_quiet = True


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gemm: a pytest-gemm case (compile or GPU)")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with 'no CUDA device' without one")
    config.addinivalue_line("markers", "gemm_compile: compiles a kernel with NVRTC (no GPU needed)")
    config.addinivalue_line("markers", "gemm_sanitize: runs a kernel under a compute-sanitizer tool (--gemm-sanitize)")
    if not config.getoption("gemm_kernels"):
        if config.getoption("gemm_shard") is not None:  # else every job would run the whole suite
            raise pytest.UsageError("--gemm-shard: only with --gemm-kernels (it splits pytest-gemm runs)")
        return
    try:
        settings = read(config)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    given = config.getoption("gemm_shard")  # None when not given (the option machinery's default is '')
    if given is not None and not str(given).strip():
        raise pytest.UsageError(f"{label('shard')}: expected I/N with 1 <= I <= N, such as 1/4, got {given!r}")
    session = GemmSession(config, settings, RunFacts.of(config))
    config.stash[SESSION] = session
    config.pluginmanager.register(session, "gemm-session")
    # One malformed kernel file must not stop the others: its collection error is reported
    # (and the run fails), but the rest of the kernels still run.
    config.option.continue_on_collection_errors = True
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(config.rootpath / p) for p in config.getini("gemm_kernel_paths")]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """With --gemm-kernels, a kernel file that pytest's python plugin does not take as a test module (those come to
    pytest_pycollect_makemodule)."""
    if SESSION not in parent.config.stash:
        return None
    if imported_by_pytest(file_path, parent.config, named=parent.session.isinitpath(file_path)):
        return None
    if is_kernel_file(file_path, test_module=False):
        note_collected(parent.config, file_path)
        return KernelFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A module pytest would import that is a kernel file is never imported here: its top level runs only in a GPU
    worker (without --gemm-kernels, never). One matching python_files (or any, without --gemm-kernels) is a kernel
    file only when it declares kernels and defines no tests; one named on the command line of a --gemm-kernels run
    is a kernel path like any other (a syntax error, or its size, said as the kernel file's error)."""
    gemm = SESSION in parent.config.stash
    if not is_kernel_file(module_path, test_module=imported_by_pytest(module_path, parent.config, named=not gemm)):
        return None
    if not gemm:
        return UnimportedKernelFile.from_parent(parent, path=module_path)
    note_collected(parent.config, module_path)
    return KernelFile.from_parent(parent, path=module_path)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A symlink loop is not descended (in any run: pytest's own walk would go round it for minutes); with
    --gemm-kernels, a kernel file reached again through a symlink is collected once (each said after collection)."""
    return ignore_in_walk(collection_path, config, kernel_files=SESSION in config.stash)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport]:
    """With --gemm-kernels, a folder's entries named like kernel files that pytest's walk passes over (a FIFO, a
    link to a device) are collected too, as kernel files whose collection says what they are."""
    report = yield
    if SESSION in collector.config.stash and isinstance(collector, pytest.Directory) and report.passed:
        assert isinstance(report.result, list)
        report.result += [KernelFile.from_parent(collector, path=p) for p in unreadable_entries(collector)]
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    """An xdist worker passes the walk's notes on to the controlling process, which says them at the end."""
    if SESSION in session.config.stash:
        pass_on_notes(session.config)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """What the walk's guards did (symlink loops not descended, files reached twice collected once)."""
    return walk_notes(config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say why kernel files gave no tests: --gemm-kernels missing, or a named file without a header."""
    if hasattr(config, "workerinput"):
        return
    # a kernel file named without --gemm-kernels is 'not found' (a usage error) once nothing collects it
    nothing_ran = exitstatus in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR)
    for hint in kernel_file_hints(config, gemm=SESSION in config.stash, nothing_ran=nothing_ran):
        terminalreporter.write_line(hint, yellow=True)
