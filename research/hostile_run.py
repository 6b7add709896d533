"""A saved run made hostile, for research/bad-input-rows.sh: SRC's JSON with named edits, written to DEST.

    python3 research/hostile_run.py SRC DEST [--set KEY=JSON]... [--reverse KEY] [--gpu NAME] [--other-file]

``--set`` and ``--reverse`` change the first timed case's record (``test`` moves its ``fullname`` and ``file`` too),
``--gpu`` names the GPU everywhere, ``--other-file`` adds each ``sgemm_naive`` case again from ``other/01_naive.cu``
at half its ratio. Values are JSON; nothing is evaluated.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    parser.add_argument("--reverse", action="append", default=[], metavar="KEY")
    parser.add_argument("--gpu")
    parser.add_argument("--other-file", action="store_true")
    args = parser.parse_args()
    run = json.loads(args.src.read_text(encoding="utf-8"))
    first = run["benchmarks"][0]
    record = first["extra_info"]["gemm"]
    for item in args.set:
        key, _, value = item.partition("=")
        record[key] = json.loads(value)
        if key == "test":
            first["fullname"] = record["test"]
            record["file"] = record["test"].split("::")[0]
    for key in args.reverse:
        record[key] = record[key][::-1]
    if args.gpu is not None:
        run["machine_info"]["gpu"]["name"] = args.gpu
        for bench in run["benchmarks"]:
            bench["extra_info"]["gemm"]["gpu"] = args.gpu
    if args.other_file:
        for bench in [b for b in run["benchmarks"] if "sgemm_naive" in b["fullname"]]:
            other = copy.deepcopy(bench)
            gemm = other["extra_info"]["gemm"]
            other["fullname"] = gemm["test"] = gemm["test"].replace("kernels/", "other/")
            gemm["file"] = "other/01_naive.cu"
            gemm["ratio"] /= 2
            gemm["ratio_ci"] = [x / 2 for x in gemm["ratio_ci"]]
            gemm["pct_cublas"] *= 2
            gemm["pct_cublas_ci"] = [x * 2 for x in gemm["pct_cublas_ci"]]
            gemm["median_s"] /= 2
            gemm["ci_s"] = [x / 2 for x in gemm["ci_s"]]
            gemm["tflops"] *= 2
            run["benchmarks"].append(other)
    args.dest.write_text(json.dumps(run), encoding="utf-8")


if __name__ == "__main__":
    main()
