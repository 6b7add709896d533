"""Tables of the bundled kernels' speed from saved benchmark JSON (research/kernel-speed.sh's runs).

    python research/kernel_speed.py RUN.json [RUN.json ...]            one row per kernel, dtype and shape
    python research/kernel_speed.py --square RUN.json [RUN.json ...]   one row per kernel and dtype, 4096^3 and 8192^3
    python research/kernel_speed.py --cases RUN.json [RUN.json ...]    one row per case of each run: the kernel's
                                                                      and cuBLAS's TFLOP/s, and NVML's throttle reasons

Each cell: % of cuBLAS in the same run and TFLOP/s, the median and range over the runs that timed it, and
how many runs that was. The GPU is named from the runs.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

SQUARE = ("4096x4096x4096", "8192x8192x8192")


def timed(paths: list[str]) -> Iterator[tuple[str, dict]]:
    """(run file, extra_info["gemm"]) of every timed case of each run, in order."""
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        for bench in data["benchmarks"]:
            g = bench["extra_info"]["gemm"]
            if g.get("tflops") is not None and g.get("pct_cublas") is not None:
                yield path, g


def kernel_name(g: dict) -> str:
    return f"{g['file'].split('/')[-1]}::{g['kernel']}"


def load(paths: list[str]) -> tuple[dict[tuple[str, str, str], list[tuple[float, float]]], set[str]]:
    """(dtype, shape, kernel) -> [(TFLOP/s, % of cuBLAS) per run], and the GPU models named."""
    cells: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    gpus: set[str] = set()
    for _, g in timed(paths):
        gpus.add(g["gpu"])
        shape = g["shape"] + (f" {g['ab']}" if g.get("ab") else "")
        cells[(g["dtype"], shape, kernel_name(g))].append((g["tflops"], g["pct_cublas"]))
    return cells, gpus


def cell(values: list[tuple[float, float]]) -> tuple[str, str]:
    tf, pct = np.array([v[0] for v in values]), np.array([v[1] for v in values])
    return (
        f"{np.median(pct):.1f}% ({pct.min():.1f}-{pct.max():.1f})",
        f"{np.median(tf):.0f} ({tf.min():.0f}-{tf.max():.0f})",
    )


def cases(paths: list[str]) -> None:
    """Every timed case of each run as it is: no medians."""
    print("| run | dtype | shape | kernel | TFLOP/s | cuBLAS TFLOP/s | % of cuBLAS | throttle reasons |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for path, g in timed(paths):
        print(
            f"| {path.split('/')[-1]} | {g['dtype']} | {g['shape']} | `{kernel_name(g)}` | {g['tflops']:.1f} | "
            f"{g['cublas_tflops']:.1f} | {g['pct_cublas']:.1f}% | {', '.join(g.get('throttle') or ()) or '-'} |"
        )


def main(args: list[str]) -> None:
    if args[:1] == ["--cases"]:
        cases(args[1:])
        return
    square = args[:1] == ["--square"]
    paths = args[1:] if square else args
    cells, gpus = load(paths)
    print(f"GPU: {', '.join(sorted(gpus))}; {len(paths)} benchmark file(s)\n")
    if square:
        heads = " | ".join(f"{s.split('x')[0]}³ % of cuBLAS | {s.split('x')[0]}³ TFLOP/s" for s in SQUARE)
        print(f"| dtype | kernel | {heads} | runs |")
        print("|---|---|" + "---:|" * (2 * len(SQUARE) + 1))
        for dtype, kernel in sorted({(d, k) for d, s, k in cells if s in SQUARE}):
            row = [cell(cells[(dtype, s, kernel)]) if (dtype, s, kernel) in cells else ("-", "-") for s in SQUARE]
            runs = max(len(cells.get((dtype, s, kernel), [])) for s in SQUARE)
            print(f"| {dtype} | `{kernel}` | " + " | ".join(f"{p} | {t}" for p, t in row) + f" | {runs} |")
        return
    print("| dtype | shape | kernel | TFLOP/s median (range) | % of cuBLAS median (range) | runs |")
    print("|---|---|---|---:|---:|---:|")
    for (dtype, shape, kernel), values in sorted(cells.items(), key=lambda kv: (kv[0][0], _size(kv[0][1]), kv[0][2])):
        pct, tf = cell(values)
        print(f"| {dtype} | {shape} | `{kernel}` | {tf} | {pct} | {len(values)} |")


def _size(shape: str) -> tuple[int, ...]:
    """A shape id's numbers, for sorting: M, N, K and a batch's or groups' count (``8192x4096x7168g8``)."""
    return tuple(int(x) for x in re.findall(r"\d+", shape.split()[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
