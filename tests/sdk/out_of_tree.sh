#!/usr/bin/env bash
# sdk_out_of_tree: install the kiln build tree into a temporary prefix, build
# the SDK template plugin (as shipped in <prefix>/share/kiln/sdk/template)
# out of tree against it, install the plugin into the same prefix and run it;
# then build the embedding example (<prefix>/share/kiln/sdk/embed) against the
# installed kiln_embed.h and libkiln, with CMake and with a plain cc line, and
# run it on a model: compile, write JSON and ONNX, run, check the outputs.
#
# Environment (set by ctest): KILN_SOURCE_DIR, KILN_BUILD_DIR, KILN_CMAKE.
set -euo pipefail

SRC="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${KILN_BUILD_DIR:-$SRC/build}"
CMAKE="${KILN_CMAKE:-cmake}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/kiln-sdk.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"

step() { printf '== %s\n' "$*"; }

step "install $BUILD -> $PREFIX"
"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log"

TEMPLATE="$PREFIX/share/kiln/sdk/template"
MANIFEST="$TEMPLATE/manifest.json"
test -f "$TEMPLATE/CMakeLists.txt"
test -f "$PREFIX/lib/cmake/kiln/kilnConfig.cmake"
test -x "$PREFIX/bin/kiln"

step "configure + build the template out of tree"
"$CMAKE" -S "$TEMPLATE" -B "$TMP/build" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure.log"
"$CMAKE" --build "$TMP/build"
"$CMAKE" --install "$TMP/build" >/dev/null

PLUGIN="$PREFIX/lib/kiln/plugins/libacme_example.so"
test -f "$PLUGIN"

step "check exported symbols"
if command -v nm >/dev/null 2>&1; then
    exported="$(nm -D --defined-only "$PLUGIN" | awk 'NF == 3 && $2 ~ /[TDBRVW]/ { print $3 }' | sort -u)"
    if [ "$exported" != "kiln_plugin_entry" ]; then
        echo "FAIL: plugin must export exactly kiln_plugin_entry, got:" >&2
        echo "$exported" >&2
        exit 1
    fi
fi

step "kiln plugins"
cd "$TMP"
"$PREFIX/bin/kiln" plugins -m "$MANIFEST" >plugins.txt
cat plugins.txt
grep -q AcmeExamplePass plugins.txt

step "kiln opt --passes AcmeExamplePass"
"$PREFIX/bin/kiln" opt "$SRC/tests/data/sdk/input.json" -m "$MANIFEST" \
    --passes AcmeExamplePass -o out.json
test -s out.json
# AcmeExamplePass fuses Relu->Relu chains: relu2 is gone, relu1 feeds the output,
# and every surviving Relu carries the vendor attribute.
grep -q '"relu1"' out.json
if grep -q '"relu2"' out.json; then echo "FAIL: relu2 survived" >&2; exit 1; fi
grep -q '"acme_fused": true' out.json
grep -q '"relu1:0"' out.json

# ---- embedding: a program built against the INSTALLED kiln_embed.h + libkiln ----
EMBED="$PREFIX/share/kiln/sdk/embed"
test -f "$PREFIX/include/kiln/kiln_embed.h"
test -f "$EMBED/embed_example.c"

step "libkiln exports the embedding API"
if command -v nm >/dev/null 2>&1; then
    lib="$(ls "$PREFIX"/lib/libkiln.so.* | head -1)"
    for sym in kiln_session_create kiln_model_import kiln_model_compile kiln_model_run \
               kiln_model_write kiln_error_create kiln_error_format; do
        nm -D --defined-only "$lib" | grep -w "$sym" >/dev/null ||
            { echo "FAIL: libkiln lacks $sym" >&2; exit 1; }
    done
fi

step "build sdk/embed with find_package(kiln) (kiln::kiln)"
"$CMAKE" -S "$EMBED" -B "$TMP/embed-build" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/embed-configure.log"
"$CMAKE" --build "$TMP/embed-build" >/dev/null
step "build it with a plain compiler line (headers and library of the prefix only)"
cc -std=c11 -Wall -Wextra -Werror -I"$PREFIX/include" "$EMBED/embed_example.c" \
    -L"$PREFIX/lib" -lkiln -Wl,-rpath,"$PREFIX/lib" -o "$TMP/embed_cc"

# x = ((k+0)%5)-2, y = ((k+1)%5)-2: Relu(x + y) and x @ [[1,0],[0,1],[1,1]]
WANT="output 0 relu: float32 [2,3] 0 0 1 3 0 0
output 1 mm: float32 [2,2] -2 -1 -1 0"
for exe in "$TMP/embed-build/embed_example" "$TMP/embed_cc"; do
    step "$(basename "$exe"): JSON model, default manifest, writes JSON and ONNX"
    rm -f c.json c.onnx
    got="$(env -u KILN_PLUGIN_PATH "$exe" "$SRC/tests/data/run/add_relu.json" -o c.json -o c.onnx)"
    [ "$got" = "$WANT" ] || { echo "FAIL: got:"; echo "$got"; exit 1; } >&2
    test -s c.json && test -s c.onnx
done
step "the written ONNX, imported through the frontend plugin, runs the same"
got="$("$TMP/embed_cc" c.onnx)"
[ "$got" = "$WANT" ] || { echo "FAIL: onnx run got:"; echo "$got"; exit 1; } >&2
step "errors name the file"
if "$TMP/embed_cc" "$TMP/missing.json" 2>err.txt; then echo "FAIL: missing model accepted" >&2; exit 1; fi
grep -q "missing.json" err.txt
if "$TMP/embed_cc" "$SRC/tests/data/run/add_relu.json" -p "$TMP/nope.so" 2>err.txt; then
    echo "FAIL: missing plugin accepted" >&2; exit 1
fi
grep -q "cannot open $TMP/nope.so" err.txt

echo "sdk_out_of_tree: OK"
