#!/usr/bin/env python3
"""Generate the small hand-made ONNX files of the ONNX frontend tests.

Usage: gen_models.py OUTDIR

Pure Python (no onnx package): a minimal protobuf wire-format writer with the
onnx.proto field numbers spelled out below.  Writes
  good_loop.onnx      Loop (-> kiln While) with a loop-carried value, a value
                      captured from the main graph, typed float_data/int64_data
                      initializers, a symbolic dim and a custom-domain node
  good_if.onnx        nested If whose inner branch captures main-graph values
                      through two levels, plus a Constant(value_ints) node
  bad_*.onnx          one defect each (see BAD below); the test expects exit 1
                      and an error naming the file and the defect
"""
import os
import struct
import sys

# ---- protobuf wire format ----------------------------------------------------


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def f_int(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, v):
    return key(field, 5) + struct.pack("<f", v)


def f_packed_floats(field, vals):
    return f_bytes(field, b"".join(struct.pack("<f", v) for v in vals))


def f_packed_ints(field, vals):
    return f_bytes(field, b"".join(varint(v) for v in vals))

# ---- onnx.proto messages -------------------------------------------------------

FLOAT, INT64, STRING = 1, 7, 8
A_FLOAT, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_INTS = 1, 2, 3, 4, 5, 7


def dim(v):
    return f_bytes(1, f_int(1, v) if isinstance(v, int) else f_bytes(2, v))


def value_info(name, elem=None, shape=None):
    msg = f_bytes(1, name)
    if elem is not None:
        tensor = f_int(1, elem)
        if shape is not None:
            tensor += f_bytes(2, b"".join(dim(d) for d in shape))
        msg += f_bytes(2, f_bytes(1, tensor))
    return msg


def tensor(name, dtype, dims, floats=None, int64s=None, raw=None, extra=b""):
    msg = b"".join(f_int(1, d) for d in dims) + f_int(2, dtype)
    if floats is not None:
        msg += f_packed_floats(4, floats)
    if int64s is not None:
        msg += f_packed_ints(7, int64s)
    if name:
        msg += f_bytes(8, name)
    if raw is not None:
        msg += f_bytes(9, raw)
    return msg + extra


def attr(name, atype, payload):
    return f_bytes(1, name) + f_int(20, atype) + payload


def node(op, inputs, outputs, name="", attrs=(), domain=""):
    msg = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    if name:
        msg += f_bytes(3, name)
    msg += f_bytes(4, op)
    msg += b"".join(f_bytes(5, a) for a in attrs)
    if domain:
        msg += f_bytes(7, domain)
    return msg


def graph(name, nodes, inputs=(), outputs=(), inits=(), vinfo=(), extra=b""):
    msg = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    msg += b"".join(f_bytes(5, t) for t in inits)
    msg += b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs)
    msg += b"".join(f_bytes(13, v) for v in vinfo)
    return msg + extra


def model(g, opsets=(("", 16),), extra=b""):
    msg = f_int(1, 8) + b"".join(f_bytes(8, f_bytes(1, d) + f_int(2, v)) for d, v in opsets)
    msg += f_bytes(2, "kiln-tests") + f_bytes(7, g)
    return msg + extra

# ---- the files ------------------------------------------------------------------


def good_loop():
    body = graph("loop_body",
                 [node("Add", ["v_in", "w"], ["v_out"], "body_add"),
                  node("Identity", ["c_in"], ["c_out"], "body_cond")],
                 inputs=[value_info("iter", INT64, []), value_info("c_in", 9, []),
                         value_info("v_in", FLOAT, ["N"])],
                 outputs=[value_info("c_out", 9, []), value_info("v_out", FLOAT, ["N"])])
    g = graph("loop_main",
              [node("Loop", ["M", "", "x"], ["y"], "loop", [attr("body", A_GRAPH, f_bytes(6, body))]),
               node("Shape", ["y"], ["y_shape"], "shape"),
               node("Frobnicate", ["y_shape", "k"], ["z"], "custom",
                    [attr("alpha", A_FLOAT, f_float(2, 0.5)),
                     attr("mode", A_STRING, f_bytes(4, "fast")),
                     attr("axes", A_INTS, f_packed_ints(8, [0, -1]))], domain="com.example")],
              inputs=[value_info("M", INT64, []), value_info("x", FLOAT, ["N"])],
              outputs=[value_info("y", FLOAT, ["N"]), value_info("z", INT64, [1])],
              inits=[tensor("w", FLOAT, [3], floats=[1.0, 2.0, 3.0]),
                     tensor("k", INT64, [2], int64s=[7, -7])])
    return model(g, opsets=(("", 16), ("com.example", 1)))


