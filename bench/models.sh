#!/usr/bin/env bash
# models.sh - kiln against ONNX Runtime on the real models, both timed in this
# run, interleaved.  Method and caveats: bench/README.md ("models"); not a test.
#
#   bash bench/models.sh [-n RUNS] [-r ROUNDS] [-t "1 2"] [--ops] [CASE_REGEX]
#
# Per model (one reference case each: the @text case when there is one) and
# per thread count T (-t, default "1 2"):
#   kiln     median of `kiln run -q -j T --repeat RUNS` (the runs alone: no
#            compile, load or file I/O), OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=T
#   ORT      median of RUNS inferences of onnxruntime-node (bench/ort_run.js:
#            level all, T intra-op threads, one inter-op thread) in a node
#            process after one warm-up run
#   the two alternate ROUNDS times (-r, default 3: kiln, ORT, kiln, ORT, ...);
#   each side's figure is the median of its rounds' medians
#   ratio    kiln / ORT (> 1: kiln is slower)
#   RSS      peak resident set of each process in MiB (/usr/bin/time %M for
#            kiln, which includes compiling the model; node's maxRSS for ORT,
#            which includes node itself)
# Then, per model, the fixed cost: the whole `kiln compile MODEL -o x.json`
# process (median of ROUNDS) beside ORT's InferenceSession.create in a fresh
# node process (the create time ort_run.js measures, T = 1); and warm, in one
# process with everything loaded: kiln's import + compile through the library
# API (bench_create, bench/create.c, median of RUNS) beside ORT's create of
# the same model repeated RUNS times in its node process (ORT_CREATES).
# --ops: per op type, kiln's time per run (kiln run --report, run.ops) beside
# ORT's (its profiler's node events), the ten most expensive of each model.
#
# onnxruntime-node is the version tools/ort-node/package-lock.json pins,
# installed with npm when missing (tools/ort-node.sh); without node or npm, or
# with the registry out of reach, the script says so and prints kiln's figures
# alone.  The models and cases are found as the tests find them
# (tools/fetch-models.sh, tools/gen-model-refs.sh).
# Environment: KILN_BIN (default build-release/bin/kiln, else build/bin/kiln),
# KILN_MODELS_DIR, KILN_MODELS_REF_DIR, KILN_IGNORE_SHARED, KILN_REF_CACHE,
# KILN_ORT_CACHE, KILN_MANIFEST (-m).
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$src/bench/common.sh"
rounds=3; threads="1 2"; ops=no
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -r) rounds=$2; shift 2 ;;
        -t) threads=$2; shift 2 ;;
        --ops) ops=yes; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
bench_options 10 "${args[@]+"${args[@]}"}"
bench_kiln bench/models.sh
[ -x /usr/bin/time ] || { echo "bench/models.sh: needs /usr/bin/time (GNU time) for the peak RSS" >&2; exit 1; }

models="${KILN_MODELS_DIR:-}"
[ -z "$models" ] && models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>/dev/null | tail -1)
ref=$(KILN_SOURCE_DIR="$src" bash "$src/tools/gen-model-refs.sh" | tail -1)
if [ -z "$models" ] || [ -z "$ref" ] || [ ! -d "$ref" ]; then
    echo "bench/models.sh: the models or their reference cases cannot be had (tools/fetch-models.sh, tools/gen-model-refs.sh say why above)" >&2
    exit 1
fi

man=(); [ -n "${KILN_MANIFEST:-}" ] && man=(-m "$KILN_MANIFEST")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END{ if (NR==0) {print "-"; exit} if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="-" || b=="-" || b+0==0) print "-"; else printf "%.2f", a/b }'; }
mb() { awk -v k="$1" 'BEGIN{ if (k=="-" || k=="") print "-"; else printf "%.0f", k/1024 }'; }
ms_now() { date +%s%N; }

