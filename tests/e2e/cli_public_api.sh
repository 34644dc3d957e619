#!/usr/bin/env bash
# The kiln command line is a client of the public embedding API: every cli/
# source includes only <kiln/...> headers, its own headers and system or
# library headers, and compiles with plugin-api/ as its only kiln include
# directory (no core/, no graph_int.h); tests/core/test_embed.c likewise.
# (The build enforces the same: kiln_cli links libkiln, whose interface is
# plugin-api/ and the exported symbols.)
set -euo pipefail
src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
# 1. quoted includes name cli/'s own headers only
for f in "$src"/cli/*.c "$src"/cli/*.h; do
    while IFS= read -r inc; do
        h=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$inc")
        if [ ! -f "$src/cli/$h" ]; then
            echo "FAIL: $(basename "$f") includes \"$h\", which is not a cli/ header" >&2
            fail=1
        fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
    # an angle-bracket include of a core/ header would be found through core/ only
    for core in "$src"/core/*.h; do
        b=$(basename "$core")
        if grep -Eq "^[[:space:]]*#[[:space:]]*include[[:space:]]*<$b>" "$f"; then
            echo "FAIL: $(basename "$f") includes core header <$b>" >&2
            fail=1
        fi
    done
done
# 2. each source compiles against plugin-api/ alone
jflags=$(pkg-config --cflags jansson 2>/dev/null || true)
for f in "$src"/cli/*.c; do
    if ! cc -std=c11 -D_GNU_SOURCE -fsyntax-only -I"$src/plugin-api" -I"$src/cli" $jflags \
        -DKILN_VERSION_STRING='"probe"' "$f" 2>"$tmp/err"; then
        echo "FAIL: $(basename "$f") does not compile with only the public headers:" >&2
        head -5 "$tmp/err" >&2
        fail=1
    fi
done
# 2b. so does the embedding API's own test (the harness header is public-only too)
if ! cc -std=c11 -D_GNU_SOURCE -fsyntax-only -I"$src/plugin-api" -I"$src/tests/common" \
    $(pkg-config --cflags cunit 2>/dev/null || true) "$src/tests/core/test_embed.c" 2>"$tmp/err"; then
    echo "FAIL: tests/core/test_embed.c does not compile with only the public headers:" >&2
    head -5 "$tmp/err" >&2
    fail=1
fi
# 3. the check itself: a core include is caught
printf '#include "graph_int.h"\n' > "$tmp/bad.c"
if cc -std=c11 -fsyntax-only -I"$src/plugin-api" "$tmp/bad.c" 2>/dev/null; then
    echo "FAIL: graph_int.h is reachable from plugin-api/ alone" >&2
    fail=1
fi
[ "$fail" = 0 ] && echo "cli/ uses only the public API"
exit "$fail"
