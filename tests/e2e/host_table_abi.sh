#!/usr/bin/env bash
# The host table's ABI guard (tools/gen_host_funcs.py) on a copy of
# plugin-api/: a changed signature, a removed entry and a new function without
# a raised KILN_ABI_MINOR are each refused with a message naming the function;
# a renamed parameter and a new function with the minor raised are accepted,
# the new function appended last with its "since" minor.
set -euo pipefail
src="${KILN_SOURCE_DIR:?}"
gen="$src/tools/gen_host_funcs.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

fresh() { rm -rf "$tmp/r"; mkdir -p "$tmp/r"; cp -r "$src/plugin-api" "$tmp/r/"; }
api="$tmp/r/plugin-api/kiln"
minor=$(sed -n 's/^#define KILN_ABI_MINOR \([0-9]*\).*/\1/p' "$src/plugin-api/kiln/kiln_plugin.h")
next=$((minor + 1))
expect_fail() { # WHAT FRAGMENT
    if python3 "$gen" --root "$tmp/r" >"$tmp/out" 2>&1; then
        echo "FAIL: $1 was accepted" >&2; cat "$tmp/out" >&2; exit 1
    fi
    grep -qF -- "$2" "$tmp/out" || { echo "FAIL: $1: want '$2', got:" >&2; cat "$tmp/out" >&2; exit 1; }
    echo "ok: $1 refused"
}

fresh
python3 "$gen" --root "$tmp/r" --check >/dev/null
echo "ok: the copy is up to date"

fresh  # a parameter type changes
sed -i 's/^KILN_API uint32_t kiln_graph_node_count(const kiln_graph \*g);/KILN_API uint32_t kiln_graph_node_count(kiln_graph *g);/' "$api/kiln_graph.h"
grep -q 'kiln_graph_node_count(kiln_graph \*g)' "$api/kiln_graph.h"
expect_fail "changed parameter type" \
    "host table entry kiln_graph_node_count changed signature: was uint32_t(const kiln_graph*), now uint32_t(kiln_graph*)"

fresh  # a return type changes
sed -i 's/^KILN_API uint32_t kiln_graph_node_count(/KILN_API uint64_t kiln_graph_node_count(/' "$api/kiln_graph.h"
expect_fail "changed return type" "kiln_graph_node_count changed signature"

fresh  # an entry disappears
sed -i '/^KILN_API uint32_t kiln_graph_node_count(/d' "$api/kiln_graph.h"
expect_fail "removed entry" "host table entry kiln_graph_node_count (since 1.0) was removed"

fresh  # a new function, minor not raised
printf '#ifdef __cplusplus\nextern "C" {\n#endif\nKILN_API int32_t kiln_brand_new(int32_t x);\n#ifdef __cplusplus\n}\n#endif\n' >>"$api/kiln_runtime.h"
expect_fail "new function without a minor bump" "new host functions kiln_brand_new need KILN_ABI_MINOR raised to $next"

# ... with the minor raised: appended last, since 1.<next>
sed -i "s/#define KILN_ABI_MINOR $minor/#define KILN_ABI_MINOR $next/" "$api/kiln_plugin.h"
python3 "$gen" --root "$tmp/r" >/dev/null
tail -1 "$tmp/r/plugin-api/host_table.abi" | grep -qP "^\\d+\\t$next\\tkiln_brand_new\\tint32_t\\tint32_t\$"
grep -q 'X(int32_t, kiln_brand_new, brand_new, (int32_t x))$' "$api/kiln_host_funcs.h"
echo "ok: new function appended with since 1.$next"

fresh  # renaming a parameter is not an ABI change
sed -i 's/^KILN_API uint32_t kiln_graph_node_count(const kiln_graph \*g);/KILN_API uint32_t kiln_graph_node_count(const kiln_graph *graph);/' "$api/kiln_graph.h"
python3 "$gen" --root "$tmp/r" >/dev/null
echo "ok: renamed parameter accepted"
echo "host table ABI guard: OK"
