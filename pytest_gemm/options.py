"""Command-line options and their ini settings, read once into a plain :class:`Settings` record."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from .dtypes import DTYPES
from .shapes import Shape, ShapeError, parse_shapes

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
        group.addoption(
            f"--gemm-{name}", dest=f"gemm_{name}", default=None, help=f"{text} (ini: gemm_{name}, default {default!r})"
        )
        parser.addini(f"gemm_{name}", text, default=default)


@dataclass(frozen=True)
class Settings:
    shapes: list[Shape]
    dtypes: list[str] | None
    archs: list[str]
    seed: int


def _value(config: pytest.Config, name: str) -> str:
    cli = config.getoption(f"gemm_{name}")
    return str(cli if cli is not None else config.getini(f"gemm_{name}"))


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
    return Settings(shapes, dtypes, archs, seed)
