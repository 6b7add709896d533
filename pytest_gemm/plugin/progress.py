"""The progress column of a long run: pytest's own percentage, and after it how long is left and what each GPU has
done. pytest has no hook for that column, so its terminal reporter's private method that writes it is wrapped:
the one place pytest-gemm reaches into pytest's private API; where that method is missing or the column is not
pytest's progress, pytest's column stays as it is.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from .terminal import LONG_RUN, progress_note

__all__ = ["show_progress"]

#: the terminal reporter's method that writes the progress column (pytest's private API)
_METHOD = "_get_progress_information_message"


def show_progress(
    config: pytest.Config, total: int, state: Callable[[], tuple[int, dict[str, str], Counter[str]]]
) -> None:
    """In a run of more than LONG_RUN items, add the time left and each GPU's state to pytest's progress column;
    ``state()`` gives the cases waiting for a GPU, each GPU's state, and the cases each has run."""
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    original = getattr(reporter, _METHOD, None)
    if original is None or getattr(reporter, "_show_progress_info", None) != "progress" or total <= LONG_RUN:
        return
    start = time.monotonic()

    def message() -> str:
        text = original()
        done = int(getattr(reporter, "reported_progress", 0))
        queued, gpus, per_gpu = state()
        note = progress_note(done, total, time.monotonic() - start, per_gpu, queued, gpus)
        return f"{text[:-1]}, {note}]" if note and text.endswith("]") else text

    setattr(reporter, _METHOD, message)
