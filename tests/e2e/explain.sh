#!/usr/bin/env bash
# "Why is this copy here?": for every golden case of every pass, each node the
# pass inserted (present in the output, absent from the input) must appear in
# the --report explanations, attributed to that pass with a non-empty rule.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0; checked=0
for in in "$src"/tests/data/passes/*/*.in.json; do
    p=$(basename "$(dirname "$in")"); dir=$(dirname "$in"); m=()
    [ -f "$dir/manifest.json" ] && m=(-m "$dir/manifest.json")
    if ! "$kiln" opt "$in" "${m[@]}" --passes "$p" -o "$tmp/out.json" --report "$tmp/r.json" \
        2>"$tmp/err"; then   # every golden case must compile
        echo "FAIL $p/$(basename "$in"): kiln opt failed: $(head -c 300 "$tmp/err")"
        fail=$((fail+1)); continue
    fi
    if python3 - "$in" "$tmp/out.json" "$tmp/r.json" "$p" >"$tmp/py.txt" <<'PY'
import json, sys
def names(g):
    out = set()
    for n in g["nodes"]:
        out.add(n["name"])
        for sg in n.get("subgraphs", {}).values():
            out |= names(sg)
    return out
gin, gout, rep, pas = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])),
                       json.load(open(sys.argv[3])), sys.argv[4])
added = names(gout) - names(gin)
explained = {e["node"] for e in rep["explanations"] if e["pass"] == pas and e["why"].strip()}
missing = sorted(added - explained)
if missing:
    print("unexplained nodes:", ", ".join(missing))
    sys.exit(1)
PY
    then pass=$((pass+1)); else echo "FAIL $p/$(basename "$in" .in.json): $(cat "$tmp/py.txt")"; fail=$((fail+1)); fi
    checked=$((checked+1))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$checked" -gt 0 ]
