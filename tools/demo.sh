#!/usr/bin/env bash
# make demo: compile the shipped example graph with the default manifest and
# show what kiln did (passes, timing, nodes before/after, the resulting graph).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln="$root/build/bin/kiln"
in="$root/examples/residual_block.json"
out=$(mktemp -d)/residual_block.compiled.json
echo "== plugins of the default manifest"
"$kiln" plugins
echo
echo "== resolved pipeline"
"$kiln" manifest check "$root/build/share/kiln/manifests/default.json"
echo
echo "== kiln compile $in -o $out --time-passes --verify-each -v"
"$kiln" compile "$in" -o "$out" --time-passes --verify-each -v --report "${out%.json}.report.json"
nodes_in=$(grep -c '"type"' "$in")
nodes_out=$(grep -c '"type"' "$out")
echo
echo "== nodes: $nodes_in in, $nodes_out out (PruneGraphPass dropped the dead debug branch;"
echo "   IdentityRemovePass removed copy1/copy2 but kept 'keep', marked _cannot_be_deleted)"
echo "== compiled graph ($out):"
cat "$out"
echo
c2="$root/examples/const_to_assign.json"
echo "== kiln compile $c2 -v   (docs/graph_format.md's RW-conflict example: why is each copy here?)"
"$kiln" compile "$c2" -o "$(dirname "$out")/const_to_assign.compiled.json" -v 2>&1 | grep -v ': stat: '
echo "== kiln lint $c2   (W18888 on the uncompiled graph: assign and add race on c:0)"
"$kiln" lint "$c2"

echo
echo "== OCR on a real model: render 'HELLO 2024', run PP-OCRv4 rec (ONNX) through kiln"
models=$(bash "$root/tools/fetch-models.sh" | tail -1)
img="$(dirname "$out")/hello.bin"
python3 "$root/tools/render_text.py" "HELLO 2024" "$img"
ocr="$(dirname "$out")/ocr"
"$kiln" run "$models/ch_PP-OCRv4_rec_infer.onnx" --input "x=$img" --output-dir "$ocr" \
    --report "$ocr.report.json"
python3 - "$ocr.report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ran = [p for p in r["passes"] if p["runs"]]
print("kiln: %d passes ran in %.1f ms; %d nodes after compilation" %
      (len(ran), r["total_pass_ms"], r["nodes"]))
PY
echo -n "decoded text: "
python3 "$root/tools/ctc_decode.py" "$ocr/output.0.bin" "$models/ppocr_keys_v1.txt" > "$ocr.txt"
head -1 "$ocr.txt"

