#!/usr/bin/env bash
# Golden pass tests: tests/data/passes/<Pass>/<case>.in.json run alone with
# `kiln opt --passes <Pass>` must give <case>.out.json byte for byte, and
# running the pass again on its own output must change nothing (idempotence).
# A case directory may hold manifest.json (the plugins the pass needs; default:
# the shipped default manifest) and a file NO_IDEMPOTENCE (with the reason) for
# passes GE does not make idempotent.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
for in in "$src"/tests/data/passes/*/*.in.json; do
    p=$(basename "$(dirname "$in")"); case_=$(basename "$in" .in.json)
    want="${in%.in.json}.out.json"
    dir=$(dirname "$in"); m=()
    [ -f "$dir/manifest.json" ] && m=(-m "$dir/manifest.json")
    if ! "$kiln" opt "$in" "${m[@]}" --passes "$p" -o "$tmp/got.json" 2>"$tmp/err"; then
        echo "FAIL $p/$case_: kiln exited non-zero"; cat "$tmp/err"; fail=$((fail+1)); continue
    fi
    if ! cmp -s "$want" "$tmp/got.json"; then
        echo "FAIL $p/$case_: output differs"; diff "$want" "$tmp/got.json" | head -20; fail=$((fail+1)); continue
    fi
    if [ -f "$dir/NO_IDEMPOTENCE" ]; then pass=$((pass+1)); continue; fi
    "$kiln" opt "$want" "${m[@]}" --passes "$p" -o "$tmp/again.json" 2>/dev/null
    if ! cmp -s "$want" "$tmp/again.json"; then
        echo "FAIL $p/$case_: not idempotent"; fail=$((fail+1)); continue
    fi
    pass=$((pass+1))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
