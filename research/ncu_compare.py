"""Compare the harness's timings with Nsight Compute's, and repeat runs with each other.

Usage: ncu_compare.py FOLDER [GPU_KERNEL_NAME] (the kernel's name in Nsight Compute's list where it is not the
test's: a Triton kernel's is its @triton.jit function's). Reads, from FOLDER: repeat-*.json (pytest-benchmark JSON
of separate runs of one case), ncu.csv (``ncu --csv --metrics gpu__time_duration.sum`` over a run of the same case).
Prints a report.

One cuBLAS call may launch several kernels, and the harness times the call, so Nsight Compute's side
of the comparison is the sum over each call's kernels: a call is a run of consecutive cuBLAS kernels
that follows a launch of the kernel under test (the harness's own kernels end it; the worker's warm-up
and the fp64 truth are not taken for calls). Nsight Compute serialises a call's kernels and flushes the
caches before each, so for a call of two kernels the sum is longer than the call (docs/timing.md).
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

_UNITS = {
    "nsecond": 1e-9,
    "ns": 1e-9,
    "usecond": 1e-6,
    "us": 1e-6,
    "msecond": 1e-3,
    "ms": 1e-3,
    "second": 1.0,
    "s": 1.0,
}


def ncu_launches(path: Path) -> list[tuple[str, float]]:
    """Every profiled launch, in launch order: (kernel name, gpu__time_duration.sum in seconds)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    launches = []
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            value = float(row["Metric Value"].replace(",", ""))
            launches.append((int(row["ID"]), row["Kernel Name"], value * _UNITS[row["Metric Unit"]]))
    return [(name, seconds) for _, name, seconds in sorted(launches)]


def ncu_durations(launches: list[tuple[str, float]]) -> dict[str, list[float]]:
    """Kernel name -> every duration, in launch order."""
    out: dict[str, list[float]] = defaultdict(list)
    for name, seconds in launches:
        out[name].append(seconds)
    return out


def timed_launches(launches: list[tuple[str, float]], kernel: str) -> list[float]:
    """The durations of the kernel's timed launches: those right after the harness's prepare kernel (which opens
    each timed launch). Its other launches (verification's, a Triton autotuner's trials of other configs, a
    warm-up) are left out; all of them where none follows a prepare kernel."""
    timed = [s for (before, _), (name, s) in pairwise(launches) if name.startswith(kernel) and
             before == "pytest_gemm_prepare"]  # fmt: skip
    return timed or [s for name, s in launches if name.startswith(kernel)]


def timed_cublas_calls(
    launches: list[tuple[str, float]], kernels: tuple[str, ...]
) -> list[tuple[tuple[str, ...], float]]:
    """The timed cuBLAS calls: each call's kernels and the sum of their durations. A timed call is the work right after
    the harness's prepare kernel that is not the kernel under test, up to the next harness or CuPy kernel; where no
    prepare kernel was launched, the calls that follow a launch of the kernel under test (:func:`_calls_after`). Other
    work after the kernel's launches (a Triton autotuner's cache fills between its trials) is no cuBLAS call."""
    calls: list[tuple[tuple[str, ...], float]] = []
    names: list[str] | None = None  # the open call's kernels (None: no call open, or the kernel's own launch)
    total = 0.0
    for name, seconds in [*launches, ("pytest_gemm_end", 0.0)]:
        if name.startswith(("cupy", "pytest_gemm")):
            if names:
                calls.append((tuple(names), total))
            names, total = ([] if name == "pytest_gemm_prepare" else None), 0.0
        elif name.startswith(kernels):
            names = None  # the kernel under test's timed launch (its own helpers before it too): no cuBLAS call
        elif names is not None:
            names.append(name)
            total += seconds
    return calls or _calls_after(launches, kernels)


