#!/usr/bin/env python3
"""gen_graphs.py OUTDIR - the small graphs of tests/e2e/fx_models.sh (kiln JSON).

hswish.json    HardSwish spelled out four ways, each followed by a Relu (so the
               chain's tail does not feed the NetOutput):
               hs_conv  Conv -> BatchNormalization -> Add(3) -> Clip(Const 0, 6)
                        -> Mul(x, .) -> Div(., 6): ConvBatchNormFusionPass,
                        HardSwishFusionPass and PostActivationFusionPass leave
                        one Conv;
               hs_attr  after a Sub: Add(3, x) -> Clip(min 0, max 6 attributes)
                        -> Mul(., x) -> Mul(., 1/6) (operands swapped);
               hs_bad3  Add(3.5): must not fire;
               hs_two   the Clip's output read twice: must not fire.
layernorm.json LayerNorm spelled out over the last axis of x [2, 5, 8]
               (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add, gamma and
               beta Const [8]) -> Relu; ln_axis0: the same over axis 1 (must
               not fire); ln_out: a LayerNorm whose tail feeds the NetOutput
               (must not fire: the output keeps its name).
--example DIR  writes DIR/fusion_block.json (docs/engines.md's example):
               Conv -> BatchNormalization -> HardSwish spelled out -> Conv 1x1
               -> Relu -> Sub, and its input fusion_block_x.bin [1, 3, 8, 8].
gelu.json      GELU spelled out, x [2, 3, 4]: Div(x, sqrt 2) -> Erf -> Add(1) ->
               Mul(x, .) -> Mul(., 0.5) -> Relu (gelu_div); the Mul(1/sqrt 2)
               form with swapped operands (gelu_mul); Mul(., 0.6) (gelu_bad,
               must not fire).
vchain.json    Sub(x, 0.5) -> HardSwish -> Mul(., 2): one vector chain with
               HardSwish inside (same bytes as unfused).
kernels.json   explicit HardSwish, LayerNormalization, Erf and Gelu nodes (their kernels
               against a Python reference).
Weights are deterministic pseudo-random (a fixed LCG), no numpy.
"""
import json, os, sys

state = [4242]
def rnd(n, lo=-1.0, hi=1.0):
    out = []
    for _ in range(n):
        state[0] = (state[0] * 1103515245 + 12345) % (1 << 31)
        out.append(round(lo + (hi - lo) * state[0] / float(1 << 31), 6))
    return out

def f32(shape):
    return [{"dtype": "float32", "shape": shape}]

class G:
    def __init__(self, name, doc):
        self.name, self.doc, self.nodes, self.ninputs = name, doc, [], 0
    def add(self, n):
        self.nodes.append(n)
        return n["name"] + ":0"
    def data(self, name, shape):
        i = self.ninputs
        self.ninputs += 1
        return self.add({"name": name, "type": "Data", "attrs": {"index": i}, "outputs": f32(shape)})
    def const(self, name, shape, data):
        return self.add({"name": name, "type": "Const", "outputs": f32(shape),
                         "attrs": {"value": {"type": "tensor", "value": {
                             "dtype": "float32", "shape": shape, "data": data}}}})
    def op(self, name, op, ins, shape, attrs=None):
        n = {"name": name, "type": op, "inputs": ins, "outputs": f32(shape)}
        if attrs:
            n["attrs"] = attrs
        return self.add(n)
    def dump(self, path, outs):
        self.nodes.append({"name": "out", "type": "NetOutput", "inputs": outs})
        json.dump({"kiln_graph": 1, "name": self.name, "x-doc": self.doc, "nodes": self.nodes},
                  open(path, "w"), indent=1)

def hswish_chain(g, p, x, shape, three=3.0, div=True, attr_clip=False, swap=False):
    c3 = g.const(p + "_three", [], [three])
    a = g.op(p + "_add", "Add", [c3, x] if swap else [x, c3], shape)
    if attr_clip:
        c = g.op(p + "_clip", "Clip", [a], shape, {"min": 0.0, "max": 6.0})
    else:
        c = g.op(p + "_clip", "Clip", [a, g.const(p + "_lo", [], [0.0]),
                                       g.const(p + "_hi", [], [6.0])], shape)
    m = g.op(p + "_mul", "Mul", [c, x] if swap else [x, c], shape)
    if div:
        return g.op(p + "_div", "Div", [m, g.const(p + "_six", [], [6.0])], shape), c
    return g.op(p + "_div", "Mul", [m, g.const(p + "_sixth", [], [1.0 / 6.0])], shape), c

