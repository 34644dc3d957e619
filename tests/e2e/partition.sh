#!/usr/bin/env bash
# The partition stage (docs/partition.md): EnginePlacer and EnginePartitioner
# checked from outside through the documented --report keys (placement,
# partitions, partition_boundaries) and the compiled graph, on the graphs of
# tests/data/partition with the test engines of tests/plugins/tp_engine_fake.c
# (aicore: FakeOpNpu, rts: FakeOpRts, vector: formats and supports()).
# GE scenarios: EP1-EP7 (GE_SEMANTICS_BUILD 1.3), PT1-PT5 (2.4); HasSecondPath
# cases; pins that change the partition; bad input.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
data="$src/tests/data/partition"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
export KILN_PLUGIN_PATH="$tp"

# The default manifest without its engines (tp_engine_fake registers engines
# named like the built-in ones), plus the fake engines.
python3 - "$src/manifests/default.json" "$tmp/base.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["plugins"] = [p for p in m["plugins"] if "engines" not in p.get("provides", {})]
json.dump(m, open(sys.argv[2], "w"))
PY
cat > "$tmp/m.json" <<JSON
{"kiln_manifest": 1, "extends": "$tmp/base.json",
 "plugins": [{"path": "libtp_engine_fake.so", "required": true}],
 "stages": {"partition": ["EnginePlacer", "EnginePartitioner"]}}
JSON

# The pass options: EnginePartitioner.mode, EnginePlacer.priority (also from a manifest).
cat > "$tmp/second.json" <<JSON
{"kiln_manifest": 1, "extends": "$tmp/m.json",
 "stages": {"partition": ["EnginePlacer", {"pass": "EnginePartitioner", "options": {"mode": "second"}}]}}
JSON

# compile NAME GRAPH [kiln options...]: report in $tmp/NAME.r.json, graph in $tmp/NAME.o.json
compile() {
    local name=$1 g=$2; shift 2
    local man="$tmp/m.json"
    if [ "${1:-}" = -m ]; then man=$2; shift 2; fi
    "$kiln" compile -q -m "$man" "$data/$g.json" -o "$tmp/$name.o.json" \
        --report "$tmp/$name.r.json" "$@" 2>"$tmp/$name.err"
}
# check NAME PYTHON-EXPR...: each expression over r (report), g (graph), parts(graph) holds
check() {
    local name=$1; shift
    python3 - "$tmp/$name.r.json" "$tmp/$name.o.json" "$name" "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2])); name = sys.argv[3]
def parts(graph=None):
    return [p for p in r["partitions"] if graph is None or p["graph"] == graph]
def engines(graph=None):
    return [p["engine"] for p in parts(graph)]
def nodes(graph=None):
    return [p["nodes"] for p in parts(graph)]
def bound(a, b):
    return [x["reason"] for x in r["partition_boundaries"] if x["from"] == a and x["to"] == b]
def node(n, graph=g):
    for x in graph["nodes"]:
        if x["name"] == n:
            return x
    raise KeyError(n)
def engine_of(n):
    x = node(n)
    return x.get("engine", x.get("attrs", {}).get("_kiln_engine"))
def attr(n, k):
    return node(n).get("attrs", {}).get(k)
bad = 0
for e in sys.argv[4:]:
    try:
        v = eval(e)
    except Exception as ex:
        v = "%s: %s" % (type(ex).__name__, ex)
    if v is not True:
        print("FAIL %s: %s -> %r" % (name, e, v)); bad += 1
sys.exit(1 if bad else 0)
PY
}
# expect NAME GRAPH WANT-SUBSTRING [options]: the compile fails (exit 1), stderr says WANT, no output
expect_error() {
    local name=$1 g=$2 want=$3; shift 3
    compile "$name" "$g" "$@"; local rc=$?
    if [ $rc -ne 1 ]; then bad "$name: exit $rc, want 1"; cat "$tmp/$name.err"; return; fi
    grep -qF -- "$want" "$tmp/$name.err" && ok || { bad "$name: stderr lacks '$want':"; cat "$tmp/$name.err"; }
    [ -e "$tmp/$name.o.json" ] && bad "$name: output written" || ok
}
run() { # run NAME GRAPH [options] -- checks...
    local name=$1 g=$2; shift 2
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    if ! compile "$name" "$g" "${opts[@]}"; then bad "$name: compile failed"; cat "$tmp/$name.err"; return; fi
    check "$name" "$@" && ok || bad "$name"
}

