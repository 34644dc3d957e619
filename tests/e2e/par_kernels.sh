#!/usr/bin/env bash
# par_kernels.sh - the vector and aicore kernels shared out to OpenMP threads
# (plugins/engines/common/cpu_par.h, docs/threads.md "Kernel threads") give
# the same bytes at every thread count:
#   1. kernels.json (tests/data/par_kernels/gen_graphs.py): every parallelised
#      kernel on a tensor above the grain, each node's output a graph output;
#      the report shows each op ran (fused chains as KilnFusedElementwise);
#      `kiln run -j 1`, `-j 2` and `-j 3` (uneven splits) write identical
#      output files, with the vector fusion on and off;
#   2. in an OpenMP build the plugins start libgomp with the -j thread count
#      (OMP_DISPLAY_ENV), and -j 2 runs are not slower for the wait policy's
#      sake (no timing: only that the run succeeds with the policy kiln sets);
#   3. the real models (when tools/fetch-models.sh finds them; rec, cls and,
#      unless KILN_SLOW_TESTS=0, det): -j 1 and -j 2 outputs are the same bytes.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
python3 "$src/tests/data/par_kernels/gen_graphs.py" "$tmp" || { echo "FAIL gen_graphs.py"; exit 1; }
python3 - "$tmp" <<'PY' || { echo "FAIL inputs"; exit 1; }
import json, math, struct, sys
for name, dims, ph in (("x", [2, 16, 96, 64], 0.3), ("z", [3, 7, 101, 127], 1.1)):
    n = 1
    for d in dims:
        n *= d
    vals = [math.sin(0.37 * i + ph) * 3.0 + 0.001 * (i % 97) for i in range(n)]
    open("%s/%s.bin" % (sys.argv[1], name), "wb").write(struct.pack("<%df" % n, *vals))
    json.dump({"dims": dims, "dtype": "float32"}, open("%s/%s.bin.json" % (sys.argv[1], name), "w"))
PY
ins=(--input x="$tmp/x.bin" --input z="$tmp/z.bin")

# same_bytes NAME DIR_A DIR_B: every output file of A equals B's
same_bytes() {
    local f n=0
    for f in "$2"/output.*.bin; do
        [ -f "$f" ] || break
        n=$((n+1))
        cmp -s "$f" "$3/$(basename "$f")" || { bad "$1: $(basename "$f") differs"; return; }
    done
    [ "$n" -gt 0 ] && ok || bad "$1: no outputs in $2"
}

# ---- 1. kernels.json at 1, 2 and 3 threads ------------------------------------------
for fusion in on off; do
    for j in 1 2 3; do
        d="$tmp/$fusion.j$j"
        if ! "$kiln" run "$tmp/kernels.json" "${ins[@]}" -j "$j" --option "vector.fusion=$fusion" \
                --output-dir "$d" --report "$d.report.json" >/dev/null 2>"$tmp/err.txt"; then
            bad "kernels.json -j $j fusion $fusion: run failed:"; cat "$tmp/err.txt"; continue
        fi
        [ "$j" -gt 1 ] && same_bytes "kernels.json fusion $fusion -j $j vs -j 1" "$d" "$tmp/$fusion.j1"
    done
done
[ "$(ls "$tmp/on.j1"/output.*.bin 2>/dev/null | wc -l)" -eq 30 ] && ok ||
    bad "kernels.json: expected 30 outputs, got $(ls "$tmp/on.j1" 2>/dev/null | grep -c 'output.*bin$')"
# every kernel the graph is for ran (fusion on: the two chains fused)
python3 - "$tmp/on.j2.report.json" <<'PY' && ok || bad "kernels.json: the report lacks kernels (above)"
import json, sys
ops = json.load(open(sys.argv[1]))["run"]["ops"]
want = {"KilnFusedElementwise": 2, "Add": 1, "Mul": 1, "Sub": 1, "Div": 1, "Greater": 1, "Max": 1,
        "Sigmoid": 1, "Relu": 1, "Erf": 1, "Gelu": 1, "Clip": 1, "ReduceMean": 3, "ReduceMax": 1,
        "Softmax": 2, "LayerNormalization": 1, "GlobalAveragePool": 1, "GlobalMaxPool": 1,
        "MaxPool": 1, "AveragePool": 1, "BatchNormalization": 1, "Resize": 2}
miss = {op: (n, ops.get(op, {}).get("count", 0)) for op, n in want.items()
        if ops.get(op, {}).get("count", 0) != n}
if miss:
    print("op: (expected, ran)", miss)
    sys.exit(1)
PY

# ---- 2. the OpenMP runtime gets the -j thread count -----------------------------------
if [ "${KILN_OPENMP_ACTIVE:-0}" = 1 ]; then
    if OMP_DISPLAY_ENV=true "$kiln" run "$tmp/kernels.json" "${ins[@]}" -j 2 >/dev/null 2>"$tmp/env.txt"; then
        if grep -q "OMP_NUM_THREADS = '2'" "$tmp/env.txt"; then ok; else
            bad "-j 2: libgomp does not report OMP_NUM_THREADS = '2':"; head -20 "$tmp/env.txt"; fi
    else
        bad "OMP_DISPLAY_ENV run failed:"; cat "$tmp/env.txt"
    fi
fi

# ---- 3. real models ------------------------------------------------------------------
. "$src/tests/common/model_cases.sh"
if model_cases_locate 2>/dev/null; then
    cases="ch_PP-OCRv4_rec_infer@text ch_ppocr_mobile_v2.0_cls_infer@text"
    [ "${KILN_SLOW_TESTS:-1}" != 0 ] && cases="$cases ch_PP-OCRv4_det_infer@text"
    for c in $cases; do
        d="$refs/$c"; m="$models/${c%@*}.onnx"
        [ -d "$d" ] && [ -f "$m" ] || { bad "$c: case or model missing"; continue; }
        min=()
        for inp in "$d"/input.*.bin; do
            name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$inp.json")
            min+=(--input "$name=$inp")
        done
        if "$kiln" run "$m" "${min[@]}" -j 1 --output-dir "$tmp/$c.1" >/dev/null 2>"$tmp/err.txt" &&
            "$kiln" run "$m" "${min[@]}" -j 2 --output-dir "$tmp/$c.2" >/dev/null 2>>"$tmp/err.txt"; then
            same_bytes "$c -j 2 vs -j 1" "$tmp/$c.2" "$tmp/$c.1"
        else
            bad "$c: run failed:"; tail -5 "$tmp/err.txt"
        fi
    done
else
    echo "note: the real models are not available here (${model_cases_why:-}); part 3 skipped"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
