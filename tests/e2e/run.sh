#!/usr/bin/env bash
# End-to-end tests of `kiln run` and the sequential runtime (docs/run.md).
#
#  1. Small graphs (tests/data/run/*.json) on the sequential runtime with the
#     test engine tests/data/run/tp_run_engine.c (compiled here against
#     plugin-api/ only), so the runtime is tested whatever state the CPU engine
#     is in: Add + Relu + MatMul with a Const, an If taking each branch (the
#     else branch yields another shape; a branch left dynamic is planned only
#     when taken), raw + sidecar and .npy (v1, v2)
#     inputs, positional and named --input, exact expected outputs and
#     sidecars; the default manifest's passes (which insert Identity nodes)
#     in front of the runtime.
#  2. Bad input, each exit 1 with a clear message and no output file: wrong
#     dtype, wrong shape, missing input, unknown input name, input given twice,
#     corrupt .npy, Fortran-order .npy, missing sidecar, short raw file, a
#     failing kernel (named), a dynamic shape at load (named), no runtime.
#     Usage errors exit 2.
#  3. The same small graphs on the default manifest (InferShapes, the engine plugins,
#     the sequential runtime) and the real model hello_deepa against ONNX
#     Runtime's output (rtol 1e-4, atol 1e-5; tests/common/model_cases.sh), when
#     the CPU engine is built; without it, or when the model and its reference
#     cannot be had on this machine (node or npm missing, npm registry
#     unreachable), a loud SKIPPED (exit 77, never a pass).
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; plugdir="${KILN_PLUGIN_DIR:?}"
data="$src/tests/data/run"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0; skipped=""
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

# ---- helpers (python3 struct only: no numpy needed) ------------------------------
cat > "$tmp/t.py" <<'PY'
import json, struct, sys
FMT = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "bool": "?", "uint8": "B"}
NPY = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8", "bool": "|b1", "uint8": "|u1"}
def pack(dt, vals):
    conv = float if dt.startswith("float") else (lambda v: bool(int(v))) if dt == "bool" else int
    return struct.pack("<%d%s" % (len(vals), FMT[dt]), *[conv(v) for v in vals])
def dims_of(s):
    return [int(d) for d in s.split(",") if d != ""]
cmd = sys.argv[1]
if cmd == "raw":      # raw PATH DTYPE DIMS V...   (sidecar PATH.json)
    path, dt, dims, vals = sys.argv[2], sys.argv[3], dims_of(sys.argv[4]), sys.argv[5:]
    open(path, "wb").write(pack(dt, vals))
    json.dump({"dims": dims, "dtype": dt}, open(path + ".json", "w"))
elif cmd == "npy":    # npy PATH VERSION DTYPE DIMS V...
    path, ver, dt, dims, vals = sys.argv[2], int(sys.argv[3]), sys.argv[4], dims_of(sys.argv[5]), sys.argv[6:]
    shape = "(" + "".join("%d, " % d for d in dims).rstrip(" ") + ")" if len(dims) != 1 else "(%d,)" % dims[0]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (NPY[dt], shape)
    pre = 10 if ver == 1 else 12
    hdr += " " * ((64 - (pre + len(hdr) + 1) % 64) % 64) + "\n"
    head = b"\x93NUMPY" + bytes([ver, 0]) + (struct.pack("<H", len(hdr)) if ver == 1 else struct.pack("<I", len(hdr)))
    open(path, "wb").write(head + hdr.encode() + pack(dt, vals))
elif cmd == "check":  # check DIR N NAME DTYPE DIMS V...   exact bytes + sidecar
    d, n, name, dt, dims, vals = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], dims_of(sys.argv[6]), sys.argv[7:]
    side = json.load(open("%s/output.%s.bin.json" % (d, n)))
    got = open("%s/output.%s.bin" % (d, n), "rb").read()
    want = pack(dt, vals)
    errs = []
    if side.get("name") != name: errs.append("name %r != %r" % (side.get("name"), name))
    if side.get("dtype") != dt: errs.append("dtype %r != %r" % (side.get("dtype"), dt))
    if side.get("dims") != dims: errs.append("dims %r != %r" % (side.get("dims"), dims))
    if got != want: errs.append("data %r != %r" % (got, want))
    if errs: print("; ".join(errs)); sys.exit(1)
