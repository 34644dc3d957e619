#!/usr/bin/env python3
"""check_shapes.py - checks a graph JSON written by `kiln opt --passes InferShapes`.

usage: check_shapes.py OUT.json REF_CASE_DIR

Every output descriptor of every node (root and remaining subgraphs) must have
a dtype and a fully known shape (all dims >= 0), and the shapes of the root
NetOutput's inputs must equal the dims in REF_CASE_DIR/output.N.bin.json.
Prints one line per problem; exit 0 when there is none.
"""
import json
import os
import sys


def walk(graph, path, problems, counts):
    for node in graph.get("nodes", []):
        where = f"{path}/{node['name']} ({node['type']})"
        for i, out in enumerate(node.get("outputs", [])):
            counts[0] += 1
            shape = out.get("shape")
            if "dtype" not in out:
                problems.append(f"{where} output {i}: no dtype")
            if shape is None or any(d < 0 for d in shape):
                problems.append(f"{where} output {i}: shape {shape} not fully known")
        for role, sub in node.get("subgraphs", {}).items():
            counts[1] += 1
            walk(sub, f"{where}/{role}", problems, counts)


def main():
    out_json, ref = sys.argv[1], sys.argv[2]
    g = json.load(open(out_json))
    problems, counts = [], [0, 0]
    walk(g, "", problems, counts)
    by_name = {n["name"]: n for n in g["nodes"]}
    netout = [n for n in g["nodes"] if n["type"] == "NetOutput"]
    if len(netout) != 1:
        problems.append(f"root has {len(netout)} NetOutput nodes")
    else:
        for i, src in enumerate(netout[0].get("inputs", [])):
            name, _, idx = src.rpartition(":")
            shape = by_name[name]["outputs"][int(idx)].get("shape")
            meta = os.path.join(ref, f"output.{i}.bin.json")
            if not os.path.exists(meta):
                continue
            want = json.load(open(meta))["dims"]
            if shape != want:
                problems.append(f"model output {i} ({src}): shape {shape}, reference {want}")
    for p in problems[:20]:
        print(p)
    if len(problems) > 20:
        print(f"... {len(problems) - 20} more")
    print(f"{len(g['nodes'])} root nodes, {counts[0]} tensors, {counts[1]} subgraphs, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
