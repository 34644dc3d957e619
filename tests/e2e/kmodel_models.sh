#!/usr/bin/env bash
# kmodel_models.sh - the executable model file on the real models
# (docs/model_format.md): every model is compiled once to a .kmodel
# for the shapes of each reference case, as GE's offline models are
# (`kiln compile MODEL.onnx --input-shape NAME=DIMS... -o M.kmodel`), `kiln
# info` reads it back (format,
# sections with their hashes, streams, tasks, weights, inputs/outputs), and
# every reference case runs from the .kmodel (`kiln run M.kmodel`, no compile)
# and must match ONNX Runtime's outputs exactly as models_ref.sh requires
# (tools/compare_outputs.py), on the sequential runtime and, when the manifest
# loads it, on the multi-stream one (which executes the streams and events).  Also: `kiln convert M.kmodel M.json` works.
#
#   bash tests/e2e/kmodel_models.sh [CASE_REGEX]     (ctest: e2e_kmodel_models)
#
# Environment as models_ref.sh (KILN_BIN, KILN_MODELS_REF_DIR, KILN_MODELS_DIR,
# KILN_SLOW_TESTS=0 skips the 640x640 det cases).  Exit 0 / 1 / 77 (no models).
set -u

src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
filter="${1:-}"
py=python3
cmp="$src/tools/compare_outputs.py"

