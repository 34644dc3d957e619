/*
 * nn_dnnl.c - Conv on oneDNN (libdnnl): the aicore engine's default
 * convolution backend (nn_conv.c falls back to im2col + OpenBLAS when this
 * one refuses a node, and uses it alone under aicore.conv_backend=blas).
 *
 * Everything is made once per node, when the runtime binds the kernel
 * (prepare): the convolution primitive, chosen by oneDNN with format_tag
 * any for source, weights and destination (its blocked nChw16c-like layouts
 * on AVX-512 / AVX2 machines), the fused activation as eltwise post-ops, the
 * reorders between the user's plain NCHW tensors and the primitive's
 * layouts, and the weights: a Const W is reordered into the primitive's
 * packed layout here, once; a W computed at run time is reordered per call.
 * A call reorders X into the primitive's source layout (unless it is plain
 * already), runs the convolution and reorders the result into the output
 * (ditto).  Dense 1x1 convolutions run on plain NCHW source and destination:
 * oneDNN is as fast there as in its blocked layouts, so the reorders would
 * be pure cost (bench_kernels; on depthwise and KxK convolutions the plain
 * layout is 2-100x slower than the blocked one plus the reorders).  The blocked source and
 * destination live in one scratch buffer shared by every oneDNN convolution of the process (grown
 * to the largest need; a call that finds it busy, on another stream's thread, takes a private one),
 * so the blocked copies cost no memory per node.
 *
 * libdnnl itself is loaded (dlopen) and the oneDNN CPU engine created on
 * the first binding, not when the plugin loads: verbs that bind no Conv
 * kernel never map the 40 MB library (nor the OpenCL loader and libgomp it
 * pulls in).  When it cannot be loaded every Conv runs on im2col + OpenBLAS.
 * oneDNN's Debian build runs on OpenMP, so its threads follow
 * OMP_NUM_THREADS, which `kiln -j N` sets.  A convolution of fewer than
 * NN_DNNL_SERIAL_MACS multiply-adds runs on the calling thread alone (the
 * calling thread's OpenMP thread count is 1 around its execution): with the
 * CLI's OMP_WAIT_POLICY=PASSIVE, waking the workers for it costs more than
 * sharing the work saves.
 */
#include <oneapi/dnnl/dnnl.h> /* before nn_ops.h: its oneDNN section */

#include "nn_ops.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

/* ---- the process's oneDNN engine and the shared scratch ------------------- */

/* The oneDNN functions (NN_DNNL_FUNCS in nn_ops.h), resolved by dlopen on first use. */
#define DNNL_FUNCS NN_DNNL_FUNCS
struct nn_dnnl_fns nn_dnnl_fn;
#define D nn_dnnl_fn
#define DNNL_STR2(x) #x
#define DNNL_STR(x) DNNL_STR2(x)
#define DNNL_SONAME "libdnnl.so." DNNL_STR(DNNL_VERSION_MAJOR)

static once_flag dnnl_once = ONCE_FLAG_INIT;
static bool lock_ok;
static mtx_t dnnl_lock; /* guards dnnl_eng and the scratch */
static void *dnnl_lib;  /* never closed: OpenMP workers run in it */
/* Below this many multiply-adds a convolution runs on one thread (about 0.2 ms
 * of work on one core with AVX-512). */
#define NN_DNNL_SERIAL_MACS 16e6
/* A pooling of fewer output elements runs on the calling thread too. */
#define NN_DNNL_SERIAL_POOL_OUT 262144

static char dnnl_err[200];
static int (*omp_max)(void);
static void (*omp_set)(int);
static dnnl_engine_t dnnl_eng;
static void *scratch_p;
static size_t scratch_n;

