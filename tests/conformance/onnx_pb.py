#!/usr/bin/env python3
"""onnx_pb.py - minimal ONNX protobuf reader, Python 3 standard library only.

Enough of the protobuf wire format to read ONNX's backend node tests
(/usr/include/onnx/backend/test/data/node/*: model.onnx + test_data_set_N/
input_N.pb / output_N.pb TensorProto files) without the onnx or protobuf
packages.  Documented in docs/testing_models.md.

    onnx_pb.py tensor FILE.pb OUT.bin     # TensorProto -> raw LE + OUT.bin.json
    onnx_pb.py model MODEL.onnx           # print ops, opsets, inputs, outputs (JSON)

TensorProto fields used: dims(1), data_type(2), float_data(4), int32_data(5),
int64_data(7), name(8), raw_data(9), double_data(10), uint64_data(11),
data_location(14, EXTERNAL refused).  Repeated numeric fields are read packed
or unpacked.
"""
import json
import struct
import sys

# ---------------------------------------------------------------- wire format --


def _varint(buf, pos):
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def parse(buf):
    """bytes -> {field_number: [(wire_type, value), ...]}.  value: int for
    varint/fixed, bytes for length-delimited."""
    fields = {}
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        fno, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            v = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            v = buf[pos:pos + ln]
            pos += ln
        elif wt == 5:
            v = buf[pos:pos + 4]
            pos += 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        if pos > n:
            raise ValueError("truncated message")
        fields.setdefault(fno, []).append((wt, v))
    return fields


def _s64(v):
    return v - (1 << 64) if v >= (1 << 63) else v


def _ints(fields, fno, signed=True):
    out = []
    for wt, v in fields.get(fno, []):
        if wt == 0:
            out.append(_s64(v) if signed else v)
        elif wt == 2:  # packed varints
            pos = 0
            while pos < len(v):
                x, pos = _varint(v, pos)
                out.append(_s64(x) if signed else x)
    return out


def _fixed(fields, fno, fmt, size):
    out = []
    for wt, v in fields.get(fno, []):
        if wt == 2:
            out.extend(x[0] for x in struct.iter_unpack("<" + fmt, v))
        else:
            out.append(struct.unpack("<" + fmt, v)[0])
    return out


def _str(fields, fno, default=""):
    vals = fields.get(fno)
    return vals[-1][1].decode("utf-8", "replace") if vals else default


def _int(fields, fno, default=0):
    vals = fields.get(fno)
    return _s64(vals[-1][1]) if vals else default

# ---------------------------------------------------------------- TensorProto --


# ONNX TensorProto.DataType -> (kiln dtype name, struct fmt, size)
ONNX_DTYPES = {
    1: ("float32", "f", 4), 2: ("uint8", "B", 1), 3: ("int8", "b", 1),
    4: ("uint16", "H", 2), 5: ("int16", "h", 2), 6: ("int32", "i", 4),
    7: ("int64", "q", 8), 8: ("string", None, 0), 9: ("bool", "B", 1),
    10: ("float16", "H", 2), 11: ("float64", "d", 8), 12: ("uint32", "I", 4),
    13: ("uint64", "Q", 8), 14: ("complex64", None, 8), 15: ("complex128", None, 16),
    16: ("bfloat16", "H", 2),
}


def dtype_name(onnx_type):
    return ONNX_DTYPES.get(onnx_type, ("onnx_type_%d" % onnx_type, None, 0))[0]


