"""What CuPy compiled in a run, from research/cupy_compile_log's JSON lines.

    python research/compile_summary.py NAME=DIR [NAME=DIR ...] [--top 12]

For each run: how many kernels NVRTC compiled and the seconds it took; how many of those seconds the timer's
compile thread took beside the rest (they overlap the warm-up) and how many went to CuPy's CUB reductions
(kernels named ``*_pass1`` and ``*_pass2``); the pytest-gemm lines that asked for most of that time; and the
longest single compiles.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def summarise(name: str, folder: Path, top: int) -> list[str]:
    records = [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.open(encoding="utf-8")]
    if not records:
        return [f"== {name}: no compiles logged in {folder}"]
    total = sum(r["dur"] for r in records)
    # the timer's own kernels compile in a thread of their own (Timer._compile); the rest on the main thread
    aside = sum(r["dur"] for r in records if any(f.endswith(":_compile") for f in r["stack"]))
    lines = [
        f"== {name}: {len(records)} kernels compiled by NVRTC in {total:.1f} s "
        f"({aside:.1f} s of it in the timer's compile thread, beside the rest)"
    ]
    cub = [r for r in records if any(k.endswith(("_pass1", "_pass2")) for k in r["kernels"])]
    lines.append(f"  CUB's two-pass reductions: {len(cub)} kernels, {sum(r['dur'] for r in cub):.1f} s")
    seconds: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for r in records:
        ours = [f for f in r["stack"] if not f.startswith("sitecustomize.py")]  # logs of an earlier hook had its own
        site = ours[-1] if ours else "(outside pytest-gemm)"
        seconds[site] += r["dur"]
        counts[site] += 1
    lines.append("  seconds  kernels  asked for by")
    for site, s in sorted(seconds.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"  {s:7.2f}  {counts[site]:7d}  {site}")
    longest = sorted(records, key=lambda r: -r["dur"])[:6]
    lines.append("  longest: " + ", ".join(f"{(r['kernels'] or ['?'])[0]} {r['dur']:.2f} s" for r in longest))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="NAME=DIR: a run's name and its GEMM_COMPILE_LOG folder")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    for run in args.runs:
        name, _, folder = run.partition("=")
        print("\n".join(summarise(name, Path(folder), args.top)))


if __name__ == "__main__":
    main()
