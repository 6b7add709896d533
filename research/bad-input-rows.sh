#!/usr/bin/env bash
# The bad-input rows of 2026-11-28 (docs/bad-input.md), run again as a new user would, on a machine without a GPU:
# each input of each row in a fresh folder, its command's exit code, wall time and the lines that matter appended to
# OUTDIR/bad-input-rows.txt (full logs beside it), and, for the rows that once lost or changed data, a listing of
# every file changed or added outside the folder the command was told to write.
# Usage: research/bad-input-rows.sh OUTDIR   (from the repo root, after the README's install)
set -uo pipefail
repo=$PWD
out=$(mkdir -p "$1" && cd "$1" && pwd)
sum="$out/bad-input-rows.txt"
. "$(dirname "$0")/step.sh"
: >"$sum"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=$repo/tests/data/h100_run.json
base=$repo/baselines/nvidia-h100-80gb-hbm3.json
fresh() {  # a new project folder with the naive kernel, entered
    local dir="$work/$1"
    mkdir -p "$dir/kernels" "$dir/baselines" && cd "$dir" && cp "$repo/kernels/01_naive.cu" kernels/
}
tree() { (cd "$work" && find . -type f -newer "$work/.stamp" -printf '%p %m\n' | sort); }
stamp() { touch "$work/.stamp"; sleep 0.01; }
edit_run() {  # SRC DEST [ARGS...]: DEST is SRC's saved run with research/hostile_run.py's named edits
    python3 "$repo/research/hostile_run.py" "$@"
}
header() {  # NAME ENTRY EXTRA: a .cu file with the naive kernel's body under a header
    sed -e "s/^name = .*/name = \"$1\"/" -e "s/^entry = .*/entry = \"$2\"/" "$repo/kernels/01_naive.cu" |
        awk -v extra="$3" '{print} /^entry = / && extra != "" {print extra}'
}
pyk() {  # a Python kernel file with the decorator line $1 and the def line $2
    printf 'import cupy\nfrom pytest_gemm import gemm_kernel\n%s\n\n\n%s\n    C[...] = alpha * (A @ B) + beta * C\n' "$1" "$2"
}
pick='^(E  |ERROR|[^ ]+\.(cu|py|ini):[0-9]+:|pytest-gemm: (error|.*symlink|.*gemm_kernel|.*no GPU case)|  note:|.*Traceback|.*MemoryError|INTERNALERROR)|(passed|failed|[0-9] errors?|collected)'

# row 3: one kernel name in two files, drawn from one saved run
fresh r3
edit_run "$run" dup.json --other-file
step r3-plot 60 "$pick|png" pytest-gemm plot dup.json --out rep
grep -o 'other/01_naive.cu::sgemm_naive\|kernels/01_naive.cu::sgemm_naive' rep/index.html | sort | uniq -c >>"$sum"
fresh r3b
{ header sgemm_naive sgemm_naive ""; header sgemm_naive sgemm_naive ""; } >kernels/dup.cu
step r3-one-file 120 "$pick" "${p[@]}" --gemm-kernels kernels

# row 12: a truncated baseline, a baseline path that is a folder, --baselines a file
fresh r12
head -c 100000 "$base" >baselines/nvidia-h100-80gb-hbm3.json && chmod 664 baselines/nvidia-h100-80gb-hbm3.json
sha=$(sha256sum baselines/nvidia-h100-80gb-hbm3.json)
for cmd in show compare prune update; do
    args=()
    [ $cmd = compare ] && args=("$run")
    [ $cmd = update ] && args=(--from "$run")
    step "r12-truncated-$cmd" 60 "$pick" pytest-gemm $cmd "${args[@]}"
done
step r12-truncated-plugin 120 "$pick" "${p[@]}" --gemm-kernels kernels
echo "   file unchanged: $(sha256sum -c <<<"$sha" 2>&1) mode $(stat -c %a baselines/nvidia-h100-80gb-hbm3.json)" >>"$sum"
step r12-truncated-force 60 "$pick" pytest-gemm update --from "$run" --force
echo "   after --force: mode $(stat -c %a baselines/nvidia-h100-80gb-hbm3.json); $(ls baselines | tr '\n' ' ')" >>"$sum"
fresh r12b
mkdir baselines/nvidia-h100-80gb-hbm3.json
step r12-folder 60 "$pick" pytest-gemm compare "$run"
step r12-folder-plugin 120 "$pick" "${p[@]}" --gemm-kernels kernels
fresh r12c
step r12-baselines-a-file 120 "$pick" "${p[@]}" --gemm-kernels kernels --gemm-baselines kernels/01_naive.cu

