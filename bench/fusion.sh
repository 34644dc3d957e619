#!/usr/bin/env bash
# fusion.sh - the built-in fusion passes on the real models: op nodes after the
# default pipeline and run time, with the passes and with them switched off
# (ge.optimizationSwitch), beside ONNX Runtime's node count at level
# `extended`.  Not a test; method in bench/README.md ("fusion").
#
#   bash bench/fusion.sh [-n RUNS] [CASE_REGEX]
#
# Per model (one reference case each: the @text case when there is one), with
# OPENBLAS_NUM_THREADS=1 and `-j 1`:
#   nodes    op nodes of `kiln compile` for the case's input shapes (every node
#            but Data, Const, Constant and NetOutput)
#   run ms   the median and the minimum of `kiln run --repeat RUNS` (the
#            minimum is the steadier figure on a shared machine)
# "fused" is the default pipeline, "unfused" the same with every built-in
# fusion pass switched off (the vector engine's chain fusion stays on).
# Environment: KILN_BIN (default build-release/bin/kiln, else build/bin/kiln),
# KILN_MODELS_DIR, KILN_MODELS_REF_DIR, KILN_IGNORE_SHARED, KILN_REF_CACHE.
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$src/bench/common.sh"
bench_options 5 "$@"
bench_kiln bench/fusion.sh

models="${KILN_MODELS_DIR:-}"
[ -z "$models" ] && models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>/dev/null | tail -1)
ref=$(KILN_SOURCE_DIR="$src" bash "$src/tools/gen-model-refs.sh" | tail -1)
if [ -z "$models" ] || [ -z "$ref" ] || [ ! -d "$ref" ]; then
    echo "SKIPPED: bench/fusion.sh: models or reference cases not available (tools/fetch-models.sh, tools/gen-model-refs.sh)"; exit 0
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
passes="ConvBatchNormFusionPass GeluFusionPass HardSwishFusionPass LayerNormFusionPass MatMulBiasAddFusionPass MatMulScaleFusionPass MatMulTransposeFusionPass PostActivationFusionPass QuickGeluFusionPass"
off=""
for p in $passes; do off="$off${off:+;}$p:off"; done
# ONNX Runtime's op nodes at level extended (the models' inventory)
declare -A ort=([ch_PP-OCRv4_det_infer]=307 [ch_PP-OCRv4_rec_infer]=353
                [ch_ppocr_mobile_v2.0_cls_infer]=155 [embedding_model]=46)

count_nodes() {
    python3 - "$1" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
print(sum(1 for n in g["nodes"] if n["type"] not in ("Data", "Const", "Constant", "NetOutput")))
PY
}

bench_pick_cases "$ref"

printf "kiln %s, %d runs each, OPENBLAS_NUM_THREADS=1\n" "$kiln" "$runs"
printf "%-32s %7s %7s %7s   %19s %19s %6s\n" model fused unfused "ORT ext" "fused ms med/min" "unfused ms med/min" ratio
for m in $(printf '%s\n' "${!pick[@]}" | sort); do
    c=${pick[$m]}; d="$ref/$c"; model="$models/$m.onnx"
    [ -f "$model" ] || { printf "%-32s model file missing\n" "$m"; continue; }
    args=(); shapes=()
    for inp in "$d"/input.*.bin; do
        read -r name dims < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["name"], "x".join(str(x) for x in j["dims"]))' "$inp.json")
        args+=(--input "$name=$inp"); shapes+=(--input-shape "$name=$dims")
    done
    row=()
    for mode in fused unfused; do
        opt=(); [ $mode = unfused ] && opt=(--option "ge.optimizationSwitch=$off")
        if ! "$kiln" compile -j 1 "$model" "${shapes[@]}" "${opt[@]}" -o "$tmp/g.json" 2>"$tmp/err.log"; then
            row+=("compile FAILED: $(tail -1 "$tmp/err.log")"); break
        fi
        row+=("$(count_nodes "$tmp/g.json")")
        if "$kiln" run -j 1 "$model" "${args[@]}" "${opt[@]}" --output-dir "$tmp/o" --repeat "$runs" >/dev/null 2>"$tmp/err.log"; then
            med=$(grep -Eho 'median[ =:]*[0-9.]+ *ms' "$tmp/err.log" | grep -Eo '[0-9.]+' | head -1)
            mn=$(grep -Eho 'min[ =:]*[0-9.]+ *ms' "$tmp/err.log" | grep -Eo '[0-9.]+' | head -1)
            row+=("$med/$mn")
        else
            row+=("run FAILED: $(tail -1 "$tmp/err.log")")
        fi
    done
    if [ ${#row[@]} -lt 4 ]; then printf "%-32s %s\n" "$m" "${row[*]}"; continue; fi
    printf "%-32s %7s %7s %7s   %19s %19s %6s\n" "$m" "${row[0]}" "${row[2]}" "${ort[$m]:--}" \
        "${row[1]}" "${row[3]}" "$(awk -v a="${row[1]#*/}" -v b="${row[3]#*/}" 'BEGIN{ if (b+0==0) print "-"; else printf "%.2f", a/b }')"
done
echo "ratio = fused / unfused minimum run time (<1: the fusions make the model faster)."
