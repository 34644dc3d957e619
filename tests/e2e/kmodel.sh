#!/usr/bin/env bash
# kmodel.sh - the executable model file from the command line
# (docs/model_format.md): compile a graph to .kmodel, `kiln info` on it,
# `kiln run` from it (no compile; the outputs equal those of running the
# graph), `kiln convert` it to JSON and back to .kmodel, and the loader's
# errors on damaged files -- bad magic, a newer format, truncation at several
# points, a flipped byte in each section -- each exit 1 with a message naming
# the file and the section, and no output file left behind.
#
#   bash tests/e2e/kmodel.sh           (ctest: e2e_kmodel)
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

cat > "$tmp/t.py" <<'PY'
import struct, sys, json
cmd = sys.argv[1]
if cmd == "raw":        # raw PATH DTYPE(f|?) DIMS V...
    path, fmt, dims, vals = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    conv = float if fmt == "f" else (lambda v: bool(int(v)))
    open(path, "wb").write(struct.pack("<%d%s" % (len(vals), fmt), *[conv(v) for v in vals]))
    json.dump({"dims": [int(d) for d in dims.split(",") if d], "dtype": "float32" if fmt == "f" else "bool"},
              open(path + ".json", "w"))
elif cmd == "sections":  # sections FILE -> "NAME OFFSET SIZE" per line
    b = open(sys.argv[2], "rb").read()
    n = struct.unpack_from("<I", b, 16)[0]
    for i in range(n):
        kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 64 * i)
        print({1: "META", 2: "GRAPH", 3: "WEIGHTS"}.get(kind, "?"), off, size)
elif cmd == "flip":      # flip IN OUT OFFSET
    b = bytearray(open(sys.argv[2], "rb").read()); b[int(sys.argv[4])] ^= 0x20
    open(sys.argv[3], "wb").write(b)
elif cmd == "cut":       # cut IN OUT LEN
    open(sys.argv[3], "wb").write(open(sys.argv[2], "rb").read()[: int(sys.argv[4])])
elif cmd == "poke16":    # poke16 IN OUT OFFSET VALUE
    b = bytearray(open(sys.argv[2], "rb").read()); struct.pack_into("<H", b, int(sys.argv[4]), int(sys.argv[5]))
    open(sys.argv[3], "wb").write(b)
PY
t() { python3 "$tmp/t.py" "$@"; }

# ---- compile, info, run, convert ------------------------------------------------------
g="$src/tests/data/run/if.json"
t raw "$tmp/c1.bin" "?" "" 1
t raw "$tmp/c0.bin" "?" "" 0
t raw "$tmp/v.bin" f 4 -1 2 -3 4
if "$kiln" compile "$g" -o "$tmp/if.kmodel" 2>"$tmp/err"; then ok; else bad "compile -o .kmodel: $(cat "$tmp/err")"; fi
if "$kiln" info "$tmp/if.kmodel" >"$tmp/info.txt" 2>"$tmp/err" &&
   grep -q "^format:  *kmodel 1.0" "$tmp/info.txt" && grep -q "WEIGHTS .* ok" "$tmp/info.txt" &&
   grep -q "^models:  *6 (root + subgraphs), [0-9]* tasks" "$tmp/info.txt" && grep -q "^streams:  *1 " "$tmp/info.txt" &&
   grep -q "^weights:  *128 bytes, 2 constants" "$tmp/info.txt" &&
   grep -q "^  subgraphs [1-9][0-9]* planned, [0-9]* bytes in their regions" "$tmp/info.txt"; then ok
else bad "kiln info: $(cat "$tmp/info.txt" "$tmp/err")"; fi
for c in c1 c0; do
    "$kiln" run "$g" --input "$tmp/$c.bin" --input "$tmp/v.bin" --output-dir "$tmp/g_$c" >/dev/null 2>&1
    if "$kiln" run "$tmp/if.kmodel" --input "$tmp/$c.bin" --input "$tmp/v.bin" --output-dir "$tmp/k_$c" \
           >/dev/null 2>"$tmp/err" &&
       cmp -s "$tmp/g_$c/output.0.bin" "$tmp/k_$c/output.0.bin" &&
       cmp -s "$tmp/g_$c/output.1.bin" "$tmp/k_$c/output.1.bin"; then ok
    else bad "kiln run if.kmodel ($c) differs from the graph's run: $(cat "$tmp/err")"; fi
done
if "$kiln" convert "$tmp/if.kmodel" "$tmp/back.json" 2>"$tmp/err" &&
   grep -q '"_kiln_task_kind"' "$tmp/back.json" && grep -q '"_kiln_weight_offset"' "$tmp/back.json" &&
   "$kiln" convert "$tmp/back.json" "$tmp/again.kmodel" 2>>"$tmp/err" &&
   "$kiln" run "$tmp/again.kmodel" --input "$tmp/c1.bin" --input "$tmp/v.bin" --output-dir "$tmp/a" \
       >/dev/null 2>>"$tmp/err" && cmp -s "$tmp/g_c1/output.0.bin" "$tmp/a/output.0.bin"; then ok
