"""The options as pytest adds them (``--gemm-NAME``, ini ``gemm_NAME``), read into one :class:`Settings` record,
and the compile cache under pytest's cache directory.

An ini file gives a list option (``Option.many``) as a TOML list or as a comma-separated string, as the command
line does (``gemm_shapes = ["quick", "edge"]``, ``gemm_shapes = "quick,edge"`` or ``gemm_shapes = quick,edge``), in
every format pytest reads (pytest.ini, tox.ini, setup.cfg, ``[tool.pytest.ini_options]``, and from pytest 9 the
native TOML of ``[tool.pytest]`` and pytest.toml): where an ini format gives the TOML as text, it is read with
tomllib (never evaluated). An option of one value takes a string, or a TOML number (``gemm_timeout = 5``). A value
that cannot be read is a usage error naming its setting.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from ..compiler.cache import CubinCache
from ..options import BY_NAME, OPTIONS, Option
from ..settings import Settings, read_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["add_options", "cubin_cache", "read"]

#: the ini type of an option of one value: from pytest 9.2 a union, so that a TOML number ([tool.pytest]) is one
_ONE: Any = (str | int | float) if pytest.version_tuple >= (9, 2) else "string"

KERNELS_HELP = (
    "a switch, taking no value: collect GEMM kernel files (.cu with a pytest-gemm header, .py with @gemm_kernel) "
    "from the paths given as pytest's arguments (pytest --gemm-kernels kernels/ more/x.cu); with none, from the "
    "gemm_kernel_paths ini setting"
)


def add_options(parser: pytest.Parser) -> None:
    """``--gemm-kernels`` and every option of :data:`OPTIONS`, with its ini setting."""
    group = parser.getgroup("gemm", "pytest-gemm: verify and time GEMM kernels")
    group.addoption("--gemm-kernels", action="store_true", default=False, help=KERNELS_HELP)
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
            kind = "linelist" if option.many else _ONE  # a list: a TOML list, or a string of one or more lines
            parser.addini(ini, option.help.replace("%%", "%"), type=kind, default=option.default)


def _ini(config: pytest.Config, option: Option) -> Any:
    """The ini setting's value as pytest reads it; a value pytest refuses is a usage error naming the setting."""
    try:
        with warnings.catch_warnings():
            # pytest warns of a list given to a setting of one value, and _text refuses it, naming the setting
            warnings.simplefilter("ignore", pytest.PytestDeprecationWarning)
            return config.getini(f"gemm_{option.key}")
    except (pytest.UsageError, ValueError, TypeError) as exc:
        said = str(exc)
        if option.many:
            return _written(config, option, said)
        if option.flag and "expects" not in said:  # an ini file's 'maybe': "invalid truth value 'maybe'"
            said += "; expected true or false"
        raise pytest.UsageError(f"{option.label()}: {said}") from None


def _written(config: pytest.Config, option: Option, refused: str) -> str | list[object]:
    """A list option's value as its file writes it, where pytest refused it: pytest 9's native TOML
    (``[tool.pytest]``, pytest.toml) takes a ``linelist`` setting as a TOML list only, and no ini type takes a string
    or a list there (pytest 8 reads every file as ini, where ``linelist`` takes both, and never gets here)."""
    try:
        with warnings.catch_warnings():  # config.inicfg: deprecated in pytest 9, the one reading of the raw value
            warnings.simplefilter("ignore", pytest.PytestDeprecationWarning)
            value = config.inicfg.get(f"gemm_{option.key}")
    except AttributeError:  # a pytest without config.inicfg: its own refusal stands
        value = None
    if isinstance(value, (str, list)):  # a string, or a list whose items _text checks
        return value
    if value is None:
        raise pytest.UsageError(f"{option.label()}: {refused}")
    raise pytest.UsageError(
        f"{option.label()}: expected a comma-separated string or a TOML list of strings, got {value!r}"
    )


def _as_toml(option: Option, lines: list[object]) -> list[object]:
    """A list option's lines as an ini file gives them (pytest.ini, tox.ini and setup.cfg give the text of each
    line): read with tomllib where they write a TOML list or string (``["quick", "edge"]``, ``"quick,edge"``), over
    one line or several; as they are otherwise."""
    text = "\n".join(line for line in lines if isinstance(line, str)).strip()
    if len(lines) != sum(isinstance(line, str) for line in lines) or not text.startswith(("[", '"', "'")):
        return lines  # a TOML list's items, or a plain string
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(
            f"{option.label()}: {text!r} is neither a TOML list or string nor a comma-separated string ({exc})"
        ) from None
    return value if isinstance(value, list) else [value]


def _text(option: Option, value: object) -> str:
    """An ini value as the command line gives it: a list option's items joined by commas."""
    if not isinstance(value, list):
        return str(value)
    if not option.many:
        raise pytest.UsageError(f"{option.label()}: expected one value, got a list: {value!r}")
    value = _as_toml(option, value)
    for item in value:
        if not isinstance(item, str):
            raise pytest.UsageError(
                f"{option.label()}: expected a list of strings, got {item!r} in {value!r} (write it as {str(item)!r})"
            )
    return ",".join(value)


def _value(config: pytest.Config, name: str) -> str:
    option = BY_NAME[name]
    cli = config.getoption(f"gemm_{option.key}")
    if cli is not None:
        return str(cli)
    return _text(option, _ini(config, option)) if option.ini else option.default


def _flag(config: pytest.Config, name: str) -> bool:
    option = BY_NAME[name]
    cli = config.getoption(f"gemm_{option.key}")
    if cli is not None:
        return bool(cli)
    return bool(_ini(config, option)) if option.ini else False


def read(config: pytest.Config) -> Settings:
    """Every option, checked (a bad value raises :class:`~pytest_gemm.options.OptionError` or a usage error)."""
    return read_settings(lambda name: _value(config, name), lambda name: _flag(config, name), config.rootpath)


def cubin_cache(config: pytest.Config) -> CubinCache | None:
    """The compile cache, in pytest's cache directory; None without pytest's cache (``-p no:cacheprovider``) or,
    with a warning as pytest gives for its own cache, where the folder cannot be made (an unwritable project)."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    try:
        folder: Path = cache.mkdir("gemm-cubins")
    except OSError as exc:
        warning = pytest.PytestCacheWarning(
            f"pytest-gemm: could not create the compile cache ({exc}); every kernel is compiled again in this run"
        )
        config.issue_config_time_warning(warning, stacklevel=2)
        return None
    return CubinCache(folder)
