#!/usr/bin/env bash
# End-to-end tests of the multi-stream runtime (runtime "multistream",
# docs/run.md) on graphs that carry a build schedule and a memory plan
# (tests/data/multistream/*.json) with the test engine of tests/data/run:
#  1. two streams, two events, a buffer reused across streams once an event
#     orders it: exact outputs, 200 runs in one process (--repeat) give the
#     same bytes;
#  2. the same graph without the event that orders c -> d: refused at load,
#     naming the edge;
#  3. fault injection (KILN_TEST_MS_DROP_EVENT=1: the wait for event 1 is
#     dropped and its sender delayed): the run must fail or its output differ
#     (under ASan the read of the not-yet-written buffer is poisoned memory);
#  4. the real models on the default manifest: every reference case through
#     the multistream runtime equals ONNX Runtime's outputs
#     (tests/e2e/models_ref.sh with KILN_RUN_ARGS).
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; plugdir="${KILN_PLUGIN_DIR:?}"
data="$src/tests/data/multistream"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

eng="$tmp/libtp_run_engine.so"
if ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -shared -fPIC -DKILN_PLUGIN -I"$src/plugin-api" \
        "$src/tests/data/run/tp_run_engine.c" -o "$eng" 2>"$tmp/cc.err"; then
    bad "cannot build the test engine: $(cat "$tmp/cc.err")"; echo "$pass passed, $fail failed"; exit 1
fi
man="$tmp/m.json"
cat > "$man" <<JSON
{"kiln_manifest": 1, "plugins": [
  {"path": "$plugdir/libkiln_runtime_ms.so", "provides": {"runtimes": ["multistream"]}},
  {"path": "$eng", "provides": {"engines": ["runtest"]}}],
 "stages": {}}
JSON
python3 - "$tmp/x.bin" <<'PY'
import json, struct, sys
open(sys.argv[1], "wb").write(struct.pack("<6f", -3, -2, -1, 1, 2, 3))
json.dump({"dims": [2, 3], "dtype": "float32"}, open(sys.argv[1] + ".json", "w"))
PY
check() { # check DIR N V...
    python3 - "$@" <<'PY'
import struct, sys
d, n, want = sys.argv[1], sys.argv[2], [float(v) for v in sys.argv[3:]]
got = list(struct.unpack("<%df" % len(want), open("%s/output.%s.bin" % (d, n), "rb").read()))
sys.exit(0 if got == want else print("output %s: got %s, want %s" % (n, got, want)) or 1)
PY
}

# 1. two streams, events, cross-stream reuse
o="$tmp/o1"
if "$kiln" run "$data/two_streams.json" -m "$man" --input "$tmp/x.bin" --output-dir "$o" \
        -v --repeat 200 >"$tmp/out" 2>"$tmp/err"; then
    grep -q "runtime multistream" "$tmp/err" && ok || bad "two_streams: not run on multistream: $(cat "$tmp/err")"
    if r=$(check "$o" 0 -12 -8 -4 6 12 18) && r2=$(check "$o" 1 0 0 0 4 8 12); then ok
    else bad "two_streams outputs: $r $r2"; fi
else
    bad "two_streams: exit $?: $(cat "$tmp/err")"
fi

# 2. a cross-stream edge no event orders
o="$tmp/o2"
"$kiln" run "$data/missing_event.json" -m "$man" --input "$tmp/x.bin" --output-dir "$o" \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "data edge c:0 -> d:1 crosses from stream 1 to 0 with no event" "$tmp/err" \
        && [ ! -e "$o/output.0.bin" ]; then ok
else bad "missing_event: rc=$rc: $(cat "$tmp/err")"; fi

# 3. a dropped event: the check must be able to fail
o="$tmp/o3"
KILN_TEST_MS_DROP_EVENT=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$kiln" run \
    "$data/two_streams.json" -m "$man" --input "$tmp/x.bin" --output-dir "$o" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] || ! check "$o" 0 -12 -8 -4 6 12 18 >/dev/null; then ok
else bad "dropped event: the run succeeded with the right output; the fault was not seen"; fi

# 4. the real models, through the default manifest's build stage
if KILN_RUN_ARGS="--option kiln.runtime=multistream" KILN_SLOW_TESTS=${KILN_SLOW_TESTS:-0} \
        bash "$src/tests/e2e/models_ref.sh" >"$tmp/models.log" 2>&1; then ok
else
    rc=$?
    if [ $rc -eq 77 ]; then cat "$tmp/models.log"; echo "$pass passed, $fail failed"; exit 77; fi
    bad "real models on multistream: $(grep -E 'FAIL' "$tmp/models.log" | head -5)"
fi
grep -E "^(PASS|FAIL)" "$tmp/models.log" | sed 's/^/  models: /'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
