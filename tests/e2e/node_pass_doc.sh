#!/usr/bin/env bash
# The node pass example of docs/node_passes.md compiles as written (C11,
# -Wall -Wextra -Werror -pedantic, as a plugin that links nothing from kiln),
# loads, and does what the page says: removes the Identity nodes, rewires
# their consumers, counts them and reports from its after-graph hook.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
doc="$src/docs/node_passes.md"
# the first ```c block after the marker comment
awk '/<!-- node-pass-example:/ {m=1; next} m==1 && /^```c$/ {m=2; next} m==2 && /^```$/ {exit} m==2 {print}' \
    "$doc" > "$tmp/example_identity_pass.c"
[ -s "$tmp/example_identity_pass.c" ] || { echo "FAIL: no example found in $doc"; exit 1; }
if ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -pedantic -shared -fPIC -fvisibility=hidden \
        -DKILN_PLUGIN -I"$src/plugin-api" -Wl,-z,defs \
        "$tmp/example_identity_pass.c" -o "$tmp/libexample_identity_pass.so"; then
    echo "FAIL: the example of docs/node_passes.md does not compile"; exit 1
fi
printf '{"kiln_manifest": 1, "plugins": [{"path": "%s"}]}' "$tmp/libexample_identity_pass.so" \
    > "$tmp/m.json"
cat > "$tmp/g.json" <<'JSON'
{"kiln_graph": 1, "name": "ids", "nodes": [
 {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [2]}]},
 {"name": "id1", "type": "Identity", "inputs": ["x:0"], "outputs": [{"shape": [2]}]},
 {"name": "id2", "type": "Identity", "inputs": ["id1:0"], "outputs": [{"shape": [2]}]},
 {"name": "r", "type": "Relu", "inputs": ["id2:0"], "outputs": [{"shape": [2]}]}]}
JSON
fail=0
if ! "$kiln" opt "$tmp/g.json" -m "$tmp/m.json" --passes ExampleIdentityPass -o "$tmp/out.json" \
        --report "$tmp/report.json" 2>"$tmp/err.txt"; then
    echo "FAIL: kiln opt with the example pass:"; cat "$tmp/err.txt"; exit 1
fi
python3 - "$tmp/out.json" "$tmp/report.json" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
nodes = {n["name"]: n for n in g["nodes"]}
assert "id1" not in nodes and "id2" not in nodes, sorted(nodes)
assert nodes["r"]["inputs"] == ["x:0"], nodes["r"]["inputs"]
rep = json.dumps(json.load(open(sys.argv[2])))
assert '"identities removed": 2' in rep, rep[:2000]
PY
grep -qF "kiln: info: ExampleIdentityPass: graph ids: 2 Identity node(s) removed" "$tmp/err.txt" \
    || { echo "FAIL: no report from on_finish_graph:"; cat "$tmp/err.txt"; fail=1; }
[ $fail = 0 ] && echo "node_pass_doc: the example compiles and runs"
exit $fail
