#!/usr/bin/env bash
# Install pytest-gemm on the GPU machine and run the GPU suite; logs and JSON go under $OUT when it is set.
# Usage: scripts/gpu-check.sh [extra pytest args for the bundled-kernel runs]
#   Wheels in .whl/ are installed first (cupti-python for the CUPTI timer, where the image lacks it; without it
#   every case is timed with CUDA events and the timing table says so)
#   GEMM_SHAPES       shape sets verified (default quick,edge,standard)
#   GEMM_TIMED_SHAPES shape sets timed and gated against baselines/ (default quick,standard)
#   GEMM_PARTS        which parts run (default verify,timed,plugin,broken,faults), to split the work over
#                     several device calls of at most 10 minutes each; `gpu` runs only the GPU-marked tests
#                     (GEMM_GPU_K: only those matching this -k expression), `record` re-records the
#                     outcomes the CPU tests replay (scripts/record_outcomes.py)
#   GEMM_STEP_LIMIT   seconds any one step may run before it is stopped (default 540)
#   GEMM_DEADLINE     seconds the whole script may take (default 570): each step gets at most what is left
#                     (less 20 s for the archive), and a step with under 30 s left is skipped and said so,
#                     so the archive is still written inside a device call's 600 s limit
#   GEMM_WORKERS      pytest-xdist workers for the verification run (default 1: no xdist)
#   GEMM_UPDATE_BASELINES=1 the timed run records baselines/ (--gemm-update-baselines); the
#                     updated files are copied into the archive
#   GEMM_ACCEPTANCE=1 also run research/timing-acceptance.sh (Nsight Compute comparison, repeat runs)
#                     and research/gate-acceptance.sh (the regression gate on slowed kernels; bundled baselines)
#   GEMM_THIRDPARTY=1 also run every folder of .thirdparty/ (third-party kernels wrapped with headers, git-ignored:
#                     give the device tool carry: [".thirdparty"]) on quick,edge, verification only, 4 xdist workers
#                     (GEMM_THIRDPARTY_DIRS: which folders, GEMM_THIRDPARTY_WORKERS: how many xdist workers,
#                     GEMM_THIRDPARTY_SHAPES: which shape sets)
#                     `reach` runs research/reach-gpu.sh (storage orders, strided batches, size types, declared
#                     accumulation, misreadings, the false-alarm sweep, step 12 in both orders of B, timed 3 times;
#                     GEMM_SWEEP_SEEDS, GEMM_SWEEP_LARGE_SEEDS as there; GEMM_REACH_PARTS picks its parts)
#                     `torch` runs research/torch-gpu.sh (Triton and torch kernels, the tutorial matmul on
#                     every shape set, the third-party Triton kernels of .thirdparty/issue35; GEMM_TORCH_PARTS picks)
#                     `fp8` runs tests/gpu/test_gpu_scaled.py (FP8 and INT8 kernels in every scaling mode,
#                     the fault kernels' diagnoses), research/fp8_accuracy.py and research/fp8_peer_layouts.py
#                     `grouped` runs the grouped GEMM's GPU tests (FP8's too), its peer probes, its false-alarm sweeps, step 14
#                     on the grouped and DeepSeek-V3 shapes and
#                     .thirdparty/issue46's public kernels; `epilogue` the fused epilogues' GPU tests, their peer
#                     probe and their false-alarm sweep (GEMM_SWEEP_SEEDS, GEMM_SWEEP_SETS as there)
#                     `bad-input` runs research/bad-input-gpu.sh (the rows of docs/bad-input.md that need a GPU: a shape past
#                     the GPU's memory or the kernel's int arguments, a compile past its limit, a selection
#                     that leaves no GPU case, the compile cache, the README's sample run)
#   GEMM_MULTI_GPU=1  also run research/multi-gpu-acceptance.sh (one GPU against all of them; needs 2 or more)
#   GEMM_ISOLATION    parts of research/isolation-acceptance.sh to run (e.g. faults-timed,faults-verified,control)
set -uo pipefail
out="${OUT:-gpu-check-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
# Wheels carried along in .whl/ (git-ignored), such as cupti-python for the default CUPTI timer on an image without it
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gemm-site .whl/*.whl \
        >>"$out/install.log" 2>&1 && export PYTHONPATH="/tmp/gemm-site${PYTHONPATH:+:$PYTHONPATH}"
fi
timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
    --format=csv >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
status=0
deadline=${GEMM_DEADLINE:-570}  # bash's SECONDS counts from the script's start, the install included
limit() {  # seconds the next step may run: the step limit or what is left before the deadline (at least 1)
    local left=$((deadline - SECONDS - 20)) step=${GEMM_STEP_LIMIT:-540}
    [ $left -lt $step ] && step=$left
    [ $step -lt 1 ] && step=1
    echo $step
}
enough() {  # name: true when at least 30 s are left for the step, else say it is skipped
    [ "$(limit)" -ge 30 ] && return 0
    echo "== $1: skipped, no time left before the deadline"
    status=1
    return 1
}
run() {  # name, pytest args...
    local name=$1; shift
    local t0=$SECONDS
    enough "$name" || return
    timeout "$(limit)" python3 -m pytest -rfEs -o junit_family=legacy --junitxml="$out/$name.xml" "$@" \
        >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc in $((SECONDS - t0)) s: $(tail -n 1 "$out/$name.log")"
    [ $rc -eq 0 ] || status=1
}
parts=",${GEMM_PARTS:-verify,timed,plugin,broken,faults},"
workers=()
[ "${GEMM_WORKERS:-1}" -gt 1 ] && workers=(-p xdist -n "$GEMM_WORKERS")
update=()
[ "${GEMM_UPDATE_BASELINES:-0}" = 1 ] && update=(--gemm-update-baselines)
# 1. The bundled kernels verified on every shape set named in $GEMM_SHAPES.
[[ $parts == *,verify,* ]] && run kernels-verify --gemm-kernels kernels/ --gemm-shapes "${GEMM_SHAPES:-quick,edge,standard}" \
    --benchmark-skip "${workers[@]}" "$@"
# 2. The main job: the bundled kernels verified, timed against cuBLAS and gated against baselines/.
if [[ $parts == *,timed,* ]]; then
    run kernels-timed --gemm-kernels kernels/ --gemm-shapes "${GEMM_TIMED_SHAPES:-quick,standard}" \
        --benchmark-json "$out/kernels-timed.json" --benchmark-save-data --gemm-summary "$out/summary.md" \
        --gemm-report "$out/report-timed" "${update[@]}" "$@"
    [ ${#update[@]} -gt 0 ] && cp -r baselines "$out/baselines"
fi
# 3. The plugin's own tests, GPU ones included (broken kernels, margins, timing).
[[ $parts == *,plugin,* ]] && run plugin-tests tests/ -m "gpu or not gpu"
if [[ $parts == *,gpu,* ]]; then
    if [ -n "${GEMM_GPU_K:-}" ]; then run gpu-tests tests/ -m gpu -k "$GEMM_GPU_K"; else run gpu-tests tests/ -m gpu; fi
fi
if [[ $parts == *,reach,* ]] && enough reach; then
    timeout "$(limit)" bash research/reach-gpu.sh "$out/reach" "${GEMM_REACH_PARTS:-orders,batched,sweep,step12,step12-time}" \
        >/dev/null 2>&1
    echo "== reach: $(grep -c '^== ' "$out/reach/reach-gpu.txt" 2>/dev/null) steps (reach/reach-gpu.txt)"
fi
if [[ $parts == *,torch,* ]] && enough torch; then
    timeout "$(limit)" bash research/torch-gpu.sh "$out/torch" "${GEMM_TORCH_PARTS:-tests,tutorial,thirdparty}" \
        >/dev/null 2>&1
    echo "== torch: $(grep -c '^== ' "$out/torch/torch-gpu.txt" 2>/dev/null) steps (torch/torch-gpu.txt)"
fi
if [[ $parts == *,fp8,* ]]; then  # FP8 and INT8 kernels and faults, then the measurements behind the bound
    run fp8-tests tests/gpu/test_gpu_scaled.py -m gpu
    if enough fp8-research; then
        timeout "$(limit)" python3 research/fp8_accuracy.py >"$out/fp8-accuracy.txt" 2>&1
        timeout "$(limit)" python3 research/fp8_peer_layouts.py >"$out/fp8-peer-layouts.txt" 2>&1
        echo "== fp8-research: $(wc -l <"$out/fp8-accuracy.txt") accuracy lines, $(wc -l <"$out/fp8-peer-layouts.txt") layouts"
    fi
fi
if [[ $parts == *,grouped,* ]]; then  # grouped kernels and faults, the peer's reach, the false-alarm sweep, public kernels
    run grouped-tests tests/gpu/test_gpu_grouped.py -m gpu
    if enough grouped-probe; then
        timeout "$(limit)" python3 research/grouped_peer_probe.py 2>&1 | grep -v Assertion >"$out/grouped-peer-probe.txt"
        echo "== grouped-probe: $(grep -c ': ok' "$out/grouped-peer-probe.txt") ok, $(grep -c refused "$out/grouped-peer-probe.txt") refused"
    fi
    run grouped-sweep tests/gpu/test_gpu_grouped_false_alarms.py -m gpu -s
    # grouped FP8: its kernels and fault, the peer's sweep (GEMM_SWEEP_* as above), the peer probe, step 14 verified
    run grouped-fp8 tests/gpu/test_gpu_grouped_fp8.py -m gpu -s
    if enough grouped-fp8-probe; then
        timeout "$(limit)" python3 research/grouped_fp8_peer_probe.py >"$out/grouped-fp8-peer-probe.txt" 2>&1
        echo "== grouped-fp8-probe: $(grep -c ' ms' "$out/grouped-fp8-peer-probe.txt") timed"
    fi
    run step14 --gemm-kernels kernels/14_fp8_grouped.cu --gemm-shapes grouped,moe-deepseek-v3 -p no:randomly
    if [ -d .thirdparty/issue46 ] && enough grouped-public; then
        timeout "$(limit)" bash .thirdparty/issue46/run.sh -v -p no:randomly >"$out/grouped-public.log" 2>&1
        echo "== grouped-public: $(tail -n 1 "$out/grouped-public.log")"
    fi
fi
if [[ $parts == *,epilogue,* ]]; then  # fused epilogues: kernels and slips, the peer's two ways, the false-alarm sweep
    run epilogue-tests tests/gpu/test_gpu_epilogue.py -m gpu
    if enough epilogue-probe; then
        timeout "$(limit)" python3 research/epilogue_peer_probe.py >"$out/epilogue-peer-probe.txt" 2>&1
        echo "== epilogue-probe: $(grep -c 'takes' "$out/epilogue-peer-probe.txt") shapes compared"
    fi
    run epilogue-sweep tests/gpu/test_gpu_epilogue_false_alarms.py -m gpu -s
fi
if [[ $parts == *,bad-input,* ]] && enough bad-input; then
    timeout "$(limit)" bash research/bad-input-gpu.sh "$out/bad-input" >/dev/null 2>&1
    echo "== bad-input: $(grep -c '^== ' "$out/bad-input/bad-input-gpu.txt" 2>/dev/null) steps (bad-input/bad-input-gpu.txt)"
fi
# The recorded outcomes that the CPU tests replay (tests/data/h100_outcomes.json; copy it back by hand).
if [[ $parts == *,record,* ]] && enough record; then
    timeout "$(limit)" python3 scripts/record_outcomes.py "$out/h100_outcomes.json" >"$out/record.log" 2>&1
    rc=$?
    echo "== record: exit $rc ($(grep -c "::" "$out/record.log") cases)"
    [ $rc -eq 0 ] || status=1
fi
# 4. The deliberately broken kernels, for their failure messages (these cases are meant to fail).
if [[ $parts == *,broken,* ]] && enough broken-demo; then
    timeout "$(limit)" python3 -m pytest -p no:cacheprovider --gemm-kernels tests/kernels_broken/faults.cu \
        tests/kernels_broken/timing_cheat.cu -m gpu --gemm-shapes 256,100x100x64,4096 -k "not 4096 or memo_naive" \
        --gemm-max-time 0.3 -rf --gemm-report "$out/report-broken" \
        >"$out/broken-demo.log" 2>&1
    echo "== broken-demo (failures expected): $(tail -n 1 "$out/broken-demo.log")"
fi
# 5. The crash, hang and launch-limit fixtures (failures expected; each must fail alone, with its own reason).
if [[ $parts == *,faults,* ]] && enough faults-demo; then
    timeout "$(limit)" python3 -m pytest --gemm-kernels tests/kernels_faults/ kernels/01_naive.cu -m gpu \
        --gemm-shapes 256 \
        --gemm-timeout 10 -rf >"$out/faults-demo.log" 2>&1
    echo "== faults-demo (failures expected): $(tail -n 1 "$out/faults-demo.log")"
fi
if [ "${GEMM_THIRDPARTY:-0}" = 1 ]; then
    for folder in ${GEMM_THIRDPARTY_DIRS:-.thirdparty/*/}; do
        name=$(basename "$folder")
        [ "$name" = tools ] && continue
        enough "thirdparty $name" || continue
        timeout "$(limit)" python3 -m pytest -p no:cacheprovider -p no:randomly --gemm-kernels "$folder" -m gpu \
            --gemm-shapes "${GEMM_THIRDPARTY_SHAPES:-quick,edge}" --benchmark-skip --gemm-timeout 10 -p xdist -n "${GEMM_THIRDPARTY_WORKERS:-4}" -rf \
            -o junit_family=legacy --junitxml="$out/thirdparty-$name.xml" >"$out/thirdparty-$name.log" 2>&1
        echo "== thirdparty $name (failures expected): $(tail -n 1 "$out/thirdparty-$name.log")"
    done
