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

# _model_cases_tool VAR TOOL WHAT: run tools/TOOL, its messages indented on
# stdout, and set VAR to the directory it prints last; else set
# $model_cases_why ("WHAT are not available: <its messages>") and return 77
# when the tool says it cannot work here (exit 3), 1 otherwise.
_model_cases_tool() {
    local var=$1 tool=$2 what=$3 out rc dir
    out=$(KILN_SOURCE_DIR="$src" bash "$src/tools/$tool" 2>"$tmp/model_cases.err"); rc=$?
    sed 's/^/    /' "$tmp/model_cases.err"
    dir=$(tail -1 <<<"$out")
    printf -v "$var" '%s' "$dir"
    if [ $rc -ne 0 ] || [ ! -d "$dir" ]; then
        model_cases_why="$what are not available: $(sed 's/^[a-z-]*\.sh: //' "$tmp/model_cases.err" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }')"
        [ $rc -eq 3 ] && return 77
        return 1
    fi
    return 0
}

model_cases_locate() {
    models=""; refs=""; model_cases_why=""
    _model_cases_tool models fetch-models.sh "the models" || return
    _model_cases_tool refs gen-model-refs.sh "ONNX Runtime's reference cases" || return
    echo "models: $models; reference cases: $refs"
    return 0
}