# row 13: foreign files given to merge; fields of a saved run that would become paths
fresh r13
echo '{"a": 1}' >a.json && echo '[1, 2]' >list.json && echo '{"benchmarks": []}' >empty.json
head -c 4096 /dev/urandom >binary.json
for f in a list empty binary; do step "r13-merge-$f" 60 "$pick" pytest-gemm merge "$f.json" "$run" --out m.json; done
step r13-merge-passwd 60 "$pick" pytest-gemm merge /etc/passwd "$run" --out m.json
step r13-merge-baseline 60 "$pick" pytest-gemm merge "$base" "$run" --out m.json
mkdir -p docs/images && echo "MY OWN PICTURE" >docs/images/mine.png
edit_run "$run" evil-dtype.json --set 'dtype="x/../../docs/images/mine"'
edit_run "$run" evil-escape.json --set "dtype=\"x/../../../../../../../..$work/ESCAPED\""
edit_run "$run" evil-test.json --set "test=\"../../../..$work/r13/PWNED_file.cu::sgemm_naive[fp32-256x256x256]\""
edit_run "$run" evil-abs.json --set "test=\"$work/r13/PWNED_abs.cu::sgemm_naive[fp32-256x256x256]\""
edit_run "$run" evil-gpu.json --gpu '../../tmp/pwned gpu'
for f in evil-dtype evil-escape; do
    stamp
    step "r13-plot-$f" 60 "$pick|png" pytest-gemm plot "$f.json" --out "rep-$f"
    echo "   written outside rep-$f: $(tree | grep -v "/rep-$f/" | tr '\n' ' ')" >>"$sum"
    stamp
    step "r13-merge-report-$f" 60 "$pick|png" pytest-gemm merge "$f.json" --out "merged-$f.json" --report "repm-$f"
    echo "   written outside repm-$f: $(tree | grep -v "/repm-$f/" | grep -v "merged-$f.json" | tr '\n' ' ')" >>"$sum"
