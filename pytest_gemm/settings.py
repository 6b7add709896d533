"""The options' values, checked, as one plain :class:`Settings` record (:func:`read_settings`): what the plugin
reads from the command line and ini files (:mod:`pytest_gemm.plugin.configure`) and every part of a run is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .judge.gate import DEFAULT_BASELINES, DEFAULT_METRIC, DEFAULT_THRESHOLD
from .options import BY_NAME, DEFAULT_TIMEOUT, OptionError
from .records.request import COMPILE_TIMEOUT, TimingSettings
from .records.shapes import Shape
from .specs.bounds import DEFAULT_MAX_CASES, DEFAULT_MAX_SHAPES, DEFAULT_MAX_VARIANTS

__all__ = ["GateSettings", "Settings", "read_settings"]


@dataclass(frozen=True)
class GateSettings:
    """Where baselines live and how the gate judges."""

    folder: Path
    threshold: float = DEFAULT_THRESHOLD
    metric: str = DEFAULT_METRIC
    fail_new: bool = False
    fail_unstable: bool = False
    update: bool = False
    summary: Path | None = None


@dataclass(frozen=True)
class Settings:
    shapes: list[Shape]
    dtypes: list[str] | None
    archs: list[str]
    seed: int
    timeout: float = DEFAULT_TIMEOUT
    timing: TimingSettings = field(default_factory=TimingSettings)
    gate: GateSettings = field(default_factory=lambda: GateSettings(Path(DEFAULT_BASELINES)))
    require_gpu: bool = False  # no usable CUDA device is a usage error
    max_variants: int = DEFAULT_MAX_VARIANTS  # most variants one kernel may have (--gemm-max-variants)
    max_shapes: int = DEFAULT_MAX_SHAPES  # most shapes a run may have (--gemm-max-shapes)
    max_cases: int = DEFAULT_MAX_CASES  # most GPU cases one kernel may have (--gemm-max-cases)
    report: Path | None = None  # the report folder (--gemm-report), or None
    overwrite_report: bool = False  # the report may go in a folder of files pytest-gemm did not write
    sanitize: tuple[str, ...] = ()  # compute-sanitizer tools each .cu kernel runs under (--gemm-sanitize)
    gpus: int | None = None  # how many visible GPUs to use (--gemm-gpus); None: all
    shard: tuple[int, int] | None = None  # (I, N): this run is shard I of N (--gemm-shard); None: all
    compile_timeout: float = COMPILE_TIMEOUT  # seconds one NVRTC compile may take (--gemm-compile-timeout)


def read_settings(value: Callable[[str], str], flag: Callable[[str], bool], root: Path) -> Settings:
    """Check every option; ``value(name)`` and ``flag(name)`` give what the user set (or the default).

    A bad value raises :class:`OptionError` with the option's label in the message.
    """

    def get(name: str) -> Any:
        option = BY_NAME[name]
        try:
            return option.convert(value(name))
        except OptionError as exc:
            raise OptionError(f"{option.label()}: {exc}") from None

    timing = TimingSettings(
        noise=get("noise"),
        min_samples=int(get("min-samples")),
        max_time=get("max-time"),
        cold_cache=not flag("hot-cache"),
        timer=get("timer"),
    )
    gate = GateSettings(
        folder=root / get("baselines"),
        threshold=get("threshold"),
        metric=get("gate-metric"),
        fail_new=flag("fail-new"),
        fail_unstable=flag("fail-unstable"),
        update=flag("update-baselines"),
        summary=get("summary"),
    )
    shapes, max_shapes = get("shapes"), get("max-shapes")
    if len(shapes) > max_shapes:  # before any case is built, so that the refusal is quick
        raise OptionError(
            f"{BY_NAME['shapes'].label()}: {len(shapes):,} shapes, each a case of every variant and dtype of every "
            f"kernel; a run may have at most {max_shapes:,} ({BY_NAME['max-shapes'].label()} raises the limit)"
        )
    return Settings(
        shapes,
        get("dtypes"),
        get("archs"),
        get("seed"),
        get("timeout"),
        timing,
        gate,
        flag("require-gpu"),
        max_variants=get("max-variants"),
        max_shapes=max_shapes,
        max_cases=get("max-cases"),
        report=get("report"),
        overwrite_report=flag("overwrite-report"),
        sanitize=get("sanitize"),
        gpus=get("gpus"),
        shard=get("shard"),
        compile_timeout=get("compile-timeout"),
    )
