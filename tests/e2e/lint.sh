#!/usr/bin/env bash
# End-to-end checks of `kiln lint` and the GraphLint pass (W18888,
# docs/graph_lint.md; GE_SEMANTICS 4 and the 9.7 scenarios):
#   - every tests/data/passes/GraphLint/<case>.in.json: exit 0 and stderr equal
#     to <case>.warnings line for line (empty = no warning);
#   - the pass never edits the graph: each golden <case>.out.json equals the
#     model merely read and written back (`kiln convert`);
#   - GL10 (verification of a subgraph on its own): the pass manager's subgraph
#     runs are skipped with a debug line, the root run covers the subgraphs;
#   - options scope=output (GE's per-out-anchor sets) and max_warnings;
#   - exit codes: 1 for a missing/unreadable model or no GraphLint plugin,
#     2 for usage errors;
#   - scale: a 100k-node Assign chain sharing one memory symbol (50k writers,
#     50k readers) in a few seconds, with exactly the two unordered pairs.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
dir="$src/tests/data/passes/GraphLint"; m="$dir/manifest.json"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -f "$tmp/err.txt" ] && head -20 "$tmp/err.txt"; fail=$((fail+1)); }
run() { "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; }
w18888() { grep -c 'W18888: graph' "$tmp/err.txt"; }

# ---- golden scenarios: exact warnings, exit 0, graph untouched ---------------
for in in "$dir"/*.in.json; do
    c=$(basename "$in" .in.json)
    run "$kiln" lint "$in" -m "$m"; rc=$?
    if [ $rc -ne 0 ]; then bad "$c: rc=$rc"; continue; fi
    if ! diff "$dir/$c.warnings" "$tmp/err.txt" >"$tmp/diff.txt"; then
        bad "$c: warnings differ"; cat "$tmp/diff.txt"; continue
    fi
    "$kiln" convert "$in" "$tmp/plain.json" -m "$m" 2>/dev/null
    if ! cmp -s "$tmp/plain.json" "${in%.in.json}.out.json"; then
        bad "$c: golden output is not the unchanged graph"; continue
    fi
    ok
done
# The scenarios GE_SEMANTICS 9.7 lists must warn (or not) as GE's verdicts say.
for c in gl2_read_write_no_control gl5_two_writers gl7b_write_in_sub_read_in_root \
         gl8_read_in_sub_write_in_root gl9_both_conflict; do
    [ -s "$dir/$c.warnings" ] && ok || bad "$c: GE fails Verify, expected a W18888"
done
for c in gl1_simple gl3_read_write_direct_control gl4_read_write_indirect_control gl6_cmo \
         gl7_write_in_sub_read_in_root_control gl_if_adds gl_while_in_call; do
    [ ! -s "$dir/$c.warnings" ] && ok || bad "$c: GE's Verify succeeds, expected no warning"
done
# Warnings name both nodes, the memory symbol and who writes.
grep -q "write node \[assign\] and read node \[relu\]" "$dir/gl2_read_write_no_control.warnings" &&
    grep -q "symbol var_out_0" "$dir/gl2_read_write_no_control.warnings" &&
    grep -q "assign writes it through input 0, which its output 0 references" \
        "$dir/gl2_read_write_no_control.warnings" && ok || bad "gl2 message content"
grep -q "write node \[if\].*in subgraph 'then', assign writes its input 0" \
    "$dir/gl7b_write_in_sub_read_in_root.warnings" && ok || bad "gl7b names the inner writer"
# kiln reports every pair where GE reports one: both gl9 conflicts, all 8 in all_pairs.
[ "$(grep -c W18888 "$dir/gl9_both_conflict.warnings")" = 2 ] && ok || bad "gl9: want 2 warnings"
[ "$(grep -c W18888 "$dir/kiln_all_pairs.warnings")" = 8 ] && ok || bad "all_pairs: want 8"
grep -q "write node \[a1\] and other write node \[a2\]\|write node \[a2\] and other write node \[a1\]" \
    "$dir/kiln_all_pairs.warnings" && bad "all_pairs: a1 => a2 are ordered" || ok

# ---- GL10: a subgraph is not verified on its own ------------------------------
run "$kiln" lint "$dir/gl9_both_conflict.in.json" -m "$m" -v
if [ $? -eq 0 ] && grep -q "graph 'then' is a subgraph: not verified on its own" "$tmp/err.txt" &&
   grep -q "graph 'else' is a subgraph: not verified on its own" "$tmp/err.txt" &&
   [ "$(w18888)" = 2 ]; then ok; else bad "GL10 subgraph runs"; fi
# -q silences information, not warnings
run "$kiln" lint "$dir/gl2_read_write_no_control.in.json" -m "$m" -q
[ $? -eq 0 ] && [ "$(w18888)" = 1 ] && ok || bad "-q keeps warnings"

# ---- options --------------------------------------------------------------------
run "$kiln" lint "$dir/kiln_alias_reshape.in.json" -m "$m" --pass-opt GraphLint.scope=output
[ $? -eq 0 ] && [ "$(w18888)" = 0 ] && ok || bad "scope=output: the Reshape alias is GE-invisible"
run "$kiln" lint "$dir/gl2_read_write_no_control.in.json" -m "$m" --pass-opt GraphLint.scope=output
[ $? -eq 0 ] && [ "$(w18888)" = 1 ] && grep -q "output var:0 (symbol var_out_0)" "$tmp/err.txt" &&
    ok || bad "scope=output on gl2"
run "$kiln" lint "$dir/kiln_all_pairs.in.json" -m "$m" --pass-opt GraphLint.max_warnings=3
[ $? -eq 0 ] && [ "$(w18888)" = 3 ] && grep -q "stopped after 3 warnings" "$tmp/err.txt" &&
    ok || bad "max_warnings=3"
run "$kiln" lint "$dir/gl1_simple.in.json" -m "$m" --pass-opt GraphLint.scope=anchor
[ $? -eq 1 ] && grep -q "scope must be 'symbol' or 'output'" "$tmp/err.txt" && ok || bad "bad scope"
# kiln opt runs it like any pass (golden_passes.sh compares the graph)
run "$kiln" opt "$dir/gl5_two_writers.in.json" -m "$m" --passes GraphLint -o "$tmp/o.json"
[ $? -eq 0 ] && [ "$(w18888)" = 1 ] && ok || bad "kiln opt --passes GraphLint"

# ---- exit codes -------------------------------------------------------------------
run "$kiln" lint "$tmp/nope.json" -m "$m"
[ $? -eq 1 ] && grep -q "nope.json" "$tmp/err.txt" && ok || bad "missing model -> 1"
printf '{"kiln_graph": 1, "nodes": [' >"$tmp/broken.json"
run "$kiln" lint "$tmp/broken.json" -m "$m"
[ $? -eq 1 ] && grep -q "broken.json" "$tmp/err.txt" && ok || bad "malformed model -> 1"
printf '{"kiln_manifest": 1, "plugins": [], "stages": {}}' >"$tmp/empty.json"
run "$kiln" lint "$dir/gl1_simple.in.json" -m "$tmp/empty.json"
[ $? -eq 1 ] && grep -q "no loaded plugin provides pass GraphLint" "$tmp/err.txt" && ok ||
    bad "no GraphLint plugin -> 1"
run "$kiln" lint -m "$m"
[ $? -eq 2 ] && ok || bad "no model -> 2"
run "$kiln" lint "$dir/gl1_simple.in.json" -m "$m" -o "$tmp/x.json"
[ $? -eq 2 ] && [ ! -e "$tmp/x.json" ] && ok || bad "-o -> 2"

# ---- scale: one symbol with 50k writers and 50k readers -----------------------------
awk -v W=50000 'BEGIN {
  T = "{\"shape\": [4]}"; R = "{\"shape\": [4], \"ref_input\": 0}"
  printf "{\"kiln_graph\": 1, \"name\": \"ref_chain\", \"nodes\": [\n"
  printf "{\"name\": \"var\", \"type\": \"Variable\", \"outputs\": [%s]},\n", T
  printf "{\"name\": \"v\", \"type\": \"Variable\", \"outputs\": [%s]},\n", T
  for (i = 1; i <= W; i++) {
    prev = (i == 1) ? "var" : "a" (i - 1)
    ctrl = (i == 1) ? "" : ", \"control_inputs\": [\"r" (i - 1) "\"]"
    printf "{\"name\": \"a%d\", \"type\": \"Assign\", \"inputs\": [\"%s:0\", \"v:0\"]%s, \"outputs\": [%s]},\n", i, prev, ctrl, R
    printf "{\"name\": \"r%d\", \"type\": \"Relu\", \"inputs\": [\"a%d:0\"], \"outputs\": [%s]},\n", i, i, T
  }
  printf "{\"name\": \"late\", \"type\": \"Relu\", \"inputs\": [\"var:0\"], \"control_inputs\": [\"a%d\"], \"outputs\": [%s]},\n", W - 2, T
  printf "{\"name\": \"NetOutput\", \"type\": \"NetOutput\", \"inputs\": [\"a%d:0\", \"r%d:0\", \"late:0\"]}\n]}\n", W, W
}' >"$tmp/chain.json"
start=$(date +%s)
run timeout 120 "$kiln" lint "$tmp/chain.json" -m "$m"; rc=$?
secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] && [ "$(w18888)" = 2 ] &&
   grep -q "write node \[a49999\] and read node \[late\]" "$tmp/err.txt" &&
   grep -q "write node \[a50000\] and read node \[late\]" "$tmp/err.txt"; then ok
else bad "100k-node ref chain (rc=$rc, ${secs}s)"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
