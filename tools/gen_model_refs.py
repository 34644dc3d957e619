#!/usr/bin/env python3
"""gen_model_refs.py - build the model reference cases (docs/testing_models.md).

    gen_model_refs.py CASES.json MODELS_DIR OUT_DIR --node NODE --ort ORT_DIR
                      [--keys KEYS] [--case REGEX] [--inputs-only]

Usually run by tools/gen-model-refs.sh, which installs ONNX Runtime for Node
(ORT_DIR/node_modules/onnxruntime-node) and picks the cache.  For every case of
CASES.json (tests/data/models_ref/cases.json) this writes OUT_DIR/<case>/:

  input.N.bin + input.N.bin.json   rendered from the case's generator and
                                   checked against the case's sha256 (bit for
                                   bit: a mismatch is an error)
  output.N.bin + output.N.bin.json ONNX Runtime's outputs (tools/gen_model_refs.js,
                                   the session settings of CASES.json)
  manifest.json                    case, model_file, model_sha256,
                                   semantic_check, tensors, environment

then checks ONNX Runtime's own outputs against the case's semantic check (the
OCR cases must read their text) and reports, per case, whether the outputs are
bit-identical to the sums recorded in CASES.json (a different CPU may differ
in the last bits: reported, not an error).

Generators (inputs[].generator.kind):
  xorshift32_pm1  state x = seed (uint32); per value x ^= x << 13; x ^= x >> 17;
                  x ^= x << 5; f = ((int32)(x >> 8) - 8388608) / 8388608 * scale
  const           every element = value
  zeros           every element 0
  text5x7         lines of text in the 5x7 font of tools/render_text.py (black
                  on white), each channel c = (pixel / 255 - mean[c]) / std[c]

Exit status: 0 every case made and checked; 1 any error (named on stderr);
3 onnxruntime-node cannot be loaded on this machine.
Python 3 standard library only.
"""
import argparse
import array
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_outputs  # noqa: E402
import render_text  # noqa: E402

_CODES = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "uint8": "B",
          "int8": "b", "bool": "B"}


class CaseError(Exception):
    pass


