#!/usr/bin/env bash
# End-to-end tests of `kiln run --trace` (Chrome trace), the report's "run"
# section (per-op and per-node times, memory per type) and `--runtime`
# (docs/run.md, docs/outputs.md):
#  1. tests/data/multistream/two_streams.json (two streams, two events) with
#     the test engine, 3 runs, on multistream and sequential: the trace is a
#     JSON array with one thread row per stream (one for sequential); every
#     node with a task appears once per run on the row of its stream; flows
#     pair up ("s"/"f" per id, across rows, in time order, each start inside
#     a slice of its row and each finish at the start of one) and number the
#     schedule's events x runs; the report's op counts are nodes x runs and
#     its memory is the plan's arena (multistream) or the buffers
#     (sequential);
#  2. bench/gen_towers.py's two labelled towers through the default manifest
#     (StreamAllocator: three streams) on multistream, and tests/data/run/
#     while.json on both runtimes: the loop's body nodes are nested (depth 1),
#     5 iterations each;
#  3. errors: an unknown --runtime lists the loaded ones (exit 1), an empty
#     one is a usage error (exit 2), a failing run leaves no trace and no
#     report behind.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; plugdir="${KILN_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

eng="$tmp/libtp_run_engine.so"
if ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -shared -fPIC -DKILN_PLUGIN -I"$src/plugin-api" \
        "$src/tests/data/run/tp_run_engine.c" -o "$eng" 2>"$tmp/cc.err"; then
    bad "cannot build the test engine: $(cat "$tmp/cc.err")"; echo "$pass passed, $fail failed"; exit 1
fi
man="$tmp/m.json"
cat > "$man" <<JSON
{"kiln_manifest": 1, "plugins": [
  {"path": "$plugdir/libkiln_runtime_seq.so", "provides": {"runtimes": ["sequential"]}},
  {"path": "$plugdir/libkiln_runtime_ms.so", "provides": {"runtimes": ["multistream"]}},
  {"path": "$eng", "provides": {"engines": ["runtest"]}}],
 "stages": {}}
JSON
python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
def raw(name, dt, fmt, dims, vals):
    open("%s/%s" % (d, name), "wb").write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
    json.dump({"dims": dims, "dtype": dt}, open("%s/%s.json" % (d, name), "w"))
raw("x.bin", "float32", "f", [2, 3], [-3, -2, -1, 1, 2, 3])
raw("tx.bin", "float32", "f", [8, 8], [((i * 7) % 13 - 6) / 6.0 for i in range(64)])
raw("i0.bin", "int64", "q", [], [0])
raw("acc.bin", "float32", "f", [2], [1, -0.5])
raw("a.bin", "float32", "f", [2], [1, 2])
raw("b.bin", "float32", "f", [2], [3, 4])
PY

# validate TRACE REPORT GRAPH RUNTIME RUNS [LOOP_NODE=COUNT...]
cat > "$tmp/v.py" <<'PY'
import json, sys
trace, report, graph, runtime, runs = sys.argv[1:6]
runs = int(runs)
nested = dict(a.split("=") for a in sys.argv[6:])
errs = []
tr = json.load(open(trace))
rep = json.load(open(report))
run = rep.get("run")
if not isinstance(tr, list): errs.append("the trace is not a JSON array")
if not run: errs.append("the report has no run section"); print("; ".join(errs)); sys.exit(1)
root = rep["graph"]
nstreams = run["streams"]
if run["runtime"] != runtime: errs.append("runtime %r" % run["runtime"])
if run["runs"] != runs: errs.append("runs %r != %d" % (run["runs"], runs))
if runtime == "sequential" and nstreams != 1: errs.append("sequential with %d streams" % nstreams)
rows = sorted(e["tid"] for e in tr if e["ph"] == "M" and e["name"] == "thread_name")
if rows != list(range(nstreams)): errs.append("thread rows %r for %d streams" % (rows, nstreams))
xs = [e for e in tr if e["ph"] == "X"]
if any(e["tid"] not in range(nstreams) for e in xs): errs.append("a slice outside the rows")
top = [e for e in xs if e["args"]["depth"] == 0]
# the nodes with a task, and their stream
g = json.load(open(graph)) if graph != "-" else {"nodes": []}
events = [e for e in (rep.get("events") or []) if e["graph"] == root]
if runtime == "multistream" and rep.get("streams"):   # StreamAllocator's schedule
    want = {n: s["id"] for s in rep["streams"] if s["graph"] == root for n in s["nodes"]}