# ---- ONNX Runtime -------------------------------------------------------------------
have_ort=no
. "$src/tools/ort-node.sh"
if ORT_NODE_WHO=bench/models.sh ort_node_ensure "$src" 7; then
    have_ort=yes; ortdir="$ORT_NODE_DIR/node_modules"
else
    echo "bench/models.sh: no ONNX Runtime here (above): kiln's figures alone"
fi
# ort CASE_DIR MODEL THREADS [PROFILE_PREFIX] -> "median_ms rss_kb create_ms" [profile file]
ort() { NODE_PATH="$ortdir" node "$src/bench/ort_run.js" "$2" "$1" "$runs" "$3" ${4:+"$4"} 2>"$tmp/ort.err"; }
# krun THREADS MODEL ARGS... -> "median_ms rss_kb"
krun() {
    local t=$1; shift
    if OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/time -f "%M" -o "$tmp/rss" \
            "$kiln" run -q "${man[@]}" -j "$t" --repeat "$runs" "$@" >"$tmp/out.log" 2>"$tmp/err.log"; then
        echo "$(sed -nE 's/.*median ([0-9.]+) ms.*/\1/p' "$tmp/err.log" | tail -1) $(tail -1 "$tmp/rss")"
    else
        echo "FAILED: $(grep -v '^Command exited' "$tmp/err.log" | tail -1 | cut -c1-80)"
    fi
}

bench_pick_cases "$ref"

echo "kiln $kiln; $runs runs per round, $rounds rounds interleaved; $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ $have_ort = yes ] && echo "ORT: onnxruntime-node $(node -e "console.log(require('$ortdir/onnxruntime-node/package.json').version)" 2>/dev/null), level all"
printf "%-32s %2s %9s %9s %6s   %8s %8s %6s\n" model T "kiln ms" "ORT ms" ratio "RSS kiln" "RSS ORT" ratio
for m in $(printf '%s\n' "${!pick[@]}" | sort); do
    c=${pick[$m]}; d="$ref/$c"; model="$models/$m.onnx"
    [ -f "$model" ] || { printf "%-32s model file missing\n" "$m"; continue; }
    bench_case_inputs "$d"
    for t in $threads; do
        : >"$tmp/k"; : >"$tmp/o"; krss=0; orss=0; fail=""
        for ((r = 0; r < rounds; r++)); do
            read -r km kr <<<"$(krun "$t" "$model" "${in[@]}")"
            [ "$km" = FAILED: ] && { fail="kiln $(krun "$t" "$model" "${in[@]}")"; break; }
            echo "$km" >>"$tmp/k"; [ "$kr" -gt "$krss" ] && krss=$kr
            if [ $have_ort = yes ]; then
                if out=$(ort "$d" "$model" "$t"); then
                    read -r om orr _ <<<"$out"
                    echo "$om" >>"$tmp/o"; [ "$orr" -gt "$orss" ] && orss=$orr
                else
                    fail="ORT: $(tail -1 "$tmp/ort.err" | cut -c1-80)"; break
                fi
            fi
        done
        [ -n "$fail" ] && { printf "%-32s %2s %s\n" "$m" "$t" "$fail"; continue; }
        k=$(median <"$tmp/k"); o=$(median <"$tmp/o")
        [ $have_ort = yes ] || { o=-; orss=-; }
        rt=$(ratio "$k" "$o")
        printf "%-32s %2s %9.3f %9s %6s   %8s %8s %6s\n" "$m" "$t" "$k" "$o" "$rt" "$(mb "$krss")" \
            "$(mb "$orss")" "$(ratio "$krss" "$orss")"
    done
done
echo "ms: median run; RSS: MiB, peak resident set of the process (kiln's includes compiling the model, ORT's includes node)."

