#!/usr/bin/env bash
# run_node_tests.sh - ONNX backend node tests (Debian libonnx-testdata) on kiln's
# CPU engine: every test whose ops the engine supports, pass/fail per op and
#     supported ops: N, passing: P, supported-but-failing: [list]
# Documented in docs/testing_models.md; the work is in node_tests.py (options
# there: --subset, --filter REGEX, --ops A,B, -j N, -v).  `make conformance` runs
# the full set; ctest e2e_conformance runs --subset.
#
#   bash tests/conformance/run_node_tests.sh [node_tests.py options]
#
# Environment: KILN_BIN (default build/bin/kiln), KILN_SOURCE_DIR,
# KILN_ONNX_NODE_TESTS (default /usr/include/onnx/backend/test/data/node).
# Exit: 0 supported-but-failing empty, 1 not, 77 nothing to run (loud SKIPPED).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KILN_SOURCE_DIR="${KILN_SOURCE_DIR:-$(cd "$here/../.." && pwd)}"
export KILN_BIN="${KILN_BIN:-$KILN_SOURCE_DIR/build/bin/kiln}"
command -v python3 >/dev/null 2>&1 || { echo "SKIPPED: node tests: python3 not installed"; exit 77; }
exec python3 "$here/node_tests.py" "$@"
