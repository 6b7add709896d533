# Sourced by research/*-gpu.sh: `step NAME SECONDS PATTERN COMMAND...` runs COMMAND under a time limit, its output in
# $out/NAME.log, and appends to $sum its exit code, wall time, the command and the lines that match PATTERN;
# `want PART` says whether PART is among the script's comma-separated $parts. Sourcing it makes the folder $out and
# the summary $sum (set them first), and `p`, the pytest command every step runs.
mkdir -p "$out"
touch "$sum"
p=(python3 -m pytest -p no:cacheprovider -p no:randomly -rfEs)
want() { [[ ",$parts," == *",$1,"* ]]; }
step() {
    local name=$1 limit=$2 pattern=$3; shift 3
    local t0=$(date +%s%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    {
        echo "== $name: exit $rc in $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
        echo "   \$ $*"
        grep -E "$pattern" "$out/$name.log" | head -n 60 | sed 's/^/   /'
        echo "   $(tail -n 1 "$out/$name.log")"
    } >>"$sum"
}
