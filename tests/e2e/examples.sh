#!/usr/bin/env bash
# examples: the files of examples/ do what the docs use them for.  Every graph
# compiles with the default manifest, converts to ONNX and back to the same
# JSON, and residual_block runs on both of its shipped inputs (.npy and raw +
# sidecar) with the expected values; examples/my_pipeline.json resolves.  An
# ONNX export that fails names the node, never the exporter's temporary file.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ex="$src/examples"

for g in "$ex"/*.json; do
    name=$(basename "$g" .json)
    grep -q '"kiln_graph"' "$g" || continue
    "$kiln" compile "$g" -o "$tmp/$name.c.json" 2>"$tmp/err" || { bad "compile $name"; cat "$tmp/err"; }
    "$kiln" convert "$g" "$tmp/$name.onnx" 2>"$tmp/err" || { bad "convert $name to ONNX"; cat "$tmp/err"; continue; }
    "$kiln" convert "$tmp/$name.onnx" "$tmp/$name.a.json" || bad "convert $name.onnx back"
    mkdir -p "$tmp/b"; "$kiln" convert "$tmp/$name.a.json" "$tmp/b/$name.onnx" || bad "convert $name.a.json to ONNX"
    "$kiln" convert "$tmp/b/$name.onnx" "$tmp/$name.b.json" || bad "second round trip of $name"
    cmp -s "$tmp/$name.a.json" "$tmp/$name.b.json" || bad "$name: ONNX round trip is not stable"
done

# residual_block: relu(x @ w + x) with x = [1,-2,3,0.5] -> [2.25,0,0,1]
rb="$ex/residual_block.json"
for input in "x=$ex/residual_block_x.npy" "$ex/residual_block_x.bin"; do
    rm -rf "$tmp/out"
    "$kiln" run "$rb" --input "$input" --output-dir "$tmp/out" >"$tmp/summary" 2>"$tmp/err" \
        || { bad "run residual_block --input $input"; cat "$tmp/err"; continue; }
    grep -q 'output 0 relu: float32 \[1,4\] min 0 max 2.25 mean 0.8125' "$tmp/summary" \
        || { bad "residual_block summary"; cat "$tmp/summary"; }
    python3 - "$tmp/out/output.0.bin" <<'PY' || bad "residual_block output values"
import struct, sys
got = struct.unpack("<4f", open(sys.argv[1], "rb").read())
sys.exit(0 if got == (2.25, 0.0, 0.0, 1.0) else print("got", got) or 1)
PY
done
"$kiln" run "$tmp/residual_block.onnx" --input "x=$ex/residual_block_x.npy" >"$tmp/summary" 2>&1 \
    && grep -q 'max 2.25 mean 0.8125' "$tmp/summary" || { bad "run residual_block.onnx"; cat "$tmp/summary"; }

"$kiln" manifest check "$ex/my_pipeline.json" >"$tmp/m.txt" 2>&1 || { bad "my_pipeline.json"; cat "$tmp/m.txt"; }
grep -q 'max_warnings = 10' "$tmp/m.txt" || bad "my_pipeline.json: GraphLint options not applied"

# A Const without a value cannot be exported: the message names the node, not a temporary file.
printf '{"kiln_graph": 1, "name": "g", "nodes": [{"name": "w", "type": "Const", "outputs": [{"shape": [2]}]},
 {"name": "out", "type": "NetOutput", "inputs": ["w:0"]}]}' >"$tmp/novalue.json"
"$kiln" convert "$tmp/novalue.json" "$tmp/novalue.onnx" 2>"$tmp/err"; rc=$?
if [ $rc -ne 1 ] || ! grep -q "node 'w' (Const) has no tensor 'value'" "$tmp/err" || grep -q 'kiln-tmp' "$tmp/err"; then
    bad "export error (rc=$rc):"; cat "$tmp/err"
fi
test ! -e "$tmp/novalue.onnx" || bad "failed export left novalue.onnx"

[ $fail -eq 0 ] && echo "examples: OK" || { echo "examples: $fail failures"; exit 1; }