# PT1: two engines in a chain -> 3 partitions besides the input nodes (aicore, rts, NetOutput)
run pt1 pt1_chain -- \
    'engines() == ["inputNodesSubGraph", "aicore", "rts", "ge_local"]' \
    'nodes()[1] == ["fused_op1", "fused_op2"] and nodes()[2] == ["fused_op3", "fused_op4", "fused_op5"]' \
    '[p["name"] for p in parts()] == ["partition0_rank0_inputNodesSubGraph", "partition0_rank1_new_sub_graph1", "partition0_rank2_new_sub_graph2", "partition0_rank3_new_sub_graph3"]' \
    'bound("fused_op2", "fused_op3") == ["engine"] and bound("_arg_0", "fused_op1") == ["input_nodes"]' \
    'parts()[1]["inputs"] == 1 and parts()[1]["outputs"] == 1' \
    'r["placement"] == {"ge_local": 2, "aicore": 2, "rts": 3}' \
    'attr("fused_op4", "_kiln_partition") == 2 and engine_of("fused_op4") == "rts"' \
    'g["attrs"]["_kiln_partition_engines"] == engines()'
# PT2: the user stream label splits the rts run; 4 partitions besides the input nodes, [2] labelled
run pt2 pt2_user_label -m "$tmp/second.json" -- \
    'len(parts()) - 1 == 4' \
    'parts()[3]["stream_label"] == "label1" and parts()[3]["nodes"] == ["op4", "op5"]' \
    'bound("op3", "op4") == ["stream_label"]'
# PT3: op1 and op3 share an engine but op1 -> op2 -> op3 is a second path
run pt3 pt3_second_path -- \
    'len(parts()) - 1 == 4' 'bound("op1", "op3") == ["second_path"]' \
    'nodes()[1] == ["op1"] and nodes()[3] == ["op3"]'
# PT4: three chains into one op, all aicore: one partition in both modes
for mode in 0 3; do
    run pt4_$mode pt4_three_chains --option ge.topoSortingMode=$mode -- \
        'len(parts()) - 1 == 2' \
        'sorted(nodes()[1]) == ["fused_op%d" % i for i in range(1, 8)]' \
        'nodes()[2] == ["Node_Output"]'
done
# PT5: a data node loses its _user_stream_label (on the node itself); relu keeps its own
run pt5 pt5_data_label -m "$tmp/second.json" -- \
    'attr("data", "_user_stream_label") == ""' 'attr("relu", "_user_stream_label") == "label1"'
# EP1: both _lxfusion attributes place the node on their engine
run ep1 ep1_lx_attrs -- 'engine_of("mock") == "rts"' \
    'any(e["node"] == "mock" and "_lxfusion_engine_name" in e["why"] for e in r["explanations"])'
# EP2: an op no engine supports: the error names each engine and why
expect_error ep2 ep2_unsupported "no engine supports node mock (op mock_op_type): vector: no op entry for mock_op_type; aicore: no op entry for mock_op_type; rts: no op entry for mock_op_type"
# ... the default manifest fails the same way, listing every loaded engine (hccl too)
"$kiln" compile -m "$src/manifests/default.json" "$data/ep2_unsupported.json" -o "$tmp/ep2e.o.json" \
    2>"$tmp/ep2e.err" && bad "ep2 default: compile succeeded" || ok
grep -q "no engine supports node mock (op mock_op_type): aicore: no op entry for mock_op_type; vector: no op entry for mock_op_type; rts: no op entry for mock_op_type; hostcpu: no op entry for mock_op_type; hccl: no op entry for mock_op_type" "$tmp/ep2e.err" && ok || bad "ep2 default: no error"
[ ! -e "$tmp/ep2e.o.json" ] && ok || bad "ep2 default: output written"
# ... and unsupported=warn leaves it unplaced with that warning
"$kiln" compile -m "$src/manifests/default.json" "$data/ep2_unsupported.json" -o "$tmp/ep2w.o.json" \
    --pass-opt EnginePlacer.unsupported=warn \
    --report "$tmp/ep2w.r.json" 2>"$tmp/ep2w.err" && ok || bad "ep2 warn: compile failed"
grep -q "no engine supports node mock (op mock_op_type), left unplaced: aicore: no op entry for mock_op_type; vector: no op entry for mock_op_type; rts: no op entry for mock_op_type; hostcpu: no op entry" "$tmp/ep2w.err" && ok || bad "ep2 warn: no warning"
check ep2w '"mock" in nodes()[[p["engine"] for p in parts()].index("unplaced")]' && ok || bad ep2w
# EP3/EP4: _kiln_engine (the op's engine) wins over the _lxfusion attributes, which are kept
run ep4 ep4_pin_and_lx -- 'engine_of("op") == "rts"' 'attr("op", "_lxfusion_engine_name") == "aicore"' \
    'attr("op", "_lxfusion_op_kernel_lib_name") == "attr_kernel_name"'
