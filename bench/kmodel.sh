#!/usr/bin/env bash
# kmodel.sh - the executable model file on the real models (docs/model_format.md):
# per model (its first reference case's input shapes) the .kmodel's size, the
# WEIGHTS section, constants and deduplicated ones, streams and tasks (all
# models: root and subgraphs), and the
# wall time of `kiln run MODEL.onnx` (import + compile + run) beside
# `kiln run MODEL.kmodel` (load + run): what building once saves.
#
#   bash bench/kmodel.sh            KILN_BIN (default build-release/bin/kiln, else
#                                   build/bin/kiln), KILN_MODELS_DIR / KILN_MODELS_REF_DIR
# Prints "skipped: ..." and exits 0 when the models are absent.
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kiln="${KILN_BIN:-$src/build-release/bin/kiln}"
[ -x "$kiln" ] || kiln="$src/build/bin/kiln"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$src/tests/common/model_cases.sh"
model_cases_locate >/dev/null 2>&1 || { echo "skipped: the real models or their reference cases are absent"; exit 0; }
ref=$refs
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
now() { date +%s.%N; }
printf "%-32s %10s %10s %6s %6s %7s %6s %10s %10s\n" model kmodel_B weights_B consts dedup streams tasks run_onnx_s run_kmod_s
seen=" "
for dir in "$ref"/*/; do
    dir=${dir%/}; case_name=$(basename "$dir"); m=${case_name%@*}
    case "$seen" in *" $m "*) continue;; esac
    seen="$seen$m "
    model="$models/$m.onnx"; [ -f "$model" ] || continue
    args=(); shapes=()
    for inp in "$dir"/input.*.bin; do
        name=$(field "$inp.json" 'd["name"]'); args+=(--input "$name=$inp")
        dims=$(field "$inp.json" '"x".join(str(x) for x in d["dims"])')
        [ -n "$dims" ] && shapes+=(--input-shape "$name=$dims")
    done
    km="$tmp/$m.kmodel"
    "$kiln" compile "$model" "${shapes[@]}" -o "$km" >/dev/null 2>&1 || { echo "$m: compile failed"; continue; }
    "$kiln" info "$km" --json >"$tmp/i.json" 2>/dev/null || { echo "$m: info failed"; continue; }
    t0=$(now); "$kiln" run "$model" "${args[@]}" -q >/dev/null 2>&1; t1=$(now)
    "$kiln" run "$km" "${args[@]}" -q >/dev/null 2>&1; t2=$(now)
    printf "%-32s %10s %10s %6s %6s %7s %6s %10.3f %10.3f\n" "$m" "$(stat -c %s "$km")" \
        "$(field "$tmp/i.json" 'd["kmodel"]["weights"]["size"]')" \
        "$(field "$tmp/i.json" 'd["kmodel"]["weights"]["constants"]')" \
        "$(field "$tmp/i.json" 'd["kmodel"]["weights"]["deduplicated"]')" \
        "$(field "$tmp/i.json" 'd["kmodel"]["streams"]')" \
        "$(field "$tmp/i.json" 'd["kmodel"]["tasks"]')" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$(awk -v a="$t1" -v b="$t2" 'BEGIN{print b-a}')"
done