def numel(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


def pack(dtype, values):
    code = _CODES.get(dtype)
    if code is None:
        raise CaseError("unsupported input dtype %r" % dtype)
    a = array.array(code, values)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def xorshift32_pm1(n, seed, scale):
    x = int(seed) & 0xFFFFFFFF
    if x == 0:
        raise CaseError("xorshift32_pm1: seed 0 gives only zeros")
    scale = struct.unpack("<f", struct.pack("<f", float(scale)))[0]
    out = array.array("f", bytes(4 * n))
    m = 0xFFFFFFFF
    inv = 1.0 / 8388608.0
    for i in range(n):
        x ^= (x << 13) & m
        x ^= x >> 17
        x ^= (x << 5) & m
        # (int32)(x >> 8) - 2^23 is exact in float32; the two products by
        # powers of two (1/2^23, and the scales used) are too
        out[i] = ((x >> 8) - 8388608) * inv * scale
    return out


def text5x7(gen, dims):
    if len(dims) != 4 or dims[0] != 1:
        raise CaseError("text5x7: dims must be [1, C, H, W], got %s" % (dims,))
    c, h, w = dims[1], dims[2], dims[3]
    if h != gen["height"] or w != gen["width"]:
        raise CaseError("text5x7: %dx%d image but dims %s" % (gen["height"], gen["width"], dims))
    mean, std = gen["mean"], gen["std"]
    if len(mean) != c or len(std) != c:
        raise CaseError("text5x7: need %d mean/std values" % c)
    ink = [[False] * w for _ in range(h)]
    for line in gen["lines"]:
        render_text.render(line["text"], w, h, line["scale"], line["x"], line["y"], ink=ink)
    flat = [cell for row in ink for cell in row]
    out = array.array("f")
    for ch in range(c):
        # computed in double, stored as float32
        black = (0.0 - mean[ch]) / std[ch]
        white = (1.0 - mean[ch]) / std[ch]
        out.extend([black if v else white for v in flat])
    return out


def make_input(t):
    gen = t.get("generator") or {}
    kind = gen.get("kind")
    dims = [int(d) for d in t["dims"]]
    n = numel(dims)
    dtype = t["dtype"]
    if kind == "xorshift32_pm1":
        if dtype != "float32":
            raise CaseError("xorshift32_pm1 makes float32, not %s" % dtype)
        return pack("float32", xorshift32_pm1(n, gen["seed"], gen.get("scale", 1)))
    if kind == "const":
        return pack(dtype, [gen["value"]] * n)
    if kind == "zeros":
        return pack(dtype, [0] * n)
    if kind == "text5x7":
        if dtype != "float32":
            raise CaseError("text5x7 makes float32, not %s" % dtype)
        return pack("float32", text5x7(gen, dims))
    raise CaseError("unknown generator %r" % kind)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def tensor_meta(role, index, t, data):
    return {"name": t["name"], "role": role, "index": index, "dtype": t["dtype"],
            "dims": [int(d) for d in t["dims"]], "file": "%s.%d.bin" % (role, index),
            "byte_length": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "endianness": "little", "layout": "row-major"}


def write_inputs(case, models, out):
    """OUT/<case>/input.N.bin + sidecars + manifest.json (inputs only)."""
    model = os.path.join(models, case["model_file"])
    if not os.path.isfile(model):
        raise CaseError("model %s not found" % model)
    if case.get("model_sha256") and sha256_file(model) != case["model_sha256"]:
        raise CaseError("model %s: SHA-256 differs from the case's model_sha256" % model)
    d = os.path.join(out, case["case"])
    os.makedirs(d, exist_ok=True)
    tensors = []
    for i, t in enumerate(case["inputs"]):
        data = make_input(t)
        want = numel(t["dims"]) * compare_outputs.DTYPE_SIZE[t["dtype"]]
        if len(data) != want:
            raise CaseError("input %d (%s): %d bytes, want %d" % (i, t["name"], len(data), want))
        meta = tensor_meta("input", i, t, data)
        meta["generator"] = t["generator"]
        if t.get("sha256") and meta["sha256"] != t["sha256"]:
            raise CaseError("input %d (%s): generated data has SHA-256 %s, the case says %s "
                            "(generator %s)" % (i, t["name"], meta["sha256"], t["sha256"],
                                                json.dumps(t["generator"])))
        with open(os.path.join(d, meta["file"]), "wb") as f:
            f.write(data)
        write_json(os.path.join(d, meta["file"] + ".json"), meta)
        tensors.append(meta)
    write_json(os.path.join(d, "manifest.json"), {
        "case": case["case"], "semantic_check": case.get("semantic_check"),
        "model_file": "models/" + case["model_file"], "model_sha256": case.get("model_sha256"),
        "tensors": tensors})


def main(argv):
    ap = argparse.ArgumentParser(description="build the model reference cases")
    ap.add_argument("cases")
    ap.add_argument("models")
    ap.add_argument("out")
    ap.add_argument("--node", default="node")
    ap.add_argument("--ort", help="directory holding node_modules/onnxruntime-node")
    ap.add_argument("--keys", help="CTC keys file (default MODELS/ppocr_keys_v1.txt)")
    ap.add_argument("--case", help="only the cases whose name matches this regex")
    ap.add_argument("--inputs-only", action="store_true", help="write and check the inputs only")
    a = ap.parse_args(argv)

    def err(msg):
        sys.stderr.write("gen_model_refs.py: %s\n" % msg)

    try:
        with open(a.cases, "r", encoding="utf-8") as f:
            spec = json.load(f)
        cases = spec["cases"]
    except (OSError, ValueError, KeyError) as e:
        err("%s: %s" % (a.cases, e))
        return 1
    if a.case:
        cases = [c for c in cases if re.search(a.case, c["case"])]
        if not cases:
            err("no case matches %r" % a.case)
            return 1
    os.makedirs(a.out, exist_ok=True)

    t0 = time.time()
    for c in cases:
        try:
            write_inputs(c, a.models, a.out)
        except (CaseError, OSError, KeyError, ValueError) as e:
            err("%s: %s" % (c.get("case", "?"), e))
            return 1
    print("gen_model_refs: %d cases, inputs rendered and matching their SHA-256 (%.1f s)"
          % (len(cases), time.time() - t0))
    if a.inputs_only:
        return 0

    # ONNX Runtime: one node process for every case
    js = os.path.join(HERE, "gen_model_refs.js")
    env = dict(os.environ)
    if a.ort:
        env["NODE_PATH"] = os.path.join(a.ort, "node_modules")
    cmd = [a.node, js, a.cases, a.models, a.out] + [c["case"] for c in cases]
    t0 = time.time()
    rc = subprocess.call(cmd, env=env)
    if rc != 0:
        err("ONNX Runtime could not make the reference outputs (%s)" % " ".join(cmd[:2]))
        return 3 if rc == 3 else 1
    print("gen_model_refs: ONNX Runtime outputs written (%.1f s)" % (time.time() - t0))

    # semantic checks on ONNX Runtime's own outputs; recorded sums
    keys = a.keys or os.path.join(a.models, "ppocr_keys_v1.txt")
    bad = 0
    same = 0
    differs = []
    for c in cases:
        d = os.path.join(a.out, c["case"])
        outs = []
        for i, t in enumerate(c["outputs"]):
            p = os.path.join(d, "output.%d.bin" % i)
            try:
                meta, vals = compare_outputs.read_tensor(p)
            except (OSError, ValueError) as e:
                err("%s: %s" % (c["case"], e))
                return 1
            if meta["name"] != t["name"] or meta["dtype"] != t["dtype"] or \
                    [int(x) for x in meta["dims"]] != [int(x) for x in t["dims"]]:
                err("%s: output %d is %s %s %s, the case says %s %s %s" % (
                    c["case"], i, meta["name"], meta["dtype"], meta["dims"],
                    t["name"], t["dtype"], t["dims"]))
                return 1
            outs.append((meta, vals))
            if t.get("sha256") and meta["sha256"] != t["sha256"]:
                differs.append("%s/output.%d" % (c["case"], i))
            else:
                same += 1
        if os.path.isfile(os.path.join(d, "output.%d.bin" % len(c["outputs"]))):
            err("%s: ONNX Runtime gave more outputs than the case lists" % c["case"])
            return 1
        ok, msg = compare_outputs.semantic(c.get("semantic_check"), outs, keys)
        if not ok:
            err("%s: ONNX Runtime's own output fails the case's check: %s" % (c["case"], msg))
            bad += 1
        elif msg:
            print("gen_model_refs: %s: %s" % (c["case"], msg))
    if bad:
        return 1
    print("gen_model_refs: %d outputs bit-identical to the recorded sums%s" % (
        same, "; differing in the last bits (other CPU or library build): " + ", ".join(differs)
        if differs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
