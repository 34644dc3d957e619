#!/usr/bin/env python3
"""gen_graphs.py OUTDIR - the small graphs of tests/e2e/vec_fusion.sh (kiln JSON).

chain.json  inputs x, y [2,3,4,5]: HardSwish written out (Add(x,3) -> Clip(0,6)
            -> Mul(x,.) -> Div(.,6)) then Relu -> Sub(., y) -> LeakyRelu ->
            Max(., y) -> Sigmoid -> HardSigmoid -> Neg -> Min(., Const) (one
            chain, 12 nodes; the scalar Consts and y become inputs of the fused
            node, c6b merged into the equal c6 by ConstantFuseSamePass); a second chain Mul(y,y) -> Clip (opset-6 min/max attributes)
            -> Sqrt -> Log.
block.json  blocking conditions: an intermediate with two consumers (b_two feeds
            b_next and the NetOutput), an intermediate marked _cannot_be_deleted
            (b_keep), an operand that broadcasts ([5], b_bc: not fused), and
            a Relu -> Sigmoid after them (b_bc2 -> b_tail fused); a scalar
            Neg (b_sc) read as the min of a Clip (b_clip): not a chain link,
            while Relu (b_cx) -> Clip is one (fused; b_sc its input).  b_two
            is a Sigmoid: a Relu of x like b_cx would be merged with it by
            CommonSubexpressionEliminationPass.
"""
import json, sys, os

def f32(shape, dt="float32"):
    return [{"dtype": dt, "shape": shape}]

def const(name, v, dt="float32"):
    return {"name": name, "type": "Const", "outputs": f32([], dt),
            "attrs": {"value": {"type": "tensor", "value": {"dtype": dt, "shape": [], "data": [v]}}}}

class G:
    def __init__(self, name):
        self.name, self.nodes = name, []
    def add(self, n):
        self.nodes.append(n)
        return n["name"] + ":0"
    def op(self, name, op, ins, shape, attrs=None, dt="float32"):
        n = {"name": name, "type": op, "inputs": ins, "outputs": f32(shape, dt)}
        if attrs:
            n["attrs"] = attrs
        return self.add(n)
    def dump(self, path, outs):
        self.nodes.append({"name": "out", "type": "NetOutput", "inputs": outs})
        json.dump({"kiln_graph": 1, "name": self.name, "nodes": self.nodes}, open(path, "w"), indent=1)

S = [2, 3, 4, 5]

def chain(path):
    g = G("vec_fusion_chain")
    x = g.add({"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": f32(S)})
    y = g.add({"name": "y", "type": "Data", "attrs": {"index": 1}, "outputs": f32(S)})
    v = g.op("hs_add", "Add", [x, g.add(const("c3", 3.0))], S)
    v = g.op("hs_clip", "Clip", [v, g.add(const("c0", 0.0)), g.add(const("c6", 6.0))], S)
    v = g.op("hs_mul", "Mul", [x, v], S)
    v = g.op("hs_div", "Div", [v, g.add(const("c6b", 6.0))], S)
    v = g.op("relu", "Relu", [v], S)
    v = g.op("sub", "Sub", [v, y], S)
    v = g.op("leaky", "LeakyRelu", [v], S, {"alpha": 0.125})
    v = g.op("max", "Max", [v, y], S)
    v = g.op("sig", "Sigmoid", [v], S)
    v = g.op("hsig", "HardSigmoid", [v], S, {"alpha": 0.3, "beta": 0.4})
    v = g.op("neg", "Neg", [v], S)
    a = g.op("min", "Min", [v, g.add(const("cm", -0.45))], S)
    w = g.op("sq", "Mul", [y, y], S)
    w = g.op("clip6", "Clip", [w], S, {"min": 0.25, "max": 2.0})
    w = g.op("sqrt", "Sqrt", [w], S)
    b = g.op("log", "Log", [w], S)
    g.dump(path, [a, b])

def block(path):
    g = G("vec_fusion_block")
    x = g.add({"name": "x", "type": "Data", "attrs": {"index": 0}, "outputs": f32(S)})
    r = g.add({"name": "r", "type": "Data", "attrs": {"index": 1}, "outputs": f32([5])})
    v = g.op("b_two", "Sigmoid", [x], S)
    v2 = g.op("b_next", "Sigmoid", [v], S)
    k = g.op("b_keep", "Neg", [v2], S, {"_cannot_be_deleted": True})
    k = g.op("b_after", "Relu", [k], S)
    bc = g.op("b_bc", "Add", [k, r], S)
    bc = g.op("b_bc2", "Relu", [bc], S)
    bc = g.op("b_tail", "Sigmoid", [bc], S)
    sc = g.add({"name": "s", "type": "Data", "attrs": {"index": 2}, "outputs": f32([])})
    sc = g.op("b_sc", "Neg", [sc], [])
    cx = g.op("b_cx", "Relu", [x], S)
    cl = g.op("b_clip", "Clip", [cx, sc], S)
    g.dump(path, [v, bc, cl])

out = sys.argv[1]
chain(os.path.join(out, "chain.json"))
block(os.path.join(out, "block.json"))