def hswish(path):
    S = [1, 4, 5, 5]
    g = G("fx_hswish", "tests/e2e/fx_models.sh: HardSwish spelled out")
    x = g.data("x", [1, 3, 5, 5])
    w = g.const("conv_w", [4, 3, 3, 3], rnd(108, -0.5, 0.5))
    v = g.op("conv", "Conv", [x, w, g.const("conv_b", [4], rnd(4))], S,
             {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]})
    v = g.op("bn", "BatchNormalization", [v, g.const("bn_s", [4], rnd(4, 0.5, 1.5)),
                                          g.const("bn_b", [4], rnd(4)),
                                          g.const("bn_m", [4], rnd(4, -0.2, 0.2)),
                                          g.const("bn_v", [4], rnd(4, 0.5, 2.0))], S,
             {"epsilon": 1e-5})
    v, _ = hswish_chain(g, "hs_conv", v, S)
    r1 = g.op("relu1", "Relu", [v], S)
    s = g.op("sub", "Sub", [r1, g.const("half", [], [0.5])], S)
    v, _ = hswish_chain(g, "hs_attr", s, S, div=False, attr_clip=True, swap=True)
    r2 = g.op("relu2", "Relu", [v], S)
    v, _ = hswish_chain(g, "hs_bad3", r2, S, three=3.5)
    r3 = g.op("relu3", "Relu", [v], S)
    v, clip = hswish_chain(g, "hs_two", r3, S)
    r4 = g.op("relu4", "Relu", [v], S)
    g.dump(path, [r4, clip])

def layernorm_chain(g, p, x, shape, axis=-1):
    d = shape[axis]
    m = g.op(p + "_mean", "ReduceMean", [x], shape[:-1] + [1] if axis == -1 else
             [shape[0], 1, shape[2]], {"axes": [axis], "keepdims": 1})
    rs = shape[:-1] + [1] if axis == -1 else [shape[0], 1, shape[2]]
    sub = g.op(p + "_sub", "Sub", [x, m], shape)
    pw = g.op(p + "_pow", "Pow", [sub, g.const(p + "_two", [], [2.0])], shape)
    var = g.op(p + "_var", "ReduceMean", [pw], rs, {"axes": [axis], "keepdims": 1})
    ad = g.op(p + "_addeps", "Add", [var, g.const(p + "_eps", [], [1e-5])], rs)
    sq = g.op(p + "_sqrt", "Sqrt", [ad], rs)
    dv = g.op(p + "_div", "Div", [sub, sq], shape)
    gshape = [d] if axis == -1 else [d, 1]
    mu = g.op(p + "_mul", "Mul", [dv, g.const(p + "_gamma", gshape, rnd(d, 0.5, 1.5))], shape)
    return g.op(p + "_add", "Add", [mu, g.const(p + "_beta", gshape, rnd(d))], shape)

def layernorm(path):
    S = [2, 5, 8]
    g = G("fx_layernorm", "tests/e2e/fx_models.sh: LayerNorm spelled out")
    x = g.data("x", S)
    v = layernorm_chain(g, "ln", x, S)
    r1 = g.op("relu1", "Relu", [v], S)
    v = layernorm_chain(g, "ln_axis1", r1, S, axis=1)
    r2 = g.op("relu2", "Relu", [v], S)
    v = layernorm_chain(g, "ln_out", r2, S)
    g.dump(path, [v])

def kernels(path):
    g = G("fx_kernels", "tests/e2e/fx_models.sh: HardSwish, LayerNormalization, Erf and Gelu kernels")
    x = g.data("x", [2, 3, 4])
    h = g.op("hswish", "HardSwish", [x], [2, 3, 4])
    erf = g.op("erf", "Erf", [x], [2, 3, 4])
    ge = g.op("gelu", "Gelu", [x], [2, 3, 4])
    gt = g.op("gelu_tanh", "Gelu", [x], [2, 3, 4], {"approximate": "tanh"})
    ln = g.op("ln", "LayerNormalization",
              [x, g.const("gamma", [4], [1.0, 0.5, -1.0, 2.0]),
               g.const("beta", [4], [0.0, 0.25, -0.5, 1.0])], [2, 3, 4],
              {"axis": -1, "epsilon": 1e-3})
    g.dump(path, [h, ln, erf, ge, gt])

