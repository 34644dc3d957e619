#!/usr/bin/env bash
# kiln memplan (docs/memory_planning.md, docs/cli.md): a good trace plans,
# prints peak, LOAD, ratio and time, and -o writes id,offset CSV whose plan is
# checked here again (no two live buffers overlap); --alignment, --capacity and
# --planner-opt; a missing planner; malformed CSV is exit 1 naming FILE:LINE
# with nothing written; usage errors are exit 2.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
check() { # name expected_rc fragment -- command...
    local name=$1 want=$2 frag=$3; shift 4
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err.txt" "$tmp/out.txt"; }; then
        echo "FAIL $name: rc=$rc (want $want), want '$frag':"; cat "$tmp/out.txt" "$tmp/err.txt" | head -10
        fail=$((fail+1))
    else pass=$((pass+1)); fi
}
# plan.csv (id,offset) against trace.csv: every pair live together is apart in memory
verify() { # trace plan alignment
    python3 - "$@" <<'PY'
import sys
trace, plan, align = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = {}
for ln in open(trace):
    f = ln.strip().split(',')
    if f[0] == 'id' or not ln.strip(): continue
    b[f[0]] = (int(f[1]), int(f[2]), int(f[3]))
off = {}
lines = open(plan).read().split('\n')
assert lines[0] == 'id,offset', lines[0]
for ln in lines[1:]:
    if ln: i, o = ln.split(','); off[i] = int(o)
assert set(off) == set(b), "plan and trace name different buffers"
items = sorted(b, key=lambda i: b[i][0])
for x, i in enumerate(items):
    assert off[i] >= 0 and off[i] % align == 0, (i, off[i])
    for j in items[x+1:]:
        if b[j][0] >= b[i][1]: break
        assert off[i] + b[i][2] <= off[j] or off[j] + b[j][2] <= off[i], ("overlap", i, j)
print(max(off[i] + b[i][2] for i in b))
PY
}
cat >"$tmp/t.csv" <<'CSV'
id,lower,upper,size
a,0,3,4
b,3,9,4
c,0,9,4
d,9,21,4
e,0,21,4
CSV
check good 0 "peak/LOAD  1.0000" -- "$kiln" memplan "$tmp/t.csv" -o "$tmp/plan.csv"
grep -q "^LOAD       12$" "$tmp/out.txt" || { echo "FAIL good: LOAD 12 expected"; cat "$tmp/out.txt"; fail=$((fail+1)); }
grep -q "^peak       12$" "$tmp/out.txt" || { echo "FAIL good: peak 12 expected"; fail=$((fail+1)); }
grep -q "^buffers    5$" "$tmp/out.txt" || { echo "FAIL good: 5 buffers"; fail=$((fail+1)); }
grep -q "^time .* ms$" "$tmp/out.txt" || { echo "FAIL good: time line"; fail=$((fail+1)); }
peak=$(verify "$tmp/t.csv" "$tmp/plan.csv" 1) && [ "$peak" = 12 ] && pass=$((pass+1)) || { echo "FAIL plan check: $peak"; fail=$((fail+1)); }
# no header, a committed MiniMalloc instance, alignment
tail -n +2 "$tmp/t.csv" >"$tmp/nohdr.csv"
check no_header 0 "peak/LOAD" -- "$kiln" memplan "$tmp/nohdr.csv"
mm="$src/bench/data/memplan/minimalloc/A.1048576.csv"
check minimalloc 0 "buffers    154" -- "$kiln" memplan "$mm" --alignment 512 -o "$tmp/a.csv"
verify "$mm" "$tmp/a.csv" 512 >/dev/null && pass=$((pass+1)) || { echo "FAIL A aligned plan"; fail=$((fail+1)); }
check planner_opt 0 "peak" -- "$kiln" memplan "$mm" --planner-opt effort=0 -o "$tmp/a0.csv"
verify "$mm" "$tmp/a0.csv" 1 >/dev/null && pass=$((pass+1)) || { echo "FAIL effort=0 plan"; fail=$((fail+1)); }
# random traces, seeded, checked
for seed in 1 2 3; do
    python3 - "$seed" >"$tmp/r$seed.csv" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
print("id,lower,upper,size")
for i in range(400):
    lo = r.randrange(300); print(f"b{i},{lo},{lo + 1 + r.randrange(r.choice([5, 300]))},{1 + r.randrange(100000)}")
PY
    check "random_$seed" 0 "peak/LOAD" -- "$kiln" memplan "$tmp/r$seed.csv" -o "$tmp/rp$seed.csv"
    verify "$tmp/r$seed.csv" "$tmp/rp$seed.csv" 1 >/dev/null && pass=$((pass+1)) || { echo "FAIL random $seed plan"; fail=$((fail+1)); }
done
# capacity below LOAD: exit 1, no output
check capacity 1 "above the capacity 11" -- "$kiln" memplan "$tmp/t.csv" --capacity 11 -o "$tmp/cap.csv"
[ ! -e "$tmp/cap.csv" ] && pass=$((pass+1)) || { echo "FAIL capacity wrote a plan"; fail=$((fail+1)); }
check no_planner 1 "no loaded plugin provides memory planner nope" -- "$kiln" memplan "$tmp/t.csv" --planner nope
check bad_planner_opt 1 "effort" -- "$kiln" memplan "$tmp/t.csv" --planner-opt effort=9
# malformed CSV: FILE:LINE and the reason, exit 1, nothing written
bad() { # name line fragment
    printf 'id,lower,upper,size\na,0,3,4\n%s\n' "$2" >"$tmp/$1.csv"
    check "$1" 1 "$tmp/$1.csv:3: $3" -- "$kiln" memplan "$tmp/$1.csv" -o "$tmp/$1.out"
    [ ! -e "$tmp/$1.out" ] && pass=$((pass+1)) || { echo "FAIL $1 wrote output"; fail=$((fail+1)); }
}
bad fields "b,0,3" "expected 4 fields"
bad fields5 "b,0,3,4,5" "expected 4 fields"
bad notint "b,zero,3,4" "lower 'zero' is not an integer"
bad empty_range "b,5,5,4" "upper 5 is not above lower 5"
bad neg_size "b,0,3,-4" "size '-4' is not a positive integer"
bad big_upper "b,0,99999999999,4" "upper '99999999999' is not an integer"
bad no_id ",0,3,4" "empty id"
check missing 1 "" -- "$kiln" memplan "$tmp/nonexistent.csv"
# usage
check no_file 2 "" -- "$kiln" memplan
check bad_align 2 "--alignment expects a power of two" -- "$kiln" memplan "$tmp/t.csv" --alignment 3
check bad_capacity 2 "--capacity expects" -- "$kiln" memplan "$tmp/t.csv" --capacity x
check help 0 "usage: kiln memplan" -- "$kiln" memplan --help
echo "memplan: $pass passed, $fail failed"
[ "$fail" = 0 ]
