#!/usr/bin/env python3
"""node_tests.py - run kiln on ONNX's backend node tests (libonnx-testdata).

Python 3 standard library only.  Called by run_node_tests.sh; documented in
docs/testing_models.md.

    node_tests.py [--kiln BIN] [--data DIR] [--ops A,B,...] [--subset]
                  [--filter REGEX] [-j N] [--atol A] [--rtol R] [-v]

For every test directory under DIR (default
/usr/include/onnx/backend/test/data/node) whose ops the CPU engine supports,
convert each test_data_set_N/input_*.pb to raw + sidecar (onnx_pb.py), run
    kiln run model.onnx --input NAME=input_K.bin ... --output-dir OUT
and compare every output with output_*.pb: dims and dtype equal, values like
numpy.allclose(atol=1e-4, rtol=1e-3) (tools/compare_outputs.py).

Which ops kiln supports (first that gives a list):
  1. --ops A,B,...                      explicit list (every dtype)
  2. `kiln plugins ENGINE` (aicore, vector, hostcpu, rts) lines `op <Type> <dtype,...> <formats>`
  3. the engines' op tables in plugins/engines/*/*.c: entries
     {"Type", <dtype mask>, ...} of the `const cpu_op cpu_ops_*[]` arrays.
A test is in scope when every op of its model (subgraphs included) is supported,
every domain is ai.onnx, every graph input/output is a tensor of a dtype kiln has
(no string/complex/sequence/optional), and, for a single-node test, the dtype of
output 0 is in that op's dtype mask.  Out-of-scope tests are counted, not run.

Per op (the node's op type; for multi-node "_expanded" tests "<Op>(expanded)"):
pass when all its in-scope tests pass.  Summary line:
    supported ops: N, passing: P, supported-but-failing: [list]
ALLOWLIST (next to this script): `<test name glob>  <reason>` per line for known,
documented gaps.  An allowlisted failure is printed LOUDLY with its reason on
every run and does not count in supported-but-failing; an allowlisted test that
passes is reported as a stale entry.  An entry without a reason is an error.

--subset runs a representative subset (a few tests per op) for `make test`.
Exit: 0 supported-but-failing empty; 1 otherwise; 77 nothing to run (no test
data or no supported op); 2 usage.
"""
import argparse
import concurrent.futures
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KILN_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tools"))
import onnx_pb  # noqa: E402
import compare_outputs  # noqa: E402

DEFAULT_DATA = "/usr/include/onnx/backend/test/data/node"
KILN_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int16", "int32",
               "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
MASK_MACROS = {"CPU_FLOATS": ["float32"],
               "CPU_NUMERIC": ["float32", "float64", "int32", "int64"]}


# ------------------------------------------------------------ supported ops --

ENGINES = ["aicore", "vector", "hostcpu", "rts"]


def ops_from_kiln(kiln, env):
    """Parse `kiln plugins ENGINE` of the built-in engines.  Returns {op: set(dtypes) or None (any)} or {}."""
    ops = {}
    for engine in ENGINES:
        more = _ops_from_kiln(kiln, env, engine)
        if not more:
            return {}
        ops.update(more)
    return ops


