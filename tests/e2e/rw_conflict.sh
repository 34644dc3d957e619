#!/usr/bin/env bash
# HandleMemoryRWConflict / CheckRWConflict checks beyond the golden diff
# (docs/memory_rw_conflict.md):
#   1. GE's unit-test expectations (GE_SEMANTICS 9.2) asserted on the golden
#      outputs, so the goldens are not merely self-consistent;
#   2. idempotence of every golden case not listed in NO_IDEMPOTENCE, and
#      convergence after one more run for those that are;
#   3. the 4x3 decision matrix, one generated graph per cell;
#   4. explanations (-v, --report) name the matrix cell / rule;
#   5. CheckRWConflict's has_conflict on R6 and on a wrong graph.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
dir="$src/tests/data/passes/HandleMemoryRWConflict"; m=(-m "$dir/manifest.json")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()   { pass=$((pass+1)); }
bad()  { echo "FAIL: $*"; fail=$((fail+1)); }
check() { # check NAME FILE JQ-EXPR : the expression must print true
    local r; r=$(jq -r "$3" "$2" 2>&1)
    if [ "$r" = "true" ]; then ok; else bad "$1 ($3 -> $r)"; fi
}
opt() { "$kiln" opt "$1" "${m[@]}" --passes "$2" -o "$3" 2>"$tmp/err"; }

# ---- 1. GE expectations on the goldens -----------------------------------
g() { echo "$dir/$1.out.json"; }
# producer of input i of node n (root graph)
P='def prod($n; $i): (.nodes[] | select(.name == $n) | .inputs[$i] | split(":")[0]) as $p
     | (.nodes[] | select(.name == $p));
   def sub($s): [.. | objects | select(.name? == $s and has("nodes"))][0];
   def ids: [.nodes[] | select(.type == "Identity")] | length;'
check R1  "$(g r01_readonly_scope_write)" "$P prod(\"allreduce\";0).type == \"Identity\" and prod(\"allreduce\";0).control_inputs == [\"ctrl_const\"] and prod(\"if\";0).type == \"Const\""
check R2  "$(g r02_identity_split)" "$P prod(\"allreduce\";0).type == \"Identity\" and prod(\"allreduce\";0).control_inputs == [\"const1\"] and prod(\"cast1\";0).name == \"var\" and prod(\"if\";0).name == \"var\" and ([.nodes[].name] | index(\"identity\")) == null"
check R3  "$(g r03_mul_1to2_scope_write)" "$P (.nodes | length) == 3 and prod(\"allreduce\";0).type == \"Identity\" and prod(\"allreduce\";1).name == \"mul\""
check R4  "$(g r04_fifo_without_subgraph)" "$P (.nodes | length) == 5 and prod(\"foo1\";0).type == \"Identity\" and prod(\"foo2\";0).type == \"Identity\""
check R5  "$(g r05_fifo_with_subgraph)" "$P (.nodes | length) == 5 and prod(\"foo1\";0).type == \"Identity\" and prod(\"if\";0).name == \"const1\""
check R6  "$(g r06_var_direct_to_partitioned_call)" "$P ids == 0 and (sub(\"sub_branch\") | ids) == 0"
check R7  "$(g r07_with_subgraphs)" "$P (.nodes | length) == 8 and prod(\"allreduce\";0).name == \"id1\" and (sub(\"else_branch\").nodes | length) == 5 and (sub(\"else_branch\") | prod(\"netoutput\";0).type) == \"Identity\" and (sub(\"then_branch\").nodes | length) == 3"
check R8  "$(g r08_with_if_subgraphs)" "$P (.nodes | length) == 8 and (sub(\"else_branch\") | prod(\"netoutput\";0).type) == \"Identity\" and (sub(\"then_branch\") | ids) == 0"
check R9  "$(g r09_softread_to_multi_scope_write)" "$P prod(\"allreduce\";0).type == \"Identity\" and prod(\"allreduce2\";0).type == \"Identity\""
check R10 "$(g r10_readonly_to_writable)" "$P prod(\"assign\";0).type == \"Identity\" and prod(\"assign\";1).name == \"var1\""
check R11 "$(g r11_root_data_to_writable)" "$P ids == 0"
check R12 "$(g r12_data_to_scope_write)" "$P prod(\"allreduce1\";0).type == \"Identity\" and prod(\"allreduce2\";0).type == \"Identity\" and prod(\"allreduce2\";1).name == \"data2\""
check R13 "$(g r13_mul_ref_to_scope_write)" "$P prod(\"allreduce\";0).name == \"mul_ref2\" and prod(\"allreduce\";1).type == \"Identity\""
check R14 "$(g r14_mul_ref_to_scope_write2)" "$P prod(\"allreduce\";0).type == \"Identity\" and (prod(\"allreduce\";0) | [.input_descs[0], .outputs[0]] | all(.attrs.ref_var_src_var_name == null and .ref_input == null))"
check R15 "$(g r15_clean_reuse_input)" "$P prod(\"allreduce\";0) | [.input_descs[0], .outputs[0]] | all(.attrs.reuse_input == false and .attrs.reuse_input_index == 0)"
check R16 "$(g r16_const_to_scope_write)" "$P prod(\"allreduce\";0).type == \"Identity\""
check const_to_assign "$(g const_to_assign)" "$P prod(\"assign\";0).name == \"c_Identity0\" and prod(\"assign\";0).inputs == [\"c:0\"] and prod(\"add\";0).name == \"c\""
check skip_attr "$(g skip_rw_conflict_attr)" "$P prod(\"handled\";0).name == \"const\" and prod(\"allreduce\";0).type == \"Identity\""
check cannot_be_deleted "$(g cannot_be_deleted_skip)" "$P ids == 1 and prod(\"allreduce1\";0).name == \"keep\" and prod(\"allreduce2\";0).name == \"keep\""
check remove_no_use "$(g remove_no_use_identity)" "$P prod(\"relu\";0).name == \"x\" and prod(\"reader\";0).name == \"rw\" and prod(\"merge\";0).name == \"merge_feed\""
check while "$(g while_scope_input)" "$P prod(\"while\";0).type == \"Identity\" and prod(\"while\";1).name == \"x\" and (sub(\"while_body\") | ids) == 0"
check nested "$(g nested_subgraph_scope_write)" "$P prod(\"pc_outer\";0).type == \"Identity\" and (sub(\"outer\") | ids) == 0 and (sub(\"inner\") | ids) == 0"

