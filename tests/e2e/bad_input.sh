#!/usr/bin/env bash
# Bad input never runs into undefined behaviour (tests/data/bad_input/*.json,
# docs/run.md, docs/shape_inference.md, docs/cpu_engine.md).  Run under the
# ASan+UBSan build this also proves there is no sanitizer report.
#
#  1. a shape whose element count overflows int64 ([2^62, 2^62]): compile
#     (InferShapes) and run (a declared shape, no InferShapes) exit 1 naming
#     the node, no output file;
#  2. a buffer over the runtime's memory limit (4 TiB from ConstantOfShape):
#     exit 1 naming the node and the size, instead of asking the allocator;
#     --max-memory lowers the limit (2 MiB buffers: 8M runs, 3M fails, naming
#     the node), suffixes K M G T; bad values are usage errors (exit 2);
#  3. INT32_MIN / -1 and INT32_MIN * -1, folded at compile time and run by the
#     kernel: INT32_MIN, no SIGFPE;
#  4. JSON that the verifier refuses (ref_input out of range, a Data `index`
#     that is a string): exit 1 naming the node and the attribute;
#  5. HandleMemoryLayoutConflict on a wide node (Sum reading one tensor 20000
#     times) stays linear: its "anchor pairs examined" statistic is at most
#     3n (it is 2n; the all-pairs walk examined n^2 / 2 = 2e8 and took
#     seconds).  A count, not a timing: no flaky threshold.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
data="$src/tests/data/bad_input"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
# raw little-endian input with its sidecar: raw PATH DTYPE DIMS(json) PYFMT V...
raw() {
    python3 - "$@" <<'PY'
import json, struct, sys
path, dt, dims, fmt = sys.argv[1:5]
vals = [float(v) if fmt in "fd" else int(v) for v in sys.argv[5:]]
open(path, "wb").write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
json.dump({"dims": json.loads(dims), "dtype": dt}, open(path + ".json", "w"))
PY
}
# expect NAME RC FRAGMENT -- CMD...: exit status RC, FRAGMENT on stderr, no sanitizer report
expect() {
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    if [ $rc -ne "$want" ]; then bad "$name: exit $rc (want $want): $(head -c 600 "$tmp/err")"
    elif [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err"; then bad "$name: want '$frag' in: $(head -c 600 "$tmp/err")"
    elif grep -qE "runtime error:|AddressSanitizer|LeakSanitizer" "$tmp/err"; then
        bad "$name: sanitizer report: $(head -c 600 "$tmp/err")"
    else ok; fi
}

# ---- 1. element counts that overflow -------------------------------------------
expect huge_compile 1 "node r (Relu): input 0: shape [4611686018427387904,4611686018427387904] of float32 has more elements or bytes than fit in 64 bits" -- \
    "$kiln" compile "$data/huge_dims.json" -o "$tmp/huge.json"
[ ! -e "$tmp/huge.json" ] && ok || bad "huge_compile: output written"
# the same in a declared output, run without InferShapes: the runtime refuses it
raw "$tmp/x1.bin" float32 "[1]" f 1.5
# a manifest with the engine and the runtime and no pass at all
printf '{"kiln_manifest": 1, "plugins": [{"path": "libkiln_vector.so"}, {"path": "libkiln_runtime_seq.so"}]}' \
    >"$tmp/nopasses.json"
expect huge_runtime 1 "node r (Relu): output 0 shape [4611686018427387904,4611686018427387904] has more elements than fit in 64 bits" -- \
    "$kiln" run "$data/huge_dims_declared.json" -m "$tmp/nopasses.json" --input x="$tmp/x1.bin"

# ---- 2. the runtime's memory limit -----------------------------------------------
raw "$tmp/x1.bin" float32 "[1]" f 1.5
expect big_buffer 1 "node big (ConstantOfShape): output 0 (float32 [1048576,1048576]) needs 4398046511104 bytes (4.0 TiB)" -- \
    "$kiln" run "$data/big_buffer.json" --input x="$tmp/x1.bin" --output-dir "$tmp/big"
grep -qF "exceeds the memory limit" "$tmp/err" && ok || bad "big_buffer: no limit named: $(cat "$tmp/err")"
grep -qF "its largest buffer: node big" "$tmp/err" && ok || bad "big_buffer: no buffer named: $(cat "$tmp/err")"
[ ! -e "$tmp/big" ] && ok || bad "big_buffer: output directory created"
python3 -c "
import json, struct
open('$tmp/mid.bin','wb').write(struct.pack('<f', -1.0) * (512*1024))
json.dump({'dims': [512, 1024], 'dtype': 'float32'}, open('$tmp/mid.bin.json','w'))"
expect mid_8M 0 "" -- "$kiln" run "$data/mid_buffer.json" --input x="$tmp/mid.bin" --max-memory 8M
grep -q "max 0" "$tmp/out" && ok || bad "mid_8M: Relu(-1) summary: $(cat "$tmp/out")"
# Data x and Relu r take 2 MiB each: the second one crosses 3 MiB
# the sequential runtime: a buffer per tensor, counted against the limit one by one
expect mid_3M 1 "node r (Relu): output 0 (float32 [512,1024]) needs 2097152 bytes (2.0 MiB); with the 2.0 MiB already planned that exceeds the memory limit of 3145728 bytes (3.0 MiB)" -- \
    "$kiln" run "$data/mid_buffer.json" --input x="$tmp/mid.bin" --max-memory 3M --runtime sequential
expect mid_bytes 1 "memory limit of 4194303 bytes" -- \
    "$kiln" run "$data/mid_buffer.json" --input x="$tmp/mid.bin" --max-memory 4194303 --runtime sequential
# (the default multistream runtime plans Relu's output into the model's output
# buffer: no arena, nothing against the limit; big_buffer covers its arena check)
expect mid_GiB 0 "" -- "$kiln" run "$data/mid_buffer.json" --input x="$tmp/mid.bin" --max-memory 1GiB
for v in 0 -5 12X 9999999999T "" 1.5G; do
    expect "max_memory_usage_'$v'" 2 "--max-memory expects a positive byte count" -- \
        "$kiln" run "$data/mid_buffer.json" --input x="$tmp/mid.bin" --max-memory "$v"
done

# ---- 3. integer division that would trap ----------------------------------------------
raw "$tmp/xi.bin" int32 "[2]" i -2147483648 9
expect int_div 0 "" -- "$kiln" run "$data/int_div_fold.json" --input x="$tmp/xi.bin" --output-dir "$tmp/div"
if python3 - "$tmp/div" <<'PY'
import struct, sys
d = sys.argv[1]
got = [struct.unpack("<2i", open("%s/output.%d.bin" % (d, k), "rb").read()) for k in range(3)]
want = [(-2147483648, -7), (-2147483648, -7), (-2147483648, -9)]
sys.exit(0 if got == want else "got %r want %r" % (got, want))
PY
then ok; else bad "int_div: wrong outputs"; fi

# ---- 4. graphs the verifier refuses ------------------------------------------------------
printf '%s' '{"kiln_graph":1,"name":"g","nodes":[
 {"name":"x","type":"Data","attrs":{"index":0},"outputs":[{"shape":[4]}]},
 {"name":"a","type":"Assign","inputs":["x"],"outputs":[{"shape":[4],"ref_input":5}]},
 {"name":"out","type":"NetOutput","inputs":["a"]}]}' >"$tmp/ref5.json"