# EP3 (GE's Apply): the placement written back as both _lxfusion attributes, the kernel
# lib being the engine; a GE-local op too; the EP1 pair is left as it is
run ep3 pt1_chain -- 'attr("fused_op1", "_lxfusion_engine_name") == "aicore"' \
    'attr("fused_op1", "_lxfusion_op_kernel_lib_name") == "aicore"' \
    'attr("fused_op3", "_lxfusion_engine_name") == "rts" and attr("fused_op3", "_lxfusion_op_kernel_lib_name") == "rts"' \
    'attr("Node_Output", "_lxfusion_engine_name") == "ge_local"'
run ep3_pair ep1_lx_attrs -- 'engine_of("mock") == "rts"' \
    'attr("mock", "_lxfusion_engine_name") == "rts" and attr("mock", "_lxfusion_op_kernel_lib_name") == "kernel_name"'
# a pin (_kiln_engine, GE's op engine) fills the absent attributes only
python3 - "$data/ep4_pin_and_lx.json" "$tmp/ep3_pin.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "op":
        del n["attrs"]["_lxfusion_engine_name"]
json.dump(g, open(sys.argv[2], "w"))
for n in g["nodes"]:
    if n["name"] == "op":
        del n["attrs"]["_lxfusion_op_kernel_lib_name"]
json.dump(g, open(sys.argv[2].replace(".json", "2.json"), "w"))
PY
"$kiln" compile -q -m "$tmp/m.json" "$tmp/ep3_pin.json" -o "$tmp/ep3_pin.o.json" &&
"$kiln" compile -q -m "$tmp/m.json" "$tmp/ep3_pin2.json" -o "$tmp/ep3_pin2.o.json" &&
python3 - "$tmp/ep3_pin.o.json" "$tmp/ep3_pin2.o.json" <<'PY' && ok || bad "ep3: pin fills absent attributes"
import json, sys
a, b = ({n["name"]: n.get("attrs", {}) for n in json.load(open(f))["nodes"]}["op"] for f in sys.argv[1:3])
assert a["_lxfusion_engine_name"] == "rts" and a["_lxfusion_op_kernel_lib_name"] == "attr_kernel_name", a
# GE's EP3: op engine and kernel given, no attributes: both written
assert b["_lxfusion_engine_name"] == "rts" and b["_lxfusion_op_kernel_lib_name"] == "rts", b
PY
# EP6: only _lxfusion_engine_name: ignored, so the unknown op fails
expect_error ep6 ep6_only_engine_attr "no engine supports node mock"
# EP7: an empty graph: nothing placed, no partition
run ep7 ep7_empty -- 'r["placement"] == {}' 'parts() == []'
# bad input: a pin naming an unknown engine, a priority naming one
expect_error pin_unknown pin_unknown "node op (FakeOpNpu) is pinned by _kiln_engine to engine 'nosuch', which no loaded plugin provides (engines: vector, aicore, rts, ge_local)"
expect_error prio_unknown priority "option priority names engine 'gpu'" --pass-opt EnginePlacer.priority=rts,gpu
expect_error mode_bad pt1_chain "option mode is 'third'" --pass-opt EnginePartitioner.mode=third
# composite then atomic (GE kCompositeEnginePartitioning, then kAtomicEnginePartitioning):
# aicore and vector share the composite engine ffts: a1 v1 a2 a3 form one composite
# partition, split by atomic engine inside it (a1 | v1 | a2 a3: v1 is a second path a1 -> a2);
# r1 and a4 are composite partitions of their own
CO=EnginePartitioner.composite=ffts:aicore+vector
# the report's composite_partitions of that partitioning: number, engine, atomic ranks, nodes
COMP_REPORT='[(c["composite"], c["engine"], c["ranks"], c["nodes"]) for c in r["composite_partitions"]] == [(0, "ffts", [1, 2, 3], 4), (1, "rts", [4], 1), (2, "ffts", [5], 1), (3, "ge_local", [6], 1)]'
run comp composite --pass-opt $CO -- 'nodes()[1:] == [["a1"], ["v1"], ["a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]' \
    'engines()[1:4] == ["aicore", "vector", "aicore"]' \
    'g["attrs"]["_kiln_partition_composite_groups"] == [-1, 0, 0, 0, 1, 2, 3]' \
    'g["attrs"]["_kiln_partition_composite_engines"] == ["", "ffts", "ffts", "ffts", "rts", "ffts", "ge_local"]' \
    "$COMP_REPORT" '[p["composite"] for p in parts()] == [-1, 0, 0, 0, 1, 2, 3]' \
    '[p["composite_engine"] for p in parts()][1:3] == ["ffts", "ffts"]'
