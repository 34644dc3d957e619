#!/usr/bin/env python3
# gen_cpu_nn_cases.py - writes test_cpu_nn_onnx.inc (the ONNX node tests of the CPU
# engine's NN ops as C arrays) from Debian's libonnx-testdata.  Usage:
#   python3 tests/core/gen_cpu_nn_cases.py tests/core/test_cpu_nn_onnx.inc
# A minimal protobuf wire-format reader: only the ONNX fields the node tests use.
import struct, sys, os
def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i
def fields(b):
    i = 0; out = []
    while i < len(b):
        k, i = varint(b, i); f, wt = k >> 3, k & 7
        if wt == 0: v, i = varint(b, i)
        elif wt == 1: v = b[i:i+8]; i += 8
        elif wt == 5: v = b[i:i+4]; i += 4
        elif wt == 2:
            n, i = varint(b, i); v = b[i:i+n]; i += n
        else: raise ValueError(wt)
        out.append((f, wt, v))
    return out
def sv(v):
    return v - (1 << 64) if v >= 1 << 63 else v
def tensor(b):
    dims = []; dt = 1; fl = []; i64 = []; i32 = []; raw = None; name = ''
    for f, wt, v in fields(b):
        if f == 1:
            if wt == 0: dims.append(sv(v))
            else:
                j = 0
                while j < len(v): x, j = varint(v, j); dims.append(sv(x))
        elif f == 2: dt = v
        elif f == 4:
            if wt == 5: fl.append(struct.unpack('<f', v)[0])
            else: fl += list(struct.unpack('<%df' % (len(v)//4), v))
        elif f == 7:
            if wt == 0: i64.append(sv(v))
            else:
                j = 0
                while j < len(v): x, j = varint(v, j); i64.append(sv(x))
        elif f == 5:
            if wt == 0: i32.append(sv(v))
            else:
                j = 0
                while j < len(v): x, j = varint(v, j); i32.append(sv(x))
        elif f == 8: name = v.decode()
        elif f == 9: raw = v
    if raw is not None:
        if dt == 1: fl = list(struct.unpack('<%df' % (len(raw)//4), raw))
        elif dt == 7: i64 = list(struct.unpack('<%dq' % (len(raw)//8), raw))
        elif dt == 6: i32 = list(struct.unpack('<%di' % (len(raw)//4), raw))
        elif dt == 11: fl = list(struct.unpack('<%dd' % (len(raw)//8), raw))
    data = fl if dt in (1, 11) else (i64 if dt == 7 else i32)
    return name, dt, dims, data
def attr(b):
    a = {}; ints = []; floats = []; strs = []
    for f, wt, v in fields(b):
        if f == 1: a['name'] = v.decode()
        elif f == 2: a['f'] = struct.unpack('<f', v)[0]
        elif f == 3: a['i'] = sv(v)
        elif f == 4: a['s'] = v.decode()
        elif f == 7:
            floats += [struct.unpack('<f', v)[0]] if wt == 5 else list(struct.unpack('<%df' % (len(v)//4), v))
        elif f == 8:
            if wt == 0: ints.append(sv(v))
            else:
                j = 0
                while j < len(v): x, j = varint(v, j); ints.append(sv(x))
        elif f == 9: strs.append(v.decode())
        elif f == 5: a['t'] = tensor(v)
    if ints: a['ints'] = ints
    if floats: a['floats'] = floats
    if strs: a['strings'] = strs
    return a
def model(path):
    b = open(path, 'rb').read()
    opset = None
    for f, wt, v in fields(b):
        if f == 8:
            for f2, w2, v2 in fields(v):
                if f2 == 2: opset = v2
        if f == 7:
            for f2, w2, v2 in fields(v):
                if f2 == 1:
                    node = {'inputs': [], 'outputs': [], 'attrs': []}
                    for f3, w3, v3 in fields(v2):
                        if f3 == 1: node['inputs'].append(v3.decode())
                        elif f3 == 2: node['outputs'].append(v3.decode())
                        elif f3 == 4: node['op'] = v3.decode()
                        elif f3 == 5: node['attrs'].append(attr(v3))
                    yield opset, node
D = '/usr/include/onnx/backend/test/data/node/'
def case(name):
    d = D + name
    nodes = list(model(d + '/model.onnx'))
    ins = []; outs = []
    ds = d + '/test_data_set_0/'
    k = 0
    while os.path.exists(ds + 'input_%d.pb' % k):
        ins.append(tensor(open(ds + 'input_%d.pb' % k, 'rb').read())); k += 1
    k = 0
    while os.path.exists(ds + 'output_%d.pb' % k):
        outs.append(tensor(open(ds + 'output_%d.pb' % k, 'rb').read())); k += 1
    return nodes, ins, outs

# ---- C generation -----------------------------------------------------------
OPS = ('Conv', 'ConvTranspose', 'AveragePool', 'MaxPool', 'GlobalAveragePool', 'GlobalMaxPool',
       'BatchNormalization', 'Gemm', 'MatMul', 'LSTM', 'Resize', 'Upsample')
MAX_VALUES = 600
DT = {1: 'KILN_DT_FLOAT32', 6: 'KILN_DT_INT32', 7: 'KILN_DT_INT64'}


def cfloat(v):
    if v != v:
        return 'NAN'
    if v in (float('inf'), float('-inf')):
        return '-INFINITY' if v < 0 else 'INFINITY'
    s = '%.9g' % v
    if '.' not in s and 'e' not in s:
        s += '.0'
    return s + 'f'


def carray(name, dt, data):
    if dt == 1:
        body = ', '.join(cfloat(v) for v in data)
        return 'static const float %s[] = {%s};' % (name, body or '0')
    ctype = 'int64_t' if dt == 7 else 'int32_t'
    return 'static const %s %s[] = {%s};' % (ctype, name, ', '.join(str(v) for v in data) or '0')


def slots(lines, prefix, names, tensors):
    """The nn_data initialisers of a node's inputs or outputs (an empty name is an
    absent slot, {0}); each tensor's data goes to lines as array prefix<i>."""
    it = iter(tensors)
    out = []
    for i, nm in enumerate(names):
        if not nm:
            out.append('{0}')
            continue
        t = next(it)
        lines.append(carray('%s%d' % (prefix, i), t[1], t[3]))
        out.append('{1, %s, %d, {%s}, %s%d}' % (DT[t[1]], len(t[2]),
                   ', '.join(str(d) for d in t[2]) or '0', prefix, i))
    return out


def main():
    out = sys.argv[1]
    lines = ['/*', ' * test_cpu_nn_onnx.inc - GENERATED by tests/core/gen_cpu_nn_cases.py from',
             ' * ONNX\'s node tests (Debian libonnx-testdata 1.12,',
             ' * /usr/include/onnx/backend/test/data/node); do not edit.  Every single-node',
             ' * test of an op in cpu_ops_nn[] with at most %d values, test_data_set_0.' % MAX_VALUES,
             ' */']
    cases = []
    for name in sorted(os.listdir(D)):
        try:
            nodes, ins, outs = case(name)
        except Exception:
            continue
        if len(nodes) != 1 or nodes[0][1]['op'] not in OPS:
            continue
        node = nodes[0][1]
        if any(t[1] not in DT for t in ins + outs):
            continue
        if sum(len(t[3]) for t in ins + outs) > MAX_VALUES:
            continue
        k = len(cases)
        pre = 'c%d' % k
        ins_c = slots(lines, pre + '_i', node['inputs'], ins)
        outs_c = slots(lines, pre + '_o', node['outputs'], outs)
        attrs = []
        for a in node['attrs']:
            if 'ints' in a:
                attrs.append('{"%s", NA_INTS, 0, 0, NULL, (const int64_t[]){%s}, NULL, NULL, %d}'
                             % (a['name'], ', '.join(str(v) for v in a['ints']), len(a['ints'])))
            elif 'floats' in a:
                attrs.append('{"%s", NA_FLOATS, 0, 0, NULL, NULL, (const double[]){%s}, NULL, %d}'
                             % (a['name'], ', '.join('%.9g' % v for v in a['floats']),
                                len(a['floats'])))
            elif 'strings' in a:
                attrs.append('{"%s", NA_STRINGS, 0, 0, NULL, NULL, NULL, (const char *const[]){%s}, %d}'
                             % (a['name'], ', '.join('"%s"' % v for v in a['strings']),
                                len(a['strings'])))
            elif 's' in a:
                attrs.append('{"%s", NA_STRING, 0, 0, "%s", NULL, NULL, NULL, 0}' % (a['name'], a['s']))
            elif 'f' in a:
                attrs.append('{"%s", NA_FLOAT, 0, %.9g, NULL, NULL, NULL, NULL, 0}' % (a['name'], a['f']))
            elif 'i' in a:
                attrs.append('{"%s", NA_INT, %d, 0, NULL, NULL, NULL, NULL, 0}' % (a['name'], a['i']))
        if attrs:
            lines.append('static const nn_attr %s_a[] = {%s};' % (pre, ', '.join(attrs)))
        cases.append('    {"%s", "%s", %d, %d, {%s}, {%s}, %s, %d},' % (
            name, node['op'], len(node['inputs']), len(node['outputs']), ', '.join(ins_c),
            ', '.join(outs_c), pre + '_a' if attrs else 'NULL', len(attrs)))
    lines.append('static const nn_onnx_case onnx_cases[] = {')
    lines += cases
    lines.append('};')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
