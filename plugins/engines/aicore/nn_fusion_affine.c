/*
 * nn_fusion_affine.c - the aicore engine's affine fusions (stage builtin,
 * run in name order with the others of nn_fusion.c):
 *
 *   ConvAffineFusionPass  Conv or ConvTranspose (no fused activation yet) + Mul and/or Add
 *                of a Const that is a scalar or per output channel ([M],
 *                [M, 1, 1], [1, M, 1, 1]) -> Conv with W' = W * s[m] and
 *                B' = B * s[m] + c[m] (new Const W and B).  The chain is
 *                Mul then Add, Add then Mul, or either alone.  Its name sorts before
 *                PostActivationFusionPass, so the activation after the affine
 *                fuses next.
 *   PostActivationScaleFusionPass  Conv / ConvTranspose / Gemm with a fused
 *                activation + Mul and/or Add of a scalar Const ->
 *                _kiln_fused_post_scale / _kiln_fused_post_shift: the kernel
 *                computes act(y) * scale + shift in its output loop (oneDNN:
 *                an eltwise_linear post-op).  Sorts after PostActivationFusionPass.
 *
 * Both take the "learnable affine block" of PP-LCNet-style backbones (Conv,
 * x * a + b, HardSwish, x * c + d): the four element-wise passes over the
 * activations become part of the convolution.  The checks are those of the
 * other aicore fusions (nn_fusion.c's header, "Safety"): every absorbed node
 * is deletable into aicore, has one consumer chain, does not feed the
 * NetOutput; the head's output feeds only the chain.
 * The session option aicore.fusion names them conv_affine and post_scale.
 */
#include "nn_ops.h"

#include "kiln/kiln_plugin.h"

#include <stdio.h>
#include <string.h>

enum { AF_CONV = 0, AF_POST = 1 };

/* One alternative: head (with head_in inputs) -> tail[0] (-> tail[1]). */
typedef struct af_alt {
    const char *head;
    uint32_t head_in, ntail;
    const char *tail[2];
    int32_t n_head, n_tail[2];
} af_alt;

#define AF_MAX_ALTS 24 /* 3 heads x 2 arities x 4 chains */

typedef struct af_pass {
    int kind;
    uint32_t nalt;
    af_alt alt[AF_MAX_ALTS];
} af_pass;

static kiln_status af_create(int kind, void **inst, kiln_error *err)
{
    af_pass *p = kiln_alloc(sizeof(af_pass));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "aicore affine fusion: out of memory");
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    static const char *const heads[] = {"Conv", "ConvTranspose", "Gemm"};
    static const char *const chains[4][2] = {
        {"Mul", "Add"}, {"Add", "Mul"}, {"Mul", NULL}, {"Add", NULL}};
    const int nheads = kind == AF_CONV ? 2 : 3;
    for (int h = 0; h < nheads; h++)
        for (uint32_t k = 2; k <= 3; k++)
            for (int c = 0; c < 4; c++) /* the longest chains first */
                p->alt[p->nalt++] =
                    (af_alt){heads[h], k, chains[c][1] ? 2u : 1u, {chains[c][0], chains[c][1]}, -1,
                             {-1, -1}};
    *inst = p;
    return KILN_OK;
}

static void af_destroy(void *inst) { kiln_free(inst); }

static kiln_status conv_affine_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    return af_create(AF_CONV, inst, e);
}

static kiln_status post_scale_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    return af_create(AF_POST, inst, e);
}

