#!/usr/bin/env bash
# fx_models.sh - the engines' built-in fusion passes on small graphs
# (docs/engines.md "Built-in fusion passes"; tests/data/fx_models/gen_graphs.py):
#   1. the HardSwish, LayerNormalization, Erf and Gelu kernels against a Python
#      reference; HardSwish inside a vector chain (same bytes as unfused);
#   2. hswish.json: Conv + BatchNormalization + spelled-out HardSwish becomes one
#      Conv applying HardSwish (ConvBatchNormFusionPass, HardSwishFusionPass,
#      PostActivationFusionPass); the Mul-by-1/6 form with attribute Clip bounds
#      and swapped operands becomes a HardSwish node; Add(3.5) and a Clip read
#      twice are left alone;
#   3. layernorm.json: the last-axis LayerNorm becomes LayerNormalization; one
#      over axis 1 and one feeding the NetOutput are left alone;
#   3b. gelu.json: both GELU forms become Gelu, Mul(0.6) is left alone;
#   4. fused against unfused outputs (ge.optimizationSwitch NAME:off, and one
#      pass at a time) agree on both graphs.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
python3 "$src/tests/data/fx_models/gen_graphs.py" "$tmp" || { echo "FAIL gen_graphs.py"; exit 1; }
passes="ConvBatchNormFusionPass GeluFusionPass HardSwishFusionPass LayerNormFusionPass MatMulBiasAddFusionPass PostActivationFusionPass"
all_off=""
for p in $passes; do all_off="$all_off${all_off:+;}$p:off"; done

