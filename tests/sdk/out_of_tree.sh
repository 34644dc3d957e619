#!/usr/bin/env bash
# sdk_out_of_tree: the three ways docs/sdk.md gives to build a plugin out of
# tree, each followed by loading the plugin with kiln and running its pass.
#
#   1. CMake against an install: install the build into a temporary prefix,
#      build the SDK template (as shipped in <prefix>/share/kiln/sdk/template)
#      in a directory whose path contains a comma (a linker option split at
#      the comma once broke this), install the plugin into the prefix, run it.
#   2. pkg-config: compile the template's source with nothing kiln-specific but
#      `pkg-config --cflags --libs kiln-plugin` (no libkiln, -z defs holds),
#      load it through a manifest.
#   3. CMake against the build tree: find_package(kiln) with
#      CMAKE_PREFIX_PATH=<build dir>, no install.
#   4. Embedding: build the example program (<prefix>/share/kiln/sdk/embed)
#      against the installed kiln_embed.h and libkiln, with CMake and with a
#      plain cc line, and run it on a model: compile, write JSON and ONNX, run.
#   5. The tuner example (sdk/tuner_example), built against the install: its
#      hook must run at every build step, straight and paused + resumed.
#   6. The engine example (sdk/engine_example), built against the install: a
#      vendor engine claiming Relu and Add (float32) at priority 100.  Its
#      nodes are placed on it (kiln info), its optimize_original_graph runs
#      in the stage driver, its kernels run (trace) next to the built-in
#      engines' (MatMul on aicore, Transpose on hostcpu), and the outputs are
#      the built-in engines' byte for byte.
#   7. The fusion example (sdk/fusion_example), built against the install: a
#      pattern fusion pass rewriting Relu(Add(a, b)) into the engine example's
#      fused op AcmeAddRelu, loaded from its manifest (run by the default
#      pipeline's RunCustomPassAfterInferShape); the fused node is placed on
#      acme_npu, its kernel runs, and the outputs are the unfused run's byte
#      for byte.  The same fusion declared as JSON (libkiln_fusion_decl.so,
#      manifest_declarative.json) gives the same graph and outputs.
#
# Environment (set by ctest): KILN_SOURCE_DIR, KILN_BUILD_DIR, KILN_CMAKE.
set -euo pipefail

SRC="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${KILN_BUILD_DIR:-$SRC/build}"
CMAKE="${KILN_CMAKE:-cmake}"
CC="${CC:-cc}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/kiln-sdk.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix,with,commas"
INPUT="$SRC/tests/data/sdk/input.json"

