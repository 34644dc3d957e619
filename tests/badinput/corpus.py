#!/usr/bin/env python3
"""corpus.py - kiln's bad-input corpus (docs/testing.md, "Bad input").

    corpus.py KILN TEST_PLUGIN_DIR SOURCE_DIR [CASE_REGEX]

Every case is one `kiln` command on one defective input -- a graph JSON, an ONNX
file, a manifest, a plugin, a command line or a `kiln run` input -- built here
in a scratch directory (nothing is read from outside the repository).  For
each case the runner checks:

  * the exit status (1 for bad input, 2 for a usage error; a few cases whose
    input is legal but hostile expect 0; a plugin that crashes is expected to
    take the process down with a report naming the plugin, pass and node);
  * a regular expression the message on stderr must match: it names the file,
    plugin, pass, node or option at fault and the reason;
  * no sanitizer report (AddressSanitizer, LeakSanitizer, UBSan "runtime
    error:") and no crash report, and no hang (a timeout per case);
  * the scratch directory afterwards: an output file that existed before the
    command is byte-identical, no output is created by a failing command, and
    no temporary file is left behind.

The cases are data below (CASES); every case names its category.  Exit status
0 when every case passes, 1 otherwise; the last line is 'N passed, M failed'.
Pure Python 3 standard library; ONNX files are written with the wire-format
helpers of tests/data/onnx/gen_models.py.
"""
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

KILN, TP, SRC = (os.path.abspath(a) for a in sys.argv[1:4])
FILTER = re.compile(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
TIMEOUT = int(os.environ.get("KILN_CORPUS_TIMEOUT", "60"))

_spec = importlib.util.spec_from_file_location(
    "gen_models", os.path.join(SRC, "tests", "data", "onnx", "gen_models.py"))
pb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pb)

FLOAT, INT32, INT64, BOOL = 1, 6, 7, 9

CASES = []


def case(name, argv, rc, msg, files=None, stdin=None, pre=("out.json",), created=()):
    """argv: the arguments after `kiln` ('{d}' is the scratch directory);
    files: {relative path: bytes|str|dict (JSON)} written first; pre: outputs
    that exist before the command and must be untouched unless rc == 0;
    created: files a successful command must create."""
    CASES.append(dict(name=name, argv=argv, rc=rc, msg=msg, files=files or {}, stdin=stdin,
                      pre=pre, created=created, env={}))


# --------------------------------------------------------------- graph JSON --

def gjson(nodes, **top):
    doc = {"kiln_graph": 1, "name": "g", "nodes": nodes}
    doc.update(top)
    return doc


def data(name="x", index=0, shape=(2,), dtype="float32", **attrs):
    a = {"index": index}
    a.update(attrs)
    return {"name": name, "type": "Data", "attrs": a,
            "outputs": [{"dtype": dtype, "shape": list(shape)}]}


def op(name, typ, inputs, shape=(2,), dtype="float32", **extra):
    n = {"name": name, "type": typ, "inputs": inputs,
         "outputs": [{"dtype": dtype, "shape": list(shape)}]}
    n.update(extra)
    return n


def netout(*inputs):
    return {"name": "out", "type": "NetOutput", "inputs": list(inputs)}


GOOD = gjson([data(), op("r", "Relu", ["x:0"]), netout("r:0")])


def graph_case(name, doc, msg, rc=1, verb="compile"):
    body = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
    argv = [verb, "{d}/in.json", "-o", "{d}/out.json"] if verb == "compile" else [verb, "{d}/in.json"]
    case("json/" + name, argv, rc, msg, files={"in.json": body})


graph_case("empty_file", "", r"in\.json")
graph_case("whitespace_only", "   \n\t\n", r"in\.json")
graph_case("array_root", "[]", r"in\.json.*object")
graph_case("string_root", '"kiln"', r"in\.json")
graph_case("truncated", json.dumps(GOOD)[:40], r"in\.json")
graph_case("trailing_garbage", json.dumps(GOOD) + "}", r"in\.json")
graph_case("nul_byte", json.dumps(GOOD)[:20] + "\0" + json.dumps(GOOD)[20:], r"in\.json")
graph_case("invalid_utf8", b'{"kiln_graph": 1, "name": "\xff\xfe", "nodes": []}', r"in\.json")
graph_case("deep_nesting", "[" * 100000 + "]" * 100000, r"in\.json")
graph_case("no_version", {"name": "g", "nodes": []}, r"in\.json.*kiln_graph")
graph_case("version_2", gjson([], kiln_graph=2), r"in\.json.*kiln_graph")
graph_case("version_string", gjson([], kiln_graph="1"), r"in\.json.*kiln_graph")
graph_case("version_float", gjson([], kiln_graph=1.5), r"in\.json.*kiln_graph")
graph_case("nodes_not_array", gjson({}), r"in\.json.*nodes")
graph_case("node_not_object", gjson([42]), r"in\.json.*nodes")
graph_case("node_no_name", gjson([{"type": "Relu", "outputs": [{}]}]), r"in\.json.*name")
graph_case("node_name_number", gjson([{"name": 7, "type": "Relu", "outputs": [{}]}]), r"in\.json.*name")
graph_case("node_empty_name", gjson([{"name": "", "type": "Relu", "outputs": [{}]}]), r"in\.json.*name")
graph_case("node_no_type", gjson([{"name": "a", "outputs": [{}]}]), r"in\.json.*type")
graph_case("unknown_node_key", gjson([dict(data(), colour="red")]), r"in\.json.*colour")
graph_case("unknown_top_key", gjson([], colour="red"), r"in\.json.*colour")
graph_case("dup_node_name", gjson([data(), data(index=1)]), r"in\.json.*duplicate.*[\"']x[\"']")
graph_case("input_unknown_producer", gjson([data(), op("r", "Relu", ["nope:0"]), netout("r")]),
           r"in\.json.*nope")
