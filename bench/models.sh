#!/usr/bin/env bash
# models.sh - kiln on the real models beside ONNX Runtime's figures (issue 4
# item 9).  Method and caveats: bench/README.md ("models"); not a test.
#
#   bash bench/models.sh [-n RUNS] [CASE_REGEX]
#
# Per model (one reference case each: the @text case when there is one), with
# OPENBLAS_NUM_THREADS=1 and `-j 1`:
#   process  median wall time of the whole `kiln run` process
#   run      kiln run latency: with `--repeat N` (if kiln has it) the "median
#            <ms> ms" it prints; else the median of the "run X ms" that
#            `kiln run -v` reports (one in-process run per process)
#   compile  process minus the runtime's load + run: process start, plugin
#            loading, ONNX import, the pipeline, reading/writing tensors
#   ORT      from the reference case's manifest.json (tools/gen-model-refs.sh;
#            generated cases hold ORT's figures on this machine): session
#            creation (level all, 1 thread, in-process) and inference median
#            (level all, 1 thread)
# Ratios are kiln / ORT (>1 = kiln slower).
# KILN_BENCH_THREADS=N (default 1) runs kiln with `-j N` and
# OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=N and takes ORT's figures for
# intraOpNumThreads=N from the manifest ("nan" when it has none).
# Environment: KILN_BIN (default build-release/bin/kiln, else build/bin/kiln),
# KILN_MODELS_DIR, KILN_MODELS_REF_DIR, KILN_IGNORE_SHARED, KILN_REF_CACHE,
# KILN_MANIFEST (-m).
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$src/bench/common.sh"
bench_options 5 "$@"
bench_kiln bench/models.sh

models="${KILN_MODELS_DIR:-}"
[ -z "$models" ] && models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>/dev/null | tail -1)
# the reference cases: pre-made, else generated (tools/gen-model-refs.sh)
ref=$(KILN_SOURCE_DIR="$src" bash "$src/tools/gen-model-refs.sh" | tail -1)
if [ -z "$models" ] || [ -z "$ref" ] || [ ! -d "$ref" ]; then
    echo "SKIPPED: bench/models.sh: models or reference cases not available (tools/fetch-models.sh, tools/gen-model-refs.sh)"; exit 0
fi

threads="${KILN_BENCH_THREADS:-1}"
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
man=(); [ -n "${KILN_MANIFEST:-}" ] && man=(-m "$KILN_MANIFEST")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ms_now() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END{ if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2 }'; }
# time_cmd FILE CMD...: append wall ms to FILE, return the command's status
time_cmd() {
    local f=$1; shift
    local t0 t1 rc
    t0=$(ms_now); "$@" >"$tmp/out.log" 2>"$tmp/err.log"; rc=$?; t1=$(ms_now)
    awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", (b-a)/1e6}' >>"$f"
    return $rc
}
ort() {  # ort CASE_DIR -> "create_ms run_ms"
    python3 - "$1/manifest.json" "$threads" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
c = r = None
for e in m.get("inference", []):
    if e.get("level") == "all" and e.get("intraOpNumThreads") == int(sys.argv[2]):
        c, r = e.get("in_process_create_ms"), e.get("median_ms")
print("%s %s" % (c if c is not None else "nan", r if r is not None else "nan"))
EOF
}

# one case per model: prefer <model>@text
declare -A pick
for d in "$ref"/*/; do
    d=${d%/}; c=$(basename "$d"); m=${c%@*}
    [ -n "$filter" ] && ! [[ "$c" =~ $filter ]] && continue
    if [[ "$c" == *@text ]] || [ -z "${pick[$m]:-}" ]; then pick[$m]=$c; fi
done

repeat_ok=""
printf "kiln %s, %d runs each, -j %d, OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=%d\n" "$kiln" "$runs" "$threads" "$threads"
printf "%-32s %10s %10s %7s   %10s %10s %7s %10s\n" model "compile ms" "ORT create" ratio "run ms" "ORT run" ratio "process ms"
for m in $(printf '%s\n' "${!pick[@]}" | sort); do
    c=${pick[$m]}; d="$ref/$c"
    model="$models/$m.onnx"
    [ -f "$model" ] || { printf "%-32s model file missing\n" "$m"; continue; }
    args=()
    for inp in "$d"/input.*.bin; do
        name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$inp.json")
        args+=(--input "$name=$inp")
    done
    read -r ort_c ort_r <<<"$(ort "$d")"
    : >"$tmp/c"; : >"$tmp/r"; : >"$tmp/rep"
    rerr=""
    mkdir -p "$tmp/o"
    # in-process figure when kiln run has --repeat
    if [ "$repeat_ok" != no ] && "$kiln" run "${man[@]}" -j "$threads" "$model" "${args[@]}" --output-dir "$tmp/o" --repeat "$runs" >"$tmp/out.log" 2>"$tmp/err.log"; then
        repeat_ok=yes
        grep -Eho 'median[ =:]*[0-9.]+ *ms' "$tmp/err.log" "$tmp/out.log" | grep -Eo '[0-9.]+' | head -1 >"$tmp/rep"
    elif [ "$repeat_ok" != yes ]; then
        repeat_ok=no
    fi
    : >"$tmp/lr"
    for ((i = 0; i < runs; i++)); do
        time_cmd "$tmp/r" "$kiln" run "${man[@]}" -v -j "$threads" "$model" "${args[@]}" --output-dir "$tmp/o" || { rerr="$(tail -1 "$tmp/err.log")"; break; }
        # -v: "kiln: run: runtime NAME: load X ms, run Y ms"
        sed -nE 's/.*runtime [^:]*: load ([0-9.]+) ms, run ([0-9.]+) ms.*/\1 \2/p' "$tmp/err.log" | tail -1 >>"$tmp/lr"
    done
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b=="nan" || b+0==0) print "-"; else printf "%.2f", a/b }'; }
    if [ -n "$rerr" ]; then printf "%-32s run FAILED: %s\n" "$m" "${rerr:0:90}"; continue; fi
    proc=$(median <"$tmp/r")
    if [ -s "$tmp/rep" ]; then run=$(cat "$tmp/rep"); mark=" "
    elif [ -s "$tmp/lr" ]; then run=$(awk '{print $2}' "$tmp/lr" | median); mark=" "
    else run="nan"; mark="?"; fi
    # compile = whole process minus runtime load and run (import, passes, I/O, start)
    lr=$(awk '{print $1+$2}' "$tmp/lr" | median)
    cm=$(awk -v p="$proc" -v l="$lr" 'BEGIN{ if (l=="nan") l=0; printf "%.1f", p-l }')
    printf "%-32s %10.1f %10s %7s  %s%10.2f %10s %7s %10.1f\n" "$m" "$cm" "$ort_c" "$(ratio "$cm" "$ort_c")" \
        "$mark" "$run" "$ort_r" "$(ratio "$run" "$ort_r")" "$proc"
done
echo "ORT: onnxruntime-node 1.30, level all, intraOpNumThreads=$threads (ref/*/manifest.json)."
echo "compile = whole kiln run process minus runtime load+run (process start, plugins, ONNX import, passes, file I/O)."
[ "$repeat_ok" = yes ] || echo "run = median over processes of the single run kiln run -v reports (first run in each process; kiln run has no --repeat)."