/* Load libdnnl and resolve D (once per process); false with dnnl_err set. */
static bool dnnl_load(void)
{
    if (dnnl_lib)
        return true;
    void *h = dlopen(DNNL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(dnnl_err, sizeof(dnnl_err), "%s", e ? e : DNNL_SONAME ": dlopen failed");
        dlerror(); /* glibc frees the message on the next call */
        return false;
    }
#define DNNL_RESOLVE(f)                                                                            \
    {                                                                                              \
        void *sym = dlsym(h, #f);                                                                  \
        if (!sym) {                                                                                \
            snprintf(dnnl_err, sizeof(dnnl_err), "%s has no %s", DNNL_SONAME, #f);                 \
            dlclose(h);                                                                            \
            return false;                                                                          \
        }                                                                                          \
        memcpy(&D.f, &sym, sizeof(sym));                                                           \
    }
    DNNL_FUNCS(DNNL_RESOLVE)
#undef DNNL_RESOLVE
    /* OpenMP's thread count, through the library's own OpenMP runtime (optional:
     * a oneDNN on another threading runtime has none) */
    void *sym = dlsym(h, "omp_get_max_threads");
    memcpy(&omp_max, &sym, sizeof(sym));
    sym = dlsym(h, "omp_set_num_threads");
    memcpy(&omp_set, &sym, sizeof(sym));
    dnnl_lib = h;
    return true;
}

static void lock_init(void) { lock_ok = mtx_init(&dnnl_lock, mtx_plain) == thrd_success; }

/* The process's oneDNN CPU engine, created on first use (NULL on failure, with dnnl_err). */
static dnnl_engine_t engine_get(void)
{
    call_once(&dnnl_once, lock_init);
    if (!lock_ok)
        return NULL;
    mtx_lock(&dnnl_lock);
    if (!dnnl_eng && dnnl_load() && D.dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0) != dnnl_success) {
        dnnl_eng = NULL;
        snprintf(dnnl_err, sizeof(dnnl_err), "the oneDNN CPU engine could not be created");
    }
    dnnl_engine_t e = dnnl_eng;
    mtx_unlock(&dnnl_lock);
    return e;
}

void nn_dnnl_shutdown(void)
{
    if (!lock_ok)
        return;
    mtx_lock(&dnnl_lock);
    if (dnnl_eng)
        D.dnnl_engine_destroy(dnnl_eng);
    dnnl_eng = NULL;
    free(scratch_p);
    scratch_p = NULL;
    scratch_n = 0;
    mtx_unlock(&dnnl_lock);
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- the per-node state --------------------------------------------------- */

struct nn_dnnl_conv {
    uint32_t rank;
    int64_t xdims[5], wdims[5];
    bool has_bias;
    dnnl_stream_t stream;
    dnnl_primitive_t conv;
    dnnl_primitive_t src_reorder, dst_reorder, wei_reorder; /* NULL: not needed */
    dnnl_memory_t src_user, dst_user, wei_user, bias;
    dnnl_memory_t src_blk, dst_blk, wei_packed; /* src/dst: handles set per call */
    size_t src_bytes, dst_bytes;                /* of src_blk / dst_blk (0: unused) */
    bool serial;                                /* too small to share out (NN_DNNL_SERIAL_MACS) */
    char why[256];                              /* why oneDNN refused the node */
};

void nn_dnnl_conv_destroy(nn_dnnl_conv *c)
{
    if (!c)
        return;
    dnnl_primitive_t prims[] = {c->conv, c->src_reorder, c->dst_reorder, c->wei_reorder};
    for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
        if (prims[i])
            D.dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {c->src_user, c->dst_user, c->wei_user,  c->bias,
                            c->src_blk,  c->dst_blk,  c->wei_packed};
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++)
        if (mems[i])
            D.dnnl_memory_destroy(mems[i]);
    if (c->stream)
        D.dnnl_stream_destroy(c->stream);
    kiln_free(c);
}

/* A reorder primitive from @p from to @p to. */
static dnnl_status_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                  dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = D.dnnl_reorder_primitive_desc_create(&pd, from, dnnl_eng, to, dnnl_eng, NULL);
    if (s != dnnl_success)
        return s;
    s = D.dnnl_primitive_create(out, pd);
    D.dnnl_primitive_desc_destroy(pd);
    return s;
}

static dnnl_status_t run_reorder(dnnl_stream_t st, dnnl_primitive_t r, dnnl_memory_t from,
                                 dnnl_memory_t to)
{
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return D.dnnl_primitive_execute(r, st, 2, a);
}

/* The eltwise post-ops of @p act (false: none matches it). */
static bool act_kind_post_ops(const nn_act *act, dnnl_post_ops_t po);

