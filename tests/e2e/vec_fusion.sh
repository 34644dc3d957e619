#!/usr/bin/env bash
# vec_fusion.sh - the vector engine's element-wise chain fusion
# (optimize_subgraph, plugins/engines/vector/vec_fusion.c, docs/engines.md
# "vector fusion"):
#   1. chain.json: a 12-node chain (HardSwish written out and more) and a 4-node
#      chain become KilnFusedElementwise nodes; -v explanations, --stats counters
#      (HardSwishFusionPass switched off with $nohs: it would make the written-out
#      HardSwish one node first; tests/e2e/fx_models.sh checks that path);
#   2. fused vs unfused (vector.fusion=off) outputs are the same bytes, and match
#      a Python reference of the chain within 1e-6 relative;
#   3. block.json: the blocking conditions keep their nodes (a chain node read
#      as a Clip bound is no link), the fusible chains are fused, outputs equal
#      the unfused run's;
#   4. --threads 1 and 16 compile to the same bytes; a bad vector.fusion value
#      and a malformed fused_program are clear errors.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
want_line() { # name fixed-string file
    if grep -qF -- "$2" "$3"; then ok; else bad "$1: no line with '$2' in $3:"; head -40 "$3"; fi
}
python3 "$src/tests/data/vec_fusion/gen_graphs.py" "$tmp" || { echo "FAIL gen_graphs.py"; exit 1; }
# raw float32 input FILE with shape DIMS and phase SEED
mkin() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, math, struct, sys
dims = [int(d) for d in sys.argv[2].split(",") if d]
n = 1
for d in dims: n *= d
vals = [math.sin(0.7 * i + float(sys.argv[3])) * 4.0 for i in range(n)]
open(sys.argv[1], "wb").write(struct.pack("<%df" % n, *vals))
json.dump({"dims": dims, "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
}
same_bytes() { # name dir1 dir2
    local f n=0
    for f in "$2"/output.*.bin; do
        n=$((n+1))
        cmp -s "$f" "$3/$(basename "$f")" || { bad "$1: $(basename "$f") differs"; return; }
    done
    [ "$n" -gt 0 ] && ok || bad "$1: no outputs"
}
mkin "$tmp/x.bin" 2,3,4,5 0.3; mkin "$tmp/y.bin" 2,3,4,5 1.1; mkin "$tmp/r.bin" 5 0.5
mkin "$tmp/s.bin" "" -0.2

# ---- 1. the chains fuse ---------------------------------------------------------------
nohs=(--option "ge.optimizationSwitch=HardSwishFusionPass:off")
if "$kiln" compile "$tmp/chain.json" "${nohs[@]}" -o "$tmp/c.json" -v --stats 2>"$tmp/err.txt"; then
    want_line "stat chains" "chains_fused = 2" "$tmp/err.txt"
    want_line "stat ops" "ops_absorbed = 16" "$tmp/err.txt"
    want_line "explain min" "min: 12 element-wise nodes fused (Add -> Clip -> Mul -> Div -> Relu -> Sub -> LeakyRelu -> Max -> Sigmoid -> HardSigmoid -> Neg -> Min) into KilnFusedElementwise" "$tmp/err.txt"
    want_line "explain log" "log: 4 element-wise nodes fused (Mul -> Clip -> Sqrt -> Log)" "$tmp/err.txt"
    python3 - "$tmp/c.json" <<'PY' && ok || bad "chain.json: wrong compiled graph"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
for g in ("hs_add", "hs_clip", "hs_mul", "hs_div", "relu", "sub", "leaky", "max", "sig", "hsig",
          "neg", "sq", "clip6", "sqrt"):
    assert g not in nodes, g
m, l = nodes["min"], nodes["log"]
assert m["type"] == "KilnFusedElementwise" and l["type"] == "KilnFusedElementwise"
# x and y enter once each (y reaches the partition through two boundary nodes)
# c6b holds the same 6.0 as c6: ConstantFuseSamePass merged it into c6
assert m["inputs"] == ["x:0", "c3:0", "c0:0", "c6:0", "y:0", "cm:0"], m["inputs"]
assert l["inputs"] == ["y:0"], l["inputs"]
assert len(m["attrs"]["fused_program"]) == 13 * 4, m["attrs"]
assert l["attrs"]["fused_consts"] == [0.25, 2.0], l["attrs"]
assert l["attrs"]["fused_ops"] == ["Mul", "Clip", "Sqrt", "Log"]
PY
else
    bad "compile chain.json failed: $(cat "$tmp/err.txt")"
fi

# ---- 2. fused vs unfused vs Python -----------------------------------------------------
ins=(--input x="$tmp/x.bin" --input y="$tmp/y.bin")
if "$kiln" run "$tmp/chain.json" "${ins[@]}" "${nohs[@]}" --output-dir "$tmp/on" >/dev/null 2>"$tmp/err.txt" &&
   "$kiln" run "$tmp/chain.json" "${ins[@]}" "${nohs[@]}" --option vector.fusion=off --output-dir "$tmp/off" \
       >/dev/null 2>>"$tmp/err.txt"; then
    same_bytes "chain.json fused vs unfused" "$tmp/on" "$tmp/off"
    python3 - "$tmp/x.bin" "$tmp/y.bin" "$tmp/on" <<'PY' && ok || bad "chain.json: wrong values"
import math, struct, sys
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
x = struct.unpack("<120f", open(sys.argv[1], "rb").read())
y = struct.unpack("<120f", open(sys.argv[2], "rb").read())
o0 = struct.unpack("<120f", open(sys.argv[3] + "/output.0.bin", "rb").read())
o1 = struct.unpack("<120f", open(sys.argv[3] + "/output.1.bin", "rb").read())
for xi, yi, a, b in zip(x, y, o0, o1):
    v = xi * min(6.0, max(0.0, xi + 3.0)) / 6.0
    v = max(v, 0.0) - yi
    v = v if v >= 0 else 0.125 * v
    v = max(v, yi)
    v = 1.0 / (1.0 + math.exp(-v))
    v = -min(1.0, max(0.0, 0.3 * v + 0.4))
    want0 = min(v, f32(-0.45))
    want1 = math.log(math.sqrt(min(2.0, max(0.25, yi * yi))))
    assert abs(a - want0) <= 1e-6 * (1 + abs(want0)), (xi, yi, a, want0)
    assert abs(b - want1) <= 1e-6 * (1 + abs(want1)), (yi, b, want1)
PY
else
    bad "run chain.json failed: $(cat "$tmp/err.txt")"
fi
"$kiln" compile "$tmp/chain.json" --option vector.fusion=off -o "$tmp/off.json" --stats 2>"$tmp/err.txt" ||
    bad "compile with vector.fusion=off failed"
if grep -q "chains_fused" "$tmp/err.txt" || grep -q KilnFusedElementwise "$tmp/off.json"; then
    bad "vector.fusion=off still fused"
else
    ok
fi

# ---- 3. blocking conditions --------------------------------------------------------------
if "$kiln" compile "$tmp/block.json" -o "$tmp/b.json" --stats 2>"$tmp/err.txt"; then
    want_line "block stat" "chains_fused = 2" "$tmp/err.txt"
    python3 - "$tmp/b.json" <<'PY' && ok || bad "block.json: a blocked node was fused"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
for k in ("b_two", "b_next", "b_keep", "b_after", "b_bc"):
    assert nodes[k]["type"] != "KilnFusedElementwise", k
assert "b_bc2" not in nodes
assert nodes["b_tail"]["type"] == "KilnFusedElementwise", nodes["b_tail"]
assert nodes["b_tail"]["inputs"] == ["b_bc:0"], nodes["b_tail"]
assert nodes["b_sc"]["type"] == "Neg" and "b_cx" not in nodes
assert nodes["b_clip"]["type"] == "KilnFusedElementwise", nodes["b_clip"]
assert nodes["b_clip"]["inputs"] == ["x:0", "b_sc:0"], nodes["b_clip"]
PY
    bins=(--input x="$tmp/x.bin" --input r="$tmp/r.bin" --input s="$tmp/s.bin")
    if "$kiln" run "$tmp/block.json" "${bins[@]}" --output-dir "$tmp/bon" >/dev/null 2>"$tmp/err.txt" &&
       "$kiln" run "$tmp/block.json" "${bins[@]}" --option vector.fusion=off --output-dir "$tmp/boff" \
           >/dev/null 2>>"$tmp/err.txt"; then
        same_bytes "block.json fused vs unfused" "$tmp/bon" "$tmp/boff"
    else
        bad "run block.json failed: $(cat "$tmp/err.txt")"
    fi
else
    bad "compile block.json failed: $(cat "$tmp/err.txt")"
fi

# ---- 4. threads, bad input -------------------------------------------------------------------
"$kiln" compile "$tmp/chain.json" --threads 1 -o "$tmp/t1.json" 2>"$tmp/err.txt" &&
    "$kiln" compile "$tmp/chain.json" --threads 16 -o "$tmp/t16.json" 2>>"$tmp/err.txt" ||
    bad "compile --threads failed: $(cat "$tmp/err.txt")"
cmp -s "$tmp/t1.json" "$tmp/t16.json" && ok || bad "--threads 1 and 16 differ"
if "$kiln" compile "$tmp/chain.json" --option vector.fusion=maybe -o "$tmp/x.json" 2>"$tmp/err.txt"; then
    bad "vector.fusion=maybe accepted"
else
    want_line "bad option" "session option vector.fusion=maybe: expected on or off" "$tmp/err.txt"
fi
# a malformed program in a compiled graph: the kernel bind names the node and instruction
python3 - "$tmp/c.json" "$tmp/badprog.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "log":
        n["attrs"]["fused_program"][0] = 99
json.dump(g, open(sys.argv[2], "w"))
PY
if "$kiln" run "$tmp/badprog.json" "${ins[@]}" --output-dir "$tmp/bp" >/dev/null 2>"$tmp/err.txt"; then
    bad "a malformed fused_program ran"
else
    want_line "bad program" "fused_program instruction 0 {99," "$tmp/err.txt"
fi

echo "vec_fusion: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
