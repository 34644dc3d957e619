#!/usr/bin/env bash
# more_fusions.sh - the aicore engine's MatMul fusions (docs/engines.md,
# "aicore fusions"): MatMulScaleFusionPass and MatMulTransposeFusionPass make
# FusedMatMul; and the vector engine's QuickGeluFusionPass (x * Sigmoid(1.702
# x) -> QuickGelu).  For each small graph: the fused node count after `kiln
# compile`, and `kiln run` of the default pipeline against the same graph with
# the passes switched off (ge.optimizationSwitch), outputs equal within 1e-5
# relative (sgemm applies alpha and the transposes itself: the last bits may
# differ).  The must-not-fire cases keep their MatMul.
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
off="ge.optimizationSwitch=MatMulScaleFusionPass:off;MatMulTransposeFusionPass:off;QuickGeluFusionPass:off"

python3 - "$tmp" <<'PY'
import json, struct, sys, random
d = sys.argv[1]
random.seed(7)
def const(name, dims, vals=None):
    n = 1
    for x in dims: n *= x
    vals = vals if vals is not None else [round(random.uniform(-1, 1), 3) for _ in range(n)]
    return {"name": name, "type": "Const", "outputs": [{"dtype": "float32", "shape": dims}],
            "attrs": {"value": {"type": "tensor", "value": {"dtype": "float32", "shape": dims, "data": vals}}}}
def data(name, idx, dims):
    return {"name": name, "type": "Data", "attrs": {"index": idx}, "outputs": [{"dtype": "float32", "shape": dims}]}
def node(name, op, ins, attrs=None):
    n = {"name": name, "type": op, "inputs": [i + ":0" for i in ins], "outputs": [{"dtype": "float32"}]}
    if attrs: n["attrs"] = attrs
    return n
def relu_out(src):  # a Relu after the fusion keeps the fused node off the NetOutput
    return [node("r", "Relu", [src]), {"name": "out", "type": "NetOutput", "inputs": ["r:0"]}]
Q, K = [2, 3, 4, 8], [2, 3, 5, 8]   # q [b,h,m,k], k [b,h,n,k]
cases = {
  # Q K^T * s: transpose of B, then a scale after
  "attn_post": [data("q", 0, Q), data("k", 1, K), const("s", [], [0.125]),
                node("kt", "Transpose", ["k"], {"perm": [0, 1, 3, 2]}),
                node("mm", "MatMul", ["q", "kt"]), node("mul", "Mul", ["s", "mm"])] + relu_out("mul"),
  # (Q s) K^T: a scale before input 0
  "attn_pre": [data("q", 0, Q), data("k", 1, K), const("s", [], [0.35]),
               node("qs", "Mul", ["q", "s"]),
               node("kt", "Transpose", ["k"], {"perm": [0, 1, 3, 2]}),
               node("mm", "MatMul", ["qs", "kt"])] + relu_out("mm"),
  # Div after, transpose of A
  "div_ta": [data("a", 0, [2, 8, 4]), data("b", 1, [2, 8, 6]), const("s", [1], [4.0]),
             node("at", "Transpose", ["a"], {"perm": [0, 2, 1]}),
             node("mm", "MatMul", ["at", "b"]), node("div", "Div", ["mm", "s"])] + relu_out("div"),
  # not: a perm that is not the last-two swap, a non-scalar Mul, a Transpose read twice
  "nofire": [data("a", 0, [2, 4, 3, 8]), data("b", 1, [2, 3, 8, 5]), const("v", [5]),
             node("at", "Transpose", ["a"], {"perm": [0, 2, 1, 3]}),
             node("mm", "MatMul", ["at", "b"]), node("mul", "Mul", ["mm", "v"]),
             data("c", 2, [4, 6]), data("e", 3, [5, 6]),
             node("et", "Transpose", ["e"], {"perm": [1, 0]}),
             node("mm2", "MatMul", ["c", "et"]), node("n2", "Neg", ["et"]),
             node("r", "Relu", ["mul"]), node("r2", "Relu", ["mm2"]),
             {"name": "out", "type": "NetOutput", "inputs": ["r:0", "r2:0", "n2:0"]}],
}
cases["qgelu"] = [data("x", 0, [3, 16]), const("a", [], [1.702]),
                  node("xa", "Mul", ["a", "x"]), node("sg", "Sigmoid", ["xa"]),
                  node("y", "Mul", ["sg", "x"])] + relu_out("y")
want = {"attn_post": "FusedMatMul 1", "attn_pre": "FusedMatMul 1", "div_ta": "FusedMatMul 1",
        "nofire": "FusedMatMul 0", "qgelu": "QuickGelu 1"}
for name, nodes in cases.items():
    json.dump({"kiln_graph": 1, "name": name, "nodes": nodes}, open("%s/%s.json" % (d, name), "w"))
    args = []
    for n in nodes:
        if n["type"] == "Data":
            dims = n["outputs"][0]["shape"]; cnt = 1
            for x in dims: cnt *= x
            f = "%s/%s_%s.bin" % (d, name, n["name"])
            open(f, "wb").write(struct.pack("<%df" % cnt, *[random.uniform(-2, 2) for _ in range(cnt)]))
            json.dump({"dims": dims, "dtype": "float32"}, open(f + ".json", "w"))
            args.append("--input %s=%s" % (n["name"], f))
    open("%s/%s.args" % (d, name), "w").write(" ".join(args) + "\n%s\n" % want[name])
PY

. "$src/tests/common/outputs.sh"  # same_outputs DIR_A DIR_B [ATOL RTOL]

for g in attn_post attn_pre div_ta nofire qgelu; do
    args=$(sed -n 1p "$tmp/$g.args"); read -r wtype want <<<"$(sed -n 2p "$tmp/$g.args")"
    if ! "$kiln" compile "$tmp/$g.json" -o "$tmp/$g.out.json" 2>"$tmp/err"; then
        bad "$g: compile: $(cat "$tmp/err")"; continue
    fi
    got=$(python3 -c 'import json,sys; print(sum(n["type"] == sys.argv[2] for n in json.load(open(sys.argv[1]))["nodes"]))' "$tmp/$g.out.json" "$wtype")
    [ "$got" = "$want" ] && ok || bad "$g: $got $wtype nodes, want $want"
    # shellcheck disable=SC2086
    if "$kiln" run "$tmp/$g.json" $args --output-dir "$tmp/$g.fused" 2>"$tmp/err" &&
       "$kiln" run "$tmp/$g.json" $args --option "$off" --output-dir "$tmp/$g.plain" 2>>"$tmp/err"; then
        same_outputs "$tmp/$g.fused" "$tmp/$g.plain" 1e-6 1e-5 && ok || bad "$g: fused and unfused outputs differ"
    else
        bad "$g: run: $(cat "$tmp/err")"
    fi
done
# the switches: aicore.fusion leaves them out by name
"$kiln" compile "$tmp/attn_post.json" -o "$tmp/sel.json" --option aicore.fusion=matmul_scale 2>"$tmp/err" &&
python3 - "$tmp/sel.json" <<'PY' && ok || bad "aicore.fusion=matmul_scale: $(cat "$tmp/err")"
import json, sys
g = json.load(open(sys.argv[1]))
ops = [n["type"] for n in g["nodes"]]
assert ops.count("FusedMatMul") == 1 and "Transpose" in ops, ops  # the scale only
PY
echo "more_fusions: $pass passed, $fail failed"
[ $fail -eq 0 ]
