"""Every option's default is defined once: the options table (pytest_gemm.options) gives the records that use it
(TimingSettings, GateSettings, Settings) their own defaults, and the README's table says the same."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_gemm.options import BY_NAME, OPTIONS
from pytest_gemm.records.dtypes import INPUT_DTYPES
from pytest_gemm.records.request import TimingSettings
from pytest_gemm.settings import GateSettings, Settings, read_settings

from support import ROOT

#: each option read into a record field, and the field: (record, field name, how the option's value is the field's)
FIELDS = {
    "noise": (TimingSettings, "noise", None),
    "min-samples": (TimingSettings, "min_samples", None),
    "max-time": (TimingSettings, "max_time", None),
    "timer": (TimingSettings, "timer", None),
    "hot-cache": (TimingSettings, "cold_cache", lambda hot: not hot),
    "threshold": (GateSettings, "threshold", None),
    "gate-metric": (GateSettings, "metric", None),
    "fail-new": (GateSettings, "fail_new", None),
    "fail-unstable": (GateSettings, "fail_unstable", None),
    "update-baselines": (GateSettings, "update", None),
    "summary": (GateSettings, "summary", None),
    "baselines": (GateSettings, "folder", Path),
    "timeout": (Settings, "timeout", None),
    "compile-timeout": (Settings, "compile_timeout", None),
    "max-variants": (Settings, "max_variants", None),
    "max-shapes": (Settings, "max_shapes", None),
    "max-cases": (Settings, "max_cases", None),
    "require-gpu": (Settings, "require_gpu", None),
    "report": (Settings, "report", None),
    "overwrite-report": (Settings, "overwrite_report", None),
    "sanitize": (Settings, "sanitize", None),
    "gpus": (Settings, "gpus", None),
    "shard": (Settings, "shard", None),
}


def _field_default(record: type, name: str):
    field = next(f for f in dataclasses.fields(record) if f.name == name)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def _read_defaults(root: Path) -> Settings:
    return read_settings(lambda name: BY_NAME[name].default, lambda name: False, root)


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_options_default_is_its_records_default(name):
    record, field, how = FIELDS[name]
    option = BY_NAME[name]
    value = (option.default == "true") if option.flag else option.convert(option.default)
    expected = _field_default(record, field)
    if name == "baselines":
        expected = Path(_field_default(Settings, "gate").folder)
    assert (how(value) if how else value) == expected


def test_the_settings_read_from_every_default_are_the_records_defaults(tmp_path):
    settings = _read_defaults(tmp_path)
    assert settings.timing == TimingSettings()
    assert dataclasses.replace(settings.gate, folder=Path("baselines")) == GateSettings(Path("baselines"))
    assert settings.timeout == Settings([], None, [], 0).timeout
    assert {name for name in BY_NAME} - set(FIELDS) == {"shapes", "dtypes", "archs", "seed"}  # no record default


def _readme_defaults() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `--gemm-([a-z-]+)(?: [^`]*)?` \| ([^|]*) \|", text, flags=re.M)
    return {name: cell.strip() for name, cell in rows}


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.default not in ("", "false")], ids=lambda o: o.name)
def test_the_readmes_table_gives_each_options_default(option):
    said = _readme_defaults()
    assert option.name in said, f"the README's options table has no row for --gemm-{option.name}"
    assert said[option.name].strip("`") == option.default, (option.name, said[option.name])


def test_the_dtypes_help_names_every_dtype_the_option_takes():
    said = re.search(r"\((.*?)\)", BY_NAME["dtypes"].help)
    assert said and said.group(1).split(", ") == list(INPUT_DTYPES)


@pytest.mark.parametrize("name", ["timeout", "noise", "max-time", "threshold"])
def test_a_saved_runs_setting_takes_the_values_its_option_takes(name):
    """The ranges are defined once: a value the option takes is a setting a saved run may hold, and one just past
    either end is refused by both."""
    from pytest_gemm.options import OptionError
    from pytest_gemm.runs.check import WrongValue, check_settings

    convert = BY_NAME[name].convert
    low, high = (float(x) for x in re.findall(r"from (\S+) to (\S+),", _refusal(convert, "-1e9"))[0])
    for value in (low, high):
        convert(repr(value))
        check_settings({name: value}, "gemm.settings")
    for value in (high * 1.01 + 1e-3, low - 1e-3 if low > 0 else -1e-3):
        with pytest.raises(OptionError):
            convert(repr(value))
        with pytest.raises(WrongValue):
            check_settings({name: value}, "gemm.settings")


def _refusal(convert, text: str) -> str:
    from pytest_gemm.options import OptionError

    with pytest.raises(OptionError) as raised:
        convert(text)
    return str(raised.value)
