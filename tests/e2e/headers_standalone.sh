#!/usr/bin/env bash
# Every public header compiles alone, as C11 and as C++, with and without
# KILN_PLUGIN; and the generated host table is up to date.
set -euo pipefail
src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$src/tools/gen_host_funcs.py" --check
for h in "$src"/plugin-api/kiln/*.h; do
    b=$(basename "$h")
    printf '#include <kiln/%s>\nint kiln_header_probe;\n' "$b" > "$tmp/t.c"
    for def in "" "-DKILN_PLUGIN"; do
        cc -std=c11 -Wall -Wextra -Werror -pedantic $def -I"$src/plugin-api" -c "$tmp/t.c" -o "$tmp/t.o"
        if command -v c++ >/dev/null; then
            c++ -x c++ -Wall -Wextra -Werror $def -I"$src/plugin-api" -c "$tmp/t.c" -o "$tmp/t.o"
        fi
    done
done
echo "headers: all compile standalone"
