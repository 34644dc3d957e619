#!/usr/bin/env bash
# bad_input_corpus.sh - kiln's bad-input corpus (tests/badinput/corpus.py): about
# two hundred defective graphs, ONNX files, manifests, plugins, command lines
# and `kiln run` inputs, each checked for exit status, a message naming what
# failed, no sanitizer report, no hang, no leftover or replaced file.  In the
# sanitizer build every case runs under ASan+UBSan.
#
#   bash tests/e2e/bad_input_corpus.sh [CASE_REGEX]      (ctest: e2e_bad_input_corpus)
set -uo pipefail
kiln="${KILN_BIN:?}"; src="${KILN_SOURCE_DIR:?}"; tp="${KILN_TEST_PLUGIN_DIR:?}"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
exec "$py" "$src/tests/badinput/corpus.py" "$kiln" "$tp" "$src" "${1:-}"