fi
[ "${GEMM_MULTI_GPU:-0}" = 1 ] && enough multi-gpu &&
    timeout "$(limit)" bash research/multi-gpu-acceptance.sh "$out/multi-gpu"
[ -n "${GEMM_ISOLATION:-}" ] && enough isolation &&
    timeout "$(limit)" bash research/isolation-acceptance.sh "$out/isolation" ${GEMM_ISOLATION//,/ }
if [ "${GEMM_ACCEPTANCE:-0}" = 1 ]; then
    enough timing-acceptance && { timeout "$(limit)" bash research/timing-acceptance.sh "$out" || status=1; }
    enough gate-acceptance &&
        { timeout "$(limit)" bash research/gate-acceptance.sh "$out" | tee "$out/gate-acceptance.txt" || status=1; }
fi
# The GPU's state at the end, and the driver's Xid lines (a kernel fault, or a GPU that stopped working)
timeout 20 nvidia-smi >"$out/gpu-end.txt" 2>&1 || echo "== nvidia-smi failed at the end: the GPU may have stopped working"
dmesg -T 2>/dev/null | grep -i -E "xid|nvrm" | tail -n 200 >"$out/xid.txt"
[ -s "$out/xid.txt" ] && echo "== $(wc -l <"$out/xid.txt") Xid/NVRM line(s) in the kernel log; last: $(tail -n 1 "$out/xid.txt")"
# Everything in one archive (the device tool brings back only a few files).
tar czf /tmp/gpu-check.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/gpu-check.tgz "$out/"
exit $status
