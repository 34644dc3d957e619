#!/usr/bin/env python3
"""compare_outputs.py - compare kiln's outputs with reference outputs.

Python 3 standard library only (no numpy).  Documented in docs/testing_models.md.

    compare_outputs.py REF_DIR OUT_DIR [--atol A] [--rtol R] [--keys FILE]
                       [--case NAME] [--no-semantic]

REF_DIR is a reference case (../shared/models/ref/<case>/: output.N.bin +
output.N.bin.json, manifest.json); OUT_DIR is what `kiln run --output-dir`
wrote (output.N.bin + output.N.bin.json with name/dims/dtype, CLI.md).

Every reference output must exist in OUT_DIR with the same dims and dtype (and
the same name when the sidecar gives one), and match element-wise like
numpy.allclose: |got - ref| <= atol + rtol * |ref| (NaN only where the
reference has NaN, infinities equal).  Default tolerances come from
../shared/models/README.md: det models (case name contains "_det_") atol 1e-3
rtol 1e-4; rec models atol 1e-5 rtol 3e-3 (ORT's own spread between its
optimisation levels reaches 1.8e-3 relative there); every other case rtol 1e-4
atol 1e-5.

Semantic checks (manifest.json "semantic_check"), run on kiln's output:
  ctc_greedy_text  CTC greedy decoding of a [N, T, C] softmax: argmax per time
                   step, collapse repeats, drop the blank (class 0); class i
                   (1 <= i <= len(keys)) is line i-1 of the keys file
                   (ppocr_keys_v1.txt), class len(keys)+1 is a space.  Text must
                   be identical; the per-character probabilities within 0.02.
  pixels_over_0_3  number of output values > 0.3: within 1% (min 20 pixels).
  argmax           argmax of output 0 equal, and "probs" within 0.01.

Prints one line: `PASS <case> ...` or `FAIL <case> ...` with, per output, the
max absolute error and the max relative error |got-ref|/max(|ref|, 1e-6) (the
definition ../shared/models uses for max_rel_eps1e6).  Exit status 0 pass,
1 fail, 2 usage/unreadable reference.

Also importable: read_tensor(), compare_arrays(), ctc_greedy().
"""
import array
import json
import math
import os
import struct
import sys

# dtype name (kiln_dtype_name / ../shared/models sidecars) -> (array typecode, size)
_TYPECODES = {
    "float32": ("f", 4), "float64": ("d", 8),
    "int8": ("b", 1), "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8),
    "bool": ("B", 1),
}
DTYPE_SIZE = {k: v[1] for k, v in _TYPECODES.items()}
DTYPE_SIZE.update({"float16": 2, "bfloat16": 2})