run comp_off composite -- 'nodes()[1:] == [["a1"], ["v1"], ["a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]' \
    '"_kiln_partition_composite_groups" not in g["attrs"]' 'r["composite_partitions"] == []' \
    'all("composite" not in p for p in parts())'
# the session option kiln.composite_engines names them when the pass option does not
run comp_sess composite --option kiln.composite_engines=ffts:aicore+vector -- \
    'nodes()[1:] == [["a1"], ["v1"], ["a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]' "$COMP_REPORT"
run comp_pass_wins composite --option kiln.composite_engines=x:aicore+rts --pass-opt $CO -- "$COMP_REPORT"
run comp_only_sess composite --option kiln.composite_engines=ffts:aicore+vector \
    --pass-opt EnginePartitioner.mode=composite -- \
    'nodes()[1:] == [["a1", "v1", "a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]'
expect_error comp_sess_bad composite \
    "session option kiln.composite_engines 'ffts': group 'ffts' is not NAME:ENGINE+ENGINE" \
    --option kiln.composite_engines=ffts
# mode composite: the composite level only
run comp_only composite --pass-opt $CO --pass-opt EnginePartitioner.mode=composite -- \
    'nodes()[1:] == [["a1", "v1", "a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]' \
    'engines() == ["inputNodesSubGraph", "ffts", "rts", "ffts", "ge_local"]'
# with rts in the composite engine too, every node but the Data and the NetOutput is in
# one composite partition; the atomic level splits it as before
run comp_all composite --pass-opt EnginePartitioner.composite=ffts:aicore+vector+rts -- \
    'nodes()[1:] == [["a1"], ["v1"], ["a2", "a3"], ["r1"], ["a4"], ["Node_Output"]]' \
    'g["attrs"]["_kiln_partition_composite_groups"] == [-1, 0, 0, 0, 0, 0, 1]'
# the atomic level stays inside a composite partition: a1 -> b1 (both aicore, no second
# path) merge without composite engines, but the composite level put v1 a1 and v2 b1 in two
# composite partitions (r1 is a second path between them), so they stay apart
run comp_grp_off composite_group -- 'nodes()[1:] == [["v1"], ["a1", "b1"], ["r1"], ["v2"], ["Node_Output"]]'
run comp_grp composite_group --pass-opt $CO -- \
    'nodes()[1:] == [["v1"], ["a1"], ["r1"], ["v2"], ["b1"], ["Node_Output"]]' \
    'g["attrs"]["_kiln_partition_composite_groups"] == [-1, 0, 0, 1, 2, 2, 3]'
expect_error comp_bad composite "option composite 'ffts': group 'ffts' is not NAME:ENGINE+ENGINE" \
    --pass-opt EnginePartitioner.composite=ffts
expect_error comp_twice composite "engine aicore is in two composite engines (x and y)" \
    --pass-opt EnginePartitioner.composite=x:aicore,y:vector+aicore
expect_error comp_empty composite "empty engine name in group x" \
    --pass-opt EnginePartitioner.composite=x:aicore+
expect_error comp_only_nomap composite "mode composite needs composite engines" \
    --pass-opt EnginePartitioner.mode=composite
# supports() declines: named in the error
expect_error supports_no supports_no "vector: supports() said no; aicore: no op entry for FakeOpVec"
# priority: vector (30) > aicore (20) > rts (10); dtype and format rules; the option reorders
run prio priority -- 'engine_of("both") == "aicore"' 'engine_of("both16") == "rts"' \
    'engine_of("both5hd") == "vector"' 'engine_of("vec") == "vector"'
run prio_opt priority --pass-opt EnginePlacer.priority=rts -- 'engine_of("both") == "rts"' \
    'engine_of("both5hd") == "rts"' 'engine_of("vec") == "vector"'
# the same order from the command line: --engine-priority and the session option it sets
run prio_cli priority --engine-priority rts -- 'engine_of("both") == "rts"' \
    'engine_of("both5hd") == "rts"' 'engine_of("vec") == "vector"'
run prio_key priority --option kiln.engine_priority=rts -- 'engine_of("both") == "rts"'
expect_error prio_cli_unknown priority "names engine 'gpu'" --engine-priority rts,gpu
# --threads: the partitions are optimised by 1 or 16 threads with the same result
for t in 1 16; do
    compile "threads$t" pt3_second_path --threads $t || bad "--threads $t: compile failed"
