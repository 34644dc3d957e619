# ort-node.sh - sourced by tools/gen-model-refs.sh and the benchmarks: makes
# onnxruntime-node available at the version pinned by
# tools/ort-node/package-lock.json, installed with `npm ci --ignore-scripts`
# into ${KILN_ORT_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kiln/ort-node} and reused
# while the lock file is unchanged.
#
#   . tools/ort-node.sh
#   ort_node_ensure SRC FD     # 0: installed (ORT_NODE_DIR set: its node_modules'
#                              #    parent); 1 error; 3 cannot be made here
#                              #    (no node or npm, the registry unreachable)
#
# The cache may serve several callers: file descriptor FD holds its lock,
# exclusive to install, then shared while the caller uses it (until the
# caller's process exits).  Messages go to stderr, prefixed by ORT_NODE_WHO
# (default ort-node.sh).
ort_node_ensure() {
    local src=$1 fd=$2 who=${ORT_NODE_WHO:-ort-node.sh}
    local cache="${KILN_ORT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/ort-node}"
    local lockfile="$src/tools/ort-node/package-lock.json" want t0
    ORT_NODE_DIR=$cache
    command -v node >/dev/null 2>&1 || { echo "$who: node is not installed (Debian: apt-get install nodejs npm; tools/install-deps.sh)" >&2; return 3; }
    want=$(sha256sum "$lockfile" | cut -d' ' -f1)
    mkdir -p "$(dirname "$cache")" || { echo "$who: cannot create $(dirname "$cache")" >&2; return 1; }
    if command -v flock >/dev/null 2>&1; then
        eval "exec $fd>>\"\$cache.lock\"" || { echo "$who: cannot open $cache.lock" >&2; return 1; }
        flock -w 1800 "$fd" || { echo "$who: timed out waiting for another install into $cache" >&2; return 1; }
    fi
    if [ ! -f "$cache/installed" ] || [ "$(cat "$cache/installed")" != "$want" ] ||
            [ ! -f "$cache/node_modules/onnxruntime-node/package.json" ]; then
        command -v npm >/dev/null 2>&1 || { echo "$who: npm is not installed (Debian: apt-get install npm; tools/install-deps.sh)" >&2; return 3; }
        local ping
        ping=$(mktemp)
        if ! npm ping --fetch-timeout=30000 --fetch-retries=1 >/dev/null 2>"$ping"; then
            echo "$who: the npm registry ($(npm config get registry 2>/dev/null)) is unreachable:" >&2
            grep -i "error" "$ping" | head -3 >&2
            rm -f "$ping"
            return 3
        fi
        rm -f "$ping"
        echo "$who: installing onnxruntime-node (npm ci --ignore-scripts) into $cache" >&2
        t0=$(date +%s)
        rm -rf "$cache"
        mkdir -p "$cache" || { echo "$who: cannot create $cache" >&2; return 1; }
        cp "$src/tools/ort-node/package.json" "$lockfile" "$cache/" || return 1
        if ! (cd "$cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$cache/npm.log" 2>&1; then
            echo "$who: npm ci failed in $cache:" >&2; tail -15 "$cache/npm.log" >&2
            return 1
        fi
        echo "$want" >"$cache/installed"
        echo "$who: onnxruntime-node installed in $(( $(date +%s) - t0 )) s" >&2
    fi
    # keep it (shared) while the caller runs ORT, so no other run reinstalls it meanwhile
    command -v flock >/dev/null 2>&1 && flock -s "$fd"
    return 0
}
