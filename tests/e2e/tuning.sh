#!/usr/bin/env bash
# Tuning builds (docs/tuning.md): for every build step and a set of
# command-line overrides, pausing and resuming gives the uninterrupted build
# byte for byte; a paused state whose manifest or plugin files changed, or
# that was edited, is refused with exit 1, a message naming the file and no
# output; options that would change the result are refused next to --resume.
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
steps="before_ub_match after_ub_match after_build"
res="$src/examples/residual_block.json"
lay="$src/tests/data/passes/HandleMemoryLayoutConflict"
export KILN_PLUGIN_PATH="$tp"

# A manifest with kiln's own passes and the test plugin: TestTuner fires at
# every build step, TestGraphPass runs in the build stage (after every pause
# point but after_build) with an option --pass-opt can change.
cat > "$tmp/tuned.json" <<JSON
{"kiln_manifest": 1, "plugins": [{"path": "libkiln_passes.so"}, {"path": "libtp_good.so"}],
 "tuners": ["TestTuner"],
 "stages": {"prepare": ["PruneGraphPass"], "optimize_original": ["IdentityRemovePass"],
            "optimize_after_subgraph": ["PruneGraphPass"], "build": ["TestGraphPass"]}}
JSON

# name | model | options
cases=(
    "plain|$res|"
    "disable|$res|--disable-pass PruneGraphPass"
    "enable|$lay/L02_data_to_netoutput.in.json|-m $src/manifests/O0.json --enable-pass HandleMemoryLayoutConflict"
    "option|$lay/L10_user_in_nopad_out_online.in.json|--option ge.buildGraphMode=offline"
    "option2|$lay/L18_hcombroadcast_unrefreshable.in.json|--option ge.featureBaseRefreshable=1 --option ge.exec.atomicCleanPolicy=1"
    "pass_opt|$res|-m $tmp/tuned.json --pass-opt TestGraphPass.count=7"
    "manifest|$res|-m $src/manifests/O0.json"
    "tuner|$res|-m $tmp/tuned.json --disable-pass IdentityRemovePass"
    "bisect|$res|-m $tmp/tuned.json --bisect-limit 3"
)
# Each override must change the uninterrupted build, or its case proves nothing.
declare -A baseline=([disable]=plain [option]=option0 [option2]=option20 [pass_opt]=tuner0 [manifest]=plain [bisect]=tuner0)
"$kiln" compile "$lay/L10_user_in_nopad_out_online.in.json" -o "$tmp/full_option0.json" 2>/dev/null
"$kiln" compile "$lay/L18_hcombroadcast_unrefreshable.in.json" -o "$tmp/full_option20.json" 2>/dev/null
"$kiln" compile "$res" -m "$tmp/tuned.json" -o "$tmp/full_tuner0.json" 2>/dev/null

for c in "${cases[@]}"; do
    IFS='|' read -r name model opts <<<"$c"
    read -r -a o <<<"$opts"
    if ! "$kiln" compile "$model" "${o[@]}" -o "$tmp/full_$name.json" 2>"$tmp/err"; then
        bad "$name: straight build failed"; cat "$tmp/err"; continue
    fi
    b=${baseline[$name]:-}
    if [ -n "$b" ] && cmp -s "$tmp/full_$b.json" "$tmp/full_$name.json"; then
        bad "$name: '$opts' does not change the build; the case tests nothing"
    fi
    for step in $steps; do
        st="$tmp/state_${name}_$step.json"
        if ! "$kiln" compile "$model" "${o[@]}" --build-mode tuning --build-step "$step" -o "$st" 2>"$tmp/err" \
           || ! grep -q "paused at build step $step" "$tmp/err"; then
            bad "$name/$step: pause"; cat "$tmp/err"; continue
        fi
        if ! "$kiln" compile --resume "$st" -o "$tmp/out.json" 2>"$tmp/err"; then
            bad "$name/$step: resume failed"; cat "$tmp/err"; continue
        fi
        if cmp -s "$tmp/full_$name.json" "$tmp/out.json"; then ok; else
            bad "$name/$step: resumed build differs from the uninterrupted one"
            diff "$tmp/full_$name.json" "$tmp/out.json" | head -8
        fi
    done
done
# The tuner ran at every build step, in the straight and in the resumed builds.
for s in $steps; do
    grep -q "\"tuned_$s\": true" "$tmp/full_tuner.json" && ok || bad "TestTuner did not run at $s"
done
grep -q '"test_graph_pass_runs": 7' "$tmp/full_pass_opt.json" && ok || bad "--pass-opt did not reach TestGraphPass"