done
cmp -s "$tmp/threads1.o.json" "$tmp/threads16.o.json" && ok || bad "--threads 1 and 16 differ"
"$kiln" compile -q -m "$tmp/m.json" "$data/pt1_chain.json" -o "$tmp/thr.json" --threads abc 2>"$tmp/thr.err"
[ $? -eq 2 ] && grep -q "expects 0" "$tmp/thr.err" && ok || bad "--threads abc: not a usage error"
# a pin in the middle of a chain splits it; each pin changes the partition
run pins0 pins_chain -- 'len(parts()) == 3' 'nodes()[1] == ["a", "b", "c"]'
python3 - "$data/pins_chain.json" "$tmp" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in ("a", "b", "c"):
    h = json.loads(json.dumps(g))
    for x in h["nodes"]:
        if x["name"] == n:
            x.setdefault("attrs", {})["_kiln_engine"] = "rts"
    json.dump(h, open("%s/pin_%s.json" % (sys.argv[2], n), "w"))
PY
for n in a b c; do
    if "$kiln" compile -q -m "$tmp/m.json" "$tmp/pin_$n.json" -o "$tmp/pin_$n.o.json" --report "$tmp/pin_$n.r.json"; then
        case $n in
            a) want='[["d"], ["a"], ["b", "c"], ["o"]]' ;;
            b) want='[["d"], ["a"], ["b"], ["c"], ["o"]]' ;;
            c) want='[["d"], ["a", "b"], ["c"], ["o"]]' ;;
        esac
        check pin_$n "nodes() == $want" "engine_of(\"$n\") == \"rts\"" && ok || bad "pin_$n"
    else bad "pin_$n: compile failed"; fi
done
# HasSecondPath: a diamond, a long bypass, a path through control edges, inside subgraphs
run diamond sp_diamond -- 'nodes()[1] == ["a", "c"]' 'bound("c", "e") == ["second_path"]'
run bypass sp_long_bypass -- 'bound("a", "b") == ["second_path"]' \
    'nodes()[2] == ["r1", "r2", "r3", "r4", "r5", "r6"]'
run control sp_control -- 'bound("a", "b") == ["second_path"]' 'bound("r", "b") == ["engine"]' \
    '[x["to_input"] for x in r["partition_boundaries"] if x["from"] == "r"] == [-1]'
run subgraph sp_subgraph -- 'bound("a", "b") == ["second_path"]' \
    'engines("then_g") == ["inputNodesSubGraph", "aicore", "rts", "aicore", "ge_local"]' \
    'bound("t1", "t3") == ["second_path"]' \
    '[p["name"] for p in parts("else_g")][1] == "partition2_rank1_new_sub_graph1"' \
    'parts("then_g")[0]["name"] == "partition1_rank0_inputNodesSubGraph"'
# a node without _stream_label inherits its partition's (GE MergeSubGraph)
python3 - "$data/pt2_user_label.json" "$tmp/inherit.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for x in g["nodes"]:
    if x["name"] == "op5":
        del x["attrs"]["_stream_label"]
json.dump(g, open(sys.argv[2], "w"))
PY
if "$kiln" compile -q -m "$tmp/second.json" "$tmp/inherit.json" -o "$tmp/inherit.o.json" --report "$tmp/inherit.r.json"; then
    check inherit 'attr("op5", "_stream_label") == "label1"' 'nodes()[3] == ["op4", "op5"]' && ok || bad inherit
else bad "inherit: compile failed"; fi
# the default manifest on a real example: MatMul on aicore, the kept Identity on
# hostcpu, Add and Relu on vector (docs/engines.md), inputs in rank 0 (vector.fusion=off:
# the vector engine would fuse Add -> Relu into one node)
if "$kiln" compile -q "$src/examples/residual_block.json" --option vector.fusion=off -o "$tmp/res.o.json" --report "$tmp/res.r.json"; then
    check res 'engines() == ["inputNodesSubGraph", "aicore", "hostcpu", "vector", "ge_local"]' \
        'r["placement"]["vector"] == 2 and r["placement"]["aicore"] == 1 and r["placement"]["hostcpu"] == 1' \
        'nodes()[1:4] == [["mm"], ["keep"], ["add", "relu"]]' \
        'attr("keep", "_lxfusion_engine_name") is None and attr("keep", "_lxfusion_op_kernel_lib_name") is None' \
        'attr("mm", "_lxfusion_engine_name") == "aicore"' && ok || bad res
else bad "residual_block: compile failed"; fi

# optimize_subgraph: each engine partition as a graph of its own (PlaceHolder/End at the
# cuts), its engine's hook run on it, attribute edits merged back (rts marks its nodes)
check pt3 'attr("op2", "tp_rts_optimized") is True and attr("op2", "tp_rts_placeholders") == 1' \
    'attr("op1", "tp_rts_optimized") is None and attr("op3", "tp_rts_optimized") is None' && ok || bad "pt3: rts hook"
