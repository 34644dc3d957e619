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
echo "== kiln compile $c2 -v   (GRAPH_FORMAT.md's RW-conflict example: why is each copy here?)"
"$kiln" compile "$c2" -o "$(dirname "$out")/const_to_assign.compiled.json" -v 2>&1 | grep -v ': stat: '
echo "== kiln lint $c2   (W18888 on the uncompiled graph: assign and add race on c:0)"
"$kiln" lint "$c2"
