#!/usr/bin/env bash
# End-to-end test of Case execution (kiln_seq_core's seq_case.c, docs/run.md
# "Case") and of the runtime graph build of If/Case at load (seq_lower.c,
# docs/control_flow_lowering.md "Running it"), on both runtimes:
#  1. tests/data/run/case.json, Case(idx) over x: branch_0 Relu, branch_1 Neg,
#     branch_2 returns x itself (the lowered form then has a PointFromInputs:
#     the branches' sources differ); idx 0, 1, 2 and out of range (7, -1:
#     the last branch), lowered (default) and as compiled
#     (--option kiln.lower_control_flow=false), exact values;
#  2. tests/data/run/if.json, both conditions, lowered and not: the same bytes
#     (that the lowered form is what runs is counted by test_ms_differential);
#  3. an index of a float dtype is an error naming the Case node.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
data="$src/tests/data/run"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

cat > "$tmp/t.py" <<'PY'
import json, struct, sys
FMT = {"float32": "f", "int32": "i", "bool": "?"}
cmd = sys.argv[1]
if cmd == "raw":      # raw PATH DTYPE DIMS V...
    path, dt, dims, vals = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    conv = float if dt == "float32" else (lambda v: bool(int(v))) if dt == "bool" else int
    open(path, "wb").write(struct.pack("<%d%s" % (len(vals), FMT[dt]), *[conv(v) for v in vals]))
    json.dump({"dims": [int(d) for d in dims.split(",") if d], "dtype": dt}, open(path + ".json", "w"))
elif cmd == "check":  # check FILE V...   float32 values, exact
    got = struct.unpack("<%df" % (len(sys.argv) - 3), open(sys.argv[2], "rb").read())
    want = tuple(float(v) for v in sys.argv[3:])
    if got != want:
        print("%r != %r" % (got, want)); sys.exit(1)
PY
t() { python3 "$tmp/t.py" "$@"; }

t raw "$tmp/x.bin" float32 4 -1 2 -3 4
for i in 0 1 2 7 -1; do t raw "$tmp/i$i.bin" int32 "" "$i"; done
declare -A want=([0]="0 2 0 4" [1]="1 -2 3 -4" [2]="-1 2 -3 4" [7]="-1 2 -3 4" [-1]="-1 2 -3 4")

# 1. Case on both runtimes, lowered and as compiled
for rt in sequential multistream; do
    for low in true false; do
        for i in 0 1 2 7 -1; do
            o="$tmp/c_${rt}_${low}_$i"
            if "$kiln" run "$data/case.json" --runtime "$rt" --option kiln.lower_control_flow=$low \
                    --input "$tmp/i$i.bin" --input "$tmp/x.bin" --output-dir "$o" -q 2>"$tmp/err"; then
                if r=$(t check "$o/output.0.bin" ${want[$i]}); then ok
                else bad "case idx $i ($rt, lower $low): $r"; fi
            else
                bad "case idx $i ($rt, lower $low): exit $?: $(cat "$tmp/err")"
            fi
        done
    done
done

# 2. If: lowered and as compiled give the same bytes (if.json's output has a
#    dynamic shape: the sequential runtime only)
t raw "$tmp/c1.bin" bool "" 1
t raw "$tmp/c0.bin" bool "" 0
for rt in sequential; do
    for c in c1 c0; do
        for low in true false; do
            "$kiln" run "$data/if.json" --runtime "$rt" --option kiln.lower_control_flow=$low \
                --input "$tmp/$c.bin" --input "$tmp/x.bin" --output-dir "$tmp/if_${low}" -q \
                2>"$tmp/err" || bad "if ($rt, $c, lower $low): $(cat "$tmp/err")"
        done
        if cmp -s "$tmp/if_true/output.0.bin" "$tmp/if_false/output.0.bin" &&
           cmp -s "$tmp/if_true/output.1.bin" "$tmp/if_false/output.1.bin"; then ok
        else bad "if ($rt, $c): lowered and as compiled differ"; fi
    done
done

# 3. a float index is refused, naming the node
t raw "$tmp/f.bin" float32 "" 1
sed 's/"dtype": "int32"/"dtype": "float32"/' "$data/case.json" > "$tmp/fcase.json"
if "$kiln" run "$tmp/fcase.json" --input "$tmp/f.bin" --input "$tmp/x.bin" -q 2>"$tmp/err"; then
    bad "a float32 Case index ran"
elif grep -q "Case node sw: the branch index has dtype float32, not an integer" "$tmp/err"; then ok
else bad "float index: $(cat "$tmp/err")"; fi

echo "run_case: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