expect ref_input 1 'node "a" (id 2): ref_input: output 0: ref_input 5 out of range: the node has 1 input' -- \
    "$kiln" compile "$tmp/ref5.json" -o "$tmp/ref5.out.json"
printf '%s' '{"kiln_graph":1,"name":"g","nodes":[
 {"name":"x","type":"Data","attrs":{"index":"zero"},"outputs":[{"shape":[4]}]},
 {"name":"out","type":"NetOutput","inputs":["x"]}]}' >"$tmp/idx.json"
expect data_index_type 1 'node "x" (id 1): attribute type: attribute "index" must be int, found string' -- \
    "$kiln" compile "$tmp/idx.json" -o "$tmp/idx.out.json"
[ ! -e "$tmp/ref5.out.json" ] && [ ! -e "$tmp/idx.out.json" ] && ok || bad "verifier: output written"

# ---- 5. a wide node in HandleMemoryLayoutConflict ---------------------------------------
n=20000
python3 - "$n" "$tmp/wide.json" <<'PY'
import json, sys
n = int(sys.argv[1])
nodes = [{"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [4]}]},
         {"name": "s", "type": "Sum", "inputs": ["x"] * n, "outputs": [{"shape": [4]}]},
         {"name": "out", "type": "NetOutput", "inputs": ["s"]}]
json.dump({"kiln_graph": 1, "name": "wide", "nodes": nodes}, open(sys.argv[2], "w"))
PY
expect wide_sum 0 "anchor pairs examined" -- \
    "$kiln" opt "$tmp/wide.json" --passes HandleMemoryLayoutConflict -o "$tmp/wide.out.json" -v
pairs=$(sed -n 's/.*HandleMemoryLayoutConflict: anchor pairs examined = \([0-9]*\).*/\1/p' "$tmp/err" | head -1)
if [ -n "$pairs" ] && [ "$pairs" -gt 0 ] && [ "$pairs" -le $((3 * n)) ]; then ok
else bad "wide_sum: anchor pairs examined '${pairs}' for $n inputs (want 1..$((3 * n)))"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
