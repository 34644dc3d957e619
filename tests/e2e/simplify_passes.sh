#!/usr/bin/env bash
# simplify_passes.sh - the simplification passes (docs/optimizer.md,
# "Simplification passes") in the default pipeline:
#   1. tests/data/simplify/mixed.json, on which every optimize_original
#      simplification pass fires (checked in the report's counters), gives
#      the same output bytes with and without them (`kiln run`);
#   2. the isolation copies (nodes marked _cannot_be_deleted) that the
#      memory-conflict passes insert in their golden outputs survive all the
#      simplification passes run in a row;
#   3. silero_vad_v5 (a real model on which CastRemovePass fires) gives the
#      same output bytes with and without them, when the models are here.
# The golden graphs of each pass are tests/data/passes/<Pass>/ (golden_passes.sh).
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=$((fail+1)); }
passes="TransOpSymmetryEliminationPass TransposeMergePass UnchangedTransposeRemovePass CastRemovePass ReshapeRemovePass InnerIdentityDeletePass AssignRemovePass"
off='CastRemovePass|ReshapeRemovePass|TransposeMergePass|UnchangedTransposeRemovePass|TransOpSymmetryEliminationPass|InnerIdentityDeletePass|AssignRemovePass'

# ---- 1. optimised vs not on a small graph ---------------------------------------
g="$src/tests/data/simplify/mixed.json"
"$kiln" run "$g" --input x="$src/tests/data/simplify/x.bin" --output-dir "$tmp/on" --report "$tmp/on.json" >/dev/null 2>"$tmp/err" \
    || { no "mixed.json: kiln run failed"; cat "$tmp/err"; }
"$kiln" run "$g" --input x="$src/tests/data/simplify/x.bin" --output-dir "$tmp/off" --disable-pass "$off" \
    --report "$tmp/off.json" >/dev/null 2>"$tmp/err" || { no "mixed.json: kiln run without the passes failed"; cat "$tmp/err"; }
cmp -s "$tmp/on/output.0.bin" "$tmp/off/output.0.bin" || no "mixed.json: outputs differ with and without the passes"
python3 - "$tmp/on.json" "$tmp/off.json" <<'PY' || fail=$((fail+1))
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:3])
want = {"TransOpSymmetryEliminationPass": "symmetric pairs eliminated",
        "TransposeMergePass": "transposes merged",
        "UnchangedTransposeRemovePass": "transposes removed",
        "CastRemovePass": "casts removed",
        "ReshapeRemovePass": "reshape chains collapsed"}
got = {p["pass"]: p.get("stats", {}) for p in on["passes"]}
bad = [f"{p}: {c} = {got.get(p, {}).get(c)}" for p, c in want.items() if not got.get(p, {}).get(c)]
if bad:
    print("FAIL: mixed.json: passes did not fire:", "; ".join(bad)); sys.exit(1)
print("mixed.json: every pass fired; outputs identical")
PY

