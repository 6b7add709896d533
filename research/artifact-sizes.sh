#!/usr/bin/env bash
# How much a run prints and writes: run `pytest --gemm-kernels PATHS` as a user would (default verbosity), with a
# JUnit XML and a saved run (--benchmark-json), then draw the saved run with `pytest-gemm plot` on two CPU cores
# (taskset -c 0,1: the CI machines' size). Writes OUT/NAME.txt (the figures), OUT/NAME.log (what pytest printed)
# and OUT/NAME.tsv (each test's outcome and, for a timed case, its kernel/cuBLAS ratio: to compare two runs).
#
# Usage: research/artifact-sizes.sh NAME OUT PLOT_LIMIT_S PATH... [-- extra pytest args]
#   PLOT_LIMIT_S  seconds the plot may take before it is stopped (and said so); 0 skips the plot
#   REPORT=1      the run also writes --gemm-report (its folder's size is said too)
set -uo pipefail
name=$1 out=$2 plot_limit=$3
shift 3
paths=() extra=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do paths+=("$1"); shift; done
[ $# -gt 0 ] && shift && extra=("$@")
work=$(mktemp -d)
mkdir -p "$out"
summary="$out/$name.txt"
t0=$(date +%s.%N)
report=()
[ "${REPORT:-0}" = 1 ] && report=(--gemm-report "$work/report")
python3 -m pytest --gemm-kernels "${paths[@]}" -p no:randomly --junitxml="$work/run.xml" \
    --benchmark-json="$work/run.json" "${report[@]}" "${extra[@]}" >"$out/$name.log" 2>&1
rc=$?
t1=$(date +%s.%N)
size() { [ -e "$1" ] && du -sb "$1" | cut -f1 || echo missing; }
{
    echo "# $name: pytest --gemm-kernels ${paths[*]} ${extra[*]}"
    echo "exit status: $rc; wall: $(awk "BEGIN{print $t1 - $t0}") s; $(tail -n 1 "$out/$name.log")"
    echo "terminal lines: $(wc -l <"$out/$name.log")"
    echo "JUnit XML bytes: $(size "$work/run.xml")"
    echo "saved run (--benchmark-json) bytes: $(size "$work/run.json")"
    [ ${#report[@]} -gt 0 ] && echo "report folder bytes: $(size "$work/report"); files: $(find "$work/report" -type f | wc -l); its run.json bytes: $(size "$work/report/run.json")"
} >"$summary"
python3 - "$work/run.xml" "$work/run.json" >"$out/$name.tsv" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
outcome = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    test = f"{case.get('file') or case.get('classname')}::{case.get('name')}"
    kids = {child.tag for child in case}
    outcome[test] = "failed" if kids & {"failure", "error"} else "skipped" if "skipped" in kids else "passed"
try:
    runs = json.load(open(sys.argv[2]))["benchmarks"]
except (OSError, ValueError, KeyError):
    runs = []
ratio = {b["extra_info"]["gemm"]["test"].split("::", 1)[-1]: b["extra_info"]["gemm"]["ratio"]
         for b in runs if "gemm" in (b.get("extra_info") or {})}
for test, said in sorted(outcome.items()):
    print(f"{test}\t{said}\t{ratio.get(test.split('::', 1)[-1], '')}")
EOF
if [ "$plot_limit" -gt 0 ] && [ -e "$work/run.json" ]; then
    p0=$(date +%s.%N)
    timeout "$plot_limit" taskset -c 0,1 python3 -m pytest_gemm.cli plot "$work/run.json" --out "$work/plot" \
        >"$out/$name-plot.log" 2>&1
    prc=$?
    p1=$(date +%s.%N)
    {
        echo "plot on 2 cores: exit $prc in $(awk "BEGIN{print $p1 - $p0}") s$([ $prc -eq 124 ] && echo " (stopped at the limit)")"
        echo "plot folder bytes: $(size "$work/plot"); files: $(find "$work/plot" -type f | wc -l)"
        echo "plot folder's largest files:"; find "$work/plot" -type f -printf '%s %P\n' | sort -rn | head -3
    } >>"$summary"
fi
cat "$summary"
rm -rf "$work"
