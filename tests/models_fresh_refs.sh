#!/usr/bin/env bash
# models_fresh_refs.sh - the path a new user takes (docs/testing_models.md):
# no pre-made reference cases next to the source tree, ONNX Runtime's
# references generated into a fresh cache, and the real-model tests run on
# them.  ctest models_fresh_refs, registered only when KILN_TEST_FRESH_REFS is
# ON (`make test` turns it on in one of its three builds).
#
#  1. The tool refuses what it must refuse: an input whose generator does not
#     give the recorded SHA-256 (a seed off by one), and, with no
#     onnxruntime-node installed and the npm registry unreachable, exit 3
#     ("cannot be made here"), which is the only case the model tests skip.
#  2. tools/gen-model-refs.sh with KILN_IGNORE_SHARED=1 and an empty
#     KILN_REF_CACHE regenerates every case of tests/data/models_ref/cases.json
#     (the onnxruntime-node install in its own cache may be reused): every case
#     directory has the layout the tests read.
#  3. When pre-made cases exist next to the source tree, the generated ones
#     agree with them: inputs bit for bit, outputs within atol 1e-5 rtol 1e-5.
#  4. models_ref.sh, infer_shapes.sh and run.sh on the generated cases, with
#     KILN_IGNORE_SHARED=1: they must pass, not skip.
#
# Environment: as tests/CMakeLists.txt sets it (KILN_SOURCE_DIR, KILN_BUILD_DIR,
# KILN_BIN, ...).  Exit 0 pass, 1 fail, 77 skip (node or npm missing, npm
# registry unreachable).
set -uo pipefail
src="${KILN_SOURCE_DIR:?}"; build="${KILN_BUILD_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fresh="$build/fresh-model-refs"
cases="$src/tests/data/models_ref/cases.json"
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
skip() {
    echo "======================================================================"
    echo "SKIPPED: models_fresh_refs: $*"
    echo "======================================================================"
    exit 77
}
export KILN_IGNORE_SHARED=1
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>"$tmp/fetch.err" | tail -1)
rc=$?
if [ $rc -eq 3 ]; then skip "the models cannot be fetched: $(tail -1 "$tmp/fetch.err")"; fi
if [ $rc -ne 0 ] || [ ! -d "$models" ]; then
    echo "FAIL models: tools/fetch-models.sh exit $rc:"; cat "$tmp/fetch.err"; exit 1
fi

# ---- 1. what the tool refuses -----------------------------------------------------------
python3 - "$cases" "$tmp/bad_cases.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["cases"] = [c for c in spec["cases"] if c["case"] == "silero_vad_v5"]
spec["cases"][0]["inputs"][0]["generator"]["seed"] += 1
json.dump(spec, open(sys.argv[2], "w"))
PY
python3 "$src/tools/gen_model_refs.py" "$tmp/bad_cases.json" "$models" "$tmp/bad" --inputs-only \
    >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "silero_vad_v5: input 0 (input): generated data has SHA-256" "$tmp/err"; then ok
else bad "a wrong seed: gen_model_refs.py exit $rc (want 1 naming the input and its SHA-256): $(cat "$tmp/err")"; fi

KILN_REF_CACHE="$tmp/nocache" KILN_ORT_CACHE="$tmp/noort" npm_config_registry=http://127.0.0.1:9/ \
    bash "$src/tools/gen-model-refs.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 3 ] && grep -q "unreachable" "$tmp/err" && ! compgen -G "$tmp/nocache/ref*" >/dev/null; then ok
elif ! command -v npm >/dev/null 2>&1 && [ $rc -eq 3 ]; then ok
else bad "unreachable registry: gen-model-refs.sh exit $rc (want 3): $(cat "$tmp/err")"; fi

# ---- 2. regenerate every case into a fresh cache -------------------------------------------
rm -rf "$fresh"
export KILN_REF_CACHE="$fresh"
t0=$(now)
refs=$(bash "$src/tools/gen-model-refs.sh" 2>"$tmp/gen.err" | tail -1)
rc=$?
sed 's/^/    /' "$tmp/gen.err"
[ $rc -eq 3 ] && skip "ONNX Runtime for Node cannot be had here: $(tail -1 "$tmp/gen.err")"
case "$refs" in "$(cd "$fresh" 2>/dev/null && pwd)"/ref-????????????????) okdir=1 ;; *) okdir=0 ;; esac
if [ $rc -ne 0 ] || [ $okdir = 0 ] || [ ! -f "$refs/stamp" ]; then
    echo "FAIL gen-model-refs.sh exit $rc, printed '$refs' (want $fresh/ref-KEY holding a stamp)"; exit 1
