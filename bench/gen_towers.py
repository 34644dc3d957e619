#!/usr/bin/env python3
"""Write a kiln graph with parallel branches for bench/runtime.sh.

Usage: gen_towers.py OUT.json [TOWERS [DEPTH [N]]]

TOWERS independent towers (default 2) of DEPTH (default 8) MatMul + Relu
layers over an [N, N] input x (default N 256), each with its own [N, N]
weights (deterministic, small values), joined at the end by a chain of Adds.
Nothing crosses between the towers before the join, so StreamAllocator can
put each tower on a stream of its own and the multistream runtime can run
them at the same time.
"""
import json
import sys


def weights(seed, n):
    # a fixed linear congruential sequence in [-1/n, 1/n): no numpy needed
    v, out = seed * 2654435761 % 2**32, []
    for _ in range(n * n):
        v = (1103515245 * v + 12345) % 2**31
        out.append(round((v / 2**31 - 0.5) * 2.0 * (6.0 / n) ** 0.5, 6))  # He uniform
    return out


def main():
    out = sys.argv[1]
    towers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 256
    t = {"dtype": "float32", "shape": [n, n]}
    nodes = [{"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [t]}]
    ends = []
    for k in range(towers):
        prev = "x:0"
        for d in range(depth):
            w = "w%d_%d" % (k, d)
            nodes.append({"name": w, "type": "Const", "outputs": [t],
                          "attrs": {"value": {"type": "tensor", "value": {
                              "dtype": "float32", "shape": [n, n],
                              "data": weights(k * 1000 + d + 1, n)}}}})
            mm = "mm%d_%d" % (k, d)
            label = {"_stream_label": "tower%d" % k}
            nodes.append({"name": mm, "type": "MatMul", "inputs": [prev, w + ":0"], "outputs": [t],
                          "attrs": label})
            r = "relu%d_%d" % (k, d)
            nodes.append({"name": r, "type": "Relu", "inputs": [mm + ":0"], "outputs": [t],
                          "attrs": dict(label)})
            prev = r + ":0"
        ends.append(prev)
    acc = ends[0]
    for k in range(1, towers):
        a = "join%d" % k
        nodes.append({"name": a, "type": "Add", "inputs": [acc, ends[k]], "outputs": [t]})
        acc = a + ":0"
    nodes.append({"name": "out", "type": "NetOutput", "inputs": [acc]})
    g = {"kiln_graph": 1, "name": "towers_%dx%d_n%d" % (towers, depth, n), "nodes": nodes}
    with open(out, "w") as f:
        json.dump(g, f)


if __name__ == "__main__":
    main()
