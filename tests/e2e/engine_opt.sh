#!/usr/bin/env bash
# engine_opt.sh - the aicore engine's fusion passes (ConvBatchNormFusionPass,
# MatMulBiasAddFusionPass, PostActivationFusionPass, run by
# RunBuiltinFusionPasses; plugins/engines/aicore/nn_fusion.c, docs/engines.md
# "aicore fusions"):
#   1. fuse.json: each fusion applies (Conv and ConvTranspose +
#      BatchNormalization, MatMul+Add ->
#      Gemm, Conv/Gemm + Relu, LeakyRelu, Clip, HardSigmoid, HardSwish,
#      Sigmoid, x*Sigmoid(x)); the -v explanations, --stats counters, the
#      _kiln_fused_* attributes, the Add feeding the NetOutput kept;
#   2. fused vs unfused (session option aicore.fusion=off) outputs agree on
#      fuse_relu.json; HardSwish fused matches a Python reference;
#   3. block.json: every blocking condition keeps its node (and the outputs
#      equal the unfused run's);
#   4. aicore.fusion=conv_bn selects one fusion, ge.optimizationSwitch switches
#      a pass off by name; a bad value and a bad
#      _kiln_fused_activation attribute are clear errors;
#   5. aicore.conv_backend=blas marks the Convs and ConvTransposes and its outputs equal the
#      default (oneDNN, strict) run's; a bad value is a clear error.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
want_line() { # name fixed-string file
    if grep -qF -- "$2" "$3"; then ok; else bad "$1: no line with '$2' in $3:"; head -40 "$3"; fi
}
python3 "$src/tests/data/engine_opt/gen_graphs.py" "$tmp" || { echo "FAIL gen_graphs.py"; exit 1; }
# raw float32 input FILE with shape DIMS (comma list), deterministic values
mkin() {
    python3 - "$1" "$2" <<'PY'
import json, math, struct, sys
dims = [int(d) for d in sys.argv[2].split(",") if d] if sys.argv[2] else []
n = 1
for d in dims: n *= d
vals = [math.sin(0.7 * i + 0.3) * 2.0 for i in range(n)]
open(sys.argv[1], "wb").write(struct.pack("<%df" % n, *vals))
json.dump({"dims": dims, "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
}
. "$src/tests/common/outputs.sh"  # same_outputs DIR_A DIR_B

# ---- 1. every fusion applies ------------------------------------------------------
if "$kiln" compile "$tmp/fuse.json" -o "$tmp/f.json" -v --stats 2>"$tmp/err.txt"; then
    want_line "stat conv_bn" "stat: optimize_original: ConvBatchNormFusionPass: effected = 3" "$tmp/err.txt"
    want_line "stat matmul_bias" "stat: optimize_original: MatMulBiasAddFusionPass: effected = 1" "$tmp/err.txt"
    want_line "stat activations" "stat: optimize_original: PostActivationFusionPass: effected = 9" "$tmp/err.txt"
    want_line "explain bn1" "optimize_original: ConvBatchNormFusionPass: bn1: folded by engine aicore into Conv conv1 (conv_bn)" "$tmp/err.txt"
    want_line "explain swish" "PostActivationFusionPass: swish_m: fused by engine aicore into Conv conv7 as its activation Swish" "$tmp/err.txt"
    want_line "explain add1" "MatMulBiasAddFusionPass: add1: fused by engine aicore into MatMul mm1 as C (matmul_bias)" "$tmp/err.txt"
    python3 - "$tmp/f.json" <<'PY' && ok || bad "fuse.json: wrong compiled graph"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
gone = ["bn1", "bn2", "relu1", "leaky", "clip", "clip_lo", "clip_hi", "hsig", "hswish", "sig",
        "swish_s", "swish_m", "add1", "relu2", "bn_t", "relu_t", "convt_w", "conv1_w", "conv1_b", "conv2_w", "bn1_s", "bn2_var"]
for g in gone:
    assert g not in nodes, g
for k in ("add2", "gemm2", "conv1_bn_w", "conv1_bn_b", "conv2_bn_w", "conv2_bn_b", "add1_c"):
    assert k in nodes, k
assert nodes["conv1"]["inputs"][1:] == ["conv1_bn_w:0", "conv1_bn_b:0"], nodes["conv1"]["inputs"]
assert nodes["conv2"]["inputs"][1:] == ["conv2_bn_w:0", "conv2_bn_b:0"], nodes["conv2"]["inputs"]
assert nodes["convt"]["inputs"][1:] == ["convt_bn_w:0", "convt_bn_b:0"], nodes["convt"]["inputs"]
assert nodes["mm1"]["type"] == "Gemm" and nodes["mm1"]["inputs"] == ["flat:0", "mm1_b:0", "add1_c:0"]
want = {"conv1": ("Relu",), "conv2": ("LeakyRelu", 0.1), "conv3": ("Clip", 0.0, 0.25),
        "conv4": ("HardSigmoid", 0.3, 0.4), "conv5": ("HardSwish",), "conv6": ("Sigmoid",),
        "conv7": ("Swish",), "convt": ("Relu",), "mm1": ("Relu",)}
for name, w in want.items():
    a = nodes[name]["attrs"]
    assert a["_kiln_fused_activation"] == w[0], (name, a)
    if len(w) > 1:
        assert abs(a["_kiln_fused_alpha"] - w[1]) < 1e-6, (name, a)
    if len(w) > 2:
        assert abs(a["_kiln_fused_beta"] - w[2]) < 1e-6, (name, a)
assert "_kiln_fused_activation" not in nodes["gemm2"].get("attrs", {}), nodes["gemm2"]
PY
else
    bad "compile fuse.json failed: $(cat "$tmp/err.txt")"
fi

# ---- 2. fused vs unfused; HardSwish against Python ---------------------------------
mkin "$tmp/x.bin" 2,3,6,6
if "$kiln" run "$tmp/fuse_relu.json" --input x="$tmp/x.bin" --output-dir "$tmp/on" >/dev/null 2>"$tmp/err.txt" &&
   "$kiln" run "$tmp/fuse_relu.json" --option aicore.fusion=off --input x="$tmp/x.bin" \
       --output-dir "$tmp/off" >/dev/null 2>>"$tmp/err.txt"; then
    same_outputs "$tmp/on" "$tmp/off" && ok || bad "fuse_relu.json: fused and unfused outputs differ"
else
    bad "run fuse_relu.json failed: $(cat "$tmp/err.txt")"
fi
"$kiln" compile "$tmp/fuse_relu.json" --option aicore.fusion=off -o "$tmp/off.json" --stats 2>"$tmp/err.txt" ||
    bad "compile with aicore.fusion=off failed"
if grep -q "FusionPass: effected" "$tmp/err.txt"; then bad "aicore.fusion=off still fused"; else ok; fi
grep -qF '"name": "bn1"' "$tmp/off.json" && ok || bad "aicore.fusion=off: bn1 removed"
mkin "$tmp/h.bin" 1,1,2,3
if "$kiln" run "$tmp/hswish.json" --input x="$tmp/h.bin" --output-dir "$tmp/h" >/dev/null 2>"$tmp/err.txt"; then
    python3 - "$tmp/h.bin" "$tmp/h/output.0.bin" <<'PY' && ok || bad "fused HardSwish: wrong values"
import struct, sys
x = struct.unpack("<6f", open(sys.argv[1], "rb").read())
y = struct.unpack("<6f", open(sys.argv[2], "rb").read())
for xi, yi in zip(x, y):
    v = 0.5 * xi + 0.25
    want = v * max(0.0, min(1.0, v / 6 + 0.5))
    assert abs(yi - want) <= 1e-6 + 1e-6 * abs(want), (xi, yi, want)
PY
else
    bad "run hswish.json failed: $(cat "$tmp/err.txt")"
fi

# ---- 3. blocking conditions ----------------------------------------------------------
# (vector.fusion=off: the vector engine would fuse relu_two -> sum_two, which is not
# what this graph checks)
if "$kiln" compile "$tmp/block.json" --option vector.fusion=off -o "$tmp/b.json" --stats 2>"$tmp/err.txt"; then
    if grep -q "FusionPass: effected" "$tmp/err.txt"; then bad "block.json: something fused: $(grep effected "$tmp/err.txt")"; else ok; fi
    python3 - "$tmp/b.json" <<'PY' && ok || bad "block.json: a blocked node was fused"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
for k in ("bn_keep", "bn_two", "relu_two", "bn_var", "relu_pin", "clip_var", "relu_out", "add_var",
          "bn_act"):
    assert k in nodes, k
for n in nodes.values():
    if n["name"] != "convH":
        assert "_kiln_fused_activation" not in n.get("attrs", {}), n["name"]
assert nodes["mm"]["type"] == "MatMul"
PY
    mkin "$tmp/bx.bin" 1,3,5,5; mkin "$tmp/bv.bin" 4; mkin "$tmp/bl.bin" ""; mkin "$tmp/bb.bin" 3
    python3 - "$tmp/bv.bin" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<4f", 0.5, 1.0, 1.5, 2.0))  # a valid variance
PY
    ins=(--input x="$tmp/bx.bin" --input var="$tmp/bv.bin" --input lo="$tmp/bl.bin" --input bias="$tmp/bb.bin")
    if "$kiln" run "$tmp/block.json" "${ins[@]}" --output-dir "$tmp/bon" >/dev/null 2>"$tmp/err.txt" &&
       "$kiln" run "$tmp/block.json" "${ins[@]}" --option aicore.fusion=off --output-dir "$tmp/boff" >/dev/null 2>>"$tmp/err.txt"; then
        same_outputs "$tmp/bon" "$tmp/boff" && ok || bad "block.json: outputs differ"
    else
        bad "run block.json failed: $(cat "$tmp/err.txt")"
    fi
else
    bad "compile block.json failed: $(cat "$tmp/err.txt")"
fi

# ---- 4. option values and bad attributes ------------------------------------------------
"$kiln" compile "$tmp/fuse.json" --option aicore.fusion=conv_bn -o "$tmp/s.json" --stats 2>"$tmp/err.txt" ||
    bad "compile aicore.fusion=conv_bn failed"
want_line "select conv_bn" "ConvBatchNormFusionPass: effected = 3" "$tmp/err.txt"
if grep -qE "(PostActivation|MatMulBiasAdd)FusionPass: effected" "$tmp/err.txt"; then bad "aicore.fusion=conv_bn ran other fusions"; else ok; fi
"$kiln" compile "$tmp/fuse.json" --option "ge.optimizationSwitch=PostActivationFusionPass:off" -o "$tmp/s.json" --stats 2>"$tmp/err.txt" ||
    bad "compile ge.optimizationSwitch=PostActivationFusionPass:off failed"
want_line "switch: conv_bn still runs" "ConvBatchNormFusionPass: effected = 3" "$tmp/err.txt"
if grep -qE "PostActivationFusionPass: (matched|effected)" "$tmp/err.txt"; then bad "PostActivationFusionPass:off still ran"; else ok; fi
"$kiln" compile "$tmp/fuse.json" --option aicore.fusion=conv_bn,fold -o "$tmp/s.json" 2>"$tmp/err.txt"
rc=$?
[ "$rc" != 0 ] && ok || bad "aicore.fusion=conv_bn,fold accepted"
want_line "bad option" "session option aicore.fusion=conv_bn,fold: unknown fusion 'fold'" "$tmp/err.txt"
python3 - "$tmp/hswish.json" "$tmp/tanh.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "conv":
        n["attrs"]["_kiln_fused_activation"] = "Tanh"
json.dump(g, open(sys.argv[2], "w"))
PY
"$kiln" run "$tmp/tanh.json" --input x="$tmp/h.bin" --output-dir "$tmp/t" >/dev/null 2>"$tmp/err.txt"
rc=$?
[ "$rc" != 0 ] && ok || bad "a Conv with _kiln_fused_activation Tanh ran"
want_line "bad attr" "_kiln_fused_activation 'Tanh' is not one of" "$tmp/err.txt"
grep -qF "conv" "$tmp/err.txt" && ok || bad "bad attr error does not name the node"

# ---- 5. Conv backends: aicore.conv_backend=blas against the default (oneDNN) -----------
# fuse.json's Convs with their fused activations, strict (a Conv oneDNN
# refuses is an error), against im2col + OpenBLAS; the option marks each Conv
if KILN_AICORE_ONEDNN_STRICT=1 "$kiln" run "$tmp/fuse_relu.json" --input x="$tmp/x.bin" \
       --output-dir "$tmp/dnnl" >/dev/null 2>"$tmp/err.txt" &&
   "$kiln" run "$tmp/fuse_relu.json" --option aicore.conv_backend=blas --input x="$tmp/x.bin" \
       --output-dir "$tmp/blas" >/dev/null 2>>"$tmp/err.txt"; then
    same_outputs "$tmp/dnnl" "$tmp/blas" && ok || bad "fuse_relu.json: oneDNN and BLAS outputs differ"
else
    bad "run fuse_relu.json with either conv backend failed: $(cat "$tmp/err.txt")"
fi
"$kiln" compile "$tmp/fuse.json" --option aicore.conv_backend=blas -o "$tmp/b.json" 2>"$tmp/err.txt" ||
    bad "compile aicore.conv_backend=blas failed: $(cat "$tmp/err.txt")"
python3 - "$tmp/b.json" <<'PY' && ok || bad "aicore.conv_backend=blas did not mark every Conv and ConvTranspose"
import json, sys
g = json.load(open(sys.argv[1]))
convs = [n for n in g["nodes"] if n["type"] in ("Conv", "ConvTranspose")]
assert any(n["type"] == "ConvTranspose" for n in convs), convs
assert convs and all(n.get("attrs", {}).get("_kiln_conv_backend") == "blas" for n in convs), convs
PY
"$kiln" compile "$tmp/fuse.json" --option aicore.conv_backend=mkl -o "$tmp/b.json" 2>"$tmp/err.txt"
rc=$?
[ "$rc" != 0 ] && ok || bad "aicore.conv_backend=mkl accepted"
want_line "bad backend" "session option aicore.conv_backend=mkl: expected onednn or blas" "$tmp/err.txt"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