def _calls_after(launches: list[tuple[str, float]], kernels: tuple[str, ...]) -> list[tuple[tuple[str, ...], float]]:
    """The cuBLAS calls that follow a launch of a kernel under test (the timed pairs, and verification's own
    call beside it): each call's kernels and the sum of their durations. The harness's helpers (CuPy's copies
    and fills, pytest-gemm's own kernels) end a call; the fp64 truth and the worker's warm-up are left out."""
    calls: list[tuple[tuple[str, ...], float]] = []
    names: list[str] = []
    total, after_ours = 0.0, False

    def close() -> None:
        nonlocal names, total
        if names:
            calls.append((tuple(names), total))
        names, total = [], 0.0

    for name, seconds in launches:
        low = name.lower()
        if name.startswith(("cupy", "pytest_gemm")):
            close()
        elif name.startswith(kernels):
            close()
            after_ours = True
        elif "f64" in low or "dgemm" in low or "double" in low:
            close()
            after_ours = False
        elif names or after_ours:
            names.append(name)
            total += seconds
            after_ours = False
    close()
    return calls


def main(folder: str, gpu_name: str | None = None) -> None:
    base = Path(folder)
    runs = []
    for path in sorted(base.glob("repeat-*.json")):
        (bench,) = json.loads(path.read_text())["benchmarks"]
        runs.append(bench["extra_info"]["gemm"])
    print(f"{len(runs)} separate runs of {runs[0]['test'] if runs else '?'}")
    for i, g in enumerate(runs, 1):
        print(
            f"  run {i}: kernel {g['median_s'] * 1e3:.4f} ms, cuBLAS {g['cublas_median_s'] * 1e3:.4f} ms, "
            f"ratio {g['ratio']:.4f} [{g['ratio_ci'][0]:.4f}, {g['ratio_ci'][1]:.4f}], n={g['samples']}, "
            f"noise {100 * g['noise']:.2f}%, throttle {g['throttle'] or 'none'}"
        )
    if runs:
        ratios = [g["ratio"] for g in runs]
        spread = max(ratios) / min(ratios) - 1
        print(f"  ratio spread (max/min - 1): {100 * spread:.3f}%  -> {'OK' if spread <= 0.01 else 'OVER 1%'}")

    ncu_file = base / "ncu.csv"
    if not ncu_file.exists() or not runs:
        print("no ncu.csv; skipping the Nsight Compute comparison")
        return
    launches = ncu_launches(ncu_file)
    durations = ncu_durations(launches)
    print("Nsight Compute kernels (count, median):")
    for name, values in sorted(durations.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(values):4d}  {statistics.median(values) * 1e3:10.4f} ms  {name[:110]}")
    kernel = gpu_name or runs[0]["test"].split("::")[-1].split("[")[0]
    harness_kernel = statistics.median(g["median_s"] for g in runs)
    harness_cublas = statistics.median(g["cublas_median_s"] for g in runs)
    mine = timed_launches(launches, kernel)
    if mine:
        ncu_kernel = statistics.median(mine)
        print(
            f"{kernel}: harness {harness_kernel * 1e3:.4f} ms vs ncu {ncu_kernel * 1e3:.4f} ms "
            f"({len(mine)} launches): {100 * (harness_kernel / ncu_kernel - 1):+.2f}%"
        )
    calls = timed_cublas_calls(launches, (kernel,))
    if calls:
        shapes = defaultdict(list)  # the calls of the most common kernel sequence (the timed ones)
        for names, seconds in calls:
            shapes[names].append(seconds)
        names, sums = max(shapes.items(), key=lambda kv: len(kv[1]))
        ncu_cublas = statistics.median(sums)
        print(
            f"cuBLAS (one call = {len(names)} kernel(s): {', '.join(n[:40] for n in names)}): harness "
            f"{harness_cublas * 1e3:.4f} ms vs ncu {ncu_cublas * 1e3:.4f} ms (sum per call, {len(sums)} calls): "
            f"{100 * (harness_cublas / ncu_cublas - 1):+.2f}%"
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