# ---- the fixed cost -------------------------------------------------------------------------
# warm: bench_create (bench/create.c) beside the kiln binary, when built
bcreate="$(dirname "$kiln")/bench_create"
bman="${KILN_MANIFEST:-$(dirname "$kiln")/../share/kiln/manifests/default.json}"
echo
printf "%-32s %12s %12s %6s   %10s %10s %6s\n" model "compile ms" "ORT create" ratio "kiln warm" "ORT warm" ratio
for m in $(printf '%s\n' "${!pick[@]}" | sort); do
    c=${pick[$m]}; d="$ref/$c"; model="$models/$m.onnx"
    [ -f "$model" ] || continue
    : >"$tmp/c"; : >"$tmp/oc"; : >"$tmp/kw"; : >"$tmp/ow"
    for ((r = 0; r < rounds; r++)); do
        t0=$(ms_now)
        "$kiln" compile "${man[@]}" "$model" -o "$tmp/x.json" >/dev/null 2>&1 || { echo "-" >>"$tmp/c"; continue; }
        awk -v a="$t0" -v b="$(ms_now)" 'BEGIN{printf "%.1f\n", (b-a)/1e6}' >>"$tmp/c"
        [ -x "$bcreate" ] && "$bcreate" "$bman" "$model" "$runs" 2>/dev/null | awk '{print $2}' >>"$tmp/kw"
        [ $have_ort = yes ] && out=$(ORT_CREATES=$runs ort "$d" "$model" 1) &&
            echo "$out" | awk '{print $3}' >>"$tmp/oc" && echo "$out" | awk '{print $4}' >>"$tmp/ow"
    done
    kc=$(median <"$tmp/c"); oc=$(median <"$tmp/oc"); kw=$(median <"$tmp/kw"); ow=$(median <"$tmp/ow")
    printf "%-32s %12s %12s %6s   %10s %10s %6s\n" "$m" "$kc" "$oc" "$(ratio "$kc" "$oc")" \
        "$kw" "$ow" "$(ratio "$kw" "$ow")"
done
echo "compile: the whole kiln compile process to JSON; ORT create: InferenceSession.create inside a fresh node process."
echo "warm: in one process with the plugins (ORT: the library) already loaded, median of $runs: kiln's import + compile"
echo "through the library API (bench_create; \"-\" when not built: make bench), ORT's InferenceSession.create."

# ---- per op ----------------------------------------------------------------------------------
[ $ops = yes ] || exit 0
for m in $(printf '%s\n' "${!pick[@]}" | sort); do
    c=${pick[$m]}; d="$ref/$c"; model="$models/$m.onnx"
    [ -f "$model" ] || continue
    bench_case_inputs "$d"
    OPENBLAS_NUM_THREADS=1 "$kiln" run -q "${man[@]}" -j 1 --repeat "$runs" "$model" "${in[@]}" \
        --report "$tmp/rep.json" >/dev/null 2>&1 || { echo "$m: kiln run --report failed"; continue; }
    prof=""
    if [ $have_ort = yes ] && out=$(cd "$tmp" && ort "$d" "$model" 1 ortprof); then
        prof=$(echo "$out" | sed -n 2p)
    fi
    python3 - "$m" "$tmp/rep.json" "$prof" "$runs" <<'PY'
import json, sys, collections
m, rep, prof, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = json.load(open(rep))["run"]
k = {op: v["total_ms"] / max(r["runs"], 1) for op, v in r["ops"].items()}
o = collections.Counter()
if prof:
    try:
        ev = json.load(open(prof))
        for e in ev:
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                o[e.get("args", {}).get("op_name", "?")] += e.get("dur", 0) / 1000.0
        o = {op: v / (runs + 1) for op, v in o.items()}  # the warm-up run is profiled too
    except (OSError, ValueError):
        o = {}
print("\n%s: ms per run by op type (kiln | ORT)" % m)
for op in sorted(set(k) | set(o), key=lambda x: -max(k.get(x, 0), o.get(x, 0)))[:10]:
    print("  %-28s %9.3f %9s" % (op, k.get(op, 0), "%.3f" % o[op] if op in o else "-"))
PY
done
