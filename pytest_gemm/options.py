"""Command-line options and their ini settings, read once into a plain :class:`Settings` record."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from .dtypes import DTYPES
from .shapes import Shape, ShapeError, parse_shapes
from .stats import StopRule
from .timing import TimingSettings

__all__ = ["Settings", "add_options", "read_settings"]

_ARCH = re.compile(r"^sm_\d{2,3}[a-z]?$")

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
    group.addoption(
        "--gemm-hot-cache",
        dest="gemm_hot_cache",
        action="store_true",
        default=None,
        help="timing: keep L2 warm (no flush, no input rotation) instead of flushing it before each launch "
        "(ini: gemm_hot_cache)",
    )
    parser.addini("gemm_hot_cache", "time with a warm L2 cache", type="bool", default=False)


@dataclass(frozen=True)
class Settings:
    shapes: list[Shape]
    dtypes: list[str] | None
    archs: list[str]
    seed: int
    timing: TimingSettings = field(default_factory=TimingSettings)


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
        if not _ARCH.match(arch):
            raise pytest.UsageError(
                f"--gemm-archs / gemm_archs: {arch!r} is not an architecture such as sm_90 or sm_90a"
            )
    try:
        seed = int(_value(config, "seed"), 0)
    except ValueError:
        raise pytest.UsageError(
            f"--gemm-seed / gemm_seed: expected an integer, got {_value(config, 'seed')!r}"
        ) from None
    hot = config.getoption("gemm_hot_cache")
    if hot is None:
        hot = bool(config.getini("gemm_hot_cache"))
    stop = StopRule(
        target=_number(config, "noise", float, 1e-4, 0.5),
        min_samples=int(_number(config, "min-samples", int, 3, 100_000)),
        max_time=_number(config, "max-time", float, 0.0, 3600.0),
    )
    return Settings(shapes, dtypes, archs, seed, TimingSettings(stop=stop, cold_cache=not hot))
