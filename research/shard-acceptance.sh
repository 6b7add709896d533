#!/usr/bin/env bash
# Two shards merged against one unsharded run (issue: every GPU of a host, and many hosts). From the repo root,
# on a GPU machine with pytest-gemm installed.
# Usage: research/shard-acceptance.sh OUTDIR [GPU_A [GPU_B]]   (CUDA device indices; default 0 and 1, or 0 twice)
#   Works in scratch copies of the project (one for the unsharded run, one per shard, each with its own pytest
#   cache and so its own compile cache), so that this checkout's baselines/ is never written. The unsharded run
#   goes first and leaves CuPy's own kernel cache warm for the shards: compare the tests and baselines, not times.
#   one:            the main job (quick, timed) unsharded on GPU_A, recording baselines (--gemm-update-baselines)
#   shard1, shard2: --gemm-shard 1/2 on GPU_A and 2/2 on GPU_B, at the same time when the GPUs differ, each saving
#                   its run with --gemm-report; then `pytest-gemm merge ... --update-baselines` records them
#   Then compares: the tests and their outcomes (JUnit XML: the shards' union against the unsharded run) and
#   the baseline files the two ways wrote (the same entries; their ratios differ only by run-to-run noise).
set -uo pipefail
out="$(realpath -m "$1")"
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then echo "$out is not empty: give a new folder" >&2; exit 2; fi
a="${2:-0}"
b="${3:-$([ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && echo 1 || echo "$a")}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
scratch() {  # a copy of the project without its baselines
    local root
    root=$(mktemp -d)
    cp -r kernels pyproject.toml "$root/"
    mkdir -p "$root/baselines"
    echo "$root"
}
main=(python3 -m pytest --gemm-kernels kernels/ -p no:randomly -q -o junit_family=legacy)
one=$(scratch)
t0=$SECONDS
(cd "$one" && CUDA_VISIBLE_DEVICES=$a "${main[@]}" --gemm-update-baselines --junitxml="$out/one.xml" \
    >"$out/one.log" 2>&1)
echo "== one (GPU $a, recording baselines): exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$out/one.log")"
cp -r "$one/baselines" "$out/baselines-one"
sharded=$(scratch)  # where the merge runs and records its baselines
t0=$SECONDS
for i in 1 2; do
    gpu=$([ $i = 1 ] && echo "$a" || echo "$b")
    shard=$(scratch)
    (cd "$shard" && CUDA_VISIBLE_DEVICES=$gpu "${main[@]}" --gemm-shard $i/2 --gemm-report "$out/report-$i" \
        --junitxml="$out/shard$i.xml" >"$out/shard$i.log" 2>&1; echo "== shard $i/2 (GPU $gpu): exit $?: $(tail -n 1 "$out/shard$i.log")") &
    [ "$a" = "$b" ] && wait
done
wait
echo "== both shards done in $((SECONDS - t0)) s"
(cd "$sharded" && python3 -m pytest_gemm.cli merge "$out/report-1/run.json" "$out/report-2/run.json" --out "$out/merged.json" \
    --summary "$out/merged-summary.md" --update-baselines >"$out/merge.log" 2>&1)
echo "== merge --update-baselines: exit $?: $(tail -n 1 "$out/merge.log")"
cp -r "$sharded/baselines" "$out/baselines-merged"
python3 - "$out" <<'PY'
import json, statistics, sys
import xml.etree.ElementTree as ET
from pathlib import Path

out = Path(sys.argv[1])

def outcomes(path):
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        found[f"{case.get('classname')}::{case.get('name')}"] = kind
    return found

one = outcomes(out / "one.xml")
shards = [outcomes(out / f"shard{i}.xml") for i in (1, 2)]
union = {**shards[0], **shards[1]}
print(f"tests: unsharded {len(one)}, shards {len(shards[0])} + {len(shards[1])} = {len(union)} "
      f"(in both shards: {len(set(shards[0]) & set(shards[1]))})")
same = set(one) == set(union) and all(one[t] == union[t] for t in one) and bool(one)
print(f"same tests: {set(one) == set(union)}; same outcomes: {sum(one[t] == union.get(t) for t in one)} of {len(one)}")
for test in sorted(set(one) ^ set(union))[:10]:
    print("  only in one of them:", test)

files = {name: sorted((out / name).glob("*.json")) for name in ("baselines-one", "baselines-merged")}
print("baseline files:", {name: [p.name for p in paths] for name, paths in files.items()})
same = same and bool(files["baselines-one"]) and [p.name for p in files["baselines-one"]] == [
    p.name for p in files["baselines-merged"]
]
for path in files["baselines-one"]:
    other = out / "baselines-merged" / path.name
    if not other.exists():
        print(f"  {path.name}: not written by the merge")
        continue
    x, y = (json.loads(p.read_text())["entries"] for p in (path, other))
    common = sorted(set(x) & set(y))
    moves = [abs(y[k]["ratio"] / x[k]["ratio"] - 1) * 100 for k in common] or [float("nan")]
    fields = sum(set(x[k]) == set(y[k]) for k in common)
    same = same and set(x) == set(y) and fields == len(common)
    print(f"  {path.name}: entries {len(x)} unsharded, {len(y)} merged, {len(common)} in both; "
          f"same fields in {fields}; |ratio change| median {statistics.median(moves):.2f}%, max {max(moves):.2f}%")
sys.exit(0 if same else 1)
PY