/* The fused activation, then the post-activation affine y * scale + shift. */
static bool act_post_ops(const nn_act *act, dnnl_post_ops_t po)
{
    return act_kind_post_ops(act, po) &&
           (!act->has_post ||
            D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, act->post_scale,
                                           act->post_shift) == dnnl_success);
}

static bool act_kind_post_ops(const nn_act *act, dnnl_post_ops_t po)
{
    switch (act->kind) {
    case NN_ACT_NONE:
        return true;
    case NN_ACT_RELU:
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) ==
               dnnl_success;
    case NN_ACT_LEAKY_RELU: /* relu with a negative slope */
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, act->alpha, 0.0f) ==
               dnnl_success;
    case NN_ACT_CLIP:
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, act->alpha, act->beta) ==
               dnnl_success;
    case NN_ACT_HARD_SIGMOID: /* clip(alpha x + beta, 0, 1) */
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, act->alpha,
                                              act->beta) == dnnl_success &&
               D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f) ==
                   dnnl_success;
    case NN_ACT_HARD_SWISH: /* x relu6(x + 3) / 6 */
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_hardswish, 0.0f, 0.0f) ==
               dnnl_success;
    case NN_ACT_SIGMOID:
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_logistic, 0.0f, 0.0f) ==
               dnnl_success;
    case NN_ACT_SWISH: /* x sigmoid(1 x) */
        return D.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_swish, 1.0f, 0.0f) ==
               dnnl_success;
    }
    return false;
}

/* The Const float32 value feeding input @p i of @p n with @p count floats, or NULL. */
static const float *const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, int64_t count)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node)
        return NULL;
    const char *op = kiln_node_op_str(g, p.node);
    if (!op || (strcmp(op, "Const") != 0 && strcmp(op, "Constant") != 0))
        return NULL;
    kiln_tensor_value v;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, p.node), "value", &v) ||
        v.dtype != KILN_DT_FLOAT32 || v.nbytes != (size_t)count * sizeof(float) || !v.data)
        return NULL;
    return v.data;
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

