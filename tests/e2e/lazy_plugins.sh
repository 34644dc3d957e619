#!/usr/bin/env bash
# Deferred plugin loading (docs/manifest.md, "Deferred loading"): a required
# manifest plugin whose `provides` declares only engines or runtimes is
# opened when a command first needs those kinds.  KILN_DEBUG_PLUGIN_LOADS=1
# prints one "kiln: debug: dlopen FILE" line per plugin file opened.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
model="$src/examples/residual_block.json"
# the deferred ones: aicore and vector also declare their built-in fusion
# passes, so they load with the manifest (docs/manifest.md, "Deferred loading")
engines='libkiln_(hostcpu|rts|runtime_seq)\.so'
export KILN_DEBUG_PLUGIN_LOADS=1

# 1. convert opens no deferred engine or runtime plugin; manifest check opens them all
"$kiln" convert "$model" "$tmp/c.json" 2>"$tmp/e" || bad "convert failed: $(cat "$tmp/e")"
grep -q 'dlopen .*libkiln_passes\.so' "$tmp/e" && ok || bad "convert: debug lines missing"
grep -Eq "dlopen .*$engines" "$tmp/e" && bad "convert opened: $(grep -E "$engines" "$tmp/e")" || ok
"$kiln" manifest check "$src/manifests/default.json" >/dev/null 2>"$tmp/e" ||
    bad "manifest check failed: $(cat "$tmp/e")"
grep -Eq "dlopen .*libkiln_rts\.so" "$tmp/e" && ok || bad "manifest check did not open the engines"

# 2. compile opens every engine (placement needs every table), once each
"$kiln" compile "$model" -o "$tmp/o.json" 2>"$tmp/e" || bad "compile failed: $(cat "$tmp/e")"
for e in aicore vector hostcpu rts; do
    n=$(grep -c "dlopen .*libkiln_$e\.so" "$tmp/e")
    [ "$n" = 1 ] && ok || bad "compile opened libkiln_$e.so $n times"
done
# and the output is what an eager load gives (a manifest with no `provides`
# on the engines loads them eagerly)
python3 - "$src/manifests/default.json" "$tmp/eager.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for p in m["plugins"]:
    if "engines" in p.get("provides", {}) or "runtimes" in p.get("provides", {}):
        del p["provides"]
json.dump(m, open(sys.argv[2], "w"))
PY
KILN_PLUGIN_PATH="$(dirname "$kiln")/../lib/kiln/plugins" \
    "$kiln" compile "$model" -m "$tmp/eager.json" -o "$tmp/o2.json" 2>"$tmp/e2" ||
    bad "eager compile failed: $(cat "$tmp/e2")"
grep -q "dlopen .*libkiln_aicore\.so" "$tmp/e2" && ok || bad "eager manifest: aicore not opened"
cmp -s "$tmp/o.json" "$tmp/o2.json" && ok || bad "deferred and eager compiles differ"

# 3. `kiln plugins` still lists every plugin of the manifest
"$kiln" plugins >"$tmp/p" 2>/dev/null || bad "kiln plugins failed"
for e in aicore vector hostcpu rts; do
    grep -q "libkiln_$e\.so" "$tmp/p" && ok || bad "kiln plugins does not list libkiln_$e.so"
done

# 4. a deferred plugin that fails to load: commands that never need it work,
#    the first that does fails naming the manifest and the entry
cat >"$tmp/m_abi.json" <<'J'
{"kiln_manifest": 1,
 "plugins": [{"path": "libtp_wrong_major.so", "provides": {"engines": ["tp_x"]}}]}
J
"$kiln" convert "$model" "$tmp/c2.json" -m "$tmp/m_abi.json" 2>"$tmp/e" &&
    ok || bad "convert with a broken engine plugin failed: $(cat "$tmp/e")"
"$kiln" compile "$model" -m "$tmp/m_abi.json" -o "$tmp/o3.json" 2>"$tmp/e" &&
    bad "compile with a broken engine plugin succeeded" || ok
grep -q "m_abi.json: \$.plugins\[0\].path: .*libtp_wrong_major.so: ABI" "$tmp/e" && ok ||
    bad "wrong-ABI message: $(cat "$tmp/e")"
"$kiln" plugins -m "$tmp/m_abi.json" >/dev/null 2>"$tmp/e"; rc=$?
grep -q "m_abi.json: \$.plugins\[0\].path: .*ABI" "$tmp/e" && [ $rc = 1 ] && ok ||
    bad "kiln plugins did not fail on the broken plugin (exit $rc): $(cat "$tmp/e")"
"$kiln" manifest check "$tmp/m_abi.json" >/dev/null 2>"$tmp/e"; rc=$?
grep -q "m_abi.json: \$.plugins\[0\].path: .*ABI" "$tmp/e" && [ $rc = 1 ] && ok ||
    bad "manifest check did not fail on the broken plugin (exit $rc): $(cat "$tmp/e")"

# 5. declared-vs-registered is checked when the deferred plugin loads
cat >"$tmp/m_decl.json" <<'J'
{"kiln_manifest": 1,
 "plugins": [{"path": "libtp_engine.so", "provides": {"engines": ["tp_first", "tp_third"]}}]}
