#!/usr/bin/env bash
# Regression inputs of the ONNX importer's fuzzer (make fuzz, fuzz/, docs/onnx.md).
#
# Every tests/data/onnx/fuzz/*.onnx is a file that once crashed the importer,
# or made it build a graph the verifier or the JSON writer rejected.  Each must
# now fail cleanly: `kiln convert <case> out.json` exits 1 (never a crash or a
# sanitizer report), the message names the file and, where listed below, the
# defect, and no output file is left behind.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
man="$src/tests/data/onnx/manifest.json"
cases="$src/tests/data/onnx/fuzz"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0

# case -> fragment the error message must contain
declare -A want=(
    [utf8_op_type.onnx]="onnx.NodeProto.op_type at graph.node[0] is not valid UTF-8"
    [utf8_node_name.onnx]="onnx.NodeProto.name at graph.node[2] is not valid UTF-8"
    [utf8_graph_name.onnx]="onnx.GraphProto.name at graph is not valid UTF-8"
    [utf8_opset_domain.onnx]="onnx.OperatorSetIdProto.domain at opset_import[1] is not valid UTF-8"
    [utf8_string_attr.onnx]="attribute 'mode': string is not valid UTF-8"
    [cycle_self_input.onnx]="has a cycle through node add"
    [cycle_two_nodes.onnx]="has a cycle through node n1"
    [cycle_if_capture.onnx]="has a cycle through node if1"
    [cycle_if_captures_own_output.onnx]="has a cycle through node if1"
    [deep_nesting_5000.onnx]="messages nested deeper than 300 levels"
)

n=0
for f in "$cases"/*.onnx; do
    [ -e "$f" ] || continue
    n=$((n+1)); b=$(basename "$f")
    "$kiln" convert -m "$man" "$f" "$tmp/out.json" >/dev/null 2>"$tmp/err"; rc=$?
    frag=${want[$b]:-}
    if [ $rc -ne 1 ]; then
        echo "FAIL $b: exit $rc (want 1): $(head -5 "$tmp/err")"; fail=$((fail+1))
    elif ! grep -qF -- "$b" "$tmp/err"; then
        echo "FAIL $b: the message does not name the file: $(cat "$tmp/err")"; fail=$((fail+1))
    elif [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err"; then
        echo "FAIL $b: want '$frag' in: $(cat "$tmp/err")"; fail=$((fail+1))
    elif [ -e "$tmp/out.json" ]; then
        echo "FAIL $b: output left behind"; fail=$((fail+1)); rm -f "$tmp/out.json"
    else
        pass=$((pass+1))
    fi
done
# Inputs that used to be slow (quadratic) rather than wrong: generated here (a
# stored file would be large), each must convert successfully within 20 s.
#   same_name: 20000 nodes all named "n" (unique naming probed n_1, n_2, ... from
#              1 for every node: 35 s before the fix, 0.06 s after).
if python3 - "$src/tests/data/onnx" "$tmp/same_name.onnx" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from gen_models import f_bytes, model, node
open(sys.argv[2], "wb").write(model(f_bytes(1, node("X", [], [], "n")) * 20000 + f_bytes(2, "g")))
PY
then
    timeout 20 "$kiln" convert -m "$man" "$tmp/same_name.onnx" "$tmp/same_name.json" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ]; then echo "FAIL same_name.onnx: exit $rc (124 = over 20 s): $(head -3 "$tmp/err")"; fail=$((fail+1))
    elif ! grep -qF '"name": "n_19999"' "$tmp/same_name.json"; then echo "FAIL same_name.onnx: node n_19999 missing"; fail=$((fail+1))
    else pass=$((pass+1)); fi
else
    echo "FAIL generating same_name.onnx"; fail=$((fail+1))
fi

[ $n -ge ${#want[@]} ] || { echo "FAIL only $n cases in $cases, expected at least ${#want[@]}"; fail=$((fail+1)); }
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
