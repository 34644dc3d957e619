#!/usr/bin/env bash
# GE's memory planners through kiln memplan (docs/memory_planning.md "GE's
# planners"): on MiniMalloc A (committed in bench/data/memplan) ge_hybrid keeps
# the smaller of ge_binary_block and ge_max_block; -o plans pass an independent
# overlap check; --planner-opt memory_priority / disable_reuse; an unknown option
# and a capacity below the plan fail naming them.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
mm="$src/bench/data/memplan/minimalloc/A.1048576.csv"
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
# the peak of a plan: id,offset CSV against the trace; overlapping live buffers fail
verify() { # trace plan
    python3 - "$@" <<'PY'
import sys
b = {}
for ln in open(sys.argv[1]):
    f = ln.strip().split(',')
    if f[0] == 'id' or not ln.strip(): continue
    b[f[0]] = (int(f[1]), int(f[2]), int(f[3]))
off = {}
for ln in open(sys.argv[2]).read().split('\n')[1:]:
    if ln: i, o = ln.split(','); off[i] = int(o)
assert set(off) == set(b)
items = sorted(b, key=lambda i: b[i][0])
for x, i in enumerate(items):
    assert off[i] >= 0 and off[i] % 512 == 0, (i, off[i])
    for j in items[x+1:]:
        if b[j][0] >= b[i][1]: break
        assert off[i] + b[i][2] <= off[j] or off[j] + b[j][2] <= off[i], ("overlap", i, j)
print(max(off[i] + b[i][2] for i in b))
PY
}
peak_of() { sed -n 's/^peak  *//p' "$1"; }
declare -A peak
for p in ge_binary_block ge_max_block ge_hybrid; do
    if "$kiln" memplan "$mm" --planner "$p" --alignment 512 -o "$tmp/$p.csv" >"$tmp/$p.out" 2>&1; then
        peak[$p]=$(peak_of "$tmp/$p.out")
        v=$(verify "$mm" "$tmp/$p.csv") && [ "$v" -le "${peak[$p]}" ] && ok || bad "$p plan check ($v)"
    else bad "$p: $(cat "$tmp/$p.out")"; fi
done
# GE_SEMANTICS_BUILD 4.1: the hybrid keeps the smaller total, binary-block on ties
b=${peak[ge_binary_block]:-0} m=${peak[ge_max_block]:-0} h=${peak[ge_hybrid]:-0}
want=$(( b <= m ? b : m ))
[ "$h" = "$want" ] && [ "$h" -gt 0 ] && ok || bad "hybrid $h, binary $b, max $m"
cmp -s "$tmp/ge_hybrid.csv" "$tmp/ge_binary_block.csv" && ok || bad "hybrid plan is not binary-block's"
# options
"$kiln" memplan "$mm" --planner ge_hybrid --alignment 512 --planner-opt memory_priority=true \
    -o "$tmp/mp.csv" >"$tmp/mp.out" 2>&1 && verify "$mm" "$tmp/mp.csv" >/dev/null && ok ||
    bad "memory_priority: $(cat "$tmp/mp.out")"
"$kiln" memplan "$mm" --planner ge_binary_block --planner-opt disable_reuse=true \
    >"$tmp/nr.out" 2>&1 || bad "disable_reuse: $(cat "$tmp/nr.out")"
sum=$(awk -F, 'NR>1{s+=int(($4+511)/512)*512}END{print s}' "$mm")
[ "$(peak_of "$tmp/nr.out")" = "$sum" ] && ok || bad "disable_reuse peak $(peak_of "$tmp/nr.out") != $sum"
"$kiln" memplan "$mm" --planner ge_max_block --planner-opt memory_priority=true >"$tmp/e1.out" 2>&1
[ $? = 1 ] && grep -q "memory_priority" "$tmp/e1.out" && ok || bad "unknown option: $(cat "$tmp/e1.out")"
"$kiln" memplan "$mm" --planner ge_hybrid --capacity 1048576 -o "$tmp/cap.csv" >"$tmp/e2.out" 2>&1
[ $? = 1 ] && grep -q "ge_hybrid" "$tmp/e2.out" && [ ! -e "$tmp/cap.csv" ] && ok ||
    bad "capacity: $(cat "$tmp/e2.out")"
echo "memplan_ge: $pass passed, $fail failed"
[ "$fail" = 0 ]
