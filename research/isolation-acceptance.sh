#!/usr/bin/env bash
# Isolation acceptance on the GPU (issue: one broken kernel costs one case, not the run).
# Usage: research/isolation-acceptance.sh OUTDIR PART...   (run from the repo root; each part fits a device call)
#   main-old, main-new: the main job (pytest --gemm-kernels kernels/: quick, timed, gated) with the previous
#       release in .old/ (in-process GPU work; `git archive 4ad0c70 pytest_gemm | tar -x -C .old`) and with this one
#   compile: compiling on a second run, and after --cache-clear
#   faults-timed: the bundled kernels with every fixture of tests/kernels_faults/ interleaved between their files
#   faults-verified: the fixtures after the bundled kernels; and interleaved under -n 4 (verification only)
#   control: steps 1, 2 and 8 timed three times on one machine: alone, with crash fixtures between them, alone
# Then: python3 research/compare_runs.py main-new.xml main-new.json faults-interleaved-timed.xml ....json
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
mix_dir() {  # the bundled kernels with the fixtures interleaved between their files, in a scratch project
    local root=$(mktemp -d)
    mkdir -p "$root/kernels"
    cp kernels/*.cu "$root/kernels/"
    cp tests/kernels_faults/sticky.cu "$root/kernels/01b_sticky.cu"
    cp tests/kernels_faults/hang.cu "$root/kernels/03b_hang.cu"
    cp tests/kernels_faults/registers.cu "$root/kernels/05b_registers.cu"
    cp tests/kernels_faults/py_faults.py "$root/kernels/07b_py_faults.py"
    cp tests/kernels_faults/sticky.cu "$root/kernels/10b_sticky.cu"
    cp -r baselines pyproject.toml "$root/"
    echo "$root"
}
for part in "$@"; do
    case $part in
    main-old)  # the previous release (in-process GPU work), from .old/; run it before this checkout is installed
        old=(env PYTHONPATH=.old python3 -m pytest -p no:gemm -p pytest_gemm.plugin)
        "${old[@]}" --gemm-kernels kernels/01_naive.cu --gemm-shapes 256 -q --benchmark-skip >"$out/warm.log" 2>&1
        rm -rf .pytest_cache
        timed main-old "${old[@]}" "${main[@]}"
        ;;
    main-new)
        rm -rf .pytest_cache
        timed main-new python3 -m pytest "${main[@]}"
        ;;
    compile)  # a second run compiles nothing; --cache-clear empties the cache
        timed compile-second python3 -m pytest --gemm-kernels kernels/ -m gemm_compile -q
        timed compile-cleared python3 -m pytest --gemm-kernels kernels/ -m gemm_compile -q --cache-clear
        ;;
    faults-timed)  # one timed, gated run: bundled kernels and fixtures interleaved
        root=$(mix_dir)
        ls "$root/kernels" >"$out/interleaved-files.txt"
        (cd "$root" && timed faults-interleaved-timed python3 -m pytest "${main[@]}" --gemm-timeout 10 -rf)
        ;;
    faults-verified)  # fixtures after the bundled kernels; then interleaved under -n 4 (verification only)
        timed faults-after-verified python3 -m pytest --gemm-kernels kernels/ tests/kernels_faults/ -p no:randomly \
            -q -o junit_family=legacy --gemm-timeout 10 --benchmark-skip -rf
        root=$(mix_dir)
        (cd "$root" && timed faults-interleaved-n4 python3 -m pytest "${main[@]}" --gemm-timeout 10 -n 4 -rf)
        ;;
    control)  # a small same-machine control: steps 1, 2 and 8 timed without fixtures, with them, and without again
        root=$(mix_dir)
        rm "$root"/kernels/0[3-79]_*.cu "$root"/kernels/1[01]_*.cu "$root"/kernels/03b_hang.cu "$root"/kernels/07b_py_faults.py
        ls "$root/kernels" >"$out/control-files.txt"
        for run in control-a control-b control-c; do
            if [ $run = control-b ]; then sel=(kernels/); else sel=(kernels/01_naive.cu kernels/02_smem_tiling.cu \
                kernels/08_warp_tiling.cu); fi
            (cd "$root" && timed $run python3 -m pytest --gemm-kernels "${sel[@]}" -p no:randomly -q \
                -o junit_family=legacy --gemm-timeout 10 -rf)
        done
        ;;
    *) echo "unknown part $part"; exit 2 ;;
    esac
done