nn_dnnl_conv *nn_dnnl_conv_create(const kiln_graph *g, kiln_node_id n, const nn_win *win,
                                  int64_t group, const nn_act *act, char *why, size_t whysz)
{
    nn_dnnl_conv *c = kiln_alloc(sizeof(*c));
    if (!c) {
        snprintf(why, whysz, "out of memory");
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    int omp_saved = 0; /* the thread count to restore (a serial convolution's creation) */
    if (!engine_get())
        REFUSE("%s", dnnl_err);

    int64_t x[8], w[8], y[8], xphys[8];
    int32_t rx = nn_input_dims(g, n, 0, x, 8), rw = nn_input_dims(g, n, 1, w, 8);
    if (rx < 3 || rx > 5 || rw != rx)
        REFUSE("X and W need static shapes of rank 3 to 5");
    memcpy(xphys, x, (size_t)rx * sizeof(int64_t));
    const bool nhwc = nn_is_nhwc(g, n);
    if (nhwc) {
        if (rx != 4)
            REFUSE("data_format NHWC needs a rank-4 X");
        nn_nhwc_to_nchw_dims(xphys, x);
    }
    const kiln_tensor_desc *od = kiln_node_output_desc((kiln_graph *)g, n, 0);
    if (kiln_desc_dtype(od) != KILN_DT_FLOAT32 || kiln_desc_rank(od) != rx)
        REFUSE("the output is not a float32 tensor of X's rank");
    for (uint32_t i = 0; i < 3; i++) {
        const kiln_tensor_desc *d =
            kiln_node_input_has_desc(g, n, i) ? kiln_node_input_desc(g, n, i) : NULL;
        if (d && kiln_desc_dtype(d) != KILN_DT_FLOAT32)
            REFUSE("input %u is not float32", i);
    }
    const uint32_t nsp = (uint32_t)rx - 2;
    nn_geom geo;
    if (nn_geom_forward(win, nsp, x + 2, w + 2, &geo, NULL, NULL) != KILN_OK)
        REFUSE("the window does not resolve against the input");
    const int64_t N = x[0], C = x[1], M = w[0], Cg = w[1];
    if (group < 1 || Cg * group != C || M % group != 0 || N < 1)
        REFUSE("inconsistent channels and group");
    y[0] = N;
    y[1] = M;
    for (uint32_t i = 0; i < nsp; i++)
        y[2 + i] = geo.out[NN_SP - nsp + i];
    double macs = (double)N * (double)M * (double)Cg;
    for (uint32_t i = 0; i < nsp; i++)
        macs *= (double)y[2 + i] * (double)w[2 + i];
    c->serial = nn_dnnl_is_serial(macs);
    /* oneDNN sizes a primitive's work split when it is created: a serial one is
     * created with one thread too */
    omp_saved = nn_dnnl_serial_begin(c->serial);
    int64_t yd[8];
    memcpy(yd, kiln_desc_dims(od), (size_t)rx * sizeof(int64_t));
    if (nhwc)
        nn_nhwc_to_nchw_dims(kiln_desc_dims(od), yd);
    for (int32_t i = 0; i < rx; i++)
        if (yd[i] != y[i])
            REFUSE("the output descriptor differs from the convolution's shape");
    int64_t ny = 1;
    for (int32_t i = 0; i < rx; i++)
        ny *= y[i];
    if (ny == 0)
        REFUSE("empty output");

    c->rank = (uint32_t)rx;
    memcpy(c->xdims, xphys, (size_t)rx * sizeof(int64_t)); /* as the calls see X */
    memcpy(c->wdims, w, (size_t)rx * sizeof(int64_t));
    c->has_bias = kiln_node_input_count(g, n) > 2 && kiln_node_input_peer(g, n, 2).node;

    static const dnnl_format_tag_t act_tag[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    static const dnnl_format_tag_t w_tag[] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
    static const dnnl_format_tag_t gw_tag[] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
    dnnl_dims_t sd, dd, wd, bd = {M};
    int wrank;
    memcpy(sd, x, (size_t)rx * sizeof(int64_t));
    memcpy(dd, y, (size_t)rx * sizeof(int64_t));
    if (group > 1) {
        wd[0] = group;
        wd[1] = M / group;
        wd[2] = Cg;
        for (uint32_t i = 0; i < nsp; i++)
            wd[3 + i] = w[2 + i];
        wrank = rx + 1;
    } else {
        memcpy(wd, w, (size_t)rx * sizeof(int64_t));
        wrank = rx;
    }
    dnnl_memory_desc_t src_p, dst_p, wei_p, bia_p, src_a, dst_a, wei_a;
    /* the user's layout: plain NCHW, or channels-last under data_format NHWC */
    const dnnl_format_tag_t user_tag = nhwc ? dnnl_nhwc : act_tag[nsp - 1];
    CHECK(D.dnnl_memory_desc_init_by_tag(&src_p, rx, sd, dnnl_f32, user_tag), "src desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&dst_p, rx, dd, dnnl_f32, user_tag), "dst desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&wei_p, wrank, wd, dnnl_f32,
                                         group > 1 ? gw_tag[nsp - 1] : w_tag[nsp - 1]),
          "weights desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&bia_p, 1, bd, dnnl_f32, dnnl_x), "bias desc");
    /* A dense 1x1 convolution (a GEMM over the pixels) is as fast on plain
     * NCHW as on the blocked layouts (bench_kernels): no reorders for it. */
    bool pointwise = group == 1;
    for (uint32_t i = 0; i < NN_SP; i++)
        if (geo.k[i] != 1 || geo.s[i] != 1 || geo.pb[i] || geo.pe[i])
            pointwise = false;
    /* Channels-last source and destination are oneDNN's native layout for its
     * brgemm convolutions (dense, 1x1 and depthwise alike): the primitive
     * works on the user's tensors directly, with no reorder. */
    const dnnl_format_tag_t io_tag =
        nhwc ? dnnl_nhwc : pointwise ? act_tag[nsp - 1] : dnnl_format_tag_any;
    CHECK(D.dnnl_memory_desc_init_by_tag(&src_a, rx, sd, dnnl_f32, io_tag), "src any");
    CHECK(D.dnnl_memory_desc_init_by_tag(&dst_a, rx, dd, dnnl_f32, io_tag), "dst any");
    CHECK(D.dnnl_memory_desc_init_by_tag(&wei_a, wrank, wd, dnnl_f32, dnnl_format_tag_any),
          "weights any");

    dnnl_dims_t strides, dil, pl, pr;
    for (uint32_t i = 0; i < nsp; i++) {
        const uint32_t k = NN_SP - nsp + i;
        strides[i] = geo.s[k];
        dil[i] = geo.d[k] - 1; /* oneDNN counts the holes */
        pl[i] = geo.pb[k];
        pr[i] = geo.pe[k];
    }
    dnnl_convolution_desc_t cd;
    CHECK(D.dnnl_dilated_convolution_forward_desc_init(
              &cd, dnnl_forward_inference, dnnl_convolution_direct, &src_a, &wei_a,
              c->has_bias ? &bia_p : NULL, &dst_a, strides, dil, pl, pr),
          "convolution descriptor");
    CHECK(D.dnnl_primitive_attr_create(&attr), "attributes");
    CHECK(D.dnnl_post_ops_create(&po), "post-ops");
    if (!act_post_ops(act, po))
        REFUSE("the fused activation has no oneDNN post-op");
    CHECK(D.dnnl_primitive_attr_set_post_ops(attr, po), "post-ops");
    CHECK(D.dnnl_primitive_desc_create(&pd, &cd, attr, dnnl_eng, NULL), "convolution");
    CHECK(D.dnnl_primitive_create(&c->conv, pd), "convolution primitive");

    const dnnl_memory_desc_t *src_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dst_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *wei_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    CHECK(D.dnnl_stream_create(&c->stream, dnnl_eng, dnnl_stream_default_flags), "stream");
    CHECK(D.dnnl_memory_create(&c->src_user, &src_p, dnnl_eng, DNNL_MEMORY_NONE), "src memory");
    CHECK(D.dnnl_memory_create(&c->dst_user, &dst_p, dnnl_eng, DNNL_MEMORY_NONE), "dst memory");
    CHECK(D.dnnl_memory_create(&c->wei_user, &wei_p, dnnl_eng, DNNL_MEMORY_NONE), "weights memory");
    if (c->has_bias)
        CHECK(D.dnnl_memory_create(&c->bias, &bia_p, dnnl_eng, DNNL_MEMORY_NONE), "bias memory");
    if (!D.dnnl_memory_desc_equal(src_m, &src_p)) {
        CHECK(make_reorder(&src_p, src_m, &c->src_reorder), "source reorder");
        CHECK(D.dnnl_memory_create(&c->src_blk, src_m, dnnl_eng, DNNL_MEMORY_NONE), "src memory");
        c->src_bytes = round64(D.dnnl_memory_desc_get_size(src_m));
    }
    if (!D.dnnl_memory_desc_equal(dst_m, &dst_p)) {
        CHECK(make_reorder(dst_m, &dst_p, &c->dst_reorder), "destination reorder");
        CHECK(D.dnnl_memory_create(&c->dst_blk, dst_m, dnnl_eng, DNNL_MEMORY_NONE), "dst memory");
        c->dst_bytes = round64(D.dnnl_memory_desc_get_size(dst_m));
    }
    if (!D.dnnl_memory_desc_equal(wei_m, &wei_p)) {
        CHECK(D.dnnl_memory_create(&c->wei_packed, wei_m, dnnl_eng, DNNL_MEMORY_ALLOCATE),
              "packed weights");
        dnnl_primitive_t r = NULL;
        CHECK(make_reorder(&wei_p, wei_m, &r), "weights reorder");
        int64_t nw = 1;
        for (int32_t i = 0; i < rx; i++)
            nw *= w[i];
        const float *wc = const_input(g, n, 1, nw);
        if (wc) { /* pack once */
            dnnl_status_t s = D.dnnl_memory_set_data_handle(c->wei_user, (void *)wc);
            if (s == dnnl_success)
                s = run_reorder(c->stream, r, c->wei_user, c->wei_packed);
            if (s == dnnl_success)
                s = D.dnnl_stream_wait(c->stream);
            D.dnnl_primitive_destroy(r);
            CHECK(s, "packing the weights");
        } else {
            c->wei_reorder = r; /* W is computed: reorder per call */
        }
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
    nn_dnnl_conv_destroy(c);
    return NULL;
}

bool nn_dnnl_conv_matches(const nn_dnnl_conv *c, const kiln_tensor *X, const kiln_tensor *W,
                          const kiln_tensor *B)
{
    if (X->rank != c->rank || W->rank != c->rank || (B != NULL) != c->has_bias)
        return false;
    for (uint32_t i = 0; i < c->rank; i++)
        if (X->dims[i] != c->xdims[i] || W->dims[i] != c->wdims[i])
            return false;
    return true;
}

kiln_status nn_dnnl_conv_run(nn_dnnl_conv *c, const kiln_kernel_args *a, const kiln_tensor *X,
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
    if (s == dnnl_success && c->has_bias)
        s = D.dnnl_memory_set_data_handle(c->bias, B->data);
    /* a small convolution runs on the calling thread, its reorders too:
     * waking the pool's (passive) workers would cost more than sharing the
     * work saves */
    const int nthr = nn_dnnl_serial_begin(c->serial);
    dnnl_memory_t wei = c->wei_packed ? c->wei_packed : c->wei_user;
    if (s == dnnl_success && (c->wei_reorder || !c->wei_packed))
        s = D.dnnl_memory_set_data_handle(c->wei_user, W->data);
    if (s == dnnl_success && c->wei_reorder)
        s = run_reorder(c->stream, c->wei_reorder, c->wei_user, c->wei_packed);
    dnnl_memory_t src = c->src_blk ? c->src_blk : c->src_user;
    dnnl_memory_t dst = c->dst_blk ? c->dst_blk : c->dst_user;
    if (s == dnnl_success && c->src_reorder)
        s = run_reorder(c->stream, c->src_reorder, c->src_user, c->src_blk);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_WEIGHTS, wei},
                                   {DNNL_ARG_DST, dst},
                                   {DNNL_ARG_BIAS, c->bias}};
        s = D.dnnl_primitive_execute(c->conv, c->stream, c->has_bias ? 4 : 3, args);
    }
    if (s == dnnl_success && c->dst_reorder)
        s = run_reorder(c->stream, c->dst_reorder, c->dst_blk, c->dst_user);
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    nn_dnnl_serial_end(nthr);
    nn_dnnl_scratch_put(locked, owned);
    if (s != dnnl_success)
        return cpu_fail(a, err, KILN_ERR_INTERNAL, "oneDNN convolution failed (status %d)", (int)s);
    return KILN_OK;
}

