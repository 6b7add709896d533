"""The table of timing-fidelity.sh: harness against Nsight Compute per mode (timer), and run-to-run spreads.

    python research/fidelity_report.py OUTDIR

Reads OUTDIR/flush.jsonl (flush_compare.py, several runs) and OUTDIR/ncu-SIZE.csv (one ncu process per
size). For cuBLAS, Nsight Compute's side is the sum over each call's kernels (ncu_compare.py).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flush_compare import CASES
from ncu_compare import ncu_durations, ncu_launches, timed_cublas_calls


def _pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.2f}%"


def main(folder: str) -> None:
    base = Path(folder)
    records = [json.loads(line) for line in (base / "flush.jsonl").read_text().splitlines() if line.strip()]
    runs = sorted({r["run"] for r in records})
    modes = list(dict.fromkeys(r["mode"] for r in records))
    print(f"{len(runs)} runs, modes {', '.join(modes)}")
    for mode in modes:
        empty = [r["seconds"] for r in records if r["mode"] == mode and r["what"] == "empty"]
        if empty:
            print(
                f"  empty kernel between events after the prepare kernel ({mode}): "
                f"median over runs {statistics.median(empty) * 1e6:.2f} us "
                f"(runs: {', '.join(f'{x * 1e6:.2f}' for x in empty)})"
            )
    main_records = [r for r in records if r["what"] in CASES and "layout" not in r]
    sizes = sorted({r["size"] for r in main_records})
    harness: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    ratios: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in main_records:
        harness[(r["mode"], r["what"], r["size"])].append(r["kernel_s"])
        harness[(r["mode"], "cublas", r["size"])].append(r["cublas_s"])
        ratios[(r["mode"], r["what"], r["size"])].append(r["ratio"])

    ncu: dict[tuple[str, int], float] = {}
    for size in sizes:
        path = base / f"ncu-{size}.csv"
        if not path.exists():
            continue
        try:
            launches = ncu_launches(path)
        except (StopIteration, KeyError, ValueError) as exc:
            print(f"  {path.name}: unreadable ({exc})")
            continue
        durations = ncu_durations(launches)
        for what, (_, kernel, _) in CASES.items():
            mine = next((v for name, v in durations.items() if name.startswith(kernel)), None)
            if mine:
                ncu[(what, size)] = statistics.median(mine)
        calls = timed_cublas_calls(launches, tuple(kernel for _, kernel, _ in CASES.values()))
        if calls:
            groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
            for names, seconds in calls:
                groups[names].append(seconds)
            names, sums = max(groups.items(), key=lambda kv: len(kv[1]))
            ncu[("cublas", size)] = statistics.median(sums)
            print(
                f"  {size}^3 cuBLAS call under ncu: {len(names)} kernel(s) {', '.join(n[:60] for n in names)} "
                f"({len(sums)} calls)"
            )

    print("\nMedian device time (median over runs) against Nsight Compute's gpu__time_duration (median of launches):")
    print("what      size   " + "".join(f"{mode:>22}" for mode in modes) + "        ncu")
    for what in [*CASES, "cublas"]:
        for size in sizes:
            cells = []
            for mode in modes:
                values = harness.get((mode, what, size))
                if not values:
                    cells.append(f"{'-':>22}")
                    continue
                h = statistics.median(values)
                ref = ncu.get((what, size))
                cells.append(f"{h * 1e6:11.2f} us {_pct(h, ref) if ref else '':>8}")
            ref = ncu.get((what, size))
            print(f"{what:8} {size:5}   " + "".join(cells) + (f"  {ref * 1e6:9.2f} us" if ref else "          -"))

    print("\nKernel/cuBLAS ratio over runs (spread = max/min - 1):")
    for what in CASES:
        for size in sizes:
            line = []
            for mode in modes:
                values = ratios.get((mode, what, size), [])
                if values:
                    line.append(
                        f"{mode}: spread {_pct(max(values), min(values))} ({', '.join(f'{v:.4f}' for v in values)})"
                    )
            print(f"  {what:6} {size:5}  " + "; ".join(line))
        for size in sizes:
            for mode in modes:
                values = harness.get((mode, "cublas", size), [])
                if values:
                    print(
                        f"  cuBLAS {size:5} {mode}: spread {_pct(max(values), min(values))} "
                        f"({', '.join(f'{v * 1e6:.2f}' for v in values)} us)"
                    )

    layouts = [r for r in records if "layout" in r]
    if layouts:
        print("\nThe naive kernel again with a buffer held first (operands elsewhere in memory), per run:")
        for r in sorted(layouts, key=lambda r: (r["run"], r["mode"], r["size"], r["layout"])):
            first = next(
                (
                    x
                    for x in main_records
                    if x["run"] == r["run"]
                    and x["mode"] == r["mode"]
                    and x["what"] == "naive"
                    and x["size"] == r["size"]
                ),
                None,
            )
            if first:
                print(
                    f"  run {runs.index(r['run']) + 1} {r['mode']:5} {r['size']:5} layout {r['layout']}: cuBLAS "
                    f"{_pct(r['cublas_s'], first['cublas_s'])}, kernel {_pct(r['kernel_s'], first['kernel_s'])}, "
                    f"ratio {_pct(r['ratio'], first['ratio'])}"
                )


if __name__ == "__main__":
    main(sys.argv[1])
