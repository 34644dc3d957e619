#!/usr/bin/env bash
# End-to-end tests of the constant-folding and CSE passes (docs/optimizer.md)
# beyond the golden graphs of tests/data/passes/<Pass>/ (golden_passes.sh):
# ConstantFoldingPass's options (round 2 removes isolated Consts, max_elements,
# infer=false leaves the shape fixpoint undone) and counters, a bad option's
# error, InferShapes' error for a While body changing a loop variable's dtype,
# the If/Case replacement running and giving the taken branch's values,
# and the isolation copies of the memory-conflict passes surviving every one
# of the passes (every golden output of those passes run through them).
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
data="$src/tests/data/opt_fold"; golden="$src/tests/data/passes"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# $1 report, $2 python expression over r (the report) and p (the named pass's entries)
check_report() {
    python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
name = sys.argv[2]
p = [e for e in r["passes"] if e["pass"] == name]
st = {}
for e in p:
    for k, v in e["stats"].items():
        st[k] = st.get(k, 0) + v
sys.exit(0 if eval(sys.argv[3]) else 1)
PY
}
names() { python3 -c "import json,sys; print(' '.join(sorted(n['name'] for n in json.load(open(sys.argv[1]))['nodes'])))" "$1"; }

# round 1 keeps an isolated Const, round 2 removes it
"$kiln" opt "$data/round2.json" --passes ConstantFoldingPass -o "$tmp/r1.json" --report "$tmp/r1.rep" \
    && [ "$(names "$tmp/r1.json")" = "add big iso out sum x" ] \
    && check_report "$tmp/r1.rep" ConstantFoldingPass 'st.get("folded") == 2 and "isolated_consts_removed" not in st' \
    && ok || bad "round 1: $(names "$tmp/r1.json" 2>/dev/null)"
"$kiln" opt "$data/round2.json" --passes "ConstantFoldingPass{round=2}" -o "$tmp/r2.json" --report "$tmp/r2.rep" \
    && [ "$(names "$tmp/r2.json")" = "add big out sum x" ] \
    && check_report "$tmp/r2.rep" ConstantFoldingPass 'st.get("isolated_consts_removed") == 1' \
    && ok || bad "round 2: $(names "$tmp/r2.json" 2>/dev/null)"
# max_elements: big (8 elements) stays a Relu
"$kiln" opt "$data/round2.json" --passes "ConstantFoldingPass{max_elements=4}" -o "$tmp/m.json" --report "$tmp/m.rep" \
    && python3 -c "import json,sys; g=json.load(open(sys.argv[1])); t={n['name']:n['type'] for n in g['nodes']}; sys.exit(0 if t['big']=='Relu' and t['add']=='Const' else 1)" "$tmp/m.json" \
    && check_report "$tmp/m.rep" ConstantFoldingPass 'st.get("skipped_too_large", 0) >= 1 and st.get("folded") == 1' \
    && ok || bad "max_elements"
# bad option value: a clear error naming the pass
if "$kiln" opt "$data/round2.json" --passes "ConstantFoldingPass{round=3}" -o "$tmp/x.json" 2>"$tmp/err"; then
    bad "round=3 accepted"
elif grep -q "ConstantFoldingPass" "$tmp/err" && grep -q "round" "$tmp/err"; then ok
else bad "round=3: unclear error: $(cat "$tmp/err")"; fi

# the shape fixpoint: with infer=false the Reshape keeps its unknown dims
sgr="$golden/ConstantFoldingPass/shape_gather_reshape.in.json"
"$kiln" opt "$sgr" --passes "ConstantFoldingPass{infer=false}" -o "$tmp/ni.json" \
    && python3 -c "import json,sys; g=json.load(open(sys.argv[1])); r=[n for n in g['nodes'] if n['name']=='reshape'][0]; sys.exit(0 if r['outputs'][0]['shape']==[-1,-1,-1,-1] else 1)" "$tmp/ni.json" \
    && ok || bad "infer=false still refined the Reshape"
"$kiln" opt "$sgr" --passes ConstantFoldingPass -o "$tmp/wi.json" --report "$tmp/wi.rep" \
    && check_report "$tmp/wi.rep" ConstantFoldingPass 'st.get("shapes_refined") == 1 and st.get("folded") == 2' \
    && ok || bad "fixpoint counters"

# InferShapes' While fixpoint: a body that changes a loop variable's dtype is an
# error naming the node
python3 - "$golden/InferShapes/while_fixpoint.in.json" "$tmp/while_bad.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
body = [n for n in g["nodes"] if n["name"] == "loop"][0]["subgraphs"]["body"]["nodes"]
body.insert(-1, {"name": "tof", "type": "Cast", "inputs": ["inc:0"], "attrs": {"to": 1},
                 "outputs": [{"dtype": "float32", "shape": []}]})
body[-1]["inputs"][0] = "tof:0"
json.dump(g, open(sys.argv[2], "w"))
PY
if "$kiln" opt "$tmp/while_bad.json" --passes InferShapes -o "$tmp/wb.json" 2>"$tmp/err"; then
    bad "While body changing a dtype accepted"
elif grep -q "node loop (While): body turns loop variable 0 from int64 into float32" "$tmp/err"; then ok
else bad "While dtype change: unclear error: $(cat "$tmp/err")"; fi

