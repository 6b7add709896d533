#!/usr/bin/env bash
# One behaviour before and after a change of the code's shape, on the GPU: the same jobs run by an old tree and by this
# one, on one machine, compared case by case (research/compare_runs.py: verdicts and kernel/cuBLAS ratios;
# research/compare_failures.py: the failure text of every failed case).
#   research/refactor-acceptance.sh OLD_TREE OUT [PARTS]
# OLD_TREE: a checkout of the old code (git archive REV | tar -x -C DIR); PARTS (comma-separated, default
# main,demos): `main` runs the main job (`pytest --gemm-kernels kernels/`, timed and gated) old, new, then old again (the
# two old runs are the control of the ratios' spread), `demos` the broken-kernel and faults demos of
# scripts/gpu-check.sh, old and new. Each tree runs from its own root, so ids and paths read alike.
set -uo pipefail
old=$(cd "$1" && pwd) out=$(mkdir -p "$2" && cd "$2" && pwd) parts=",${3:-main,demos},"
new=$PWD
export PYTHONUNBUFFERED=1
run() {  # tree, name, pytest args...
    local tree=$1 name=$2 t0=$SECONDS
    shift 2
    (cd "$tree" && timeout "${GEMM_STEP_LIMIT:-300}" python3 -m pytest -p no:randomly -o junit_family=legacy \
        --junitxml="$out/$name.xml" "$@" >"$out/$name.log" 2>&1)
    echo "== $name: $(tail -n 1 "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
if [[ $parts == *,main,* ]]; then
    for name in old1 new old2; do
        tree=$old
        [ "$name" = new ] && tree=$new
        run "$tree" "main-$name" --gemm-kernels kernels/ --benchmark-json "$out/main-$name.json"
    done
    python3 research/compare_runs.py "$out/main-old1.xml" "$out/main-old1.json" "$out/main-old2.xml" \
        "$out/main-old2.json" >"$out/control.txt" 2>&1
    python3 research/compare_runs.py "$out/main-old1.xml" "$out/main-old1.json" "$out/main-new.xml" \
        "$out/main-new.json" >"$out/old-new.txt" 2>&1
    python3 research/compare_runs.py "$out/main-old2.xml" "$out/main-old2.json" "$out/main-new.xml" \
        "$out/main-new.json" >>"$out/old-new.txt" 2>&1
fi
if [[ $parts == *,demos,* ]]; then
    for tree in new old; do
        dir=$old
        [ "$tree" = new ] && dir=$new
        run "$dir" "broken-$tree" -p no:cacheprovider --gemm-kernels tests/kernels_broken/faults.cu \
            tests/kernels_broken/timing_cheat.cu -m gpu --gemm-shapes 256,100x100x64,4096 -k "not 4096 or memo_naive" \
            --gemm-max-time 0.3 -rf
        run "$dir" "faults-$tree" --gemm-kernels tests/kernels_faults/ kernels/01_naive.cu -m gpu --gemm-shapes 256 \
            --gemm-timeout 10 -rf
    done
    for demo in broken faults; do
        python3 research/compare_failures.py "$out/$demo-old.xml" "$out/$demo-new.xml" >"$out/$demo-compare.txt" 2>&1
        echo "== $demo: $(tail -n 1 "$out/$demo-compare.txt")" | tee -a "$out/summary.txt"
    done
fi
