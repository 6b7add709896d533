"""The pytest glue: options, collection of kernel files, and the session that runs and reports cases.

The entry point pytest loads (``pytest11``). Everything stateful lives in one
:class:`~.session.GemmSession`, kept in ``config.stash`` and registered as a plugin.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest

from ..options import BY_NAME, OPTIONS, OptionError, label, read_settings
from ..specs.files import is_kernel_file
from . import hookspecs
from .facts import RunFacts
from .items import KernelFile
from .session import GemmSession
from .stash import SESSION
from .terminal import kernel_file_hints

__all__ = ["SESSION", "GemmSession"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemm", "pytest-gemm: verify and time GEMM kernels")
    group.addoption(
        "--gemm-kernels",
        action="store_true",
        default=False,
        help="collect GEMM kernel files (.cu with a pytest-gemm header, .py with @gemm_kernel) "
        "from the given paths, or from the gemm_kernel_paths ini setting",
    )
    parser.addini(
        "gemm_kernel_paths",
        "kernel paths used by --gemm-kernels when no path is given",
        type="args",
        default=["kernels"],
    )
    for option in OPTIONS:
        name, dest, ini = f"--gemm-{option.name}", f"gemm_{option.key}", f"gemm_{option.key}"
        if option.flag:
            said = f" (ini: {ini})" if option.ini else ""
            group.addoption(name, dest=dest, action="store_true", default=None, help=option.help + said)
            if option.ini:
                parser.addini(ini, option.help, type="bool", default=False)
            continue
        said = f" (ini: {ini}, default {option.default!r})" if option.ini else ""
        group.addoption(name, dest=dest, default=None, metavar=option.metavar, help=option.help + said)
        if option.ini:
            parser.addini(ini, option.help.replace("%%", "%"), default=option.default)


def _value(config: pytest.Config, name: str) -> str:
    option = BY_NAME[name]
    cli = config.getoption(f"gemm_{option.key}")
    if cli is not None:
        return str(cli)
    return str(config.getini(f"gemm_{option.key}")) if option.ini else option.default


def _flag(config: pytest.Config, name: str) -> bool:
    option = BY_NAME[name]
    cli = config.getoption(f"gemm_{option.key}")
    if cli is not None:
        return bool(cli)
    return bool(config.getini(f"gemm_{option.key}")) if option.ini else False


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
        settings = read_settings(
            lambda name: _value(config, name),
            lambda name: _flag(config, name),
            config.rootpath,
        )
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


def _python_plugin_collects(file_path: Path, parent: pytest.Collector) -> bool:
    """Whether pytest's python plugin takes this file as a test module (an explicit path, or python_files)."""
    if file_path.suffix != ".py":
        return False
    if parent.session.isinitpath(file_path):
        return True
    return any(fnmatch.fnmatch(file_path.name, pattern) for pattern in parent.config.getini("python_files"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    wanted = SESSION in parent.config.stash and is_kernel_file(file_path)
    if wanted and not _python_plugin_collects(file_path, parent):
        return KernelFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A Python kernel file named on the command line is a kernel file, never imported as a test module here."""
    if SESSION in parent.config.stash and is_kernel_file(module_path):
        return KernelFile.from_parent(parent, path=module_path)
    return None


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say why kernel files gave no tests: --gemm-kernels missing, or a named file without a header."""
    if hasattr(config, "workerinput"):
        return
    # a kernel file named without --gemm-kernels is 'not found' (a usage error) once nothing collects it
    nothing_ran = exitstatus in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR)
    for hint in kernel_file_hints(config, gemm=SESSION in config.stash, nothing_ran=nothing_ran):
        terminalreporter.write_line(hint, yellow=True)
