#!/usr/bin/env bash
# model_cache.sh - what a model-cache hit costs beside a full compile
# (docs/model_cache.md).  Not a test.
#
#   bash bench/model_cache.sh [-n RUNS] [KILN] [MODEL]
#
# KILN defaults to build-release/bin/kiln, else build/bin/kiln; MODEL to
# PP-OCRv4 det (ch_PP-OCRv4_det_infer.onnx) from KILN_MODELS_DIR, else
# ~/.cache/kiln/models, else /work/shared/models ("skipped: ... absent" when
# none has it).  Each row runs RUNS times (default 11) and reports the
# minimum and median wall time and the median CPU time (user + system, the
# steadier figure on a loaded machine) of the whole `kiln compile` process:
#   compile   kiln compile MODEL -o OUT.json              (no cache)
#   miss      the same with --cache-dir into an empty directory (the key,
#             the compile and the store)
#   hit       the same with --cache-dir on a primed cache (the key, the
#             lookup and the copy to OUT; no pass runs), once the digest
#             memo knows the entry (primed, 3.5 s, one hit)
# and the model_cache.ms of the report (time spent in the cache).  The last
# line is hit / compile (medians).
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=11
while [ $# -gt 0 ]; do
    case "$1" in
        -n) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) break ;;
    esac
done
kiln=${1:-}
if [ -z "$kiln" ]; then
    for k in "$src/build-release/bin/kiln" "$src/build/bin/kiln"; do
        [ -x "$k" ] && { kiln=$k; break; }
    done
fi
[ -n "$kiln" ] && [ -x "$kiln" ] || { echo "model_cache.sh: no kiln binary (build first)" >&2; exit 2; }
model=${2:-}
if [ -z "$model" ]; then
    for d in "${KILN_MODELS_DIR:-}" "$HOME/.cache/kiln/models" /work/shared/models; do
        [ -n "$d" ] && [ -f "$d/ch_PP-OCRv4_det_infer.onnx" ] && { model="$d/ch_PP-OCRv4_det_infer.onnx"; break; }
    done
fi
if [ -z "$model" ] || [ ! -f "$model" ]; then
    echo "skipped: ${model:-ch_PP-OCRv4_det_infer.onnx} absent (set KILN_MODELS_DIR)"
    exit 0
fi
exec python3 - "$kiln" "$model" "$runs" <<'PY'
import json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

kiln, model, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
tmp = tempfile.mkdtemp(prefix="kiln-bench-cache-")
out, rep = os.path.join(tmp, "out.json"), os.path.join(tmp, "r.json")
env = dict(os.environ)
env.pop("OPENBLAS_NUM_THREADS", None)

def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1e3

def once(args):
    c0, t0 = cpu(), time.perf_counter()
    subprocess.run([kiln, "compile", model, "-o", out, "--report", rep] + args,
                   check=True, env=env, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - t0) * 1e3
    mc = json.load(open(rep))["model_cache"]
    return wall, cpu() - c0, mc

def row(name, make_args, want):
    walls, cpus, ms = [], [], []
    for i in range(runs):
        wall, c, mc = once(make_args(i))
        if mc["status"] != want:
            sys.exit(f"{name}: model_cache.status {mc['status']}, expected {want}")
        walls.append(wall)
        cpus.append(c)
        ms.append(mc["ms"])
    med, cmed = statistics.median(walls), statistics.median(cpus)
    print(f"{name:8s} {min(walls):9.1f} {med:9.1f} {cmed:9.1f} {statistics.median(ms):10.1f}")
    return med, cmed

try:
    print(f"kiln {kiln}\nmodel {model} ({os.path.getsize(model) / 1e6:.1f} MB), {runs} runs each")
    print(f"{'':8s} {'min ms':>9s} {'median ms':>9s} {'CPU ms':>9s} {'cache ms':>10s}")
    once([])  # warm the page cache and the plugin files
    compile_ms = row("compile", lambda i: [], "disabled")
    row("miss", lambda i: ["--cache-dir", os.path.join(tmp, f"miss{i}")], "miss")
    primed = os.path.join(tmp, "primed")
    once(["--cache-dir", primed])
    # the digest memo records files only once their last change is 3 s old
    # (docs/model_cache.md): the entry just written is hashed until then
    time.sleep(3.5)
    once(["--cache-dir", primed])
    hit_ms = row("hit", lambda i: ["--cache-dir", primed], "hit")
    print(f"hit / compile = {hit_ms[0] / compile_ms[0]:.3f} wall, {hit_ms[1] / compile_ms[1]:.3f} CPU "
          f"(medians; {compile_ms[0] / hit_ms[0]:.1f}x faster)")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
PY