/* ---- pooling (MaxPool, AveragePool) ------------------------------------------ */

struct nn_dnnl_pool {
    uint32_t rank;
    int64_t xdims[5]; /* as the calls see X */
    dnnl_stream_t stream;
    dnnl_primitive_t pool;
    dnnl_memory_t src, dst, ws;
    bool serial;
    char why[256];
};

void nn_dnnl_pool_destroy(nn_dnnl_pool *c)
{
    if (!c)
        return;
    if (c->pool)
        D.dnnl_primitive_destroy(c->pool);
    dnnl_memory_t mems[] = {c->src, c->dst, c->ws};
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++)
        if (mems[i])
            D.dnnl_memory_destroy(mems[i]);
    if (c->stream)
        D.dnnl_stream_destroy(c->stream);
    kiln_free(c);
}

nn_dnnl_pool *nn_dnnl_pool_create(const kiln_graph *g, kiln_node_id n, const nn_win *win, bool avg,
                                  bool count_include_pad, char *why, size_t whysz)
{
    nn_dnnl_pool *c = kiln_alloc(sizeof(*c));
    if (!c) {
        snprintf(why, whysz, "out of memory");
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    dnnl_primitive_desc_t pd = NULL;
    if (!engine_get())
        REFUSE("%s", dnnl_err);
    if (avg && count_include_pad)
        REFUSE("count_include_pad 1 (oneDNN divides the ceil_mode overhang too)");
    if (kiln_node_output_count(g, n) > 1 && kiln_node_output_use_count(g, n, 1))
        REFUSE("the Indices output is used");
    int64_t x[8], xl[8];
    int32_t rx = nn_input_dims(g, n, 0, x, 8);
    if (rx < 3 || rx > 5)
        REFUSE("X needs a static shape of rank 3 to 5");
    const bool nhwc = nn_is_nhwc(g, n);
    memcpy(xl, x, (size_t)rx * sizeof(int64_t));
    if (nhwc) {
        if (rx != 4)
            REFUSE("data_format NHWC needs a rank-4 X");
        nn_nhwc_to_nchw_dims(x, xl);
    }
    const kiln_tensor_desc *od = kiln_node_output_desc((kiln_graph *)g, n, 0);
    if (kiln_desc_dtype(od) != KILN_DT_FLOAT32 || kiln_desc_rank(od) != rx)
        REFUSE("the output is not a float32 tensor of X's rank");
    const uint32_t nsp = (uint32_t)rx - 2;
    nn_geom geo;
    if (nn_geom_forward(win, nsp, xl + 2, NULL, &geo, NULL, NULL) != KILN_OK)
        REFUSE("the window does not resolve against the input");
    int64_t y[8], yd[8];
    y[0] = xl[0];
    y[1] = xl[1];
    int64_t ny = y[0] * y[1];
    dnnl_dims_t strides, kernel, dil, pl, pr;
    for (uint32_t i = 0; i < nsp; i++) {
        const uint32_t k = NN_SP - nsp + i;
        y[2 + i] = geo.out[k];
        ny *= y[2 + i];
        strides[i] = geo.s[k];
        kernel[i] = geo.k[k];
        dil[i] = geo.d[k] - 1;
        pl[i] = geo.pb[k];
        /* the end pad that gives out (ceil_mode's overhang included) */
        pr[i] = (geo.out[k] - 1) * geo.s[k] + (geo.k[k] - 1) * geo.d[k] + 1 - geo.in[k] - geo.pb[k];
        if (pr[i] < 0)
            pr[i] = 0;
    }
    memcpy(yd, kiln_desc_dims(od), (size_t)rx * sizeof(int64_t));
    if (nhwc)
        nn_nhwc_to_nchw_dims(kiln_desc_dims(od), yd);
    for (int32_t i = 0; i < rx; i++)
        if (yd[i] != y[i])
            REFUSE("the output descriptor differs from the pooling's shape");
    if (ny == 0)
        REFUSE("empty output");
    c->rank = (uint32_t)rx;
    memcpy(c->xdims, x, (size_t)rx * sizeof(int64_t));
    c->serial = ny < NN_DNNL_SERIAL_POOL_OUT;
    static const dnnl_format_tag_t act_tag[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    const dnnl_format_tag_t tag = nhwc ? dnnl_nhwc : act_tag[nsp - 1];
    dnnl_dims_t sd, dd;
    memcpy(sd, xl, (size_t)rx * sizeof(int64_t));
    memcpy(dd, y, (size_t)rx * sizeof(int64_t));
    dnnl_memory_desc_t src_m, dst_m;
    CHECK(D.dnnl_memory_desc_init_by_tag(&src_m, rx, sd, dnnl_f32, tag), "src desc");
    CHECK(D.dnnl_memory_desc_init_by_tag(&dst_m, rx, dd, dnnl_f32, tag), "dst desc");
    dnnl_pooling_v2_desc_t desc;
    CHECK(D.dnnl_pooling_v2_forward_desc_init(
              &desc, dnnl_forward_inference,
              avg ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max, &src_m, &dst_m, strides,
              kernel, dil, pl, pr),
          "pooling descriptor");
    CHECK(D.dnnl_primitive_desc_create(&pd, &desc, NULL, dnnl_eng, NULL), "pooling");
    CHECK(D.dnnl_primitive_create(&c->pool, pd), "pooling primitive");
    const dnnl_memory_desc_t *ws_m = D.dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
    CHECK(D.dnnl_stream_create(&c->stream, dnnl_eng, dnnl_stream_default_flags), "stream");
    CHECK(D.dnnl_memory_create(&c->src, &src_m, dnnl_eng, DNNL_MEMORY_NONE), "src memory");
    CHECK(D.dnnl_memory_create(&c->dst, &dst_m, dnnl_eng, DNNL_MEMORY_NONE), "dst memory");
    if (ws_m && D.dnnl_memory_desc_get_size(ws_m))
        CHECK(D.dnnl_memory_create(&c->ws, ws_m, dnnl_eng, DNNL_MEMORY_ALLOCATE), "workspace");
    D.dnnl_primitive_desc_destroy(pd);
    return c;

refused:
    snprintf(why, whysz, "%s", c->why);
    if (pd)
        D.dnnl_primitive_desc_destroy(pd);
    nn_dnnl_pool_destroy(c);
    return NULL;
}

bool nn_dnnl_pool_matches(const nn_dnnl_pool *c, const kiln_tensor *X)
{
    if (X->rank != c->rank)
        return false;
    for (uint32_t i = 0; i < c->rank; i++)
        if (X->dims[i] != c->xdims[i])
            return false;
    return true;
}

kiln_status nn_dnnl_pool_run(nn_dnnl_pool *c, const kiln_kernel_args *a, const kiln_tensor *X,
                             kiln_error *err)
{
    dnnl_status_t s = D.dnnl_memory_set_data_handle(c->src, X->data);
    if (s == dnnl_success)
        s = D.dnnl_memory_set_data_handle(c->dst, a->outputs[0].data);
    const int nthr = nn_dnnl_serial_begin(c->serial);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, c->src}, {DNNL_ARG_DST, c->dst}, {DNNL_ARG_WORKSPACE, c->ws}};
        s = D.dnnl_primitive_execute(c->pool, c->stream, c->ws ? 3 : 2, args);
    }
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    nn_dnnl_serial_end(nthr);
    if (s != dnnl_success)
        return cpu_fail(a, err, KILN_ERR_INTERNAL, "oneDNN pooling failed (status %d)", (int)s);
    return KILN_OK;
}

