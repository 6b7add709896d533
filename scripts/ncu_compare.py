"""Compare the harness's timings with Nsight Compute's, and repeat runs with each other.

Reads, from the directory given: repeat-*.json (pytest-benchmark JSON of separate runs of one case),
ncu.csv (``ncu --csv --metrics gpu__time_duration.sum`` over a run of the same case). Prints a report.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from collections import defaultdict
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


def ncu_durations(path: Path) -> dict[str, list[float]]:
    """Kernel name -> every gpu__time_duration.sum, in seconds, in launch order."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    out: dict[str, list[float]] = defaultdict(list)
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            value = float(row["Metric Value"].replace(",", ""))
            out[row["Kernel Name"]].append(value * _UNITS[row["Metric Unit"]])
    return out


def main(folder: str) -> None:
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
    durations = ncu_durations(ncu_file)
    print("Nsight Compute kernels (count, median):")
    for name, values in sorted(durations.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(values):4d}  {statistics.median(values) * 1e3:10.4f} ms  {name[:110]}")
    naive = [v for name, v in durations.items() if name.startswith("sgemm_naive")]
    gemm = [
        (name, v)
        for name, v in durations.items()
        if "gemm" in name.lower() and not name.startswith("sgemm_naive") and "f64" not in name and "dgemm" not in name
    ]
    harness_kernel = statistics.median(g["median_s"] for g in runs)
    harness_cublas = statistics.median(g["cublas_median_s"] for g in runs)
    if naive:
        ncu_naive = statistics.median(naive[0])
        print(
            f"naive: harness {harness_kernel * 1e3:.4f} ms vs ncu {ncu_naive * 1e3:.4f} ms "
            f"({len(naive[0])} launches): {100 * (harness_kernel / ncu_naive - 1):+.2f}%"
        )
    if gemm:
        name, values = max(gemm, key=lambda nv: len(nv[1]))
        ncu_cublas = statistics.median(values)
        print(
            f"cuBLAS ({name[:60]}): harness {harness_cublas * 1e3:.4f} ms vs ncu {ncu_cublas * 1e3:.4f} ms "
            f"({len(values)} launches): {100 * (harness_cublas / ncu_cublas - 1):+.2f}%"
        )


if __name__ == "__main__":
    main(sys.argv[1])