# ---- 2. idempotence ------------------------------------------------------
noidem=$(sed -n 's/^\([A-Za-z0-9_]*\):.*/\1/p' "$dir/NO_IDEMPOTENCE" 2>/dev/null)
for want in "$dir"/*.out.json; do
    c=$(basename "$want" .out.json)
    opt "$want" HandleMemoryRWConflict "$tmp/again.json" || { bad "$c: rerun failed"; continue; }
    if grep -qx "$c" <<<"$noidem"; then
        # Not idempotent in GE: one more run must converge.
        opt "$tmp/again.json" HandleMemoryRWConflict "$tmp/third.json" &&
            cmp -s "$tmp/again.json" "$tmp/third.json" && ok || bad "$c: does not converge"
    else
        cmp -s "$want" "$tmp/again.json" && ok || bad "$c: not idempotent"
    fi
done

# ---- 3. the decision matrix, cell by cell ---------------------------------
# Producers: ROC = Const with one consumer; RO = Relu with a plain reader first;
# SR = Relu with one consumer; W = Variable with a plain reader first (so the
# single-user skip never applies).  Consumers: RO = Relu, W = Assign.ref,
# SW = HcomAllReduce with _input_mutable.
producer() {
    case $1 in
    ROC) echo '{"name":"p","type":"Const","outputs":[{"shape":[4]}]},' ;;
    RO)  echo '{"name":"p","type":"Relu","inputs":["x:0"],"outputs":[{"shape":[4]}]},{"name":"r2","type":"Relu","inputs":["p:0"],"outputs":[{"shape":[4]}]},' ;;
    SR)  echo '{"name":"p","type":"Relu","inputs":["x:0"],"outputs":[{"shape":[4]}]},' ;;
    W)   echo '{"name":"p","type":"Variable","outputs":[{"shape":[4]}]},{"name":"r2","type":"Relu","inputs":["p:0"],"outputs":[{"shape":[4]}]},' ;;
    esac
}
consumer() {
    case $1 in
    RO) echo '{"name":"q","type":"Relu","inputs":["p:0"],"outputs":[{"shape":[4]}]}' ;;
    W)  echo '{"name":"q","type":"Assign","inputs":["p:0","x:0"],"outputs":[{"shape":[4],"ref_input":0}]}' ;;
    SW) echo '{"name":"q","type":"HcomAllReduce","attrs":{"_input_mutable":true},"inputs":["p:0"],"outputs":[{"shape":[4]}]}' ;;
    esac
}
# expected: 1 = Identity before q:0 (GE_SEMANTICS 2.4)
while read -r o i want; do
    f="$tmp/m_${o}_${i}.json"
    printf '{"kiln_graph":1,"name":"m","nodes":[{"name":"x","type":"Data","attrs":{"index":0},"outputs":[{"shape":[4]}]},%s%s]}\n' \
        "$(producer "$o")" "$(consumer "$i")" >"$f"
    opt "$f" HandleMemoryRWConflict "$tmp/m_out.json" || { bad "matrix $o x $i: kiln failed"; cat "$tmp/err"; continue; }
    got=$(jq -r '[.nodes[] | select(.name == "q") | .inputs[0] | startswith("p_Identity")] | .[0] | if . then 1 else 0 end' "$tmp/m_out.json")
    [ "$got" = "$want" ] && ok || bad "matrix $o x $i: Identity=$got, want $want"
done <<'EOF'
ROC RO 0
ROC W 1
ROC SW 1
RO RO 0
RO W 0
RO SW 1
SR RO 0
SR W 0
SR SW 0
W RO 0
W W 0
W SW 1
EOF

# ---- 4. explanations --------------------------------------------------------
"$kiln" opt "$dir/const_to_assign.in.json" "${m[@]}" --passes HandleMemoryRWConflict \
    -o "$tmp/o.json" -v --report "$tmp/r.json" 2>"$tmp/v.txt"
grep -q 'c_Identity0: RW conflict: output c:0 (Const, ReadOnlyConst) consumed by assign:0 (Assign, Writeable input); matrix ReadOnlyConst x Writeable = Identity' "$tmp/v.txt" && ok || bad "explain -v: $(cat "$tmp/v.txt")"
check report_explain "$tmp/r.json" '[.explanations[] | select(.pass == "HandleMemoryRWConflict")] | length == 1 and .[0].node == "c_Identity0"'
"$kiln" opt "$dir/r02_identity_split.in.json" "${m[@]}" --passes HandleMemoryRWConflict \
    -o "$tmp/o.json" --report "$tmp/r2.json" 2>/dev/null
check report_split "$tmp/r2.json" '[.explanations[].why] | (any(startswith("SplitIdentity")) and any(startswith("RemoveNoUseIdentity")))'
check report_counts "$tmp/r2.json" '[.explanations[]] | length == 2'
"$kiln" opt "$dir/r07_with_subgraphs.in.json" "${m[@]}" --passes HandleMemoryRWConflict \
    -o "$tmp/o.json" --report "$tmp/r7.json" 2>/dev/null
check report_subgraph "$tmp/r7.json" '.explanations[0].graph == "else_branch" and (.explanations[0].why | test("not optimizable"))'

# ---- 5. CheckRWConflict -----------------------------------------------------
"$kiln" opt "$dir/r06_var_direct_to_partitioned_call.in.json" "${m[@]}" --passes CheckRWConflict -o "$tmp/c.json" 2>"$tmp/c.txt"
grep -q 'has_conflict=false' "$tmp/c.txt" && ok || bad "R6 has_conflict: $(cat "$tmp/c.txt")"
cat >"$tmp/wrong.json" <<'EOF'
{"kiln_graph": 1, "name": "wrong_graph", "nodes": [
  {"name": "var", "type": "Variable", "outputs": [{"shape": [4]}]},
  {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [4]}]},
  {"name": "pc", "type": "PartitionedCall", "inputs": ["var:0", "x:0"], "outputs": [{"shape": [4]}],
   "subgraphs": {"f": {"name": "sub", "nodes": [
     {"name": "data0", "type": "Data", "attrs": {"_parent_node_index": 0}, "outputs": [{"shape": [4]}]},
     {"name": "data1", "type": "Data", "attrs": {"_parent_node_index": 1}, "outputs": [{"shape": [4]}]},
     {"name": "assign", "type": "Assign", "inputs": ["data0:0", "data1:0"], "outputs": [{"shape": [4], "ref_input": 0}]},
     {"name": "allreduce", "type": "HcomAllReduce", "attrs": {"_input_mutable": true}, "inputs": ["data0:0"], "outputs": [{"shape": [4]}]},
     {"name": "add", "type": "Add", "inputs": ["assign:0", "allreduce:0"], "outputs": [{"shape": [4]}]},
     {"name": "netoutput", "type": "NetOutput", "inputs": ["add:0"]}]}}},
  {"name": "out", "type": "NetOutput", "inputs": ["pc:0"]}]}
EOF
"$kiln" opt "$tmp/wrong.json" "${m[@]}" --passes CheckRWConflict -o "$tmp/c.json" 2>"$tmp/c.txt"
grep -q 'has_conflict=true' "$tmp/c.txt" && grep -q 'pc:0 (InvalidRWType)' "$tmp/c.txt" && ok ||
    bad "wrong graph has_conflict: $(cat "$tmp/c.txt")"
"$kiln" opt "$dir/r16_const_to_scope_write.in.json" "${m[@]}" --passes CheckRWConflict -o "$tmp/c.json" 2>"$tmp/c.txt"
grep -q 'no subgraphs, nothing checked' "$tmp/c.txt" && ok || bad "no-subgraph check: $(cat "$tmp/c.txt")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
