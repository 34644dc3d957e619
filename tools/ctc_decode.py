#!/usr/bin/env python3
"""ctc_decode.py - print the text a PP-OCR rec output encodes (for the demo).

    ctc_decode.py OUTPUT.bin [KEYS.txt]

OUTPUT.bin is what `kiln run --output-dir DIR` wrote for the rec model
(DIR/output.0.bin + .bin.json: float32 [N, T, 6625] softmax).  KEYS defaults to
ppocr_keys_v1.txt from tools/fetch-models.sh's directory.  CTC greedy decoding
(tools/compare_outputs.py ctc_greedy: argmax per step, collapse repeats, drop
blank 0, class i -> line i-1 of the keys, last class a space).  Prints the text
on the first line and the per-character probabilities on the second.
Python 3 standard library only.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_outputs  # noqa: E402


def main(argv):
    if len(argv) not in (1, 2):
        sys.stderr.write(__doc__)
        return 2
    keys = argv[1] if len(argv) == 2 else None
    if keys is None:
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.run(["bash", os.path.join(here, "fetch-models.sh"), "--check"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write("ctc_decode.py: no keys file given and the models are not available\n")
            return 1
        keys = os.path.join(p.stdout.strip().splitlines()[-1], "ppocr_keys_v1.txt")
    try:
        meta, vals = compare_outputs.read_tensor(argv[0])
        text, probs = compare_outputs.ctc_greedy(vals, meta["dims"], compare_outputs.load_keys(keys))
    except (OSError, ValueError) as e:
        sys.stderr.write("ctc_decode.py: %s\n" % e)
        return 1
    print(text)
    print(" ".join("%.3f" % p for p in probs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