python3 - "$tmp/subgraph.o.json" <<'PY' && ok || bad "subgraph: rts hook inside then_branch"
import json, sys
g = json.load(open(sys.argv[1]))
then = [n for n in g["nodes"] if n["name"] == "if"][0]["subgraphs"]["then_branch"]
t2 = [n for n in then["nodes"] if n["name"] == "t2"][0]
sys.exit(0 if t2["attrs"].get("tp_rts_optimized") is True and t2["attrs"]["tp_rts_placeholders"] == 1 else 1)
PY
python3 - "$data/pt3_second_path.json" "$tmp" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "op1":
        n["attrs"] = {"tp_fail_optimize": True}
json.dump(g, open(sys.argv[2] + "/hook_fail.json", "w"))
for n in g["nodes"]:
    if n["name"] == "op1":
        n["attrs"] = {"tp_fail_optimize": True, "tp_not_wanted": True}
json.dump(g, open(sys.argv[2] + "/hook_not_wanted.json", "w"))
for n in g["nodes"]:
    if n["name"] == "op1":
        n["type"] = "FakeOpVec"; n["attrs"] = {"tp_drop_ends": True}
json.dump(g, open(sys.argv[2] + "/hook_struct.json", "w"))
for n in g["nodes"]:
    if n["name"] == "op1":
        n["attrs"] = {"tp_cycle": True}
json.dump(g, open(sys.argv[2] + "/hook_cycle.json", "w"))
PY
for c in "hook_fail|engine aicore: optimize_subgraph of partition partition0_rank1_new_sub_graph1: aicore cannot optimise node op1" \
         "hook_struct|partition partition0_rank1_new_sub_graph1 (engine vector) of graph pt3: optimize_subgraph removed or replaced a boundary End (edge op1 -> op2)" \
         "hook_cycle|graph pt3: the structural edits of optimize_subgraph, merged back, make a cycle"; do
    IFS='|' read -r name want <<<"$c"
    "$kiln" compile -q -m "$tmp/m.json" "$tmp/$name.json" -o "$tmp/$name.o.json" 2>"$tmp/$name.err"; rc=$?
    [ $rc -eq 1 ] && grep -qF "$want" "$tmp/$name.err" && [ ! -e "$tmp/$name.o.json" ] && ok \
        || { bad "$name: exit $rc, want 1 and '$want':"; cat "$tmp/$name.err"; }
done

# an engine's optimize_subgraph_wanted declines op1's partition: it is not split and the
# hook that would fail there does not run
"$kiln" compile -q -m "$tmp/m.json" "$tmp/hook_not_wanted.json" -o "$tmp/hnw.o.json" \
    2>"$tmp/hnw.err" && ok || { bad "hook_not_wanted: the declined partition was optimised"; cat "$tmp/hnw.err"; }

# structural edits merged back (GE MergeSubGraph): the vector hook inserts v1_tp_added
# after v1 and removes v3 (v2 takes over its consumers, inside the partition and across
# it: r1, v4 and the NetOutput); the control edge v1 -> r1 stays; the new node joins
# the partition and its engine; 1 and 16 threads give the same bytes
for t in 1 16; do
    "$kiln" compile -q -m "$tmp/m.json" --threads $t "$data/struct_edit.json" -o "$tmp/se$t.json" \
        || bad "struct_edit: compile failed ($t threads)"
done
cmp -s "$tmp/se1.json" "$tmp/se16.json" && ok || bad "struct_edit: 1 and 16 threads differ"
python3 - "$tmp/se1.json" <<'PY' && ok || bad "struct_edit: merged structure"
import json, sys
g = json.load(open(sys.argv[1]))
n = {x["name"]: x for x in g["nodes"]}
want = {"v1": ["_arg_0:0"], "v1_tp_added": ["v1:0"], "v2": ["v1_tp_added:0"], "r1": ["v2:0"],
        "v4": ["r1:0", "v2:0"], "Node_Output": ["v4:0", "v2:0"]}
got = {k: n[k].get("inputs") for k in want if k in n}
assert "v3" not in n, "v3 kept"
assert got == want, got
assert n["r1"].get("control_inputs") == ["v1"], n["r1"]
a = n["v1_tp_added"]
assert a["engine"] == "vector" and a["attrs"]["_kiln_partition"] == n["v1"]["attrs"]["_kiln_partition"], a
PY