skip() { echo "SKIPPED: kmodel_models: $*"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$src/tests/common/model_cases.sh"
model_cases_locate; rc=$?
[ $rc -eq 77 ] && skip "$model_cases_why"
[ $rc -ne 0 ] && { echo "FAIL: kmodel_models: $model_cases_why"; exit 1; }
ref=$refs
slow_mode="${KILN_SLOW_TESTS:-1}"
json_field() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

have_ms=0
"$kiln" plugins 2>/dev/null | grep -q "runtime  *multistream" && have_ms=1
pass=0; fail=0; failed=()
bad() { echo "FAIL $1: $2"; fail=$((fail+1)); failed+=("$1"); }

for dir in "$ref"/*/; do
    dir=${dir%/}; case_name=$(basename "$dir")
    [ -n "$filter" ] && ! [[ "$case_name" =~ $filter ]] && continue
    model_file=$(json_field "$dir/manifest.json" model_file 2>/dev/null)
    model="$models/$(basename "${model_file:-${case_name%@*}.onnx}")"
    [ -f "$model" ] || { bad "$case_name" "model $model not found"; continue; }
    in_bytes=$(cat "$dir"/input.*.bin 2>/dev/null | wc -c)
    if [ "$in_bytes" -gt 1048576 ] && [ "$slow_mode" != 1 ]; then
        echo "SKIPPED $case_name (KILN_SLOW_TESTS=0)"; continue
    fi
    args=(); shapes=()
    for inp in "$dir"/input.*.bin; do
        [ -f "$inp" ] || continue
        name=$(json_field "$inp.json" name)
        args+=(--input "$name=$inp")
        dims=$($py -c 'import json,sys; print("x".join(str(d) for d in json.load(open(sys.argv[1]))["dims"]))' "$inp.json")
        [ -n "$dims" ] && shapes+=(--input-shape "$name=$dims")
    done
    km="$tmp/$case_name.kmodel"
    if [ ! -f "$km" ]; then
        if ! "$kiln" compile "$model" "${shapes[@]}" -o "$km" >"$tmp/c.log" 2>&1; then
            bad "$case_name" "kiln compile -o .kmodel: $(tail -2 "$tmp/c.log" | tr '\n' ' ')"; continue
        fi
        # kiln info: the file's facts, every section's hash verified.
        if ! "$kiln" info "$km" --json >"$tmp/info.json" 2>"$tmp/i.log"; then
            bad "$case_name" "kiln info: $(tail -2 "$tmp/i.log" | tr '\n' ' ')"; continue
        fi
        if ! why=$($py - "$tmp/info.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
k = d.get("kmodel")
assert k, "no kmodel block"
assert k["format"] == "1.0", k["format"]
names = [s["name"] for s in k["sections"]]
assert names == ["META", "GRAPH", "WEIGHTS"], names
assert all(s["sha256_ok"] for s in k["sections"])
w = [s for s in k["sections"] if s["name"] == "WEIGHTS"][0]
assert w["offset"] % 4096 == 0, "WEIGHTS not page-aligned"
assert w["size"] == k["weights"]["size"], (w, k["weights"])
assert k["streams"] >= 1 and len(k["tasks_per_stream"]) == k["streams"]
assert sum(k["tasks_per_stream"]) > 0, "no task"
assert k["weights"]["constants"] > 0
assert d["inputs"] and d["outputs"]
PY
        ); then bad "$case_name" "kiln info --json: $why"; continue; fi
        "$kiln" info "$km" >"$tmp/info.txt" 2>&1 || { bad "$case_name" "kiln info (text) failed"; continue; }
        grep -q "^format:  *kmodel 1.0" "$tmp/info.txt" || { bad "$case_name" "kiln info text lacks the format line"; continue; }
        "$kiln" convert "$km" "$tmp/conv.json" >/dev/null 2>&1 || { bad "$case_name" "kiln convert .kmodel .json failed"; continue; }
        # the task sequences agree with StreamAllocator's attributes on the graph
        if ! why=$($py - "$tmp/info.json" "$tmp/conv.json" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))["kmodel"]
g = json.load(open(sys.argv[2]))
ev = sum(len(n.get("attrs", {}).get(a, [])) for n in g["nodes"]
         for a in ("_send_event_ids", "_recv_event_ids") if n.get("stream_id", -1) >= 0)
assert k["event_tasks"] == ev, ("event tasks", k["event_tasks"], ev)
sn = g.get("attrs", {}).get("_kiln_stream_num")
assert sn is None or k["streams"] == sn, ("streams", k["streams"], sn)
en = g.get("attrs", {}).get("_kiln_event_num")
assert en is None or k["events"] == en, ("events", k["events"], en)
data_like = {"Data", "RefData", "Const", "Constant", "Variable", "NetOutput"}
streams = any("stream_id" in n for n in g["nodes"])
tasks = sum(1 for n in g["nodes"] if n["type"] not in data_like and
            (not streams or n.get("stream_id", -1) >= 0))
nokind = [n["name"] for n in g["nodes"] if n["type"] not in data_like and
          n.get("stream_id", -1) >= 0 and "_kiln_task_kind" not in n.get("attrs", {}) and
          n["type"] not in ("PartitionedCall", "If", "Case", "While")]
assert not nokind, ("nodes with a stream but no task", nokind[:5])
assert sum(k["tasks_per_stream"]) == tasks + ev, ("root tasks", k["tasks_per_stream"], tasks, ev)
print("streams %d events %d tasks %d" % (k["streams"], k["events"], sum(k["tasks_per_stream"])))
PY
        ); then bad "$case_name" "sequences vs graph: $why"; continue; fi
        echo "  $case_name: $why"
    fi
    out="$tmp/out"; rm -rf "$out"; mkdir -p "$out"
    if ! "$kiln" run "$km" "${args[@]}" --output-dir "$out" >"$tmp/r.log" 2>&1; then
        bad "$case_name" "kiln run .kmodel: $(tail -2 "$tmp/r.log" | tr '\n' ' ')"; continue
    fi
    if line=$($py "$cmp" "$dir" "$out" --case "$case_name" --keys "$models/ppocr_keys_v1.txt"); then
        echo "$line  [from .kmodel]"; pass=$((pass+1))
    else
        echo "$line  [from .kmodel]"; fail=$((fail+1)); failed+=("$case_name"); continue
    fi
    # the multi-stream runtime runs the streams and events (when loaded)
    [ "$have_ms" = 1 ] || continue
    rm -rf "$out"; mkdir -p "$out"
    if ! "$kiln" run "$km" --option kiln.runtime=multistream "${args[@]}" --output-dir "$out" \
            >"$tmp/r.log" 2>&1; then
        bad "$case_name" "kiln run .kmodel on multistream: $(tail -2 "$tmp/r.log" | tr '\n' ' ')"; continue
    fi
    if line=$($py "$cmp" "$dir" "$out" --case "$case_name" --keys "$models/ppocr_keys_v1.txt"); then
        echo "$line  [from .kmodel, multistream]"
    else
        echo "$line  [from .kmodel, multistream]"; fail=$((fail+1)); failed+=("$case_name@multistream")
    fi
done
echo "kmodel_models: $pass passed, $fail failed"
[ $fail -gt 0 ] && { echo "kmodel_models: FAILED: ${failed[*]}"; exit 1; }
[ $pass -eq 0 ] && skip "no case ran"
exit 0
