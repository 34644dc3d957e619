/*
 * simplify_util.c - helpers shared by the simplification passes (simplify.h).
 */
#include "simplify.h"

#include <string.h>

void simp_syms_init(simp_syms *s, kiln_graph *g)
{
    s->cast = kiln_intern(g, "Cast");
    s->reshape = kiln_intern(g, "Reshape");
    s->flatten = kiln_intern(g, "Flatten");
    s->squeeze = kiln_intern(g, "Squeeze");
    s->unsqueeze = kiln_intern(g, "Unsqueeze");
    s->transpose = kiln_intern(g, "Transpose");
    s->identity = kiln_intern(g, "Identity");
    s->netoutput = kiln_intern(g, "NetOutput");
    s->cnst = kiln_intern(g, "Const");
    s->constant = kiln_intern(g, "Constant");
    s->data = kiln_intern(g, "Data");
    s->refdata = kiln_intern(g, "RefData");
    s->variable = kiln_intern(g, "Variable");
    s->variablev2 = kiln_intern(g, "VariableV2");
    s->assign = kiln_intern(g, "Assign");
}

bool simp_op_is(const kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}

bool simp_pinned(const kiln_graph *g, kiln_node_id n)
{
    bool keep = false;
    return kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep;
}

bool simp_feeds_netoutput(const kiln_graph *g, kiln_node_id n, uint32_t o, const simp_syms *s)
{
    for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
        if (simp_op_is(g, kiln_use_dst(g, u).node, s->netoutput))
            return true;
    return false;
}

bool simp_is_ref_output(kiln_graph *g, kiln_anchor a)
{
    return a.node && kiln_desc_ref_input(kiln_node_output_desc(g, a.node, a.index)) >= 0;
}

bool simp_static(const kiln_tensor_desc *d)
{
    int32_t r = d ? kiln_desc_rank(d) : -1;
    if (r < 0)
        return false;
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < r; i++)
        if (dims[i] < 0)
            return false;
    return true;
}

bool simp_same_static(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    if (!simp_static(a) || !simp_static(b) || kiln_desc_rank(a) != kiln_desc_rank(b) ||
        kiln_desc_dtype(a) != kiln_desc_dtype(b))
        return false;
    int32_t r = kiln_desc_rank(a);
    return r == 0 || memcmp(kiln_desc_dims(a), kiln_desc_dims(b), (size_t)r * sizeof(int64_t)) == 0;
}

bool simp_const_ints(kiln_graph *g, kiln_anchor a, const simp_syms *s, int64_t *out, uint32_t cap,
                     uint32_t *n)
{
    if (!a.node || !(simp_op_is(g, a.node, s->cnst) || simp_op_is(g, a.node, s->constant)))
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, a.node), "value", &t) || t.rank > 1)
        return false;
    size_t es = t.dtype == KILN_DT_INT64 ? 8 : t.dtype == KILN_DT_INT32 ? 4 : 0;
    if (!es || t.nbytes % es || t.nbytes / es > cap)
        return false;
    uint32_t cnt = (uint32_t)(t.nbytes / es);
    for (uint32_t i = 0; i < cnt; i++) {
        if (es == 8) {
            memcpy(&out[i], (const char *)t.data + i * 8, 8);
        } else {
            int32_t v;
            memcpy(&v, (const char *)t.data + i * 4, 4);
            out[i] = v;
        }
    }
    *n = cnt;
    return true;
}

bool simp_node_ints(kiln_graph *g, kiln_node_id n, const char *key, uint32_t in, const simp_syms *s,
                    int64_t *out, uint32_t cap, uint32_t *cnt, bool *present)
{
    const int64_t *v;
    uint32_t k;
    *present = true;
    if (kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, &v, &k)) {
        if (k > cap)
            return false;
        if (k)
            memcpy(out, v, k * sizeof(int64_t));
        *cnt = k;
        return true;
    }
    kiln_anchor a =
        in < kiln_node_input_count(g, n) ? kiln_node_input_peer(g, n, in) : (kiln_anchor){0, 0};
    if (!a.node) {
        *present = false;
        *cnt = 0;
        return true;
    }
    return simp_const_ints(g, a, s, out, cap, cnt);
}