# batches: the partitions are split, run and merged back a batch at a time
# (KILN_TEST_SUBGRAPH_BATCH=1: one partition per batch), and what a split reads of
# another partition is what it was when the stage began, as when GE splits them all
# first: r1's rts hook retypes r1 to FakeOpBoth, merged back before r2's partition is
# split, and r2's PlaceHolder for r1 still says FakeOpRts on engine rts. One batch and
# a batch per partition give the same bytes (retype, struct_edit, pt3 at 1 and 16
# threads).
for g in retype struct_edit pt3_second_path; do
    for b in 1 ""; do
        KILN_TEST_SUBGRAPH_BATCH=$b "$kiln" compile -q -m "$tmp/m.json" --threads 16 \
            "$data/$g.json" -o "$tmp/batch$b.$g.json" || bad "$g: compile failed (batch '$b')"
    done
    cmp -s "$tmp/batch1.$g.json" "$tmp/batch.$g.json" && ok || bad "$g: batches of 1 differ"
done
python3 - "$tmp/batch1.retype.json" <<'PY' && ok || bad "retype: PlaceHolders read the partitions as the stage began"
import json, sys
n = {x["name"]: x for x in json.load(open(sys.argv[1]))["nodes"]}
a = n["r2"]["attrs"]
assert n["r1"]["type"] == "FakeOpBoth", n["r1"]
assert (a["tp_from_op0"], a["tp_from_engine0"]) == ("FakeOpNpu", "aicore"), a
assert (a["tp_from_op1"], a["tp_from_engine1"]) == ("FakeOpRts", "rts"), a
PY
# a PlaceHolder wired straight to an End by the hook: v4 removed, NetOutput reads r1
python3 - "$data/struct_edit.json" "$tmp/se_pass.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n["name"] == "v4":
        n["attrs"] = {"tp_remove_node": True}
json.dump(g, open(sys.argv[2], "w"))
PY
"$kiln" compile -q -m "$tmp/m.json" "$tmp/se_pass.json" -o "$tmp/se_pass.o.json" &&
python3 - "$tmp/se_pass.o.json" <<'PY' && ok || bad "struct_edit: PlaceHolder -> End"
import json, sys
n = {x["name"]: x for x in json.load(open(sys.argv[1]))["nodes"]}
assert "v4" not in n and n["Node_Output"]["inputs"] == ["r1:0", "v2:0"], n["Node_Output"]
PY

# a stage pass in optimize_subgraph runs once per partition graph; --print-after dumps
# each one, with its PlaceHolders and Ends and GE's attributes on them
cat > "$tmp/lint_sub.json" <<JSON
{"kiln_manifest": 1, "extends": "$tmp/m.json", "stages": {"optimize_subgraph": ["GraphLint"]}}
JSON
mkdir -p "$tmp/subdumps"
if "$kiln" compile -q -m "$tmp/lint_sub.json" "$data/pt3_second_path.json" -o "$tmp/ls.o.json" \
       --report "$tmp/ls.r.json" --print-after GraphLint --dump-dir "$tmp/subdumps"; then
    python3 - "$tmp/subdumps" "$tmp/ls.r.json" <<'PY' && ok || bad "optimize_subgraph dumps"
import json, sys
d, r = sys.argv[1], json.load(open(sys.argv[2]))
runs = [p["runs"] for p in r["passes"] if p["pass"] == "GraphLint" and p["stage"] == "optimize_subgraph"]
assert runs == [4], runs
g = json.load(open(d + "/001-optimize_subgraph-GraphLint.json"))
assert g["name"] == "partition0_rank1_new_sub_graph1", g["name"]
n = {x["name"]: x for x in g["nodes"]}
pld = n["partition0_rank1_new_sub_graph1_PlaceHolder0"]
assert pld["type"] == "PlaceHolder" and pld["attrs"] == {
    "_parentNodeName": "_arg_0", "_peerNodeName": "op1", "anchorIndex": 0,
    "parentId": "partition0_rank0_inputNodesSubGraph:0", "parentOpType": "Data", "peerIndex": 0,
    "pld_front_node_engine_name": "ge_local"}, pld
assert n["op1"]["inputs"] == ["partition0_rank1_new_sub_graph1_PlaceHolder0:0"]
e1, e3 = n["partition0_rank1_new_sub_graph1_End1"], n["partition0_rank1_new_sub_graph1_End3"]
assert e1["inputs"] == ["op1:0"] and e1["attrs"] == {
    "end_rear_node_engine_name": "rts", "parentOpType": "FakeOpRts", "peerIndex": 1}, e1
assert e3["attrs"]["end_rear_node_engine_name"] == "aicore" and e3["attrs"]["peerIndex"] == 3
g3 = json.load(open(d + "/003-optimize_subgraph-GraphLint.json"))
assert g3["name"] == "partition0_rank3_new_sub_graph3"
p3 = {x["name"]: x for x in g3["nodes"]}["partition0_rank3_new_sub_graph3_PlaceHolder3"]
assert p3["attrs"]["_parentNodeName"] == "op1" and p3["attrs"]["parentId"] == "partition0_rank1_new_sub_graph1:1"
PY
else bad "optimize_subgraph dumps: compile failed"; fi

