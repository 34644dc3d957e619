#!/usr/bin/env bash
# io_reuse_lowering.sh - the model I/O reuse check (GE CheckIoReuseAddrs) in both
# runtimes, and the If/Case lowering pass BgConditionLowering seen from the CLI
# (docs/control_flow_lowering.md).
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()   { pass=$((pass+1)); }
bad()  { echo "FAIL: $*"; fail=$((fail+1)); }

python3 -c '
import struct, json, sys
for n, v in (("x", [0, 1, 2, 3]), ("y", [-1, 1, -2, 2])):
    open(sys.argv[1] + "/" + n + ".bin", "wb").write(struct.pack("<4f", *v))
    json.dump({"dims": [4], "dtype": "float32"}, open(sys.argv[1] + "/" + n + ".bin.json", "w"))' "$tmp"
model="$src/tests/data/run/io_reuse.json"
io=(--input "x=$tmp/x.bin" --input "y=$tmp/y.bin")
opt=ge.exec.outputReuseInputMemIndexes

# the build records output 0 = input 0 (flat pairs output, input); the option's string wins
"$kiln" compile "$model" -o "$tmp/c.json" 2>/dev/null &&
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["attrs"].get("output_reuse_input_mem_indexes") != [0, 0])' "$tmp/c.json" &&
    ok || bad "compile: output_reuse_input_mem_indexes is not [0, 0]"
"$kiln" compile "$model" --option "$opt=1,1|x" -o "$tmp/c2.json" 2>/dev/null &&
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["attrs"].get("output_reuse_input_mem_indexes") != "1,1|x")' "$tmp/c2.json" &&
    ok || bad "compile with $opt: the attribute is not the option's string"

for rt in sequential multistream; do
    # output 0 is input 0's memory: the build's pair and the option "0,0" pass
    "$kiln" run "$model" -q --runtime "$rt" "${io[@]}" 2>"$tmp/err" && ok ||
        bad "$rt: run with the build's pair failed: $(cat "$tmp/err")"
    "$kiln" run "$model" -q --runtime "$rt" "${io[@]}" --option "$opt=0,0" 2>"$tmp/err" && ok ||
        bad "$rt: $opt=0,0 failed: $(cat "$tmp/err")"
    # skipped segments (negative, empty, not numeric) leave nothing to check
    "$kiln" run "$model" -q --runtime "$rt" "${io[@]}" --option "$opt=1,-1||-2,0|a,b|3" 2>"$tmp/err" && ok ||
        bad "$rt: a string of skipped segments failed: $(cat "$tmp/err")"
    # output 1 (Relu) has memory of its own: different addresses -> error naming the pair
    "$kiln" run "$model" -q --runtime "$rt" "${io[@]}" --option "$opt=1,1" --output-dir "$tmp/o_$rt" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "io reuse check: output 1 address .* must be input 1 address .*'1,1'" "$tmp/err" &&
        [ ! -e "$tmp/o_$rt/output.0.bin" ] && ok ||
        bad "$rt: $opt=1,1 with non-aliased buffers: rc=$rc $(cat "$tmp/err")"
    # an index out of range
    "$kiln" run "$model" -q --runtime "$rt" "${io[@]}" --option "$opt=0,0|0,5" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "output index 5 out of range, the model has 2 outputs" "$tmp/err" && ok ||
        bad "$rt: $opt=0,5: rc=$rc $(cat "$tmp/err")"
done

# ---- the lowering pass: If of tests/data/run/if.json ---------------------------------
bgplug=(--plugin "$(dirname "$kiln")/../lib/kiln/plugins/libkiln_bg_condition.so")
"$kiln" opt "$src/tests/data/run/if.json" "${bgplug[@]}" --passes BgConditionLowering \
    -o "$tmp/l.json" 2>"$tmp/err" && ok || bad "BgConditionLowering failed: $(cat "$tmp/err")"
python3 - "$tmp/l.json" <<'PY' && ok || bad "lowered If: wrong form"
import json, sys
g = json.load(open(sys.argv[1]))
nodes = {n["name"]: n for n in g["nodes"]}
sel = nodes["sel"]
assert sel["type"] == "If" and sel["inputs"] == ["cond:0", "x:0"], sel.get("inputs")
roles = list(sel["subgraphs"])
assert roles == ["cond", "then_branch", "else_branch"], roles
types = lambda sg: sorted(n["type"] for n in sg["nodes"])
cond = sel["subgraphs"]["cond"]
assert types(cond) == sorted(["InnerData", "SwitchNotify", "WatcherPlaceholder", "WaitAnyone",
                              "BranchPivot", "BranchPivot", "BranchDone", "BranchDone"]), types(cond)
# then returns Relu (guarded: the guarder moves out), else a Const: +1 reference
then = sel["subgraphs"]["then_branch"]
assert types(then) == ["InnerData", "InnerNetOutput", "Relu"], types(then)
els = sel["subgraphs"]["else_branch"]
assert types(els) == ["Const", "IdentityAddr", "InnerNetOutput"], types(els)
ia = [n for n in els["nodes"] if n["type"] == "IdentityAddr"][0]
assert ia["name"] == "sel_Subgraph_1_AddResRef_", ia["name"]
free = [n for n in g["nodes"] if n["type"] == "FreeMemory"]
assert len(free) == 1 and free[0]["inputs"] == ["sel:0"], free
PY
# auto_guard off: no guarder anywhere, no IdentityAddr
"$kiln" opt "$src/tests/data/run/if.json" "${bgplug[@]}" --passes 'BgConditionLowering{auto_guard=false}' \
    -o "$tmp/l2.json" 2>"$tmp/err" && ! grep -q 'IdentityAddr\|FreeMemory' "$tmp/l2.json" && ok ||
    bad "auto_guard=false: $(cat "$tmp/err")"

echo "io_reuse_lowering: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
