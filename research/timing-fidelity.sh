#!/usr/bin/env bash
# Timing fidelity on the GPU (issue: measurement fidelity): the harness's device times by each clock
# against Nsight Compute's gpu__time_duration, and their run-to-run spread.
# Usage: research/timing-fidelity.sh OUTDIR [RUNS]   (default 5 runs; sizes in FIDELITY_SIZES)
#   1. RUNS separate processes of flush_compare.py (each timer of FIDELITY_MODES, the order reversed
#      every other run);
#   2. one process per size under ncu (clocks left alone, every cache flushed and invalidated before each launch);
#   3. fidelity_report.py: the table.
set -uo pipefail
out="$1"
runs="${2:-5}"
sizes="${FIDELITY_SIZES:-256,512,1024,4096}"
mkdir -p "$out"
rm -f "$out/flush.jsonl" "$out/under-ncu.jsonl"
for i in $(seq 1 "$runs"); do
    modes=${FIDELITY_MODES:-events,cupti}
    [ $((i % 2)) -eq 0 ] && modes=$(echo "$modes" | tr , '\n' | tac | paste -sd,)
    layouts=0
    [ "$i" -le 2 ] && layouts=2
    python3 research/flush_compare.py "$out/flush.jsonl" --modes "$modes" --sizes "$sizes" --layouts "$layouts" \
        >"$out/flush-$i.log" 2>&1 || echo "run $i failed: $(tail -n 2 "$out/flush-$i.log")"
done
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for size in ${sizes//,/ }; do
    "$ncu" --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv \
        --log-file "$out/ncu-$size.csv" python3 research/flush_compare.py "$out/under-ncu.jsonl" --modes events \
        --sizes "$size" --max-time 0 >"$out/ncu-$size.log" 2>&1 || echo "ncu $size failed: $(tail -n 2 "$out/ncu-$size.log")"
done
python3 research/fidelity_report.py "$out" | tee "$out/fidelity.txt"
