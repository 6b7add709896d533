#!/usr/bin/env bash
# Isolation acceptance on the GPU (issue: one broken kernel costs one case, not the run).
# Usage: scripts/isolation-acceptance.sh OUTDIR PART...   (parts: overhead, faults; run from the repo root)
#   overhead: the main job (pytest --gemm-kernels kernels/, quick, timed, gated) with the code in .old/ (the
#             previous release, in-process GPU work) and with this checkout, on the same machine
#   faults:   the bundled kernels with every fixture of tests/kernels_faults/ interleaved between their files,
#             timed; the same after them, verified; and interleaved under -n 4, verified
set -uo pipefail
out="$1"; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
main=(--gemm-kernels kernels/ -p no:randomly -q -o junit_family=legacy)
timed() {  # name, pytest args... : one run, its wall time, JUnit XML and benchmark JSON
    local name=$1; shift
    local t0=$(date +%s%N)
    "$@" --junitxml="$out/$name.xml" --benchmark-json="$out/$name.json" >"$out/$name.log" 2>&1
    local rc=$?
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "== $name: exit $rc in $((ms / 1000)).$(printf %03d $((ms % 1000))) s: $(tail -n 1 "$out/$name.log")"
}
for part in "$@"; do
    case $part in
    overhead)
        # warm CuPy's own kernel cache first, so that neither run pays for it
        old=(env PYTHONPATH=.old python3 -m pytest -p no:gemm -p pytest_gemm.plugin)
        "${old[@]}" --gemm-kernels kernels/01_naive.cu --gemm-shapes 256 -q --benchmark-skip >"$out/warm.log" 2>&1
        rm -rf .pytest_cache
        timed main-old "${old[@]}" "${main[@]}"
        rm -rf .pytest_cache
        timed main-new python3 -m pytest "${main[@]}"
        # compiling on a second run (the cache is warm from main-new), and after --cache-clear
        timed compile-second python3 -m pytest --gemm-kernels kernels/ -m gemm_compile -q
        timed compile-cleared python3 -m pytest --gemm-kernels kernels/ -m gemm_compile -q --cache-clear
        ;;
    faults)
        mix=$(mktemp -d)/kernels
        mkdir -p "$mix"
        cp kernels/*.cu "$mix"/
        cp tests/kernels_faults/sticky.cu "$mix/01b_sticky.cu"
        cp tests/kernels_faults/hang.cu "$mix/03b_hang.cu"
        cp tests/kernels_faults/registers.cu "$mix/05b_registers.cu"
        cp tests/kernels_faults/py_faults.py "$mix/07b_py_faults.py"
        cp tests/kernels_faults/sticky.cu "$mix/10b_sticky.cu"
        cp -r baselines "$mix/../baselines"
        cp pyproject.toml "$mix/../"
        ls "$mix" >"$out/interleaved-files.txt"
        (cd "$mix/.." && timed faults-interleaved-timed python3 -m pytest --gemm-kernels kernels/ -p no:randomly -q \
            -o junit_family=legacy --gemm-timeout 10 -rf)
        timed faults-after-verified python3 -m pytest --gemm-kernels kernels/ tests/kernels_faults/ -p no:randomly -q \
            -o junit_family=legacy --gemm-timeout 10 --benchmark-skip -rf
        (cd "$mix/.." && timed faults-interleaved-n4 python3 -m pytest --gemm-kernels kernels/ -p no:randomly -q \
            -o junit_family=legacy --gemm-timeout 10 -n 4 -rf)
        ;;
    esac
done
