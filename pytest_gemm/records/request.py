"""What the pytest process asks a GPU worker to do for one case: primitives only.

The worker reads the kernel file again from ``path`` and finds the kernel by name, so nothing
that cannot be written as JSON (a spec with compiled expressions, a Python function) crosses.
"""

from __future__ import annotations

from dataclasses import dataclass

from .case_record import LONGEST_PHASE_S
from .shapes import Shape

__all__ = [
    "COMPILE_TIMEOUT",
    "IMPORTS",
    "MAX_TIME_RANGE",
    "NOISE_RANGE",
    "SANITIZER_TOOLS",
    "TIMEOUT_RANGE",
    "TIMERS",
    "Request",
    "TimingSettings",
]

#: seconds one NVRTC compile may take (--gemm-compile-timeout): the bundled kernels' variants take 0.44 s on average
#: (84 in 37.1 s on the H100 machine), a kernel that unrolls a loop over 32768 iterations took 60 s and 1.7 GB
COMPILE_TIMEOUT = 300.0

#: the libraries a worker may be asked to import ahead of the cases that use them (a standby's ``--import``): those a
#: case's kernel or peer may need beyond the worker's own, and costly to import
IMPORTS = ("torch",)

#: the allowed values (low, high) of the settings a saved run carries and ``pytest-gemm merge`` compares: seconds a
#: phase may run (--gemm-timeout, --gemm-compile-timeout), a case's timing cap (--gemm-max-time), the noise target
#: (--gemm-noise); the options and the saved run's check read them from here
TIMEOUT_RANGE = (0.1, LONGEST_PHASE_S)
MAX_TIME_RANGE = (0.0, 3600.0)
NOISE_RANGE = (1e-4, 0.5)


#: the compute-sanitizer tools a kernel can be checked with (--gemm-sanitize)
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


#: how a launch's device time is measured (--gemm-timer): each one's name in tables and reports
TIMERS = {
    "cupti": "CUPTI kernel records",  # each kernel's own start and end on the GPU, as Nsight Compute measures
    "events": "CUDA events",  # a start and an end event around the launch: adds the launch's device latency
    "graph": "CUDA graph replays",  # the events around the replay of a CUDA graph of the launch: no host code in it
}


@dataclass(frozen=True)
class TimingSettings:
    """How to time a verified case: the stopping rule and the cache state each launch starts from."""

    noise: float = 0.005  # stop once every tracked median's 95% half-width is within this fraction
    min_samples: int = 10  # fewest kernel/cuBLAS pairs, whatever the time cap
    max_time: float = 1.0  # seconds after which timing stops even if the noise target is not met
    cold_cache: bool = True  # flush L2 before every timed launch (and rotate inputs that fit in L2)
    warmup_s: float = 0.0  # untimed pairs first: 2, then one a set of inputs or this much device time (8 to 64)
    timer: str = "cupti"  # a key of TIMERS; CUPTI falls back to the events, saying why, where it cannot be used


@dataclass(frozen=True)
class Request:
    """One case for a worker: verify it, then time it when ``timing`` is given and it passed."""

    path: str  # the kernel file, absolute
    shown: str  # the kernel file as ids and messages show it (relative to the rootdir)
    kernel: str  # the kernel's name in that file
    params: tuple[tuple[str, int], ...]  # the variant
    dtype: str
    shape: Shape
    alpha: float
    beta: float
    seed: int
    timing: TimingSettings | None = None
    compile_timeout: float = COMPILE_TIMEOUT  # seconds the worker may spend compiling the kernel (its phase's limit)
    fresh_worker: bool = False  # run in a worker started for it (a flagged regression timed again: nothing it shares)
    imports: tuple[str, ...] = ()  # those of IMPORTS its worker may import for it: a hint (isolation.standby)
