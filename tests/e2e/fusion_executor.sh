#!/usr/bin/env bash
# fusion_executor.sh - the FusionPassExecutor passes in the default pipeline
# (docs/fusion.md):
#   1. kiln manifest check: the five executor passes sit where GE's compiler
#      flow calls them (prepare around InferShapes, optimize_original first,
#      second and last);
#   2. examples/relu_relu_fusion.c built as a plugin: `kiln compile` fuses
#      Relu(Relu(x)) at RunCustomPassAfterOriginGraphOptimize (--stats,
#      --report counters), and `kiln run` gives the same output bytes fused
#      and unfused (ge.optimizationSwitch=ReluReluFusionPass:off);
#   3. ge.fusionSwitchFile: ALL off leaves the graph alone, a per-name "on"
#      beats it, a malformed file fails naming the file.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }

# 1. placement
"$kiln" manifest check "$src/manifests/default.json" >"$tmp/m.txt" 2>&1 || bad "manifest check"
order=$(awk '/^stage/ {st=$3} /^ +[0-9]+\. / {print st $1 $2}' "$tmp/m.txt" |
    grep -E 'RunCustomPass|RunBuiltin|InferShapes' | tr '\n' ' ')
want="prepare:1.RunCustomPassBeforeInferShape prepare:2.InferShapes prepare:3.RunCustomPassAfterInferShape optimize_original:1.RunBuiltinFusionPasses optimize_original:2.RunCustomPassAfterBuiltinFusion optimize_original:8.RunCustomPassAfterOriginGraphOptimize "
if [ "$order" = "$want" ]; then ok; else bad "executor passes placed as '$order', want '$want'"; fi

# 2. the example plugin, fused vs unfused
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -DKILN_PLUGIN -I"$src/plugin-api" \
    -o "$tmp/libexample_fusion.so" "$src/examples/relu_relu_fusion.c" || { echo "FAIL cc"; exit 1; }
model="$src/examples/relu_relu.json"
in=(--input "$src/examples/residual_block_x.bin")
if "$kiln" compile "$model" --plugin "$tmp/libexample_fusion.so" -o "$tmp/c.json" \
        --report "$tmp/r.json" --stats 2>"$tmp/c.err"; then ok; else bad "compile"; cat "$tmp/c.err"; fi
grep -qF "optimize_original: ReluReluFusionPass: effected = 1" "$tmp/c.err" && ok ||
    bad "--stats: no effected = 1"
python3 - "$tmp/r.json" <<'PY' && ok || bad "--report counters"
import json, sys
r = json.load(open(sys.argv[1]))
e = [p for p in r["passes"] if p["pass"] == "RunCustomPassAfterOriginGraphOptimize"]
assert len(e) == 1 and e[0]["stats"] == {"ReluReluFusionPass.matched": 1,
                                         "ReluReluFusionPass.effected": 1}, e
PY
"$kiln" run "$model" --plugin "$tmp/libexample_fusion.so" "${in[@]}" --output-dir "$tmp/fused" \
    >/dev/null 2>"$tmp/f.err" && ok || { bad "run fused"; cat "$tmp/f.err"; }
"$kiln" run "$model" --plugin "$tmp/libexample_fusion.so" "${in[@]}" --output-dir "$tmp/unfused" \
    --option ge.optimizationSwitch=ReluReluFusionPass:off >/dev/null 2>"$tmp/u.err" && ok ||
    { bad "run unfused"; cat "$tmp/u.err"; }
if [ -n "$(ls "$tmp/fused" 2>/dev/null)" ] && diff -r "$tmp/fused" "$tmp/unfused" >/dev/null; then ok
else bad "fused and unfused outputs differ"; fi

# 3. the switch file
relus() { # count Relu nodes after the executor pass with session options "$@"
    "$kiln" opt "$model" --plugin "$tmp/libexample_fusion.so" \
        --passes RunCustomPassAfterOriginGraphOptimize -o "$tmp/o.json" "$@" 2>"$tmp/o.err" ||
        { echo "error"; return; }
    grep -c '"type": "Relu"' "$tmp/o.json"
}
echo '{"Switch": {"GraphFusion": {"ALL": "off"}}}' >"$tmp/all_off.json"
echo '{"Switch": {"GraphFusion": {"ALL": "off", "ReluReluFusionPass": "on"}}}' >"$tmp/name_on.json"
echo '{"Switch": {"GraphFusion": ' >"$tmp/broken.json"
[ "$(relus)" = 1 ] && ok || bad "default: not fused"
[ "$(relus --option ge.fusionSwitchFile="$tmp/all_off.json")" = 2 ] && ok || bad "ALL off: fused"
[ "$(relus --option ge.fusionSwitchFile="$tmp/name_on.json")" = 1 ] && ok || bad "name on: not fused"
[ "$(relus --option ge.fusionSwitchFile="$tmp/broken.json")" = error ] && ok || bad "broken file accepted"
grep -qF "ge.fusionSwitchFile $tmp/broken.json" "$tmp/o.err" && ok ||
    { bad "broken file: message"; cat "$tmp/o.err"; }

echo "fusion_executor: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
