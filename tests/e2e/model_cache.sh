#!/usr/bin/env bash
# The model cache through the command line (docs/model_cache.md): misses and
# hits with --cache-dir, the output of a hit identical to a compile's, a
# reformatted input still a hit, a changed option, pipeline, plugin file,
# weight or output format a miss, a corrupt or truncated entry a miss that is
# rebuilt, concurrent compiles into one directory, GE's key mode
# (ge.graph_compiler_cache_dir + ge.graph_key) and its errors, the report's
# model_cache key and -v.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
ok() { pass=$((pass+1)); }
k() { timeout 300 "$kiln" "$@"; }
# check NAME RC STDERR_FRAGMENT -- COMMAND...
check() {
    local name=$1 want=$2 frag=$3; shift 4
    timeout 300 "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err.txt"; }; then
        bad "$name: rc=$rc (want $want), stderr:"; cat "$tmp/err.txt"
    else ok; fi
}
# status REPORT: the report's model_cache.status
status() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model_cache"]["status"])' "$1"; }
# expect NAME WANT REPORT
expect() { local got; got=$(status "$3"); [ "$got" = "$2" ] && ok || bad "$1: model_cache.status $got, want $2"; }
# compile_c NAME WANT ARGS...: compile with --cache-dir $tmp/c and --report; check the status
compile_c() {
    local name=$1 want=$2; shift 2
    if ! k compile "$@" --cache-dir "$tmp/c" --report "$tmp/r.json" 2>"$tmp/err.txt"; then
        bad "$name: compile failed:"; cat "$tmp/err.txt"; return
    fi
    expect "$name" "$want" "$tmp/r.json"
}
ex="$src/examples/residual_block.json"