def decode_tensor(buf):
    """TensorProto bytes -> dict(name, dims, dtype, data: little-endian bytes)."""
    f = parse(buf)
    dims = _ints(f, 1)
    dt = _int(f, 2)
    name = _str(f, 8)
    if _int(f, 14) == 1:
        raise ValueError("tensor %r: external data not supported" % name)
    kname, fmt, size = ONNX_DTYPES.get(dt, (None, None, 0))
    if kname is None or fmt is None:
        raise ValueError("tensor %r: unsupported data_type %d (%s)" % (name, dt, dtype_name(dt)))
    count = 1
    for d in dims:
        count *= d
    if 9 in f:
        data = bytes(f[9][-1][1])
    else:
        if dt == 1:
            vals = _fixed(f, 4, "f", 4)
        elif dt == 11:
            vals = _fixed(f, 10, "d", 8)
        elif dt == 7:
            vals = _ints(f, 7)
        elif dt in (12, 13):
            vals = _ints(f, 11, signed=False)
        else:  # int32_data holds int32, 8/16-bit ints, bool, float16/bfloat16 bits
            vals = _ints(f, 5)
            if dt in (2, 4, 9, 10, 16):
                vals = [v & ((1 << (8 * size)) - 1) for v in vals]
        data = struct.pack("<%d%s" % (len(vals), fmt), *vals)
    if len(data) != count * size:
        raise ValueError("tensor %r: %d bytes for dims %s of %s" % (name, len(data), dims, kname))
    return {"name": name, "dims": dims, "dtype": kname, "data": data}


def write_raw(tensor, out_bin, name=None):
    """Write tensor data to OUT_BIN and the CLI.md sidecar OUT_BIN.json."""
    with open(out_bin, "wb") as fh:
        fh.write(tensor["data"])
    meta = {"name": name if name is not None else tensor["name"],
            "dims": tensor["dims"], "dtype": tensor["dtype"]}
    with open(out_bin + ".json", "w") as fh:
        json.dump(meta, fh)
    return meta

# ----------------------------------------------------------------- ModelProto --


def _type_info(tp_bytes):
    """TypeProto -> (kind, elem dtype name or None)."""
    t = parse(tp_bytes)
    if 1 in t:  # tensor_type
        tt = parse(t[1][-1][1])
        return "tensor", dtype_name(_int(tt, 1)) if 1 in tt else None
    for fno, kind in ((4, "sequence"), (5, "map"), (8, "sparse_tensor"), (9, "optional")):
        if fno in t:
            return kind, None
    return "unknown", None


def _value_infos(g, fno):
    out = []
    for _, v in g.get(fno, []):
        vi = parse(v)
        kind, dt = _type_info(vi[2][-1][1]) if 2 in vi else ("unknown", None)
        out.append({"name": _str(vi, 1), "kind": kind, "dtype": dt})
    return out


def _graph(gbytes, ops, domains):
    g = parse(gbytes)
    nodes = []
    for _, nb in g.get(1, []):
        n = parse(nb)
        op = _str(n, 4)
        dom = _str(n, 7)
        ops.append(op)
        domains.add(dom or "ai.onnx")
        nodes.append(op)
        for _, ab in n.get(5, []):
            a = parse(ab)
            for _, sg in a.get(6, []):  # g
                _graph(sg, ops, domains)
            for _, sg in a.get(11, []):  # graphs
                _graph(sg, ops, domains)
    inits = set()
    for _, tb in g.get(5, []):
        inits.add(_str(parse(tb), 8))
    inputs = [vi for vi in _value_infos(g, 11) if vi["name"] not in inits]
    return {"nodes": nodes, "inputs": inputs, "outputs": _value_infos(g, 12)}


def decode_model(buf):
    """ModelProto bytes -> dict(ops: every op type incl. subgraphs, nodes: top-level
    op types, domains, opsets {domain: version}, inputs/outputs [{name, kind, dtype}])."""
    m = parse(buf)
    opsets = {}
    for _, ob in m.get(8, []):
        o = parse(ob)
        opsets[_str(o, 1) or "ai.onnx"] = _int(o, 2)
    ops = []
    domains = set()
    if 7 not in m:
        raise ValueError("model has no graph")
    g = _graph(m[7][-1][1], ops, domains)
    return {"ops": ops, "nodes": g["nodes"], "domains": sorted(domains), "opsets": opsets,
            "inputs": g["inputs"], "outputs": g["outputs"]}


def main(argv):
    if len(argv) == 3 and argv[0] == "tensor":
        with open(argv[1], "rb") as fh:
            t = decode_tensor(fh.read())
        print(json.dumps(write_raw(t, argv[2])))
        return 0
    if len(argv) == 2 and argv[0] == "model":
        with open(argv[1], "rb") as fh:
            print(json.dumps(decode_model(fh.read()), indent=1))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
