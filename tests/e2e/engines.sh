#!/usr/bin/env bash
# engines: the built-in engines and the engine hooks through the CLI
# (docs/engines.md).
#
#  1. The default manifest loads the engines aicore, vector, hostcpu and rts;
#     `kiln plugins ENGINE` shows each one's priority, hooks and op table
#     (op, dtypes of output 0, formats).
#  2. `kiln info` places a graph's ops on their engines; `kiln run` executes it
#     across engines (MatMul on aicore, Add/Relu on vector, Transpose on
#     hostcpu) with the exact values.
#  3. The stage driver calls every engine's optimize_original_graph at the end
#     of stage optimize_original, highest priority first (tests/plugins/
#     tp_engine.c records the calls in the compiled graph); a failing hook
#     stops the build with an error naming the engine, the hook and the graph.
#  4. The built-in engines' own optimize_original_graph: vector removes a no-op
#     Cast, hostcpu a same-shape Reshape; a Cast to another dtype, a Reshape to
#     another shape and a Reshape feeding the NetOutput stay; the outputs are
#     unchanged; a node pinned to another engine is left alone.
#  5. Homes of the ops of GE's compile-only graphs: Assign runs on hostcpu
#     (the value written into the ref input), ReduceSum, Exp and Tanh on vector; the
#     compile-only engine hccl takes HcomAllReduce (placed, partitioned, built
#     with task hccl.HcomAllReduce) and refuses to run it, naming the node, the
#     op and the engine.
#  6. Engine optimisation reaches control-flow bodies (GE places, partitions
#     and optimises every subgraph): in an If's branches hostcpu's
#     optimize_original_graph removes a same-shape Reshape and vector's
#     optimize_subgraph fuses the element-wise chains; both branches' outputs
#     are those of vector.fusion=off and of a Python reference; the compiled
#     graph is the same bytes for -j 1, 2 and 16.
#  7. hostcpu's shape-dims folding: Gather(Shape(x), const) whose picked dims
#     are static becomes a Const though x has dynamic dims, a pick of a
#     dynamic dim stays; outputs equal hostcpu.shape_fold=off and the expected
#     values; a bad option value stops the build naming the option.
#  8. rts's optimize_subgraph merges back-to-back MemcpyAsync copies of its
#     partitions (a copy read by another copy alone); a copy with a second
#     reader and an address copy (MemcpyAddrAsync) stay; outputs equal
#     rts.copy_merge=off; -j 1 and 16 give the same bytes.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tplug="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
want_line() { # name regex file
    if grep -Eq -- "$2" "$3"; then ok; else bad "$1: no line matching '$2' in $3:"; head -30 "$3"; fi
}

# ---- 1. listing ------------------------------------------------------------------
"$kiln" plugins >"$tmp/plugins.txt" 2>&1 || bad "kiln plugins failed"
for e in aicore vector hostcpu rts hccl; do
    want_line "list $e" "^  engine +$e( |$)" "$tmp/plugins.txt"
done
if grep -Eq "^  engine +cpu( |$)" "$tmp/plugins.txt"; then bad "an engine 'cpu' is still registered"; else ok; fi
"$kiln" plugins vector >"$tmp/vector.txt" 2>&1 || bad "kiln plugins vector failed"
want_line "vector priority" "^  priority  30$" "$tmp/vector.txt"
want_line "vector hooks" "^  hooks .*calc_op_running_param generate_task kernel_create" "$tmp/vector.txt"
want_line "vector Add" "^  op +Add +float32,float64,int8,.* any-format$" "$tmp/vector.txt"
want_line "vector Equal" "^  op +Equal +bool +any-format$" "$tmp/vector.txt"
"$kiln" plugins aicore >"$tmp/aicore.txt" 2>&1 || bad "kiln plugins aicore failed"
want_line "aicore priority" "^  priority  40$" "$tmp/aicore.txt"
want_line "aicore Conv" "^  op +Conv +float32 +ND,NCHW,NCDHW,NHWC$" "$tmp/aicore.txt"
"$kiln" plugins hostcpu >"$tmp/host.txt" 2>&1 || bad "kiln plugins hostcpu failed"
want_line "hostcpu Shape" "^  op +Shape +int64 +any-format$" "$tmp/host.txt"
"$kiln" plugins rts >"$tmp/rts.txt" 2>&1 || bad "kiln plugins rts failed"
want_line "rts Send" "^  op +Send +any-dtype +any-format$" "$tmp/rts.txt"
want_line "rts count" "^  ops +11 " "$tmp/rts.txt"