def _ops_from_kiln(kiln, env, engine):
    try:
        man = ["-m", env["KILN_MANIFEST"]] if env.get("KILN_MANIFEST") else []
        p = subprocess.run([kiln, "plugins"] + man + [engine], capture_output=True, text=True,
                           timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return {}
    if p.returncode != 0:
        return {}
    ops = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*ops?\s*:?\s+([A-Za-z][A-Za-z0-9_]*)\s*(.*)$", line)
        if not m:
            continue
        if line.strip().startswith("ops:"):
            for name in re.split(r"[,\s]+", line.split(":", 1)[1].strip()):
                if name:
                    ops[name] = None
            continue
        rest = m.group(2).strip()
        dts = set(t for t in re.split(r"[,\s|]+", rest) if t in KILN_DTYPES)
        ops[m.group(1)] = dts or None
    return ops


def _macros(src):
    """#define CPU_* / NN_* mask macros of the engine sources (continuations joined)."""
    macros = {}
    for path in glob.glob(os.path.join(src, "plugins", "engines", "*", "*.[ch]")):
        try:
            text = open(path, encoding="utf-8", errors="replace").read().replace("\\\n", " ")
        except OSError:
            continue
        for m in re.finditer(r"^#define\s+([A-Z_][A-Z0-9_]*)\s+(.+)$", text, re.M):
            if "CPU_DT" in m.group(2) or m.group(2).strip().strip("()").split("|")[0].strip() in macros:
                macros[m.group(1)] = m.group(2)
    return macros


def _mask(expr, macros, depth=0):
    """A C dtype-mask expression -> set of dtype names, or None (any / unknown)."""
    expr = expr.strip()
    if expr in ("0", "0u", "0U", ""):
        return None
    dts = set()
    clean = re.sub(r"CPU_DT\s*\(\s*(\w+)\s*\)", lambda m: " @" + m.group(1) + " ", expr)
    if re.search(r"[^\w@|()\s]", clean):
        return None  # not a plain OR of masks: do not restrict
    for tok in re.findall(r"@?\w+", clean):
        if tok.startswith("@"):
            dts.add(tok[1:].lower())
        elif tok in macros and depth < 8:
            sub = _mask(macros[tok], macros, depth + 1)
            if sub is None:
                return None
            dts |= sub
        elif tok in MASK_MACROS:
            dts.update(MASK_MACROS[tok])
        else:
            return None  # unknown expression: do not restrict
    return dts


def ops_from_source(src):
    ops = {}
    macros = _macros(src)
    for path in sorted(glob.glob(os.path.join(src, "plugins", "engines", "*", "*.c"))):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for tab in re.finditer(r"const\s+cpu_op\s+cpu_ops_\w+\s*\[\s*\]\s*=\s*\{(.*?)\n\};", text, re.S):
            for m in re.finditer(r"\{\s*\"([A-Za-z][A-Za-z0-9_]*)\"\s*,\s*([^,}]*)", tab.group(1)):
                ops[m.group(1)] = _mask(m.group(2), macros)
    return ops


# ------------------------------------------------------------------- tests --

def snake(op):
    return op.lower()


def scan_tests(data):
    tests = []
    for d in sorted(glob.glob(os.path.join(data, "test_*"))):
        mp = os.path.join(d, "model.onnx")
        if not os.path.isfile(mp):
            continue
        name = os.path.basename(d)
        try:
            with open(mp, "rb") as fh:
                model = onnx_pb.decode_model(fh.read())
        except (OSError, ValueError, IndexError) as e:
            tests.append({"name": name, "dir": d, "error": "model unreadable: %s" % e})
            continue
        sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
        tests.append({"name": name, "dir": d, "model": model, "sets": sets})
    # op label: single-node -> its op; multi-node -> "<Op>(expanded)" by name
    for t in tests:
        if "model" in t:
            real = [o for o in t["model"]["nodes"] if o != "Constant"]
            t["model"]["main"] = real if real else t["model"]["nodes"]
    single_ops = sorted({t["model"]["main"][0] for t in tests
                         if "model" in t and len(t["model"]["main"]) == 1}, key=len, reverse=True)
    for t in tests:
        if "model" not in t:
            t["op"] = "?"
            continue
        nodes = t["model"]["main"]
        if len(nodes) == 1:
            t["op"] = nodes[0]
            continue
        base = t["name"][5:].replace("_", "").lower()
        label = None
        for op in single_ops:
            if base.startswith(snake(op)):
                label = op
                break
        t["op"] = "%s(expanded)" % (label or t["name"][5:].split("_")[0])
    return tests


def scope(t, ops):
    """None if in scope, else the reason it is not."""
    if "error" in t:
        return t["error"]
    m = t["model"]
    bad_dom = [d for d in m["domains"] if d not in ("ai.onnx", "")]
    if bad_dom:
        return "domain %s" % ",".join(bad_dom)
    # Constant nodes become Const at import (docs/onnx.md): no kernel needed
    missing = sorted({o for o in m["ops"] if o not in ops and o != "Constant"})
    if missing:
        return "op not supported: %s" % ",".join(missing)
    for vi in m["inputs"] + m["outputs"]:
        if vi["kind"] != "tensor":
            return "%s %s is a %s" % ("value", vi["name"], vi["kind"])
        if vi["dtype"] not in KILN_DTYPES:
            return "dtype %s of %s" % (vi["dtype"], vi["name"])
    if len(m["main"]) == 1 and m["outputs"]:
        mask = ops.get(m["main"][0])
        if mask is not None and m["outputs"][0]["dtype"] not in mask:
            return "dtype %s not in the engine's %s table" % (m["outputs"][0]["dtype"], m["main"][0])
    if not t["sets"]:
        return "no test_data_set"
    return None


def _bf16_fix(tensor, declared):
    """ONNX 1.12's test data stores bfloat16 tensors as UINT16 (same bits): take
    the model's declared dtype."""
    if tensor["dtype"] == "uint16" and declared == "bfloat16":
        tensor["dtype"] = "bfloat16"


def run_test(t, kiln, env, atol, rtol, timeout, work):
    """Returns (ok, message)."""
    m = t["model"]
    tdir = tempfile.mkdtemp(prefix=t["name"] + ".", dir=work)
    try:
        for ds in t["sets"]:
            args = [kiln, "run"] + (["-m", env["KILN_MANIFEST"]] if env.get("KILN_MANIFEST") else []) \
                + [os.path.join(t["dir"], "model.onnx")]
            inputs = sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                            key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            for k, ip in enumerate(inputs):
                try:
                    with open(ip, "rb") as fh:
                        tensor = onnx_pb.decode_tensor(fh.read())
                except (OSError, ValueError) as e:
                    return False, "input %s: %s" % (os.path.basename(ip), e)
                name = m["inputs"][k]["name"] if k < len(m["inputs"]) else tensor["name"]
                if k < len(m["inputs"]):
                    _bf16_fix(tensor, m["inputs"][k]["dtype"])
                dst = os.path.join(tdir, "in%d.bin" % k)
                onnx_pb.write_raw(tensor, dst, name)
                args += ["--input", "%s=%s" % (name, dst)]
            out = os.path.join(tdir, "out_" + os.path.basename(ds))
            os.mkdir(out)
            args += ["--output-dir", out]
            try:
                p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return False, "kiln run timed out after %ds" % timeout
            if p.returncode != 0:
                err = " ".join(l.strip() for l in p.stderr.strip().splitlines()[-2:])
                return False, "kiln run exit %d: %s" % (p.returncode, err[:300])
            outputs = sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                             key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            for k, op in enumerate(outputs):
                with open(op, "rb") as fh:
                    want = onnx_pb.decode_tensor(fh.read())
                if k < len(m["outputs"]):
                    _bf16_fix(want, m["outputs"][k]["dtype"])
                gp = os.path.join(out, "output.%d.bin" % k)
                try:
                    gmeta, gvals = compare_outputs.read_tensor(gp)
                except (OSError, ValueError) as e:
                    return False, "output %d: %s" % (k, str(e).replace(tdir + "/", ""))
                if [int(x) for x in gmeta["dims"]] != list(want["dims"]):
                    return False, "output %d: dims %s != %s" % (k, gmeta["dims"], want["dims"])
                if gmeta["dtype"] != want["dtype"]:
                    return False, "output %d: dtype %s != %s" % (k, gmeta["dtype"], want["dtype"])
                wvals = compare_outputs.decode_values(want["data"], want["dtype"])
                st = compare_outputs.compare_arrays(wvals, gvals, atol, rtol)
                if st["bad"]:
                    i = st["first_bad"]
                    return False, ("output %d: %d of %d out of tolerance, max abs %.3g rel %.3g "
                                   "(first at %d: got %r want %r)" % (
                                       k, st["bad"], len(wvals), st["max_abs"], st["max_rel"],
                                       i, gvals[i], wvals[i]))
        return True, ""
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def load_allowlist(path):
    entries = []
    errors = []
    if not os.path.isfile(path):
        return entries, errors
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) < 2 or not parts[1].strip():
                errors.append("%s:%d: entry %r has no reason" % (path, no, parts[0]))
                continue
            entries.append((parts[0], parts[1].strip()))
    return entries, errors


