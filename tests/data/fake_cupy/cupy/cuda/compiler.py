"""Stands in for CuPy's compiler module in the CPU tests: its path ends like the real one's.

Loaded from its file (never as the package ``cupy``), so it shadows nothing. ``compile`` takes
as long as it is told, as NVRTC compiling a CuPy kernel on a busy machine does.
"""

import time


def compile(seconds: float) -> None:
    time.sleep(seconds)