static kiln_status af_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    af_pass *p = inst;
    kiln_status st = KILN_OK;
    char name[32];
    for (uint32_t a = 0; a < p->nalt && st == KILN_OK; a++) {
        af_alt *al = &p->alt[a];
        if (a > 0 && (st = kiln_pattern_next(pt)) != KILN_OK)
            break;
        int32_t ins[3];
        for (uint32_t i = 0; i < al->head_in; i++) {
            snprintf(name, sizeof(name), "in%u", i);
            ins[i] = kiln_pattern_node(pt, name, "Data");
        }
        al->n_head = kiln_pattern_node(pt, "head", al->head);
        int32_t operand[2];
        for (uint32_t t = 0; t < al->ntail; t++) {
            snprintf(name, sizeof(name), "operand%u", t);
            operand[t] = kiln_pattern_node(pt, name, "Data");
            snprintf(name, sizeof(name), "tail%u", t);
            al->n_tail[t] = kiln_pattern_node(pt, name, al->tail[t]);
            if (operand[t] < 0 || al->n_tail[t] < 0)
                st = KILN_ERR_NOMEM;
        }
        if (al->n_head < 0)
            st = KILN_ERR_NOMEM;
        for (uint32_t i = 0; i < al->head_in && st == KILN_OK; i++)
            st = ins[i] < 0 ? KILN_ERR_NOMEM : kiln_pattern_edge(pt, ins[i], 0, al->n_head, i);
        int32_t prev = al->n_head;
        for (uint32_t t = 0; t < al->ntail && st == KILN_OK; t++) {
            st = kiln_pattern_edge(pt, prev, 0, al->n_tail[t], 0);
            if (st == KILN_OK)
                st = kiln_pattern_edge(pt, operand[t], 0, al->n_tail[t], 1);
            prev = al->n_tail[t];
        }
        if (st == KILN_OK) /* Mul and Add: the operand may be either input */
            st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
        if (st == KILN_OK)
            st = kiln_pattern_output(pt, prev, 0);
    }
    if (st != KILN_OK)
        return kiln_errorf(err, st, "aicore affine fusion: building its patterns failed");
    return KILN_OK;
}

/* What a match folds: per output channel (or one) scale and shift. */
typedef struct af_fold {
    const af_alt *al;
    kiln_node_id head, tail[2];
    int64_t M;       /* output channels (AF_CONV) */
    int64_t group;   /* (AF_CONV) */
    bool transposed; /* ConvTranspose: W [C, M/group, k...] */
    kiln_tensor_value op[2];
    int64_t nop[2];
} af_fold;

/* The value of tail @p t's operand (the input that is not the chain). */
static bool operand_of(const kiln_graph *g, kiln_node_id tail, kiln_node_id prev,
                       kiln_tensor_value *v, int64_t *numel)
{
    const uint32_t oi = kiln_node_input_peer(g, tail, 0).node == prev ? 1 : 0;
    return nn_fx_const_input(g, tail, oi, v, numel);
}

/* A per-channel shape of M channels broadcast against [N, M, spatial...]. */
static bool per_channel(const kiln_tensor_value *v, int64_t M, int32_t out_rank)
{
    if (v->rank == 1)
        return v->dims[0] == M && out_rank == 2; /* [M] broadcasts on the last dim */
    if (v->rank < 2 || (int32_t)v->rank > out_rank)
        return false;
    /* [.., M, 1, ..., 1] with M at axis 1 of the output */
    const int32_t axis = (int32_t)v->rank - (out_rank - 1);
    if (axis < 0)
        return false;
    for (int32_t d = 0; d < (int32_t)v->rank; d++)
        if (v->dims[d] != (d == axis ? M : 1))
            return false;
    return true;
}