# The state: format 2, the graph as an object, the command line and the digests.
st="$tmp/state_disable_before_ub_match.json"
python3 - "$st" <<'PY' && ok || bad "state content"
import json, sys, hashlib
d = json.load(open(sys.argv[1]))
assert d["kiln_paused_state"] == 2, d["kiln_paused_state"]
assert isinstance(d["graph"], dict) and d["graph"]["kiln_graph"] == 1
assert d["build"]["selectors"] == [{"action": "disable", "pattern": "PruneGraphPass"}], d["build"]
assert d["next_stage"] == "optimize_subgraph" and d["paused_at"] == "before_ub_match"
assert "-PruneGraphPass" in d["resolved"]["pipeline"]
for f in d["files"]["manifests"] + d["files"]["plugins"]:
    assert hashlib.sha256(open(f["path"], "rb").read()).hexdigest() == f["sha256"], f
assert any(p["path"].endswith("libkiln_passes.so") for p in d["files"]["plugins"])
PY

# Pause again at a later step of a resumed build; an earlier one is a usage error.
s1="$tmp/state_tuner_before_ub_match.json"
"$kiln" compile --resume "$s1" --build-mode tuning --build-step after_build -o "$tmp/again.json" 2>/dev/null \
    && "$kiln" compile --resume "$tmp/again.json" -o "$tmp/out.json" 2>/dev/null \
    && cmp -s "$tmp/full_tuner.json" "$tmp/out.json" && ok || bad "pause, resume, pause again, resume"
"$kiln" compile --resume "$tmp/state_tuner_after_ub_match.json" --build-mode tuning \
    --build-step before_ub_match -o "$tmp/x.json" 2>"$tmp/err"
[ $? = 2 ] && grep -q "build step before_ub_match is not after after_ub_match" "$tmp/err" && [ ! -e "$tmp/x.json" ] \
    && ok || { bad "earlier --build-step next to --resume"; cat "$tmp/err"; }

# Options that only observe are allowed next to --resume and change nothing.
st="$tmp/state_disable_after_ub_match.json"
"$kiln" compile --resume "$st" -o "$tmp/out.json" --report "$tmp/r.json" -v --verify-each --time-passes -j 1 \
    2>/dev/null && cmp -s "$tmp/full_disable.json" "$tmp/out.json" && grep -q '"kiln_report"' "$tmp/r.json" \
    && ok || bad "--resume with -v --report --verify-each --time-passes -j"
"$kiln" compile --resume "$st" -q -o "$tmp/out.json" 2>"$tmp/err" && [ ! -s "$tmp/err" ] \
    && cmp -s "$tmp/full_disable.json" "$tmp/out.json" && ok || bad "--resume -q"

# Options that would change the result are usage errors next to --resume.
for opt in "-m $src/manifests/O0.json" "--disable-pass PruneGraphPass" "--enable-pass PruneGraphPass" \
           "--pass-opt TestGraphPass.count=2" "--option ge.buildGraphMode=offline" "--tuner TestTuner" \
           "--bisect-limit 1" "$res"; do
    read -r -a o <<<"$opt"
    "$kiln" compile --resume "$st" "${o[@]}" -o "$tmp/x.json" 2>"$tmp/err"
    rc=$?
    if [ $rc = 2 ] && [ ! -e "$tmp/x.json" ] && grep -Eq "would change the result|takes no MODEL" "$tmp/err"; then ok
    else bad "--resume with $opt: rc=$rc"; cat "$tmp/err"; fi
done

# refused STATE NAME FRAGMENT...: exit 1, every fragment in the message, and an
# existing output file left as it was.
refused() {
    local state=$1 name=$2; shift 2
    echo keep > "$tmp/kept.json"
    "$kiln" compile --resume "$state" -o "$tmp/kept.json" 2>"$tmp/err"
    local rc=$? f miss=
    for f in "$@"; do grep -qF -- "$f" "$tmp/err" || miss="$miss [$f]"; done
    if [ $rc != 1 ] || [ -n "$miss" ] || [ "$(cat "$tmp/kept.json")" != keep ] \
       || ls "$tmp" | grep -q 'kept.json.tmp'; then
        bad "$name: rc=$rc, missing$miss:"; cat "$tmp/err"
    else ok; fi
}

# A changed manifest, and a changed base manifest of its extends chain.
mkdir -p "$tmp/m"
printf '{"kiln_manifest": 1, "extends": "base.json", "tuners": ["TestTuner"]}\n' > "$tmp/m/top.json"
printf '{"kiln_manifest": 1, "extends": "%s", "plugins": [{"path": "libtp_good.so"}]}\n' \
    "$tmp/tuned.json" > "$tmp/m/base.json"
