#!/usr/bin/env bash
# doc_commands: every shell command shown in README.md and docs/*.md runs, as
# written, against this build (tests/e2e/doc_commands.py does the work; the
# conventions, `# expect: exit N` and the skip list, are in docs/testing.md).
# Exit 77 (skipped) only when a block needs the real models and they cannot be had.
set -uo pipefail
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
build="${KILN_BUILD_DIR:-$src/build}"
exec python3 "$src/tests/e2e/doc_commands.py" "$src" "$build" "$@"
