# model_cases.sh - sourced by the real-model tests (models_ref.sh,
# infer_shapes.sh, run.sh; docs/testing_models.md): find the twelve models and
# ONNX Runtime's reference cases.
#
#   model_cases_locate     sets $models (tools/fetch-models.sh) and $refs
#                          (tools/gen-model-refs.sh: the pre-made cases, else
#                          the cache, generated on demand) and returns 0;
#                          else sets $model_cases_why and returns 77 when they
#                          cannot be had on this machine (node or npm missing,
#                          npm registry unreachable: the test may skip) or 1
#                          for any other reason (the test must fail).
#
# Needs $src (the source tree) and $tmp (a scratch directory).  What the tools
# print while fetching or generating goes to stdout, indented.

model_cases_locate() {
    local out rc
    models=""; refs=""; model_cases_why=""
    out=$(KILN_SOURCE_DIR="$src" bash "$src/tools/fetch-models.sh" 2>"$tmp/model_cases.err"); rc=$?
    sed 's/^/    /' "$tmp/model_cases.err"
    models=$(tail -1 <<<"$out")
    if [ $rc -ne 0 ] || [ ! -d "$models" ]; then
        model_cases_why="the models are not available: $(sed 's/^[a-z-]*\.sh: //' "$tmp/model_cases.err" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }')"
        [ $rc -eq 3 ] && return 77
        return 1
    fi
    out=$(KILN_SOURCE_DIR="$src" bash "$src/tools/gen-model-refs.sh" 2>"$tmp/model_cases.err"); rc=$?
    sed 's/^/    /' "$tmp/model_cases.err"
    refs=$(tail -1 <<<"$out")
    if [ $rc -ne 0 ] || [ ! -d "$refs" ]; then
        model_cases_why="ONNX Runtime's reference cases are not available: $(sed 's/^[a-z-]*\.sh: //' "$tmp/model_cases.err" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }')"
        [ $rc -eq 3 ] && return 77
        return 1
    fi
    echo "models: $models; reference cases: $refs"
    return 0
}
