#!/usr/bin/env bash
# placed_lowering.sh - PlacedLowering end to end (docs/memory_planning.md,
# "Copies between memory types"): tests/data/placed_lowering/copies.json has
# one edge of each row of the table (host -> device, device -> host twice,
# device -> P2P, P2P -> host).
#  1. `kiln compile --verify-each`: the copies, SyncStreams and the FreeMemory
#     are there, wired as the table says (control edges included), on engine
#     rts, and the memory plan has the HBM, HOST and P2P arenas;
#  2. `kiln run` on the sequential and the multistream runtimes gives the
#     same bytes as the graph without the memory-type attributes (no copy);
#  3. without the pass the copies are absent (the test can fail).
set -u
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
kiln="${KILN_BIN:-$src/build/bin/kiln}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
g="$src/tests/data/placed_lowering/copies.json"

# ---- 1. the lowered graph ------------------------------------------------------
if "$kiln" compile "$g" -o "$tmp/c.json" --verify-each --report "$tmp/c.rep" 2>"$tmp/err"; then
    python3 - "$tmp/c.json" "$tmp/c.rep" <<'PY' && ok || bad "the lowered graph (see above)"
import json, sys
g = json.load(open(sys.argv[1]))
nodes = {n["name"]: n for n in g["nodes"]}
def ins(n): return [i.split(":")[0] for i in nodes[n].get("inputs", [])]
def ctrl(n): return sorted(nodes[n].get("control_inputs", []))
def of_type(t): return sorted(n for n, v in nodes.items() if v["type"] == t)
assert of_type("CopyH2D") == ["h_0_CopyH2D"], of_type("CopyH2D")
assert ins("h_0_CopyH2D") == ["h"] and ins("a") == ["h_0_CopyH2D"]
assert of_type("CopyD2H") == ["b_0_CopyD2H", "d_0_CopyD2H"], of_type("CopyD2H")
# device -> host: SyncStream after the producer, before the copy; one copy for c and c2
assert ctrl("b_0_SyncStream") == ["b"] and ctrl("b_0_CopyD2H") == ["b_0_SyncStream"]
assert ins("c") == ["b_0_CopyD2H"] and ins("c2") == ["b_0_CopyD2H"]
assert of_type("FreeMemory") == ["b_0_FreeMemory"], of_type("FreeMemory")
assert ins("b_0_FreeMemory") == ["b_0_CopyD2H"] and ctrl("b_0_FreeMemory") == ["c", "c2"]
# P2P -> host: SyncStream + CopyD2H, no FreeMemory
assert ctrl("d_0_SyncStream") == ["d"] and ctrl("d_0_CopyD2H") == ["d_0_SyncStream"]
assert ins("e") == ["d_0_CopyD2H"]
# device -> P2P: a CopyD2D feeds d (through the isolation of its P2P input)
d2d = of_type("CopyD2D")
assert len(d2d) == 1, d2d
src = ins("d")[0]
assert src == d2d[0] or ins(src)[0] == d2d[0], (src, d2d)
# the model output b stays where it is: NetOutput reads b itself
assert ins("out") == ["u", "b"], ins("out")
for n in of_type("CopyH2D") + of_type("CopyD2H") + d2d + of_type("SyncStream") + of_type("FreeMemory"):
    assert nodes[n].get("engine", nodes[n].get("attrs", {}).get("_kiln_engine")) == "rts", n
mp = json.load(open(sys.argv[2]))["memory_plan"]
assert {"HBM", "HOST", "P2P"} <= set(mp), mp.keys()
PY
else
    bad "compile: $(cat "$tmp/err")"
fi

# ---- 2. the same outputs with and without the copies -----------------------------
python3 - "$g" "$tmp/plain.json" "$tmp/x.bin" <<'PY'
import json, struct, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    for k in ("_input_memory_type", "_output_memory_type"):
        n.get("attrs", {}).pop(k, None)
json.dump(g, open(sys.argv[2], "w"))
open(sys.argv[3], "wb").write(struct.pack("<6f", -3, -1.5, -0.25, 0.5, 1, 2))
json.dump({"dims": [2, 3], "dtype": "float32"}, open(sys.argv[3] + ".json", "w"))
PY
"$kiln" run "$tmp/plain.json" --input "$tmp/x.bin" --output-dir "$tmp/ref" 2>"$tmp/err" ||
    bad "run without copies: $(cat "$tmp/err")"
for rt in sequential multistream; do
    if "$kiln" run "$g" --runtime $rt --input "$tmp/x.bin" --output-dir "$tmp/$rt" --repeat 20 \
            2>"$tmp/err"; then
        if cmp -s "$tmp/ref/output.0.bin" "$tmp/$rt/output.0.bin" &&
           cmp -s "$tmp/ref/output.1.bin" "$tmp/$rt/output.1.bin"; then ok
        else bad "$rt: outputs differ from the graph without copies"; fi
    else
        bad "run on $rt: $(cat "$tmp/err")"
    fi
done

# ---- 3. the pass is what inserts them --------------------------------------------
"$kiln" compile "$g" -o "$tmp/n.json" --disable-pass PlacedLowering 2>/dev/null
if python3 -c 'import json,sys; sys.exit(any(n["type"].startswith("Copy") for n in json.load(open(sys.argv[1]))["nodes"]))' "$tmp/n.json"; then ok
else bad "copies without PlacedLowering"; fi

echo "placed_lowering: $pass passed, $fail failed"
[ $fail -eq 0 ]
