#!/usr/bin/env bash
# pipeline_scale.sh - the full default pipeline on large synthetic graphs:
# `kiln compile` of a transformer-like graph of 100k and 1M nodes (with -s, 10k
# and 100k only): wall time and peak RSS of the whole process, and per pass the
# pass's own time (from --report) with the 1M/100k ratio (linear is 10; the
# target is <= 12, marked `!` above).  Method: bench/README.md
# ("pipeline_scale"); not a test.
#
#   bash bench/pipeline_scale.sh [-s] [-c [-r N]] [KILN]   (KILN default: build-release/bin/kiln)
#
# -c: CPU time instead of wall time, for a machine shared with other jobs: a
# small instrument plugin (built here with cc against plugin-api/) prints each
# pass's CPU time (the process's, so the parallel optimize_subgraph stage
# counts all its threads; the node passes of one GEPass walk each show the
# walk's time) and each stage's; the whole process's is user + system.  -r N
# runs each size N times, interleaved, and keeps the smallest figure of each.
#
# The graph: 25-node pre-norm blocks over declared shapes [2, 8, 16]:
# LayerNormalization, q/k/v MatMuls, Transpose, the two attention MatMuls, a
# scale Mul, Softmax, the output MatMul, two residual Adds, a second
# LayerNormalization and a two-MatMul FFN with Gelu; every weight is a Const
# with a declared shape and no value (nothing folds or merges); a
# control edge from one block's Softmax to the next block's q weight every
# other block.
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes="100000 1000000"
cpu=0 reps=1
while [ $# -gt 0 ]; do
    case "$1" in
    -s) sizes="10000 100000"; shift ;;
    -c) cpu=1; shift ;;
    -r) reps=$2; shift 2 ;;
    *) break ;;
    esac
done
kiln=${1:-$src/build-release/bin/kiln}
[ -x "$kiln" ] || { echo "pipeline_scale.sh: $kiln is not built (make bench)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
plugin=""
if [ "$cpu" = 1 ]; then
    cat > "$tmp/passcpu.c" <<'C'
#include <kiln/kiln.h>
#include <stdio.h>
#include <time.h>
static double t_pass, t_stage;
static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static void bp(void *i, const char *s, const char *p, const kiln_graph *g)
{
    (void)i, (void)s, (void)p, (void)g;
    t_pass = cpu();
}
static void ap(void *i, const char *s, const char *p, const kiln_graph *g, kiln_pass_result r)
{
    (void)i, (void)g, (void)r;
    fprintf(stderr, "kiln-passcpu: pass\t%s\t%s\t%.6f\n", p, s, cpu() - t_pass);
}
static void bs(void *i, const char *s, const kiln_graph *g)
{
    (void)i, (void)s, (void)g;
    t_stage = cpu();
}
static void as(void *i, const char *s, const kiln_graph *g)
{
    (void)i, (void)g;
    fprintf(stderr, "kiln-passcpu: stage\t%s\t%s\t%.6f\n", s, s, cpu() - t_stage);
}
static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)e;
    static const kiln_instrument_desc in = {.struct_size = sizeof(kiln_instrument_desc),
                                            .name = "BenchPassCpu", .before_pass = bp,
                                            .after_pass = ap, .before_stage = bs,
                                            .after_stage = as};
    return kiln_register_instrument(r, &in);
}
KILN_PLUGIN_DEFINE("bench.passcpu", "1.0.0", "MIT", "per-pass CPU time", init, NULL)
C
    ${CC:-cc} -O2 -shared -fPIC -DKILN_PLUGIN -I"$src/plugin-api" "$tmp/passcpu.c" \
        -o "$tmp/libpasscpu.so" || { echo "pipeline_scale.sh: cannot build the -c plugin" >&2; exit 2; }
    plugin="$tmp/libpasscpu.so"
