#!/usr/bin/env python3
"""gen_graphs.py OUTDIR - the graph of tests/e2e/par_kernels.sh (kiln JSON).

kernels.json  inputs x [2,16,96,64] (196608 elements) and z [3,7,101,127] (269367:
              no multiple of the fused kernel's 256-element block, rows that
              do not split evenly).  Every kernel the vector and aicore engines
              share out to OpenMP threads (plugins/engines/common/cpu_par.h),
              each on a tensor above the grain, each node's output a graph
              output:
                fused     Add(x, 3) -> Relu -> Mul(., x) -> Sigmoid and
                          Sub(z, 0.5) -> Mul(., z) -> Max(., 0.1) (two
                          KilnFusedElementwise chains)
                binary    Add(x, [16,1,1]), Mul(x, [64]), Sub(x, [1,16,1,64]),
                          Div(z, [127]), Greater(x, [16,1,1]) (bool), the
                          variadic Max(x, [64], [16,1,1])
                unary     Sigmoid, Relu, Erf, Gelu, Clip (Const bounds)
                reduce    ReduceMean axes [1], [3] and [0, 2]; ReduceMax axes
                          [0] (each way the kernel splits)
                softmax   axis -1 (rows) and axis 1 (strided lines)
                layernorm LayerNormalization over the last axis, with the Mean
                          and InvStdDev outputs
                aicore    GlobalAveragePool, GlobalMaxPool, MaxPool 3x3/2 with
                          Indices, AveragePool 3x3 pad 1, BatchNormalization,
                          Resize nearest and linear x2
Constants are deterministic pseudo-random (a fixed LCG), no numpy.
"""
import json, os, sys

state = [777]
def rnd(n, lo=-1.0, hi=1.0):
    out = []
    for _ in range(n):
        state[0] = (state[0] * 1103515245 + 12345) % (1 << 31)
        out.append(round(lo + (hi - lo) * state[0] / float(1 << 31), 6))
    return out

def desc(shape, dt="float32"):
    return {"dtype": dt, "shape": shape}

class G:
    def __init__(self, name):
        self.name, self.nodes, self.ninputs, self.outs = name, [], 0, []
    def add(self, n):
        self.nodes.append(n)
        return n["name"] + ":0"
    def data(self, name, shape):
        i = self.ninputs
        self.ninputs += 1
        return self.add({"name": name, "type": "Data", "attrs": {"index": i},
                         "outputs": [desc(shape)]})
    def const(self, name, shape, data):
        return self.add({"name": name, "type": "Const", "outputs": [desc(shape)],
                         "attrs": {"value": {"type": "tensor", "value": {
                             "dtype": "float32", "shape": shape, "data": data}}}})
    def op(self, name, op, ins, outs, attrs=None, out=True):
        """outs: a shape, or a list of (shape, dtype) for several outputs"""
        if outs and isinstance(outs[0], tuple):
            od = [desc(s, d) for s, d in outs]
        else:
            od = [desc(outs)]
        n = {"name": name, "type": op, "inputs": ins, "outputs": od}
        if attrs:
            n["attrs"] = attrs
        self.add(n)
        if out:
            self.outs += ["%s:%d" % (name, i) for i in range(len(od))]
        return name + ":0"
    def dump(self, path):
        self.nodes.append({"name": "out", "type": "NetOutput", "inputs": self.outs})
        json.dump({"kiln_graph": 1, "name": self.name, "nodes": self.nodes}, open(path, "w"),
                  indent=1)

def kernels(path):
    X, Z = [2, 16, 96, 64], [3, 7, 101, 127]
    g = G("par_kernels")
    x = g.data("x", X)
    z = g.data("z", Z)
    # fused chains (inner nodes are not outputs)
    v = g.op("f_add", "Add", [x, g.const("c3", [], [3.0])], X, out=False)
    v = g.op("f_relu", "Relu", [v], X, out=False)
    v = g.op("f_mul", "Mul", [v, x], X, out=False)
    g.op("f_sig", "Sigmoid", [v], X)
    v = g.op("fz_sub", "Sub", [z, g.const("c05", [], [0.5])], Z, out=False)
    v = g.op("fz_mul", "Mul", [v, z], Z, out=False)
    g.op("fz_max", "Max", [v, g.const("c01", [], [0.1])], Z)
    # binary with broadcasting
    bc = g.const("bc", [16, 1, 1], rnd(16))
    cw = g.const("cw", [64], rnd(64))
    g.op("b_add", "Add", [x, bc], X)
    g.op("b_mul", "Mul", [x, cw], X)
    g.op("b_sub", "Sub", [x, g.const("ch", [1, 16, 1, 64], rnd(16 * 64))], X)
    g.op("b_div", "Div", [z, g.const("cz", [127], rnd(127, 0.5, 2.0))], Z)
    g.op("b_gt", "Greater", [x, bc], [(X, "bool")])
    g.op("b_max3", "Max", [x, cw, bc], X)
    # unary
    g.op("u_sig", "Sigmoid", [x], X)
    g.op("u_relu", "Relu", [z], Z)
    g.op("u_erf", "Erf", [x], X)
    g.op("u_gelu", "Gelu", [x], X)
    g.op("u_clip", "Clip", [x, g.const("lo", [], [-0.25]), g.const("hi", [], [0.5])], X)
    # reductions
    g.op("r_mean1", "ReduceMean", [x], [2, 1, 96, 64], {"axes": [1]})
    g.op("r_mean3", "ReduceMean", [x], [2, 16, 96, 1], {"axes": [3]})
    g.op("r_mean02", "ReduceMean", [x], [1, 16, 1, 64], {"axes": [0, 2]})
    g.op("r_max0", "ReduceMax", [x], [1, 16, 96, 64], {"axes": [0]})
    # softmax, layernorm
    g.op("s_last", "Softmax", [x], X, {"axis": -1})
    g.op("s_ch", "Softmax", [x], X, {"axis": 1})
    g.op("ln", "LayerNormalization",
         [x, g.const("ln_s", [64], rnd(64, 0.5, 1.5)), g.const("ln_b", [64], rnd(64))],
         [(X, "float32"), ([2, 16, 96, 1], "float32"), ([2, 16, 96, 1], "float32")],
         {"axis": -1})
    # aicore
    g.op("gap", "GlobalAveragePool", [x], [2, 16, 1, 1])
    g.op("gmp", "GlobalMaxPool", [z], [3, 7, 1, 1])
    g.op("mp", "MaxPool", [x], [([2, 16, 48, 32], "float32"), ([2, 16, 48, 32], "int64")],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    g.op("ap", "AveragePool", [z], Z,
         {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    g.op("bn", "BatchNormalization",
         [x, g.const("bn_s", [16], rnd(16, 0.5, 1.5)), g.const("bn_b", [16], rnd(16)),
          g.const("bn_m", [16], rnd(16)), g.const("bn_v", [16], rnd(16, 0.5, 2.0))], X)
    sc = g.const("rz_scales", [4], [1.0, 1.0, 2.0, 2.0])
    g.op("rz_near", "Resize", [x, None, sc], [2, 16, 192, 128],
         {"mode": "nearest"})
    g.op("rz_lin", "Resize", [z, None, sc], [3, 7, 202, 254],
         {"mode": "linear"})
    g.dump(path)

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    kernels(os.path.join(out, "kernels.json"))
