#!/usr/bin/env python3
"""gen_graphs.py OUTDIR - the small graphs of tests/e2e/engine_opt.sh (kiln JSON).

fuse.json   every aicore fusion applies: Conv+BatchNormalization (with and
            without a Conv bias), grouped ConvTranspose+BatchNormalization+Relu, Conv + Relu, LeakyRelu, Clip (Const bounds),
            HardSigmoid, HardSwish, Sigmoid, x*Sigmoid(x); MatMul + Add(Const)
            + Relu; Gemm + Add(Const) feeding the NetOutput (kept).
fuse_relu.json  the same with a Relu for the HardSwish (runs unfused too).
hswish.json  Conv 1x1 + HardSwish (only runs fused: no engine lists HardSwish).
block.json  one blocking condition each: a BatchNormalization marked
            _cannot_be_deleted (bn_keep), a Conv with two consumers (bn_two),
            a BatchNormalization whose var is no Const (bn_var), a Relu pinned
            to the vector engine (relu_pin), a Relu feeding the NetOutput
            (relu_out), an Add whose bias is no Const (add_var), a Clip with a
            non-Const bound (clip_var), a BatchNormalization after a Conv that
            already applies a fused Relu (bn_act).  Inputs: x [1,3,5,5], var [4], lo [], bias [3].
Weights are deterministic pseudo-random (a fixed LCG), no numpy.
"""
import json, math, os, sys

state = [12345]
def rnd(n, lo=-1.0, hi=1.0):
    out = []
    for _ in range(n):
        state[0] = (state[0] * 1103515245 + 12345) % (1 << 31)
        out.append(round(lo + (hi - lo) * state[0] / float(1 << 31), 6))
    return out

def const(name, shape, data):
    return {"name": name, "type": "Const", "outputs": [{"dtype": "float32", "shape": shape}],
            "attrs": {"value": {"type": "tensor", "value": {"dtype": "float32", "shape": shape, "data": data}}}}

def f32(shape):
    return [{"dtype": "float32", "shape": shape}]

class G:
    def __init__(self, name, doc):
        self.name, self.doc, self.nodes = name, doc, []
    def add(self, n):
        self.nodes.append(n)
        return n["name"] + ":0"
    def conv(self, name, x, cin, cout, shape, bias=True, k=3, attrs=None):
        ins = [x, self.add(const(name + "_w", [cout, cin, k, k], rnd(cout * cin * k * k, -0.5, 0.5)))]
        if bias:
            ins.append(self.add(const(name + "_b", [cout], rnd(cout))))
        p = k // 2
        return self.add({"name": name, "type": "Conv", "inputs": ins, "outputs": f32(shape),
                         "attrs": dict({"kernel_shape": [k, k], "pads": [p, p, p, p],
                                        "strides": [1, 1]}, **(attrs or {}))})
    def bn(self, name, x, c, shape, var_input=None, attrs=None):
        ins = [x, self.add(const(name + "_s", [c], rnd(c, 0.5, 1.5))),
               self.add(const(name + "_bias", [c], rnd(c))),
               self.add(const(name + "_mean", [c], rnd(c, -0.2, 0.2)))]
        ins.append(var_input or self.add(const(name + "_var", [c], rnd(c, 0.5, 2.0))))
        a = {"epsilon": 1e-5}
        a.update(attrs or {})
        return self.add({"name": name, "type": "BatchNormalization", "inputs": ins,
                         "outputs": f32(shape), "attrs": a})
    def op(self, name, op, ins, shape, attrs=None, engine=None):
        n = {"name": name, "type": op, "inputs": ins, "outputs": f32(shape)}
        if attrs:
            n["attrs"] = attrs
        if engine:
            n["engine"] = engine
        return self.add(n)
    def dump(self, path, outs):
        self.nodes.append({"name": "out", "type": "NetOutput", "inputs": outs})
        json.dump({"kiln_graph": 1, "name": self.name, "x-doc": self.doc, "nodes": self.nodes},
                  open(path, "w"), indent=1)