graph_case("input_bad_index", gjson([data(), op("r", "Relu", ["x:7"]), netout("r")]), r"in\.json.*output 7")
graph_case("input_negative_index", gjson([data(), op("r", "Relu", ["x:-1"]), netout("r")]), r"in\.json.*x:-1")
graph_case("input_huge_index", gjson([data(), op("r", "Relu", ["x:99999999999999999999999"]), netout("r")]),
           r"in\.json")
graph_case("input_empty_ref", gjson([data(), op("r", "Relu", [":0"]), netout("r")]), r"in\.json")
graph_case("input_not_string", gjson([data(), op("r", "Relu", [3]), netout("r")]), r"in\.json.*inputs")
graph_case("control_unknown", gjson([data(), dict(op("r", "Relu", ["x"]), control_inputs=["ghost"]),
                                     netout("r")]), r"in\.json.*ghost")
graph_case("data_cycle", gjson([op("a", "Relu", ["b"]), op("b", "Relu", ["a"]), netout("b")]),
           r"in\.json.*cycle")
graph_case("self_loop", gjson([op("a", "Add", ["a", "a"]), netout("a")]), r"in\.json.*cycle")
graph_case("control_cycle", gjson([data(), dict(op("a", "Relu", ["x"]), control_inputs=["b"]),
                                   dict(op("b", "Relu", ["x"]), control_inputs=["a"]), netout("a", "b")]),
           r"in\.json.*cycle")
graph_case("bad_dtype", gjson([data(dtype="float128"), netout("x")]), r"in\.json.*float128")
graph_case("dim_below_minus_one", gjson([data(shape=(2, -5)), netout("x")]), r"in\.json.*-5")
graph_case("dim_not_int", gjson([data(shape=(2, "n")), netout("x")]), r"in\.json.*shape")
graph_case("rank_huge", gjson([data(shape=(1,) * 5000), netout("x")]), r"in\.json.*(rank|shape|dims)")
graph_case("data_index_string", gjson([data(index="zero"), netout("x")]), r"in\.json.*index")
graph_case("data_index_negative", gjson([data(index=-3), netout("x")]), "", rc=0)  # checked by run
graph_case("ref_input_out_of_range",
           gjson([data(), dict(op("r", "Relu", ["x"]), outputs=[{"dtype": "float32", "shape": [2], "ref_input": 5}]),
                  netout("r")]),
           r"in\.json.*ref_input")
graph_case("attr_bad_typed_value", gjson([dict(data(), attrs={"index": 0, "k": {"type": "int", "value": "x"}}),
                                          netout("x")]), r"in\.json.*'?k'?")
graph_case("attr_unknown_type", gjson([dict(data(), attrs={"index": 0, "k": {"type": "quaternion", "value": 1}}),
                                       netout("x")]), r"in\.json.*quaternion")
graph_case("tensor_data_short", gjson([{"name": "c", "type": "Const", "outputs": [{"dtype": "float32", "shape": [3]}],
                                        "attrs": {"value": {"type": "tensor", "value": {
                                            "dtype": "float32", "shape": [3], "data": [1, 2]}}}},
                                       netout("c")]), r"in\.json")
graph_case("tensor_bad_base64", gjson([{"name": "c", "type": "Const", "outputs": [{"dtype": "float32", "shape": [1]}],
                                        "attrs": {"value": {"type": "tensor", "value": {
                                            "dtype": "float32", "shape": [1], "base64": "!!!!"}}}},
                                       netout("c")]), r"in\.json")
graph_case("tensor_numel_overflow", gjson([{"name": "c", "type": "Const",
                                            "outputs": [{"dtype": "float32", "shape": [1]}],
                                            "attrs": {"value": {"type": "tensor", "value": {
                                                "dtype": "float32", "shape": [4611686018427387904, 4611686018427387904],
                                                "data": []}}}}, netout("c")]), r"in\.json")
graph_case("subgraph_not_object", gjson([data(), dict(op("w", "While", ["x"]), subgraphs={"body": 3}),
                                         netout("w")]), r"in\.json.*(body|subgraph)")
graph_case("subgraph_no_netoutput",
           gjson([data(), dict(op("w", "While", ["x"]),
                               subgraphs={"cond": {"name": "c", "nodes": []},
                                          "body": {"name": "b", "nodes": []}}), netout("w")]),
           r"in\.json.*NetOutput")
graph_case("parent_index_out_of_range",
           gjson([data(), dict(op("i", "If", ["x"]),
                               subgraphs={"then_branch": {"name": "t", "nodes": [
                                   dict(data("a", 0), attrs={"index": 0, "_parent_node_index": 9}), netout("a")]},
                                          "else_branch": {"name": "e", "nodes": [
                                   dict(data("a", 0), attrs={"index": 0, "_parent_node_index": 0}), netout("a")]}}),
                  netout("i")]), r"in\.json.*_parent_node_index")
