#!/usr/bin/env bash
# gen-model-refs.sh - make ONNX Runtime's reference cases for the real-model
# tests available and print the directory that holds them (last line of
# stdout; one <case>/ per case).  Documented in docs/testing_models.md.
#
#   tools/gen-model-refs.sh            # print the ref dir, generating if needed
#   tools/gen-model-refs.sh --check    # exit 0 (and print it) only if available
#                                      # without generating
#   tools/gen-model-refs.sh --force    # regenerate the cache now
#
# Order: 1. $KILN_MODELS_REF_DIR if set (used as it is); 2. ../shared/models/ref
# next to the source tree (KILN_SOURCE_DIR, default this script's repo), unless
# KILN_IGNORE_SHARED=1; 3. the cache ${KILN_REF_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kiln/model-refs}/ref,
# generated when it is missing or was made from other case definitions or tools.
#
# Generating: the models from tools/fetch-models.sh; onnxruntime-node at the
# version pinned by tools/ort-node/package-lock.json, installed with
# `npm ci --ignore-scripts` into ${KILN_ORT_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kiln/ort-node}
# and reused while the lock file is unchanged; then tools/gen_model_refs.py
# renders every input of tests/data/models_ref/cases.json, checks it against the
# recorded SHA-256, runs ONNX Runtime (CPU, graph optimisations disabled, one
# thread; tools/gen_model_refs.js) and checks ORT's outputs against the cases'
# semantic checks.  Concurrent runs wait for each other (flock).
#
# Exit status: 0 available; 1 error (reason on stderr: a test must fail);
# 3 cannot be made on this machine -- node or npm not installed, the npm
# registry unreachable, or no onnxruntime-node build that loads here (reason on
# stderr: a test may skip).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${KILN_SOURCE_DIR:-$here/..}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kiln"
refcache="${KILN_REF_CACHE:-$cache_root/model-refs}"
cases="$src/tests/data/models_ref/cases.json"

say() { echo "gen-model-refs.sh: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

mode=get
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    --force) mode=force ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument '$1' (use --check, --force or nothing)"; exit 2 ;;
esac

# 1. explicit directory
if [ -n "${KILN_MODELS_REF_DIR:-}" ]; then
    [ -d "$KILN_MODELS_REF_DIR" ] || { say "KILN_MODELS_REF_DIR=$KILN_MODELS_REF_DIR is not a directory"; exit 1; }
    (cd "$KILN_MODELS_REF_DIR" && pwd); exit 0
fi
# 2. the pre-made cases next to the source tree
if [ "${KILN_IGNORE_SHARED:-0}" != 1 ] && [ -d "$src/../shared/models/ref" ] && [ "$mode" != force ]; then
    (cd "$src/../shared/models/ref" && pwd); exit 0
fi

# 3. the cache.  Its stamp names everything the cases are made from.
stamp_now() {
    (cd "$src" && sha256sum tests/data/models_ref/cases.json tools/gen_model_refs.py \
        tools/gen_model_refs.js tools/render_text.py tools/compare_outputs.py \
        tools/ort-node/package.json tools/ort-node/package-lock.json) 2>/dev/null
}
# The cases live in ref-<key>, key = a hash of the stamp: checkouts with other
# case definitions or tools (other branches, worktrees) each get their own
# directory, and a directory, once moved into place, never changes, so a test
# reading it is never disturbed by another run generating.
key_now() { stamp_now | sha256sum | cut -c1-16; }
fresh() { [ -f "$refcache/ref-$(key_now)/stamp" ]; }

if [ "$mode" = check ]; then
    fresh && { (cd "$refcache/ref-$(key_now)" && pwd); exit 0; }
    say "no up-to-date reference cases in $refcache (run tools/gen-model-refs.sh)"; exit 1
fi
[ -f "$cases" ] || { say "$cases not found"; exit 1; }
[ -n "$(stamp_now)" ] || { say "cannot read the case definitions and tools under $src"; exit 1; }

mkdir -p "$refcache" || { say "cannot create $refcache"; exit 1; }
if command -v flock >/dev/null 2>&1; then
    exec 9>>"$refcache/.lock" || { say "cannot open $refcache/.lock"; exit 1; }
    flock -w 1800 9 || { say "timed out waiting for another gen-model-refs.sh ($refcache/.lock)"; exit 1; }
fi
if [ "$mode" != force ] && fresh; then
    touch "$refcache/ref-$(key_now)" 2>/dev/null # in use: not pruned as unused
    (cd "$refcache/ref-$(key_now)" && pwd); exit 0
fi

command -v node >/dev/null 2>&1 || { say "node is not installed (Debian: apt-get install nodejs npm; tools/install-deps.sh)"; exit 3; }
command -v python3 >/dev/null 2>&1 || { say "python3 is not installed"; exit 1; }

# ---- the models -------------------------------------------------------------------
models=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" | tail -1)
rc=$?
if [ "$rc" -ne 0 ] || [ ! -d "$models" ]; then
    say "the models are not available (tools/fetch-models.sh exit $rc)"
    [ "$rc" -eq 3 ] && exit 3
    exit 1
fi

# ---- onnxruntime-node, pinned by the lock file (tools/ort-node.sh) ------------------
. "$src/tools/ort-node.sh"
ORT_NODE_WHO=gen-model-refs.sh ort_node_ensure "$src" 8
rc=$?
[ $rc -eq 0 ] || exit $rc
ortcache=$ORT_NODE_DIR

# ---- the cases ------------------------------------------------------------------------
key=$(key_now)
say "generating the reference cases into $refcache/ref-$key"
t0=$(now)
stage=$(mktemp -d "$refcache/ref.new.XXXXXX") || { say "cannot create a directory in $refcache"; exit 1; }
python3 "$src/tools/gen_model_refs.py" "$cases" "$models" "$stage" --ort "$ortcache" >&2
rc=$?
if [ $rc -ne 0 ]; then
    rm -rf "$stage"
    if [ $rc -eq 3 ]; then say "ONNX Runtime for Node does not load on this machine (see above)"; exit 3; fi
    say "generating the reference cases failed (see above)"
    exit 1
fi
stamp_now >"$stage/stamp"
if [ -d "$refcache/ref-$key" ] && diff -rq -x manifest.json "$stage" "$refcache/ref-$key" >/dev/null 2>&1; then
    # forced, and ORT gave the same tensors (manifest.json differs only in its
    # timings): the set stays as it is, tests may be reading it
    rm -rf "$stage"
else
    if [ -d "$refcache/ref-$key" ]; then
        # forced, and the outputs changed (another ORT build or CPU): the old set goes aside
        old=$(mktemp -d "$refcache/ref.old.XXXXXX") && mv "$refcache/ref-$key" "$old/" && rm -rf "$old"
    fi
    mv "$stage" "$refcache/ref-$key" || { say "cannot move $stage to $refcache/ref-$key"; exit 1; }
fi
# sets of other keys unused for a week, and the layout before keys, go
find "$refcache" -maxdepth 1 -name 'ref-*' -type d ! -name "ref-$key" -mtime +7 \
    -exec rm -rf {} + 2>/dev/null
rm -rf "$refcache/ref" "$refcache/stamp"
touch "$refcache/ref-$key"
say "reference cases generated in $(since "$t0") s"
(cd "$refcache/ref-$key" && pwd)
exit 0
