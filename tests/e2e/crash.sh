#!/usr/bin/env bash
# Crash attribution: a crash in plugin code names the plugin (its file while it
# is being loaded) and what kiln was doing, in one complete line, never "kiln
# itself".  Covers a constructor (runs inside dlopen), the entry function, and
# a node pass (plugin, pass, stage, graph and node).
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
# crashes name exactly: want_fragment... -- command
crashes() {
    local name=$1; shift; local frags=()
    while [ "$1" != "--" ]; do frags+=("$1"); shift; done; shift
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
    local rc=$? ok=1
    # killed by SIGSEGV (the handler re-raises it): 128 + 11
    [ "$rc" = 139 ] || ok=0
    for f in "${frags[@]}"; do grep -qF -- "$f" "$tmp/err.txt" || ok=0; done
    grep -q "kiln itself" "$tmp/err.txt" && ok=0
    # the message is one whole line
    grep -qE '^kiln: fatal: SIGSEGV in plugin .*\)$' "$tmp/err.txt" || ok=0
    if [ $ok = 1 ]; then pass=$((pass+1)); else
        echo "FAIL $name: rc=$rc, stderr:"; cat "$tmp/err.txt"; fail=$((fail+1)); fi
}
for kind in ctor entry; do
    printf '{"kiln_manifest": 1, "plugins": [{"path": "%s/libtp_crash_%s.so"}]}' "$tp" "$kind" \
        > "$tmp/$kind.json"
done
real_ctor=$(realpath "$tp/libtp_crash_ctor.so"); real_entry=$(realpath "$tp/libtp_crash_entry.so")
crashes constructor \
    "kiln: fatal: SIGSEGV in plugin $real_ctor while running its constructors (dlopen) (stage plugin load)" \
    -- "$kiln" manifest check "$tmp/ctor.json"
crashes entry \
    "kiln: fatal: SIGSEGV in plugin $real_entry while calling kiln_plugin_entry (stage plugin load)" \
    -- "$kiln" manifest check "$tmp/entry.json"
# a node pass: plugin, pass, stage, graph and node
printf '{"kiln_manifest": 1, "plugins": [{"path": "%s/libtp_crash.so"}]}' "$tp" > "$tmp/pass.json"
printf '{"kiln_graph":1,"name":"c","nodes":[{"name":"boom","type":"Relu","outputs":[{}]}]}' \
    > "$tmp/boom.json"
crashes node_pass "kiln: fatal: SIGSEGV in plugin kiln.test.crash, pass CrashPass (stage " \
    ", graph c, node boom #1)" \
    -- "$kiln" opt "$tmp/boom.json" -m "$tmp/pass.json" --passes CrashPass -o "$tmp/c.json"
test ! -e "$tmp/c.json" || { echo "FAIL output written after a crash"; fail=$((fail+1)); }
echo "crash: $pass passed, $fail failed"
[ $fail = 0 ]