graph_case("big_number", gjson([data(index=1e400), netout("x")]), r"in\.json")
graph_case("dup_key", '{"kiln_graph": 1, "kiln_graph": 1, "name": "g", "nodes": []}', r"in\.json")
graph_case("lint_cycle", gjson([op("a", "Relu", ["b"]), op("b", "Relu", ["a"]), netout("b")]),
           r"in\.json.*cycle", verb="lint")
graph_case("lint_empty", "", r"in\.json", verb="lint")

# -------------------------------------------------------------------- ONNX --

def tiny(nodes=None, inputs=None, outputs=None, inits=(), opsets=(("", 16),), extra_graph=b"",
         extra_model=b""):
    g = pb.graph("tiny", nodes if nodes is not None else [pb.node("Relu", ["x"], ["y"], "relu_1")],
                 inputs=inputs if inputs is not None else [pb.value_info("x", FLOAT, [4])],
                 outputs=outputs if outputs is not None else [pb.value_info("y", FLOAT, [4])],
                 inits=list(inits), extra=extra_graph)
    return pb.model(g, opsets=opsets, extra=extra_model)


def onnx_case(name, blob, msg, rc=1, verb="compile"):
    argv = {"compile": ["compile", "{d}/m.onnx", "-o", "{d}/out.json"],
            "convert": ["convert", "{d}/m.onnx", "{d}/out.json"],
            "run": ["run", "{d}/m.onnx", "--input", "x={d}/x.bin", "--output-dir", "{d}/outdir"],
            "lint": ["lint", "{d}/m.onnx"]}[verb]
    files = {"m.onnx": blob}
    if verb == "run":
        files.update({"x.bin": struct.pack("<4f", 1, -2, 3, -4), "x.bin.json": '{"dims": [4], "dtype": "float32"}',
                      "outdir/output.0.bin": b"PRE"})
    case("onnx/" + name, argv, rc, msg, files=files, pre=("out.json", "outdir/output.0.bin"))


