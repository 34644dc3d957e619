/*
 * nn_dnnl_deconv.c - ConvTranspose on oneDNN's deconvolution primitive: the
 * aicore engine's default ConvTranspose backend (nn_conv_transpose.c falls
 * back to sgemm + col2im on OpenBLAS when this one refuses a node, and uses
 * that alone under aicore.conv_backend=blas).
 *
 * It works as nn_dnnl.c's Conv does and shares its loader (libdnnl dlopen'd
 * on the first binding, the process's CPU engine, the scratch for blocked
 * copies, serial execution of small primitives): everything is made once
 * per node when the runtime binds the kernel.  The geometry comes resolved
 * from nn_conv_transpose.c (strides, dilations, pads, output_padding,
 * output_shape and auto_pad folded into pads at begin and end of each
 * spatial dim); oneDNN's descriptor takes the begin pad as padding_l and
 *   padding_r = stride (in - 1) + (k - 1) dilation + 1 - padding_l - out
 * which is the end pad minus output_padding, so it is negative when
 * output_padding exceeds the end pad (oneDNN takes padding_r > -stride; an
 * output_shape larger still is refused and runs on OpenBLAS).
 *
 * Weights: ONNX's W is [C, M/group, k...], i.e. for each input channel the
 * filters of the output channels of its group.  oneDNN's deconvolution
 * weights are logically (O, I, k...) or, grouped, (G, O/G, I/G, k...); the
 * ONNX order is their permutation iohw (iow, iodhw) and giohw (giow,
 * giodhw).  A Const W is reordered into the primitive's packed layout here,
 * once; a W computed at run time is reordered per call.
 *
 * Source and destination are format_tag_any (oneDNN's blocked layouts on
 * AVX2 / AVX-512; plain for dense deconvolutions of fewer than
 * NN_DECONV_PLAIN_M output channels), reordered from and to the user's
 * NC(D)HW tensors, or,
 * when the node is made with nhwc, channels-last tensors X [N, spatial...,
 * C] and Y [N, spatial..., M] (nwc / nhwc / ndhwc).  The fused activation
 * runs as eltwise post-ops, as Conv's does, unless the node has a bias:
 * oneDNN 2.x adds a deconvolution's bias in a slow separate pass (X [1, 24,
 * 160, 160], 2x2 stride 2, 24 channels, 1 thread: 1.8 ms without bias, 16.7
 * ms with it; a binary-add post-op is slower still), so the primitive runs
 * without it and the kernel adds bias and activation in one pass over the
 * output (bias_act).
 */
#include <oneapi/dnnl/dnnl.h> /* before nn_ops.h: its oneDNN section */

#include "nn_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D nn_dnnl_fn

/* A dense deconvolution of fewer output channels than this runs on the
 * user's plain layouts (oneDNN's gemm-based kernel: sgemm + col2im, with
 * the post-ops) instead of the blocked ones: the blocked kernels pad the
 * output channels to a block of 16, so their time does not shrink with M,
 * while the GEMM's does (1 thread, X [1, 24, 320, 320], 2x2 stride 2: 0.5 ms
 * plain against 4.4 ms blocked with the reorders at M = 1, 1.9 against 4.8
 * at M = 4, 5.3 against 4.9 at M = 8). */

struct nn_dnnl_deconv {
    uint32_t rank;
    int64_t xdims[5], wdims[5];
    bool has_bias; /* added with the activation after the primitive (see above) */
    bool nhwc;
    int64_t N, M, OS; /* Y's batch, channels, spatial size */
    nn_act act;       /* applied by bias_act (a bias), else a post-op */
    dnnl_stream_t stream;
    dnnl_primitive_t deconv;
    dnnl_primitive_t src_reorder, dst_reorder, wei_reorder; /* NULL: not needed */
    dnnl_memory_t src_user, dst_user, wei_user;
    dnnl_memory_t src_blk, dst_blk, wei_packed; /* src/dst: handles set per call */
    size_t src_bytes, dst_bytes;                /* of src_blk / dst_blk (0: unused) */
    bool serial;                                /* run on the calling thread alone */
    char why[256];                              /* why oneDNN refused the node */
};

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

