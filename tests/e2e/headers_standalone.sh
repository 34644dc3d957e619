#!/usr/bin/env bash
# Every public header compiles alone, as C11 and as C++, with and without
# KILN_PLUGIN (kiln_embed.h, for programs linking libkiln, refuses KILN_PLUGIN);
# and the generated host table is up to date.
set -euo pipefail
src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$src/tools/gen_host_funcs.py" --check
for h in "$src"/plugin-api/kiln/*.h; do
    b=$(basename "$h")
    printf '#include <kiln/%s>\nint kiln_header_probe;\n' "$b" > "$tmp/t.c"
    for def in "" "-DKILN_PLUGIN"; do
        if [ "$b" = kiln_embed.h ] && [ -n "$def" ]; then
            # the embedding API is not for plugins: it must refuse to compile
            if cc -std=c11 $def -I"$src/plugin-api" -c "$tmp/t.c" -o "$tmp/t.o" 2>"$tmp/err"; then
                echo "kiln_embed.h compiled with KILN_PLUGIN" >&2; exit 1
            fi
            grep -q "plugins use kiln.h only" "$tmp/err"
            continue
        fi
        cc -std=c11 -Wall -Wextra -Werror -pedantic $def -I"$src/plugin-api" -c "$tmp/t.c" -o "$tmp/t.o"
        if command -v c++ >/dev/null; then
            c++ -x c++ -Wall -Wextra -Werror $def -I"$src/plugin-api" -c "$tmp/t.c" -o "$tmp/t.o"
        fi
    done
done
# Fusion passes are a stable kind: declared without KILN_EXPERIMENTAL.
cat >"$tmp/fusion.c" <<'C'
#include <kiln/kiln.h>
static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)e;
    static const kiln_fusion_pass_desc fp = {.struct_size = sizeof(kiln_fusion_pass_desc)};
    return kiln_register_fusion_pass(r, &fp);
}
KILN_PLUGIN_DEFINE("x", "1", "MIT", "x", init, NULL)
C
cc -std=c11 -Wall -Werror -DKILN_PLUGIN -I"$src/plugin-api" -c "$tmp/fusion.c" -o "$tmp/t.o"
# Memory planners and runtime allocators are stable kinds too: declared
# without KILN_EXPERIMENTAL, and a KILN_EXPERIMENTAL left in a plugin is harmless.
cat >"$tmp/kinds.c" <<'C'
#include <kiln/kiln.h>
static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)e;
    static const kiln_mem_planner_desc pl = {.struct_size = sizeof(kiln_mem_planner_desc)};
    static const kiln_allocator_desc al = {.struct_size = sizeof(kiln_allocator_desc)};
    kiln_alloc_stats st = {.struct_size = sizeof(st)};
    kiln_alloc_stack_stats(NULL, &st);
    kiln_status s = kiln_register_mem_planner(r, &pl);
    return s ? s : kiln_register_allocator(r, &al);
}
KILN_PLUGIN_DEFINE("x", "1", "MIT", "x", init, NULL)
C
cc -std=c11 -Wall -Werror -DKILN_PLUGIN -I"$src/plugin-api" -c "$tmp/kinds.c" -o "$tmp/t.o"
cc -std=c11 -Wall -Werror -DKILN_PLUGIN -DKILN_EXPERIMENTAL -I"$src/plugin-api" -c "$tmp/kinds.c" -o "$tmp/t.o"
echo "headers: all compile standalone; the allocator kind without KILN_EXPERIMENTAL"
