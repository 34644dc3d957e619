#!/usr/bin/env bash
# A vendor's custom op (docs/ops.md): tests/plugins/tp_custom_op.c registers
# AcmeDup with its own inference and folding; loaded beside the default
# manifest, InferShapes fills its outputs in a graph JSON and folds the one
# whose input is constant; `kiln plugins` lists it.  A plugin registering an
# op type another plugin registered is refused naming both plugins; malformed
# op defs (no type, min above max, struct_size too small) are refused naming
# the plugin; nothing is written on failure.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
g="$src/tests/data/ops/custom_op.json"

# name want_status fragment -- command...
check() {
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"; local st=$?
    if [ "$st" != "$want" ]; then bad "$name: exit $st, want $want"; cat "$tmp/err"; return; fi
    if [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/out" "$tmp/err"; then
        bad "$name: no '$frag' in:"; cat "$tmp/out" "$tmp/err"; return
    fi
    ok
}

# 1. the custom op is inferred and folded
check compile 0 "" -- "$kiln" compile "$g" --plugin "$tp/libtp_custom_op.so" -o "$tmp/c.json"
python3 - "$tmp/c.json" <<'PY' && ok || bad "compiled graph"
import json, sys
g = json.load(open(sys.argv[1]))
nodes = {n["name"]: n for n in g["nodes"]}
def shape(n):
    return nodes[n]["outputs"][0].get("shape")
assert shape("dup") == [2, 6], shape("dup")
assert shape("act") == [2, 6], shape("act")
k = nodes["kdup"]
assert k["type"] == "Const", k["type"]
assert k["attrs"]["value"]["value"]["data"] == [7, 9, 7, 9], k["attrs"]["value"]
assert nodes["dup"]["engine"] == "acme_ops", nodes["dup"].get("engine")
PY
# ... and the node left runs on the plugin's engine (acme_ops)
python3 - "$tmp/x.bin" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<6f", -1, 2, -3, 4, -5, 6))
open(sys.argv[1] + ".json", "w").write('{"dims": [2, 3], "dtype": "float32"}')
PY
check run 0 "" -- "$kiln" run "$g" --plugin "$tp/libtp_custom_op.so" --input "x=$tmp/x.bin" \
    --output-dir "$tmp/run"
python3 - "$tmp/run/output.0.bin" <<'PY' && ok || bad "run: AcmeDup kernel output"
import struct, sys
got = struct.unpack("<12f", open(sys.argv[1], "rb").read())
assert got == (0, 2, 0, 0, 2, 0, 4, 0, 6, 4, 0, 6), got
PY
# without the op's plugin the op is unknown: a warning, outputs as declared,
# then no engine takes the node (EnginePlacer's error lists each engine)
check unknown 1 "no inference for op AcmeDup (node dup)" -- "$kiln" compile "$g" -o "$tmp/u.json"
check unplaced 1 "no engine supports node dup (op AcmeDup): aicore: no op entry for AcmeDup" -- \
    "$kiln" compile "$g" -o "$tmp/u.json"
# 2. the listing
check listed 0 "AcmeDup" -- "$kiln" plugins --plugin "$tp/libtp_custom_op.so" com.acme.ops
check described 0 "com.acme in 1 out 1 infer fold" -- \
    "$kiln" plugins --plugin "$tp/libtp_custom_op.so" AcmeDup
check onnx_listed 0 "ai.onnx in 2 out 1 elementwise commutative infer fold" -- "$kiln" plugins Add
# 3. a duplicate op type names both plugins
check dup 1 "plugin com.acme.dup_add registers op Add, which plugin kiln.onnx_ops" -- \
    "$kiln" compile "$g" --plugin "$tp/libtp_op_dup.so" -o "$tmp/d.json"
[ ! -e "$tmp/d.json" ] && ok || bad "dup: output written"
# 4. malformed defs name the plugin
check bad_null 1 "plugin com.acme.bad_op registers an op without a type" -- \
    env TP_OP_BAD=null "$kiln" plugins --plugin "$tp/libtp_op_bad.so"
check bad_arity 1 "plugin com.acme.bad_op: op AcmeBad has a bad arity range (inputs 1..1, outputs 2..1" -- \
    env TP_OP_BAD=arity "$kiln" plugins --plugin "$tp/libtp_op_bad.so"
check bad_size 1 "libtp_op_bad.so: op descriptor struct_size 12 is smaller than" -- \
    env TP_OP_BAD=size "$kiln" plugins --plugin "$tp/libtp_op_bad.so"
check good_def 0 "AcmeBad" -- "$kiln" plugins --plugin "$tp/libtp_op_bad.so"

echo "custom ops: $pass passed, $fail failed"
[ "$fail" = 0 ]
