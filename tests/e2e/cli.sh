#!/usr/bin/env bash
# End-to-end CLI checks: exit codes, messages naming file/pass/plugin, no
# partial output, --verify-each, crash attribution, tuning pause/resume.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
check() { # name expected_rc expected_stderr_fragment -- command...
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err.txt" "$tmp/out.txt"; }; then
        echo "FAIL $name: rc=$rc (want $want), stderr:"; cat "$tmp/err.txt"; fail=$((fail+1))
    else pass=$((pass+1)); fi
}
ex="$src/examples/residual_block.json"
cat > "$tmp/test.json" <<JSON
{"kiln_manifest": 1, "plugins": [{"path": "$tp/libtp_good.so"}, {"path": "$tp/libtp_crash.so"}],
 "tuners": ["TestTuner"],
 "stages": {"prepare": ["TestGraphPass"], "optimize_original": ["TestNodePass"], "build": ["TestGraphPass"]}}
JSON
check compile_ok 0 "" -- "$kiln" compile "$ex" -o "$tmp/a.json" --report "$tmp/report.json"
grep -q '"nodes pruned": 2' "$tmp/report.json" && grep -q '"why": "pruned: no path to out"' "$tmp/report.json" \
    || { echo "FAIL report lacks pass counters or explanations"; fail=$((fail+1)); }
check usage_no_output 2 "-o OUT is required" -- "$kiln" compile "$ex"
check unknown_verb 2 "unknown verb" -- "$kiln" frobnicate
check jobs_not_a_number 2 "-j expects an integer from 1 to 1024" -- "$kiln" compile "$ex" -j x -o "$tmp/x.json"
check jobs_ok 0 "" -- "$kiln" compile "$ex" -j 1 -o "$tmp/j.json"
many=(); for i in $(seq 65); do many+=(--option "k$i=v"); done
check too_many_options 2 "at most 64 --option arguments" -- "$kiln" compile "$ex" "${many[@]}" -o "$tmp/x.json"
check missing_model 1 "nope.json" -- "$kiln" compile "$tmp/nope.json" -o "$tmp/x.json"
printf '{"kiln_graph": 1, "nodes": [' > "$tmp/bad.json"
check malformed_json 1 "bad.json" -- "$kiln" compile "$tmp/bad.json" -o "$tmp/x.json"
check onnx_missing_file 1 "m.onnx" -- "$kiln" compile "$tmp/m.onnx" -o "$tmp/x.json"
: > "$tmp/m.pb"
check unknown_format 1 "no loaded plugin imports '.pb'" -- "$kiln" compile "$tmp/m.pb" -o "$tmp/x.json"
printf '{"kiln_manifest": 1}' > "$tmp/nokm.json"   # no libkiln_kmodel.so: nothing writes .kmodel
check kmodel_without_builder 1 "no loaded plugin writes '.kmodel'" -- "$kiln" compile "$ex" -m "$tmp/nokm.json" -o "$tmp/x.kmodel"
check lint_default_manifest 0 "" -- "$kiln" lint "$ex"
printf '{"kiln_manifest": 1}' > "$tmp/empty.json"
check lint_missing_component 1 "GraphLint" -- "$kiln" lint "$ex" -m "$tmp/empty.json"
test ! -e "$tmp/x.json" && test ! -e "$tmp/x.kmodel" || { echo "FAIL: partial output left"; fail=$((fail+1)); }
ls "$tmp" | grep -q kiln-tmp && { echo "FAIL: temp file left"; fail=$((fail+1)); }
# --plugin FILE: a plugin outside the manifest, for --passes and kiln plugins
check plugin_flag_opt 0 "" -- "$kiln" opt "$ex" -m "$tmp/empty.json" --plugin "$tp/libtp_good.so" --passes TestGraphPass -o "$tmp/pl.json"
test -s "$tmp/pl.json" || { echo "FAIL plugin_flag_opt: no output"; fail=$((fail+1)); }
check plugin_flag_listed 0 "TestGraphPass" -- "$kiln" plugins -m "$tmp/empty.json" --plugin "$tp/libtp_good.so" TestGraphPass
check plugin_flag_without 1 "TestGraphPass" -- "$kiln" opt "$ex" -m "$tmp/empty.json" --passes TestGraphPass -o "$tmp/pl2.json"
check plugin_flag_missing 1 "--plugin $tmp/nope.so" -- "$kiln" opt "$ex" -m "$tmp/empty.json" --plugin "$tmp/nope.so" --passes TestGraphPass -o "$tmp/pl3.json"
check plugin_flag_paused 2 "--plugin cannot be used with a paused build" -- "$kiln" compile "$ex" --plugin "$tp/libtp_good.so" \
    --build-mode tuning --build-step after_build -o "$tmp/pl4.json"