def gelu_chain(g, p, x, shape, div=True, swap=False, half=0.5):
    import math
    if div:
        sc = g.op(p + "_scale", "Div", [x, g.const(p + "_sqrt2", [], [math.sqrt(2.0)])], shape)
    else:
        sc = g.op(p + "_scale", "Mul", [g.const(p + "_rsqrt2", [], [1 / math.sqrt(2.0)]), x], shape)
    e = g.op(p + "_erf", "Erf", [sc], shape)
    one = g.const(p + "_one", [], [1.0])
    a = g.op(p + "_add", "Add", [one, e] if swap else [e, one], shape)
    m = g.op(p + "_mul", "Mul", [a, x] if swap else [x, a], shape)
    return g.op(p + "_half", "Mul", [m, g.const(p + "_h", [], [half])], shape)

def gelu(path):
    S = [2, 3, 4]
    g = G("fx_gelu", "tests/e2e/fx_models.sh: GELU spelled out")
    x = g.data("x", S)
    v = gelu_chain(g, "gelu_div", x, S)
    r1 = g.op("relu1", "Relu", [v], S)
    v = gelu_chain(g, "gelu_mul", r1, S, div=False, swap=True)
    r2 = g.op("relu2", "Relu", [v], S)
    v = gelu_chain(g, "gelu_bad", r2, S, half=0.6)
    r3 = g.op("relu3", "Relu", [v], S)
    g.dump(path, [r3])

def vchain(path):
    g = G("fx_vchain", "tests/e2e/fx_models.sh: HardSwish inside a vector chain")
    x = g.data("x", [2, 3, 4])
    v = g.op("sub", "Sub", [x, g.const("half", [], [0.5])], [2, 3, 4])
    v = g.op("hswish", "HardSwish", [v], [2, 3, 4])
    v = g.op("twice", "Mul", [v, g.const("two", [], [2.0])], [2, 3, 4])
    g.dump(path, [v])

def example(path):
    S = [1, 4, 8, 8]
    g = G("fusion_block", "docs/engines.md: the built-in fusion passes on Conv + "
          "BatchNormalization + HardSwish (spelled out) + Conv + Relu "
          "(tests/data/fx_models/gen_graphs.py --example)")
    state[0] = 777
    x = g.data("x", [1, 3, 8, 8])
    v = g.op("conv1", "Conv", [x, g.const("conv1_w", [4, 3, 3, 3], rnd(108, -0.5, 0.5)),
                               g.const("conv1_b", [4], rnd(4))], S,
             {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]})
    v = g.op("bn1", "BatchNormalization", [v, g.const("bn1_s", [4], rnd(4, 0.5, 1.5)),
                                           g.const("bn1_b", [4], rnd(4)),
                                           g.const("bn1_m", [4], rnd(4, -0.2, 0.2)),
                                           g.const("bn1_v", [4], rnd(4, 0.5, 2.0))], S,
             {"epsilon": 1e-5})
    v, _ = hswish_chain(g, "hswish1", v, S)
    v = g.op("conv2", "Conv", [v, g.const("conv2_w", [4, 4, 1, 1], rnd(16, -0.5, 0.5))], S,
             {"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1]})
    v = g.op("relu2", "Relu", [v], S)
    v = g.op("sub", "Sub", [v, g.const("half", [], [0.5])], S)
    g.dump(path, [v])
    import math, struct
    n = 3 * 8 * 8
    vals = [math.sin(0.37 * i + 0.1) * 2.0 for i in range(n)]
    xp = os.path.join(os.path.dirname(path), "fusion_block_x.bin")
    open(xp, "wb").write(struct.pack("<%df" % n, *vals))
    json.dump({"dims": [1, 3, 8, 8], "dtype": "float32"}, open(xp + ".json", "w"))

if sys.argv[1] == "--example":
    example(os.path.join(sys.argv[2], "fusion_block.json"))
    sys.exit(0)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
hswish(os.path.join(out, "hswish.json"))
layernorm(os.path.join(out, "layernorm.json"))
kernels(os.path.join(out, "kernels.json"))
vchain(os.path.join(out, "vchain.json"))
gelu(os.path.join(out, "gelu.json"))