done
echo "   docs/images/mine.png now: $(head -c 14 docs/images/mine.png)" >>"$sum"
for f in evil-test evil-abs evil-gpu; do
    stamp
    step "r13-update-$f" 60 "$pick" pytest-gemm update --from "$f.json"
    keys=$(python3 -c "import json, sys; print(sum(k.startswith(('/', '..')) for f in sys.argv[1:] for k in json.load(open(f))['entries']))" baselines/*.json 2>/dev/null)
    echo "   written: $(tree | tr '\n' ' '); entry keys starting with '/' or '..': ${keys:-0}" >>"$sum"
done

# row 17: names that are not ASCII
fresh r17
cp kernels/01_naive.cu "kernels/ядро_ü.cu" && cp kernels/01_naive.cu "kernels/emoji_😀.cu" && cp kernels/01_naive.cu "kernels/sp ace.cu"
step r17-file-names 120 "$pick" "${p[@]}" --gemm-kernels kernels --co -q
fresh r17b
rm kernels/01_naive.cu
pyk '@gemm_kernel(dtypes=["fp32"])' 'def ядро(M, N, K, alpha, A, B, beta, C):' >"kernels/пи_ядро.py"
step r17-py-name 120 "$pick" "${p[@]}" --gemm-kernels kernels
header sgemm_naive sgemm_naive 'params = { ТАЙЛ = [16] }' >kernels/01_naive.cu && rm "kernels/пи_ядро.py"
step r17-param 120 "$pick" "${p[@]}" --gemm-kernels kernels
header sgemm_naive sgemm_naive 'params = { "ТАЙЛ" = [16] }' >kernels/01_naive.cu
step r17-param-quoted 120 "$pick" "${p[@]}" --gemm-kernels kernels
header sgemm_naive "sgemm_naïve" "" >kernels/01_naive.cu
step r17-entry 120 "$pick" "${p[@]}" --gemm-kernels kernels

# row 21: the decorator written in the ways users write it, each file beside a good kernel
fresh r21
i=0
while IFS='|' read -r deco def; do
    i=$((i + 1))
    pyk "$deco" "$def" >"kernels/k$i.py"
done <<'EOF'
@gemm_kernel(dtypes=["fp32"])|class K:
TYPES = ["fp32"]\n@gemm_kernel(dtypes=TYPES)|def k2(M, N, K, alpha, A, B, beta, C):
@gemm_kernel|def k3(M, N, K, alpha, A, B, beta, C):
@gemm_kernel()|def k4(M, N, K, alpha, A, B, beta, C):
@gemm_kernel(dtypes=["fp32"], colour="red")|def k5(M, N, K, alpha, A, B, beta, C):
@gemm_kernel("fp32")|def k6(M, N, K, alpha, A, B, beta, C):
@gemm_kernel(**{"dtypes": ["fp32"]})|def k7(M, N, K, alpha, A, B, beta, C):
@gemm_kernel(dtypes=["fp32"])\n@gemm_kernel(dtypes=["fp32"])|def k8(M, N, K, alpha, A, B, beta, C):
@gemm_kernel(dtypes=["fp32"], requires=[f"M > {1}"])|def k9(M, N, K, alpha, A, B, beta, C):
@gemm_kernel(dtypes=["fp32"], alpha_beta="no")|def k10(M, N, K, alpha, A, B, beta, C):
EOF
sed -i 's/\\n/\n/' kernels/k*.py
printf 'from pytest_gemm import gemm_kernel\n\nk11 = gemm_kernel(dtypes=["fp32"])(lambda M, N, K, alpha, A, B, beta, C: None)\n' >kernels/k11.py
pyk '@gk(dtypes=["fp32"])' 'def k12(M, N, K, alpha, A, B, beta, C):' | sed 's/import gemm_kernel$/import gemm_kernel as gk/' >kernels/k12.py
printf 'import cupy\nimport pytest_gemm as pg\n\n\n@pg.gemm_kernel(dtypes=["fp32"])\ndef k13(M, N, K, alpha, A, B, beta, C):\n    C[...] = alpha * (A @ B) + beta * C\n' >kernels/k13.py
for f in kernels/k*.py; do step "r21-$(basename "$f" .py)" 120 "$pick|$(basename "$f")" "${p[@]}" --gemm-kernels kernels/01_naive.cu "$f"; done
step r21-folder 120 "$pick|k1[123]" "${p[@]}" --gemm-kernels kernels

# row 33: sizes of a run
fresh r33
header sgemm_naive sgemm_naive 'params = { A1 = [1,2,3,4,5,6,7,8,9,10], A2 = [1,2,3,4,5,6,7,8,9,10], A3 = [1,2,3,4,5,6,7,8,9,10], A4 = [1,2,3,4,5,6,7,8,9,10] }' >kernels/01_naive.cu
step r33-variants 120 "$pick" "${p[@]}" --gemm-kernels kernels
fresh r33b
shapes=$(python3 -c "print(','.join(str(i) for i in range(1, 20001)))")
step r33-shapes-20000 300 "$pick|collected" "${p[@]}" --gemm-kernels kernels --gemm-shapes "$shapes" --co -q
python3 -c "print('[pytest]\ngemm_shapes = ' + ','.join(f'{i}x8x8' for i in range(1, 100001)))" >pytest.ini
step r33-shapes-100000-ini 300 "$pick|collected" /usr/bin/time -f "max RSS %M kB" "${p[@]}" --gemm-kernels kernels --co -q

fresh r33c
cp "$repo/tests/kernels_slow/slow_compile.cu" kernels/slow.cu && rm kernels/01_naive.cu
step r33-slow-compile 300 "$pick|compil|within|limit" "${p[@]}" --gemm-kernels kernels --gemm-compile-timeout 5
rm kernels/slow.cu
{ header sgemm_naive sgemm_naive ""; printf 'template <int N> struct Deep { static const int v = Deep<N - 1>::v + 1; };\ntemplate <> struct Deep<0> { static const int v = 0; };\n__global__ void deep(int* out) { *out = Deep<900>::v; }\n'; } >kernels/deep.cu
step r33-deep-recursion 300 "$pick|compil|depth|instantiat" "${p[@]}" --gemm-kernels kernels -m gemm_compile

# row 41: the newer keys, written wrong
fresh r41
while IFS='|' read -r tag extra; do
    header sgemm_naive sgemm_naive "$extra" | sed "s/^dtypes = .*/dtypes = [\"${DT:-fp32}\"]/" >kernels/01_naive.cu
    step "r41-$tag" 120 "$pick" "${p[@]}" --gemm-kernels kernels --co -q
done <<'EOF'
arch|arch = "sm_banana"
nondet-true|nondeterministic = true
nondet-empty|nondeterministic = ""
threshold-neg|regression_threshold = -1
threshold-text|regression_threshold = "abc"
threshold-100|regression_threshold = 100
expect-fast|expect_fast = 1
reads-c|always_reads_c = "yes"
EOF
header sgemm_naive sgemm_naive 'requires = ["B_NxK == 0"]\nstorage = { B = "NxK" }' >kernels/01_naive.cu
step r41-requires-order 120 "$pick" "${p[@]}" --gemm-kernels kernels
for acc in fp32 fp64 fp16; do
    header dgemm_naive sgemm_naive "accumulate = \"$acc\"" | sed 's/^dtypes = .*/dtypes = ["fp64"]/' >kernels/01_naive.cu
    step "r41-fp64-accumulate-$acc" 120 "$pick" "${p[@]}" --gemm-kernels kernels --co -q
done
cp "$repo/kernels/01_naive.cu" kernels/01_naive.cu
printf 'from pytest_gemm import gemm_kernel\n\n\n@gemm_kernel(dtypes=["fp8_e4m3"], scales="tensor", alpha_beta=True)\ndef f8(A, B, C, scale_a, scale_b, alpha, beta):\n    pass\n' >kernels/f8.py
step r41-fp8-alpha-beta 120 "$pick" "${p[@]}" --gemm-kernels kernels --co -q
printf 'from pytest_gemm import gemm_kernel\n\n\n@gemm_kernel(dtypes=["fp32"], size_type="size_t")\ndef st(M, N, K, alpha, A, B, beta, C):\n    pass\n' >kernels/f8.py
step r41-size-type-decorator 120 "$pick" "${p[@]}" --gemm-kernels kernels --co -q

# X1, X2, X3: /dev/zero, /dev/urandom and a FIFO where a baseline or a saved run is read
fresh x1
for f in /dev/zero /dev/urandom; do
    n=$(basename $f)
    step "x1-show-$n" 60 "$pick|Memory" bash -c "ulimit -v 3000000; pytest-gemm show $f"
    step "x1-compare-$n" 60 "$pick|Memory" bash -c "ulimit -v 3000000; pytest-gemm compare $f"
    step "x1-update-$n" 60 "$pick|Memory" bash -c "ulimit -v 3000000; pytest-gemm update --from $f"
    step "x1-plot-$n" 60 "$pick|Memory" bash -c "ulimit -v 3000000; pytest-gemm plot $f --out rep"
    step "x1-merge-$n" 60 "$pick|Memory" bash -c "ulimit -v 3000000; pytest-gemm merge $f $run --out m.json"
done
fresh x2
ln -s /dev/zero baselines/zero.json
step x2-plugin 120 "$pick|Memory|INTERNAL" bash -c "ulimit -v 3000000; ${p[*]} --gemm-kernels kernels"
fresh x3
mkfifo baselines/fifo.json
step x3-plugin 60 "$pick" "${p[@]}" --gemm-kernels kernels
step x3-show 20 "$pick" pytest-gemm show
step x3-prune 20 "$pick" pytest-gemm prune
step x3-show-fifo 20 "$pick" pytest-gemm show baselines/fifo.json
step x3-update 20 "$pick" pytest-gemm update --from "$run"

# X4: a kernels folder reached through a symlink
fresh x4
ln -s . kernels/self && ln -s .. kernels/loop
step x4-self 120 "$pick|symlink" "${p[@]}" --gemm-kernels kernels/self --co -q
step x4-loop 120 "$pick|symlink" "${p[@]}" --gemm-kernels kernels/loop/kernels --co -q

# X5: a TOML list in pytest.ini
fresh x5
printf '[pytest]\ngemm_shapes = ["quick", "edge"]\n' >pytest.ini
step x5-ini-list 120 "$pick|collected" "${p[@]}" --gemm-kernels kernels --co -q

# X6: intervals that do not hold their estimate, counts and times no timing makes
fresh x6
while IFS='|' read -r tag edit; do
    edit_run "$run" "$tag.json" $edit
    step "x6-$tag" 60 "$pick|ratio|ci|samples|median" pytest-gemm update --from "$tag.json"
    echo "   baseline files: $(ls baselines | tr '\n' ' ')" >>"$sum"
done <<'EOF'
ratio-ci|--set ratio_ci=[100,200]
ci-s|--set ci_s=[1.0,2.0]
ci-reversed|--reverse ci_s
samples|--set samples=-5
median|--set median_s=1e308
EOF
cd "$repo" && cat "$sum"