step() { printf '== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# exactly one exported symbol, kiln_plugin_entry
check_exports() {
    command -v nm >/dev/null 2>&1 || return 0
    local exported
    exported="$(nm -D --defined-only "$1" | awk 'NF == 3 && $2 ~ /[TDBRVW]/ { print $3 }' | sort -u)"
    [ "$exported" = "kiln_plugin_entry" ] ||
        fail "$1 must export exactly kiln_plugin_entry, got: $exported"
}

# no dependency on libkiln: a plugin reaches kiln only through the host table
check_no_libkiln() {
    command -v readelf >/dev/null 2>&1 || return 0
    if readelf -d "$1" | grep -q 'NEEDED.*libkiln'; then
        fail "$1 links libkiln"
    fi
}

# kiln opt with AcmeExamplePass: relu2 is fused away, relu1 feeds the output,
# and every surviving Relu carries the vendor attribute.
run_acme() { # kiln manifest out.json [env...]
    local kiln=$1 manifest=$2 out=$3
    "$kiln" plugins -m "$manifest" >"$TMP/plugins.txt"
    grep -q AcmeExamplePass "$TMP/plugins.txt" || { cat "$TMP/plugins.txt"; fail "AcmeExamplePass not listed"; }
    "$kiln" opt "$INPUT" -m "$manifest" --passes AcmeExamplePass -o "$out"
    test -s "$out"
    grep -q '"relu1"' "$out" || fail "$out: relu1 missing"
    if grep -q '"relu2"' "$out"; then fail "$out: relu2 survived"; fi
    grep -q '"acme_fused": true' "$out" || fail "$out: no acme_fused"
    grep -q '"relu1:0"' "$out" || fail "$out: relu1 does not feed the output"
}

# ---------------------------------------------------------------- 1. install
step "install $BUILD -> $PREFIX"
"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log"

TEMPLATE="$PREFIX/share/kiln/sdk/template"
test -f "$TEMPLATE/CMakeLists.txt"
test -f "$PREFIX/lib/cmake/kiln/kilnConfig.cmake"
test -f "$PREFIX/lib/pkgconfig/kiln.pc"
test -f "$PREFIX/lib/pkgconfig/kiln-plugin.pc"
test -x "$PREFIX/bin/kiln"

step "configure + build the template out of tree, in a path with a comma"
TBUILD="$TMP/out,of,tree/build"
"$CMAKE" -S "$TEMPLATE" -B "$TBUILD" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure.log"
"$CMAKE" --build "$TBUILD"
"$CMAKE" --install "$TBUILD" >/dev/null

PLUGIN="$PREFIX/lib/kiln/plugins/libacme_example.so"
test -f "$PLUGIN"
check_exports "$PLUGIN"
check_no_libkiln "$PLUGIN"

step "kiln (installed) runs the installed plugin"
cd "$TMP"
run_acme "$PREFIX/bin/kiln" "$TEMPLATE/manifest.json" "$TMP/out_cmake.json"

# ------------------------------------------------------------- 2. pkg-config
step "pkg-config kiln-plugin"
command -v pkg-config >/dev/null 2>&1 || fail "pkg-config is not installed (tools/install-deps.sh)"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
cflags="$(pkg-config --cflags kiln-plugin)"
libs="$(pkg-config --libs kiln-plugin)"
echo "cflags: $cflags"
echo "libs:   $libs"
case " $cflags " in *" -DKILN_PLUGIN "*) ;; *) fail "kiln-plugin.pc: no -DKILN_PLUGIN in --cflags" ;; esac
case " $libs " in *-lkiln*) fail "kiln-plugin.pc: --libs links libkiln" ;; esac
[ "$(pkg-config --variable=plugindir kiln-plugin)" = "$(pkg-config --variable=plugindir kiln)" ] ||
    fail "kiln.pc and kiln-plugin.pc disagree on plugindir"
test -d "$(pkg-config --variable=plugindir kiln-plugin)"
case " $(pkg-config --libs kiln) " in *" -lkiln "*) ;; *) fail "kiln.pc (embedders) must link libkiln" ;; esac

mkdir -p "$TMP/pc"
# -z defs: every symbol the plugin uses must resolve without libkiln
# shellcheck disable=SC2086
"$CC" -std=c11 -shared -fPIC -Wl,-z,defs -o "$TMP/pc/libacme_pc.so" \
    "$TEMPLATE/acme_example.c" $(pkg-config --cflags --libs kiln-plugin)
check_exports "$TMP/pc/libacme_pc.so"
check_no_libkiln "$TMP/pc/libacme_pc.so"
cat >"$TMP/pc/manifest.json" <<'JSON'
{"kiln_manifest": 1,
 "plugins": [{"path": "libacme_pc.so", "provides": {"passes": ["AcmeExamplePass"]}}]}
JSON
step "kiln (installed) runs the pkg-config plugin"
run_acme "$PREFIX/bin/kiln" "$TMP/pc/manifest.json" "$TMP/out_pc.json"
cmp "$TMP/out_cmake.json" "$TMP/out_pc.json" || fail "the pkg-config plugin gives another result"

# ------------------------------------------------------------- 3. build tree
step "find_package(kiln) from the build tree $BUILD"
test -f "$BUILD/kilnConfig.cmake" || fail "no kilnConfig.cmake in the build tree"
BTBUILD="$TMP/build,tree"
"$CMAKE" -S "$SRC/sdk/template" -B "$BTBUILD" -DCMAKE_PREFIX_PATH="$BUILD" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure-bt.log"
grep -q "kiln_DIR:PATH=$BUILD" "$BTBUILD/CMakeCache.txt" || fail "kiln was not found in the build tree"
"$CMAKE" --build "$BTBUILD"
test -f "$BTBUILD/libacme_example.so"
check_exports "$BTBUILD/libacme_example.so"
step "kiln (build tree) runs the plugin built against the build tree"
KILN_PLUGIN_PATH="$BTBUILD" run_acme "$BUILD/bin/kiln" "$SRC/sdk/template/manifest.json" "$TMP/out_bt.json"

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
    -L"$PREFIX/lib" -lkiln -Xlinker -rpath -Xlinker "$PREFIX/lib" -o "$TMP/embed_cc"

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

