#!/usr/bin/env bash
# Output files (docs/outputs.md): no hang on paths without an extension, '-'
# for standard input and output, --format / --input-format, temporaries that
# are never at a predictable name and never survive SIGINT/SIGTERM, outputs
# committed together (-o and --report), outputs that would overwrite an input
# refused, directories named as such, malformed options as usage errors, -q,
# and the final verification before anything is written.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
k() { timeout 120 "$kiln" "$@"; } # a hang fails instead of blocking the suite
ok() { pass=$((pass+1)); }
# check NAME RC STDERR_FRAGMENT -- COMMAND...: exit status and message (under a
# timeout: a hang fails instead of blocking the suite)
check() {
    local name=$1 want=$2 frag=$3; shift 4
    timeout 60 "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err.txt"; }; then
        bad "$name: rc=$rc (want $want), stderr:"; cat "$tmp/err.txt"
    else ok; fi
}
# no_temps DIR WHAT: no temporary file left in DIR
no_temps() {
    if ls -A "$1" | grep -qE '\.tmp[A-Za-z0-9]{6}$|kiln-tmp|kiln-stdout|kiln-stdin'; then
        bad "$2: temporary left in $1:"; ls -A "$1"
    else ok; fi
}
ex="$src/examples/residual_block.json"
cat > "$tmp/small.json" <<'JSON'
{"kiln_graph": 1, "name": "small", "nodes": [
 {"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
 {"name": "r", "type": "Relu", "inputs": ["x:0"], "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
 {"name": "out", "type": "NetOutput", "inputs": ["r:0"]}]}
JSON

# 1. paths without an extension, directories: a clear error, no hang
mkdir "$tmp/d"
check noext_output 1 "formats known: json, dot" -- "$kiln" compile "$ex" -o "$tmp/out"
check dir_output 2 "is a directory" -- "$kiln" compile "$ex" -o "$tmp/d"
cp "$ex" "$tmp/model"
check noext_input 1 "no extension to tell the format by" -- "$kiln" compile "$tmp/model" -o "$tmp/x.json"
check noext_convert 1 "--format" -- "$kiln" convert "$ex" "$tmp/out"
test ! -e "$tmp/out" && test ! -e "$tmp/x.json" && ok || bad "output written after a format error"
# directories given as inputs say so (models, manifests, --resume, --input)
check dir_model 1 "$tmp/d is a directory" -- "$kiln" compile "$tmp/d" -o "$tmp/x.json"
mkdir "$tmp/d.onnx"
check dir_model_onnx 1 "$tmp/d.onnx is a directory" -- "$kiln" compile "$tmp/d.onnx" -o "$tmp/x.json"
check dir_manifest 1 "$tmp/d is a directory" -- "$kiln" compile "$ex" -m "$tmp/d" -o "$tmp/x.json"
check dir_manifest_check 1 "it is a directory" -- "$kiln" manifest check "$tmp/d"
check dir_resume 1 "$tmp/d is a directory" -- "$kiln" compile --resume "$tmp/d" -o "$tmp/x.json"
check dir_run_input 1 "$tmp/d is a directory" -- "$kiln" run "$tmp/small.json" --input "x=$tmp/d"
check missing_model 1 "no such file" -- "$kiln" compile "$tmp/nope.json" -o "$tmp/x.json"
if grep -rqi "no such file" "$tmp/err.txt" && k compile "$tmp/d" -o "$tmp/x.json" 2>&1 | grep -qi "no such file"; then
    bad "a directory reported as a missing file"; else ok; fi

# 2. --format and --input-format override the extension
check format_dot 0 "" -- "$kiln" compile "$ex" -o "$tmp/graph" --format dot
grep -q '^digraph' "$tmp/graph" && ok || bad "--format dot did not write DOT"
check format_json 0 "" -- "$kiln" convert "$ex" "$tmp/g.txt" --format json
k convert "$tmp/g.txt" "$tmp/g2.json" --input-format json && cmp -s "$tmp/g.txt" "$tmp/g2.json" \
    && ok || bad "--input-format json round trip"
check format_onnx 0 "" -- "$kiln" convert "$tmp/small.json" "$tmp/small.bin" --format onnx
check input_format_onnx 0 "" -- "$kiln" convert "$tmp/small.bin" "$tmp/small_back.json" --input-format onnx
grep -q '"type": "Relu"' "$tmp/small_back.json" && ok || bad "onnx via --format/--input-format lost the graph"
check format_unknown 1 "formats known: json, dot, onnx" -- "$kiln" convert "$ex" "$tmp/g.xyz" --format xyz
check format_paused 2 "does not apply" -- "$kiln" compile "$ex" --build-mode tuning --build-step after_build --format dot -o "$tmp/s.json"

# 3. '-' is standard input (JSON or ONNX, told by content) and standard output
k compile "$ex" -o "$tmp/file.json" 2>/dev/null
k compile - -o - <"$ex" >"$tmp/piped.json" 2>"$tmp/err.txt" && cmp -s "$tmp/file.json" "$tmp/piped.json" \
    && ok || { bad "compile - -o - differs from the file build"; cat "$tmp/err.txt"; }
k convert - - <"$tmp/file.json" >"$tmp/rt.json" && cmp -s "$tmp/file.json" "$tmp/rt.json" \
    && ok || bad "convert - - is not the identity on kiln JSON"
k convert "$tmp/small.json" "$tmp/small.onnx" && k convert "$tmp/small.onnx" "$tmp/a.json" &&
    k convert - "$tmp/b.json" <"$tmp/small.onnx" &&
    diff <(grep -v '"name": "small.onnx"\|"name": "stdin"' "$tmp/a.json") <(grep -v '"name": "small.onnx"\|"name": "stdin"' "$tmp/b.json") >/dev/null \
    && ok || bad "ONNX on standard input is not read as the file is"
k convert "$tmp/a.json" - --format onnx >"$tmp/c.onnx" && cmp -s "$tmp/c.onnx" "$tmp/small.onnx" \
    && ok || bad "--format onnx to standard output differs from the file export"
printf 'not a model' >"$tmp/junk"
check stdin_junk 1 "give --input-format" -- sh -c '"$0" convert - "$1" <"$2"' "$kiln" "$tmp/j.json" "$tmp/junk"
check two_stdout 2 "are the same file" -- "$kiln" compile "$ex" -o - --report -
check dev_null 0 "" -- "$kiln" compile "$ex" -o /dev/null --report /dev/null
test -c /dev/null && ok || bad "/dev/null was replaced"
no_temps "$tmp" "stdin/stdout"

# 4. a symlink planted at the exporter's old predictable temporary name
# (<out>.kiln-tmp-<pid>) is never written through
printf 'precious\n' >"$tmp/victim"
( ln -s "$tmp/victim" "$tmp/exp.onnx.kiln-tmp-$BASHPID"; exec "$kiln" convert "$tmp/small.json" "$tmp/exp.onnx" ) 2>"$tmp/err.txt"
rc=$?
[ "$(cat "$tmp/victim")" = precious ] && ok || bad "a planted symlink made kiln overwrite another file"
[ $rc -eq 0 ] && cmp -s "$tmp/exp.onnx" "$tmp/small.onnx" && ok || { bad "export beside a planted symlink (rc=$rc)"; cat "$tmp/err.txt"; }
rm -f "$tmp"/exp.onnx.kiln-tmp-*
# the same for the JSON writer: a symlink at every name it could pick is impossible
# to plant, so check that the temporary is a fresh file (mode 0600 until committed)
no_temps "$tmp" "symlink"

# 5. SIGTERM / SIGINT while a large graph is being written: no temporary, and
# the previous output untouched.  Job control puts the background job in its
# own process group, so SIGINT reaches it (non-interactive shells ignore it in
# background jobs otherwise, and kiln keeps an inherited ignore).
awk -v n=60000 'BEGIN {
    printf "{\"kiln_graph\": 1, \"name\": \"big\", \"nodes\": [\n"
    printf "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": [{\"shape\": [1, 4], \"dtype\": \"float32\"}]},\n"
    p = "x"
    for (i = 0; i < n; i++) {
        printf "{\"name\": \"r%d\", \"type\": \"Relu\", \"inputs\": [\"%s:0\"], \"outputs\": [{\"shape\": [1, 4], \"dtype\": \"float32\"}]},\n", i, p
        p = "r" i
    }
    printf "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"%s:0\"]}]}\n", p
}' >"$tmp/big.json"
# interrupt SIG OUT PATTERN [TMPDIR]: start a conversion, wait for its
# temporary (PATTERN, a glob), send SIG, check what is left
interrupt() {
    local sig=$1 out=$2 pattern=$3 sdir=${4:-$tmp/sig}
    rm -rf "$tmp/sig" "$tmp/stmp"; mkdir -p "$tmp/sig" "$tmp/stmp"
    printf 'old output\n' >"$tmp/sig/keep"
    [ "$out" != - ] && cp "$tmp/sig/keep" "$out"
    set -m
    KILN_TEST_STOP_WITH_TEMP=1 TMPDIR="$tmp/stmp" "$kiln" convert "$tmp/big.json" "$out" \
        >/dev/null 2>"$tmp/sig/err" &
    local pid=$! seen=0
    set +m
    # kiln stops itself (SIGSTOP) once its temporary exists: the signal then
    # lands mid-write however loaded the machine is
    for _ in $(seq 6000); do
        if [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = T ]; then
            compgen -G "$sdir/$pattern" >/dev/null && seen=1
            break
        fi
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    kill -"$sig" $pid 2>/dev/null
    kill -CONT $pid 2>/dev/null
    wait $pid; local rc=$?
    if [ $seen = 0 ]; then bad "interrupt $sig $out: never saw a temporary (rc=$rc)"; return; fi
    local want=$(( 128 + $(kill -l "$sig") ))
    [ $rc -eq $want ] && ok || bad "interrupt $sig $out: exit $rc, want $want (killed by the signal)"
    if compgen -G "$sdir/$pattern" >/dev/null; then bad "interrupt $sig $out: temporary left:"; ls "$sdir"
    else ok; fi
    if [ "$out" != - ]; then
        cmp -s "$tmp/sig/keep" "$out" && ok || bad "interrupt $sig $out: previous output changed"
    fi
}
interrupt TERM "$tmp/sig/out.json" 'out.json.tmp*'
interrupt INT "$tmp/sig/out.json" 'out.json.tmp*'
interrupt TERM "$tmp/sig/out.onnx" 'out.onnx.*tmp*'
interrupt INT "$tmp/sig/out.onnx" 'out.onnx.*tmp*'
interrupt TERM - 'kiln-stdout.tmp*' "$tmp/stmp"

# 6. every output of a command is committed only when all of them succeeded:
# a --report that cannot be written leaves a previous -o byte for byte
printf 'previous build\n' >"$tmp/prev.json"
cp "$tmp/prev.json" "$tmp/o.json"
check report_nodir 1 "does not exist" -- "$kiln" compile "$ex" -o "$tmp/o.json" --report "$tmp/nodir/r.json"
cmp -s "$tmp/prev.json" "$tmp/o.json" && ok || bad "-o replaced although --report failed (no directory)"
# a directory that exists but where no file can be created (checked only at
# write time: /proc/self refuses new files even to root)
check report_unwritable 1 "r.json" -- "$kiln" compile "$ex" -o "$tmp/o.json" --report /proc/self/r.json
cmp -s "$tmp/prev.json" "$tmp/o.json" && ok || bad "-o replaced although --report could not be written"
no_temps "$tmp" "report_unwritable"
if [ "$(id -u)" != 0 ]; then
    mkdir "$tmp/ro"; chmod 555 "$tmp/ro"
    check report_readonly 1 "r.json" -- k compile "$ex" -o "$tmp/o.json" --report "$tmp/ro/r.json"
    cmp -s "$tmp/prev.json" "$tmp/o.json" && ok || bad "-o replaced although --report was read-only"
fi
check both_ok 0 "" -- "$kiln" compile "$ex" -o "$tmp/o.json" --report "$tmp/r.json"
grep -q '"kiln_graph"' "$tmp/o.json" && grep -q '"kiln_report"' "$tmp/r.json" && ok || bad "both outputs written"

# 7. -o naming an input (any spelling, through a symlink) is refused
cp "$ex" "$tmp/m.json"; cp "$tmp/m.json" "$tmp/m.orig"
ln -s m.json "$tmp/m_link.json"
check same_plain 2 "refusing to overwrite an input" -- "$kiln" compile "$tmp/m.json" -o "$tmp/m.json"
check same_spelling 2 "refusing to overwrite an input" -- "$kiln" compile "$tmp/m.json" -o "$tmp/d/../m.json"
check same_symlink 2 "refusing to overwrite an input" -- "$kiln" compile "$tmp/m_link.json" -o "$tmp/m.json"
check same_convert 2 "refusing to overwrite an input" -- "$kiln" convert "$tmp/m.json" "$tmp/./m.json"
check same_report 2 "refusing to overwrite an input" -- "$kiln" compile "$tmp/m.json" -o "$tmp/x2.json" --report "$tmp/m.json"
cp "$src/manifests/default.json" "$tmp/man.json"
check same_manifest 2 "refusing to overwrite an input" -- "$kiln" compile "$tmp/m.json" -m "$tmp/man.json" -o "$tmp/man.json"
check same_outputs 2 "are the same file" -- "$kiln" compile "$tmp/m.json" -o "$tmp/x3.json" --report "$tmp/d/../x3.json"
cmp -s "$tmp/m.json" "$tmp/m.orig" && ok || bad "the model was overwritten"

# 8. malformed --pass-opt / --option are usage errors
check passopt_noeq 2 "--pass-opt expects PASS.KEY=VALUE" -- "$kiln" compile "$ex" --pass-opt foo -o "$tmp/x.json"
check passopt_nodot 2 "--pass-opt expects PASS.KEY=VALUE" -- "$kiln" compile "$ex" --pass-opt a=b.c -o "$tmp/x.json"
check passopt_nokey 2 "--pass-opt expects PASS.KEY=VALUE" -- "$kiln" compile "$ex" --pass-opt P.=v -o "$tmp/x.json"
check passopt_nopass 2 "--pass-opt expects PASS.KEY=VALUE" -- "$kiln" compile "$ex" --pass-opt .k=v -o "$tmp/x.json"
check option_noeq 2 "--option expects KEY=VALUE" -- "$kiln" compile "$ex" --option foo -o "$tmp/x.json"
check option_nokey 2 "--option expects KEY=VALUE" -- "$kiln" opt "$ex" --passes PruneGraphPass --option =v -o "$tmp/x.json"

# 9. -q prints only errors; "kiln: stat:" lines only under -v or --stats
k compile "$src/examples/const_to_assign.json" -q -o "$tmp/q.json" 2>"$tmp/q.txt"
[ ! -s "$tmp/q.txt" ] && ok || { bad "-q printed:"; cat "$tmp/q.txt"; }
k compile "$ex" -q --time-passes -o "$tmp/q.json" 2>"$tmp/q.txt"
grep -q "kiln: stat:" "$tmp/q.txt" && bad "stat lines printed without -v/--stats" || ok
k compile "$ex" --stats -o "$tmp/q.json" 2>"$tmp/q.txt"
grep -q "kiln: stat: prepare: PruneGraphPass: nodes pruned = 2" "$tmp/q.txt" && ok || bad "--stats printed no counters"
k compile "$ex" -v -o "$tmp/q.json" 2>"$tmp/q.txt"
grep -q "kiln: stat:" "$tmp/q.txt" && ok || bad "-v printed no counters"
check q_error 1 "no such file" -- "$kiln" compile "$tmp/nope.json" -q -o "$tmp/x.json"

# 10. the final graph is verified before anything is written: a pass that
# leaves a cycle fails the command even without --verify-each
cat >"$tmp/cycle.json" <<JSON
{"kiln_manifest": 1, "plugins": [{"path": "$tp/libtp_good.so"}], "stages": {"prepare": ["TestCorruptPass"]}}
JSON
cp "$tmp/prev.json" "$tmp/cyc.json"
check cycle_caught 1 "fails verification" -- "$kiln" compile "$ex" -m "$tmp/cycle.json" -o "$tmp/cyc.json" --report "$tmp/cyc_r.json"
grep -q "cycle" "$tmp/err.txt" && ok || { bad "verification message does not name the cycle"; cat "$tmp/err.txt"; }
cmp -s "$tmp/prev.json" "$tmp/cyc.json" && test ! -e "$tmp/cyc_r.json" && ok || bad "output written for a graph with a cycle"
check cycle_paused 1 "fails verification" -- "$kiln" compile "$ex" -m "$tmp/cycle.json" --build-mode tuning --build-step before_ub_match -o "$tmp/cyc_state.json"
test ! -e "$tmp/cyc_state.json" && ok || bad "paused state written for a graph with a cycle"
no_temps "$tmp" "final"

# 11. fsync only with KILN_FSYNC=1: both outputs of a command are synced then,
# none by default (strace counts the calls; it ships on Debian machines)
if command -v strace >/dev/null; then
    nsync() { strace -f -e trace=fsync -o "$tmp/st.txt" "$@" >/dev/null 2>&1; grep -c '^[0-9]* *fsync(' "$tmp/st.txt"; }
    n=$(KILN_FSYNC=1 nsync "$kiln" compile "$ex" -o "$tmp/s.json" --report "$tmp/s_r.json")
    [ "$n" -ge 2 ] && ok || bad "KILN_FSYNC=1: $n fsync calls for two outputs"
    n=$(nsync "$kiln" compile "$ex" -o "$tmp/s.json" --report "$tmp/s_r.json")
    [ "$n" -eq 0 ] && ok || bad "without KILN_FSYNC: $n fsync calls"
    n=$(KILN_FSYNC=0 nsync "$kiln" compile "$ex" -o "$tmp/s.json")
    [ "$n" -eq 0 ] && ok || bad "KILN_FSYNC=0: $n fsync calls"
else
    bad "strace is missing (tools/install-deps.sh installs it)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