# ---- 2. placement and execution across engines -------------------------------------
graph="$src/sdk/engine_example/graph.json"
"$kiln" info "$graph" >"$tmp/info.txt" 2>&1 || bad "kiln info failed"
want_line "info Add" "^  Add +2  vector$" "$tmp/info.txt"
want_line "info MatMul" "^  MatMul +1  aicore$" "$tmp/info.txt"
want_line "info Transpose" "^  Transpose +1  hostcpu$" "$tmp/info.txt"
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
for name, vals in (("x", [-1, 2, -3, 4, -5, 6]), ("y", [0.25, -2, 1, -4, 6, -1])):
    open("%s/%s.bin" % (d, name), "wb").write(struct.pack("<6f", *vals))
    json.dump({"dims": [2, 3], "dtype": "float32"}, open("%s/%s.bin.json" % (d, name), "w"))
PY
if "$kiln" run "$graph" --input x="$tmp/x.bin" --input y="$tmp/y.bin" --output-dir "$tmp/o" >/dev/null 2>"$tmp/err.txt"; then
    python3 - "$tmp/o" <<'PY' && ok || bad "run across engines: wrong values"
import struct, sys
x = [-1, 2, -3, 4, -5, 6]; y = [0.25, -2, 1, -4, 6, -1]; b = [0.5, -1, 2]
relu = [max(0.0, x[i] + y[i] + b[i % 3]) for i in range(6)]
w = [[1, 0], [0, 1], [1, 1]]
mm = [[sum(relu[r * 3 + k] * w[k][c] for k in range(3)) for c in range(2)] for r in range(2)]
tr = [mm[r][c] for c in range(2) for r in range(2)]
got0 = list(struct.unpack("<6f", open(sys.argv[1] + "/output.0.bin", "rb").read()))
got1 = list(struct.unpack("<4f", open(sys.argv[1] + "/output.1.bin", "rb").read()))
assert got0 == relu, (got0, relu)
assert got1 == tr, (got1, tr)
PY
else
    bad "kiln run across engines failed: $(cat "$tmp/err.txt")"
fi

"$kiln" compile "$graph" -o "$tmp/placed.json" 2>"$tmp/err.txt" || bad "compile failed: $(cat "$tmp/err.txt")"
python3 - "$tmp/placed.json" <<'PY' && ok || bad "placement (_kiln_engine) in the compiled graph"
import json, sys
eng = {n["name"]: n.get("engine") for n in json.load(open(sys.argv[1]))["nodes"]}
want = {"add": "vector", "add_bias": "vector", "relu": "vector", "mm": "aicore", "tr": "hostcpu"}
assert all(eng[k] == v for k, v in want.items()), eng
PY