# 1. miss, then hit; the hit's output is the compile's, byte for byte, and no pass ran
k compile "$ex" -o "$tmp/plain.json" || bad "plain compile"
compile_c first miss "$ex" -o "$tmp/a.json"
cmp -s "$tmp/plain.json" "$tmp/a.json" && ok || bad "a cached miss's output differs from a plain compile's"
ls "$tmp/c"/*.json >/dev/null 2>&1 && ls "$tmp/c"/*.idx >/dev/null 2>&1 && ok || bad "no entry or index in the cache"
compile_c second hit "$ex" -o "$tmp/b.json"
cmp -s "$tmp/a.json" "$tmp/b.json" && ok || bad "the hit's output differs from the miss's"
python3 - "$tmp/r.json" <<'PY' && ok || bad "hit report: passes ran or key/entry missing"
import json, re, sys
r = json.load(open(sys.argv[1]))
mc = r["model_cache"]
assert r["passes"] == [], r["passes"]
assert re.fullmatch(r"[0-9a-f]{64}", mc["key"]), mc
assert mc["entry"].endswith(mc["key"] + ".json"), mc
assert mc["ms"] >= 0
PY
check verbose_hit 0 "model cache hit: key " -- "$kiln" compile "$ex" -o "$tmp/b.json" --cache-dir "$tmp/c" -v
# without the option: disabled
k compile "$ex" -o "$tmp/d.json" --report "$tmp/r.json" && expect disabled disabled "$tmp/r.json"

# 2. the key is the canonical graph: a reformatted input (whitespace, key order) still hits
python3 - "$ex" "$tmp/reformatted.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["nodes"] = [dict(reversed(list(n.items()))) for n in d["nodes"]]
json.dump(d, open(sys.argv[2], "w"), indent=7)
PY
cp "$tmp/reformatted.json" "$tmp/residual_block.json" # same graph name
na=$(ls "$tmp/c" | grep -c '\.alias$')
compile_c reformatted hit "$tmp/residual_block.json" -o "$tmp/e.json"
cmp -s "$tmp/e.json" "$tmp/plain.json" && ok || bad "the reformatted input's hit differs"
# that hit went through the import and the automatic key (the report counts the
# imported nodes) and recorded the new input's key, so the next one needs no import
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["nodes"] > 0' "$tmp/r.json" && ok ||
    bad "a hit by the automatic key should report the imported graph"
[ "$(ls "$tmp/c" | grep -c '\.alias$')" = $((na + 1)) ] && ok || bad "no alias recorded for the reformatted input"
compile_c reformatted_again hit "$tmp/residual_block.json" -o "$tmp/e.json"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["nodes"] == 0' "$tmp/r.json" && ok ||
    bad "a hit by the input key should not import"
# a garbled alias is ignored (the automatic key still finds the entry)
for a in "$tmp/c"/*.alias; do echo garbage >"$a"; done
compile_c garbled_alias hit "$tmp/residual_block.json" -o "$tmp/e.json"
cmp -s "$tmp/e.json" "$tmp/plain.json" && ok || bad "hit after a garbled alias differs"

# 3. anything that decides the build is in the key
compile_c option miss "$ex" -o "$tmp/f.json" --option kiln.partition_mode=second
compile_c option_again hit "$ex" -o "$tmp/f.json" --option kiln.partition_mode=second
compile_c pipeline miss "$ex" -o "$tmp/f.json" --disable-pass IdentityRemovePass
compile_c pass_option miss "$ex" -o "$tmp/f.json" --pass-opt GraphLint.max_warnings=3
mkdir -p "$tmp/w"; sed 's/0.5, 0, 0, 1/0.25, 0, 0, 1/' "$ex" >"$tmp/w/residual_block.json"
cmp -s "$ex" "$tmp/w/residual_block.json" && bad "weight edit did nothing"
compile_c weight miss "$tmp/w/residual_block.json" -o "$tmp/g.json"
compile_c format_dot miss "$ex" -o "$tmp/h.dot"
compile_c format_dot_again hit "$ex" -o "$tmp/h2.dot"
cmp -s "$tmp/h.dot" "$tmp/h2.dot" && ok || bad "dot hit differs"
compile_c format_onnx miss "$ex" -o "$tmp/o1.onnx"
compile_c format_onnx_again hit "$ex" -o "$tmp/o2.onnx"
cmp -s "$tmp/o1.onnx" "$tmp/o2.onnx" && ok || bad "onnx hit differs"
ls "$tmp/c"/*.onnx >/dev/null 2>&1 && ok || bad "no .onnx entry"
cp "$tp/libtp_custom_op.so" "$tmp/libtp_custom_op.so"
compile_c plugin miss "$ex" -o "$tmp/i.json" --plugin "$tmp/libtp_custom_op.so"
compile_c plugin_again hit "$ex" -o "$tmp/i.json" --plugin "$tmp/libtp_custom_op.so"
printf '\0' >>"$tmp/libtp_custom_op.so" # the same plugin, another file
compile_c plugin_file miss "$ex" -o "$tmp/i.json" --plugin "$tmp/libtp_custom_op.so"

# 4. a corrupt or truncated entry: a warning naming it, a miss, the entry rebuilt
entry=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model_cache"]["entry"])' "$tmp/r.json")
k compile "$ex" -o "$tmp/j.json" --cache-dir "$tmp/c" --report "$tmp/r.json" 2>/dev/null
entry=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model_cache"]["entry"])' "$tmp/r.json")
sed -i 's/"residual_block"/"residual_blocX"/' "$entry"
check corrupt 0 "is corrupt (SHA-256" -- "$kiln" compile "$ex" -o "$tmp/k.json" --cache-dir "$tmp/c" --report "$tmp/r.json"
grep -qF "$entry" "$tmp/err.txt" && ok || bad "the corrupt warning does not name $entry"
[ "$(grep -c 'is corrupt' "$tmp/err.txt")" = 1 ] && ok || bad "the corrupt warning is not printed once: $(cat "$tmp/err.txt")"
expect corrupt miss "$tmp/r.json"
cmp -s "$tmp/k.json" "$tmp/plain.json" && ok || bad "output after a corrupt entry differs"
cmp -s "$entry" "$tmp/plain.json" && ok || bad "corrupt entry not rebuilt"
head -c 100 "$tmp/plain.json" >"$entry"
check truncated 0 "is corrupt (100 bytes" -- "$kiln" compile "$ex" -o "$tmp/k.json" --cache-dir "$tmp/c"
compile_c rebuilt hit "$ex" -o "$tmp/l.json"
cmp -s "$tmp/l.json" "$tmp/plain.json" && ok || bad "hit after rebuild differs"

# 5. output to standard output, and paused builds (not cached)
k compile "$ex" -o - --cache-dir "$tmp/c" >"$tmp/stdout.json" && cmp -s "$tmp/stdout.json" "$tmp/plain.json" &&
    ok || bad "hit to standard output"
compile_c paused disabled "$ex" -o "$tmp/p.json" --build-mode tuning --build-step after_build

# 6. concurrent compiles into one directory: all outputs identical and valid
models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" --check >/dev/null 2>&1 &&
         KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>/dev/null | tail -1)
conc_model="$ex"
[ -n "$models" ] && [ -f "$models/ch_PP-OCRv4_det_infer.onnx" ] && conc_model="$models/ch_PP-OCRv4_det_infer.onnx"
k compile "$conc_model" -o "$tmp/conc_plain.json" || bad "plain compile of $conc_model"
pids=()
for i in 1 2 3 4; do
    k compile "$conc_model" -o "$tmp/conc$i.json" --cache-dir "$tmp/cc" --report "$tmp/conc$i.r.json" \
        2>"$tmp/conc$i.err" &
    pids+=($!)
done
for i in 1 2 3 4; do wait "${pids[$((i-1))]}" || { bad "concurrent compile $i failed:"; cat "$tmp/conc$i.err"; }; done
misses=0
for i in 1 2 3 4; do
    cmp -s "$tmp/conc$i.json" "$tmp/conc_plain.json" && ok || bad "concurrent output $i differs"
    [ "$(status "$tmp/conc$i.r.json")" = miss ] && misses=$((misses+1))
done
[ $misses = 1 ] && ok || bad "concurrent compiles: $misses misses, want 1 (the others wait for the lock, then hit)"
ls "$tmp/cc" | grep -qE '\.tmp' && bad "temporary left in the cache: $(ls "$tmp/cc")" || ok
k compile "$tmp/conc1.json" -o "$tmp/conc_again.json" >/dev/null 2>&1 && ok || bad "a cached output does not compile again"

# 7. GE's mode: the user's key names the model; errors
mkdir "$tmp/ge"
ge=(--option ge.graph_compiler_cache_dir="$tmp/ge" --option ge.graph_key=graph_key_1)
k compile "$ex" -o "$tmp/ge1.json" "${ge[@]}" --report "$tmp/r.json" 2>/dev/null && expect ge_first miss "$tmp/r.json"
ls "$tmp/ge" | grep -qE '^graph_key_1_[0-9]{14}\.json$' && ok || bad "GE entry name: $(ls "$tmp/ge")"
grep -q '"graph_key": "graph_key_1"' "$tmp/ge/graph_key_1.idx" && ok || bad "GE index"
cat >"$tmp/other.json" <<'JSON'
{"kiln_graph": 1, "name": "other", "nodes": [
 {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
 {"name": "r", "type": "Relu", "inputs": ["x:0"], "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
 {"name": "out", "type": "NetOutput", "inputs": ["r:0"]}]}
JSON
k compile "$tmp/other.json" -o "$tmp/ge2.json" "${ge[@]}" --report "$tmp/r.json" && expect ge_key_hit hit "$tmp/r.json"
cmp -s "$tmp/ge1.json" "$tmp/ge2.json" && ok || bad "GE mode: the key's model was not returned"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["nodes"] == 0 and r["model_cache"]["key"] == "graph_key_1"' "$tmp/r.json" &&
    ok || bad "a GE hit should need no import and report the GE key"
check ge_bad_key 1 "model cache key 'bad/key' is invalid" -- "$kiln" compile "$ex" -o "$tmp/bad.json" \
    --option ge.graph_compiler_cache_dir="$tmp/ge" --option ge.graph_key=bad/key
test ! -e "$tmp/bad.json" && ok || bad "output written after a bad key"
check ge_no_dir 1 "model cache directory $tmp/nope" -- "$kiln" compile "$ex" -o "$tmp/bad.json" \
    --option ge.graph_compiler_cache_dir="$tmp/nope" --option ge.graph_key=k
k compile "$ex" -o "$tmp/ge3.json" --option ge.graph_key=k --report "$tmp/r.json" && expect ge_key_only disabled "$tmp/r.json"
echo '{"cache_debug_mode": true}' >"$tmp/ge/cache.conf"
k compile "$ex" -o "$tmp/ge4.json" --option ge.graph_compiler_cache_dir="$tmp/ge" --option ge.graph_key=dbg 2>/dev/null
ls "$tmp/ge" | grep -q '^dbg_' && bad "debug mode saved an entry" || ok
cmp -s "$tmp/ge4.json" "$tmp/plain.json" && ok || bad "debug mode: the output is not the compile's"
echo '{"cache_debug_mode": "yes"}' >"$tmp/ge/cache.conf"
check ge_conf 1 "cache_debug_mode must be true or false" -- "$kiln" compile "$ex" -o "$tmp/bad.json" "${ge[@]}"
check both_modes 1 "exclude each other" -- "$kiln" compile "$ex" -o "$tmp/bad.json" "${ge[@]}" --cache-dir "$tmp/c"
test ! -e "$tmp/bad.json" && ok || bad "output written after a cache error"

echo "model_cache: $pass passed, $fail failed"
[ $fail -eq 0 ]
