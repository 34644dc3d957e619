#!/usr/bin/env bash
# runtime.sh - the two runtimes side by side (issue 11 item 5): run latency and
# peak RSS of every real model on the sequential runtime, the multistream
# runtime and ONNX Runtime, and the speed-up of 2 streams over 1 on a model
# with parallel branches.  Method and caveats: bench/README.md ("runtime");
# not a test.
#
#   bash bench/runtime.sh [-n RUNS] [CASE_REGEX]
#
# Part 1, per model (one reference case each: the @text case when there is
# one), OPENBLAS_NUM_THREADS=1 and `-j 1`:
#   seq, ms      median of `kiln run --runtime sequential|multistream --repeat
#                RUNS` (the run alone: no compile, load or file I/O)
#   ORT          median of RUNS inferences of onnxruntime-node (level all, one
#                intra-op thread) in a node process, after one warm-up run;
#                without onnxruntime-node, the reference case's recorded
#                median (marked *) and no RSS
#   RSS          peak resident set of the whole process (/usr/bin/time %M or
#                node's maxRSS): kiln's includes compiling the model
#   streams      the multistream runtime's stream count (the report's run.streams)
# Part 2: bench/gen_towers.py's model (2 towers of DEPTH MatMul+Relu on
# [N,N], each tower on a stream of its own by its _stream_label, joined by an
# Add) on the multistream runtime with --max-streams 1 (one stream: the towers
# one after the other) and 2 (the towers at the same time), and on the
# sequential runtime; speed-up = 1-stream median / 2-stream median.
# Ratios: ms/seq and ms/ORT (>1 = slower than the other).
# Environment: KILN_BIN (default build-release/bin/kiln, else build/bin/kiln),
# KILN_MODELS_DIR, KILN_MODELS_REF_DIR, KILN_IGNORE_SHARED, KILN_REF_CACHE,
# KILN_ORT_CACHE (onnxruntime-node, as tools/gen-model-refs.sh installs it),
# TOWERS_DEPTH (8), TOWERS_N (256).
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$src/bench/common.sh"
bench_options 20 "$@"
bench_kiln bench/runtime.sh
[ -x /usr/bin/time ] || { echo "bench/runtime.sh: needs /usr/bin/time (GNU time) for the peak RSS" >&2; exit 1; }

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="-" || b=="-" || b+0==0) print "-"; else printf "%.2f", a/b }'; }
mb() { awk -v k="$1" 'BEGIN{ if (k=="-" || k=="") print "-"; else printf "%.1f", k/1024 }'; }
# krun RUNTIME MODEL ARGS... -> "median_ms rss_kb" (or "FAILED: message")
krun() {
    local rt=$1; shift
    if /usr/bin/time -f "%M" -o "$tmp/rss" "$kiln" run -q -j 1 --runtime "$rt" --repeat "$runs" "$@" \
            >"$tmp/out.log" 2>"$tmp/err.log"; then
        local med
        med=$(sed -nE 's/.*median ([0-9.]+) ms.*/\1/p' "$tmp/err.log" | tail -1)
        echo "${med:--} $(tail -1 "$tmp/rss")"
    else
        echo "FAILED: $(grep -v '^Command exited' "$tmp/err.log" | tail -1 | cut -c1-80)"
    fi
}

# ---- ONNX Runtime (onnxruntime-node) ---------------------------------------------
ortdir="${KILN_ORT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/ort-node}/node_modules"
have_ort=no
if command -v node >/dev/null && [ -d "$ortdir/onnxruntime-node" ]; then have_ort=yes; fi
ort_recorded() {  # CASE_DIR -> median from the reference manifest
    python3 - "$1/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
r = [e.get("median_ms") for e in m.get("inference", [])
     if e.get("level") == "all" and e.get("intraOpNumThreads") == 1]
print(r[0] if r and r[0] is not None else "-")
EOF
}

