"""GPU architecture names (``sm_90``, ``sm_90a``) and which devices can run code built for them."""

from __future__ import annotations

import re

__all__ = ["ARCH_PATTERN", "KNOWN_CAPABILITIES", "arch_runs_on", "known_arch", "parse_arch"]

ARCH_PATTERN = re.compile(r"^sm_(\d{1,2})(\d)([af]?)$")
#: the compute capabilities of NVIDIA GPUs (Maxwell to Blackwell, CUDA 12 and 13): any other is a typo
KNOWN_CAPABILITIES = (
    *((5, m) for m in (0, 2, 3)),
    *((6, m) for m in (0, 1, 2)),
    *((7, m) for m in (0, 2, 5)),
    *((8, m) for m in (0, 6, 7, 8, 9)),
    (9, 0),
    *((10, m) for m in (0, 1, 3, 7)),
    (11, 0),
    *((12, m) for m in (0, 1)),
)


def parse_arch(arch: str) -> tuple[int, int, str]:
    """``sm_90a`` -> (9, 0, "a"); ValueError for anything that is not an architecture name."""
    match = ARCH_PATTERN.match(arch)
    if not match:
        raise ValueError(f"{arch!r} is not an architecture such as sm_90 or sm_90a")
    return int(match.group(1)), int(match.group(2)), match.group(3)


def arch_runs_on(arch: str, capability: tuple[int, int]) -> bool:
    """Whether a cubin built for ``arch`` loads on a device of this compute capability.

    A cubin runs on its own major version at the same or a later minor version; an
    ``a`` (architecture-specific) target such as ``sm_90a`` runs only on exactly that one.
    """
    major, minor, suffix = parse_arch(arch)
    if suffix == "a":
        return capability == (major, minor)
    return capability[0] == major and capability[1] >= minor


def known_arch(arch: str) -> str:
    """``arch`` itself when it names a real GPU architecture; ValueError (saying which exist) otherwise."""
    major, minor, _ = parse_arch(arch)
    if (major, minor) not in KNOWN_CAPABILITIES:
        known = ", ".join(f"sm_{a}{b}" for a, b in KNOWN_CAPABILITIES)
        raise ValueError(f"{arch!r} is not a known GPU architecture; known: {known}")
    return arch