# ------------------------------------------------------- 6. engine example
step "configure + build the engine example out of tree"
ENGINE="$PREFIX/share/kiln/sdk/engine_example"
test -f "$ENGINE/CMakeLists.txt"
"$CMAKE" -S "$ENGINE" -B "$TMP/build-engine" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure-engine.log"
"$CMAKE" --build "$TMP/build-engine"
"$CMAKE" --install "$TMP/build-engine" >/dev/null
ACME="$PREFIX/lib/kiln/plugins/libacme_engine.so"
test -f "$ACME"
check_exports "$ACME"
check_no_libkiln "$ACME"

step "kiln plugins acme_npu: priority and op table"
"$PREFIX/bin/kiln" plugins --plugin "$ACME" acme_npu >engine.txt
grep -q "kind      engine" engine.txt || { cat engine.txt; fail "acme_npu is not an engine"; }
grep -q "priority  100" engine.txt || fail "acme_npu: priority 100 not listed"
grep -Eq "^  op +Relu +float32 +any-format$" engine.txt || { cat engine.txt; fail "acme_npu: Relu row"; }
grep -Eq "^  op +Add +float32 +any-format$" engine.txt || fail "acme_npu: Add row"

step "placement: Relu and Add on acme_npu, MatMul on aicore, Transpose on hostcpu"
"$PREFIX/bin/kiln" info "$ENGINE/graph.json" --plugin "$ACME" >info.txt
grep -Eq "^  Add +2  acme_npu$" info.txt || { cat info.txt; fail "Add not placed on acme_npu"; }
grep -Eq "^  Relu +1  acme_npu$" info.txt || fail "Relu not placed on acme_npu"
grep -Eq "^  MatMul +1  aicore$" info.txt || fail "MatMul not on aicore"
grep -Eq "^  Transpose +1  hostcpu$" info.txt || fail "Transpose not on hostcpu"
"$PREFIX/bin/kiln" info "$ENGINE/graph.json" >info_builtin.txt
grep -Eq "^  Add +2  vector$" info_builtin.txt || { cat info_builtin.txt; fail "Add not on vector without the vendor engine"; }

step "compile: the engine's optimize_original_graph ran in the stage driver"
"$PREFIX/bin/kiln" compile "$ENGINE/graph.json" --plugin "$ACME" -o acme_compiled.json
grep -qF '"acme_claimed": 3' acme_compiled.json || fail "optimize_original_graph did not run (acme_claimed)"
python3 - acme_compiled.json <<'PY' || fail "placement (_kiln_engine) in the compiled graph"
import json, sys
eng = {n["name"]: n.get("engine") for n in json.load(open(sys.argv[1]))["nodes"]}
want = {"add": "acme_npu", "add_bias": "acme_npu", "relu": "acme_npu", "mm": "aicore", "tr": "hostcpu"}
assert all(eng[k] == v for k, v in want.items()), eng
PY

step "run: the vendor kernels execute, the outputs are the built-in engines'"
python3 - "$TMP" <<'PY'
import json, struct, sys
d = sys.argv[1]
for name, vals in (("x", [-1, 2, -3, 4, -5, 6]), ("y", [0.25, -2, 1, -4, 6, -1])):
    open("%s/%s.bin" % (d, name), "wb").write(struct.pack("<6f", *vals))
    json.dump({"dims": [2, 3], "dtype": "float32"}, open("%s/%s.bin.json" % (d, name), "w"))
PY
ACME_ENGINE_TRACE=1 "$PREFIX/bin/kiln" run "$ENGINE/graph.json" --plugin "$ACME" \
    --input x="$TMP/x.bin" --input y="$TMP/y.bin" --output-dir "$TMP/out_acme" 2>trace.txt
for n in "add (Add)" "add_bias (Add)" "relu (Relu)"; do
    grep -qF "acme_npu: node $n" trace.txt || { cat trace.txt; fail "node $n did not run on acme_npu"; }
