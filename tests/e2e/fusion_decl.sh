#!/usr/bin/env bash
# Declarative fusions (docs/fusion.md): libkiln_fusion_decl.so registers one
# pattern fusion pass per fusion a manifest entry's "config" declares.
#
#   1. tests/data/fusion_decl: five fusions from a file the config names, one
#      feature each (edges, a replacement graph, commutative matching, const
#      values, tensor literals, `like`, a two-output pattern, attribute lists
#      and dtypes, attribute requirements, copy_attrs / from / optional,
#      scalar, an input used twice); each fuses its chain, the fused graph's outputs equal the
#      unfused graph's (kiln run), the fused nodes carry their origins.
#   2. each requirement kind vetoes a match it does not meet, and without
#      "commutative" the swapped Add is left alone.
#   3. the docs example (examples/fusions) in a full compile: the fusion runs at
#      its stage through the FusionPassExecutor; fused and unfused runs agree.
#   4. every load error names the manifest (or fusions file), the JSON path and
#      the reason, and nothing is written.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
data="$src/tests/data/fusion_decl"
g="$data/graph.json"
all=DeclSubToAddNeg,DeclPlusTwo,DeclSigmoidNeg,DeclLeakyChain,DeclClipConsts,DeclSwish

# name want_status fragment -- command...
check() {
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"; local st=$?
    if [ "$st" != "$want" ]; then bad "$name: exit $st, want $want"; cat "$tmp/err"; return 1; fi
    if [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/out" "$tmp/err"; then
        bad "$name: no '$frag' in:"; cat "$tmp/out" "$tmp/err"; return 1
    fi
    ok
}

# inputs: x, y float32 [2,3] with negatives, zeros and positives
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
for name, vals in (("x", [-1.5, 0.0, 0.25, 2.0, -3.0, 1.0]), ("y", [0.5, -2.0, 1.0, -0.125, 4.0, 0.0])):
    open("%s/%s.bin" % (d, name), "wb").write(struct.pack("<6f", *vals))
    json.dump({"dims": [2, 3], "dtype": "float32"}, open("%s/%s.bin.json" % (d, name), "w"))
PY
# run GRAPH OUTDIR [args...]
run() {
    local graph=$1 out=$2; shift 2
    "$kiln" run "$graph" --input x="$tmp/x.bin" --input y="$tmp/y.bin" --output-dir "$out" "$@"
}
# same_outputs DIR_A DIR_B N: outputs 0..N-1 equal within 1e-5 (relative)
same_outputs() {
    python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    ra = open("%s/output.%d.bin" % (a, i), "rb").read()
    rb = open("%s/output.%d.bin" % (b, i), "rb").read()
    assert len(ra) == len(rb), (i, len(ra), len(rb))
    va = struct.unpack("<%df" % (len(ra) // 4), ra)
    vb = struct.unpack("<%df" % (len(rb) // 4), rb)
    for p, q in zip(va, vb):
        assert abs(p - q) <= 1e-5 * max(1.0, abs(q)), (i, va, vb)
PY
}

# ---- 1. every feature fuses its chain, outputs unchanged ---------------------------
check list 0 "DeclLeakyChain" -- "$kiln" plugins -m "$data/manifest.json"
# the declared stage (the default: after_infer_shape) and summary
check inspect-stage 0 "fusion    pattern, stage after_origin_graph_optimize" -- \
    "$kiln" plugins -m "$data/manifest.json" DeclSigmoidNeg
check inspect-default 0 "fusion    pattern, stage after_infer_shape" -- \
    "$kiln" plugins -m "$data/manifest.json" DeclLeakyChain
check inspect-summary 0 "summary   Clip(v, Const lo, Const hi) -> Clip(v) with min/max" -- \
    "$kiln" plugins -m "$data/manifest.json" DeclClipConsts
check opt-all 0 "" -- "$kiln" opt "$g" -m "$data/manifest.json" --passes "$all" -o "$tmp/fused.json"
python3 - "$tmp/fused.json" <<'PY' && ok || bad "fused graph"
import json, sys
g = json.load(open(sys.argv[1]))
n = {v["name"]: v for v in g["nodes"]}
types = sorted(v["type"] for v in g["nodes"])
# the matched nodes are gone, the shared Consts (two, lo, hi) with them
for gone in ("sub", "plus2", "sig", "neg", "lk1", "lk2", "clip", "two", "lo", "hi"):
    assert gone not in n, gone
def a(name):
    return n[name].get("attrs", {})
# replacement graph: x + Neg(y); `like` gave neg y's descriptor
assert n["sub/neg"]["type"] == "Neg" and n["sub/neg"]["inputs"] == ["y:0"]
assert n["sub/add"]["inputs"] == ["x:0", "sub/neg:0"]
assert a("sub/add")["_datadump_origin_op_names"] == ["sub"]
assert a("sub/add")["pass_name"] == ["DeclSubToAddNeg"]
# commutative Add(2, y) -> Add(Add(y, 1), 1); the Const takes the matched Const's descriptor
one = n["plus2/one"]
assert one["type"] == "Const" and a("plus2/one")["value"]["value"]["data"] == [1.0]
assert one["outputs"][0]["shape"] == [], one["outputs"]
assert n["plus2/add1"]["inputs"] == ["y:0", "plus2/one:0"]
# an inner node (no boundary output): descriptors from its op's inference
assert n["plus2/add1"]["outputs"][0] == {"dtype": "float32", "shape": [2, 3]}, n["plus2/add1"]
assert n["sub/neg"]["outputs"][0]["shape"] == [2, 3] and n["sig/e2"]["outputs"][0]["shape"] == [2, 3]
assert n["plus2/add2"]["inputs"] == ["plus2/add1:0", "plus2/one:0"]
assert sorted(a("plus2/add2")["_datadump_origin_op_names"]) == ["plus2", "two"]
# two-output pattern: both boundary outputs rewired, literal list / dtype attributes
out = n["out"]["inputs"]
assert out[2] == "sig/e2:0" and out[3] == "sig/t2:0", out
t2 = a("sig/t2")
assert t2["decl_list"] == [1, 2, 3] and t2["decl_names"] == ["a", "b"], t2
assert t2["decl_dt"]["value"] == "float16", t2
# attribute requirements met; copy_attrs then the override; from; optional skipped
lk = a("lk2/leaky")
assert n["lk2/leaky"]["inputs"] == ["y:0"]
assert abs(lk["alpha"] - 0.01) < 1e-9 and abs(lk["decl_from"] - 0.1) < 1e-6, lk
assert "decl_missing" not in lk
assert sorted(lk["_datadump_origin_op_names"]) == ["lk1", "lk2"]
# scalar: Const values as Clip attributes
cl = a("clip/fused")
assert n["clip/fused"]["inputs"] == ["x:0"] and cl["min"] == -0.5 and cl["max"] == 1.5, cl
# an input used twice binds one tensor: Mul(Sigmoid(y), y) fuses (swapped: commutative),
# Mul(y, Sigmoid(x)) does not
assert "swish" not in n and "sy" not in n
assert n["swish/m2"]["inputs"] == ["y:0", "swish/s2:0"] and a("swish/m2")["decl_swish"] is True
assert n["notswish"]["type"] == "Mul" and n["sx"]["type"] == "Sigmoid"
assert out[6] == "swish/m2:0" and out[7] == "notswish:0", out
# every new output kept the descriptor of the tensor it replaced
for name in ("sub/add", "plus2/add2", "sig/e2", "sig/t2", "lk2/leaky", "clip/fused", "swish/m2"):
    o = n[name]["outputs"][0]
    assert o["dtype"] == "float32" and o["shape"] == [2, 3], (name, o)
PY
check run-unfused 0 "" -- run "$g" "$tmp/ref"
check run-fused 0 "" -- run "$tmp/fused.json" "$tmp/got"
same_outputs "$tmp/ref" "$tmp/got" 8 && ok || bad "fused outputs differ from the unfused ones"
# a second run finds nothing more to fuse (DeclSigmoidNeg and DeclSwish rebuild their
# match node for node, so they would match again: they are left out)
check idempotent 0 "" -- "$kiln" opt "$tmp/fused.json" -m "$data/manifest.json" \
    --passes DeclSubToAddNeg,DeclPlusTwo,DeclLeakyChain,DeclClipConsts -o "$tmp/again.json"
python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert sorted(n['name'] for n in a['nodes']) == sorted(n['name'] for n in b['nodes'])
" "$tmp/fused.json" "$tmp/again.json" && ok || bad "a second run changed the graph"

# ---- 2. requirements veto, commutative off -----------------------------------------
# variant NAME PYTHON-EDIT PASS NODE-THAT-MUST-SURVIVE
variant() {
    local name=$1 edit=$2 passname=$3 keep=$4
    mkdir -p "$tmp/$name"
    python3 - "$data/fusions.json" "$tmp/$name/fusions.json" "$edit" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
f = {x["name"]: x for x in doc["fusions"]}
exec(sys.argv[3])
json.dump(doc, open(sys.argv[2], "w"))
PY
    sed "s#../../../manifests/default.json#$src/manifests/default.json#" "$data/manifest.json" \
        >"$tmp/$name/manifest.json"
    check "$name" 0 "" -- "$kiln" opt "$g" -m "$tmp/$name/manifest.json" --passes "$passname" \
        -o "$tmp/$name/out.json" || return
    python3 -c "
import json, sys
names = [n['name'] for n in json.load(open(sys.argv[1]))['nodes']]
assert sys.argv[2] in names, names
" "$tmp/$name/out.json" "$keep" && ok || bad "$name: $keep was fused"
}
variant dtype 'f["DeclPlusTwo"]["requires"][1]["dtype"] = ["float64", "int32"]' DeclPlusTwo plus2
variant const 'f["DeclPlusTwo"]["requires"][0]["value"] = 3' DeclPlusTwo plus2
variant tolerance 'f["DeclPlusTwo"]["requires"][0].update(value=2.5, tolerance=0.4)' DeclPlusTwo plus2
variant commutative 'f["DeclPlusTwo"]["commutative"] = False' DeclPlusTwo plus2
variant rank 'f["DeclSubToAddNeg"]["requires"][1]["rank"] = 3' DeclSubToAddNeg sub
variant shape 'f["DeclSubToAddNeg"]["requires"][2]["shape"] = [2, 4]' DeclSubToAddNeg sub
variant same_shape 'f["DeclSubToAddNeg"]["requires"][0]["same_shape"] = "sub"; f["DeclSubToAddNeg"]["requires"].append({"tensor": "a", "shape": [2]})' DeclSubToAddNeg sub
variant same_dtype 'f["DeclSubToAddNeg"]["requires"][3] = {"tensor": "a", "dtype": "int64"}' DeclSubToAddNeg sub
variant attr_eq 'f["DeclLeakyChain"]["requires"][0]["equals"] = 0.2' DeclLeakyChain lk2
variant attr_missing 'f["DeclLeakyChain"]["requires"][0]["attr"] = "l1.beta"' DeclLeakyChain lk2
variant infer_refuses 'f["DeclSubToAddNeg"]["replacement"]["nodes"][0] = {"name": "neg", "op": "MatMul", "inputs": ["b", "b"]}' DeclSubToAddNeg sub
variant from_missing 'f["DeclLeakyChain"]["replacement"]["attrs"]["decl_missing"]["optional"] = False' DeclLeakyChain lk2
# and the commutative variant still fuses the swapped form when it is written in order
sed 's/"inputs": \["two:0", "y:0"\]/"inputs": ["y:0", "two:0"]/' "$g" >"$tmp/inorder.json"
check commutative-off-inorder 0 "" -- "$kiln" opt "$tmp/inorder.json" -m "$tmp/commutative/manifest.json" \
    --passes DeclPlusTwo -o "$tmp/inorder_out.json"
grep -q '"plus2/add2"' "$tmp/inorder_out.json" && ok || bad "in-order Add(y, 2) not fused"

# ---- 3. the docs example in a full compile ----------------------------------------
ex="$src/examples/fusions"
check compile 0 "" -- "$kiln" compile "$ex/hard_sigmoid_graph.json" -m "$ex/manifest.json" -o "$tmp/hs.json"
python3 - "$tmp/hs.json" <<'PY' && ok || bad "docs example: compiled graph"
import json, sys
g = json.load(open(sys.argv[1]))
hs = [n for n in g["nodes"] if n["type"] == "HardSigmoid"]
assert len(hs) == 1, [n["type"] for n in g["nodes"]]
a = hs[0]["attrs"]
assert abs(a["alpha"] - 1 / 6) < 1e-12 and a["beta"] == 0.5, a
assert sorted(a["_datadump_origin_op_names"]) == ["add", "clip", "div", "hi", "lo", "six", "three"], a
assert a["pass_name"] == ["HardSigmoidFusionPass"], a
assert not [n for n in g["nodes"] if n["type"] in ("Add", "Clip", "Div")]
PY
# it ran in the prepare stage's RunCustomPassAfterInferShape, and the report's
# fusions section counts it and names the fused node's sources
check report 0 "" -- "$kiln" compile "$ex/hard_sigmoid_graph.json" -m "$ex/manifest.json" \
    -o "$tmp/hs2.json" --report "$tmp/report.json"
python3 - "$tmp/report.json" <<'PY' && ok || bad "report: the declared fusion is not reported"
import json, sys
r = json.load(open(sys.argv[1]))
p = [p for p in r["passes"] if p["pass"] == "RunCustomPassAfterInferShape"]
assert p and p[0]["stage"] == "prepare" and p[0]["changed"] == 1 and p[0]["nodes_removed"] == 6, p
f = r["fusions"]
assert f["passes"]["HardSigmoidFusionPass"] == {"matched": 1, "effected": 1}, f
(n,) = f["nodes"]
assert n["op"] == "HardSigmoid" and n["passes"] == ["HardSigmoidFusionPass"], n
assert sorted(n["sources"]) == ["add", "clip", "div", "hi", "lo", "six", "three"], n
PY
# outputs: x in [-5, 5) covers both saturations; fused and unfused agree
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
vals = [-5.0, -3.0, -2.5, -0.5, 0.0, 1.0, 2.75, 4.5]
open(d + "/hx.bin", "wb").write(struct.pack("<8f", *vals))
json.dump({"dims": [2, 4], "dtype": "float32"}, open(d + "/hx.bin.json", "w"))
PY
check run-hs-fused 0 "" -- "$kiln" run "$ex/hard_sigmoid_graph.json" -m "$ex/manifest.json" \
    --input x="$tmp/hx.bin" --output-dir "$tmp/hs_fused"
check run-hs-unfused 0 "" -- "$kiln" run "$ex/hard_sigmoid_graph.json" --input x="$tmp/hx.bin" \
    --output-dir "$tmp/hs_ref"
same_outputs "$tmp/hs_ref" "$tmp/hs_fused" 1 && ok || bad "docs example: outputs differ"
# HardSwish, the way PP-OCR's det model writes it 24 times, with a dynamic batch dim:
# kiln run infers the shapes from the input, the fusion runs after InferShapes, and
# its inner HardSigmoid node (no boundary output) gets inferred descriptors
check compile-hswish 0 "" -- "$kiln" compile "$ex/hard_swish_graph.json" -m "$ex/manifest.json" \
    -o "$tmp/hsw.json" --report "$tmp/hsw_report.json"
python3 - "$tmp/hsw_report.json" <<'PY' && ok || bad "HardSwish: not fused"
import json, sys
f = json.load(open(sys.argv[1]))["fusions"]
assert f["passes"]["HardSigmoidMulFusionPass"] == {"matched": 1, "effected": 1}, f
assert sorted(n["op"] for n in f["nodes"]) == ["HardSigmoid", "Mul"], f["nodes"]
PY
check run-hswish-fused 0 "" -- "$kiln" run "$ex/hard_swish_graph.json" -m "$ex/manifest.json" \
    --input x="$tmp/hx.bin" --output-dir "$tmp/hsw_fused"
check run-hswish-unfused 0 "" -- "$kiln" run "$ex/hard_swish_graph.json" --input x="$tmp/hx.bin" \
    --output-dir "$tmp/hsw_ref"
same_outputs "$tmp/hsw_ref" "$tmp/hsw_fused" 1 && ok || bad "HardSwish: outputs differ"

# ---- 4. load errors ------------------------------------------------------------------
# bad NAME 'JSON fusion list' fragment...: the manifest fails to load naming itself,
# the JSON path and the reason
bad_def() {
    local name=$1 fusions=$2; shift 2
    cat >"$tmp/$name.json" <<EOF
{"kiln_manifest": 1, "extends": "$src/manifests/default.json",
 "plugins": [{"path": "libkiln_fusion_decl.so", "config": {"fusions": $fusions}}]}
EOF
    "$kiln" compile "$g" -m "$tmp/$name.json" -o "$tmp/$name.out" >"$tmp/out" 2>"$tmp/err"
    local st=$?
    if [ "$st" = 0 ]; then bad "$name: accepted"; return; fi
    if [ -e "$tmp/$name.out" ]; then bad "$name: wrote output"; fi
    for frag in "$tmp/$name.json" "$@"; do
        grep -qF -- "$frag" "$tmp/err" || { bad "$name: no '$frag' in:"; cat "$tmp/err"; return; }
    done
    ok
}
P='"pattern": {"inputs": ["v"], "nodes": [{"name": "r", "op": "Relu", "inputs": ["v"]}], "outputs": ["r"]}'
R='"replacement": {"op": "Relu", "inputs": ["v"]}'
bad_def unknown_capture "[{\"name\": \"E1\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"w\"]}], \"outputs\": [\"r\"]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern.nodes[0].inputs[0]' 'unknown capture "w"'
bad_def unknown_capture_req "[{\"name\": \"E2\", $P, \"requires\": [{\"tensor\": \"q\", \"dtype\": \"float32\"}], $R}]" \
    '$.plugins[0].config.fusions[0].requires[0].tensor' 'unknown capture "q"'
bad_def unknown_capture_edge "[{\"name\": \"E3\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\"}], \"edges\": [\"v -> s:0\"], \"outputs\": [\"r\"]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern.edges[0]' 'unknown capture "s"'
bad_def no_output "[{\"name\": \"E4\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"v\"]}], \"outputs\": []}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern.outputs' 'the pattern has no output'
bad_def no_output_key "[{\"name\": \"E5\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"v\"]}]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern' 'the pattern has no output'
bad_def arity "[{\"name\": \"E6\", $P, \"replacement\": {\"nodes\": [{\"name\": \"a\", \"op\": \"Relu\", \"inputs\": [\"v\"]}], \"outputs\": [\"a\", \"a\"]}}]" \
    '$.plugins[0].config.fusions[0].replacement.outputs' 'replacement arity mismatch: the pattern has 1 output, the replacement 2'
bad_def arity_one "[{\"name\": \"E7\", $P, \"replacement\": {\"op\": \"Relu\", \"inputs\": [\"v\"], \"outputs\": 2}}]" \
    '$.plugins[0].config.fusions[0].replacement' 'replacement arity mismatch'
bad_def unknown_op "[{\"name\": \"E8\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relux\", \"inputs\": [\"v\"]}], \"outputs\": [\"r\"]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern.nodes[0]' 'unknown op "Relux"'
bad_def unknown_op_repl "[{\"name\": \"E9\", $P, \"replacement\": {\"op\": \"FusedNothing\", \"inputs\": [\"v\"]}}]" \
    '$.plugins[0].config.fusions[0].replacement' 'unknown op "FusedNothing"'
bad_def unknown_key "[{\"name\": \"E10\", $P, $R, \"replacment\": 1}]" \
    '$.plugins[0].config.fusions[0]' 'unknown key "replacment"'
bad_def reads_matched "[{\"name\": \"E11\", $P, \"replacement\": {\"op\": \"Relu\", \"inputs\": [\"r\"]}}]" \
    '$.plugins[0].config.fusions[0].replacement.inputs[0]' '"r" is a matched node'
bad_def later_node "[{\"name\": \"E12\", $P, \"replacement\": {\"nodes\": [{\"name\": \"a\", \"op\": \"Relu\", \"inputs\": [\"b\"]}, {\"name\": \"b\", \"op\": \"Relu\", \"inputs\": [\"v\"]}], \"outputs\": [\"a\"]}}]" \
    '$.plugins[0].config.fusions[0].replacement.nodes[0].inputs[0]' 'defined later'
bad_def unreached "[{\"name\": \"E13\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"v\"]}, {\"name\": \"s\", \"op\": \"Relu\", \"inputs\": [\"v\"]}], \"outputs\": [\"r\"]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern' 'node "s" does not reach a pattern output'
bad_def fed_twice "[{\"name\": \"E14\", \"pattern\": {\"inputs\": [\"v\"], \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"v\"]}], \"edges\": [\"v -> r:0\"], \"outputs\": [\"r\"]}, $R}]" \
    '$.plugins[0].config.fusions[0].pattern.edges[0]' 'input 0 of "r" is fed twice'
bad_def bad_stage "[{\"name\": \"E15\", \"stage\": \"later\", $P, $R}]" \
    '$.plugins[0].config.fusions[0]' '"stage": expected one of'
bad_def const_not_const "[{\"name\": \"E16\", $P, \"requires\": [{\"const\": \"r\", \"value\": 1}], $R}]" \
    '$.plugins[0].config.fusions[0].requires[0].const' '"r" is a Relu node, not a pattern Const'
bad_def duplicate "[{\"name\": \"E17\", $P, $R}, {\"name\": \"E17\", $P, $R}]" \
    '$.plugins[0].config.fusions[1]' 'fusion E17 is declared twice'
bad_def clash "[{\"name\": \"PruneGraphPass\", $P, $R}]" \
    '$.plugins[0].config.fusions[0]' 'PruneGraphPass'
bad_def missing_file '"nosuch_fusions.json"' \
    '$.plugins[0].config.fusions' 'nosuch_fusions.json'
bad_def not_array '{"a": 1}' \
    '$.plugins[0].config.fusions' 'expected an array of fusions'
bad_def attr_no_dot "[{\"name\": \"E18\", $P, \"requires\": [{\"attr\": \"alpha\", \"equals\": 1}], $R}]" \
    '$.plugins[0].config.fusions[0].requires[0].attr' 'expected "capture.attribute"'
# an error inside a fusions file names that file
echo "[{\"name\": \"E19\", $P, \"replacement\": {\"op\": \"Relu\", \"inputs\": [\"v\"], \"copy_attrs\": \"zz\"}}]" >"$tmp/file_err.json"
bad_def in_file '"file_err.json"' "$tmp/file_err.json" '$[0].replacement.copy_attrs' 'unknown capture "zz"'
# config on a plugin an earlier entry loaded
cat >"$tmp/twice.json" <<EOF
{"kiln_manifest": 1, "extends": "$src/manifests/default.json",
 "plugins": [{"path": "libkiln_fusion_decl.so"},
             {"path": "libkiln_fusion_decl.so", "config": {"fusions": []}}]}
EOF
check config_twice 1 '$.plugins[1].config: plugin kiln.fusion.declarative is already loaded' -- \
    "$kiln" manifest check "$tmp/twice.json"
# no config: the plugin loads and registers nothing
cat >"$tmp/noconf.json" <<EOF
{"kiln_manifest": 1, "extends": "$src/manifests/default.json",
 "plugins": [{"path": "libkiln_fusion_decl.so", "provides": {"passes": []}}]}
EOF
check no_config 0 "" -- "$kiln" manifest check "$tmp/noconf.json"

echo "fusion_decl: $pass passed, $fail failed"
[ "$fail" = 0 ]
