#!/usr/bin/env bash
# layout.sh - the aicore engine's format selection (docs/engines.md,
# "Channels-last regions") and its affine fusions (ConvAffineFusionPass,
# PostActivationScaleFusionPass).
#
# chain: x -> Conv -> Relu -> Add(per-channel Const) -> {depthwise Conv, 1x1
# Conv} -> Concat(axis 1) -> GlobalAveragePool, Mul -> Resize(nearest x2) and
# Sigmoid(1x1 Conv).  After `kiln compile` every Conv carries data_format NHWC,
# GlobalAveragePool is a ReduceMean over axes 1 and 2, the Concat's axis is 3,
# and exactly three TransData nodes remain (x in; the Resize and Sigmoid
# results out); `kiln run` gives the outputs of aicore.layout=nchw and of
# aicore.conv_backend=blas (no TransData at all) within 1e-5 relative; a bad
# aicore.layout value is an error.
# affine: Conv -> Mul(scalar) -> Add(per-channel) -> HardSwish -> Mul(scalar) ->
# Add(scalar) -> Relu compiles to Conv + Relu (W and B scaled, the activation
# and the post affine fused), with the outputs of the passes switched off.
# convt: a grouped ConvTranspose -> Add(per-channel) -> Mul(scalar) -> Relu
# becomes one channels-last ConvTranspose and the Relu (the model's output keeps
# its node), with the unfused, NCHW and BLAS outputs.
# nofire: a Mul of two computed tensors after a Conv is not absorbed.
# pools: MaxPool (pads, ceil_mode) and AveragePool (count_include_pad 0 and 1)
# between Convs are channels-last (oneDNN pooling; the loops over transposed
# copies for count_include_pad 1), outputs equal to the NCHW and BLAS runs.
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
tmp=$(mktemp -d); [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; [ -n "${KEEP:-}" ] && echo "tmp $tmp"
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

python3 - "$tmp" <<'PY'
import json, struct, sys, random
d = sys.argv[1]
random.seed(11)
def const(name, dims, vals=None, dtype="float32"):
    n = 1
    for x in dims: n *= x
    vals = vals if vals is not None else [round(random.uniform(-1, 1), 3) for _ in range(n)]
    return {"name": name, "type": "Const", "outputs": [{"dtype": dtype, "shape": dims}],
            "attrs": {"value": {"type": "tensor", "value": {"dtype": dtype, "shape": dims, "data": vals}}}}
def data(name, idx, dims):
    return {"name": name, "type": "Data", "attrs": {"index": idx}, "outputs": [{"dtype": "float32", "shape": dims}]}
def node(name, op, ins, attrs=None):
    n = {"name": name, "type": op, "inputs": [i if ":" in i else i + ":0" for i in ins],
         "outputs": [{"dtype": "float32"}]}
    if attrs: n["attrs"] = attrs
    return n
def ints(v): return {"type": "list_int", "value": v}
chain = [
    data("x", 0, [1, 8, 12, 12]),
    const("w1", [16, 8, 3, 3]), const("b1", [16]),
    node("c1", "Conv", ["x", "w1", "b1"], {"pads": [1, 1, 1, 1]}),
    node("r1", "Relu", ["c1"]),
    const("cb", [1, 16, 1, 1]), node("a1", "Add", ["r1", "cb"]),
    const("wdw", [16, 1, 3, 3]),
    node("c2", "Conv", ["a1", "wdw"], {"pads": [1, 1, 1, 1], "group": 16}),
    const("w3", [8, 16, 1, 1]), const("b3", [8]),
    node("c3", "Conv", ["a1", "w3", "b3"]),
    node("cat", "Concat", ["c2", "c3"], {"axis": 1}),
    node("gap", "GlobalAveragePool", ["cat"]),
    node("m", "Mul", ["cat", "gap"]),
    const("roi", [0], []), const("scales", [4], [1.0, 1.0, 2.0, 2.0]),
    node("rz", "Resize", ["m", "roi", "scales"], {"mode": "nearest"}),
    const("w4", [4, 8, 1, 1]),
    node("c4", "Conv", ["c3", "w4"]),
    node("sg", "Sigmoid", ["c4"]),
    {"name": "out", "type": "NetOutput", "inputs": ["rz:0", "sg:0"]},
]
affine = [
    data("x", 0, [1, 4, 10, 10]),
    const("w", [8, 4, 3, 3]), const("b", [8]),
    node("conv", "Conv", ["x", "w", "b"], {"pads": [1, 1, 1, 1]}),
    const("s1", [], [1.25]), node("mul1", "Mul", ["s1", "conv"]),
    const("c1", [1, 8, 1, 1]), node("add1", "Add", ["mul1", "c1"]),
    node("hs", "HardSwish", ["add1"]),
    const("s2", [1], [0.7]), node("mul2", "Mul", ["hs", "s2"]),
    const("c2", [], [0.1]), node("add2", "Add", ["mul2", "c2"]),
    node("r", "Relu", ["add2"]),
    {"name": "out", "type": "NetOutput", "inputs": ["r:0"]},
]
nofire = [
    data("x", 0, [1, 4, 6, 6]),
    const("w", [4, 4, 1, 1]),
    node("conv", "Conv", ["x", "w"]),
    node("sq", "Mul", ["conv", "x"]),
    node("r", "Relu", ["sq"]),
    {"name": "out", "type": "NetOutput", "inputs": ["r:0"]},
]
pools = [
    data("x", 0, [1, 8, 13, 11]),
    const("w1", [16, 8, 1, 1]),
    node("c1", "Conv", ["x", "w1"]),
    node("mp", "MaxPool", ["c1"], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    node("ap", "AveragePool", ["mp"], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    const("w2", [16, 16, 3, 3]),
    node("c2", "Conv", ["ap", "w2"], {"pads": [1, 1, 1, 1]}),
    # count_include_pad 1: oneDNN declines it; the loops run on transposed copies
    node("api", "AveragePool", ["c2"], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    {"name": "out", "type": "NetOutput", "inputs": ["api:0"]},
]
convt = [
    data("x", 0, [1, 6, 5, 5]),
    const("w", [6, 2, 3, 3]),  # group 2: M = 4
    node("ct", "ConvTranspose", ["x", "w"], {"strides": [2, 2], "group": 2}),
    const("b", [1, 4, 1, 1]), node("addb", "Add", ["ct", "b"]),
    const("s", [], [0.5]), node("mul", "Mul", ["addb", "s"]),
    node("r", "Relu", ["mul"]),
    {"name": "out", "type": "NetOutput", "inputs": ["r:0"]},
]
for name, nodes in (("chain", chain), ("affine", affine), ("nofire", nofire), ("pools", pools), ("convt", convt)):
    json.dump({"kiln_graph": 1, "name": name, "nodes": nodes}, open("%s/%s.json" % (d, name), "w"))
    dims = nodes[0]["outputs"][0]["shape"]; cnt = 1
    for x in dims: cnt *= x
    f = "%s/%s_x.bin" % (d, name)
    open(f, "wb").write(struct.pack("<%df" % cnt, *[random.uniform(-2, 2) for _ in range(cnt)]))
    json.dump({"dims": dims, "dtype": "float32"}, open(f + ".json", "w"))
PY

. "$src/tests/common/outputs.sh"  # same_outputs DIR_A DIR_B [ATOL RTOL]

# every node of the compiled graph, subgraphs included: "name type attrs-json"
nodes_of() {
    python3 - "$1" <<'PY'
import json, sys
def walk(g):
    for n in g.get("nodes", []):
        yield n
        sg = n.get("subgraphs") or {}
        for s in (sg.values() if isinstance(sg, dict) else sg):
            yield from walk(s)
for n in walk(json.load(open(sys.argv[1]))):
    print(n["name"], n["type"], json.dumps(n.get("attrs", {}), sort_keys=True))
PY
}

# ---- chain: the channels-last region ----
in=(--input "x=$tmp/chain_x.bin")
if "$kiln" compile "$tmp/chain.json" -o "$tmp/chain.out.json" 2>"$tmp/err"; then
    nodes_of "$tmp/chain.out.json" >"$tmp/chain.nodes"
    td=$(grep -c ' TransData ' "$tmp/chain.nodes")
    [ "$td" = 3 ] && ok || bad "chain: $td TransData nodes, want 3: $(grep ' TransData ' "$tmp/chain.nodes")"
    convs=$(grep -c ' Conv ' "$tmp/chain.nodes"); nhwc=$(grep ' Conv ' "$tmp/chain.nodes" | grep -c '"data_format": "NHWC"')
    [ "$convs" = 4 ] && [ "$nhwc" = 4 ] && ok || bad "chain: $nhwc of $convs Convs channels-last, want 4 of 4"
    grep -q '^gap ReduceMean .*"axes": \[1, 2\]' "$tmp/chain.nodes" && ok || bad "chain: GlobalAveragePool is not a ReduceMean over axes 1, 2"
    grep -q '^cat Concat .*"axis": 3' "$tmp/chain.nodes" && ok || bad "chain: the Concat's axis is not 3"
else
    bad "chain: compile: $(cat "$tmp/err")"
fi
if "$kiln" run "$tmp/chain.json" "${in[@]}" --output-dir "$tmp/nhwc" 2>"$tmp/err" &&
   "$kiln" run "$tmp/chain.json" "${in[@]}" --option aicore.layout=nchw --output-dir "$tmp/nchw" 2>>"$tmp/err" &&
   "$kiln" run "$tmp/chain.json" "${in[@]}" --option aicore.conv_backend=blas --output-dir "$tmp/blas" 2>>"$tmp/err"; then
    same_outputs "$tmp/nhwc" "$tmp/nchw" 1e-5 1e-5 && ok || bad "chain: NHWC and NCHW outputs differ"
    same_outputs "$tmp/nhwc" "$tmp/blas" 1e-4 1e-4 && ok || bad "chain: NHWC and BLAS outputs differ"
else
    bad "chain: run: $(cat "$tmp/err")"
fi
for opt in aicore.layout=nchw aicore.conv_backend=blas; do
    "$kiln" compile "$tmp/chain.json" -o "$tmp/off.json" --option "$opt" 2>"$tmp/err" &&
    ! nodes_of "$tmp/off.json" | grep -q -e ' TransData ' -e NHWC && ok || bad "$opt: TransData or NHWC left: $(cat "$tmp/err")"
done
if "$kiln" compile "$tmp/chain.json" -o "$tmp/bad.json" --option aicore.layout=nc1hwc0 2>"$tmp/err"; then
    bad "aicore.layout=nc1hwc0 was accepted"
else
    grep -q "aicore.layout=nc1hwc0: expected nhwc or nchw" "$tmp/err" && ok || bad "bad aicore.layout: $(cat "$tmp/err")"
    [ ! -e "$tmp/bad.json" ] && ok || bad "bad aicore.layout left an output file"
fi

# ---- pools: channels-last MaxPool / AveragePool ----
in=(--input "x=$tmp/pools_x.bin")
if "$kiln" compile "$tmp/pools.json" -o "$tmp/pools.out.json" 2>"$tmp/err"; then
    nodes_of "$tmp/pools.out.json" >"$tmp/pools.nodes"
    np=$(grep -E ' (MaxPool|AveragePool) ' "$tmp/pools.nodes" | grep -c '"data_format": "NHWC"')
    td=$(grep -c ' TransData ' "$tmp/pools.nodes")
    [ "$np" = 3 ] && [ "$td" = 2 ] && ok || bad "pools: $np channels-last pools (want 3), $td TransData (want 2)"
else
    bad "pools: compile: $(cat "$tmp/err")"
fi
if "$kiln" run "$tmp/pools.json" "${in[@]}" --output-dir "$tmp/p_nhwc" 2>"$tmp/err" &&
   "$kiln" run "$tmp/pools.json" "${in[@]}" --option aicore.layout=nchw --output-dir "$tmp/p_nchw" 2>>"$tmp/err" &&
   "$kiln" run "$tmp/pools.json" "${in[@]}" --option aicore.conv_backend=blas --output-dir "$tmp/p_blas" 2>>"$tmp/err"; then
    same_outputs "$tmp/p_nhwc" "$tmp/p_nchw" 1e-5 1e-5 && ok || bad "pools: NHWC and NCHW outputs differ"
    same_outputs "$tmp/p_nhwc" "$tmp/p_blas" 1e-4 1e-4 && ok || bad "pools: NHWC and BLAS outputs differ"
else
    bad "pools: run: $(cat "$tmp/err")"
fi

# ---- affine: ConvAffineFusionPass + PostActivationFusionPass + PostActivationScaleFusionPass ----
in=(--input "x=$tmp/affine_x.bin")
off="ge.optimizationSwitch=ConvAffineFusionPass:off;PostActivationScaleFusionPass:off;PostActivationFusionPass:off"
if "$kiln" compile "$tmp/affine.json" -o "$tmp/affine.out.json" 2>"$tmp/err"; then
    nodes_of "$tmp/affine.out.json" >"$tmp/affine.nodes"
    left=$(grep -c -E ' (Mul|Add|HardSwish) ' "$tmp/affine.nodes")
    [ "$left" = 0 ] && ok || bad "affine: $left Mul/Add/HardSwish nodes left"
    grep -E '^conv Conv ' "$tmp/affine.nodes" | grep -q '"_kiln_fused_activation": "HardSwish"' &&
    grep -E '^conv Conv ' "$tmp/affine.nodes" | grep -q '"_kiln_fused_post_scale": 0.69999998' && ok ||
        bad "affine: the Conv lacks its fused activation and post scale: $(grep ' Conv ' "$tmp/affine.nodes")"
else
    bad "affine: compile: $(cat "$tmp/err")"
fi
if "$kiln" run "$tmp/affine.json" "${in[@]}" --output-dir "$tmp/af_on" 2>"$tmp/err" &&
   "$kiln" run "$tmp/affine.json" "${in[@]}" --option "$off" --output-dir "$tmp/af_off" 2>>"$tmp/err" &&
   "$kiln" run "$tmp/affine.json" "${in[@]}" --option aicore.conv_backend=blas --output-dir "$tmp/af_blas" 2>>"$tmp/err"; then
    same_outputs "$tmp/af_on" "$tmp/af_off" 1e-5 1e-5 && ok || bad "affine: fused and unfused outputs differ"
    same_outputs "$tmp/af_on" "$tmp/af_blas" 1e-5 1e-5 && ok || bad "affine: oneDNN and BLAS outputs differ"
else
    bad "affine: run: $(cat "$tmp/err")"
fi
"$kiln" compile "$tmp/affine.json" -o "$tmp/sel.json" --option aicore.fusion=conv_affine 2>"$tmp/err" &&
nodes_of "$tmp/sel.json" | grep '^conv Conv ' | grep -q '"_datadump_origin_op_names": \["conv", "mul1", "add1"\]' &&
! nodes_of "$tmp/sel.json" | grep '^conv Conv ' | grep -q _kiln_fused_activation && ok ||
    bad "aicore.fusion=conv_affine: $(cat "$tmp/err")"

# ---- convt: ConvAffineFusionPass on a grouped ConvTranspose ----
in=(--input "x=$tmp/convt_x.bin")
if "$kiln" compile "$tmp/convt.json" -o "$tmp/convt.out.json" 2>"$tmp/err"; then
    left=$(nodes_of "$tmp/convt.out.json" | grep -c -E ' (Mul|Add|KilnFusedElementwise) ')
    [ "$left" = 0 ] && ok || bad "convt: $left element-wise nodes left after the ConvTranspose"
else
    bad "convt: compile: $(cat "$tmp/err")"
fi
if "$kiln" run "$tmp/convt.json" "${in[@]}" --output-dir "$tmp/ct_on" 2>"$tmp/err" &&
   "$kiln" run "$tmp/convt.json" "${in[@]}" --option "$off" --output-dir "$tmp/ct_off" 2>>"$tmp/err"; then
    same_outputs "$tmp/ct_on" "$tmp/ct_off" 1e-5 1e-5 && ok || bad "convt: fused and unfused outputs differ"
    nodes_of "$tmp/convt.out.json" | grep '^ct ConvTranspose ' | grep -q '"data_format": "NHWC"' && ok ||
        bad "convt: the ConvTranspose is not channels-last"
    "$kiln" run "$tmp/convt.json" "${in[@]}" --option aicore.layout=nchw --output-dir "$tmp/ct_nchw" 2>"$tmp/err" &&
    "$kiln" run "$tmp/convt.json" "${in[@]}" --option aicore.conv_backend=blas --output-dir "$tmp/ct_blas" 2>>"$tmp/err" &&
    same_outputs "$tmp/ct_on" "$tmp/ct_nchw" 1e-5 1e-5 && same_outputs "$tmp/ct_on" "$tmp/ct_blas" 1e-4 1e-4 &&
        ok || bad "convt: NHWC, NCHW and BLAS outputs differ: $(cat "$tmp/err")"
else
    bad "convt: run: $(cat "$tmp/err")"
fi

# ---- nofire ----
if "$kiln" compile "$tmp/nofire.json" -o "$tmp/nofire.out.json" 2>"$tmp/err"; then
    # the vector engine may fuse it with the Relu; the Conv must not absorb it
    nodes_of "$tmp/nofire.out.json" | grep '^conv Conv ' | grep -q -e '"sq"' -e _kiln_fused_ &&
        bad "nofire: the Conv absorbed the Mul of two computed tensors" || ok
else
    bad "nofire: compile: $(cat "$tmp/err")"
fi
echo "layout: $pass passed, $fail failed"
[ $fail -eq 0 ]