"$kiln" compile "$res" -m "$tmp/m/top.json" -o "$tmp/full_m.json" 2>/dev/null
"$kiln" compile "$res" -m "$tmp/m/top.json" --build-mode tuning --build-step after_ub_match -o "$tmp/sm.json" 2>/dev/null
"$kiln" compile --resume "$tmp/sm.json" -o "$tmp/out.json" 2>/dev/null && cmp -s "$tmp/full_m.json" "$tmp/out.json" \
    && ok || bad "resume over a manifest chain"
cp "$tmp/m/base.json" "$tmp/m/base.orig"
printf '{"kiln_manifest": 1, "extends": "%s", "plugins": [{"path": "libtp_good.so"}], "disable": ["Prune"]}\n' \
    "$tmp/tuned.json" > "$tmp/m/base.json"
refused "$tmp/sm.json" changed_base_manifest "manifest $tmp/m/base.json changed since the build was paused" \
    "SHA-256 then $(sha256sum < "$tmp/m/base.orig" | cut -c1-64), now $(sha256sum < "$tmp/m/base.json" | cut -c1-64)"
cp "$tmp/m/base.orig" "$tmp/m/base.json"
echo ' ' >> "$tmp/m/top.json"
refused "$tmp/sm.json" changed_manifest "manifest $tmp/m/top.json changed since the build was paused"
rm "$tmp/m/top.json"
refused "$tmp/sm.json" removed_manifest "the paused build's manifest is gone" "$tmp/m/top.json"

# A changed plugin file: the manifest points at a copy of the test plugin.
mkdir -p "$tmp/p"; cp "$tp/libtp_good.so" "$tmp/p/"
printf '{"kiln_manifest": 1, "plugins": [{"path": "p/libtp_good.so"}], "tuners": ["TestTuner"], "stages": {"build": ["TestGraphPass"]}}\n' \
    > "$tmp/pm.json"
"$kiln" compile "$res" -m "$tmp/pm.json" --build-mode tuning --build-step before_ub_match -o "$tmp/sp.json" 2>/dev/null
"$kiln" compile --resume "$tmp/sp.json" -o "$tmp/out.json" 2>/dev/null && ok || bad "resume with a plugin copy"
printf '\0' >> "$tmp/p/libtp_good.so"
refused "$tmp/sp.json" changed_plugin "plugin $tmp/p/libtp_good.so changed since the build was paused" \
    "now $(sha256sum < "$tmp/p/libtp_good.so" | cut -c1-64)"
# The same bytes found elsewhere (another KILN_PLUGIN_PATH) are other plugins too.
mkdir -p "$tmp/pa" "$tmp/pb"; cp "$tp/libtp_good.so" "$tmp/pa/"; cp "$tp/libtp_good.so" "$tmp/pb/"
printf '{"kiln_manifest": 1, "plugins": [{"path": "libtp_good.so"}], "stages": {"build": ["TestGraphPass"]}}\n' > "$tmp/pp.json"
KILN_PLUGIN_PATH="$tmp/pa" "$kiln" compile "$res" -m "$tmp/pp.json" --build-mode tuning --build-step after_ub_match \
    -o "$tmp/spp.json" 2>/dev/null
KILN_PLUGIN_PATH="$tmp/pb" refused "$tmp/spp.json" other_plugin_path "resolves to other plugins" "$tmp/pb/libtp_good.so"

# Edited states (written by one python3 run: its start-up is slow on a busy machine).
st="$tmp/state_disable_after_ub_match.json"
python3 - "$st" "$tmp" <<'PY'
import json, sys
edits = {
    "v1": 'd["kiln_paused_state"] = 1',
    "v3": 'd["kiln_paused_state"] = 3',
    "vstr": 'd["kiln_paused_state"] = "2"',
    "noversion": 'del d["kiln_paused_state"]',
    "no_pipeline": 'del d["resolved"]["pipeline"]',
    "no_sha": 'del d["files"]["plugins"][0]["sha256"]',
    "graph_string": 'd["graph"] = json.dumps(d["graph"])',
    "graph_bad": 'd["graph"]["nodes"][0]["inputs"] = ["nowhere:0"]',
    "unknown": 'd["extra"] = 1',
    "step": 'd["paused_at"] = "after_lunch"',
    "next": 'd["next_stage"] = "prepare"',
    "selectors": 'd["build"]["selectors"] = []',
    "selector_type": 'd["build"]["selectors"] = ["PruneGraphPass"]',
    "action": 'd["build"]["selectors"][0]["action"] = "toggle"',
    "sha": 'd["files"]["plugins"][0]["sha256"] = "0" * 64',
    "options": 'd["resolved"]["session_options"] = {"ge.buildGraphMode": "offline"}',
    "tuner_type": 'd["build"]["tuner"] = 5',
}
for k in ["paused_at", "next_stage", "build", "resolved", "files", "graph"]:
    edits["no_" + k] = "del d[%r]" % k
