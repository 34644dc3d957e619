# outputs.sh - sourced by the end-to-end scripts that compare two `kiln run
# --output-dir` directories (a fused run against an unfused one, one kernel
# backend against another).
#
#   same_outputs DIR_A DIR_B [ATOL RTOL]
#                 0 when both hold the same output.N.bin files and every value
#                 of A is within ATOL + RTOL * |B| of B's (default 1e-4, 1e-4),
#                 through tools/compare_outputs.py (B taken as the reference);
#                 else 1, with compare_outputs.py's line on stdout.
#
# Needs $src (the source tree).
same_outputs() {
    local a=$1 b=$2 atol=${3:-1e-4} rtol=${4:-1e-4}
    local fa fb
    fa=$(cd "$a" 2>/dev/null && ls output.*.bin 2>/dev/null)
    fb=$(cd "$b" 2>/dev/null && ls output.*.bin 2>/dev/null)
    if [ -z "$fa" ] || [ "$fa" != "$fb" ]; then
        echo "outputs differ: [$fa] in $a, [$fb] in $b"
        return 1
    fi
    python3 "$src/tools/compare_outputs.py" "$b" "$a" --atol "$atol" --rtol "$rtol" \
        --no-semantic --case "$(basename "$a")" >/dev/null ||
        python3 "$src/tools/compare_outputs.py" "$b" "$a" --atol "$atol" --rtol "$rtol" \
            --no-semantic --case "$(basename "$a")"
}