# ---- part 1: the real models ----------------------------------------------------
models="${KILN_MODELS_DIR:-}"
[ -z "$models" ] && models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>/dev/null | tail -1)
ref=$(KILN_SOURCE_DIR="$src" bash "$src/tools/gen-model-refs.sh" 2>/dev/null | tail -1)
echo "kiln $kiln, $runs runs each, OPENBLAS_NUM_THREADS=1, -j 1, $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "$models" ] || [ -z "$ref" ] || [ ! -d "$ref" ]; then
    echo "skipped: the real models or their reference cases are absent (tools/fetch-models.sh, tools/gen-model-refs.sh)"
else
    bench_pick_cases "$ref"
    printf "%-32s %9s %9s %6s %9s %6s   %8s %8s %8s %7s\n" model "seq ms" "ms ms" ms/seq "ORT ms" ms/ORT \
        "RSS seq" "RSS ms" "RSS ORT" streams
    for m in $(printf '%s\n' "${!pick[@]}" | sort); do
        c=${pick[$m]}; d="$ref/$c"; model="$models/$m.onnx"
        [ -f "$model" ] || { printf "%-32s model file missing\n" "$m"; continue; }
        bench_case_inputs "$d"
        args=("${in[@]}")
        read -r sq sqr <<<"$(krun sequential "$model" "${args[@]}")"
        [ "$sq" = FAILED: ] && { printf "%-32s sequential %s\n" "$m" "$(krun sequential "$model" "${args[@]}")"; continue; }
        read -r ms msr <<<"$(krun multistream "$model" "${args[@]}")"
        [ "$ms" = FAILED: ] && { printf "%-32s multistream %s\n" "$m" "$(krun multistream "$model" "${args[@]}")"; continue; }
        streams=-
        if "$kiln" run -q -j 1 --runtime multistream "$model" "${args[@]}" --report "$tmp/rep.json" \
                >/dev/null 2>&1; then
            streams=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["streams"])' "$tmp/rep.json")
        fi
        ort="-"; ortr="-"; mark=" "
        if [ $have_ort = yes ] && out=$(NODE_PATH="$ortdir" node "$src/bench/ort_run.js" "$model" "$d" "$runs" 1 2>/dev/null); then
            read -r ort ortr _ <<<"$out"
        else
            ort=$(ort_recorded "$d"); mark="*"
        fi
        printf "%-32s %9.3f %9.3f %6s %8s%s %6s   %8s %8s %8s %7s\n" "$m" "$sq" "$ms" "$(ratio "$ms" "$sq")" \
            "$ort" "$mark" "$(ratio "$ms" "$ort")" "$(mb "$sqr")" "$(mb "$msr")" "$(mb "$ortr")" "$streams"
    done
    echo "RSS in MiB (peak resident set of the process; kiln's includes compiling the model)."
    [ $have_ort = yes ] || echo "* ORT: onnxruntime-node not installed ($ortdir): the reference case's recorded median, no RSS."
fi

# ---- part 2: 2 streams over 1 on parallel towers ----------------------------------
depth=${TOWERS_DEPTH:-8}; n=${TOWERS_N:-256}
python3 "$src/bench/gen_towers.py" "$tmp/towers.json" 2 "$depth" "$n"
python3 - "$tmp/x.bin" "$n" <<'PY'
import json, struct, sys
n = int(sys.argv[2])
open(sys.argv[1], "wb").write(struct.pack("<%df" % (n * n), *[((i * 7) % 13 - 6) / 6.0 for i in range(n * n)]))
json.dump({"dims": [n, n], "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
echo
echo "parallel towers: 2 x $depth MatMul+Relu on [$n,$n] float32, joined by an Add ($runs runs, -j 1)"
printf "%-34s %10s %10s\n" configuration "median ms" "RSS MiB"
declare -A tw
for cfg in "sequential" "multistream --max-streams 1" "multistream --max-streams 2"; do
    read -r rt rest <<<"$cfg"
    read -r med rss <<<"$(krun "$rt" "$tmp/towers.json" --input "$tmp/x.bin" $rest)"
    tw[$cfg]=$med
    printf "%-34s %10s %10s\n" "$cfg" "$med" "$(mb "$rss")"
done
s1=${tw["multistream --max-streams 1"]}; s2=${tw["multistream --max-streams 2"]}
echo "speed-up of 2 streams over 1: $(ratio "$s1" "$s2")x (ideal 2 on 2 idle cores; the join and the shared cores cost)"
