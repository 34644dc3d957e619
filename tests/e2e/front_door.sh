#!/usr/bin/env bash
# The CLI's front door (docs/run.md, docs/man/kiln.1, tools/completion/kiln.bash):
#
#  1. `kiln --version` (project version, plugin ABI); `kiln help`, `kiln --help`,
#     `kiln help VERB` and `kiln VERB --help` with each verb's own options;
#     unknown verbs exit 2 with a suggestion.
#  2. The man page renders without groff warnings and names every verb of
#     `kiln help` and every option of the parser (`kiln help --options`); every
#     option it names is one the parser accepts, and every parser option is in
#     some verb's help.  The bash completion loads and completes verbs, a verb's
#     options (the same set as its help), pass names and files by extension.
#     `cmake --install` (make install) installs both.
#  3. `kiln info` on ONNX (symbolic dims, opsets, a Loop subgraph, a custom op) and
#     JSON models, text and --json; the engine column comes from the loaded
#     engines (a manifest without the CPU engine gives "none").
#  4. `kiln run`: every missing input listed with dtype and shape; --input-shape
#     (compile fixes the shape; run checks the file against it; malformed is exit
#     2); unknown kiln.* options are errors with "did you mean" (--option exit 2,
#     manifest "options" exit 1); --output-format npy writes NPY 1.0 files with
#     the exact values; manifests/O0.json runs the model.
# The ONNX models are written here with tests/data/onnx/gen_models.py's encoder.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
bad() { echo "FAIL $*"; fail=$((fail+1)); }
check() { # name expected_rc fragment -- command...   (fragment searched in stdout+stderr)
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err.txt" "$tmp/out.txt"; }; then
        echo "FAIL $name: rc=$rc (want $want), want '$frag'; stdout/stderr:"; cat "$tmp/out.txt" "$tmp/err.txt" | head -20
        fail=$((fail+1))
    else pass=$((pass+1)); fi
}
has() { # name fragment file : the file contains the fragment
    if grep -qF -- "$2" "$3"; then pass=$((pass+1)); else bad "$1: '$2' not in $3:"; head -40 "$3"; fi
}
hasnt() {
    if grep -qF -- "$2" "$3"; then bad "$1: '$2' unexpectedly in $3"; else pass=$((pass+1)); fi
}