# DOT draws each partition as a filled cluster coloured by engine, subgraphs' too;
# --print-after/--dump-dir dump the partitioned graph (JSON with the record, DOT with clusters)
mkdir -p "$tmp/dumps"
if "$kiln" compile -q -m "$tmp/m.json" "$data/sp_subgraph.json" -o "$tmp/sp.dot" \
       --print-after EnginePartitioner --dump-dir "$tmp/dumps"; then
    grep -q '^  subgraph cluster_p0_1 {$' "$tmp/sp.dot" && ok || bad "dot: no partition cluster"
    grep -q 'label="partition0_rank1_new_sub_graph2\\naicore"; style=filled; fillcolor="#' "$tmp/sp.dot" && ok || bad "dot: cluster label/colour"
    [ "$(grep -c 'subgraph cluster_p' "$tmp/sp.dot")" = 13 ] && ok || bad "dot: want 13 partition clusters (root 5, then 5, else 3)"
    d=$(ls "$tmp/dumps" | grep -c 'EnginePartitioner\.\(json\|dot\)$')
    [ "$d" = 2 ] && ok || bad "dump-dir: want the partitioned graph as JSON and DOT, got $d files"
    grep -q '_kiln_partition_sub_graphs' "$tmp/dumps/"*EnginePartitioner.json && ok || bad "dump: no partition record"
    grep -q 'subgraph cluster_p2_1 {' "$tmp/dumps/"*EnginePartitioner.dot && ok || bad "dump: no subgraph partition cluster"
else bad "dot: compile failed"; fi

# a build paused inside the optimize_subgraph stage (before_ub_match, after_ub_match) carries
# the partitions (graph and node attributes) and resumes to the uninterrupted build, byte for byte
for g in pt3_second_path sp_subgraph; do
    "$kiln" compile -q -m "$tmp/second.json" "$data/$g.json" -o "$tmp/full_$g.json" || bad "$g: straight build"
    for step in before_ub_match after_ub_match; do
        st="$tmp/state_${g}_$step.json"
        if "$kiln" compile -m "$tmp/second.json" "$data/$g.json" --build-mode tuning --build-step $step \
               -o "$st" 2>"$tmp/err" && grep -q "_kiln_partition_sub_graphs" "$st" \
           && "$kiln" compile -q --resume "$st" -o "$tmp/resumed.json" && cmp -s "$tmp/full_$g.json" "$tmp/resumed.json"; then
            ok
        else bad "$g/$step: pause and resume differ from the straight build"; cat "$tmp/err"; fi
    done
done

# GE's algorithm, exactly: random graphs (three engines in runs, a high fan-out producer,
# control edges, stream and user stream labels) against tests/e2e/partition_reference.py,
# a model written from GE's code with plain sets, in both modes and both topo modes
mkdir -p "$tmp/rand"
python3 "$src/tests/e2e/partition_reference.py" gen "$tmp/rand" 20 7
for f in "$tmp/rand"/rand*.json; do
    for mode in atomic second; do
        for tm in 0 3; do
            if "$kiln" compile -q -m "$tmp/m.json" "$f" -o "$tmp/r.o.json" --report "$tmp/r.r.json" \
                   --pass-opt EnginePartitioner.mode=$mode --option ge.topoSortingMode=$tm; then
                python3 "$src/tests/e2e/partition_reference.py" check "$f" "$tmp/r.r.json" $mode $tm \
                    && ok || bad "reference: $(basename "$f") mode=$mode topo=$tm"
            else bad "reference: $(basename "$f"): compile failed"; fi
        done
    done
done

# the default pipeline: nodes the DynamicShapePartitioner makes after placement
# (PartitionedCall frames, their subgraphs' NetOutput) are GE-local, not unplaced
dyn="$src/tests/data/dynamic_shape/dyn_input.json"
if "$kiln" compile -q "$dyn" -o "$tmp/dynp.json" --report "$tmp/dynp.r.json" 2>"$tmp/dynp.err"; then
    python3 - "$tmp/dynp.r.json" <<'PY' && ok || bad "dyn_input: a partition is unplaced or frames are missing"
import json, sys
r = json.load(open(sys.argv[1]))
engines = [p["engine"] for p in r["partitions"]]
sys.exit(0 if "unplaced" not in engines and "ge_local" in engines and len(set(p["graph"] for p in r["partitions"])) > 1 else 1)
PY
else
    bad "dyn_input: compile failed: $(cat "$tmp/dynp.err")"
fi
echo "partition: $pass passed, $fail failed"
[ $fail -eq 0 ]
