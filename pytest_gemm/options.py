"""Options, defined once. The plugin adds each as ``--gemm-NAME`` with an ini setting ``gemm_NAME`` (where it
has one), and messages name it by :func:`label`; the ``pytest-gemm`` command adds the ones it shares as
``--NAME``, with the same default, help and checks. :func:`pytest_gemm.settings.read_settings` turns the values
into one plain :class:`~pytest_gemm.settings.Settings` record.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .judge.gate import DEFAULT_BASELINES, DEFAULT_METRIC, DEFAULT_THRESHOLD, THRESHOLD_RANGE
from .records.case_record import METRICS
from .records.dtypes import INPUT_DTYPES
from .records.request import (
    COMPILE_TIMEOUT,
    MAX_TIME_RANGE,
    NOISE_RANGE,
    SANITIZER_TOOLS,
    TIMEOUT_RANGE,
    TIMERS,
    TimingSettings,
)
from .records.shapes import SHAPE_SETS, Shape, ShapeError, parse_shapes
from .specs.archs import known_arch
from .specs.bounds import DEFAULT_MAX_CASES, DEFAULT_MAX_SHAPES, DEFAULT_MAX_VARIANTS

__all__ = [
    "BY_NAME",
    "DEFAULT_TIMEOUT",
    "OPTIONS",
    "Option",
    "OptionError",
    "label",
]


class OptionError(ValueError):
    """A bad option value; the message says what was expected."""


def _number(kind: type, low: float, high: float) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            expected = "an integer" if kind is int else "a number"
            raise OptionError(f"expected {expected} from {low:g} to {high:g}, got {text!r}")
        return value

    return convert


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise OptionError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text

    return convert


def _split(text: str) -> list[str]:
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def _shapes(text: str) -> list[Shape]:
    try:
        return parse_shapes(text)
    except ShapeError as exc:
        raise OptionError(str(exc)) from None


def _dtypes(text: str) -> list[str] | None:
    for d in _split(text):
        if d not in INPUT_DTYPES:
            raise OptionError(f"unknown dtype {d!r}; expected {', '.join(INPUT_DTYPES)}")
    return _split(text) or None


def _archs(text: str) -> list[str]:
    if not _split(text):  # no compile test at all: that is -m 'not gemm_compile', not an empty list
        raise OptionError("expected at least one architecture, such as sm_90 (no compile tests: -m 'not gemm_compile')")
    for arch in _split(text):
        try:
            known_arch(arch)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    return _split(text)


def _tools(text: str) -> tuple[str, ...]:
    tools = _split(text)
    for tool in tools:
        if tool not in SANITIZER_TOOLS:
            raise OptionError(f"unknown compute-sanitizer tool {tool!r}; expected {', '.join(SANITIZER_TOOLS)}")
    return tuple(dict.fromkeys(tools))


def _gpus(text: str) -> int | None:
    """'all' (None: every visible GPU) or how many of the visible GPUs to use, counted from the first."""
    if text.strip() == "all":
        return None
    return int(_number(int, 1, 4096)(text))


def _shard(text: str) -> tuple[int, int] | None:
    """'I/N' (1 <= I <= N): this run takes the I-th of N shards; '' for the whole suite."""
    if not text.strip():
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise OptionError(f"expected I/N with 1 <= I <= N, such as 1/4, got {text!r}")
    return int(match[1]), int(match[2])


def _seed(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise OptionError(f"expected an integer, got {text!r}") from None


@dataclass(frozen=True)
class Option:
    """One option: ``--gemm-NAME`` in pytest, with the ini setting ``gemm_NAME`` when ``ini``; ``--NAME`` in
    the command when ``command``. A ``flag`` is on/off (its ini setting a boolean)."""

    name: str
    default: str
    help: str
    convert: Callable[[str], Any] = str
    command: bool = False
    flag: bool = False
    ini: bool = True
    metavar: str | None = None
    many: bool = False  # a list: comma-separated on the command line; a TOML list or such a string in an ini file

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")

    def label(self) -> str:
        """How messages name the option: ``--gemm-NAME / gemm_NAME`` (``--gemm-NAME`` without an ini setting)."""
        return f"--gemm-{self.name} / gemm_{self.key}" if self.ini else f"--gemm-{self.name}"


def _flag(name: str, text: str, *, ini: bool = True) -> Option:
    return Option(name, "false", text, flag=True, ini=ini)


#: the timeout: long enough for the slowest phase of a legitimate case (docs/measurements.md#the-workers-start), short
#: enough that a hanging kernel costs one minute, not the run
DEFAULT_TIMEOUT = 60.0
#: the timing settings' defaults, whose record (TimingSettings) defines them
_TIMING = TimingSettings()

OPTIONS = (
    Option(
        "shapes",
        "quick",
        f"shape sets ({', '.join(SHAPE_SETS)}) and/or shapes such as 1024, 4096x4096x1024, 96x96x64b8 (a batch of "
        "8) or 4096x4096x1024g8 (8 groups), comma-separated",
        _shapes,
        many=True,
    ),
    Option(
        "dtypes",
        "",
        f"only these dtypes ({', '.join(INPUT_DTYPES)}), comma-separated; default: all declared",
        _dtypes,
        many=True,
    ),
    Option(
        "archs", "sm_80,sm_90", "architectures the no-GPU compile tests build for, comma-separated", _archs, many=True
    ),
    Option("seed", "0", "base seed of the random inputs; each case derives its own seed from it and its id", _seed),
    Option(
        "max-variants",
        str(DEFAULT_MAX_VARIANTS),
        "most variants (combinations of its params) one kernel may have, each compiled and run at every shape",
        _number(int, 1, 10_000_000),
    ),
    Option(
        "max-shapes",
        str(DEFAULT_MAX_SHAPES),
        "most shapes a run may have (--gemm-shapes, the sets counted shape by shape), each a case of every variant "
        "and dtype of every kernel; more is a usage error, said before any case is built",
        _number(int, 1, 100_000_000),
    ),
    Option(
        "max-cases",
        str(DEFAULT_MAX_CASES),
        "most GPU cases (tests) one kernel may have: its variants x selected dtypes x shapes x alpha/beta pairs; more "
        "is a collection error of its file, said before any case is built",
        _number(int, 1, 1_000_000_000),
    ),
    Option(
        "timeout",
        f"{DEFAULT_TIMEOUT:g}",
        "seconds a case may run in the GPU worker without progress (a verification, a batch of timed "
        "launches, which gets max-time more) before the worker is killed and replaced and the case fails "
        "as timed out",
        _number(float, *TIMEOUT_RANGE),
    ),
    Option(
        "compile-timeout",
        f"{COMPILE_TIMEOUT:g}",
        "seconds one NVRTC compile of a kernel variant may take (compile tests, and the GPU worker's compile) "
        "before the compiler is stopped and that variant fails; a compile that runs long says so on the terminal; "
        "also the most time a case may spend in Triton's or torch's compilers and Triton's autotuner without "
        "--gemm-timeout running",
        _number(float, *TIMEOUT_RANGE),
    ),
    Option(
        "max-time",
        str(_TIMING.max_time),
        "timing: seconds per case after which timing stops even if the noise target is not met",
        _number(float, *MAX_TIME_RANGE),
    ),
    Option(
        "min-samples",
        str(_TIMING.min_samples),
        "timing: fewest kernel/cuBLAS pairs timed per case, whatever the time cap",
        _number(int, 3, 100_000),
    ),
    Option(
        "noise",
        str(_TIMING.noise),
        "timing: stop once each median's 95%% interval half-width is within this fraction (or within one step "
        "of the GPU's clock, where that is wider)",
        _number(float, *NOISE_RANGE),
    ),
    Option(
        "baselines",
        DEFAULT_BASELINES,
        "gate: folder of baseline files (one JSON file per GPU model), relative to the rootdir (in the pytest-gemm "
        "command: to the current folder, or to --root for merge)",
        command=True,
    ),
    Option(
        "threshold",
        str(DEFAULT_THRESHOLD),
        "gate: a case regressed when slower than its baseline by more than this fraction, by more than same-code "
        "runs differ, and again when timed in a fresh worker; a kernel header's regression_threshold overrides it",
        _number(float, *THRESHOLD_RANGE),
        command=True,
    ),
    Option(
        "gate-metric",
        DEFAULT_METRIC,
        "gate: 'ratio' (kernel/cuBLAS time, measured pair by pair in the same run) or 'time'",
        _choice(tuple(METRICS)),
        command=True,
    ),
    Option(
        "report",
        "",
        "write pictures (matplotlib) and a static index.html of the run to this folder, with run.json for "
        "pytest-gemm plot (docs/reports.md); default: no report",
        lambda text: Path(text) if text.strip() else None,
    ),
    Option(
        "overwrite-report",
        "false",
        "write the report into a folder that holds files pytest-gemm did not write, replacing those of the same "
        "names (default: such a folder is refused; a new, empty or pytest-gemm's own folder needs no switch)",
        flag=True,
        command=True,
        ini=False,
    ),
    Option(
        "sanitize",
        "",
        "also run each .cu kernel once under these compute-sanitizer tools (memcheck, racecheck, initcheck, "
        "synccheck), comma-separated: one test per tool, sanitize[TOOL]; default: none",
        _tools,
        many=True,
    ),
    Option(
        "gpus",
        "all",
        "GPUs the run uses, one GPU worker pinned to each: 'all' the visible ones (CUDA_VISIBLE_DEVICES is "
        "honoured), or a number N for the first N of them",
        _gpus,
    ),
    Option(
        "shard",
        "",
        "run only shard I of N (such as 2/4) of the selected tests, chosen deterministically from their ids, for "
        "CI matrices and job arrays; pytest-gemm merge combines the shards' saved runs (docs/scaling.md)",
        _shard,
        ini=False,
        metavar="I/N",
    ),
    Option(
        "timer",
        _TIMING.timer,
        "timing: 'cupti' (each kernel's own start and end on the GPU, from CUPTI's activity records, as Nsight "
        "Compute measures; falls back to the events, saying why, where CUPTI cannot be used), 'events' (CUDA "
        "events around each launch, which adds the launch's device latency, about 3 us on an H100) or 'graph' (the "
        "events around the replay of a CUDA graph of each launch, captured before timing: no host code between a "
        "kernel's own launches; the events where capture is refused, saying why)",
        _choice(tuple(TIMERS)),
    ),
    _flag("hot-cache", "timing: keep L2 warm (no flush, no input rotation) instead of flushing it before each launch"),
    _flag("fail-new", "gate: fail timed cases that have no baseline entry (default: reported as new, passing)"),
    _flag("fail-unstable", "gate: fail cases timed while the GPU throttled (default: reported as unstable, passing)"),
    _flag(
        "require-gpu",
        "a run without a usable CUDA device is a usage error (exit 4) instead of skipping the GPU cases, so that a "
        "GPU runner that lost its driver fails",
    ),
    _flag(
        "update-baselines",
        "record the timed cases that passed as this GPU's baselines (added, changed and removed entries "
        "are printed); the gate is not applied",
        ini=False,
    ),
    Option(
        "summary",
        "",
        "write a markdown table of every case and its verdict to PATH (also appended to $GITHUB_STEP_SUMMARY "
        "when that is set)",
        lambda text: Path(text) if text else None,
        ini=False,
        metavar="PATH",
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}


def label(name: str) -> str:
    """How messages name the option ``name``: ``--gemm-NAME / gemm_NAME``."""
    return BY_NAME[name].label()