/* ONNX TensorProto data type codes. */
static bool onnx_dtype(int64_t to, kiln_dtype *out)
{
    static const struct {
        int64_t code;
        kiln_dtype dt;
    } map[] = {{1, KILN_DT_FLOAT32},  {2, KILN_DT_UINT8},   {3, KILN_DT_INT8},
               {4, KILN_DT_UINT16},   {5, KILN_DT_INT16},   {6, KILN_DT_INT32},
               {7, KILN_DT_INT64},    {9, KILN_DT_BOOL},    {10, KILN_DT_FLOAT16},
               {11, KILN_DT_FLOAT64}, {12, KILN_DT_UINT32}, {13, KILN_DT_UINT64},
               {16, KILN_DT_BFLOAT16}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i].code == to) {
            *out = map[i].dt;
            return true;
        }
    return false;
}

bool simp_cast_to(const kiln_graph *g, kiln_node_id n, kiln_dtype *out)
{
    const kiln_attrs *a = kiln_node_attrs(g, n);
    int64_t to;
    if (kiln_attrs_get_dtype(a, "to", out))
        return true;
    return kiln_attrs_get_int(a, "to", &to) && onnx_dtype(to, out);
}

uint32_t simp_remove_if_dead(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    if (!n || !kiln_node_is_live(g, n) || simp_pinned(g, n) || simp_op_is(g, n, s->data) ||
        simp_op_is(g, n, s->refdata) || simp_op_is(g, n, s->netoutput) ||
        kiln_node_ctrl_out_count(g, n) || kiln_node_subgraph_count(g, n))
        return 0;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (kiln_node_output_use_count(g, n, o))
            return 0;
    /* the constant inputs (a Reshape's shape, a Squeeze's axes) go with it */
    kiln_node_id consts[4];
    uint32_t nc = 0;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n) && nc < 4; i++) {
        kiln_node_id p = kiln_node_input_peer(g, n, i).node;
        if (p && (simp_op_is(g, p, s->cnst) || simp_op_is(g, p, s->constant)))
            consts[nc++] = p;
    }
    if (kiln_graph_remove_node(g, n) != KILN_OK)
        return 0;
    kiln_pass_node_deleted(ctx, g, n);
    uint32_t removed = 1;
    for (uint32_t i = 0; i < nc; i++)
        if (kiln_node_is_live(g, consts[i]) && !kiln_node_ctrl_in_count(g, consts[i]))
            removed += simp_remove_if_dead(ctx, g, consts[i], s);
    return removed;
}

/* Bit t of holds[f]: every value of dtype f is exact in dtype t. */
bool simp_dtype_holds(kiln_dtype to, kiln_dtype from)
{
#define B(x) (1u << KILN_DT_##x)
    static const uint32_t holds[KILN_DT_COUNT] = {
        [KILN_DT_FLOAT32] = B(FLOAT32) | B(FLOAT64),
        [KILN_DT_FLOAT16] = B(FLOAT16) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_BFLOAT16] = B(BFLOAT16) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_FLOAT64] = B(FLOAT64),
        [KILN_DT_INT8] = B(INT8) | B(INT16) | B(INT32) | B(INT64) | B(FLOAT16) | B(BFLOAT16) |
                         B(FLOAT32) | B(FLOAT64),
        [KILN_DT_INT16] = B(INT16) | B(INT32) | B(INT64) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_INT32] = B(INT32) | B(INT64) | B(FLOAT64),
        [KILN_DT_INT64] = B(INT64),
        [KILN_DT_UINT8] = B(UINT8) | B(UINT16) | B(UINT32) | B(UINT64) | B(INT16) | B(INT32) |
                          B(INT64) | B(FLOAT16) | B(BFLOAT16) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_UINT16] =
            B(UINT16) | B(UINT32) | B(UINT64) | B(INT32) | B(INT64) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_UINT32] = B(UINT32) | B(UINT64) | B(INT64) | B(FLOAT64),
        [KILN_DT_UINT64] = B(UINT64),
        [KILN_DT_BOOL] = B(BOOL) | B(INT8) | B(INT16) | B(INT32) | B(INT64) | B(UINT8) | B(UINT16) |
                         B(UINT32) | B(UINT64) | B(FLOAT16) | B(BFLOAT16) | B(FLOAT32) | B(FLOAT64),
        [KILN_DT_STRING] = B(STRING),
    };
#undef B
    if ((unsigned)from >= KILN_DT_COUNT || (unsigned)to >= KILN_DT_COUNT)
        return false;
    return (holds[from] >> to) & 1u;
}
