#!/usr/bin/env bash
# sdk_out_of_tree: install the kiln build tree into a temporary prefix, build
# the SDK template plugin (as shipped in <prefix>/share/kiln/sdk/template)
# out of tree against it, install the plugin into the same prefix and run it;
# then the same for the tuner example (sdk/tuner_example), whose hook must run
# at every build step, in a straight build and in paused + resumed ones.
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

step "configure + build the tuner example out of tree"
TUNER="$PREFIX/share/kiln/sdk/tuner_example"
test -f "$TUNER/CMakeLists.txt"
"$CMAKE" -S "$TUNER" -B "$TMP/build-tuner" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure-tuner.log"
"$CMAKE" --build "$TMP/build-tuner"
"$CMAKE" --install "$TMP/build-tuner" >/dev/null
test -f "$PREFIX/lib/kiln/plugins/libacme_tuner.so"

step "kiln compile with AcmeTuner: its hook runs at every build step"
"$PREFIX/bin/kiln" plugins -m "$TUNER/manifest.json" AcmeTuner >tuner.txt
grep -q "kind      tuner" tuner.txt
"$PREFIX/bin/kiln" compile "$SRC/tests/data/sdk/input.json" -m "$TUNER/manifest.json" -o tuned.json
# The steps in order with the node count seen at each (relu_chain keeps its 4
# nodes), and the decision made at after_ub_match on the 3 nodes with outputs.
grep -qF '"acme_tuner_steps": ["before_ub_match", "after_ub_match", "after_build"]' tuned.json
grep -qF '"acme_tuner_nodes": [4, 4, 4]' tuned.json
test "$(grep -c '"acme_block_dim": 8' tuned.json)" = 3

step "pause at each build step and resume: the same bytes"
for s in before_ub_match after_ub_match after_build; do
    "$PREFIX/bin/kiln" compile "$SRC/tests/data/sdk/input.json" -m "$TUNER/manifest.json" \
        --build-mode tuning --build-step "$s" -o "state_$s.json"
    "$PREFIX/bin/kiln" compile --resume "state_$s.json" -o "resumed_$s.json"
    if ! cmp -s tuned.json "resumed_$s.json"; then
        echo "FAIL: paused at $s and resumed, the result differs" >&2
        diff tuned.json "resumed_$s.json" >&2 || true
        exit 1
    fi
done

echo "sdk_out_of_tree: OK"