GOOD_ONNX = tiny()
onnx_case("empty", b"", r"m\.onnx.*empty")
onnx_case("one_byte", b"\x08", r"m\.onnx")
onnx_case("garbage", bytes((i * 73 + 41) % 256 for i in range(512)), r"m\.onnx")
onnx_case("json_text", json.dumps(GOOD).encode(), r"m\.onnx")
for cut in (3, 11, 29, len(GOOD_ONNX) // 2, len(GOOD_ONNX) - 1):
    onnx_case("truncated_at_%d" % cut, GOOD_ONNX[:cut], r"m\.onnx")
onnx_case("varint_overlong", pb.key(1, 0) + b"\xff" * 11 + b"\x01", r"m\.onnx")
onnx_case("length_past_end", pb.key(7, 2) + pb.varint(1 << 40) + b"abc", r"m\.onnx")
onnx_case("wrong_wire_type", pb.key(7, 0) + pb.varint(5), r"m\.onnx")
onnx_case("no_graph", pb.f_int(1, 8) + pb.f_bytes(8, pb.f_bytes(1, "") + pb.f_int(2, 16)), r"m\.onnx.*graph")
onnx_case("no_opset_import", pb.f_int(1, 8) + pb.f_bytes(7, pb.graph(
    "g", [pb.node("Relu", ["x"], ["y"], "r")], inputs=[pb.value_info("x", FLOAT, [4])],
    outputs=[pb.value_info("y", FLOAT, [4])])), r"m\.onnx.*opset")
onnx_case("opset_zero", tiny(opsets=(("", 0),)), r"m\.onnx.*opset")
onnx_case("unknown_field", tiny(extra_graph=pb.f_int(99, 1)), r"m\.onnx.*unknown field 99")
onnx_case("undefined_input", tiny(nodes=[pb.node("Relu", ["nope"], ["y"], "relu_1")]), r"m\.onnx.*nope")
onnx_case("output_never_produced", tiny(outputs=[pb.value_info("zz", FLOAT, [4])]), r"m\.onnx.*zz")
onnx_case("duplicate_output_name", tiny(nodes=[pb.node("Relu", ["x"], ["y"], "a"),
                                               pb.node("Relu", ["x"], ["y"], "b")]), r"m\.onnx.*'?y'?")
onnx_case("raw_size_mismatch", tiny(inits=[pb.tensor("w", FLOAT, [4], raw=b"\0" * 5)]), r"m\.onnx.*raw_data")
onnx_case("tensor_dims_overflow", tiny(inits=[pb.tensor("w", FLOAT, [1 << 62, 1 << 62], raw=b"")]), r"m\.onnx.*w")
onnx_case("tensor_negative_dim", tiny(inits=[pb.tensor("w", FLOAT, [-4], floats=[1, 2, 3, 4])]), r"m\.onnx.*w")
onnx_case("float_data_count", tiny(inits=[pb.tensor("w", FLOAT, [4], floats=[1.0])]), r"m\.onnx.*w")
onnx_case("input_rank_5000", tiny(inputs=[pb.value_info("x", FLOAT, [1] * 5000)]), r"m\.onnx.*(rank|dims)")
onnx_case("tensor_rank_5000", tiny(inits=[pb.tensor("w", FLOAT, [1] * 5000, floats=[1.0])]), r"m\.onnx.*(rank|dims)")
onnx_case("external_data", tiny(inits=[pb.tensor("w", FLOAT, [4], extra=pb.f_bytes(
    13, pb.f_bytes(1, "location") + pb.f_bytes(2, "w.bin")) + pb.f_int(14, 1))]), r"m\.onnx.*external")
onnx_case("string_tensor", tiny(inits=[pb.tensor("s", 8, [1], extra=pb.f_bytes(6, "hi"))]), r"m\.onnx.*string")
onnx_case("unknown_dtype", tiny(inits=[pb.tensor("w", 77, [1], raw=b"\0")]), r"m\.onnx.*(77|type)")
onnx_case("if_without_branches", tiny(inputs=[pb.value_info("x", FLOAT, [4]), pb.value_info("c", BOOL, [])],
                                      nodes=[pb.node("If", ["c"], ["y"], "if_1")]), r"m\.onnx.*if_1")
onnx_case("loop_without_body", tiny(nodes=[pb.node("Loop", ["", "", "x"], ["y"], "loop_1")]), r"m\.onnx.*loop_1")
onnx_case("graph_attr_empty", tiny(nodes=[pb.node("Loop", ["", "", "x"], ["y"], "loop_1", [
    pb.attr("body", pb.A_GRAPH, pb.f_bytes(6, pb.graph("b", [])))])]), r"m\.onnx.*loop_1")


def deep_if_model(depth):
    """If nodes nested @p depth deep through their then-branches, in O(depth):
    the nested graph is always the last field of its message, so every level
    is a prefix (fields, then the inner message's key and length) in front of
    the inner bytes."""
    leaf = pb.graph("leaf", [pb.node("Relu", ["x"], ["y"], "leaf_relu")],
                    outputs=[pb.value_info("y", FLOAT, [4])])
    other = pb.attr("else_branch", pb.A_GRAPH, pb.f_bytes(6, leaf))
    prefixes, size = [], len(leaf)
    for i in range(depth):
        attr_p = pb.f_bytes(1, "then_branch") + pb.f_int(20, pb.A_GRAPH) + pb.key(6, 2) + pb.varint(size)
        attr_len = len(attr_p) + size
        node_p = (pb.f_bytes(1, "c") + pb.f_bytes(2, "y") + pb.f_bytes(3, "if_%d" % i) + pb.f_bytes(4, "If")
                  + pb.f_bytes(5, other) + pb.key(5, 2) + pb.varint(attr_len))
        node_len = len(node_p) + attr_len
        graph_p = (pb.f_bytes(2, "g%d" % i) + pb.f_bytes(12, pb.value_info("y", FLOAT, [4]))
                   + pb.key(1, 2) + pb.varint(node_len))
        prefixes.append(graph_p + node_p + attr_p)
        size = len(graph_p) + node_len
    inner = b"".join(reversed(prefixes)) + leaf
    top = pb.graph("top", [pb.node("If", ["c"], ["y"], "top_if", [
        pb.attr("then_branch", pb.A_GRAPH, pb.f_bytes(6, inner)), other])],
        inputs=[pb.value_info("x", FLOAT, [4]), pb.value_info("c", BOOL, [])],
        outputs=[pb.value_info("y", FLOAT, [4])])
    return pb.model(top)


onnx_case("if_nested_50000", deep_if_model(50000), r"m\.onnx.*(nest|deep|depth)")
onnx_case("unknown_op_compile", tiny(nodes=[pb.node("Frobnicate", ["x"], ["y"], "frob")]),
          r"no engine supports node frob \(op Frobnicate\): aicore: no op entry for Frobnicate")
onnx_case("unknown_op_run", tiny(nodes=[pb.node("Frobnicate", ["x"], ["y"], "frob")]), r"frob|Frobnicate",
          verb="run")
onnx_case("reshape_bad_shape", tiny(nodes=[pb.node("Reshape", ["x", "s"], ["y"], "rs")],
                                    inits=[pb.tensor("s", INT64, [2], int64s=[3, 3])]), r"rs", verb="run")
onnx_case("reshape_overflow", tiny(nodes=[pb.node("Reshape", ["x", "s"], ["y"], "rs")],
                                   inits=[pb.tensor("s", INT64, [2], int64s=[1 << 62, 1 << 62])]), r"rs", verb="run")
onnx_case("expand_overflow", tiny(nodes=[pb.node("Expand", ["x", "s"], ["y"], "ex")],
                                  inits=[pb.tensor("s", INT64, [3], int64s=[1 << 40, 1 << 40, 4])]), r"ex", verb="run")
onnx_case("conv_bad_rank", tiny(nodes=[pb.node("Conv", ["x", "w"], ["y"], "cv")],
                                inits=[pb.tensor("w", FLOAT, [1, 1], floats=[1.0])]), r"cv", verb="run")
onnx_case("matmul_mismatch", tiny(nodes=[pb.node("MatMul", ["x", "w"], ["y"], "mm")],
                                  inits=[pb.tensor("w", FLOAT, [3, 2], floats=[1.0] * 6)]), r"mm", verb="run")
onnx_case("concat_bad_axis", tiny(nodes=[pb.node("Concat", ["x", "x"], ["y"], "cc", [
    pb.attr("axis", pb.A_INT, pb.f_int(3, 7))])]), r"cc", verb="run")
onnx_case("gather_bad_axis", tiny(nodes=[pb.node("Gather", ["x", "i"], ["y"], "ga", [
    pb.attr("axis", pb.A_INT, pb.f_int(3, -9))])], inits=[pb.tensor("i", INT64, [1], int64s=[0])]), r"ga", verb="run")
onnx_case("transpose_bad_perm", tiny(nodes=[pb.node("Transpose", ["x"], ["y"], "tp", [
    pb.attr("perm", pb.A_INTS, pb.f_packed_ints(8, [0, 0]))])]), r"tp", verb="run")
onnx_case("lint_garbage", bytes(range(256)), r"m\.onnx", verb="lint")
onnx_case("convert_truncated", GOOD_ONNX[:len(GOOD_ONNX) // 2], r"m\.onnx", verb="convert")

# ---------------------------------------------------------------- manifests --


def manifest_case(name, doc, msg, rc=1, verb="check", extra=None):
    body = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
    files = {"man.json": body}
    files.update(extra or {})
    if verb == "check":
        argv = ["manifest", "check", "{d}/man.json"]
    elif verb == "compile":
        argv = ["compile", "{d}/g.json", "-m", "{d}/man.json", "-o", "{d}/out.json"]
        files["g.json"] = json.dumps(GOOD)
    else:
        argv = ["plugins", "-m", "{d}/man.json"]
    case("manifest/" + name, argv, rc, msg, files=files)


def tp(lib):
    return os.path.join(TP, "libtp_%s.so" % lib)


manifest_case("empty_file", "", r"man\.json")
manifest_case("not_json", "kiln!", r"man\.json")
manifest_case("array_root", "[]", r"man\.json")
manifest_case("no_version", {"plugins": []}, r"man\.json.*kiln_manifest")
manifest_case("version_9", {"kiln_manifest": 9}, r"man\.json.*kiln_manifest")
manifest_case("unknown_key", {"kiln_manifest": 1, "colour": "red"}, r"man\.json.*colour")
manifest_case("plugins_not_array", {"kiln_manifest": 1, "plugins": "x"}, r"man\.json.*plugins")
manifest_case("plugin_no_path", {"kiln_manifest": 1, "plugins": [{}]}, r"man\.json.*path")
manifest_case("plugin_missing", {"kiln_manifest": 1, "plugins": [{"path": "libnope.so"}]}, r"libnope\.so")
manifest_case("plugin_is_text", {"kiln_manifest": 1, "plugins": [{"path": "{d}/fake.so"}]}, r"fake\.so",
              extra={"fake.so": "not an ELF file\n"})
manifest_case("plugin_is_directory", {"kiln_manifest": 1, "plugins": [{"path": "{d}/adir"}]}, r"adir",
              extra={"adir/keep": ""})
manifest_case("plugin_empty_file", {"kiln_manifest": 1, "plugins": [{"path": "{d}/empty.so"}]}, r"empty\.so",
              extra={"empty.so": ""})
manifest_case("plugin_no_entry", {"kiln_manifest": 1, "plugins": [{"path": tp("no_entry")}]},
              r"libtp_no_entry\.so.*entry")
manifest_case("plugin_wrong_major", {"kiln_manifest": 1, "plugins": [{"path": tp("wrong_major")}]},
              r"libtp_wrong_major\.so.*(major|version|ABI)")
manifest_case("plugin_newer_minor", {"kiln_manifest": 1, "plugins": [{"path": tp("newer_minor")}]},
              r"libtp_newer_minor\.so.*(minor|version)")
manifest_case("plugin_init_fail", {"kiln_manifest": 1, "plugins": [{"path": tp("init_fail")}]},
              r"libtp_init_fail\.so")
manifest_case("plugin_unresolved", {"kiln_manifest": 1, "plugins": [{"path": tp("unresolved")}]},
              r"libtp_unresolved\.so")
manifest_case("plugin_short_size", {"kiln_manifest": 1, "plugins": [{"path": tp("short_size")}]},
              r"libtp_short_size\.so")
manifest_case("plugin_duplicate", {"kiln_manifest": 1, "plugins": [{"path": tp("good")}, {"path": tp("dup")}]},
              r"libtp_dup\.so")
manifest_case("plugin_twice", {"kiln_manifest": 1, "plugins": [{"path": tp("good")}, {"path": tp("good")}]},
              "", rc=0)
manifest_case("stages_not_object", {"kiln_manifest": 1, "stages": []}, r"man\.json.*stages")
manifest_case("unknown_stage", {"kiln_manifest": 1, "stages": {"teatime": []}}, r"man\.json.*teatime")
manifest_case("unknown_pass", {"kiln_manifest": 1, "stages": {"prepare": ["NoSuchPass"]}}, r"man\.json.*NoSuchPass")
manifest_case("pass_not_string", {"kiln_manifest": 1, "stages": {"prepare": [7]}}, r"man\.json.*prepare")
manifest_case("extends_missing", {"kiln_manifest": 1, "extends": "nope.json"}, r"nope\.json")
manifest_case("extends_self", {"kiln_manifest": 1, "extends": "man.json"}, r"man\.json.*(cycle|itself|extends)")
manifest_case("extends_cycle", {"kiln_manifest": 1, "extends": "b.json"}, r"(man|b)\.json.*(cycle|extends)",
              extra={"b.json": json.dumps({"kiln_manifest": 1, "extends": "man.json"})})
manifest_case("options_not_object", {"kiln_manifest": 1, "options": 5}, r"man\.json.*options")
manifest_case("bad_selector_regex", {"kiln_manifest": 1, "disable": ["(unclosed"]}, r"man\.json")
manifest_case("plugins_list_bad_manifest", "{", r"man\.json", verb="plugins")
manifest_case("compile_with_bad_manifest", {"kiln_manifest": 1, "stages": {"prepare": ["Nope"]}},
              r"man\.json.*Nope", verb="compile")
manifest_case("manifest_is_directory", None, r"mdir.*directory", verb="check")
CASES[-1]["argv"] = ["manifest", "check", "{d}/mdir"]
CASES[-1]["files"] = {"mdir/x": ""}
CASES.append(dict(name="plugin/crash_in_pass", argv=["opt", "{d}/g.json", "-m", "{d}/man.json", "--passes", "CrashPass",
                                                  "-o", "{d}/out.json"],
                  rc="signal", msg=r"plugin kiln\.test\.crash.*pass CrashPass.*node boom",
                  files={"g.json": json.dumps(gjson([data(), op("boom", "Relu", ["x"]), netout("boom")])),
                         "man.json": json.dumps({"kiln_manifest": 1, "plugins": [{"path": tp("crash")}]})},
                  stdin=None, pre=("out.json",), created=(), env={"ASAN_OPTIONS": "handle_segv=0"}))

# ------------------------------------------------------------ command line --

G = {"in.json": json.dumps(GOOD)}


def cli_case(name, argv, rc, msg, files=None, **kw):
    f = dict(G)
    f.update(files or {})
    case("cli/" + name, argv, rc, msg, files=f, **kw)


cli_case("unknown_verb", ["frobnicate"], 2, r"unknown verb")
cli_case("no_output", ["compile", "{d}/in.json"], 2, r"-o")
cli_case("missing_model", ["compile", "{d}/nope.json", "-o", "{d}/out.json"], 1, r"nope\.json")
cli_case("model_is_directory", ["compile", "{d}/sub", "-o", "{d}/out.json"], 1, r"sub.*directory",
         files={"sub/x": ""})
cli_case("output_no_extension", ["compile", "{d}/in.json", "-o", "{d}/out"], 1, r"out", pre=("out.json", "out"))
cli_case("output_is_directory", ["compile", "{d}/in.json", "-o", "{d}/odir"], 2, r"odir",
         files={"odir/keep": ""})
cli_case("input_no_extension", ["compile", "{d}/model", "-o", "{d}/out.json"], 1, r"model",
         files={"model": json.dumps(GOOD)})
cli_case("output_equals_input", ["compile", "{d}/in.json", "-o", "{d}/in.json"], 2, r"in\.json",
         pre=("out.json",))
cli_case("output_equals_input_via_dotdot", ["compile", "{d}/in.json", "-o", "{d}/sub/../in.json"], 2, r"in\.json",
         files={"sub/x": ""})
cli_case("unknown_output_format", ["compile", "{d}/in.json", "-o", "{d}/out.xyz"], 1, r"xyz", pre=("out.xyz",))
cli_case("report_unwritable", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--report", "{d}/nodir/r.json"],
         1, r"nodir")
cli_case("report_is_directory", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--report", "{d}/rdir"],
         2, r"rdir.*directory", files={"rdir/keep": ""})
cli_case("pass_opt_malformed", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--pass-opt", "nodot"], 2,
         r"--pass-opt")
cli_case("pass_opt_no_value", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--pass-opt", "P.k"], 2,
         r"--pass-opt")
cli_case("option_malformed", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--option", "novalue"], 2,
         r"--option")
cli_case("option_empty_key", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--option", "=v"], 2, r"--option")
cli_case("jobs_zero", ["compile", "{d}/in.json", "-o", "{d}/out.json", "-j", "0"], 2, r"-j")
cli_case("jobs_text", ["compile", "{d}/in.json", "-o", "{d}/out.json", "-j", "many"], 2, r"-j")
cli_case("bisect_text", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--bisect-limit", "x"], 2, r"bisect")
cli_case("bad_disable_regex", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--disable-pass", "(unclosed"],
         1, r"\(unclosed")
cli_case("bad_print_after_regex", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--print-after", "[z-a]"],
         1, r"\[z-a\]")
cli_case("dump_dir_is_file", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--print-after", ".*",
                              "--dump-dir", "{d}/in.json"], 1, r"in\.json")
cli_case("build_step_unknown", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--build-mode", "tuning",
                                "--build-step", "lunch"], 2, r"lunch")
cli_case("build_mode_unknown", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--build-mode", "fast"], 2,
         r"fast")
cli_case("resume_missing", ["compile", "--resume", "{d}/nostate.json", "-o", "{d}/out.json"], 1, r"nostate\.json")
cli_case("resume_garbage", ["compile", "--resume", "{d}/state.json", "-o", "{d}/out.json"], 1, r"state\.json",
         files={"state.json": "{\"kiln_tuning_state\""})
cli_case("resume_not_a_state", ["compile", "--resume", "{d}/in.json", "-o", "{d}/out.json"], 1, r"in\.json")
cli_case("resume_directory", ["compile", "--resume", "{d}/sdir", "-o", "{d}/out.json"], 1, r"sdir.*directory",
         files={"sdir/x": ""})
cli_case("tuner_unknown", ["compile", "{d}/in.json", "-o", "{d}/out.json", "--tuner", "NoTuner"], 1, r"NoTuner")
cli_case("passes_unknown", ["opt", "{d}/in.json", "--passes", "NoSuchPass", "-o", "{d}/out.json"], 1, r"NoSuchPass")
cli_case("passes_empty_item", ["opt", "{d}/in.json", "--passes", "PruneGraphPass,,", "-o", "{d}/out.json"], 1,
         r"passes")
cli_case("convert_one_arg", ["convert", "{d}/in.json"], 2, r"convert")
cli_case("convert_same_file", ["convert", "{d}/in.json", "{d}/in.json"], 2, r"in\.json.*same file|in\.json.*input")
cli_case("stdin_garbage", ["compile", "-", "-o", "{d}/out.json"], 1, r"(stdin|-)", stdin=b"\x00\x01garbage")
cli_case("plugins_unknown_name", ["plugins", "NoSuchComponent"], 1, r"NoSuchComponent")
cli_case("manifest_check_missing", ["manifest", "check", "{d}/none.json"], 1, r"none\.json")
cli_case("manifest_no_subverb", ["manifest"], 2, r"manifest")

# ----------------------------------------------------------------- kiln run --

RUNG = gjson([data("x", 0, (2, 3)), data("y", 1, (2, 3)), op("a", "Add", ["x", "y"], (2, 3)),
              netout("a")])


def raw(values, dims, dtype="float32"):
    fmt = {"float32": "f", "int64": "q", "int32": "i"}[dtype]
    return struct.pack("<%d%s" % (len(values), fmt), *values), json.dumps({"dims": dims, "dtype": dtype})


X_BIN, X_JSON = raw([1.0] * 6, [2, 3])


def npy(header, payload=b"", magic=b"\x93NUMPY", ver=b"\x01\x00"):
    h = header.encode()
    pad = 16 - (len(magic) + 2 + 2 + len(h) + 1) % 16
    h = h + b" " * (pad % 16) + b"\n"
    return magic + ver + struct.pack("<H", len(h)) + h + payload


def run_case(name, args, rc, msg, files=None, graph=RUNG, outdir=True):
    f = {"g.json": json.dumps(graph), "x.bin": X_BIN, "x.bin.json": X_JSON, "outdir/output.0.bin": b"PRE"}
    f.update(files or {})
    argv = ["run", "{d}/g.json"] + args + (["--output-dir", "{d}/outdir"] if outdir else [])
    case("run/" + name, argv, rc, msg, files=f, pre=("outdir/output.0.bin",))


run_case("missing_all_inputs", [], 1, r"\bx\b.*\by\b.*float32.*\[2, ?3\]")
run_case("missing_one_input", ["--input", "x={d}/x.bin"], 1, r"'?y'?")
run_case("input_file_missing", ["--input", "x={d}/nope.bin", "--input", "y={d}/x.bin"], 1, r"nope\.bin")
run_case("input_is_directory", ["--input", "x={d}/idir", "--input", "y={d}/x.bin"], 1, r"idir.*directory",
         files={"idir/k": ""})
run_case("sidecar_missing", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN})
run_case("sidecar_malformed", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN, "s.bin.json": "{dims"})
run_case("sidecar_no_dtype", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin.*dtype",
         files={"s.bin": X_BIN, "s.bin.json": json.dumps({"dims": [2, 3]})})
run_case("sidecar_bad_dtype", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin.*float99",
         files={"s.bin": X_BIN, "s.bin.json": json.dumps({"dims": [2, 3], "dtype": "float99"})})
run_case("sidecar_negative_dim", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN, "s.bin.json": json.dumps({"dims": [-2, 3], "dtype": "float32"})})
run_case("sidecar_dims_overflow", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN, "s.bin.json": json.dumps({"dims": [1 << 62, 1 << 62], "dtype": "float32"})})
run_case("raw_too_short", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN[:10], "s.bin.json": X_JSON})
run_case("raw_too_long", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"s\.bin",
         files={"s.bin": X_BIN + b"\0", "s.bin.json": X_JSON})
