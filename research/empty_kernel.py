"""What a kernel that does nothing measures, by CUPTI's records and under Nsight Compute (issue 16: accuracy).

    python research/empty_kernel.py            # CUPTI: the median of 300 launches, each after the prepare kernel
    ncu --clock-control none --cache-control all -k empty_k --metrics gpu__time_duration.sum,sm__cycles_elapsed.max \\
        --csv --log-file empty.csv python research/empty_kernel.py ncu    # 20 launches of each grid under ncu

Two grids: one block of 32 threads, and 4 blocks of 256 per SM. Each launch follows the timer's prepare kernel
(``Timer.prepare``, docs/lab.md), as a timed launch does. The difference between the two clocks for an
empty kernel is what Nsight Compute's ``gpu__time_duration`` carries that a kernel's own start and end do not.
"""

from __future__ import annotations

import statistics
import sys

from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.cupti_clock import MARK_KERNEL, CuptiClock
from pytest_gemm.worker.rounds import MARK_SOURCE


def main() -> None:
    backend = GpuBackend()
    timer, cp = backend.timer, backend.cp
    c = cp.zeros(16, dtype=cp.uint8)
    empty = cp.RawKernel('extern "C" __global__ void empty_k() {}', "empty_k")
    mark = cp.RawKernel(MARK_SOURCE, MARK_KERNEL)  # the harness's mark kernel: closes the last launch's span
    for kernel in (empty, mark):
        kernel.compile()  # now, not inside CUPTI's window
    grids = {"1x32": ((1,), (32,)), "4SMx256": ((4 * timer.runner.sm_count,), (256,))}
    under_ncu = sys.argv[1:] == ["ncu"]
    for name, (grid, block) in grids.items():
        clock = None if under_ncu else CuptiClock()
        with backend.runner.stream as stream:
            if clock is not None:
                clock.start()
            for _ in range(20 if under_ncu else 300):
                timer.prepare(c, c, True)
                empty(grid, block, ())
            if clock is not None:
                mark((1,), (1,), ())
            stream.synchronize()
        if clock is not None:
            spans = [s for s in clock.spans() if s]
            print(f"{name}: CUPTI median {statistics.median(s.seconds for s in spans) * 1e9:.0f} ns over {len(spans)}")


if __name__ == "__main__":
    main()