elif cmd == "close":  # close GOT.bin WANT.bin   float32, rtol 1e-4 atol 1e-5
    a, b = open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
    if len(a) != len(b): print("size %d != %d" % (len(a), len(b))); sys.exit(1)
    x = struct.unpack("<%df" % (len(a) // 4), a); y = struct.unpack("<%df" % (len(b) // 4), b)
    worst = max([abs(p - q) - (1e-5 + 1e-4 * abs(q)) for p, q in zip(x, y)] or [0])
    if worst > 0: print("max excess over tolerance %g (got %s, want %s)" % (worst, x[:4], y[:4])); sys.exit(1)
PY
t() { python3 "$tmp/t.py" "$@"; }

# expect NAME RC FRAGMENT OUTDIR -- command...: exit status, message, no output files.
expect() {
    local name=$1 want=$2 frag=$3 out=$4; shift 5
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || ! grep -qF -- "$frag" "$tmp/err.txt"; then
        bad "$name: rc=$rc (want $want), stderr: $(cat "$tmp/err.txt")"
    elif [ -n "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
        bad "$name: left output files: $(ls "$out")"
    else ok; fi
}

# ---- 1. small graphs on the test engine ------------------------------------------
eng="$tmp/libtp_run_engine.so"
if ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -shared -fPIC -DKILN_PLUGIN -I"$src/plugin-api" \
        "$data/tp_run_engine.c" -o "$eng" 2>"$tmp/cc.err"; then
    bad "cannot build the test engine: $(cat "$tmp/cc.err")"; echo "$pass passed, $fail failed"; exit 1
fi
man="$tmp/m.json"
cat > "$man" <<JSON
{"kiln_manifest": 1, "plugins": [
  {"path": "$plugdir/libkiln_passes.so"},
  {"path": "$plugdir/libkiln_runtime_seq.so", "provides": {"runtimes": ["sequential"]}},
  {"path": "$eng", "provides": {"engines": ["runtest"]}}],
 "stages": {"prepare": ["PruneGraphPass"]}}
JSON
# the default manifest's passes (Identity insertion by the conflict passes) before the runtime
mand="$tmp/md.json"
cat > "$mand" <<JSON
{"kiln_manifest": 1, "extends": "$src/manifests/default.json", "plugins": [
  {"path": "$plugdir/libkiln_runtime_seq.so", "provides": {"runtimes": ["sequential"]}},
  {"path": "$eng", "provides": {"engines": ["runtest"]}}],
 "options": {"kiln.runtime": "sequential"}}
JSON
t raw "$tmp/x.bin" float32 2,3 1 -2 3 -4 5 -6
t raw "$tmp/y.bin" float32 2,3 0.5 0.5 0.5 0.5 0.5 0.5
t npy "$tmp/x.npy" 1 float32 2,3 1 -2 3 -4 5 -6
t npy "$tmp/y2.npy" 2 float32 2,3 0.5 0.5 0.5 0.5 0.5 0.5
t raw "$tmp/c1.bin" bool "" 1
t npy "$tmp/c0.npy" 1 bool "" 0
t raw "$tmp/v.bin" float32 4 -1 2 -3 4

# check_add_relu DIR: Relu(x + y) and x @ [[1,0],[0,1],[1,1]]
check_add_relu() {
    local d=$1 e
    if e=$(t check "$d" 0 relu float32 2,3 1.5 0 3.5 0 5.5 0) &&
       e=$(t check "$d" 1 mm float32 2,2 4 1 -10 -1); then ok; else bad "add_relu outputs in $d: $e"; fi
}
# run_ok NAME -- command...
run_ok() {
    local name=$1; shift 2
    if "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then ok; else bad "$name: $(cat "$tmp/err.txt")"; fi
}
for m in "$man" "$mand"; do
    k=$(basename "$m" .json)
    run_ok "add_relu raw ($k)" -- "$kiln" run "$data/add_relu.json" -m "$m" \
        --input x="$tmp/x.bin" --input y="$tmp/y.bin" --output-dir "$tmp/o1$k"
    check_add_relu "$tmp/o1$k"
    # npy v1 + v2, named by position, out of order names
    run_ok "add_relu npy ($k)" -- "$kiln" run "$data/add_relu.json" -m "$m" \
        --input y="$tmp/y2.npy" --input "$tmp/x.npy" --output-dir "$tmp/o2$k"
    check_add_relu "$tmp/o2$k"
    run_ok "if then ($k)" -- "$kiln" run "$data/if.json" -m "$m" \
        --input "$tmp/c1.bin" --input "$tmp/v.bin" --output-dir "$tmp/o3$k"
    if e=$(t check "$tmp/o3$k" 0 sel float32 4 0 2 0 4) && e=$(t check "$tmp/o3$k" 1 inc float32 4 0 3 -2 5)
    then ok; else bad "if then ($k): $e"; fi
    run_ok "if else ($k)" -- "$kiln" run "$data/if.json" -m "$m" \
        --input cond="$tmp/c0.npy" --input x="$tmp/v.bin" --output-dir "$tmp/o4$k"
    if e=$(t check "$tmp/o4$k" 0 sel float32 2 7 8) && e=$(t check "$tmp/o4$k" 1 inc float32 4 0 3 -2 5)
    then ok; else bad "if else ($k): $e"; fi
done
# a branch whose shapes stay dynamic is planned only when taken
run_ok "if_dynamic then" -- "$kiln" run "$data/if_dynamic.json" -m "$man" \
    --input "$tmp/c1.bin" --input "$tmp/v.bin" --output-dir "$tmp/o5"
if e=$(t check "$tmp/o5" 0 sel float32 4 0 2 0 4); then ok; else bad "if_dynamic then: $e"; fi
expect if_dynamic_else 1 "If node sel, else_branch: node r2 (Relu): output 0 has a dynamic shape [-1]" \
    "$tmp/o6" -- "$kiln" run "$data/if_dynamic.json" -m "$man" --input "$tmp/c0.npy" \
    --input "$tmp/v.bin" --output-dir "$tmp/o6"
# summary line on stdout; -q prints nothing; no --output-dir writes nothing
(cd "$tmp" && mkdir -p cwd && cd cwd && "$kiln" run "$data/add_relu.json" -m "$man" \
    --input "$tmp/x.bin" --input "$tmp/y.bin" >"$tmp/sum.txt" 2>&1)
grep -q "^output 0 relu: float32 \[2,3\] min 0 max 5.5 mean 1.75$" "$tmp/sum.txt" &&
    grep -q "^output 1 mm: float32 \[2,2\] min -10 max 4 mean -1.5$" "$tmp/sum.txt" &&
    [ -z "$(ls -A "$tmp/cwd")" ] && ok || bad "summary / no-output-dir: $(cat "$tmp/sum.txt")"
q=$("$kiln" run "$data/add_relu.json" -m "$man" -q --input "$tmp/x.bin" --input "$tmp/y.bin" 2>&1)
[ -z "$q" ] && ok || bad "-q printed: $q"

# ---- 2. bad input ---------------------------------------------------------------
o="$tmp/bad"; ar="$data/add_relu.json"
t raw "$tmp/xi.bin" int64 2,3 1 2 3 4 5 6
t raw "$tmp/xs.bin" float32 3,2 1 2 3 4 5 6
t raw "$tmp/nosc.bin" float32 2,3 1 2 3 4 5 6; rm "$tmp/nosc.bin.json"
t raw "$tmp/short.bin" float32 2,3 1 2 3 4 5 6; head -c 20 "$tmp/short.bin" > "$tmp/s2.bin"; mv "$tmp/s2.bin" "$tmp/short.bin"
printf '\x93NUMPY\x01\x00\x20\x00{garbage' > "$tmp/corrupt.npy"
head -c 7 "$tmp/x.npy" > "$tmp/trunc.npy"
t npy "$tmp/f.npy" 1 float32 2,3 1 2 3 4 5 6; sed -i 's/False/True /' "$tmp/f.npy"
t raw "$tmp/two.bin" float32 2 1 2
expect wrong_dtype 1 "input x ($tmp/xi.bin): expected float32 [2,3], got int64 [2,3]" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/xi.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect wrong_shape 1 "input x ($tmp/xs.bin): expected float32 [2,3], got float32 [3,2]" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/xs.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect missing_input 1 "missing input y (index 1)" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/x.bin" --output-dir "$o"
expect unknown_name 1 "no input named 'z' (inputs: x, y)" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input z="$tmp/x.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect given_twice 1 "input x is given twice" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/x.bin" --input x="$tmp/x.bin" --output-dir "$o"
expect too_many 1 "the model has only 2 inputs" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input "$tmp/x.bin" --input "$tmp/y.bin" --input "$tmp/y.bin" --output-dir "$o"
expect corrupt_npy 1 "input x: $tmp/corrupt.npy: truncated .npy header" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/corrupt.npy" --input y="$tmp/y.bin" --output-dir "$o"
expect truncated_npy 1 "trunc.npy: not a .npy file" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/trunc.npy" --input y="$tmp/y.bin" --output-dir "$o"
expect fortran_npy 1 "Fortran-order" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/f.npy" --input y="$tmp/y.bin" --output-dir "$o"
expect missing_sidecar 1 "missing sidecar $tmp/nosc.bin.json" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/nosc.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect short_raw 1 "short.bin: holds 20 bytes of data, but float32 [2,3] needs 24" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/short.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect missing_file 1 "input x: cannot open $tmp/nope.bin: No such file or directory" "$o" -- \
    "$kiln" run "$ar" -m "$man" --input x="$tmp/nope.bin" --input y="$tmp/y.bin" --output-dir "$o"
expect kernel_failure 1 "node boom (Fail, engine runtest): injected kernel failure" "$o" -- \
    "$kiln" run "$data/fail.json" -m "$man" --input "$tmp/two.bin" --output-dir "$o"
expect dynamic_shape 1 "node relu (Relu): output 0 has a dynamic shape [-1]" "$o" -- \
    "$kiln" run "$data/dynamic.json" -m "$man" --input "$tmp/v.bin" --output-dir "$o"
printf '{"kiln_manifest": 1, "plugins": [{"path": "%s/libkiln_passes.so"}]}' "$plugdir" > "$tmp/nort.json"
expect no_runtime 1 "no loaded plugin provides a runtime component" "$o" -- \
    "$kiln" run "$ar" -m "$tmp/nort.json" --input "$tmp/x.bin" --input "$tmp/y.bin" --output-dir "$o"
expect unknown_runtime 1 "names runtime 'turbo', which no loaded plugin provides" "$o" -- \
    "$kiln" run "$ar" -m "$man" --option kiln.runtime=turbo --input "$tmp/x.bin" --input "$tmp/y.bin" --output-dir "$o"
expect usage_no_model 2 "expected one MODEL" "" -- "$kiln" run
expect usage_bad_input 2 "--input expects NAME=FILE or FILE" "" -- "$kiln" run "$ar" -m "$man" --input =x

# ---- 3. the CPU engine and a real model --------------------------------------------
if [ ! -e "$plugdir/libkiln_vector.so" ]; then
    skipped="the engines (libkiln_vector.so, ...) not built"
elif ! "$kiln" plugins 2>/dev/null | grep -Eq "runtime +sequential"; then
    skipped="the default manifest loads no sequential runtime"
else
    run_ok "add_relu (default manifest)" -- "$kiln" run "$data/add_relu.json" \
        --input x="$tmp/x.bin" --input y="$tmp/y.bin" --output-dir "$tmp/c1"
    check_add_relu "$tmp/c1"
    run_ok "if else (default manifest)" -- "$kiln" run "$data/if.json" \
        --input "$tmp/c0.npy" --input "$tmp/v.bin" --output-dir "$tmp/c2"
    if e=$(t check "$tmp/c2" 0 sel float32 2 7 8); then ok; else bad "if else (default manifest): $e"; fi
    . "$src/tests/common/model_cases.sh"
    model_cases_locate; rc=$?
    ref="$refs/hello_deepa"
    if [ $rc -eq 77 ]; then
        skipped="hello_deepa: $model_cases_why"
    elif [ $rc -ne 0 ]; then
        bad "hello_deepa: $model_cases_why"
    elif [ ! -f "$models/hello_deepa.onnx" ] || [ ! -f "$ref/input.0.bin" ]; then
        bad "hello_deepa: model or reference case missing in $models, $refs"
    else
        run_ok "hello_deepa" -- "$kiln" run "$models/hello_deepa.onnx" \
            --input "$ref/input.0.bin" --output-dir "$tmp/hd"
        if [ -f "$tmp/hd/output.0.bin" ] && e=$(t close "$tmp/hd/output.0.bin" "$ref/output.0.bin"); then ok
        else bad "hello_deepa output vs ONNX Runtime: ${e:-no output}"; fi
    fi
fi
if [ -n "$skipped" ]; then
    echo "======================================================================"
    echo "SKIPPED: kiln run on the CPU engine / real model: $skipped"
    echo "======================================================================"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
# ctest reports exit 77 as "Skipped" (SKIP_RETURN_CODE): never a silent pass.
[ -z "$skipped" ] || exit 77