fi
exec python3 - "$kiln" "$tmp" "$plugin" "$reps" $sizes <<'PY'
import json, subprocess, sys, time, resource
kiln, tmp, plugin, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sizes = [int(s) for s in sys.argv[5:]]
H = 16
def gen(n, path):
    out = open(path, "w")
    out.write('{"kiln_graph": 1, "name": "transformer", "nodes": [\n')
    out.write(json.dumps({"name": "input", "type": "Data", "attrs": {"index": 0},
                          "outputs": [{"dtype": "float32", "shape": [2, 8, H]}]}))
    cnt, layer, x, prev_sm = 1, 0, "input", None
    def w(name, shape, seed):
        # a weight with a declared shape and no value (as a graph before its
        # weights are bound): the passes see the structure, JSON stays small
        return {"name": name, "type": "Const", "outputs": [{"dtype": "float32", "shape": shape}]}
    def op(name, t, ins, shape, attrs=None, ctrl=None):
        d = {"name": name, "type": t, "inputs": [i + ":0" for i in ins],
             "outputs": [{"dtype": "float32", "shape": shape}]}
        if attrs: d["attrs"] = attrs
        if ctrl: d["control_inputs"] = ctrl
        return d
    X = [2, 8, H]
    while cnt + 26 <= n:
        p = "L%d/" % layer
        s = layer * 13
        nodes = [w(p + "g1", [H], s), op(p + "ln1", "LayerNormalization", [x, p + "g1"], X, {"axis": -1}),
                 w(p + "wq", [H, H], s + 1), w(p + "wk", [H, H], s + 2), w(p + "wv", [H, H], s + 3),
                 op(p + "q", "MatMul", [p + "ln1", p + "wq"], X), op(p + "k", "MatMul", [p + "ln1", p + "wk"], X),
                 op(p + "v", "MatMul", [p + "ln1", p + "wv"], X),
                 op(p + "kt", "Transpose", [p + "k"], [2, H, 8], {"perm": [0, 2, 1]}),
                 op(p + "s", "MatMul", [p + "q", p + "kt"], [2, 8, 8]),
                 w(p + "c", [1], s + 4), op(p + "scale", "Mul", [p + "s", p + "c"], [2, 8, 8]),
                 op(p + "softmax", "Softmax", [p + "scale"], [2, 8, 8], {"axis": -1}),
                 op(p + "attn", "MatMul", [p + "softmax", p + "v"], X),
                 w(p + "wo", [H, H], s + 5), op(p + "o", "MatMul", [p + "attn", p + "wo"], X),
                 op(p + "res1", "Add", [x, p + "o"], X),
                 w(p + "g2", [H], s + 6), op(p + "ln2", "LayerNormalization", [p + "res1", p + "g2"], X, {"axis": -1}),
                 w(p + "w1", [H, H], s + 7), op(p + "ffn1", "MatMul", [p + "ln2", p + "w1"], X),
                 op(p + "gelu", "Gelu", [p + "ffn1"], X),
                 w(p + "w2", [H, H], s + 8), op(p + "ffn2", "MatMul", [p + "gelu", p + "w2"], X),
                 op(p + "res2", "Add", [p + "res1", p + "ffn2"], X)]
        if prev_sm and layer & 1:
            nodes[2]["control_inputs"] = [prev_sm]
        prev_sm = p + "softmax"
        for nd in nodes:
            out.write(",\n" + json.dumps(nd))
        cnt += len(nodes)
        x = p + "res2"
        layer += 1
    out.write(",\n" + json.dumps({"name": "output", "type": "NetOutput", "inputs": [x + ":0"]}))
    out.write("\n]}\n")
    out.close()
    return cnt + 1
def run(n, g):
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", kiln, "compile", g, "-o", "%s/out.json" % tmp,
                        "--report", "%s/rep.json" % tmp] + (["--plugin", plugin] if plugin else []),
                       capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        print("size %d: kiln compile failed:\n%s" % (n, p.stderr[-2000:])); sys.exit(1)
    rss, usr, sysc = p.stderr.strip().splitlines()[-1].split()
    rep = json.load(open("%s/rep.json" % tmp))
    per = {}
    if plugin:  # CPU seconds from the instrument (every graph a pass ran on)
        for line in p.stderr.splitlines():
            if line.startswith("kiln-passcpu: "):
                kind, name, stage, t = line[len("kiln-passcpu: "):].split("\t")
                k = "%s (%s)" % (name, stage) if kind == "pass" else "stage %s" % name
                per[k] = per.get(k, 0.0) + float(t)
        total = float(usr) + float(sysc)
    else:
        for e in rep.get("passes", []):
            k = "%s (%s)" % (e["pass"], e["stage"])
            per[k] = per.get(k, 0.0) + e["wall_ms"] / 1000.0
        total = rep.get("total_pass_ms", 0) / 1000.0
    return wall, int(rss) / 1024.0, total, per
res, graphs = {}, {}
for n in sizes:
    g = "%s/g%d.json" % (tmp, n)
    t0 = time.time(); nodes = gen(n, g); tg = time.time() - t0
    graphs[n] = (g, nodes, tg)
for r in range(reps):
    for n in sizes:
        g, nodes, tg = graphs[n]
        wall, rss, total, per = run(n, g)
        if n in res:  # keep the smallest figure of each
            w0, r0, t0_, p0 = res[n][2:]
            per = {k: min(v, p0.get(k, v)) for k, v in per.items()}
            wall, rss, total = min(wall, w0), min(rss, r0), min(total, t0_)
        res[n] = (nodes, tg, wall, rss, total, per)
for n in sizes:
    nodes, tg, wall, rss, total, per = res[n]
    print("size %d: %d nodes, generated in %.1f s; kiln compile %.2f s wall, %s %.2f s, peak RSS %.0f MiB"
          % (n, nodes, tg, wall, "process CPU" if plugin else "passes", total, rss), flush=True)
a, b = sizes[0], sizes[-1]
print("\n%-52s %10s %10s %8s" % ("pass (stage)" + (", CPU s" if plugin else ", wall s"),
                                 "%dk s" % (a // 1000), "%dk s" % (b // 1000), "ratio"))
keys = sorted(res[b][5], key=lambda k: -res[b][5][k])
for k in keys:
    x, y = res[a][5].get(k, 0.0), res[b][5][k]
    if y < 0.005 and x < 0.0005:
        continue
    r = y / x if x > 0 else float("inf")
    print("%-52s %10.3f %10.3f %7.1f%s" % (k[:52], x, y, r, " !" if r > 12 * b / a / 10 and y > 0.05 else ""))
print("%-52s %10.3f %10.3f %7.1f" % ("whole process (wall)", res[a][2], res[b][2], res[b][2] / res[a][2]))
if plugin:
    print("%-52s %10.3f %10.3f %7.1f" % ("whole process (CPU)", res[a][4], res[b][4], res[b][4] / res[a][4]))
PY