# CondRemovePass: the PartitionedCalls run and give the taken branches' values
# (Relu for if_t, Sigmoid for case5 whose index 5 takes the last branch)
printf '\x00\x00\x80\xbf\x00\x00\x00\x40' > "$tmp/x.bin"   # float32 [-1, 2]
printf '\x00' > "$tmp/p.bin"                               # bool false
echo '{"dims": [2], "dtype": "float32"}' > "$tmp/x.bin.json"
echo '{"dims": [], "dtype": "bool"}' > "$tmp/p.bin.json"
"$kiln" opt "$golden/CondRemovePass/rules.in.json" --passes "InferShapes,CondRemovePass" -o "$tmp/cr.json" \
    && "$kiln" run "$tmp/cr.json" --input "$tmp/x.bin" --input "$tmp/p.bin" --output-dir "$tmp/cr_out" >"$tmp/run.log" 2>&1 \
    && python3 - "$tmp/cr_out" <<'PY' && ok || { bad "CondRemovePass result does not run or differs"; cat "$tmp/run.log"; }
import glob, math, struct, sys, os
d = sys.argv[1]
outs = sorted(f for f in os.listdir(d) if f.endswith(".bin"))
vals = [struct.unpack("<2f", open(os.path.join(d, f), "rb").read()) for f in outs]
sig = [1 / (1 + math.exp(1)), 1 / (1 + math.exp(-2))]
want = [(0.0, 2.0), tuple(sig), (1.0, -2.0)]
ok = len(vals) == 3 and all(abs(a - b) < 1e-6 for v, w in zip(vals, want) for a, b in zip(v, w))
if not ok:
    print("got", vals, "want", want)
sys.exit(0 if ok else 1)
PY

# isolation copies of the memory-conflict passes survive every pass here
iso_pipeline="ConstantFuseSamePass,CommonSubexpressionEliminationPass,ConstantFoldingPass,ConstantFoldingPass{round=2}"
n_iso=0
for out in "$golden"/{HandleMemoryLayoutConflict,HandleMemoryRWConflict,HcclMemcpyPass,HcclContinuousMemcpyPass,SubgraphPass}/*.out.json; do
    grep -q '"_cannot_be_deleted": true' "$out" || continue
    case_=$(basename "$(dirname "$out")")/$(basename "$out")
    if ! "$kiln" opt "$out" --passes "$iso_pipeline" -o "$tmp/iso.json" 2>"$tmp/err"; then
        bad "isolation $case_: kiln failed: $(head -3 "$tmp/err")"; continue
    fi
    if python3 - "$out" "$tmp/iso.json" <<'PY'; then n_iso=$((n_iso+1)); else bad "isolation $case_: a copy was removed or rewired"; fi
import json, sys
def copies(g, acc, path=""):
    for n in g["nodes"]:
        if n.get("attrs", {}).get("_cannot_be_deleted") is True:
            # the copy and its connected inputs (ConstantFuseSamePass may feed
            # it from an equal Const, which keeps the isolation)
            acc.add((path, n["name"], n["type"], len(n.get("inputs", []))))
        for role, sg in n.get("subgraphs", {}).items():
            copies(sg, acc, path + "/" + n["name"] + ":" + role)
    return acc
a = copies(json.load(open(sys.argv[1])), set())
b = copies(json.load(open(sys.argv[2])), set())
if a - b:
    print("missing:", sorted(a - b))
sys.exit(0 if not (a - b) else 1)
PY
done
[ "$n_iso" -ge 20 ] && ok || bad "only $n_iso isolation graphs checked"

# ConstantFuseSamePass on large weights: two equal 16 KiB Consts merge; a third
# that differs in one element the hash does not sample stays (the hash only
# picks candidates; the full compare decides)
python3 - "$tmp/big.json" <<'PY'
import json, sys
vals = [float(i % 97) for i in range(4096)]
diff = list(vals); diff[326] += 1.0  # bytes 1304..1307: between two sampled words
def const(name, data):
    return {"name": name, "type": "Const", "outputs": [{"shape": [4096]}],
            "attrs": {"value": {"type": "tensor", "value": {"dtype": "float32", "shape": [4096], "data": data}}}}
nodes = [{"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [4096]}]},
         const("a", vals), const("b", vals), const("c", diff)]
for k in "abc":
    nodes.append({"name": "add_" + k, "type": "Add", "inputs": ["x:0", k + ":0"], "outputs": [{"shape": [4096]}]})
nodes.append({"name": "out", "type": "NetOutput", "inputs": ["add_a:0", "add_b:0", "add_c:0"]})
json.dump({"kiln_graph": 1, "name": "big_consts", "nodes": nodes}, open(sys.argv[1], "w"))
PY
if "$kiln" opt "$tmp/big.json" --passes ConstantFuseSamePass -o "$tmp/big_out.json" 2>"$tmp/err"; then
    python3 - "$tmp/big_out.json" <<'PY' && ok || bad "ConstantFuseSamePass on large weights: wrong merge"
import json, sys
g = json.load(open(sys.argv[1]))
consts = sorted(n["name"] for n in g["nodes"] if n["type"] == "Const")
feeds = {n["name"]: n["inputs"][1].split(":")[0] for n in g["nodes"] if n["type"] == "Add"}
ok = len(consts) == 2 and "c" in consts and feeds["add_a"] == feeds["add_b"] != feeds["add_c"] == "c"
print("consts", consts, "feeds", feeds) if not ok else None
sys.exit(0 if ok else 1)
PY
else
    bad "ConstantFuseSamePass on large weights: kiln failed: $(head -3 "$tmp/err")"
fi

echo "opt_fold: $pass passed, $fail failed ($n_iso isolation graphs)"
[ "$fail" -eq 0 ]
