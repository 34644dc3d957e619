#!/usr/bin/env bash
# sdk_out_of_tree: install the kiln build tree into a temporary prefix, build
# the SDK template plugin (as shipped in <prefix>/share/kiln/sdk/template)
# out of tree against it, install the plugin into the same prefix and run it.
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

echo "sdk_out_of_tree: OK"