# ---- 2. isolation copies survive ----------------------------------------------------
pinned() { python3 -c '
import json, sys
def walk(g, pre):
    for n in g["nodes"]:
        if n.get("attrs", {}).get("_cannot_be_deleted") is True:
            print(pre + n["name"])
        for role, sg in n.get("subgraphs", {}).items():
            walk(sg, pre + n["name"] + "/" + role + "/")
walk(json.load(open(sys.argv[1])), "")' "$1" | sort; }
ncases=0
for f in "$src"/tests/data/passes/{SubgraphPass,HcclMemcpyPass,HandleMemoryRWConflict,HandleMemoryLayoutConflict,MemcpyAddrAsyncPass}/*.out.json; do
    [ -f "$f" ] || continue
    want=$(pinned "$f")
    [ -n "$want" ] || continue
    ncases=$((ncases+1))
    # all of them in a row: any pass that removed a copy shows at the end
    for p in "$(echo $passes | tr ' ' ',')"; do
        if ! "$kiln" opt "$f" --passes "$p" -o "$tmp/o.json" 2>"$tmp/err"; then
            no "$(basename "$f"): --passes $p failed"; cat "$tmp/err"; continue
        fi
        [ "$(pinned "$tmp/o.json")" = "$want" ] || no "$(basename "$f"): $p removed an isolation copy"
    done
done
[ "$ncases" -gt 0 ] || no "no golden graph with isolation copies found"
echo "isolation copies: $ncases graphs checked"

# ---- 3. a real model, optimised vs not ---------------------------------------------
. "$src/tests/common/model_cases.sh"
if model_cases_locate >"$tmp/locate" 2>&1 && [ -f "$models/silero_vad_v5.onnx" ]; then
    case_dir="$refs/silero_vad_v5"
    args=()
    for s in "$case_dir"/input.*.bin.json; do
        name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$s")
        args+=(--input "$name=${s%.json}")
    done
    "$kiln" run "$models/silero_vad_v5.onnx" "${args[@]}" --output-dir "$tmp/mon" --report "$tmp/mon.json" \
        >/dev/null 2>"$tmp/err" || { no "silero_vad_v5: kiln run failed"; cat "$tmp/err"; }
    "$kiln" run "$models/silero_vad_v5.onnx" "${args[@]}" --output-dir "$tmp/moff" --disable-pass "$off" \
        >/dev/null 2>"$tmp/err" || { no "silero_vad_v5: kiln run without the passes failed"; cat "$tmp/err"; }
    for o in "$tmp"/mon/output.*.bin; do
        cmp -s "$o" "$tmp/moff/$(basename "$o")" || no "silero_vad_v5: $(basename "$o") differs"
    done
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
n = sum(p.get("stats", {}).get("casts removed", 0) for p in r["passes"] if p["pass"] == "CastRemovePass")
print(f"silero_vad_v5: CastRemovePass removed {n} casts; outputs identical")
sys.exit(0 if n > 0 else 1)' "$tmp/mon.json" || no "silero_vad_v5: CastRemovePass did not fire"
else
    echo "silero_vad_v5: models not available here, part 3 not run"
fi

# ---- 4. PruneGraphPass on nodes numbered out of order ------------------------------
# The pass sweeps down the node ids (graphs are mostly numbered producers first);
# here the NetOutput comes first and producers after their consumers (b2 feeds b1
# and comes after it, c2 reaches b1 by a control edge): what reaches the NetOutput
# stays, dead1/dead2 go, the unused Data stays.
cat > "$tmp/prune.json" <<'JSON'
{"kiln_graph": 1, "name": "prune_order", "nodes": [
 {"name": "out", "type": "NetOutput", "inputs": ["b1:0"]},
 {"name": "b1", "type": "Relu", "inputs": ["b2:0"], "control_inputs": ["c2"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "dead1", "type": "Neg", "inputs": ["b3:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "b2", "type": "Neg", "inputs": ["b3:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "c2", "type": "Relu", "inputs": ["c3:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "b3", "type": "Relu", "inputs": ["x:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "c3", "type": "Neg", "inputs": ["x:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "dead2", "type": "Relu", "inputs": ["dead1:0"], "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"dtype": "float32", "shape": [2]}]},
 {"name": "y", "type": "Data", "attrs": {"index": 1}, "outputs": [{"dtype": "float32", "shape": [2]}]}
]}
JSON
if "$kiln" opt "$tmp/prune.json" --passes PruneGraphPass -o "$tmp/pruned.json" 2>"$tmp/err"; then
    python3 -c '
import json, sys
names = sorted(n["name"] for n in json.load(open(sys.argv[1]))["nodes"])
want = sorted(["out", "b1", "b2", "b3", "c2", "c3", "x", "y"])
sys.exit(0 if names == want else print("FAIL: PruneGraphPass kept", names, "want", want) or 1)' \
        "$tmp/pruned.json" || fail=$((fail+1))
else
    no "PruneGraphPass on prune.json failed"; cat "$tmp/err"
fi

[ "$fail" -eq 0 ] && echo "simplify_passes: all passed"
[ "$fail" -eq 0 ]
