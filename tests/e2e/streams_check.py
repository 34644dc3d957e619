#!/usr/bin/env python3
"""streams_check.py GRAPH.json REPORT.json [--max-streams N] [--single]

An independent check of StreamAllocator's output (docs/streams.md), written
from the contract in docs/build.md and not from the plugin's code:

  - every graph (root and subgraphs) that has streams: each data or control
    edge between two nodes on different streams is ordered by stream order
    and events (a wait pairs with the latest record of its id at an earlier
    step); a producer without a stream is looked through to its producers;
  - Data, Const and NetOutput have stream -1; stream ids are dense 0..N-1
    and N is the graph's _kiln_stream_num; event ids are below _kiln_event_num;
  - the report's `streams` and `events` list exactly the graph's streams
    (their nodes in order) and its record/wait pairs.

Prints one line per graph with streams: "graph NAME: S streams, E events,
I event ids"; exits 1 naming the first problem.
"""
import json
import sys
from collections import defaultdict, deque


def fail(msg):
    print("streams_check: " + msg)
    sys.exit(1)


def graphs(g):
    yield g
    for n in g["nodes"]:
        for sg in (n.get("subgraphs") or {}).values():
            yield from graphs(sg)


def producers(n):
    out = []
    for i in n.get("inputs", []):
        if i:
            out.append(i.rsplit(":", 1)[0])
    out.extend(n.get("control_inputs", []))
    return out


def check_graph(g, report, max_streams, single):
    nodes = {n["name"]: n for n in g["nodes"]}
    attrs = g.get("attrs", {})
    if "_kiln_stream_num" not in attrs:
        fail("graph %s: no _kiln_stream_num (StreamAllocator did not run)" % g["name"])
    nstreams = attrs["_kiln_stream_num"]
    nids = attrs.get("_kiln_event_num", 0)
    order = sorted(g["nodes"], key=lambda n: n["id"])
    step = {n["name"]: n["id"] for n in order}
    stream = {n["name"]: n.get("stream_id", -1) for n in order}
    for n in order:
        if n["type"] in ("Data", "Const", "Constant", "NetOutput") and stream[n["name"]] != -1:
            fail("graph %s: %s (%s) is on stream %d, expected -1"
                 % (g["name"], n["name"], n["type"], stream[n["name"]]))
        for p in producers(n):
            if step[p] >= step[n["name"]]:
                fail("graph %s: order puts %s after its consumer %s" % (g["name"], p, n["name"]))
    used = sorted({s for s in stream.values() if s >= 0})
    if used != list(range(len(used))) or len(used) != nstreams:
        fail("graph %s: streams %s, _kiln_stream_num %d" % (g["name"], used, nstreams))
    if max_streams and nstreams > max_streams:
        fail("graph %s: %d streams, --max-streams %d" % (g["name"], nstreams, max_streams))
    if single and nstreams > 1:
        fail("graph %s: %d streams in single-stream mode" % (g["name"], nstreams))
    # happens-before edges: stream order, then record -> wait pairs
    succ = defaultdict(list)
    last_on = {}
    records = defaultdict(list)  # id -> [(step, sender)]
    for n in order:
        a = n.get("attrs", {})
        for e in a.get("_send_event_ids", []):
            if e >= nids:
                fail("graph %s: %s records event %d, _kiln_event_num %d" % (g["name"], n["name"], e, nids))
            records[e].append((step[n["name"]], n["name"]))
    pairs = []
    for n in order:
        s = stream[n["name"]]
        if s >= 0:
            if s in last_on:
                succ[last_on[s]].append(n["name"])
            last_on[s] = n["name"]
        for e in n.get("attrs", {}).get("_recv_event_ids", []):
            earlier = [r for r in records.get(e, []) if r[0] < step[n["name"]]]
            if not earlier:
                fail("graph %s: %s waits for event %d that nobody recorded before"
                     % (g["name"], n["name"], e))
            sender = max(earlier)[1]
            succ[sender].append(n["name"])
            pairs.append((e, sender, n["name"]))

    def reaches(a, b):
        seen, q = {a}, deque([a])
        while q:
            x = q.popleft()
            if x == b:
                return True
            for y in succ[x]:
                if y not in seen and step[y] <= step[b]:
                    seen.add(y)
                    q.append(y)
        return False

    def streamed_producers(v):
        out, seen, todo = [], set(), list(producers(nodes[v]))
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            if stream[p] >= 0:
                out.append(p)
            else:
                todo.extend(producers(nodes[p]))
        return out

    for n in order:
        v = n["name"]
        if stream[v] < 0:
            continue
        for p in streamed_producers(v):
            if stream[p] != stream[v] and not reaches(p, v):
                fail("graph %s: edge %s (stream %d) -> %s (stream %d) is not ordered by events"
                     % (g["name"], p, stream[p], v, stream[v]))
    # the report
    rs = [s for s in report["streams"] if s["graph"] == g["name"]]
    if len(rs) != nstreams:
        fail("graph %s: report lists %d streams, graph has %d" % (g["name"], len(rs), nstreams))
    for s in rs:
        want = [n["name"] for n in order if stream[n["name"]] == s["id"]]
        if s["nodes"] != want:
            fail("graph %s: report stream %d nodes differ" % (g["name"], s["id"]))
    re_ = sorted((e["id"], e["sender"], e["receiver"]) for e in report["events"] if e["graph"] == g["name"])
    if re_ != sorted(pairs):
        fail("graph %s: report events %s, graph %s" % (g["name"], re_[:4], sorted(pairs)[:4]))
    print("graph %s: %d streams, %d events, %d event ids" % (g["name"], nstreams, len(pairs), nids))


def main():
    args = sys.argv[1:]
    max_streams = 0
    single = False
    if "--max-streams" in args:
        i = args.index("--max-streams")
        max_streams = int(args[i + 1])
        del args[i:i + 2]
    if "--single" in args:
        single = True
        args.remove("--single")
    g = json.load(open(args[0]))
    report = json.load(open(args[1]))
    if report.get("streams") is None or report.get("events") is None:
        fail("report has no streams/events")
    names = [x["name"] for x in graphs(g)]
    if len(set(names)) != len(names):
        fail("graph names are not unique: the report cannot be matched")
    for sg in graphs(g):
        check_graph(sg, report, max_streams, single)


main()