elif runtime == "multistream":  # a schedule written in the graph file
    want = {n["name"]: n["stream_id"] for n in g["nodes"] if n.get("stream_id", -1) >= 0}
    events = [i for n in g["nodes"] for i in n.get("attrs", {}).get("_recv_event_ids", [])]
else:
    skip = {"Data", "Const", "Constant", "NetOutput", "NoOp"}
    want = {n["name"]: 0 for n in g["nodes"] if n["type"] not in skip}
for r in range(runs):
    got = sorted(e["name"] for e in top if e["args"]["run"] == r)
    if got != sorted(want):
        errs.append("run %d: slices %s, tasks %s" % (r, got, sorted(want)))
for e in top:
    if e["name"] in want and e["tid"] != want[e["name"]]:
        errs.append("%s on row %d, its stream is %d" % (e["name"], e["tid"], want[e["name"]]))
    if "op" not in e["args"] or "engine" not in e["args"] or e["dur"] < 0:
        errs.append("slice %s lacks op/engine or has a negative duration" % e["name"])
for node, count in nested.items():
    c = [e for e in xs if e["name"] == node and e["args"]["depth"] == 1]
    if len(c) != int(count) * runs:
        errs.append("nested %s: %d slices, want %d" % (node, len(c), int(count) * runs))
# flows: pairs, across rows, in time order, bound to slices
fl = {}
for e in tr:
    if e["ph"] in ("s", "f"):
        fl.setdefault(e["id"], []).append(e)
want_flows = len(events) * runs if runtime == "multistream" else 0
if len(fl) != want_flows: errs.append("%d flows, want %d" % (len(fl), want_flows))
for i, pair in fl.items():
    ph = sorted(e["ph"] for e in pair)
    if ph != ["f", "s"]: errs.append("flow %s: %s" % (i, ph)); continue
    s = [e for e in pair if e["ph"] == "s"][0]; f = [e for e in pair if e["ph"] == "f"][0]
    if s["tid"] == f["tid"]: errs.append("flow %s within one row" % i)
    if s["ts"] > f["ts"]: errs.append("flow %s ends before it starts" % i)
    if not any(x["tid"] == s["tid"] and x["ts"] <= s["ts"] <= x["ts"] + x["dur"] for x in top):
        errs.append("flow %s starts outside a slice" % i)
    if not any(x["tid"] == f["tid"] and x["ts"] == f["ts"] for x in top):
        errs.append("flow %s finishes at no slice start" % i)
# the report: per-op counts, per-node counts, memory
ops = {}
for e in xs:
    ops[e["cat"]] = ops.get(e["cat"], 0) + 1
if {k: v["count"] for k, v in run["ops"].items()} != ops:
    errs.append("report ops %r, trace %r" % (run["ops"], ops))
for n in run["nodes"]:
    if n["depth"] == 0 and n["node"] in want and n["count"] != runs:
        errs.append("report node %s count %d" % (n["node"], n["count"]))
    if n["total_ms"] < 0: errs.append("report node %s negative time" % n["node"])
mem = {m["memory_type"]: m for m in run["memory"]}
if not mem or any(m["peak_bytes"] != m["arena_bytes"] + m["own_bytes"] for m in mem.values()):
    errs.append("memory %r" % run["memory"])
if errs: print("; ".join(errs[:8])); sys.exit(1)
print(json.dumps({k: (v["arena_bytes"], v["own_bytes"]) for k, v in mem.items()}))
PY
v() { python3 "$tmp/v.py" "$@"; }