# --verify-each names the pass that broke the IR
cat > "$tmp/corrupt.json" <<JSON
{"kiln_manifest": 1, "plugins": [{"path": "$tp/libtp_good.so"}], "stages": {"prepare": ["TestCorruptPass"]}}
JSON
check verify_each 1 "TestCorruptPass" -- "$kiln" compile "$ex" -m "$tmp/corrupt.json" --verify-each -o "$tmp/v.json"
test ! -e "$tmp/v.json" || { echo "FAIL: output after verify failure"; fail=$((fail+1)); }
# crash attribution: plugin, pass, stage and node
printf '{"kiln_graph":1,"name":"c","nodes":[{"name":"boom","type":"Relu","outputs":[{}]}]}' > "$tmp/boom.json"
ASAN_OPTIONS=handle_segv=0 "$kiln" opt "$tmp/boom.json" -m "$tmp/test.json" --passes CrashPass -o "$tmp/c.json" 2>"$tmp/crash.txt"
rc=$?
if [ $rc -eq 0 ] || ! grep -q "in plugin kiln.test.crash, pass CrashPass" "$tmp/crash.txt" || ! grep -q "node boom" "$tmp/crash.txt"; then
    echo "FAIL crash attribution (rc=$rc):"; cat "$tmp/crash.txt"; fail=$((fail+1)); else pass=$((pass+1)); fi
# manifest errors name file and JSON path
printf '{"kiln_manifest": 1, "stages": {"prepare": ["NoSuchPass"]}}' > "$tmp/badpass.json"
check unknown_pass 1 "badpass.json" -- "$kiln" manifest check "$tmp/badpass.json"
printf '{"kiln_manifest": 1, "plugins": [{"path": "libmissing.so"}]}' > "$tmp/missing.json"
check missing_plugin 1 "libmissing.so" -- "$kiln" manifest check "$tmp/missing.json"
check o0_manifest 0 "" -- "$kiln" manifest check "$src/manifests/O0.json"
check default_manifest 0 "PruneGraphPass" -- "$kiln" manifest check "$src/manifests/default.json"
# tuning: pause at each build step, resume, compare with an uninterrupted build
"$kiln" compile "$ex" -m "$tmp/test.json" -o "$tmp/full.json" 2>/dev/null || { echo "FAIL full build"; fail=$((fail+1)); }
for step in before_ub_match after_ub_match after_build; do
    check "pause_$step" 0 "paused at build step $step" -- "$kiln" compile "$ex" -m "$tmp/test.json" --build-mode tuning --build-step $step -o "$tmp/state_$step.json"
    check "resume_$step" 0 "" -- "$kiln" compile --resume "$tmp/state_$step.json" -o "$tmp/resumed_$step.json"
    if ! cmp -s "$tmp/full.json" "$tmp/resumed_$step.json"; then
        echo "FAIL resume_$step differs from the uninterrupted build"; diff "$tmp/full.json" "$tmp/resumed_$step.json" | head; fail=$((fail+1))
    else pass=$((pass+1)); fi
done
grep -q '"tuned_after_build": true' "$tmp/full.json" || { echo "FAIL tuner hook did not run"; fail=$((fail+1)); }
# instruments bracket stages and passes
rm -f "$tmp/trace.txt"
KILN_TEST_INSTRUMENT_LOG="$tmp/trace.txt" "$kiln" compile "$ex" -m "$tmp/test.json" -o "$tmp/i.json" 2>/dev/null
if ! grep -q "^before_stage prepare$" "$tmp/trace.txt" || ! grep -q "^before_pass prepare TestGraphPass$" "$tmp/trace.txt" \
   || ! grep -q "^after_stage lint$" "$tmp/trace.txt"; then
    echo "FAIL instrument hooks"; cat "$tmp/trace.txt"; fail=$((fail+1)); else pass=$((pass+1)); fi
# convert json -> dot and a component description
check convert_dot 0 "" -- "$kiln" convert "$ex" "$tmp/g.dot"
grep -q "digraph" "$tmp/g.dot" || { echo "FAIL convert: no digraph"; fail=$((fail+1)); }
check describe_pass 0 "option    count (int, default 1)" -- "$kiln" plugins -m "$tmp/test.json" TestGraphPass
check describe_missing 1 "no plugin or component named" -- "$kiln" plugins NoSuchThing
check bad_step 2 "unknown --build-step" -- "$kiln" compile "$ex" --build-mode tuning --build-step nope -o "$tmp/s.json"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
