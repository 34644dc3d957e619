#!/usr/bin/env bash
# fixed_cost.sh - the fixed cost of a kiln command: wall time, peak RSS,
# plugin files opened and threads started, for a small model, before/after.
# Method and caveats: bench/README.md ("fixed_cost"); not a test.
#
#   bash bench/fixed_cost.sh [-n RUNS] NEW_KILN [BASE_KILN]
#
# Commands (each run RUNS times, the minimum and median wall time reported):
#   compile   kiln compile examples/residual_block.json -o OUT
#   info      kiln info examples/residual_block.json
#   convert   kiln convert examples/residual_block.json OUT
#   plugins   kiln plugins
#   manifest  kiln manifest check manifests/default.json
#   run       kiln run hello_deepa.onnx with its reference input (skipped when
#             the model is not found: KILN_MODELS_DIR, else ~/.cache/kiln/models,
#             else /work/shared/models)
# Columns: min/median wall ms, median CPU ms (user + system), peak RSS (MiB, /usr/bin/time -f %M), dlopen =
# plugin files opened (KILN_DEBUG_PLUGIN_LOADS=1 lines; a BASE_KILN without
# that debug line shows "-"), threads = clone() calls (strace -f, when strace
# is installed).  With BASE_KILN, ratio = base median / new median (>1 = the
# new binary is faster).  Neither binary gets OPENBLAS_NUM_THREADS or -j.
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=15
while [ $# -gt 0 ]; do
    case "$1" in
        -n) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: bash bench/fixed_cost.sh [-n RUNS] NEW_KILN [BASE_KILN]" >&2; exit 2; }
new=$1; base=${2:-}
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS KILN_NO_DLCLOSE
model=""
for d in "${KILN_MODELS_DIR:-}" "$HOME/.cache/kiln/models" /work/shared/models; do
    [ -n "$d" ] && [ -f "$d/hello_deepa.onnx" ] && { model="$d/hello_deepa.onnx"; break; }
done
exec python3 - "$src" "$runs" "$model" "$new" $base <<'PY'
import os, shutil, statistics, subprocess, sys, tempfile, time
src, runs, model, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
tmp = tempfile.mkdtemp()
ex = f"{src}/examples/residual_block.json"
cmds = [("compile", ["compile", ex, "-o", f"{tmp}/o.json"]),
        ("info", ["info", ex]),
        ("convert", ["convert", ex, f"{tmp}/c.json"]),
        ("plugins", ["plugins"]),
        ("manifest", ["manifest", "check", f"{src}/manifests/default.json"])]
if model:
    inp = f"{tmp}/in.bin"
    # hello_deepa's input: float32 [1,25,96]; zeros are enough to time it
    open(inp, "wb").write(bytes(4 * 25 * 96))
    open(inp + ".json", "w").write('{"dtype": "float32", "dims": [1, 25, 96]}')
    cmds.append(("run", ["run", model, "--input", inp, "--output-dir", f"{tmp}/out", "-q"]))
else:
    print("hello_deepa.onnx not found: the run row is skipped")

def peak_rss(argv):
    """Peak RSS in MiB by /usr/bin/time -f %M (a child of this Python process
    would report Python's own peak: Linux keeps the maximum across exec)."""
    if not os.path.exists("/usr/bin/time"):
        return float("nan")
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f"{tmp}/rss"] + argv,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return int(open(f"{tmp}/rss").read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return float("nan")

def wall(kiln, args):
    """(wall ms, CPU ms = user + system of the process and its threads)."""
    t = time.perf_counter()
    p = subprocess.Popen([kiln] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    ms = (time.perf_counter() - t) * 1000
    return (ms, (ru.ru_utime + ru.ru_stime) * 1000) if status == 0 else None

def extras(kiln, args):
    env = dict(os.environ, KILN_DEBUG_PLUGIN_LOADS="1")
    err = subprocess.run([kiln] + args, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr
    nd = err.count("kiln: debug: dlopen")
    threads = "-"
    if shutil.which("strace"):
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=clone,clone3", "-o",
                        f"{tmp}/st", kiln] + args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        threads = sum(1 for l in open(f"{tmp}/st") if "clone" in l and "= " in l)
    rss = max(peak_rss([kiln] + args) for _ in range(3))
    return rss, nd if nd else "-", threads

# The binaries' runs are interleaved, so a change in the machine's load hits both.
res = {}
for name, args in cmds:
    times = {b: [] for b in bins}
    for _ in range(runs):
        for b in bins:
            times[b].append(wall(b, args))
    for b in bins:
        if None in times[b]:
            res[(b, name)] = None
        else:
            w = [t[0] for t in times[b]]
            cpu = statistics.median(t[1] for t in times[b])
            res[(b, name)] = (min(w), statistics.median(w)) + extras(b, args) + (cpu,)

print(f"{runs} runs each (interleaved); wall ms min/median, CPU ms median (user + system, "
      "all threads), peak RSS MiB, plugin files opened, threads started")
for b in bins:
    print(f"\n{b}")
    print(f"{'command':10} {'min ms':>8} {'med ms':>8} {'cpu ms':>8} {'RSS MiB':>8} {'dlopen':>7} "
          f"{'threads':>8}")
    for name, _ in cmds:
        m = res[(b, name)]
        if m is None:
            print(f"{name:10} failed")
            continue
        print(f"{name:10} {m[0]:8.2f} {m[1]:8.2f} {m[5]:8.2f} {m[2]:8.1f} {m[3]!s:>7} {m[4]!s:>8}")
if len(bins) == 2:
    n, b = bins
    print(f"\nratio base/new (>1 = {n} is faster/smaller; min is the steadier on a busy machine)")
    for name, _ in cmds:
        x, y = res[(n, name)], res[(b, name)]
        if x and y:
            print(f"{name:10} min wall x{y[0] / x[0]:5.2f}   median wall x{y[1] / x[1]:5.2f}"
                  f"   cpu x{y[5] / x[5]:5.2f}   RSS x{y[2] / x[2]:5.2f}")
shutil.rmtree(tmp)
PY