done
if grep -q "acme_npu: node mm\|acme_npu: node tr" trace.txt; then fail "acme_npu bound a node it does not list"; fi
"$PREFIX/bin/kiln" run "$ENGINE/graph.json" \
    --input x="$TMP/x.bin" --input y="$TMP/y.bin" --output-dir "$TMP/out_builtin"
for o in 0 1; do
    cmp "$TMP/out_acme/output.$o.bin" "$TMP/out_builtin/output.$o.bin" ||
        fail "output $o differs between acme_npu and the built-in engines"
done
python3 - "$TMP/out_acme" <<'PY'
import struct, sys
relu = struct.unpack("<6f", open(sys.argv[1] + "/output.0.bin", "rb").read())
want = [max(0.0, a + b + c) for a, b, c in zip([-1, 2, -3, 4, -5, 6], [0.25, -2, 1, -4, 6, -1], [0.5, -1, 2] * 2)]
assert list(relu) == want, (relu, want)
PY

# ------------------------------------------------------- 7. fusion example
step "configure + build the fusion example out of tree"
FUSION="$PREFIX/share/kiln/sdk/fusion_example"
test -f "$FUSION/CMakeLists.txt"
"$CMAKE" -S "$FUSION" -B "$TMP/build-fusion" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure-fusion.log"
"$CMAKE" --build "$TMP/build-fusion"
"$CMAKE" --install "$TMP/build-fusion" >/dev/null
ACMEF="$PREFIX/lib/kiln/plugins/libacme_fusion.so"
test -f "$ACMEF"
check_exports "$ACMEF"
check_no_libkiln "$ACMEF"

"$PREFIX/bin/kiln" plugins -m "$FUSION/manifest.json" AcmeAddReluFusionPass >fusion.txt
grep -q "kind      fusion-pass" fusion.txt || { cat fusion.txt; fail "AcmeAddReluFusionPass is not a fusion pass"; }

# the fused graph: add_bias + relu became one AcmeAddRelu on acme_npu that keeps
# feeding the output and the MatMul; `add` stays an Add (its consumer is not a Relu)
check_fused() { # compiled.json node-name
    python3 - "$1" "$2" <<'PY' || fail "$1: the Add+Relu fusion"
import json, sys
g = json.load(open(sys.argv[1]))
n = {v["name"]: v for v in g["nodes"]}
f = n[sys.argv[2]]
assert f["type"] == "AcmeAddRelu" and f.get("engine") == "acme_npu", f
assert f["inputs"] == ["add:0", "bias:0"], f["inputs"]
a = f["attrs"]
assert a["acme_fused_from"] == "Add,Relu", a
assert sorted(a["_datadump_origin_op_names"]) == ["add_bias", "relu"], a
assert "relu" not in n and "add_bias" not in n and n["add"]["type"] == "Add"
assert n["mm"]["inputs"][0] == sys.argv[2] + ":0", n["mm"]["inputs"]
PY
}
for variant in manifest manifest_declarative; do
    case $variant in
        manifest) fused=relu_acme_add_relu ;;
        *) fused=relu/acme_add_relu ;;
    esac
    step "compile with $variant.json: the fusion ran, the fused node is on acme_npu"
    "$PREFIX/bin/kiln" compile "$ENGINE/graph.json" -m "$FUSION/$variant.json" -o "fused_$variant.json"
    check_fused "fused_$variant.json" "$fused"
    step "run with $variant.json: the fused kernel runs, the outputs equal the unfused run"
    ACME_ENGINE_TRACE=1 "$PREFIX/bin/kiln" run "$ENGINE/graph.json" -m "$FUSION/$variant.json" \
        --input x="$TMP/x.bin" --input y="$TMP/y.bin" --output-dir "$TMP/out_$variant" 2>ftrace.txt
    grep -qF "acme_npu: node $fused (AcmeAddRelu)" ftrace.txt || { cat ftrace.txt; fail "the fused node did not run on acme_npu"; }
    for o in 0 1; do
        cmp "$TMP/out_$variant/output.$o.bin" "$TMP/out_builtin/output.$o.bin" ||
            fail "$variant: output $o differs from the unfused run"
    done
done

echo "sdk_out_of_tree: OK"
