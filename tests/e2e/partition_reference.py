#!/usr/bin/env python3
"""A reference model of GE's EnginePartitioner (engine_partitioner.cc: MarkClusters,
IsMergeable, HasSecondPath, MergeTwoClusters, MarkClustersWithConsistantId, the
ranking), written from GE's code with plain sets, and a random-graph generator.
tests/e2e/partition.sh compiles each generated graph with kiln and compares the
partitions of --report with this model's, rank by rank.

  partition_reference.py gen DIR COUNT SEED    write DIR/rand<i>.json (+ .mode)
  partition_reference.py check GRAPH REPORT [MODE [TOPO]]   exit 1 on a difference
"""
import json, random, sys
from collections import deque

DATA_LIKE = {"Const", "Constant", "Data", "RefData", "AippData", "Variable", "VariableV2",
             "VarHandleOp"}
ENGINE = {"FakeOpNpu": "aicore", "FakeOpRts": "rts", "FakeOpVec": "vector",
          "NetOutput": "ge_local", "Data": "ge_local", "Const": "ge_local"}


def gen(dirname, count, seed):
    rnd = random.Random(seed)
    ops = ["FakeOpNpu", "FakeOpRts", "FakeOpVec"]
    for gi in range(count):
        n = rnd.randint(20, 70)
        nodes = [{"name": "d0", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [4]}]},
                 {"name": "c0", "type": "Const", "outputs": [{"shape": [4]}]}]
        hub = rnd.randint(2, 8)
        sinks = {"d0", "c0"}
        for i in range(2, n):
            # runs of one engine, sometimes broken
            op = ops[(i // rnd.randint(2, 5)) % 3] if rnd.random() < 0.7 else rnd.choice(ops)
            k = rnd.choice([1, 1, 2, 2, 3])
            srcs = []
            for _ in range(k):
                r = rnd.random()
                if i > hub and r < 0.25:
                    j = hub  # a high fan-out producer
                elif r < 0.7:
                    j = max(0, i - rnd.randint(1, 3))
                else:
                    j = rnd.randint(0, i - 1)
                srcs.append(nodes[j]["name"])
            if i == 2:
                srcs.append("c0")  # every node is used: PruneGraphPass removes nothing
            node = {"name": "n%d" % i, "type": op, "inputs": srcs, "outputs": [{"shape": [4]}]}
            if rnd.random() < 0.1 and i > 3:
                node["control_inputs"] = [nodes[rnd.randint(2, i - 1)]["name"]]
            attrs = {}
            if rnd.random() < 0.08:
                attrs["_stream_label"] = "s1"
            if rnd.random() < 0.15:
                attrs["_user_stream_label"] = rnd.choice(["u1", "u2"])
            if attrs:
                node["attrs"] = attrs
            nodes.append(node)
            for s in srcs:
                sinks.discard(s)
            for s in node.get("control_inputs", []):
                sinks.discard(s)
            sinks.add(node["name"])
        outs = [x["name"] for x in nodes if x["name"] in sinks and x["type"] != "Const"]
        nodes.append({"name": "out", "type": "NetOutput", "inputs": outs})
        g = {"kiln_graph": 1, "name": "rand%d" % gi, "nodes": nodes}
        with open("%s/rand%d.json" % (dirname, gi), "w") as f:
            json.dump(g, f)


def topo(nodes):
    """kiln's order (core/analysis_topo.c): FIFO Kahn, sources in id order; a node's
    data consumers (outputs in index order, consumers in edge-creation order), then
    its control successors, in creation order."""
    idx = {x["name"]: i for i, x in enumerate(nodes)}
    cons = [[] for _ in nodes]   # per producer: [(output, consumer)] in creation order
    ctrl = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for i, x in enumerate(nodes):
        for s in x.get("inputs", []):
            if s is None:
                continue
            name, _, o = s.partition(":")
            cons[idx[name]].append((int(o or 0), i))
            indeg[i] += 1
        for s in x.get("control_inputs", []):
            ctrl[idx[s]].append(i)
            indeg[i] += 1
    q = deque(i for i in range(len(nodes)) if indeg[i] == 0)
    order = []
    while q:
        v = q.popleft()
        order.append(v)
        for _, c in sorted(cons[v], key=lambda t: t[0]):
            indeg[c] -= 1
            if indeg[c] == 0:
                q.append(c)
        for c in ctrl[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                q.append(c)
    return order


def partition(g, mode="atomic", stable=False, T=0):
    nodes = g["nodes"]
    idx = {x["name"]: i for i, x in enumerate(nodes)}
    order = topo(nodes)
    pos = {v: p for p, v in enumerate(order)}
    n = len(order)
    eng, lab, ulab, data = [None] * n, [""] * n, [""] * n, [False] * n
    out = [set() for _ in range(n)]
    inn = [set() for _ in range(n)]
    for v in order:
        x = nodes[v]
        p = pos[v]
        a = x.get("attrs", {})
        nin = [s for s in x.get("inputs", []) if s] + x.get("control_inputs", [])
        if x["type"] in DATA_LIKE and not nin:
            data[p], eng[p] = True, "ENGINE_DEFAULT_DATA"
        else:
            eng[p] = a.get("_kiln_engine") or ENGINE[x["type"]]
            ulab[p] = a.get("_user_stream_label", "")
        lab[p] = a.get("_stream_label", "")
        for s in nin:
            q = pos[idx[s.partition(":")[0]]]
            if q != p:
                out[q].add(p)
                inn[p].add(q)
    alias = list(range(n))

    def rep(i):
        while alias[i] != i:
            i = alias[i]
        return i

    def second_path(src, dst, upper):
        if not out[src] or not inn[dst]:
            return False
        stack, seen = [src], set()
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            for o in out[c]:
                if o == dst:
                    return True
                if o < upper:
                    stack.append(o)
        return False

    def mergeable(p, c, upper):
        if mode == "second" and ulab[p] and ulab[p] == ulab[c]:
            return True
        if eng[p] != eng[c] or lab[p] != lab[c]:
            return False
        out[p].discard(c); inn[c].discard(p)
        has = second_path(p, c, upper)
        if p != c:
            out[p].add(c); inn[c].add(p)
        return not has

    def merge(p, c):
        small, big = (c, p) if p > c else (p, c)
        alias[big] = small
        out[p].discard(c); inn[c].discard(p)
        inn[small] |= inn[big]
        out[small] |= out[big]
        inn[small].discard(small); out[small].discard(small)
        for x in inn[big]:
            out[x].add(small); out[x].discard(big)
        for y in out[big]:
            inn[y].add(small); inn[y].discard(big)
        return small

    if stable:
        ids = [i for i in range(n) if not data[i]]
        for i in range(len(ids) - 1, 0, -1):
            cur, prev = ids[i], ids[i - 1]
            if mergeable(prev, cur, cur):
                merge(prev, cur)
    else:
        for child in range(n):
            parents = sorted(inn[child], key=lambda q: (len(out[q]), q))
            merged = child
            for p in parents:
                if p != merged and mergeable(p, merged, child):
                    merged = merge(p, merged)
    kof, k_rep = {}, []
    for i in range(n):
        r = rep(i)
        if r not in kof:
            kof[r] = len(k_rep)
            k_rep.append(r)
    ndata = sum(1 for r in k_rep if data[r])
    ranks, nxt = {}, 1 if ndata else 0
    for k, r in enumerate(k_rep):
        if data[r]:
            ranks[k] = 0
        else:
            ranks[k] = nxt
            nxt += 1
    parts = [None] * nxt
    if ndata:
        parts[0] = {"name": "partition%d_rank0_inputNodesSubGraph" % T,
                    "engine": "inputNodesSubGraph", "nodes": set()}
    for k, r in enumerate(k_rep):
        if not data[r]:
            parts[ranks[k]] = {"name": "partition%d_rank%d_new_sub_graph%d" % (T, ranks[k], k),
                               "engine": eng[r], "nodes": set()}
    for i in range(n):
        parts[ranks[kof[rep(i)]]]["nodes"].add(nodes[order[i]]["name"])
    return parts


def check(graph, report, mode="atomic", topo_mode="0"):
    g = json.load(open(graph))
    r = json.load(open(report))
    want = partition(g, mode, topo_mode == "3")
    got = [p for p in r["partitions"] if p["graph"] == g["name"]]
    if len(got) != len(want):
        print("%s: %d partitions, the reference has %d" % (graph, len(got), len(want)))
        return 1
    for w, p in zip(want, got):
        if w["name"] != p["name"] or w["engine"] != p["engine"] or w["nodes"] != set(p["nodes"]):
            print("%s: rank %d: kiln %s %s %s, reference %s %s %s" % (
                graph, p["rank"], p["name"], p["engine"], sorted(p["nodes"]), w["name"],
                w["engine"], sorted(w["nodes"])))
            return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(check(*sys.argv[2:]))
