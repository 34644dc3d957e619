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
echo "headers: all compile standalone"
