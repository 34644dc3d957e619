#!/usr/bin/env bash
# ms_matrix.sh - the multistream runtime against ONNX Runtime on the real
# models for 1, 2 and 4 streams (--max-streams) and every memory planner:
# the kiln planner and GE's ge_hybrid at each stream count, ge_binary_block
# and ge_max_block at 4.  Each configuration runs tests/e2e/models_ref.sh on
# five reference cases that between them hold a transformer (rec@text), a
# MobileNet (cls@text), nested If branches (silero_vad_v5, hey_jarvis) and a
# CNN (embedding_model); the PP-OCRv4 det cases (640x640, slow in the
# sanitizer build) run in e2e_multistream with the defaults.  A wrong memory
# plan, a lost event or an unsafe reuse shows as a wrong output.
# Then the sequential runtime on the same cases and det@text.
# Exits 77 (skipped) only when models_ref.sh cannot have the models.
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cases="rec_infer@text|cls_infer@text|silero_vad_v5$|hey_jarvis|embedding"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
configs=("1 kiln" "2 kiln" "4 kiln" "1 ge_hybrid" "2 ge_hybrid" "4 ge_hybrid"
         "4 ge_binary_block" "4 ge_max_block")
for c in "${configs[@]}"; do
    read -r n planner <<<"$c"
    KILN_RUN_ARGS="--option kiln.runtime=multistream --max-streams $n --option kiln.memory_planner=$planner" \
        KILN_SLOW_TESTS=0 bash "$src/tests/e2e/models_ref.sh" "$cases" >"$tmp/log" 2>&1
    rc=$?
    [ $rc -eq 77 ] && { cat "$tmp/log"; exit 77; }
    summary=$(grep -E "^models_ref: [0-9]+ passed" "$tmp/log" | tail -1)
    if [ $rc -eq 0 ] && [ "$(grep -c '^PASS' "$tmp/log")" -eq 5 ]; then
        pass=$((pass + 1)); echo "ok   streams<=$n planner=$planner: $summary"
    else
        fail=$((fail + 1)); echo "FAIL streams<=$n planner=$planner: $summary"
        grep -E "^FAIL|error" "$tmp/log" | head -5 | sed 's/^/     /'
    fi
done
# the sequential runtime (kiln run's fallback for dynamic shapes, and
# --runtime sequential) on the same cases and det@text: a buffer per tensor,
# every kernel's shapes as the graph gives them (channels-last regions, the
# one-channel TransData of det's output included)
KILN_RUN_ARGS="--runtime sequential" KILN_SLOW_TESTS=1 \
    bash "$src/tests/e2e/models_ref.sh" "$cases|det_infer@text" >"$tmp/log" 2>&1
rc=$?
summary=$(grep -E "^models_ref: [0-9]+ passed" "$tmp/log" | tail -1)
if [ $rc -eq 0 ] && [ "$(grep -c '^PASS' "$tmp/log")" -eq 6 ]; then
    pass=$((pass + 1)); echo "ok   sequential runtime: $summary"
else
    fail=$((fail + 1)); echo "FAIL sequential runtime: $summary"
    grep -E "^FAIL|error" "$tmp/log" | head -5 | sed 's/^/     /'
fi
echo "ms_matrix: $pass passed, $fail failed"
[ $fail -eq 0 ]