def numel(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


def decode_values(data, dtype):
    """bytes (little-endian) -> list/array of Python numbers for @p dtype."""
    if dtype in _TYPECODES:
        code, size = _TYPECODES[dtype]
        if len(data) % size:
            raise ValueError("%d bytes is not a multiple of %d (%s)" % (len(data), size, dtype))
        a = array.array(code)
        a.frombytes(data)
        if sys.byteorder != "little":
            a.byteswap()
        return a
    if dtype == "float16":
        return [v[0] for v in struct.iter_unpack("<e", data)]
    if dtype == "bfloat16":
        return [struct.unpack("<f", struct.pack("<I", v[0] << 16))[0]
                for v in struct.iter_unpack("<H", data)]
    raise ValueError("unsupported dtype %r" % dtype)


def read_sidecar(path):
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def read_tensor(bin_path, sidecar=None):
    """Read BIN + BIN.json -> (meta dict, values).  Raises OSError/ValueError."""
    meta = sidecar if sidecar is not None else read_sidecar(bin_path + ".json")
    if "dims" not in meta or "dtype" not in meta:
        raise ValueError("%s.json: no dims/dtype" % bin_path)
    with open(bin_path, "rb") as f:
        data = f.read()
    want = numel(meta["dims"]) * DTYPE_SIZE.get(meta["dtype"], 0)
    if meta["dtype"] not in DTYPE_SIZE:
        raise ValueError("%s: unsupported dtype %r" % (bin_path, meta["dtype"]))
    if len(data) != want:
        raise ValueError("%s: %d bytes, dims %s x %s need %d" % (
            bin_path, len(data), meta["dims"], meta["dtype"], want))
    return meta, decode_values(data, meta["dtype"])


def compare_arrays(ref, got, atol, rtol):
    """allclose-style comparison.  Returns dict: max_abs, max_rel, bad (count of
    elements out of tolerance), first_bad (index or -1), nan_mismatch."""
    max_abs = 0.0
    max_rel = 0.0
    bad = 0
    first_bad = -1
    nan_mismatch = 0
    isnan = math.isnan
    isinf = math.isinf
    for i, (r, g) in enumerate(zip(ref, got)):
        if r == g:
            continue
        r = float(r)
        g = float(g)
        if isnan(r) or isnan(g):
            if isnan(r) and isnan(g):
                continue
            nan_mismatch += 1
            bad += 1
            if first_bad < 0:
                first_bad = i
            max_abs = max_rel = float("inf")
            continue
        if isinf(r) or isinf(g):  # unequal and one is infinite
            bad += 1
            if first_bad < 0:
                first_bad = i
            max_abs = max_rel = float("inf")
            continue
        d = abs(g - r)
        if d > max_abs:
            max_abs = d
        rel = d / max(abs(r), 1e-6)
        if rel > max_rel:
            max_rel = rel
        if d > atol + rtol * abs(r):
            bad += 1
            if first_bad < 0:
                first_bad = i
    return {"max_abs": max_abs, "max_rel": max_rel, "bad": bad,
            "first_bad": first_bad, "nan_mismatch": nan_mismatch}


def ctc_greedy(values, dims, keys):
    """CTC greedy decode of the first batch item of a [N, T, C] (or [T, C])
    probability tensor.  Returns (text, [max prob of each emitted char])."""
    if len(dims) < 2:
        raise ValueError("ctc: need [N, T, C], got dims %s" % (dims,))
    c = int(dims[-1])
    t = int(dims[-2])
    text = []
    probs = []
    prev = -1
    for step in range(t):
        row = values[step * c:(step + 1) * c]
        best = 0
        bestv = row[0]
        for j in range(1, c):
            if row[j] > bestv:
                bestv = row[j]
                best = j
        if best != prev and best != 0:
            if best <= len(keys):
                text.append(keys[best - 1])
            elif best == len(keys) + 1:
                text.append(" ")
            else:
                text.append("<%d>" % best)
            probs.append(float(bestv))
        prev = best
    return "".join(text), probs


def load_keys(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read().splitlines()


def default_tolerance(case):
    if "_det_" in case or case.endswith("_det") or "det_infer" in case:
        return 1e-3, 1e-4
    if "_rec_" in case or "rec_infer" in case:
        # ORT differs from itself on rec@text by up to 1.8e-3 relative (0.006785
        # at level all, 0.006797 at basic, one element of output 0, an AVX-512
        # machine), and OpenBLAS's kernel and thread count move kiln as much
        return 1e-5, 3e-3
    return 1e-5, 1e-4


def semantic(check, outs, keys_path):
    """Run the manifest's semantic check on kiln's outputs (list of (meta, values)).
    Returns (ok, message)."""
    if not check:
        return True, ""
    if not outs:
        return False, "semantic: no output 0"
    meta, vals = outs[0]
    msgs = []
    ok = True
    if "ctc_greedy_text" in check:
        if not keys_path or not os.path.isfile(keys_path):
            return False, "semantic: keys file %s not found" % keys_path
        text, probs = ctc_greedy(vals, meta["dims"], load_keys(keys_path))
        want = check["ctc_greedy_text"]
        if text != want:
            ok = False
            msgs.append("text %r != %r" % (text, want))
        else:
            msgs.append("text %r" % text)
            wp = check.get("char_probs") or []
            if len(wp) == len(probs):
                worst = max([abs(a - b) for a, b in zip(probs, wp)] or [0.0])
                if worst > 0.02:
                    ok = False
                    msgs.append("char probs off by %.3f" % worst)
    if "pixels_over_0_3" in check:
        n = sum(1 for v in vals if v > 0.3)
        want = int(check["pixels_over_0_3"])
        slack = max(20, want // 100)
        if abs(n - want) > slack:
            ok = False
            msgs.append("pixels>0.3 %d != %d (+-%d)" % (n, want, slack))
        else:
            msgs.append("pixels>0.3 %d (ref %d)" % (n, want))
    if "argmax" in check:
        best = max(range(len(vals)), key=lambda i: vals[i]) if len(vals) else -1
        want = int(check["argmax"])
        probs = [round(float(v), 3) for v in vals]
        if best != want:
            ok = False
            msgs.append("argmax %d != %d (probs %s)" % (best, want, probs))
        else:
            wp = check.get("probs") or []
            worst = max([abs(a - b) for a, b in zip(probs, wp)] or [0.0])
            if len(wp) == len(probs) and worst > 0.01:
                ok = False
                msgs.append("argmax %d but probs %s != %s" % (best, probs, wp))
            else:
                msgs.append("argmax %d probs %s" % (best, probs))
    return ok, "semantic: " + "; ".join(msgs)


def fmt(x):
    return "inf" if x == float("inf") else "%.3g" % x


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="compare kiln outputs with a reference case")
    ap.add_argument("ref")
    ap.add_argument("out")
    ap.add_argument("--atol", type=float)
    ap.add_argument("--rtol", type=float)
    ap.add_argument("--keys", help="CTC keys file (default: REF/../../ppocr_keys_v1.txt)")
    ap.add_argument("--case", help="name printed (default: basename of REF)")
    ap.add_argument("--no-semantic", action="store_true")
    a = ap.parse_args(argv)
    case = a.case or os.path.basename(os.path.normpath(a.ref))
    datol, drtol = default_tolerance(case)
    atol = datol if a.atol is None else a.atol
    rtol = drtol if a.rtol is None else a.rtol

    refs = []
    n = 0
    while os.path.isfile(os.path.join(a.ref, "output.%d.bin" % n)):
        refs.append(os.path.join(a.ref, "output.%d.bin" % n))
        n += 1
    if not refs:
        print("FAIL %s: no output.N.bin in reference %s" % (case, a.ref))
        return 2
    fails = []
    parts = []
    outs = []
    for i, rp in enumerate(refs):
        try:
            rmeta, rvals = read_tensor(rp)
        except (OSError, ValueError) as e:
            print("FAIL %s: reference unreadable: %s" % (case, e))
            return 2
        gp = os.path.join(a.out, "output.%d.bin" % i)
        label = "out%d" % i
        try:
            gmeta, gvals = read_tensor(gp)
        except (OSError, ValueError) as e:
            fails.append("%s: %s" % (label, e))
            outs.append(None)
            continue
        outs.append((gmeta, gvals))
        if rmeta.get("name") and gmeta.get("name") and rmeta["name"] != gmeta["name"]:
            fails.append("%s: name %r != %r" % (label, gmeta["name"], rmeta["name"]))
        if [int(d) for d in gmeta["dims"]] != [int(d) for d in rmeta["dims"]]:
            fails.append("%s: dims %s != %s" % (label, gmeta["dims"], rmeta["dims"]))
            continue
        if gmeta["dtype"] != rmeta["dtype"]:
            fails.append("%s: dtype %s != %s" % (label, gmeta["dtype"], rmeta["dtype"]))
            continue
        st = compare_arrays(rvals, gvals, atol, rtol)
        parts.append("%s abs %s rel %s" % (label, fmt(st["max_abs"]), fmt(st["max_rel"])))
        if st["bad"]:
            fails.append("%s: %d of %d elements out of tolerance (first at %d: got %r ref %r)" % (
                label, st["bad"], len(rvals), st["first_bad"],
                gvals[st["first_bad"]], rvals[st["first_bad"]]))
    # extra outputs kiln wrote are an error too (model has that many outputs)
    if os.path.isfile(os.path.join(a.out, "output.%d.bin" % len(refs))):
        fails.append("kiln wrote more outputs than the reference has (%d)" % len(refs))

    sem_msg = ""
    if not a.no_semantic:
        mpath = os.path.join(a.ref, "manifest.json")
        check = None
        if os.path.isfile(mpath):
            check = read_sidecar(mpath).get("semantic_check")
        if check and outs and outs[0] is not None:
            keys = a.keys or os.path.join(a.ref, "..", "..", "ppocr_keys_v1.txt")
            ok, sem_msg = semantic(check, outs, keys)
            if not ok:
                fails.append(sem_msg)
                sem_msg = ""
    tol = "atol %g rtol %g" % (atol, rtol)
    body = "; ".join(parts)
    if sem_msg:
        body += "; " + sem_msg
    if fails:
        print("FAIL %s (%s): %s%s" % (case, tol, " | ".join(fails), ("  [" + body + "]") if body else ""))
        return 1
    print("PASS %s (%s): %s" % (case, tol, body))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