static bool af_read(const af_pass *p, const kiln_graph *g, const kiln_match *m, af_fold *f)
{
    uint32_t ai = kiln_match_pattern_index(m);
    if (ai >= p->nalt)
        return false;
    const af_alt *al = f->al = &p->alt[ai];
    f->head = kiln_match_node(m, al->n_head);
    if (!f->head)
        return false;
    const char *e = kiln_engine_for_node((kiln_graph *)g, f->head);
    const kiln_tensor_desc *hd = kiln_node_output_desc((kiln_graph *)g, f->head, 0);
    if (!e || strcmp(e, "aicore") != 0 || kiln_node_output_count(g, f->head) != 1 ||
        kiln_desc_dtype(hd) != KILN_DT_FLOAT32 || kiln_node_output_use_count(g, f->head, 0) != 1)
        return false;
    const bool has_act = cpu_attr_str(g, f->head, "_kiln_fused_activation", NULL) != NULL;
    if (p->kind == AF_CONV ? has_act : !has_act)
        return false;
    if (p->kind == AF_POST && kiln_attrs_has(kiln_node_attrs(g, f->head), "_kiln_fused_post_scale"))
        return false;
    const int32_t rank = kiln_desc_rank(hd);
    kiln_node_id prev = f->head;
    for (uint32_t t = 0; t < al->ntail; t++) {
        kiln_node_id n = f->tail[t] = kiln_match_node(m, al->n_tail[t]);
        if (!n || !nn_fx_absorbable(g, n) || nn_fx_feeds_netoutput(g, n) ||
            kiln_node_output_count(g, n) != 1 ||
            (t + 1 < al->ntail && kiln_node_output_use_count(g, n, 0) != 1))
            return false;
        const kiln_tensor_desc *d = kiln_node_output_desc((kiln_graph *)g, n, 0);
        if (kiln_desc_dtype(d) != KILN_DT_FLOAT32 || kiln_desc_rank(d) != rank)
            return false;
        const int64_t *a = kiln_desc_dims(hd), *b = kiln_desc_dims(d);
        /* the affine keeps the head's shape (an unknown dim stays the same
         * unknown: a scalar or per-channel operand never broadcasts it) */
        for (int32_t k = 0; k < rank; k++)
            if (a[k] != b[k])
                return false;
        if (!operand_of(g, n, prev, &f->op[t], &f->nop[t]))
            return false;
        prev = n;
    }
    if (p->kind == AF_POST) {
        for (uint32_t t = 0; t < al->ntail; t++)
            if (f->nop[t] != 1)
                return false;
        return true;
    }
    /* ConvAffine: W and B Const, operands scalar or per output channel */
    kiln_tensor_value w, b;
    int64_t nw, nb;
    if (rank < 3 || !nn_fx_const_input(g, f->head, 1, &w, &nw) || w.rank < 3 ||
        strlen(kiln_node_name_str(g, f->head)) > 200)
        return false;
    f->transposed = strcmp(kiln_node_op_str(g, f->head), "ConvTranspose") == 0;
    f->group = cpu_attr_int(g, f->head, "group", 1);
    if (f->group < 1 || (f->transposed && w.dims[0] % f->group != 0))
        return false;
    f->M = f->transposed ? w.dims[1] * f->group : w.dims[0];
    if (al->head_in == 3 && (!nn_fx_const_input(g, f->head, 2, &b, &nb) || nb != f->M))
        return false;
    for (uint32_t t = 0; t < al->ntail; t++)
        if (f->nop[t] != 1 && !per_channel(&f->op[t], f->M, rank))
            return false;
    return true;
}

static bool af_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    af_fold f;
    return af_read(inst, g, m, &f);
}

/* The scale and shift of channel @p k (1 and 0 when the chain has none). */
static void affine_at(const af_fold *f, int64_t k, double *s, double *c)
{
    *s = 1.0;
    *c = 0.0;
    for (uint32_t t = 0; t < f->al->ntail; t++) {
        const float *v = f->op[t].data;
        const double x = (double)v[f->nop[t] == 1 ? 0 : k];
        if (strcmp(f->al->tail[t], "Mul") == 0) {
            *s *= x;
            *c *= x;
        } else {
            *c += x;
        }
    }
}

static void explain(kiln_pass_ctx *ctx, const kiln_graph *g, const kiln_match *m, const af_fold *f,
                    const char *what)
{
    if (!nn_fx_will_fuse(g, m))
        return;
    for (uint32_t t = 0; t < f->al->ntail; t++)
        kiln_pass_explain(ctx, (kiln_graph *)g, f->tail[t], "fused by engine aicore into %s %s %s",
                          kiln_node_op_str(g, f->head), kiln_node_name_str(g, f->head), what);
}