for k in ["selectors", "pass_opts", "options", "manifest", "tuner"]:
    edits["no_build_" + k] = "del d['build'][%r]" % k
for name, code in edits.items():
    d = json.load(open(sys.argv[1]))
    exec(code)
    json.dump(d, open("%s/e_%s.json" % (sys.argv[2], name), "w"), indent=1)
PY
head -c 700 "$st" > "$tmp/e_truncated.json"
refused "$tmp/e_truncated.json" truncated "$tmp/e_truncated.json:" "syntax error"
printf 'not json' > "$tmp/e_garbage.json"
refused "$tmp/e_garbage.json" garbage "e_garbage.json:1:1: syntax error"
printf '[]' > "$tmp/e_array.json"
refused "$tmp/e_array.json" array "a paused state is a JSON object"
refused "$tmp/nope.json" missing_file "nope.json"
refused "$tmp/e_v1.json" version1 "paused state format 1 is not supported (this kiln reads format 2)"
refused "$tmp/e_v3.json" version3 "paused state format 3 is not supported"
refused "$tmp/e_vstr.json" version_string '$.kiln_paused_state: paused state a string is not supported'
refused "$tmp/e_noversion.json" no_version '$.kiln_paused_state: missing (not a kiln paused state)'
for key in paused_at next_stage build resolved files graph; do
    refused "$tmp/e_no_$key.json" "missing_$key" "e_no_$key.json: \$.$key: missing"
done
for key in selectors pass_opts options manifest tuner; do
    refused "$tmp/e_no_build_$key.json" "missing_build_$key" "\$.build.$key: missing"
done
refused "$tmp/e_no_pipeline.json" missing_pipeline '$.resolved.pipeline: missing'
refused "$tmp/e_no_sha.json" missing_sha '$.files.plugins[0].sha256: missing'
refused "$tmp/e_graph_string.json" graph_string '$.graph: expected a graph JSON object, got a string'
refused "$tmp/e_graph_bad.json" graph_bad 'e_graph_bad.json: $.graph'
refused "$tmp/e_unknown.json" unknown_key '$.extra: unknown key'
refused "$tmp/e_step.json" bad_step '$.paused_at: unknown build step "after_lunch"'
refused "$tmp/e_next.json" bad_next '$.next_stage: "prepare" does not follow build step after_ub_match'
refused "$tmp/e_selectors.json" dropped_selector "resolves to other passes than when it was paused" "-PruneGraphPass"
refused "$tmp/e_selector_type.json" selector_type '$.build.selectors[0]: expected an object, got a string'
refused "$tmp/e_action.json" bad_action '$.build.selectors[0].action: expected "enable" or "disable"'
refused "$tmp/e_sha.json" wrong_sha "changed since the build was paused (SHA-256 then $(printf '0%.0s' $(seq 64))"
refused "$tmp/e_options.json" resolved_options "resolves to other session options"
refused "$tmp/e_tuner_type.json" tuner_type '$.build.tuner: expected a string or null, got an integer'

# after_build shows the built model to a tuner (docs/build.md): the schedule,
# the memory plan and the tasks are on the paused graph, and resuming to a
# .kmodel gives the same file as the uninterrupted build.
st="$tmp/state_plain_after_build.json"
if [ -f "$st" ] && python3 - "$st" <<'PY'
import json, sys
t = json.dumps(json.load(open(sys.argv[1])))
missing = [k for k in ('"stream_id"', '"offset"', '"_kiln_task_kind"', '"_kiln_memory_sizes"',
                       '"_kiln_weight_offset"') if k not in t]
sys.exit(print("after_build state lacks", missing) or 1 if missing else 0)
PY
then ok; else bad "after_build state: the built model is not visible"; fi
if "$kiln" compile "$res" -o "$tmp/full.kmodel" 2>/dev/null \
   && "$kiln" compile --resume "$st" -o "$tmp/resumed.kmodel" 2>/dev/null \
   && cmp -s "$tmp/full.kmodel" "$tmp/resumed.kmodel"; then ok
else bad "after_build: resuming to .kmodel differs from the uninterrupted build"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