J
"$kiln" compile "$model" -m "$tmp/m_decl.json" -o "$tmp/o4.json" 2>"$tmp/e" &&
    bad "compile with a wrong provides succeeded" || ok
grep -q 'm_decl.json: \$.plugins\[0\].provides: declared-vs-registered mismatch: plugin .* declares tp_third but does not register it' "$tmp/e" &&
    ok || bad "mismatch message: $(cat "$tmp/e")"
cat >"$tmp/m_decl2.json" <<'J'
{"kiln_manifest": 1,
 "plugins": [{"path": "libtp_engine.so", "provides": {"engines": ["tp_first"]}}]}
J
"$kiln" compile "$model" -m "$tmp/m_decl2.json" -o "$tmp/o5.json" 2>"$tmp/e" &&
    bad "compile with an incomplete provides succeeded" || ok
grep -q 'registers engine tp_second, which "provides" does not declare' "$tmp/e" &&
    ok || bad "undeclared message: $(cat "$tmp/e")"

# 6. a missing required plugin is still an error when the manifest loads
cat >"$tmp/m_missing.json" <<'J'
{"kiln_manifest": 1,
 "plugins": [{"path": "libkiln_no_such_engine.so", "provides": {"engines": ["nope"]}}]}
J
"$kiln" convert "$model" "$tmp/c3.json" -m "$tmp/m_missing.json" 2>"$tmp/e" &&
    bad "convert with a missing plugin succeeded" || ok
grep -q 'm_missing.json: \$.plugins\[0\].path: plugin libkiln_no_such_engine.so not found' "$tmp/e" &&
    ok || bad "missing-plugin message: $(cat "$tmp/e")"

# 7. a manifest "engines" list loads the deferred plugin that provides it
cat >"$tmp/m_eng.json" <<'J'
{"kiln_manifest": 1, "extends": "DEFAULT", "engines": ["rts"]}
J
sed -i "s|DEFAULT|$src/manifests/default.json|" "$tmp/m_eng.json"
"$kiln" manifest check "$tmp/m_eng.json" >/dev/null 2>"$tmp/e" || bad "engines list: $(cat "$tmp/e")"
grep -q "dlopen .*libkiln_rts\.so" "$tmp/e" && ok || bad "engines list did not load libkiln_rts.so"

# 8a. A BLAS that cannot be loaded fails the GEMM's node, naming the library;
#     a compile does not need it
KILN_OPENBLAS=/nonexistent/libopenblas.so.0 "$kiln" compile "$model" -o "$tmp/o5.json" \
    2>"$tmp/e" && ok || bad "compile needed OpenBLAS: $(cat "$tmp/e")"
KILN_OPENBLAS=/nonexistent/libopenblas.so.0 "$kiln" run "$model" \
    --input "x=$src/examples/residual_block_x.npy" >/dev/null 2>"$tmp/e"
rc=$?
[ "$rc" = 1 ] && grep -q "OpenBLAS cannot be loaded (/nonexistent/libopenblas.so.0" "$tmp/e" &&
    grep -q "MatMul" "$tmp/e" && ok || bad "missing BLAS: rc $rc: $(cat "$tmp/e")"

# 8. OpenBLAS is loaded on the first GEMM (docs/threads.md): a compile, with or
#    without -j, neither opens it nor starts its threads; a run of a model with
#    a MatMul opens it.
# (not in the sanitizer build: LeakSanitizer cannot stop the world under ptrace;
# the Release run checks it)
if command -v strace >/dev/null && [ "$(nproc)" -gt 1 ] && [ -z "${KILN_TEST_SANITIZE:-}" ]; then
    unset KILN_DEBUG_PLUGIN_LOADS OPENBLAS_NUM_THREADS OMP_NUM_THREADS
    strace -f -qq -e trace=openat,clone,clone3 -o "$tmp/st" "$kiln" compile "$model" \
        -o "$tmp/o6.json" 2>/dev/null || bad "compile under strace failed"
    n=$(grep -Ec "^([0-9]+ +)?clone3?\\(" "$tmp/st"); [ "$n" = 0 ] && ok || bad "compile started $n threads"
    grep -q 'libopenblas.*= [0-9]' "$tmp/st" && bad "compile loaded OpenBLAS" || ok
    strace -f -qq -e trace=openat -o "$tmp/st" "$kiln" compile "$model" -o "$tmp/o7.json" \
        -j 2 2>/dev/null || bad "compile -j 2 under strace failed"
    grep -q 'libopenblas.*= [0-9]' "$tmp/st" && bad "compile -j 2 loaded OpenBLAS" || ok
    strace -f -qq -e trace=openat -o "$tmp/st" "$kiln" run "$model" \
        --input "x=$src/examples/residual_block_x.npy" >/dev/null 2>&1 || bad "run under strace failed"
    grep -q 'libopenblas.*= [0-9]' "$tmp/st" && ok || bad "a run with a MatMul did not load OpenBLAS"
else
    echo "(thread checks skipped: no strace, one core, or the sanitizer build)"
fi

echo "lazy_plugins: $pass passed, $fail failed"
[ "$fail" = 0 ]