else bad "convert .kmodel -> .json -> .kmodel and run: $(cat "$tmp/err")"; fi
if "$kiln" info "$tmp/if.kmodel" --json | python3 -c '
import json, sys
k = json.load(sys.stdin)["kmodel"]
assert [s["name"] for s in k["sections"]] == ["META", "GRAPH", "WEIGHTS"]
assert k["weights"]["size"] == 128 and k["models"] == 6  # root + 5 subgraphs (partitioned If)
assert k["memory_subgraphs"]["planned"] >= 1 and k["memory_subgraphs"]["size"] > 0  # the Relu branch' 2>"$tmp/err"; then ok
else bad "kiln info --json: $(cat "$tmp/err")"; fi

# ---- damaged files: exit 1, the file and the section named, no output ---------------
good="$tmp/if.kmodel"
expect_fail() {  # expect_fail NAME FILE FRAGMENT
    local name=$1 f=$2 want=$3
    rm -f "$tmp/out.json"
    "$kiln" convert "$f" "$tmp/out.json" >/dev/null 2>"$tmp/err"; local rc=$?
    if [ $rc -eq 1 ] && grep -q -- "$want" "$tmp/err" && grep -q "$(basename "$f")" "$tmp/err" &&
       [ ! -e "$tmp/out.json" ]; then ok
    else bad "$name: exit $rc, want 1 and '$want': $(cat "$tmp/err")"; fi
    "$kiln" info "$f" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && grep -q -- "$want" "$tmp/err" && ok || bad "$name (info): exit $rc: $(cat "$tmp/err")"
}
t flip "$good" "$tmp/magic.kmodel" 3
expect_fail bad_magic "$tmp/magic.kmodel" "not a kiln model file"
t poke16 "$good" "$tmp/v2.kmodel" 8 2
expect_fail newer_major "$tmp/v2.kmodel" "newer than this kiln reads"
size=$(stat -c %s "$good")
for cut in 0 32 64 200 300 4096 $((size - 1)); do
    t cut "$good" "$tmp/cut$cut.kmodel" "$cut"
    expect_fail "truncated_at_$cut" "$tmp/cut$cut.kmodel" "truncated"
done
while read -r name off len; do
    t flip "$good" "$tmp/flip_$name.kmodel" $((off + len / 2))
    expect_fail "flip_$name" "$tmp/flip_$name.kmodel" "section $name: SHA-256 mismatch"
done < <(t sections "$good")
# a file whose hashes are right but whose graph breaks a verifier rule (found by
# kmodel_import_fuzz: a subgraph Data without _parent_node_index): refused
# before the runtime sees it, nothing written
inv="$src/tests/data/kmodel/subgraph_data_without_parent_index.kmodel"
"$kiln" run "$inv" --input "$tmp/c1.bin" --input "$tmp/v.bin" --output-dir "$tmp/inv" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "the built model's graph is invalid.*_parent_node_index" "$tmp/err" &&
    [ ! -e "$tmp/inv" ] && ok || bad "invalid graph in a model file: exit $rc: $(cat "$tmp/err")"
"$kiln" convert "$inv" "$tmp/inv.json" >/dev/null 2>&1
[ $? -eq 1 ] && [ ! -e "$tmp/inv.json" ] && ok || bad "convert of an invalid model file wrote output"
# a failed compile leaves no .kmodel
printf '{"kiln_graph": 1, "name": "g", "nodes": [{"name": "a", "type": "Relu", "inputs": ["nope"]}]}' > "$tmp/bad.json"
"$kiln" compile "$tmp/bad.json" -o "$tmp/bad.kmodel" >/dev/null 2>&1
[ $? -eq 1 ] && [ ! -e "$tmp/bad.kmodel" ] && ok || bad "failed compile left bad.kmodel"
ls "$tmp" | grep -q kiln-tmp && bad "temporary file left" || ok

# TaskGenerator on the thread pool (parallel_min=1 forces it even for a small
# graph): the same file for 1 and 2 threads, and as generated on one thread
for j in 1 2; do
    "$kiln" compile "$src/examples/residual_block.json" --pass-opt TaskGenerator.parallel_min=1 \
        -j $j -o "$tmp/par$j.kmodel" 2>/dev/null || bad "parallel task generation -j $j failed"
done
"$kiln" compile "$src/examples/residual_block.json" -o "$tmp/par0.kmodel" 2>/dev/null
cmp -s "$tmp/par1.kmodel" "$tmp/par2.kmodel" && cmp -s "$tmp/par0.kmodel" "$tmp/par2.kmodel" && ok ||
    bad "parallel task generation is not deterministic"

echo "kmodel: $pass passed, $fail failed"
[ $fail -eq 0 ]
