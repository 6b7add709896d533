#!/usr/bin/env bash
# Where the main job's time goes (issue: measurement fidelity and speed). From the repository root, on a GPU machine.
# Usage: research/main-job-profile.sh OUTDIR [NAME...]   (default names: cold warm; cold expects fresh caches)
#   Each run is the main job, `pytest --gemm-kernels kernels/` (quick, timed, gated), sampled by py-spy across the
#   pytest process and its GPU workers (--subprocesses --idle --nonblocking: the processes are never paused), with
#   nvidia-smi's utilisation every 0.2 s. Writes NAME.log, NAME.xml (each case's worker phases), NAME.json,
#   NAME.raw (collapsed stacks) and NAME-smi.csv; research/profile_summary.py reads them.
#   py-spy must be installed (a wheel: pip install py-spy); without it the runs go on unsampled.
set -uo pipefail
out="$1"; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(cold warm)
spy=()
command -v py-spy >/dev/null && spy=(py-spy record --nonblocking --subprocesses --idle --rate 50 --format raw)
for name in "${names[@]}"; do
    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 200 >"$out/$name-smi.csv" 2>&1 &
    smi=$!
    t0=$(date +%s%N)
    cmd=(python3 -m pytest --gemm-kernels kernels/ -p no:randomly -o junit_family=legacy
         --junitxml="$out/$name.xml" --benchmark-json="$out/$name.json")
    if [ ${#spy[@]} -gt 0 ]; then
        "${spy[@]}" -o "$out/$name.raw" -- "${cmd[@]}" >"$out/$name.log" 2>&1
    else
        "${cmd[@]}" >"$out/$name.log" 2>&1
    fi
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    kill $smi 2>/dev/null
    busy=$(awk -F', ' '{n++; if ($2+0 > 0) b++; s += $2} END {if (n) printf "busy in %d of %d samples, mean %.1f%%", b, n, s/n}' "$out/$name-smi.csv")
    echo "== $name: exit $rc in $((ms / 1000)).$(printf %03d $((ms % 1000))) s; GPU $busy: $(grep -E 'passed|failed' "$out/$name.log" | tail -n 1)"
done