def pick_subset(tests, per_op):
    """A representative subset: per op label, the first per_op tests by name,
    preferring the plain test_<op> one."""
    by_op = {}
    for t in tests:
        by_op.setdefault(t["op"], []).append(t)
    out = []
    for op, ts in by_op.items():
        ts = sorted(ts, key=lambda t: (len(t["name"]), t["name"]))
        out.extend(ts[:per_op])
    return sorted(out, key=lambda t: t["name"])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN") or os.path.join(SRC, "build", "bin", "kiln"))
    ap.add_argument("--data", default=os.environ.get("KILN_ONNX_NODE_TESTS", DEFAULT_DATA))
    ap.add_argument("--ops", help="comma-separated op list (overrides discovery)")
    ap.add_argument("--subset", action="store_true", help="a few tests per op (make test)")
    ap.add_argument("--per-op", type=int, default=3, help="tests per op with --subset")
    ap.add_argument("--filter", help="only tests whose name matches this regex")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--allowlist", default=os.path.join(HERE, "ALLOWLIST"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print every test")
    a = ap.parse_args(argv)

    if not os.path.isdir(a.data):
        print("SKIPPED: node tests: %s not found (apt-get install libonnx-testdata; "
              "tools/install-deps.sh installs it)" % a.data)
        return 77
    if not os.access(a.kiln, os.X_OK):
        print("FAIL: node tests: kiln binary %s not found" % a.kiln)
        return 1
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")

    source = ""
    if a.ops:
        ops = {o.strip(): None for o in a.ops.split(",") if o.strip()}
        source = "--ops"
    else:
        ops = ops_from_kiln(a.kiln, env)
        source = "`kiln plugins ENGINE`"
        if not ops:
            ops = ops_from_source(SRC)
            source = "the op tables in plugins/engines/*/*.c (`kiln plugins ENGINE` lists no ops)"
    if not ops:
        print("SKIPPED: node tests: the CPU engine supports no op yet "
              "(nothing from `kiln plugins ENGINE` or plugins/engines/*/*.c)")
        return 77
    print("node tests: %s; kiln %s; %d engine ops from %s" % (a.data, a.kiln, len(ops), source))

    t0 = time.time()
    tests = scan_tests(a.data)
    if a.filter:
        rx = re.compile(a.filter)
        tests = [t for t in tests if rx.search(t["name"])]
    in_scope = []
    out_reasons = {}
    for t in tests:
        why = scope(t, ops)
        if why is None:
            in_scope.append(t)
        else:
            out_reasons[why.split(":")[0]] = out_reasons.get(why.split(":")[0], 0) + 1
    run_list = pick_subset(in_scope, a.per_op) if a.subset else in_scope
    print("node tests: %d tests, %d in scope (ops kiln supports), running %d%s; out of scope: %s" % (
        len(tests), len(in_scope), len(run_list), " (--subset)" if a.subset else "",
        ", ".join("%s %d" % kv for kv in sorted(out_reasons.items(), key=lambda kv: -kv[1]))))

    allow, allow_err = load_allowlist(a.allowlist)
    work = tempfile.mkdtemp(prefix="kiln_node_tests.")
    results = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            futs = {ex.submit(run_test, t, a.kiln, env, a.atol, a.rtol, a.timeout, work): t
                    for t in run_list}
            for f in concurrent.futures.as_completed(futs):
                t = futs[f]
                try:
                    results[t["name"]] = f.result()
                except Exception as e:  # a harness bug must not pass silently
                    results[t["name"]] = (False, "harness error: %r" % e)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def allowed(name):
        for pat, reason in allow:
            if fnmatch.fnmatchcase(name, pat):
                return pat, reason
        return None

    per_op = {}
    allowed_fail = []
    stale = []
    for t in run_list:
        ok, msg = results[t["name"]]
        al = allowed(t["name"])
        st = per_op.setdefault(t["op"], {"pass": 0, "fail": [], "allowed": []})
        if ok:
            st["pass"] += 1
            if al:
                stale.append((t["name"], al[0]))
        elif al:
            st["allowed"].append(t["name"])
            allowed_fail.append((t["name"], msg, al[1]))
        else:
            st["fail"].append((t["name"], msg))
        if a.verbose:
            print("  %-4s %s %s" % ("ok" if ok else ("ALLOW" if al else "FAIL"), t["name"], msg))

    print("per op (passed/run):")
    failing = []
    for op in sorted(per_op, key=str.lower):
        st = per_op[op]
        n = st["pass"] + len(st["fail"]) + len(st["allowed"])
        tag = "pass" if not st["fail"] else "FAIL"
        extra = " (%d allowlisted)" % len(st["allowed"]) if st["allowed"] else ""
        print("  %-4s %-28s %d/%d%s" % (tag, op, st["pass"], n, extra))
        for name, msg in st["fail"]:
            print("         FAIL %s: %s" % (name, msg))
        if st["fail"]:
            failing.append(op)
    if allowed_fail:
        print("!!! ALLOWLISTED FAILURES (%d) -- known gaps, NOT passing (%s):" % (
            len(allowed_fail), a.allowlist))
        for name, msg, reason in allowed_fail:
            print("!!!   %s: %s  [reason: %s]" % (name, msg, reason))
    for name, pat in stale:
        print("note: %s passes but is allowlisted by %r: remove the entry" % (name, pat))
    for e in allow_err:
        print("FAIL: %s" % e)
    passing = [op for op in per_op if not per_op[op]["fail"] and not per_op[op]["allowed"]]
    print("node tests: %d tests run in %.1fs: %d passed, %d failed, %d allowlisted" % (
        len(run_list), time.time() - t0, sum(1 for r in results.values() if r[0]),
        sum(len(s["fail"]) for s in per_op.values()), len(allowed_fail)))
    print("supported ops: %d, passing: %d, supported-but-failing: [%s]" % (
        len(per_op), len(passing), ", ".join(sorted(failing, key=str.lower))))
    if not run_list:
        print("SKIPPED: node tests: no test in scope")
        return 77
    return 1 if failing or allow_err else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
