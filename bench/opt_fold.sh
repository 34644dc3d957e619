#!/usr/bin/env bash
# opt_fold.sh - how the constant-folding and CSE passes scale: wall time of
# each pass alone (from `--report`, the pass's own time, JSON reading and
# writing excluded) on generated graphs of 10k, 100k (and with -l, 1M) nodes.
# Method and caveats: bench/README.md ("opt_fold"); not a test.
#
#   bash bench/opt_fold.sh [-l] [KILN]          (KILN default: build-release/bin/kiln)
#
# The graph: blocks of 10 nodes over one Data x: two equal Relu(x) (CSE merges
# one), two Adds of them with two equal Consts (ConstantFuseSamePass merges one
# Const, then CSE the second Add), and a Const -> Neg -> Mul(., Const) chain
# ConstantFoldingPass folds.  Every block's Consts hold different values, so
# one pass run merges 1 Const, 2 nodes and folds 2 per block.
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes="10000 100000"
[ "${1:-}" = "-l" ] && { sizes="$sizes 1000000"; shift; }
kiln=${1:-$src/build-release/bin/kiln}
[ -x "$kiln" ] || { echo "opt_fold.sh: $kiln is not built" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
exec python3 - "$kiln" "$tmp" $sizes <<'PY'
import json, subprocess, sys
kiln, tmp, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
def const(name, v):
    return {"name": name, "type": "Const", "outputs": [{"dtype": "float32", "shape": [1]}],
            "attrs": {"value": {"type": "tensor", "value": {"dtype": "float32", "shape": [1], "data": [v]}}}}
def op(name, t, ins):
    return {"name": name, "type": t, "inputs": ins, "outputs": [{"dtype": "float32", "shape": [1]}]}
passes = ["ConstantFuseSamePass", "CommonSubexpressionEliminationPass", "ConstantFoldingPass"]
res = {}
for n in sizes:
    nodes = [{"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"dtype": "float32", "shape": [1]}]}]
    outs = []
    for b in range(n // 10):
        p = "b%d_" % b
        nodes += [op(p + "r1", "Relu", ["x:0"]), op(p + "r2", "Relu", ["x:0"]),
                  const(p + "c1", b + 0.5), const(p + "c2", b + 0.5),
                  op(p + "a1", "Add", [p + "r1:0", p + "c1:0"]), op(p + "a2", "Add", [p + "r2:0", p + "c2:0"]),
                  const(p + "k", -b - 0.25), op(p + "neg", "Neg", [p + "k:0"]),
                  const(p + "m", 2.0 + b), op(p + "mul", "Mul", [p + "neg:0", p + "m:0"])]
        outs += [p + "a1:0", p + "a2:0", p + "mul:0"]
    sums = []
    # fold the outputs into a few NetOutput inputs through Add trees? keep them all
    nodes.append({"name": "out", "type": "NetOutput", "inputs": outs})
    path = "%s/g%d.json" % (tmp, n)
    json.dump({"kiln_graph": 1, "name": "opt_fold_bench", "nodes": nodes}, open(path, "w"))
    for ps in passes:
        rep = "%s/r.json" % tmp
        subprocess.run([kiln, "opt", path, "--passes", ps, "-o", "%s/o.json" % tmp, "--report", rep],
                       check=True, stderr=subprocess.DEVNULL)
        r = json.load(open(rep))
        e = [p for p in r["passes"] if p["pass"] == ps][0]
        res[(n, ps)] = (e["wall_ms"], e["stats"])
print("%-36s %10s %12s %10s  %s" % ("pass", "nodes", "wall ms", "us/node", "stats"))
for ps in passes:
    for n in sizes:
        ms, st = res[(n, ps)]
        print("%-36s %10d %12.1f %10.3f  %s" % (ps, n, ms, 1000.0 * ms / n,
              ", ".join("%s=%d" % kv for kv in sorted(st.items()))))
    if len(sizes) > 1:
        a, b = res[(sizes[0], ps)][0], res[(sizes[1], ps)][0]
        print("%-36s %10s %12s  100k/10k = %.1f (linear: 10)" % ("", "", "", b / a if a else 0))
PY
