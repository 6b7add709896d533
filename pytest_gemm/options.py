"""Command-line options and their ini settings, read once into a plain :class:`Settings` record."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .archs import ARCH_PATTERN
from .dtypes import DTYPES
from .gate import METRICS
from .shapes import Shape, ShapeError, parse_shapes
from .stats import StopRule
from .timing import TimingSettings

__all__ = ["Settings", "add_options", "read_settings"]


# name, ini default, help
_OPTIONS = (
    (
        "shapes",
        "quick",
        "shape sets (quick, standard, edge, llm) and/or shapes such as 1024 or 4096x4096x1024, comma-separated",
    ),
    ("dtypes", "", "only these dtypes (fp32, tf32, fp16, bf16, fp64), comma-separated; default: all a kernel declares"),
    ("archs", "sm_80,sm_90", "architectures the no-GPU compile tests build for, comma-separated"),
    ("seed", "0", "base seed of the random inputs; each case derives its own seed from it and its id"),
    ("max-time", "1.0", "timing: seconds per case after which timing stops even if the noise target is not met"),
    ("min-samples", "10", "timing: fewest kernel/cuBLAS pairs timed per case, whatever the time cap"),
    ("noise", "0.005", "timing: stop once each median's 95%% interval half-width is within this fraction"),
    ("baselines", "baselines", "gate: folder of baseline files (one JSON file per GPU model), relative to the rootdir"),
    (
        "threshold",
        "0.05",
        "gate: a case regressed when slower than its baseline by more than this fraction "
        "(and significantly); a kernel header's regression_threshold overrides it",
    ),
    ("gate-metric", "ratio", "gate: 'ratio' (kernel/cuBLAS time, measured pair by pair in the same run) or 'time'"),
)
#: on/off options: name, help
_FLAGS = (
    ("hot-cache", "timing: keep L2 warm (no flush, no input rotation) instead of flushing it before each launch"),
    ("fail-new", "gate: fail timed cases that have no baseline entry (default: reported as new, passing)"),
    ("fail-unstable", "gate: fail cases timed while the GPU throttled (default: reported as unstable, passing)"),
)


def add_options(parser: pytest.Parser) -> None:
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
    for name, default, text in _OPTIONS:
        key = name.replace("-", "_")
        group.addoption(
            f"--gemm-{name}", dest=f"gemm_{key}", default=None, help=f"{text} (ini: gemm_{key}, default {default!r})"
        )
        parser.addini(f"gemm_{key}", text.replace("%%", "%"), default=default)
    for name, text in _FLAGS:
        key = name.replace("-", "_")
        group.addoption(
            f"--gemm-{name}", dest=f"gemm_{key}", action="store_true", default=None, help=f"{text} (ini: gemm_{key})"
        )
        parser.addini(f"gemm_{key}", text, type="bool", default=False)
    group.addoption(
        "--gemm-update-baselines",
        action="store_true",
        default=False,
        help="record the timed cases that passed as this GPU's baselines (added, changed and removed entries "
        "are printed); the gate is not applied",
    )
    group.addoption(
        "--gemm-summary",
        metavar="PATH",
        default=None,
        help="write a markdown table of every case and its verdict to PATH (also appended to $GITHUB_STEP_SUMMARY "
        "when that is set)",
    )


@dataclass(frozen=True)
class Settings:
    shapes: list[Shape]
    dtypes: list[str] | None
    archs: list[str]
    seed: int
    timing: TimingSettings = field(default_factory=TimingSettings)
    gate: GateSettings = field(default_factory=lambda: GateSettings(Path("baselines")))


@dataclass(frozen=True)
class GateSettings:
    """Where baselines live and how the gate judges."""

    folder: Path
    threshold: float = 0.05
    metric: str = "ratio"
    fail_new: bool = False
    fail_unstable: bool = False
    update: bool = False
    summary: Path | None = None


def _flag(config: pytest.Config, name: str) -> bool:
    key = name.replace("-", "_")
    cli = config.getoption(f"gemm_{key}")
    return bool(config.getini(f"gemm_{key}")) if cli is None else bool(cli)


def _value(config: pytest.Config, name: str) -> str:
    key = name.replace("-", "_")
    cli = config.getoption(f"gemm_{key}")
    return str(cli if cli is not None else config.getini(f"gemm_{key}"))


def _number(config: pytest.Config, name: str, kind: type, low: float, high: float) -> float:
    text = _value(config, name)
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        expected = "an integer" if kind is int else "a number"
        raise pytest.UsageError(
            f"--gemm-{name} / gemm_{name.replace('-', '_')}: expected {expected} from {low:g} to {high:g}, got {text!r}"
        )
    return value


def _split(text: str) -> list[str]:
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def read_settings(config: pytest.Config) -> Settings:
    """Read and check every option; a bad value is a usage error that names the option."""
    try:
        shapes = parse_shapes(_value(config, "shapes"))
    except ShapeError as exc:
        raise pytest.UsageError(f"--gemm-shapes / gemm_shapes: {exc}") from None
    dtypes = _split(_value(config, "dtypes")) or None
    for d in dtypes or ():
        if d not in DTYPES:
            raise pytest.UsageError(f"--gemm-dtypes / gemm_dtypes: unknown dtype {d!r}; expected {', '.join(DTYPES)}")
    archs = _split(_value(config, "archs"))
    for arch in archs:
        if not ARCH_PATTERN.match(arch):
            raise pytest.UsageError(
                f"--gemm-archs / gemm_archs: {arch!r} is not an architecture such as sm_90 or sm_90a"
            )
    try:
        seed = int(_value(config, "seed"), 0)
    except ValueError:
        raise pytest.UsageError(
            f"--gemm-seed / gemm_seed: expected an integer, got {_value(config, 'seed')!r}"
        ) from None
    hot = _flag(config, "hot-cache")
    stop = StopRule(
        target=_number(config, "noise", float, 1e-4, 0.5),
        min_samples=int(_number(config, "min-samples", int, 3, 100_000)),
        max_time=_number(config, "max-time", float, 0.0, 3600.0),
    )
    metric = _value(config, "gate-metric")
    if metric not in METRICS:
        raise pytest.UsageError(
            f"--gemm-gate-metric / gemm_gate_metric: expected one of {', '.join(METRICS)}, got {metric!r}"
        )
    summary = config.getoption("gemm_summary")
    gate = GateSettings(
        folder=config.rootpath / _value(config, "baselines"),
        threshold=_number(config, "threshold", float, 0.0, 10.0),
        metric=metric,
        fail_new=_flag(config, "fail-new"),
        fail_unstable=_flag(config, "fail-unstable"),
        update=bool(config.getoption("gemm_update_baselines")),
        summary=Path(summary) if summary else None,
    )
    return Settings(shapes, dtypes, archs, seed, TimingSettings(stop=stop, cold_cache=not hot), gate)