run_case("dtype_mismatch", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"'?x'?.*(dtype|int64|float32)",
         files=dict(zip(("s.bin", "s.bin.json"), raw([1] * 6, [2, 3], "int64"))))
run_case("dims_mismatch", ["--input", "x={d}/s.bin", "--input", "y={d}/x.bin"], 1, r"'?x'?.*(dim|shape|\[)",
         files=dict(zip(("s.bin", "s.bin.json"), raw([1.0] * 6, [3, 2]))))
run_case("unknown_input_name", ["--input", "zz={d}/x.bin", "--input", "y={d}/x.bin"], 1, r"zz")
run_case("input_twice", ["--input", "x={d}/x.bin", "--input", "x={d}/x.bin", "--input", "y={d}/x.bin"], 1, r"'?x'?")
run_case("too_many_bare_inputs", ["--input", "{d}/x.bin", "--input", "{d}/x.bin", "--input", "{d}/x.bin"], 1,
         r"x\.bin")
run_case("npy_bad_magic", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", X_BIN, magic=b"\x93NUMPX")})
run_case("npy_truncated_header", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": b"\x93NUMPY\x01\x00\xff\x00{'descr'"})
run_case("npy_fortran", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy.*fortran",
         files={"a.npy": npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", X_BIN)})
run_case("npy_big_endian", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", X_BIN)})
run_case("npy_object_dtype", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", X_BIN)})
run_case("npy_short_data", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", X_BIN[:8])})
run_case("npy_shape_overflow", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", X_BIN)})
run_case("npy_bad_version", ["--input", "x={d}/a.npy", "--input", "y={d}/x.bin"], 1, r"a\.npy",
         files={"a.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", X_BIN, ver=b"\x09\x00")})
run_case("output_dir_is_file", ["--input", "x={d}/x.bin", "--input", "y={d}/x.bin", "--output-dir", "{d}/x.bin"],
         1, r"x\.bin", outdir=False)
run_case("repeat_zero", ["--input", "x={d}/x.bin", "--input", "y={d}/x.bin", "--repeat", "0"], 2, r"repeat")
run_case("input_without_file", ["--input", "x="], 2, r"--input.*x=")
run_case("missing_dynamic_input", ["--input", "x={d}/x.bin"], 1, r"\by\b.*float32",
         graph=gjson([data("x", 0, (2, 3)), data("y", 1, (-1, 3)), op("a", "Add", ["x", "y"], (-1, 3)),
                      netout("a")]))
BIG = 1 << 20
COL_BIN, COL_JSON = b"\0" * (4 * BIG), json.dumps({"dims": [BIG, 1], "dtype": "float32"})
ROW_JSON = json.dumps({"dims": [1, BIG], "dtype": "float32"})
run_case("huge_buffer", ["--input", "c={d}/c.bin", "--input", "r={d}/r.bin"], 1, r"node a.*max-memory",
         graph=gjson([data("c", 0, (BIG, 1)), data("r", 1, (1, BIG)), op("a", "Add", ["c", "r"], (BIG, BIG)),
                      netout("a")]),
         files={"c.bin": COL_BIN, "c.bin.json": COL_JSON, "r.bin": COL_BIN, "r.bin.json": ROW_JSON})

I32_MIN = -2 ** 31
DIVG = gjson([data("a", 0, (2,), "int32"), data("b", 1, (2,), "int32"),
              op("q", "Div", ["a", "b"], (2,), "int32"), netout("q")])
A_BIN, A_JSON = raw([I32_MIN, 7], [2], "int32")
B_BIN, B_JSON = raw([-1, 0], [2], "int32")
# defined two's-complement results (docs/shape_inference.md): INT_MIN / -1 = INT_MIN, x / 0 = 0
run_case("int_div_min_by_minus_one_and_zero", ["--input", "a={d}/a.bin", "--input", "b={d}/b.bin"], 0,
         "", graph=DIVG,
         files={"a.bin": A_BIN, "a.bin.json": A_JSON, "b.bin": B_BIN, "b.bin.json": B_JSON})

# --------------------------------------------------------------- the runner --

SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer|"
                       r"ThreadSanitizer|Segmentation fault|core dumped|kiln: crash|kiln itself")
TEMP = re.compile(r"\.tmp|kiln-tmp|\.part$|~$")


def msg_matches(pattern, text):
    """Every '.*'-separated part of @p pattern occurs in @p text (any order,
    ignoring case); a pattern whose parts are not regexes on their own is
    searched whole."""
    parts = pattern.split(".*")
    try:
        regs = [re.compile(p, re.I) for p in parts]
    except re.error:
        return re.search(pattern, text, re.S | re.I) is not None
    return all(r.search(text) for r in regs)


def snapshot(root):
    out = {}
    for dp, _, fns in os.walk(root):
        for fn in fns:
            p = os.path.join(dp, fn)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def write_files(d, files):
    for rel, body in files.items():
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.replace("{d}", d).encode()
        with open(p, "wb") as f:
            f.write(body)


def run(c):
    d = tempfile.mkdtemp(prefix="kiln-corpus-")
    try:
        write_files(d, c["files"])
        for rel in c["pre"]:
            p = os.path.join(d, rel)
            if not os.path.lexists(p) and os.path.isdir(os.path.dirname(p)):
                write_files(d, {rel: b"PRE-EXISTING OUTPUT " + rel.encode() + b"\n"})
        before = snapshot(d)
        argv = [KILN] + [a.replace("{d}", d) for a in c["argv"]]
        try:
            env = dict(os.environ)
            env.update(c["env"])
            p = subprocess.run(argv, input=c["stdin"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=TIMEOUT, cwd=d, env=env)
        except subprocess.TimeoutExpired:
            return ["hung (no exit within %d s)" % TIMEOUT], ""
        err = p.stderr.decode(errors="replace")
        probs = []
        crashed = p.returncode < 0 or p.returncode >= 128
        if c["rc"] == "signal" and not crashed:
            probs.append("exit %d, expected death by a signal" % p.returncode)
        elif c["rc"] != "signal" and p.returncode != c["rc"]:
            probs.append("exit %d, expected %d" % (p.returncode, c["rc"]))
        if c["msg"] and not msg_matches(c["msg"], err):
            probs.append("message does not match /%s/" % c["msg"])
        if c["rc"] != "signal" and SANITIZER.search(err):
            probs.append("sanitizer or crash report")
        if len(err) > 20000:
            probs.append("message is %d bytes" % len(err))
        after = snapshot(d)
        if p.returncode != 0:
            for rel, h in before.items():
                if after.get(rel) != h:
                    probs.append("pre-existing file %s changed" % rel)
            for rel in after:
                if rel not in before:
                    probs.append("left %s behind" % rel)
        for rel in after:
            if TEMP.search(os.path.basename(rel)) and rel not in before:
                probs.append("temporary %s left behind" % rel)
        return probs, err
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    npass = nfail = 0
    names = set()
    for c in CASES:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        if FILTER and not FILTER.search(c["name"]):
            continue
        probs, err = run(c)
        if probs:
            nfail += 1
            tail = err.strip().splitlines()[-6:]
            print("FAIL %s: %s\n    %s" % (c["name"], "; ".join(probs), "\n    ".join(tail)))
        else:
            npass += 1
            if os.environ.get("KILN_CORPUS_VERBOSE"):
                print("PASS %s\n    %s" % (c["name"], "\n    ".join(err.strip().splitlines()[-3:])))
    print("bad-input corpus: %d cases" % (npass + nfail))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
