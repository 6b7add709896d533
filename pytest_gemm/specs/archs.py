"""GPU architecture names (``sm_90``, ``sm_90a``) and which devices can run code built for them."""

from __future__ import annotations

import re

__all__ = ["ARCH_PATTERN", "arch_runs_on", "parse_arch"]

ARCH_PATTERN = re.compile(r"^sm_(\d{1,2})(\d)([af]?)$")


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
