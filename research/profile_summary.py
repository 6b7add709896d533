"""Where the main job's time went, from research/main-job-profile.sh's py-spy samples.

    python research/profile_summary.py OUTDIR/NAME.raw [--top 30] [--rate 50]

NAME.raw holds py-spy's collapsed stacks (``--format raw``) of the pytest process and its GPU workers. For
each process, the samples of its main thread (threads started by ``threading`` are left out: the
worker's compile watch and the plugin's dispatch threads only wait), in seconds at ``--rate`` samples a
second: the functions most often on the stack, with the time spent in them and below.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path


def summarise(path: Path, top: int, rate: float) -> list[str]:
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    totals: collections.Counter[str] = collections.Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        # each process's frames start with a "process N:..." frame; a worker's appear under its parent's
        starts = [i for i, frame in enumerate(frames) if frame.startswith("process ")]
        process = frames[starts[-1]].split('"')[1][:100] if starts else "?"
        body = [frame.split(" (")[0] for frame in frames[starts[-1] + 1 :]] if starts else frames
        if not body or body[0].startswith("Thread._bootstrap"):
            continue
        totals[process] += int(count)
        for name in dict.fromkeys(body):
            inclusive[process][name] += int(count)
    lines = []
    for process, total in totals.most_common():
        lines.append(f"{process}: main thread {total / rate:.1f} s")
        for name, count in inclusive[process].most_common(top):
            lines.append(f"  {count / rate:8.1f} s  {name}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's --rate")
    args = parser.parse_args()
    print("\n".join(summarise(args.raw, args.top, args.rate)))


if __name__ == "__main__":
    main()
