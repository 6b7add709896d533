"""Facts about the run, derived once from pytest's configuration: whether this process controls the run or is an
xdist worker, whether pytest-xdist distributes it, whether GPU cases are timed, how verbose the terminal is.

Everything else asks :class:`RunFacts` (the session holds it) instead of reading options again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

__all__ = ["RunFacts"]

#: pytest-benchmark options that ask for its own output: its tables, or its lines saying where it saved a run or
#: wrote a file (--benchmark-verbose too: verbose wins over quiet)
_TABLE_OPTIONS = (
    "benchmark_compare",
    "benchmark_compare_fail",
    "benchmark_histogram",
    "benchmark_cprofile",
    "benchmark_save",
    "benchmark_autosave",
    "benchmark_csv",
)


@dataclass(frozen=True)
class RunFacts:
    """What kind of run this is."""

    controller: bool  # not an xdist worker: this process reports to the user and writes files
    worker_id: str | None  # the xdist worker's id ('gw0'), None in the controlling process
    xdist: bool  # pytest-xdist runs the tests in worker processes
    uses_benchmark: bool  # GPU cases ask for pytest-benchmark's fixture (not with --benchmark-skip)
    timed: bool  # GPU cases are timed: they use the fixture and pytest-benchmark is not disabled (nor under xdist)
    verbosity: int  # pytest's -v count (-q counts down)
    benchmark_tables: bool  # pytest-benchmark prints its own tables (asked for: -v or one of its output options)
    posix: bool  # GPU workers are child processes fed through pipes, killed with their process group
    saved_json: str | None = None  # pytest-benchmark's JSON of the run (--benchmark-json), where the run is saved
    saves_run: bool = False  # the run is saved (--benchmark-json, --benchmark-save or --benchmark-autosave)
    save_raw: bool = False  # timed cases keep their samples (--benchmark-save-data)

    @property
    def full_tables(self) -> bool:
        """Whether the terminal shows every timed case and every compiled variant (-v), not the condensed tables."""
        return self.verbosity > 0

    @classmethod
    def of(cls, config: pytest.Config) -> RunFacts:
        get = config.getoption
        worker_id = getattr(config, "workerinput", {}).get("workerid")
        xdist = get("dist", "no") != "no" or worker_id is not None or bool(os.environ.get("PYTEST_XDIST_WORKER"))
        skip = bool(get("benchmark_skip", False)) and not get("benchmark_only", False)
        disabled = bool(get("benchmark_disable", False)) and not get("benchmark_enable", False)
        verbosity = int(get("verbose", 0) or 0)
        asked = verbosity > 0 or bool(get("benchmark_verbose", False)) or any(get(o, None) for o in _TABLE_OPTIONS)
        saved_json = get("benchmark_json", None)
        return cls(
            controller=worker_id is None,
            worker_id=worker_id,
            xdist=xdist,
            uses_benchmark=not skip,
            timed=not skip and not disabled and not xdist,
            verbosity=verbosity,
            benchmark_tables=asked and not get("benchmark_quiet", False),
            posix=os.name == "posix",
            saved_json=getattr(saved_json, "name", saved_json),
            saves_run=any(get(o, None) for o in ("benchmark_json", "benchmark_save", "benchmark_autosave")),
            save_raw=bool(get("benchmark_save_data", False)),
        )