# ---- 3. the stage driver calls optimize_original_graph ------------------------------
if "$kiln" compile "$graph" --plugin "$tplug/libtp_engine.so" -o "$tmp/c.json" 2>"$tmp/err.txt"; then
    if grep -qF '"tp_engine_calls": "tp_first:original;tp_second:original;"' "$tmp/c.json"; then ok
    else bad "optimize_original_graph calls: $(grep -o '"tp_engine_calls": "[^"]*"' "$tmp/c.json")"; fi
else
    bad "compile with tp_engine failed: $(cat "$tmp/err.txt")"
fi
python3 - "$graph" "$tmp/failing.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
g.setdefault("attrs", {})["tp_engine_fail"] = "tp_second"
json.dump(g, open(sys.argv[2], "w"))
PY
"$kiln" compile "$tmp/failing.json" --plugin "$tplug/libtp_engine.so" -o "$tmp/f.json" 2>"$tmp/err.txt"
rc=$?
if [ "$rc" = 1 ] && grep -qF "engine tp_second: optimize_original_graph of graph acme_engine_example" "$tmp/err.txt" &&
   grep -qF "told to fail by tp_engine_fail" "$tmp/err.txt" && [ ! -e "$tmp/f.json" ]; then ok
else bad "failing hook: rc=$rc: $(cat "$tmp/err.txt")"; fi

# ---- 4. the built-in engines' optimize_original_graph ------------------------------
noops="$src/tests/data/engines/noops.json"
# CastRemovePass and ReshapeRemovePass would remove these no-ops first; off, so
# the engines' hooks are what is tested
if "$kiln" compile "$noops" -o "$tmp/n.json" -v --disable-pass 'CastRemovePass|ReshapeRemovePass' \
    2>"$tmp/err.txt"; then
    python3 - "$tmp/n.json" <<'PY' && ok || bad "no-op removal: wrong nodes"
import json, sys
names = [n["name"] for n in json.load(open(sys.argv[1]))["nodes"]]
assert "c1" not in names and "r1" not in names, names
assert all(k in names for k in ("relu", "r2", "c2", "r3")), names
PY
    want_line "explain c1" "optimize_original: vector: c1: removed by engine vector: Cast of x:0 does nothing" "$tmp/err.txt"
    want_line "stat hostcpu" "stat: optimize_original: hostcpu: no-op nodes removed = 1" "$tmp/err.txt"
else
    bad "compile noops failed: $(cat "$tmp/err.txt")"
fi
python3 - "$tmp" <<'PY'
import json, struct, sys
open(sys.argv[1] + "/n.bin", "wb").write(struct.pack("<6f", -1.5, 2.7, -3, 4.2, -5, 6.9))
json.dump({"dims": [2, 3], "dtype": "float32"}, open(sys.argv[1] + "/n.bin.json", "w"))
PY
if "$kiln" run "$noops" --input x="$tmp/n.bin" --output-dir "$tmp/no" >/dev/null 2>"$tmp/err.txt"; then
    python3 - "$tmp/no" <<'PY' && ok || bad "no-op removal changed the outputs"
import struct, sys
x = [-1.5, 2.7, -3, 4.2, -5, 6.9]
relu = [max(0.0, v) for v in x]
c2 = list(struct.unpack("<6q", open(sys.argv[1] + "/output.0.bin", "rb").read()))
r3 = list(struct.unpack("<6f", open(sys.argv[1] + "/output.1.bin", "rb").read()))
assert c2 == [int(v) for v in relu], c2
assert r3 == [struct.unpack("<f", struct.pack("<f", v))[0] for v in relu], r3
PY
else
    bad "run noops failed: $(cat "$tmp/err.txt")"
fi
python3 - "$noops" "$tmp/pinned.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "c1":
        n["engine"] = "tp_second"   # tp_second lists Cast: the no-op Cast is its node
json.dump(g, open(sys.argv[2], "w"))
PY
"$kiln" compile "$tmp/pinned.json" --plugin "$tplug/libtp_engine.so" -o "$tmp/p.json" \
    --disable-pass 'CastRemovePass|ReshapeRemovePass' 2>"$tmp/err.txt" ||
    bad "compile pinned failed: $(cat "$tmp/err.txt")"
grep -qF '"name": "c1"' "$tmp/p.json" && ok || bad "a no-op Cast placed on tp_second was removed by vector"

# ---- 5. homes of Assign, ReduceSum and the collectives -------------------------------
"$kiln" plugins hccl >"$tmp/hccl.txt" 2>&1 || bad "kiln plugins hccl failed"
want_line "hccl priority" "^  priority  5$" "$tmp/hccl.txt"
want_line "hccl AllReduce" "^  op +HcomAllReduce +any-dtype +any-format$" "$tmp/hccl.txt"
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
for name, vals in (("hx", [9] * 6), ("hv", [-1, 2, -3, 4, -5, 6])):
    open("%s/%s.bin" % (d, name), "wb").write(struct.pack("<6f", *vals))
    json.dump({"dims": [2, 3], "dtype": "float32"}, open("%s/%s.bin.json" % (d, name), "w"))
open(d + "/h4.bin", "wb").write(struct.pack("<4f", 1, 2, 3, 4))
json.dump({"dims": [4], "dtype": "float32"}, open(d + "/h4.bin.json", "w"))
PY
homes="$src/tests/data/engines/homes.json"
"$kiln" compile "$homes" -o "$tmp/homes.json" 2>"$tmp/err.txt" || bad "compile homes failed: $(cat "$tmp/err.txt")"
python3 - "$tmp/homes.json" <<'PY' && ok || bad "homes: placement"
import json, sys
eng = {n["name"]: n.get("engine") for n in json.load(open(sys.argv[1]))["nodes"]}
assert eng["assign"] == "hostcpu" and eng["rows"] == "vector" and eng["all"] == "vector", eng
assert eng["exp"] == "vector" and eng["tanh"] == "vector", eng
PY
if "$kiln" run "$homes" --input x="$tmp/hx.bin" --input v="$tmp/hv.bin" --output-dir "$tmp/ho" \
    >/dev/null 2>"$tmp/err.txt"; then
    python3 - "$tmp/ho" <<'PY' && ok || bad "homes: Assign / ReduceSum / Exp / Tanh values"
import math, struct, sys
d = sys.argv[1]
got = [struct.unpack("<%df" % k, open("%s/output.%d.bin" % (d, i), "rb").read())
       for i, k in ((0, 6), (1, 2), (2, 1), (3, 6), (4, 6))]
assert got[0] == (0, 2, 0, 4, 0, 6), got[0]   # Assign: Relu(v) written over x
assert got[1] == (-2, 5), got[1]              # ReduceSum over axis 1
assert got[2] == (3,), got[2]                 # ReduceSum over every axis
v = (-1, 2, -3, 4, -5, 6)
assert all(abs(a - math.exp(b)) <= 2e-7 * math.exp(b) for a, b in zip(got[3], v)), got[3]
assert all(abs(a - math.tanh(b)) <= 1e-6 for a, b in zip(got[4], v)), got[4]
PY
else
    bad "run homes failed: $(cat "$tmp/err.txt")"
fi
hccl="$src/tests/data/engines/hccl.json"
"$kiln" compile "$hccl" -o "$tmp/hccl.json" --report "$tmp/hccl.r.json" 2>"$tmp/err.txt" ||
    bad "compile hccl failed: $(cat "$tmp/err.txt")"
python3 - "$tmp/hccl.json" "$tmp/hccl.r.json" <<'PY' && ok || bad "hccl: placement, partition, task"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
assert nodes["ar"]["engine"] == "hccl", nodes["ar"]
assert nodes["ar"]["attrs"]["_kiln_kernel"] == "hccl.HcomAllReduce", nodes["ar"]["attrs"]
r = json.load(open(sys.argv[2]))
assert r["placement"]["hccl"] == 1, r["placement"]
assert [p["nodes"] for p in r["partitions"] if p["engine"] == "hccl"] == [["ar"]], r["partitions"]
PY
"$kiln" run "$hccl" --input x="$tmp/h4.bin" --output-dir "$tmp/hco" >/dev/null 2>"$tmp/err.txt"
rc=$?
if [ "$rc" = 1 ] && grep -qF "node ar: HcomAllReduce is a collective communication op of engine hccl, which is compile-only" "$tmp/err.txt"; then ok
else bad "hccl run: rc=$rc: $(cat "$tmp/err.txt")"; fi

# ---- 6. engine optimisation inside control-flow bodies --------------------------------
bodies="$src/tests/data/engines/bodies.json"
# ReshapeRemovePass would remove the no-op Reshape first; off, so the hook is what is tested
if "$kiln" compile "$bodies" -o "$tmp/b1.json" -v -j 1 --disable-pass ReshapeRemovePass \
    2>"$tmp/err.txt"; then
    python3 - "$tmp/b1.json" <<'PY' && ok || bad "bodies: nodes of the branches"
import json, sys
ifn = [n for n in json.load(open(sys.argv[1]))["nodes"] if n["type"] == "If"][0]
then = {n["name"]: n for n in ifn["subgraphs"]["then_branch"]["nodes"]}
els = {n["name"]: n for n in ifn["subgraphs"]["else_branch"]["nodes"]}
assert "t_rs" not in then and "t_relu" not in then and "t_sig" not in then, sorted(then)
assert then["t_neg"]["type"] == "KilnFusedElementwise", then["t_neg"]
assert then["t_neg"]["attrs"]["fused_ops"] == ["Relu", "Sigmoid", "Neg"], then["t_neg"]["attrs"]
assert "e_relu" not in els and els["e_sig"]["type"] == "KilnFusedElementwise", sorted(els)
PY
    want_line "bodies explain t_rs" "optimize_original: hostcpu: t_rs: removed by engine hostcpu: Reshape of t_in:0 does nothing" "$tmp/err.txt"
    want_line "bodies explain t_neg" "optimize_subgraph: vector: t_neg: 3 element-wise nodes fused" "$tmp/err.txt"
else
    bad "compile bodies failed: $(cat "$tmp/err.txt")"
fi
for j in 2 16; do
    "$kiln" compile "$bodies" -o "$tmp/b$j.json" -j "$j" --disable-pass ReshapeRemovePass 2>"$tmp/err.txt" ||
        bad "compile bodies -j $j failed: $(cat "$tmp/err.txt")"
    cmp -s "$tmp/b1.json" "$tmp/b$j.json" && ok || bad "bodies: -j 1 and -j $j differ"
done
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
open(d + "/bx.bin", "wb").write(struct.pack("<6f", -1.5, 2.7, -3, 4.2, -5, 6.9))
json.dump({"dims": [2, 3], "dtype": "float32"}, open(d + "/bx.bin.json", "w"))
for v in (0, 1):
    open("%s/bc%d.bin" % (d, v), "wb").write(struct.pack("<?", bool(v)))
    json.dump({"dims": [], "dtype": "bool"}, open("%s/bc%d.bin.json" % (d, v), "w"))
PY
for v in 0 1; do
    for f in on off; do
        "$kiln" run "$bodies" --input x="$tmp/bx.bin" --input c="$tmp/bc$v.bin" --option vector.fusion=$f \
            --output-dir "$tmp/bo$v$f" >/dev/null 2>"$tmp/err.txt" || bad "run bodies c=$v fusion=$f: $(cat "$tmp/err.txt")"
    done
    cmp -s "$tmp/bo${v}on/output.0.bin" "$tmp/bo${v}off/output.0.bin" && ok || bad "bodies c=$v: fused and unfused outputs differ"
    python3 - "$tmp/bo${v}on/output.0.bin" "$v" <<'PY' && ok || bad "bodies c=$v: wrong values"
import math, struct, sys
x = [-1.5, 2.7, -3, 4.2, -5, 6.9]
got = struct.unpack("<6f", open(sys.argv[1], "rb").read())
sig = [1 / (1 + math.exp(-max(0.0, v))) for v in x]
want = [-s for s in sig] if sys.argv[2] == "1" else sig
assert all(abs(a - b) < 1e-6 for a, b in zip(got, want)), (got, want)
PY
done

# ---- 7. hostcpu's shape-dims folding ---------------------------------------------------
sdims="$src/tests/data/engines/shape_dims.json"
if "$kiln" compile "$sdims" -o "$tmp/sd.json" -v 2>"$tmp/err.txt"; then
    python3 - "$tmp/sd.json" <<'PY' && ok || bad "shape dims: nodes"
import json, sys
names, types = set(), {}
def walk(g):
    for n in g["nodes"]:
        names.add(n["name"]); types[n["name"]] = n["type"]
        for s in (n.get("subgraphs") or {}).values():
            walk(s)
walk(json.load(open(sys.argv[1])))
assert "d1" not in names and "dl" not in names, sorted(names)   # folded
assert types.get("d0") == "Gather", sorted(names)                # a dynamic dim: kept
PY
    want_line "shape dims stat" "stat: optimize_original: hostcpu: shape dims folded = 2" "$tmp/err.txt"
    want_line "shape dims explain" "hostcpu: d1: folded by engine hostcpu into Const d1_dims_0: the picked dims of s are static \(4\)" "$tmp/err.txt"
else
    bad "compile shape_dims failed: $(cat "$tmp/err.txt")"
fi
"$kiln" compile "$sdims" -o "$tmp/sd_off.json" --option hostcpu.shape_fold=off -v 2>"$tmp/err.txt" ||
    bad "compile shape_dims (off) failed: $(cat "$tmp/err.txt")"
grep -q "shape dims folded" "$tmp/err.txt" && bad "shape dims: folded with hostcpu.shape_fold=off" || ok
python3 - "$tmp" <<'PY'
import json, struct, sys
open(sys.argv[1] + "/sx.bin", "wb").write(struct.pack("<24f", *range(24)))
json.dump({"dims": [2, 4, 3], "dtype": "float32"}, open(sys.argv[1] + "/sx.bin.json", "w"))
PY
for f in on off; do
    "$kiln" run "$sdims" --input x="$tmp/sx.bin" --option hostcpu.shape_fold=$f --output-dir "$tmp/sd$f" \
        >/dev/null 2>"$tmp/err.txt" || bad "run shape_dims ($f) failed: $(cat "$tmp/err.txt")"
done
python3 - "$tmp/sdon/output.0.bin" <<'PY' && ok || bad "shape dims: wrong values"
import struct, sys
got = struct.unpack("<3q", open(sys.argv[1], "rb").read())
assert got == (2, 4, 4), got
PY
cmp -s "$tmp/sdon/output.0.bin" "$tmp/sdoff/output.0.bin" && ok || bad "shape dims: on and off differ"
"$kiln" compile "$sdims" -o "$tmp/sd_bad.json" --option hostcpu.shape_fold=maybe 2>"$tmp/err.txt"
rc=$?
if [ "$rc" = 1 ] && grep -qF "session option hostcpu.shape_fold=maybe: expected on or off" "$tmp/err.txt"; then ok
else bad "shape dims bad option: rc=$rc: $(cat "$tmp/err.txt")"; fi

# ---- 8. rts's copy merging ----------------------------------------------------------------
copies="$src/tests/data/engines/copies.json"
if "$kiln" compile "$copies" -o "$tmp/cp1.json" -v -j 1 2>"$tmp/err.txt"; then
    python3 - "$tmp/cp1.json" <<'PY' && ok || bad "copies: nodes"
import json, sys
nodes = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
assert "m1" not in nodes and "m2" not in nodes, sorted(nodes)
assert nodes["m3"]["inputs"] == ["relu:0"], nodes["m3"]["inputs"]
assert nodes["m5"]["inputs"] == ["m4:0"] and nodes["m6"]["inputs"] == ["ma:0"], sorted(nodes)
PY
    want_line "copies stat" "stat: optimize_subgraph: rts: copies merged = 2" "$tmp/err.txt"
    want_line "copies explain" "rts: m2: merged by engine rts into copy m3: a copy read only by that copy \(m3 now reads relu:0\)" "$tmp/err.txt"
else
    bad "compile copies failed: $(cat "$tmp/err.txt")"
fi
"$kiln" compile "$copies" -o "$tmp/cp16.json" -j 16 2>"$tmp/err.txt" || bad "compile copies -j 16 failed"
cmp -s "$tmp/cp1.json" "$tmp/cp16.json" && ok || bad "copies: -j 1 and -j 16 differ"
"$kiln" compile "$copies" -o "$tmp/cpoff.json" --option rts.copy_merge=off 2>"$tmp/err.txt" ||
    bad "compile copies (off) failed"
grep -qF '"name": "m1"' "$tmp/cpoff.json" && ok || bad "copies: merged with rts.copy_merge=off"
for f in on off; do
    "$kiln" run "$copies" --input x="$tmp/n.bin" --option rts.copy_merge=$f --output-dir "$tmp/cp$f" \
        >/dev/null 2>"$tmp/err.txt" || bad "run copies ($f) failed: $(cat "$tmp/err.txt")"
done
for k in 0 1 2 3; do
    cmp -s "$tmp/cpon/output.$k.bin" "$tmp/cpoff/output.$k.bin" && ok || bad "copies: output $k differs"
done
python3 - "$tmp/cpon/output.0.bin" <<'PY' && ok || bad "copies: wrong values"
import struct, sys
x = [-1.5, 2.7, -3, 4.2, -5, 6.9]
want = [-struct.unpack("<f", struct.pack("<f", max(0.0, v)))[0] for v in x]
assert list(struct.unpack("<6f", open(sys.argv[1], "rb").read())) == want
PY
"$kiln" compile "$copies" -o "$tmp/cpbad.json" --option rts.copy_merge=yes 2>"$tmp/err.txt"
rc=$?
if [ "$rc" = 1 ] && grep -qF "session option rts.copy_merge=yes: expected on or off" "$tmp/err.txt"; then ok
else bad "copies bad option: rc=$rc: $(cat "$tmp/err.txt")"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