static kiln_status conv_affine_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                       const kiln_match *m, kiln_graph *repl)
{
    af_fold f;
    kiln_status st = nn_fx_enabled(ctx, NN_FUSE_CONV_AFFINE);
    if (st != KILN_OK)
        return st;
    if (!af_read(inst, g, m, &f))
        return KILN_ERR_NOT_FOUND;
    kiln_tensor_value w, b = {0};
    int64_t nw, nb = 0;
    if (!nn_fx_const_input(g, f.head, 1, &w, &nw) ||
        (f.al->head_in == 3 && !nn_fx_const_input(g, f.head, 2, &b, &nb)))
        return KILN_ERR_NOT_FOUND;
    const int64_t M = f.M, per = nw / M;
    float *nwv = kiln_alloc((size_t)nw * sizeof(float));
    float *nbv = kiln_alloc((size_t)M * sizeof(float));
    if (!nwv || !nbv) {
        kiln_free(nwv);
        kiln_free(nbv);
        return KILN_ERR_NOMEM;
    }
    const float *wv = w.data, *bv = f.al->head_in == 3 ? b.data : NULL;
    for (int64_t k = 0; k < M; k++) {
        double s, c;
        affine_at(&f, k, &s, &c);
        if (!f.transposed)
            for (int64_t j = 0; j < per; j++)
                nwv[k * per + j] = (float)((double)wv[k * per + j] * s);
        nbv[k] = (float)((bv ? (double)bv[k] : 0.0) * s + c);
    }
    if (f.transposed) {
        /* row c of W belongs to group c / (C / group); its column j is output
         * channel group_index * Mg + j */
        const int64_t C = w.dims[0], Mg = w.dims[1], Cg = C / f.group, ks = nw / (C * Mg);
        for (int64_t ci = 0; ci < C; ci++)
            for (int64_t j = 0; j < Mg; j++) {
                double s, c;
                affine_at(&f, (ci / Cg) * Mg + j, &s, &c);
                const int64_t at = (ci * Mg + j) * ks;
                for (int64_t k = 0; k < ks; k++)
                    nwv[at + k] = (float)((double)wv[at + k] * s);
            }
    }
    explain(ctx, g, m, &f, "as a weight and bias scale (conv_affine)");
    kiln_node_id n = nn_fx_copy_head(repl, g, f.head, 1);
    char wname[256], bname[256];
    snprintf(wname, sizeof(wname), "%s_affine_w", kiln_node_name_str(g, f.head));
    snprintf(bname, sizeof(bname), "%s_affine_b", kiln_node_name_str(g, f.head));
    const int64_t bdims[1] = {M};
    st = n ? KILN_OK : KILN_ERR_NOMEM;
    if (st == KILN_OK && kiln_node_input_count(repl, n) < 3)
        st = kiln_node_set_input_count(repl, n, 3);
    if (st == KILN_OK)
        st = nn_fx_const(repl, n, 1, wname, w.dims, w.rank, nwv, nw);
    if (st == KILN_OK)
        st = nn_fx_const(repl, n, 2, bname, bdims, 1, nbv, M);
    kiln_free(nwv);
    kiln_free(nbv);
    if (st == KILN_OK)
        st = nn_fx_finish(repl, n);
    return st;
}

static kiln_status post_scale_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                      const kiln_match *m, kiln_graph *repl)
{
    af_fold f;
    kiln_status st = nn_fx_enabled(ctx, NN_FUSE_POST_SCALE);
    if (st != KILN_OK)
        return st;
    if (!af_read(inst, g, m, &f))
        return KILN_ERR_NOT_FOUND;
    double s, c;
    affine_at(&f, 0, &s, &c);
    explain(ctx, g, m, &f, "after its activation (post_scale)");
    kiln_node_id n = nn_fx_copy_head(repl, g, f.head, f.al->head_in);
    if (!n)
        return KILN_ERR_NOMEM;
    kiln_attrs *at = kiln_node_attrs_mut(repl, n);
    st = kiln_attrs_set_float(at, "_kiln_fused_post_scale", s);
    if (st == KILN_OK)
        st = kiln_attrs_set_float(at, "_kiln_fused_post_shift", c);
    if (st == KILN_OK)
        st = nn_fx_finish(repl, n);
    return st;
}

kiln_status nn_register_affine_fusion_passes(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    static const kiln_fusion_pass_desc passes[] = {
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "ConvAffineFusionPass",
            .summary = "aicore: Conv / ConvTranspose + Mul / Add of a scalar or per-channel Const "
                       "-> the same op with scaled W and B (new Consts)",
            .create = conv_affine_create,
            .destroy = af_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = af_patterns,
            .meet_requirements = af_meet,
            .replacement = conv_affine_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "PostActivationScaleFusionPass",
            .summary = "aicore: Conv / ConvTranspose / Gemm with a fused activation + Mul / Add "
                       "of a scalar Const -> _kiln_fused_post_scale / _kiln_fused_post_shift",
            .create = post_scale_create,
            .destroy = af_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = af_patterns,
            .meet_requirements = af_meet,
            .replacement = post_scale_replace,
        },
    };
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]) && st == KILN_OK; i++)
        st = kiln_register_fusion_pass(r, &passes[i]);
    return st;
}