# ---- 1. version and help -----------------------------------------------------------
version=$(sed -n '/^project(kiln/,/)/s/^ *VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
abi=$(sed -n 's/^#define KILN_ABI_MAJOR \([0-9]*\).*/\1/p' "$src/plugin-api/kiln/kiln_plugin.h").$(sed -n 's/^#define KILN_ABI_MINOR \([0-9]*\).*/\1/p' "$src/plugin-api/kiln/kiln_plugin.h")
check version 0 "kiln $version" -- "$kiln" --version
has version_abi "plugin ABI $abi" "$tmp/out.txt"
check version_after_verb 0 "kiln $version" -- "$kiln" run --version
check help_overview 0 "usage: kiln VERB" -- "$kiln" help
cp "$tmp/out.txt" "$tmp/overview.txt"
check help_flag 0 "usage: kiln VERB" -- "$kiln" --help
cmp -s "$tmp/out.txt" "$tmp/overview.txt" || bad "kiln --help differs from kiln help"
check no_verb 2 "usage: kiln VERB" -- "$kiln"
verbs=$(awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && !/^  / { on = 0 }' "$tmp/overview.txt")
for v in compile opt run info plugins manifest convert lint help; do
    grep -qx "$v" <<<"$verbs" || bad "overview lacks verb $v"
done
: > "$tmp/help_opts.txt"
for v in $verbs; do
    check "help_$v" 0 "usage: kiln $v" -- "$kiln" help "$v"
    cp "$tmp/out.txt" "$tmp/help_$v.txt"
    sed -n '/^options:/,$p' "$tmp/help_$v.txt" | cut -c1-27 | grep -oE -- '--?[A-Za-z][A-Za-z-]*' >> "$tmp/help_opts.txt"
    [ "$v" = help ] && continue
    check "${v}_dash_help" 0 "usage: kiln $v" -- "$kiln" "$v" --help
    cmp -s "$tmp/out.txt" "$tmp/help_$v.txt" || bad "kiln $v --help differs from kiln help $v"
done
# each verb gets its own options, not one global text
has run_help_input "--input [NAME=]FILE" "$tmp/help_run.txt"
has run_help_output_format "--output-format" "$tmp/help_run.txt"
hasnt run_help_no_passes "--passes LIST" "$tmp/help_run.txt"
has opt_help_passes "--passes LIST" "$tmp/help_opt.txt"
hasnt opt_help_no_input "--input [NAME=]FILE" "$tmp/help_opt.txt"
has compile_help_resume "--resume STATE" "$tmp/help_compile.txt"
has info_help_json "--json" "$tmp/help_info.txt"
hasnt info_help_no_report "--report" "$tmp/help_info.txt"
check unknown_verb 2 "unknown verb 'comple' (did you mean 'compile'?)" -- "$kiln" comple -o x.json
check unknown_verb_far 2 "unknown verb 'frobnicate'" -- "$kiln" frobnicate
check help_unknown_verb 2 "did you mean 'info'" -- "$kiln" help inf0
check unknown_option 2 "kiln help info" -- "$kiln" info x.onnx --nope

# ---- 2. man page and completion against the parser's own table -----------------------
check parser_options 0 "--manifest" -- "$kiln" help --options
sort -u "$tmp/out.txt" > "$tmp/parser_opts.txt"
[ "$(wc -l < "$tmp/parser_opts.txt")" -ge 25 ] || bad "kiln help --options lists too few options"
man="$src/docs/man/kiln.1"
if ! command -v groff >/dev/null; then
    bad "groff is missing (tools/install-deps.sh installs groff-base)"
else
    groff -man -ww -z "$man" 2>"$tmp/groff.txt" || bad "groff failed on kiln.1"
    [ -s "$tmp/groff.txt" ] && { bad "kiln.1 renders with warnings:"; cat "$tmp/groff.txt"; } || pass=$((pass+1))
    groff -man -Tutf8 -rLL=200n "$man" 2>/dev/null | sed 's/.\x08//g' > "$tmp/man.txt"
    for v in $verbs; do
        grep -qE "^ +$v( |$)" "$tmp/man.txt" || bad "kiln.1 does not describe verb $v"
    done
fi
sed 's/\\-/-/g; s/\\f[BIRP]//g' "$man" > "$tmp/man_src.txt"
grep -q "^\.TH KILN 1 .* \"kiln $version\"" "$man" && pass=$((pass+1)) || bad "kiln.1's .TH line does not say kiln $version"
sort -u "$tmp/help_opts.txt" > "$tmp/help_opts_u.txt"
while read -r o; do
    grep -qE -- "(^|[^A-Za-z-])$o([^A-Za-z-]|$)" "$tmp/man_src.txt" || bad "kiln.1 does not document $o"
    grep -qxF -- "$o" "$tmp/help_opts_u.txt" || bad "no verb's help lists $o"
done < "$tmp/parser_opts.txt"
# every option the man page or a help text names is one the parser accepts
grep -oE -- '(^|[ (,])--[a-z][a-z-]+' "$tmp/man_src.txt" | sed 's/^[ (,]//' | sort -u > "$tmp/man_opts.txt"
cat "$tmp/help_opts_u.txt" >> "$tmp/man_opts.txt"
while read -r o; do
    grep -qxF -- "$o" "$tmp/parser_opts.txt" || bad "$o is documented but the parser does not accept it"
done < <(sort -u "$tmp/man_opts.txt" | grep -vx -- --options) # `kiln help --options` is a word of help
pass=$((pass+1))

comp="$src/tools/completion/kiln.bash"
mkdir -p "$tmp/cwd/sub"; : > "$tmp/cwd/model.onnx"; : > "$tmp/cwd/graph.json"; : > "$tmp/cwd/x.npy"; : > "$tmp/cwd/notes.txt"
complete_words() { # words... : COMPREPLY of completing the last word, one a line
    (cd "$tmp/cwd" && bash --norc -c 'source "$1"; shift
        complete -p kiln >/dev/null || exit 3
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _kiln; printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@")
}
out=$(complete_words "$kiln" co) || bad "completion does not load or register 'kiln'"
[ "$(echo "$out" | sort | tr '\n' ' ')" = "compile convert " ] && pass=$((pass+1)) || bad "completing 'kiln co' gave: $out"
out=$(complete_words "$kiln" help ru)
[ "$out" = run ] && pass=$((pass+1)) || bad "completing 'kiln help ru' gave: $out"
for v in run info opt compile; do
    got=$(complete_words "$kiln" "$v" - | sort -u)
    want=$(sed -n '/^options:/,$p' "$tmp/help_$v.txt" | cut -c1-27 | grep -oE -- '--?[A-Za-z][A-Za-z-]*' | sort -u)
    [ "$got" = "$want" ] && pass=$((pass+1)) || bad "completing 'kiln $v -' differs from its help: $got"
done
out=$(complete_words "$kiln" run --output-f)
[ "$out" = "--output-format" ] && pass=$((pass+1)) || bad "completing --output-f gave: $out"
out=$(complete_words "$kiln" run --output-format "")
[ "$(echo $out)" = "raw npy" ] && pass=$((pass+1)) || bad "completing --output-format gave: $out"
out=$(complete_words "$kiln" info "" | sort | tr '\n' ' ')
[ "$out" = "graph.json model.onnx sub/ " ] && pass=$((pass+1)) || bad "completing a model file gave: $out"
out=$(complete_words "$kiln" run --input x= | sort | tr '\n' ' ')
[ "$out" = "x=sub/ x=x.npy " ] && pass=$((pass+1)) || bad "completing --input x= gave: $out"
out=$(complete_words "$kiln" opt --passes InferShapes,Prune)
[ "$out" = "InferShapes,PruneGraphPass" ] && pass=$((pass+1)) || bad "completing a pass list gave: $out"

# `make install` puts both where man and bash-completion look
if [ -n "${KILN_CMAKE:-}" ] && [ -n "${KILN_BUILD_DIR:-}" ]; then
    "$KILN_CMAKE" --install "$KILN_BUILD_DIR" --prefix "$tmp/prefix" >"$tmp/install.txt" 2>&1 || { bad "cmake --install failed:"; tail "$tmp/install.txt"; }
    cmp -s "$man" "$tmp/prefix/share/man/man1/kiln.1" && pass=$((pass+1)) || bad "make install did not install share/man/man1/kiln.1"
    cmp -s "$comp" "$tmp/prefix/share/bash-completion/completions/kiln" && pass=$((pass+1)) \
        || bad "make install did not install share/bash-completion/completions/kiln"
else
    bad "KILN_CMAKE / KILN_BUILD_DIR are not set (run through ctest)"
fi

# ---- 3. kiln info ------------------------------------------------------------------
python3 "$src/tests/data/onnx/gen_models.py" "$tmp" >/dev/null || bad "gen_models.py failed"
cat > "$tmp/gen.py" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
from gen_models import FLOAT, graph, model, node, tensor, value_info
# y = Relu(a + w), z = b * a: two inputs, a symbolic batch dim N
g = graph("front_door",
          [node("Add", ["a", "w"], ["s"], "add"), node("Relu", ["s"], ["y"], "relu"),
           node("Mul", ["b", "a"], ["z"], "mul")],
          inputs=[value_info("a", FLOAT, ["N", 3]), value_info("b", FLOAT, [1, 3])],
          outputs=[value_info("y", FLOAT, ["N", 3]), value_info("z", FLOAT, ["N", 3])],
          inits=[tensor("w", FLOAT, [3], floats=[1.0, -2.0, 3.0])])
open(sys.argv[2], "wb").write(model(g, opsets=(("", 13),)))
def npy(path, dims, vals):
    shape = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode()
                           + struct.pack("<%df" % len(vals), *vals))
d = sys.argv[3]
npy(d + "/a.npy", [2, 3], [1, 2, 3, -4, -5, -6])
npy(d + "/a4.npy", [4, 3], [1] * 12)
npy(d + "/b.npy", [1, 3], [10, 20, 30])
PY
python3 "$tmp/gen.py" "$src/tests/data/onnx" "$tmp/fd.onnx" "$tmp" || bad "writing the test model failed"
check info_text 0 "a: float32 [N,3]" -- "$kiln" info "$tmp/fd.onnx"
has info_input_b "1 b: float32 [1,3]" "$tmp/out.txt"
has info_output "0 y: float32 [N,3]" "$tmp/out.txt"
has info_opset "opsets:    ai.onnx:13" "$tmp/out.txt"
grep -qE '^  Relu +1  cpu$' "$tmp/out.txt" && pass=$((pass+1)) || bad "info: Relu row"
grep -qE '^  Data +2  \(graph\)$' "$tmp/out.txt" && pass=$((pass+1)) || bad "info: Data row"
check info_loop_json 0 "" -- "$kiln" info "$tmp/good_loop.onnx" --json
python3 - "$tmp/out.txt" <<'PY' || bad "info --json on good_loop.onnx"
import json, sys
d = json.load(open(sys.argv[1]))
ops = {o["op"]: o for o in d["ops"]}
errs = []
def want(cond, what):
    if not cond: errs.append(what)
want([(i["name"], i["dtype"], i["shape"]) for i in d["inputs"]] == [("M", "int64", []), ("x", "float32", ["N"])], "inputs %r" % d["inputs"])
want([(o["name"], o["dtype"], o["shape"]) for o in d["outputs"]] == [("y", "float32", ["N"]), ("z", "int64", [1])], "outputs %r" % d["outputs"])
want(d["opsets"] == [{"domain": "ai.onnx", "version": 16}, {"domain": "com.example", "version": 1}], "opsets %r" % d["opsets"])
want(len(d["subgraphs"]) == 1 and d["subgraphs"][0]["role"] == "body" and d["subgraphs"][0]["owner_op"] == "While", "subgraphs %r" % d["subgraphs"])
want(d["nodes"] == d["root_nodes"] + d["subgraphs"][0]["nodes"], "node counts")
want(ops["Frobnicate"]["engines"] == [] and ops["Frobnicate"]["unsupported"] == 1, "Frobnicate %r" % ops["Frobnicate"])
want(ops["Add"]["engines"] == ["cpu"] and ops["Add"]["count"] == 1, "Add %r" % ops["Add"])
# Shape yields int64: the engine admits it only once InferShapes has set the dtype
want(ops["Shape"]["engines"] == ["cpu"], "Shape %r" % ops["Shape"])
want(sum(o["count"] for o in d["ops"]) == d["nodes"], "histogram total")
if errs:
    print("\n".join(errs)); sys.exit(1)
PY
has info_text_subgraph "loop_body: body of loop (While)" <(cd "$tmp" && "$kiln" info good_loop.onnx)
# the engine column is the loaded engines' answer: no CPU engine, no support
cat > "$tmp/no_cpu.json" <<JSON
{"kiln_manifest": 1, "plugins": [{"path": "libkiln_onnx.so"}]}
JSON
check info_no_engine 0 "" -- "$kiln" info "$tmp/fd.onnx" -m "$tmp/no_cpu.json"
grep -qE '^  Relu +1  none$' "$tmp/out.txt" && pass=$((pass+1)) || { bad "info without an engine:"; cat "$tmp/out.txt"; }
check info_json_graph 0 "" -- "$kiln" info "$src/examples/residual_block.json" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["opsets"] == [] and d["inputs"] and d["ops"], d' "$tmp/out.txt" \
    && pass=$((pass+1)) || bad "info --json on a JSON graph"
check info_missing 1 "nope.onnx" -- "$kiln" info "$tmp/nope.onnx"
check info_usage 2 "expected one MODEL" -- "$kiln" info
check info_no_output 2 "do not apply" -- "$kiln" info "$tmp/fd.onnx" -o "$tmp/x.json"

# ---- 4. kiln run ---------------------------------------------------------------------
check run_missing_all 1 "2 of the model's 2 inputs have no file" -- "$kiln" run "$tmp/fd.onnx"
has run_missing_a "missing input a (index 0): float32 [N,3]; pass --input a=FILE" "$tmp/err.txt"
has run_missing_b "missing input b (index 1): float32 [1,3]; pass --input b=FILE" "$tmp/err.txt"
check run_missing_one 1 "missing input b (index 1): float32 [1,3]" -- "$kiln" run "$tmp/fd.onnx" --input a="$tmp/a.npy"
hasnt run_missing_one_not_a "missing input a" "$tmp/err.txt"
check run_ok 0 "output 0 y: float32 [2,3] min 0 max 6" -- "$kiln" run "$tmp/fd.onnx" --input a="$tmp/a.npy" --input b="$tmp/b.npy"
cp "$tmp/out.txt" "$tmp/run_default.txt"
# manifests/O0.json keeps InferShapes and runs the model
check o0_run 0 "output 1 z: float32 [2,3] min -180 max 90" -- "$kiln" run -m "$src/manifests/O0.json" "$tmp/fd.onnx" --input a="$tmp/a.npy" --input b="$tmp/b.npy"
cmp -s "$tmp/out.txt" "$tmp/run_default.txt" || bad "O0 run differs from the default run"
check o0_only_infer 0 "(18 disabled)" -- "$kiln" manifest check "$src/manifests/O0.json"
grep -E '^ +[0-9]+\. ' "$tmp/out.txt" | grep -v DISABLED | grep -qv 'InferShapes ' && bad "O0 enables a pass besides InferShapes" || pass=$((pass+1))
# --input-shape
check shape_compile 0 "" -- "$kiln" compile "$tmp/fd.onnx" --input-shape a=5x3 -o "$tmp/fixed.json"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); n={x["name"]: x for x in g["nodes"]}; assert n["relu"]["outputs"][0]["shape"] == [5, 3], n["relu"]' "$tmp/fixed.json" \
    && pass=$((pass+1)) || bad "--input-shape a=5x3 did not fix relu's shape"
check shape_run_ok 0 "output 0 y: float32 [2,3]" -- "$kiln" run "$tmp/fd.onnx" --input-shape a=2x3 --input a="$tmp/a.npy" --input b="$tmp/b.npy"
check shape_run_mismatch 1 "--input-shape fixes it to [4,3], the file holds [2,3]" -- "$kiln" run "$tmp/fd.onnx" --input-shape a=4x3 --input a="$tmp/a.npy" --input b="$tmp/b.npy"
check shape_run_other 0 "output 0 y: float32 [4,3]" -- "$kiln" run "$tmp/fd.onnx" --input-shape a=4x3 --input a="$tmp/a4.npy" --input b="$tmp/b.npy"
check shape_fixed_dim 1 "input a is declared float32 [N,3]" -- "$kiln" compile "$tmp/fd.onnx" --input-shape a=2x4 -o "$tmp/x.json"
check shape_rank 1 "only its unknown dims" -- "$kiln" compile "$tmp/fd.onnx" --input-shape a=2 -o "$tmp/x.json"
check shape_unknown_input 1 "no input named 'q'" -- "$kiln" compile "$tmp/fd.onnx" --input-shape q=2x3 -o "$tmp/x.json"
check shape_malformed 2 "--input-shape expects NAME=DIMS" -- "$kiln" compile "$tmp/fd.onnx" --input-shape a=2x -o "$tmp/x.json"
check shape_malformed_neg 2 "--input-shape expects NAME=DIMS" -- "$kiln" run "$tmp/fd.onnx" --input-shape a=-1x3
check shape_no_name 2 "--input-shape expects NAME=DIMS" -- "$kiln" run "$tmp/fd.onnx" --input-shape 2x3
test ! -e "$tmp/x.json" || bad "an output was written after a failed --input-shape"
# unknown kiln.* options
check option_typo 2 "unknown option 'kiln.runtme' (did you mean 'kiln.runtime'?)" -- "$kiln" run "$tmp/fd.onnx" --option kiln.runtme=sequential
check option_prefix_typo 2 "did you mean 'kiln.input_shape.a'?" -- "$kiln" compile "$tmp/fd.onnx" --option kiln.input_shapes.a=2,3 -o "$tmp/x.json"
check option_no_suffix 2 "unknown option 'kiln.input_shape.'" -- "$kiln" compile "$tmp/fd.onnx" --option kiln.input_shape.=2 -o "$tmp/x.json"
check option_far 2 "unknown option 'kiln.zzzzzzzzzz'" -- "$kiln" run "$tmp/fd.onnx" --option kiln.zzzzzzzzzz=1
check option_known 0 "output 0" -- "$kiln" run "$tmp/fd.onnx" --option kiln.runtime=sequential --input a="$tmp/a.npy" --input b="$tmp/b.npy"
check option_plugin_key 0 "output 0" -- "$kiln" run "$tmp/fd.onnx" --option vendor.knob=1 --input a="$tmp/a.npy" --input b="$tmp/b.npy"
cat > "$tmp/typo_manifest.json" <<JSON
{"kiln_manifest": 1, "extends": "$src/manifests/default.json", "options": {"kiln.runtim": "sequential"}}
JSON
check option_manifest 1 "typo_manifest.json: unknown option 'kiln.runtim' (did you mean 'kiln.runtime'?)" -- "$kiln" run -m "$tmp/typo_manifest.json" "$tmp/fd.onnx" --input a="$tmp/a.npy" --input b="$tmp/b.npy"
# .npy outputs
check npy_out 0 "" -- "$kiln" run "$tmp/fd.onnx" --input a="$tmp/a.npy" --input b="$tmp/b.npy" --output-dir "$tmp/npy" --output-format npy
python3 - "$tmp/npy" <<'PY' || bad ".npy outputs"
import struct, sys, os
d = sys.argv[1]
want = {0: [2, 0, 6, 0, 0, 0], 1: [10, 40, 90, -40, -100, -180]}
assert sorted(os.listdir(d)) == ["output.0.npy", "output.1.npy"], os.listdir(d)
for i, vals in want.items():
    b = open("%s/output.%d.npy" % (d, i), "rb").read()
    assert b[:8] == b"\x93NUMPY\x01\x00", b[:8]
    hlen = struct.unpack("<H", b[8:10])[0]
    assert (10 + hlen) % 64 == 0 and b[10 + hlen - 1:10 + hlen] == b"\n", hlen
    hdr = b[10:10 + hlen].decode().strip()
    assert hdr == "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", hdr
    got = list(struct.unpack("<6f", b[10 + hlen:]))
    assert got == vals, (i, got)
PY
check npy_roundtrip 0 "output 0 y: float32 [2,3] min 0 max 9" -- "$kiln" run "$tmp/fd.onnx" --input a="$tmp/npy/output.0.npy" --input b="$tmp/b.npy"
check npy_raw_default 0 "" -- "$kiln" run "$tmp/fd.onnx" --input a="$tmp/a.npy" --input b="$tmp/b.npy" --output-dir "$tmp/raw"
[ -e "$tmp/raw/output.0.bin" ] && [ -e "$tmp/raw/output.0.bin.json" ] && [ ! -e "$tmp/raw/output.0.npy" ] && pass=$((pass+1)) || bad "raw outputs by default"
check npy_needs_dir 2 "--output-format needs --output-dir" -- "$kiln" run "$tmp/fd.onnx" --output-format npy
check npy_bad_format 2 "--output-format expects raw or npy" -- "$kiln" run "$tmp/fd.onnx" --output-format csv --output-dir "$tmp/o"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
