#!/usr/bin/env bash
# Option-dependent cases of the memory-conflict passes (plugins/memory_conflict/
# passes): session options (--option) and pass options (--pass-opt) that the
# golden runner, which runs each pass with its defaults, cannot set.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
d="$src/tests/data/passes"; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, file, grep pattern (must match)
    if ! grep -q -- "$3" "$2"; then echo "FAIL $1: no '$3' in output"; fail=$((fail+1)); else echo "ok   $1"; fi
}
absent() {
    if grep -q -- "$3" "$2"; then echo "FAIL $1: unexpected '$3'"; fail=$((fail+1)); else echo "ok   $1"; fi
}
m="$d/AtomicAddrCleanPass/manifest.json"
# ge.exec.atomicCleanPolicy=1: atomic nodes clean themselves, no clean node
"$kiln" opt "$d/AtomicAddrCleanPass/a8_second_nodes.in.json" -m "$m" --passes AtomicAddrCleanPass \
    --option ge.exec.atomicCleanPolicy=1 -o "$tmp/p1.json" || fail=$((fail+1))
check "atomicCleanPolicy=1 sets need_gentask_atomic" "$tmp/p1.json" '"need_gentask_atomic": true'
absent "atomicCleanPolicy=1 inserts no clean node" "$tmp/p1.json" 'AtomicAddrClean'
# clean_op=MemSet: a MemSet named atomic_memset with sizes=[]
"$kiln" opt "$d/AtomicAddrCleanPass/a1_no_task_atomic.in.json" -m "$m" --passes AtomicAddrCleanPass \
    --pass-opt AtomicAddrCleanPass.clean_op=MemSet -o "$tmp/ms.json" || fail=$((fail+1))
check "clean_op=MemSet type" "$tmp/ms.json" '"type": "MemSet"'
check "clean_op=MemSet name" "$tmp/ms.json" '"name": "atomic_memset1"'
check "clean_op=MemSet sizes" "$tmp/ms.json" '"sizes"'
# HcclMemcpyPass runs twice in GE (GraphPrepare, OptimizeStage1_3): the second run is a no-op
m="$d/HcclMemcpyPass/manifest.json"
for c in h1_reader_after_write broadcast_writeback; do
    "$kiln" opt "$d/HcclMemcpyPass/$c.in.json" -m "$m" --passes HcclMemcpyPass,HcclMemcpyPass \
        -o "$tmp/twice.json" || fail=$((fail+1))
    if cmp -s "$tmp/twice.json" "$d/HcclMemcpyPass/$c.out.json"; then echo "ok   HcclMemcpyPass twice: $c"
    else echo "FAIL HcclMemcpyPass twice: $c"; fail=$((fail+1)); fi
done
# MemcpyAddrAsyncPass: offline build copies Data -> NetOutput; refreshable feature map off: RefData -> HCCL
m="$d/MemcpyAddrAsyncPass/manifest.json"
"$kiln" opt "$d/MemcpyAddrAsyncPass/zero_copy.in.json" -m "$m" --passes MemcpyAddrAsyncPass \
    --option ge.buildGraphMode=offline -o "$tmp/off.json" || fail=$((fail+1))
check "offline build copies model input to output" "$tmp/off.json" '"x_MemcpyAddrAsync_1:0"'
cat > "$tmp/ref.json" <<'JSON'
{"kiln_graph": 1, "name": "r", "nodes": [
 {"name": "rd", "type": "RefData", "attrs": {"index": 0}, "outputs": [{"shape": [4]}]},
 {"name": "ar", "type": "HcomAllReduce", "inputs": ["rd:0"], "outputs": [{"shape": [4]}]},
 {"name": "out", "type": "NetOutput", "inputs": ["ar:0"]}]}
JSON
"$kiln" opt "$tmp/ref.json" -m "$m" --passes MemcpyAddrAsyncPass -o "$tmp/r0.json" || fail=$((fail+1))
check "RefData -> HCCL copied when not refreshable" "$tmp/r0.json" '"rd_MemcpyAddrAsync_0:0"'
"$kiln" opt "$tmp/ref.json" -m "$m" --passes MemcpyAddrAsyncPass --option ge.featureBaseRefreshable=1 \
    -o "$tmp/r1.json" || fail=$((fail+1))
absent "RefData -> HCCL left alone when refreshable" "$tmp/r1.json" 'MemcpyAddrAsync'
# SubgraphPass fails on a subgraph Data without _parent_node_index
cat > "$tmp/bad.json" <<'JSON'
{"kiln_graph": 1, "name": "b", "nodes": [
 {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [1]}]},
 {"name": "call", "type": "PartitionedCall", "inputs": ["x:0"], "outputs": [{"shape": [1]}],
  "subgraphs": {"f": {"name": "f", "nodes": [
   {"name": "d", "type": "Data", "outputs": [{"shape": [1]}]},
   {"name": "o", "type": "NetOutput", "inputs": ["d:0"]}]}}},
 {"name": "out", "type": "NetOutput", "inputs": ["call:0"]}]}
JSON
if "$kiln" opt "$tmp/bad.json" -m "$d/SubgraphPass/manifest.json" --passes SubgraphPass -o "$tmp/b.json" 2>"$tmp/err"; then
    echo "FAIL SubgraphPass accepted a Data without _parent_node_index"; fail=$((fail+1))
else check "SubgraphPass names the missing _parent_node_index" "$tmp/err" '_parent_node_index'; fi
[ -e "$tmp/b.json" ] && { echo "FAIL partial output left"; fail=$((fail+1)); }
echo "$fail failed"
[ "$fail" -eq 0 ]