/* ---- the loader's services (nn_ops.h): convolution, pooling, nn_dnnl_deconv.c -- */

dnnl_engine_t nn_dnnl_engine(char *why, size_t whysz)
{
    dnnl_engine_t e = engine_get();
    if (!e)
        snprintf(why, whysz, "%s", lock_ok ? dnnl_err : "the oneDNN lock could not be made");
    return e;
}

dnnl_status_t nn_dnnl_make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                   dnnl_primitive_t *out)
{
    return make_reorder(from, to, out);
}

dnnl_status_t nn_dnnl_run_reorder(dnnl_stream_t st, dnnl_primitive_t r, dnnl_memory_t from,
                                  dnnl_memory_t to)
{
    return run_reorder(st, r, from, to);
}

bool nn_dnnl_act_post_ops(const nn_act *act, dnnl_post_ops_t po) { return act_post_ops(act, po); }

const float *nn_dnnl_const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, int64_t count)
{
    return const_input(g, n, i, count);
}

bool nn_dnnl_is_serial(double macs) { return macs < NN_DNNL_SERIAL_MACS; }

int nn_dnnl_serial_begin(bool serial)
{
    int saved = serial && omp_max && omp_set ? omp_max() : 0;
    if (saved > 1) {
        omp_set(1);
        return saved;
    }
    return 0;
}

void nn_dnnl_serial_end(int saved)
{
    if (saved > 1)
        omp_set(saved);
}

void *nn_dnnl_scratch_get(size_t need, bool *locked, void **owned)
{
    void *scratch = NULL;
    *locked = false;
    *owned = NULL;
    if (mtx_trylock(&dnnl_lock) == thrd_success) {
        *locked = true;
        if (scratch_n < need) {
            void *p = aligned_alloc(64, round64(need));
            if (p) {
                free(scratch_p);
                scratch_p = p;
                scratch_n = round64(need);
            }
        }
        if (scratch_n >= need)
            scratch = scratch_p;
    }
    if (!scratch) {
        scratch = *owned = aligned_alloc(64, round64(need));
        if (!scratch && *locked) {
            mtx_unlock(&dnnl_lock);
            *locked = false;
        }
    }
    return scratch;
}

void nn_dnnl_scratch_put(bool locked, void *owned)
{
    if (locked)
        mtx_unlock(&dnnl_lock);
    free(owned);
}