def good_if():
    inner_then = graph("inner_then", [node("Add", ["x", "w"], ["t"], "inner_add")],
                       outputs=[value_info("t", FLOAT, [2])])
    inner_else = graph("inner_else", [node("Neg", ["x"], ["e"], "inner_neg")],
                       outputs=[value_info("e", FLOAT, [2])])
    outer_then = graph("outer_then",
                       [node("If", ["c2"], ["r"], "inner_if",
                             [attr("then_branch", A_GRAPH, f_bytes(6, inner_then)),
                              attr("else_branch", A_GRAPH, f_bytes(6, inner_else))])],
                       outputs=[value_info("r", FLOAT, [2])])
    outer_else = graph("outer_else", [], outputs=[value_info("x")])
    g = graph("if_main",
              [node("Constant", [], ["cst"], "", [attr("value_ints", A_INTS, f_packed_ints(8, [1, 2]))]),
               node("If", ["c"], ["out"], "outer_if",
                    [attr("then_branch", A_GRAPH, f_bytes(6, outer_then)),
                     attr("else_branch", A_GRAPH, f_bytes(6, outer_else))])],
              inputs=[value_info("c", 9, []), value_info("c2", 9, []), value_info("x", FLOAT, [2])],
              outputs=[value_info("out", FLOAT, [2]), value_info("cst", INT64, [2])],
              inits=[tensor("w", FLOAT, [2], raw=struct.pack("<2f", 0.25, -4.0))])
    return model(g)


def tiny(extra_graph=b"", init=None, nodes=None, opsets=(("", 16),)):
    g = graph("tiny", nodes or [node("Relu", ["x"], ["y"], "relu_1")],
              inputs=[value_info("x", FLOAT, [4])], outputs=[value_info("y", FLOAT, [4])],
              inits=[init] if init else [], extra=extra_graph)
    return model(g, opsets=opsets)


BAD = {
    # name: (bytes, fragment the error message must contain)
    "bad_empty.onnx": (b"", "empty file"),
    "bad_truncated.onnx": (tiny()[:-7], "protobuf decoding failed"),
    "bad_garbage.onnx": (bytes((i * 73 + 41) % 256 for i in range(300)), "not a valid ONNX model"),
    "bad_unknown_field.onnx": (tiny(extra_graph=f_int(99, 1)), "unknown field 99"),
    "bad_external_data.onnx": (
        tiny(init=tensor("w", FLOAT, [4], extra=f_bytes(13, f_bytes(1, "location") + f_bytes(2, "w.bin"))
                         + f_int(14, 1))),
        "stored externally"),
    "bad_raw_size.onnx": (tiny(init=tensor("w", FLOAT, [4], raw=b"\0" * 5)), "raw_data holds 5 bytes"),
    "bad_undefined_input.onnx": (tiny(nodes=[node("Relu", ["nope"], ["y"], "relu_1")]),
                                 "node 'relu_1': input 'nope'"),
    "bad_scan.onnx": (tiny(nodes=[node("Scan", ["x"], ["y"], "scan_1",
                                       [attr("body", A_GRAPH, f_bytes(6, graph("b", [])))])]),
                      "node 'scan_1': graph attribute 'body'"),
    "bad_string_tensor.onnx": (tiny(init=tensor("s", STRING, [1], extra=f_bytes(6, "hi"))),
                               "string tensors are not supported"),
    "bad_no_opset.onnx": (tiny(opsets=()), "the model has no opset_import"),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {"good_loop.onnx": good_loop(), "good_if.onnx": good_if()}
    files.update({k: v[0] for k, v in BAD.items()})
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "bad_expect.txt"), "w") as f:
        for name, (_, frag) in BAD.items():
            f.write(f"{name}\t{frag}\n")


if __name__ == "__main__":
    main()