# raw float32 input FILE with shape DIMS (comma list), deterministic values in [-4, 4]
mkin() {
    python3 - "$1" "$2" <<'PY'
import json, math, struct, sys
dims = [int(d) for d in sys.argv[2].split(",")]
n = 1
for d in dims: n *= d
vals = [math.sin(0.7 * i + 0.3) * 4.0 for i in range(n)]
open(sys.argv[1], "wb").write(struct.pack("<%df" % n, *vals))
json.dump({"dims": dims, "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
}
. "$src/tests/common/outputs.sh"  # same_outputs DIR_A DIR_B
# ops GRAPH.json: "TYPE count" lines of the compiled graph, and NAME lines
ops() {
    python3 - "$1" <<'PY'
import collections, json, sys
g = json.load(open(sys.argv[1]))
for t, c in sorted(collections.Counter(n["type"] for n in g["nodes"]).items()):
    print("type %s %d" % (t, c))
for n in g["nodes"]:
    print("node %s %s %s" % (n["name"], n["type"], n.get("attrs", {}).get("_kiln_fused_activation", "")))
PY
}
want() { # name fixed-string file
    if grep -qxF -- "$2" "$3"; then ok; else bad "$1: no line '$2' in $3:"; cat "$3"; fi
}
wantnot() {
    if grep -q -- "$2" "$3"; then bad "$1: a line matches '$2' in $3:"; cat "$3"; else ok; fi
}
mkin "$tmp/x234.bin" 2,3,4
mkin "$tmp/x1355.bin" 1,3,5,5
mkin "$tmp/x258.bin" 2,5,8

# ---- 1. kernels ---------------------------------------------------------------
if "$kiln" run "$tmp/kernels.json" --input "$tmp/x234.bin" --output-dir "$tmp/k" >/dev/null 2>"$tmp/err.txt"; then
    if python3 - "$tmp/x234.bin" "$tmp/k" <<'PY'; then ok; else bad "kernels: outputs differ from the reference"; fi
import math, struct, sys
raw = open(sys.argv[1], "rb").read()
x = struct.unpack("<%df" % (len(raw) // 4), raw)
def rd(p):
    r = open(p, "rb").read(); return struct.unpack("<%df" % (len(r) // 4), r)
hs, ln = rd(sys.argv[2] + "/output.0.bin"), rd(sys.argv[2] + "/output.1.bin")
ref_hs = [v * min(max(v + 3.0, 0.0), 6.0) / 6.0 for v in x]
gamma, beta = [1.0, 0.5, -1.0, 2.0], [0.0, 0.25, -0.5, 1.0]
ref_ln = []
for r in range(6):
    row = x[r * 4:(r + 1) * 4]
    m = sum(row) / 4
    var = sum((v - m) ** 2 for v in row) / 4
    ref_ln += [(v - m) / math.sqrt(var + 1e-3) * gamma[k] + beta[k] for k, v in enumerate(row)]
erf = rd(sys.argv[2] + "/output.2.bin")
ge, gt = rd(sys.argv[2] + "/output.3.bin"), rd(sys.argv[2] + "/output.4.bin")
ref_erf = [math.erf(v) for v in x]
ref_ge = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
ref_gt = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x]
for got, ref in ((hs, ref_hs), (ln, ref_ln), (erf, ref_erf), (ge, ref_ge), (gt, ref_gt)):
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert abs(a - b) <= 1e-5 + 1e-5 * abs(b), (a, b)
PY
else
    bad "kernels.json: run failed:"; cat "$tmp/err.txt"
fi

# HardSwish inside a vector chain: one KilnFusedElementwise, the same bytes as unfused
if "$kiln" compile "$tmp/vchain.json" -o "$tmp/vc.json" 2>"$tmp/err.txt"; then
    ops "$tmp/vc.json" >"$tmp/vc.txt"
    want "vchain: one fused node" "type KilnFusedElementwise 1" "$tmp/vc.txt"
    wantnot "vchain: no HardSwish left" "^type HardSwish" "$tmp/vc.txt"
else
    bad "vchain.json: compile failed:"; cat "$tmp/err.txt"
fi
rm -rf "$tmp/va" "$tmp/vb"
if "$kiln" run "$tmp/vchain.json" --input "$tmp/x234.bin" --output-dir "$tmp/va" >/dev/null 2>"$tmp/err.txt" &&
   "$kiln" run "$tmp/vchain.json" --input "$tmp/x234.bin" --output-dir "$tmp/vb" --option vector.fusion=off >/dev/null 2>>"$tmp/err.txt"; then
    if cmp -s "$tmp/va/output.0.bin" "$tmp/vb/output.0.bin"; then ok; else bad "vchain: fused and unfused bytes differ"; fi
else
    bad "vchain.json: run failed:"; cat "$tmp/err.txt"
fi

# ---- 2./3. the graphs the passes rewrite (vector chain fusion off: ops stay visible) ----
if "$kiln" compile "$tmp/hswish.json" -o "$tmp/h.json" --option vector.fusion=off --stats 2>"$tmp/err.txt"; then
    ops "$tmp/h.json" >"$tmp/h.txt"
    wantnot "hswish: BatchNormalization folded" "^type BatchNormalization" "$tmp/h.txt"
    want "hswish: one HardSwish node (hs_attr)" "type HardSwish 1" "$tmp/h.txt"
    want "hswish: two Div left (hs_bad3, hs_two)" "type Div 2" "$tmp/h.txt"
    want "hswish: the Conv applies HardSwish" "type Conv 1" "$tmp/h.txt"
    if grep -q "^node .* Conv HardSwish$" "$tmp/h.txt"; then ok; else bad "hswish: the Conv has no _kiln_fused_activation HardSwish"; cat "$tmp/h.txt"; fi
    want "hswish: Add(3.5) kept" "node hs_bad3_add Add " "$tmp/h.txt"
    want "hswish: Clip read twice kept" "node hs_two_clip Clip " "$tmp/h.txt"
else
    bad "hswish.json: compile failed:"; cat "$tmp/err.txt"
fi
if "$kiln" compile "$tmp/layernorm.json" -o "$tmp/l.json" --option vector.fusion=off 2>"$tmp/err.txt"; then
    ops "$tmp/l.json" >"$tmp/l.txt"
    want "layernorm: one LayerNormalization" "type LayerNormalization 1" "$tmp/l.txt"
    want "layernorm: axis 1 kept" "node ln_axis1_sqrt Sqrt " "$tmp/l.txt"
    want "layernorm: the NetOutput's producer kept" "node ln_out_add Add " "$tmp/l.txt"
    wantnot "layernorm: ln's nodes gone" "^node ln_sqrt " "$tmp/l.txt"
else
    bad "layernorm.json: compile failed:"; cat "$tmp/err.txt"
fi
if "$kiln" compile "$tmp/gelu.json" -o "$tmp/ge.json" --option vector.fusion=off 2>"$tmp/err.txt"; then
    ops "$tmp/ge.json" >"$tmp/ge.txt"
    want "gelu: two Gelu nodes" "type Gelu 2" "$tmp/ge.txt"
    want "gelu: Mul(0.6) kept" "node gelu_bad_erf Erf " "$tmp/ge.txt"
    want "gelu: one Erf left" "type Erf 1" "$tmp/ge.txt"
else
    bad "gelu.json: compile failed:"; cat "$tmp/err.txt"
fi
# one pass off: its fusion does not happen
if "$kiln" compile "$tmp/layernorm.json" -o "$tmp/l2.json" --option "ge.optimizationSwitch=LayerNormFusionPass:off" 2>"$tmp/err.txt"; then
    ops "$tmp/l2.json" >"$tmp/l2.txt"
    wantnot "LayerNormFusionPass:off" "^type LayerNormalization" "$tmp/l2.txt"
else
    bad "layernorm.json with LayerNormFusionPass:off: compile failed:"; cat "$tmp/err.txt"
fi

# ---- 4. fused against unfused ----------------------------------------------------
run_cmp() { # label graph input option...
    local label=$1 graph=$2 input=$3; shift 3
    rm -rf "$tmp/a" "$tmp/b"
    if "$kiln" run "$graph" --input "$input" --output-dir "$tmp/a" >/dev/null 2>"$tmp/err.txt" &&
       "$kiln" run "$graph" --input "$input" --output-dir "$tmp/b" "$@" >/dev/null 2>>"$tmp/err.txt"; then
        if same_outputs "$tmp/a" "$tmp/b"; then ok; else bad "$label: fused and unfused outputs differ"; fi
    else
        bad "$label: run failed:"; cat "$tmp/err.txt"
    fi
}
run_cmp "hswish all off" "$tmp/hswish.json" "$tmp/x1355.bin" --option "ge.optimizationSwitch=$all_off"
run_cmp "gelu all off" "$tmp/gelu.json" "$tmp/x234.bin" --option "ge.optimizationSwitch=$all_off"
run_cmp "layernorm all off" "$tmp/layernorm.json" "$tmp/x258.bin" --option "ge.optimizationSwitch=$all_off"
for p in ConvBatchNormFusionPass HardSwishFusionPass PostActivationFusionPass; do
    run_cmp "hswish $p off" "$tmp/hswish.json" "$tmp/x1355.bin" --option "ge.optimizationSwitch=$p:off"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