def fuse(path, hswish="HardSwish"):
    S = [2, 4, 6, 6]
    g = G("engine_opt_fuse", "tests/e2e/engine_opt.sh: every aicore fusion applies")
    state[0] = 12345
    x = g.add({"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": f32([2, 3, 6, 6])})
    v = g.conv("conv1", x, 3, 4, S)
    v = g.bn("bn1", v, 4, S)
    v = g.op("relu1", "Relu", [v], S)
    v = g.conv("conv2", v, 4, 4, S, bias=False, k=1)
    v = g.bn("bn2", v, 4, S)
    v = g.op("leaky", "LeakyRelu", [v], S, {"alpha": 0.1})
    v = g.conv("conv3", v, 4, 4, S)
    lo = g.add(const("clip_lo", [], [0.0]))
    hi = g.add(const("clip_hi", [], [0.25]))
    v = g.op("clip", "Clip", [v, lo, hi], S)
    v = g.conv("conv4", v, 4, 4, S)
    v = g.op("hsig", "HardSigmoid", [v], S, {"alpha": 0.3, "beta": 0.4})
    v = g.conv("conv5", v, 4, 4, S)
    v = g.op("hswish", hswish, [v], S)
    v = g.conv("conv6", v, 4, 4, S)
    v = g.op("sig", "Sigmoid", [v], S)
    v = g.conv("conv7", v, 4, 4, S)
    s = g.op("swish_s", "Sigmoid", [v], S)
    v = g.op("swish_m", "Mul", [v, s], S)
    T = [2, 6, 12, 12]
    v = g.op("convt", "ConvTranspose", [v, g.add(const("convt_w", [4, 3, 2, 2], rnd(48, -0.5, 0.5))),
                                          g.add(const("convt_b", [6], rnd(6)))], T,
             {"kernel_shape": [2, 2], "strides": [2, 2], "group": 2})
    v = g.bn("bn_t", v, 6, T)
    v = g.op("relu_t", "Relu", [v], T)
    v = g.op("gap", "GlobalAveragePool", [v], [2, 6, 1, 1])
    v = g.op("flat", "Flatten", [v], [2, 6], {"axis": 1})
    v = g.op("mm1", "MatMul", [v, g.add(const("mm1_b", [6, 5], rnd(30)))], [2, 5])
    v = g.op("add1", "Add", [g.add(const("add1_c", [5], rnd(5))), v], [2, 5])
    v = g.op("relu2", "Relu", [v], [2, 5])
    v = g.op("gemm2", "Gemm", [v, g.add(const("gemm2_b", [3, 5], rnd(15)))], [2, 3],
             {"transB": 1, "alpha": 0.5})
    v = g.op("add2", "Add", [v, g.add(const("add2_c", [1, 3], rnd(3)))], [2, 3])
    g.dump(path, [v])

def hswish(path):
    g = G("engine_opt_hswish", "tests/e2e/engine_opt.sh: y = HardSwish(0.5 x + 0.25), fused")
    x = g.add({"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": f32([1, 1, 2, 3])})
    w = g.add(const("conv_w", [1, 1, 1, 1], [0.5]))
    b = g.add(const("conv_b", [1], [0.25]))
    v = g.add({"name": "conv", "type": "Conv", "inputs": [x, w, b], "outputs": f32([1, 1, 2, 3]),
               "attrs": {"kernel_shape": [1, 1]}})
    v = g.op("hswish", "HardSwish", [v], [1, 1, 2, 3])
    v = g.op("flat", "Flatten", [v], [1, 6], {"axis": 1})
    g.dump(path, [v])

def block(path):
    S = [1, 4, 5, 5]
    g = G("engine_opt_block", "tests/e2e/engine_opt.sh: each node here blocks its fusion")
    x = g.add({"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": f32([1, 3, 5, 5])})
    var = g.add({"name": "var", "type": "Data", "attrs": {"index": 1}, "outputs": f32([4])})
    v = g.conv("convA", x, 3, 4, S)
    v = g.bn("bn_keep", v, 4, S, attrs={"_cannot_be_deleted": True})
    a = g.conv("convB", v, 4, 4, S)
    b1 = g.bn("bn_two", a, 4, S)
    b2 = g.op("relu_two", "Relu", [a], S)
    v = g.op("sum_two", "Add", [b1, b2], S)
    v = g.conv("convC", v, 4, 4, S)
    v = g.bn("bn_var", v, 4, S, var_input=var)
    v = g.conv("convD", v, 4, 4, S)
    v = g.op("relu_pin", "Relu", [v], S, engine="vector")
    v = g.conv("convG", v, 4, 4, S)
    lo = g.add({"name": "lo", "type": "Data", "attrs": {"index": 2}, "outputs": f32([])})
    v = g.op("clip_var", "Clip", [v, lo], S)
    v = g.conv("convH", v, 4, 4, S, attrs={"_kiln_fused_activation": "Relu"})
    v = g.bn("bn_act", v, 4, S)
    v = g.conv("convE", v, 4, 4, S)
    o1 = g.op("relu_out", "Relu", [v], S)
    f = g.op("flat", "Flatten", [o1], [1, 100], {"axis": 1})
    m = g.op("mm", "MatMul", [f, g.add(const("mm_b", [100, 3], rnd(300, -0.1, 0.1)))], [1, 3])
    bias = g.add({"name": "bias", "type": "Data", "attrs": {"index": 3}, "outputs": f32([3])})
    o2 = g.op("add_var", "Add", [m, bias], [1, 3])
    o3 = g.op("relu_add", "Relu", [o2], [1, 3])
    g.dump(path, [o1, o3])

if __name__ == "__main__":
    out = sys.argv[1]
    fuse(os.path.join(out, "fuse.json"))
    # the same graph with a Relu for the HardSwish (no engine runs HardSwish
    # unfused): the fused and unfused runs are compared on it
    fuse(os.path.join(out, "fuse_relu.json"), "Relu")
    hswish(os.path.join(out, "hswish.json"))
    block(os.path.join(out, "block.json"))