# 1. two streams, 3 runs, both runtimes
ts="$src/tests/data/multistream/two_streams.json"
for rt in multistream sequential; do
    rm -f "$tmp/t.json" "$tmp/r.json"
    if "$kiln" run "$ts" -m "$man" --runtime "$rt" --input "$tmp/x.bin" --repeat 3 \
            --trace "$tmp/t.json" --report "$tmp/r.json" -q 2>"$tmp/err"; then
        if mem=$(v "$tmp/t.json" "$tmp/r.json" "$ts" "$rt" 3); then
            # multistream: the plan's 1536-byte arena; sequential: 7 buffers of 24 bytes
            # (the input and the outputs of a, b, c, b2, d, g)
            case "$rt" in
                multistream) want='{"HBM": [1536, 0]}' ;;
                sequential) want='{"HBM": [0, 168]}' ;;
            esac
            [ "$mem" = "$want" ] && ok || bad "two_streams ($rt): memory $mem, want $want"
        else bad "two_streams ($rt): $mem"; fi
    else
        bad "two_streams ($rt): exit $?: $(cat "$tmp/err")"
    fi
done

# 2. the default manifest: labelled towers (three streams) and a While
if [ -f "$plugdir/libkiln_vector.so" ] && [ -f "$plugdir/libkiln_aicore.so" ]; then
    python3 "$src/bench/gen_towers.py" "$tmp/towers.json" 2 3 8
    for rt in multistream sequential; do
        if "$kiln" run "$tmp/towers.json" --runtime "$rt" --input "$tmp/tx.bin" --repeat 2 -j 1 \
                --trace "$tmp/t.json" --report "$tmp/r.json" -q 2>"$tmp/err"; then
            if r=$(v "$tmp/t.json" "$tmp/r.json" "$tmp/towers.json" "$rt" 2); then
                n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run']['streams'])" "$tmp/r.json")
                if [ "$rt" = sequential ] || [ "$n" -ge 3 ]; then ok
                else bad "towers ($rt): $n streams, want 3 (one per label and the join)"; fi
            else bad "towers ($rt): $r"; fi
        else
            bad "towers ($rt): exit $?: $(cat "$tmp/err")"
        fi
        if "$kiln" run "$src/tests/data/run/while.json" --runtime "$rt" --input "$tmp/i0.bin" \
                --input "$tmp/acc.bin" --input "$tmp/a.bin" --input "$tmp/b.bin" \
                --trace "$tmp/t.json" --report "$tmp/r.json" -q 2>"$tmp/err"; then
            r=$(v "$tmp/t.json" "$tmp/r.json" "$src/tests/data/run/while.json" "$rt" 1 \
                    inc=5 dbl=5 lt=6) && ok || bad "while ($rt): $r"
        else
            bad "while ($rt): exit $?: $(cat "$tmp/err")"
        fi
    done
else
    echo "SKIPPED: the default-manifest cases need libkiln_vector.so and libkiln_aicore.so"
fi

# 3. errors
"$kiln" run "$ts" -m "$man" --runtime bogus --input "$tmp/x.bin" -q 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "runtime 'bogus'.*(loaded runtimes: sequential, multistream)" "$tmp/err" \
    && ok || bad "unknown runtime: exit $rc: $(cat "$tmp/err")"
"$kiln" run "$ts" -m "$man" --runtime "" --input "$tmp/x.bin" -q 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && ok || bad "empty --runtime: exit $rc: $(cat "$tmp/err")"
rm -f "$tmp/t.json" "$tmp/r.json"
python3 - "$tmp/two.bin" <<'PY'
import json, struct, sys
open(sys.argv[1], "wb").write(struct.pack("<2f", 1, 2))
json.dump({"dims": [2], "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
"$kiln" run "$src/tests/data/run/fail.json" -m "$man" --runtime sequential --input "$tmp/two.bin" \
    --trace "$tmp/t.json" --report "$tmp/r.json" -q 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ ! -e "$tmp/t.json" ] && [ ! -e "$tmp/r.json" ] \
    && [ -z "$(ls "$tmp" | grep -E '^(t|r)\.json\.')" ] && ok \
    || bad "failing run: exit $rc, files: $(ls "$tmp")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