void nn_dnnl_deconv_destroy(nn_dnnl_deconv *c)
{
    if (!c)
        return;
    dnnl_primitive_t prims[] = {c->deconv, c->src_reorder, c->dst_reorder, c->wei_reorder};
    for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
        if (prims[i])
            D.dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {c->src_user, c->dst_user, c->wei_user,
                            c->src_blk,  c->dst_blk,  c->wei_packed};
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++)
        if (mems[i])
            D.dnnl_memory_destroy(mems[i]);
    if (c->stream)
        D.dnnl_stream_destroy(c->stream);
    kiln_free(c);
}

#define REFUSE(...)                                                                                \
    do {                                                                                           \
        snprintf(c->why, sizeof(c->why), __VA_ARGS__);                                             \
        goto refused;                                                                              \
    } while (0)
#define CHECK(call, what)                                                                          \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success)                                                                    \
            REFUSE("%s: oneDNN status %d", what, (int)s_);                                         \
    } while (0)

/* Pack the Const W of @p n (@p nw floats) into c->wei_packed, or keep the
 * reorder for the calls when W is computed. */
static dnnl_status_t pack_weights(nn_dnnl_deconv *c, dnnl_engine_t eng, const kiln_graph *g,
                                  kiln_node_id n, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, int64_t nw)
{
    dnnl_status_t s = D.dnnl_memory_create(&c->wei_packed, to, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_primitive_t r = NULL;
    if (s == dnnl_success)
        s = nn_dnnl_make_reorder(from, to, &r);
    if (s != dnnl_success)
        return s;
    const float *wc = nn_dnnl_const_input(g, n, 1, nw);
    if (!wc) {
        c->wei_reorder = r; /* W is computed: reorder per call */
        return dnnl_success;
    }
    s = D.dnnl_memory_set_data_handle(c->wei_user, (void *)wc);
    if (s == dnnl_success)
        s = nn_dnnl_run_reorder(c->stream, r, c->wei_user, c->wei_packed);
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    D.dnnl_primitive_destroy(r);
    return s;
}

/* y = act(y + b) per output channel, on the user's layout. */
static void bias_act(const nn_dnnl_deconv *c, const float *b, float *y)
{
    if (!c->nhwc) {
        for (int64_t i = 0; i < c->N * c->M; i++) {
            float *row = y + i * c->OS;
            const float bv = b[i % c->M];
            for (int64_t o = 0; o < c->OS; o++)
                row[o] += bv;
            nn_act_apply(&c->act, row, c->OS);
        }
        return;
    }
    /* blocks of pixels: the bias per pixel, then the activation over the
     * block while it is in cache (one call per block, not per pixel) */
    const int64_t P = c->N * c->OS, blk = 256;
    for (int64_t p0 = 0; p0 < P; p0 += blk) {
        const int64_t p1 = p0 + blk < P ? p0 + blk : P;
        for (int64_t p = p0; p < p1; p++) {
            float *px = y + p * c->M;
            for (int64_t m = 0; m < c->M; m++)
                px[m] += b[m];
        }
        nn_act_apply(&c->act, y + p0 * c->M, (p1 - p0) * c->M);
    }
}

nn_dnnl_deconv *nn_dnnl_deconv_create(const kiln_graph *g, kiln_node_id n, const nn_geom *geo,
                                      int64_t group, const nn_act *act, bool nhwc, char *why,
                                      size_t whysz)
{
    nn_dnnl_deconv *c = kiln_alloc(sizeof(*c));
    if (!c) {
        snprintf(why, whysz, "out of memory");
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    int omp_saved = 0;
    dnnl_engine_t eng = nn_dnnl_engine(c->why, sizeof(c->why));
    if (!eng)
        goto refused;

    int64_t x[8], w[8];
    int32_t rx = nn_input_dims(g, n, 0, x, 8), rw = nn_input_dims(g, n, 1, w, 8);
    if (rx < 3 || rx > 5 || rw != rx)
        REFUSE("X and W need static shapes of rank 3 to 5");
    const uint32_t nsp = (uint32_t)rx - 2, off = NN_SP - nsp;
    const kiln_tensor_desc *od = kiln_node_output_desc((kiln_graph *)g, n, 0);
    if (kiln_desc_dtype(od) != KILN_DT_FLOAT32 || kiln_desc_rank(od) != rx)
        REFUSE("the output is not a float32 tensor of X's rank");
    for (uint32_t i = 0; i < 3; i++) {
        const kiln_tensor_desc *d =
            kiln_node_input_has_desc(g, n, i) ? kiln_node_input_desc(g, n, i) : NULL;
        if (d && kiln_desc_dtype(d) != KILN_DT_FLOAT32)
            REFUSE("input %u is not float32", i);
    }
    /* logical (oneDNN) dims: N, C, spatial... whatever the user layout */
    const int64_t N = x[0], C = nhwc ? x[rx - 1] : x[1], Mg = w[1];
    const int64_t *xsp = nhwc ? x + 1 : x + 2;
    if (group < 1 || w[0] != C || C % group != 0 || N < 1 || Mg < 1 || C < 1)
        REFUSE("inconsistent channels and group");
    const int64_t M = Mg * group, Cg = C / group;
    if (!geo || geo->nsp != nsp)
        REFUSE("no geometry for %u spatial dims", nsp);
    for (uint32_t i = 0; i < nsp; i++)
        if (geo->in[off + i] != xsp[i] || geo->k[off + i] != w[2 + i] || geo->in[off + i] < 1 ||
            geo->out[off + i] < 1)
            REFUSE("the geometry does not match X and W, or is empty");
    int64_t yl[5]; /* Y's logical dims (N, M, spatial...) */
    yl[0] = N;
    yl[1] = M;
    for (uint32_t i = 0; i < nsp; i++)
        yl[2 + i] = geo->out[off + i];
    const int64_t *yd = kiln_desc_dims(od);
    for (int32_t i = 0; i < rx; i++) {
        /* the user's Y: [N, M, sp...] or, channels last, [N, sp..., M] */
        const int32_t li = !nhwc ? i : (i == 0 ? 0 : (i == rx - 1 ? 1 : i + 1));
        if (yd[i] != yl[li])
            REFUSE("the output descriptor differs from the deconvolution's shape");
    }
    double macs = (double)N * (double)C * (double)Mg;
    for (uint32_t i = 0; i < nsp; i++)
        macs *= (double)xsp[i] * (double)w[2 + i];
    c->serial = nn_dnnl_is_serial(macs);
    /* oneDNN sizes a primitive's work split when it is created */
    omp_saved = nn_dnnl_serial_begin(c->serial);

    c->rank = (uint32_t)rx;
    memcpy(c->xdims, x, (size_t)rx * sizeof(int64_t));
    memcpy(c->wdims, w, (size_t)rx * sizeof(int64_t));
    c->has_bias = kiln_node_input_count(g, n) > 2 && kiln_node_input_peer(g, n, 2).node;
    c->nhwc = nhwc;
    c->N = N;
    c->M = M;
    c->OS = 1;
    for (uint32_t i = 0; i < nsp; i++)
        c->OS *= yl[2 + i];
    c->act = *act;

    static const dnnl_format_tag_t nc_tag[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    static const dnnl_format_tag_t nhwc_tag[] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
    /* ONNX W [C, M/group, k...] as oneDNN's (O, I, k...) / (G, O/G, I/G, k...) */
    static const dnnl_format_tag_t w_tag[] = {dnnl_bac, dnnl_iohw, dnnl_iodhw};
    static const dnnl_format_tag_t gw_tag[] = {dnnl_acbd, dnnl_giohw, dnnl_giodhw};
    const dnnl_format_tag_t io_tag = nhwc ? nhwc_tag[nsp - 1] : nc_tag[nsp - 1];
    dnnl_dims_t sd, dd, wd;
    sd[0] = N;
    sd[1] = C;
    for (uint32_t i = 0; i < nsp; i++)
        sd[2 + i] = xsp[i];
    memcpy(dd, yl, (size_t)rx * sizeof(int64_t));
    int wrank;
    if (group > 1) {
        wd[0] = group;
        wd[1] = Mg;
        wd[2] = Cg;
        for (uint32_t i = 0; i < nsp; i++)
            wd[3 + i] = w[2 + i];
        wrank = rx + 1;
    } else {
        wd[0] = M;
        wd[1] = C;
        for (uint32_t i = 0; i < nsp; i++)
            wd[2 + i] = w[2 + i];
        wrank = rx;
    }
    dnnl_memory_desc_t src_p, dst_p, wei_p, src_a, dst_a, wei_a;
    CHECK(D.dnnl_memory_desc_init_by_tag(&src_p, rx, sd, dnnl_f32, io_tag), "src desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&dst_p, rx, dd, dnnl_f32, io_tag), "dst desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&wei_p, wrank, wd, dnnl_f32,
                                         group > 1 ? gw_tag[nsp - 1] : w_tag[nsp - 1]),
          "weights desc");
    /* Fewer than NN_DECONV_PLAIN_M output channels: the user's layout, no
     * reorders (the blocked kernels pad the channels to 16, see above).
     * Channels-last: the user's layout too (det's 24 -> 24 2x2 stride 2: 1.8 ms
     * on NHWC against 3.3 ms blocked plus 1.9 ms of reorders). */
    const dnnl_format_tag_t any_tag =
        nhwc || (group == 1 && M < NN_DECONV_PLAIN_M) ? io_tag : dnnl_format_tag_any;
    CHECK(D.dnnl_memory_desc_init_by_tag(&src_a, rx, sd, dnnl_f32, any_tag), "src any");
    CHECK(D.dnnl_memory_desc_init_by_tag(&dst_a, rx, dd, dnnl_f32, any_tag), "dst any");
    CHECK(D.dnnl_memory_desc_init_by_tag(&wei_a, wrank, wd, dnnl_f32, dnnl_format_tag_any),
          "weights any");

    dnnl_dims_t strides, dil, pl, pr;
    for (uint32_t i = 0; i < nsp; i++) {
        const uint32_t k = off + i;
        const int64_t krange = (geo->k[k] - 1) * geo->d[k] + 1;
        strides[i] = geo->s[k];
        dil[i] = geo->d[k] - 1; /* oneDNN counts the holes */
        pl[i] = geo->pb[k];
        pr[i] = geo->s[k] * (geo->in[k] - 1) + krange - geo->pb[k] - geo->out[k];
        if (pl[i] < 0 || pr[i] <= -geo->s[k])
            REFUSE("pads %lld/%lld of spatial dim %u: oneDNN takes begin >= 0 and end > -stride "
                   "(output_padding or output_shape too large)",
                   (long long)pl[i], (long long)pr[i], i);
    }
    dnnl_deconvolution_desc_t dc;
    CHECK(D.dnnl_dilated_deconvolution_forward_desc_init(&dc, dnnl_forward_inference,
                                                         dnnl_deconvolution_direct, &src_a, &wei_a,
                                                         NULL, &dst_a, strides, dil, pl, pr),
          "deconvolution descriptor");
    CHECK(D.dnnl_primitive_attr_create(&attr), "attributes");
    CHECK(D.dnnl_post_ops_create(&po), "post-ops");
    if (!c->has_bias && !nn_dnnl_act_post_ops(act, po))
        REFUSE("the fused activation has no oneDNN post-op");
    CHECK(D.dnnl_primitive_attr_set_post_ops(attr, po), "post-ops");
    CHECK(D.dnnl_primitive_desc_create(&pd, &dc, attr, eng, NULL), "deconvolution");
    CHECK(D.dnnl_primitive_create(&c->deconv, pd), "deconvolution primitive");

    const dnnl_memory_desc_t *src_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dst_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *wei_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    CHECK(D.dnnl_stream_create(&c->stream, eng, dnnl_stream_default_flags), "stream");
    CHECK(D.dnnl_memory_create(&c->src_user, &src_p, eng, DNNL_MEMORY_NONE), "src memory");
    CHECK(D.dnnl_memory_create(&c->dst_user, &dst_p, eng, DNNL_MEMORY_NONE), "dst memory");
    CHECK(D.dnnl_memory_create(&c->wei_user, &wei_p, eng, DNNL_MEMORY_NONE), "weights memory");
    if (!D.dnnl_memory_desc_equal(src_m, &src_p)) {
        CHECK(nn_dnnl_make_reorder(&src_p, src_m, &c->src_reorder), "source reorder");
        CHECK(D.dnnl_memory_create(&c->src_blk, src_m, eng, DNNL_MEMORY_NONE), "src memory");
        c->src_bytes = round64(D.dnnl_memory_desc_get_size(src_m));
    }
    if (!D.dnnl_memory_desc_equal(dst_m, &dst_p)) {
        CHECK(nn_dnnl_make_reorder(dst_m, &dst_p, &c->dst_reorder), "destination reorder");
        CHECK(D.dnnl_memory_create(&c->dst_blk, dst_m, eng, DNNL_MEMORY_NONE), "dst memory");
        c->dst_bytes = round64(D.dnnl_memory_desc_get_size(dst_m));
    }
    if (!D.dnnl_memory_desc_equal(wei_m, &wei_p)) {
        int64_t nw = 1;
        for (int32_t i = 0; i < rx; i++)
            nw *= w[i];
        CHECK(pack_weights(c, eng, g, n, &wei_p, wei_m, nw), "packing the weights");
    }
    D.dnnl_primitive_desc_destroy(pd);
    D.dnnl_primitive_attr_destroy(attr);
    D.dnnl_post_ops_destroy(po);
    nn_dnnl_serial_end(omp_saved);
    return c;

refused:
    nn_dnnl_serial_end(omp_saved);
    snprintf(why, whysz, "%s", c->why);
    if (pd)
        D.dnnl_primitive_desc_destroy(pd);
    if (attr)
        D.dnnl_primitive_attr_destroy(attr);
    if (po)
        D.dnnl_post_ops_destroy(po);
    nn_dnnl_deconv_destroy(c);
    return NULL;
}

bool nn_dnnl_deconv_matches(const nn_dnnl_deconv *c, const kiln_tensor *X, const kiln_tensor *W,
                            const kiln_tensor *B)
{
    if (X->rank != c->rank || W->rank != c->rank || (B != NULL) != c->has_bias)
        return false;
    for (uint32_t i = 0; i < c->rank; i++)
        if (X->dims[i] != c->xdims[i] || W->dims[i] != c->wdims[i])
            return false;
    return true;
}

kiln_status nn_dnnl_deconv_run(nn_dnnl_deconv *c, const kiln_kernel_args *a, const kiln_tensor *X,
                               const kiln_tensor *W, const kiln_tensor *B, kiln_error *err)
{
    const size_t need = c->src_bytes + c->dst_bytes;
    void *scratch = NULL, *owned = NULL;
    bool locked = false;
    if (need && !(scratch = nn_dnnl_scratch_get(need, &locked, &owned)))
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for oneDNN's layouts");
    dnnl_status_t s = D.dnnl_memory_set_data_handle(c->src_user, X->data);
    if (s == dnnl_success)
        s = D.dnnl_memory_set_data_handle(c->dst_user, a->outputs[0].data);
    if (s == dnnl_success && c->src_blk)
        s = D.dnnl_memory_set_data_handle(c->src_blk, scratch);
    if (s == dnnl_success && c->dst_blk)
        s = D.dnnl_memory_set_data_handle(c->dst_blk, (char *)scratch + c->src_bytes);
    const int nthr = nn_dnnl_serial_begin(c->serial); /* the reorders too */
    dnnl_memory_t wei = c->wei_packed ? c->wei_packed : c->wei_user;
    if (s == dnnl_success && (c->wei_reorder || !c->wei_packed))
        s = D.dnnl_memory_set_data_handle(c->wei_user, W->data);
    if (s == dnnl_success && c->wei_reorder)
        s = nn_dnnl_run_reorder(c->stream, c->wei_reorder, c->wei_user, c->wei_packed);
    dnnl_memory_t src = c->src_blk ? c->src_blk : c->src_user;
    dnnl_memory_t dst = c->dst_blk ? c->dst_blk : c->dst_user;
    if (s == dnnl_success && c->src_reorder)
        s = nn_dnnl_run_reorder(c->stream, c->src_reorder, c->src_user, c->src_blk);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
        s = D.dnnl_primitive_execute(c->deconv, c->stream, 3, args);
    }
    if (s == dnnl_success && c->dst_reorder)
        s = nn_dnnl_run_reorder(c->stream, c->dst_reorder, c->dst_blk, c->dst_user);
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    nn_dnnl_serial_end(nthr);
    nn_dnnl_scratch_put(locked, owned);
    if (s != dnnl_success)
        return cpu_fail(a, err, KILN_ERR_INTERNAL, "oneDNN deconvolution failed (status %d)",
                        (int)s);
    if (c->has_bias)
        bias_act(c, B->data, a->outputs[0].data);
    return KILN_OK;
}
