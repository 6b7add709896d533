"""Stands in for Triton's compiler module in the CPU tests: its path ends like the real one's.

Loaded from its file (never as the package ``triton``), so it shadows nothing. ``compile`` takes as long as it is
told, as Triton's JIT compiling a kernel's first call does.
"""

import time


def compile(seconds: float) -> None:
    time.sleep(seconds)
