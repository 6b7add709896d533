"""Lines an xdist worker would say after collection, passed on to the controlling process, which says each once.

Under pytest-xdist only the workers collect, each alike, and what a worker says after collection is not shown:
its lines (:mod:`.selection`'s, :mod:`.walk`'s notes) travel in ``config.workeroutput``, which the controlling
process reads as each worker ends (``pytest_testnodedown``), keeping the lines it has not said yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

__all__ = ["heard", "pass_on"]


def pass_on(config: pytest.Config, key: str, lines: list[str], **more: Any) -> None:
    """On an xdist worker, leave ``lines`` (and ``more``, plain data) under ``key`` for the controlling process;
    elsewhere nothing."""
    if hasattr(config, "workeroutput"):
        config.workeroutput[key] = {"lines": list(lines), **more}


def heard(workeroutput: Mapping[str, Any], key: str, said: list[str]) -> tuple[list[str], dict[str, Any]]:
    """What a worker passed on under ``key``: its lines not in ``said`` yet (added to ``said``), and all of it."""
    passed = dict(workeroutput.get(key) or {})
    new = [line for line in passed.get("lines", ()) if line not in said]
    said += new
    return new, passed