fi
# a second run finds the same set, and a forced one replaces it in place
again=$(bash "$src/tools/gen-model-refs.sh" 2>/dev/null | tail -1)
[ "$again" = "$refs" ] && ok || bad "a second gen-model-refs.sh printed '$again', not '$refs'"
echo "models_fresh_refs: every reference case generated in $(since "$t0") s into $refs"
if python3 - "$cases" "$refs" >"$tmp/layout" <<'PY'
import json, os, sys
spec = json.load(open(sys.argv[1]))
refs = sys.argv[2]
errs = []
want = sorted(c["case"] for c in spec["cases"])
have = sorted(d for d in os.listdir(refs) if os.path.isdir(os.path.join(refs, d)))
if have != want:
    errs.append("case directories %s, want %s" % (have, want))
for c in spec["cases"]:
    d = os.path.join(refs, c["case"])
    files = set(os.listdir(d)) if os.path.isdir(d) else set()
    need = {"manifest.json"}
    for role, ts in (("input", c["inputs"]), ("output", c["outputs"])):
        for i, t in enumerate(ts):
            need |= {"%s.%d.bin" % (role, i), "%s.%d.bin.json" % (role, i)}
            if os.path.isfile(os.path.join(d, "%s.%d.bin.json" % (role, i))):
                side = json.load(open(os.path.join(d, "%s.%d.bin.json" % (role, i))))
                if (side.get("name"), side.get("dtype"), side.get("dims")) != (t["name"], t["dtype"], t["dims"]):
                    errs.append("%s: %s.%d sidecar %s" % (c["case"], role, i, side))
    if files != need:
        errs.append("%s: files %s, want %s" % (c["case"], sorted(files), sorted(need)))
        continue
    m = json.load(open(os.path.join(d, "manifest.json")))
    if m.get("model_file") != "models/" + c["model_file"] or m.get("semantic_check") != c["semantic_check"]:
        errs.append("%s: manifest model_file %r semantic_check %r" % (c["case"], m.get("model_file"), m.get("semantic_check")))
print("\n".join(errs) if errs else "%d cases, layout as the tests read it" % len(want))
sys.exit(1 if errs else 0)
PY
then ok; echo "models_fresh_refs: $(cat "$tmp/layout")"
else bad "generated cases:"; sed 's/^/    /' "$tmp/layout"; fi

# ---- 3. against the pre-made cases, when they exist -------------------------------------------
premade="$src/../shared/models/ref"
if [ -d "$premade" ]; then
    n=0
    for d in "$refs"/*/; do
        c=$(basename "$d")
        [ -d "$premade/$c" ] || { bad "$c: not among the pre-made cases"; continue; }
        for f in "$d"input.*.bin; do
            cmp -s "$f" "$premade/$c/$(basename "$f")" || bad "$c: $(basename "$f") differs from the pre-made one"
        done
        if line=$(python3 "$src/tools/compare_outputs.py" "$premade/$c" "$d" --case "$c" \
                --atol 1e-5 --rtol 1e-5 --no-semantic); then n=$((n+1))
        else bad "$c vs the pre-made outputs: $line"; fi
        echo "    vs pre-made: $line"
    done
    [ "$n" -eq "$(ls -d "$premade"/*/ | wc -l)" ] && ok || bad "only $n cases agree with the pre-made ones"
else
    echo "models_fresh_refs: no pre-made cases next to the source tree; not compared"
fi

# ---- 4. the model tests on the generated cases ----------------------------------------------------
for t in models_ref infer_shapes run; do
    t0=$(now)
    bash "$src/tests/e2e/$t.sh" >"$tmp/$t.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q "SKIPPED" "$tmp/$t.log" &&
            grep -qF "reference cases: $refs" "$tmp/$t.log"; then
        ok; echo "models_fresh_refs: $t.sh passed on the generated cases ($(since "$t0") s)"
    else
        bad "$t.sh on the generated cases: exit $rc"; sed 's/^/    /' "$tmp/$t.log" | tail -40
    fi
done

echo "models_fresh_refs: $pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
rm -rf "$fresh"
exit 0
