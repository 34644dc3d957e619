# bench/common.sh - sourced by the bench scripts (bench/models.sh,
# bench/runtime.sh): their common command line and the kiln binary they time.
#
#   bench_options DEFAULT_RUNS "$@"   sets runs (-n N, else DEFAULT_RUNS) and
#                                     filter (the first other argument); -h
#                                     prints the calling script's header
#   bench_kiln NAME                   sets kiln: KILN_BIN, else
#                                     build-release/bin/kiln, else
#                                     build/bin/kiln; exits naming NAME when
#                                     none is there, warns when not Release
#   bench_pick_cases REF              sets the associative array pick:
#                                     model -> its one reference case under
#                                     REF (the @text case when there is one),
#                                     the cases matching $filter only
#   bench_case_inputs DIR             sets the array in: --input NAME=FILE
#                                     for every input of case DIR
# They need src (the source tree) set by the caller.

bench_options() {
    runs=$1; shift
    while [ $# -gt 0 ]; do
        case "$1" in
            -n) runs=$2; shift 2 ;;
            -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
            *) break ;;
        esac
    done
    filter="${1:-}"
}

bench_kiln() {
    kiln="${KILN_BIN:-}"
    if [ -z "$kiln" ]; then
        if [ -x "$src/build-release/bin/kiln" ]; then kiln="$src/build-release/bin/kiln"; else kiln="$src/build/bin/kiln"; fi
    fi
    [ -x "$kiln" ] || { echo "$1: no kiln binary ($kiln); make bench or set KILN_BIN" >&2; exit 1; }
    case "$kiln" in *build-release*) ;; *) echo "note: $kiln may not be a Release build: figures are not representative" ;; esac
}

bench_pick_cases() {
    declare -gA pick=()
    local d c m
    for d in "$1"/*/; do
        d=${d%/}; c=$(basename "$d"); m=${c%@*}
        [ -n "$filter" ] && ! [[ "$c" =~ $filter ]] && continue
        if [[ "$c" == *@text ]] || [ -z "${pick[$m]:-}" ]; then pick[$m]=$c; fi
    done
}

bench_case_inputs() {
    in=()
    local inp name
    for inp in "$1"/input.*.bin; do
        name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$inp.json")
        in+=(--input "$name=$inp")
    done
}
