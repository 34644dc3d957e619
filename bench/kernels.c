/*
 * kernels.c - kiln's kernels beside oneDNN's and XNNPACK's, op by op, on the
 * shapes of the real models (not a test; bench/README.md "kernels").
 *
 *   bench_kernels [-n RUNS] [-t THREADS] [CASE_SUBSTRING]
 *
 * Every case is one node of a real model (the table below names the model
 * and the node's shape).  For each case and each thread count (1 and 2 by
 * default; -t picks one) the program runs, in a child process with
 * OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set, and OMP_WAIT_POLICY=PASSIVE
 * unless the environment sets it, as the kiln CLI does (both libraries fix their
 * thread count when they load):
 *   kiln     the kernel kiln's runtime binds for the node today (the engine
 *            the kernel's placement picks, through kiln_engine_kernel), on
 *            NCHW data, as `kiln run` calls it; a Conv's W and B are Const
 *            nodes, as in a compiled model (the aicore engine packs W once)
 *   k-blas   the same kernel with the node attribute _kiln_conv_backend =
 *            "blas" (the session option aicore.conv_backend=blas): the
 *            im2col + OpenBLAS fallback (ConvTranspose: sgemm + col2im);
 *            Conv and ConvTranspose cases only
 *   dnnl     oneDNN (libdnnl-dev), plain NCHW in and out, weights reordered
 *            once to the primitive's preferred layout
 *   dnnl-blk oneDNN with source and destination in the layout the primitive
 *            prefers (nChw16c-like blocked formats): what an engine keeping a
 *            chain of convolutions in its own format pays per node
 *   xnnpack  XNNPACK (libxnnpack-dev), NHWC in and out, weights packed at
 *            operator creation (MatMul: fully connected, 2-D only; not for
 *            ConvTranspose)
 * Each figure is the median of RUNS executions after two warm-up runs, in
 * microseconds; the ratio columns are library / kiln (< 1: the library is
 * faster).  Every library's output is compared with kiln's (max abs diff
 * over max |kiln|): a mismatch above 1e-4 fails the program, so a figure
 * always belongs to a correct result.
 *
 * Plugins: the default manifest (<exe>/../share/kiln/manifests/default.json,
 * or $KILN_MANIFEST) is loaded for its engines.
 */
#include "bench_util.h"
#include "ctx.h"
#include "graph_int.h"
#include "manifest.h"

#include <kiln/kiln_runtime.h>

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xnnpack.h>

/* ---- the cases ------------------------------------------------------------ */

typedef enum { OP_CONV, OP_MATMUL, OP_CONVT } op_kind;

typedef struct bcase {
    const char *name; /* model: what the node is */
    op_kind op;
    /* conv: x [1, c, h, w], w [m, c/g, kh, kw], group g, stride, pad (t, l, b, r);
     * convt (ConvTranspose): the same with w [c, m/g, kh, kw]
     * matmul: [batch, rows, k] x [k, n] (b == 1) or x [batch, k, n] (b > 1) */
    int64_t c, h, w, m, kh, kw, g, sh, sw, pt, pl, pb, pr;
    int64_t batch, rows, k, n, bbatched;
} bcase;

#define CONV(nm, c_, h_, w_, m_, kh_, kw_, g_, sh_, sw_, pt_, pl_, pb_, pr_)                       \
    {                                                                                              \
        nm, OP_CONV, c_, h_, w_, m_, kh_, kw_, g_, sh_, sw_, pt_, pl_, pb_, pr_, 0, 0, 0, 0, 0     \
    }
#define CONVT(nm, c_, h_, w_, m_, kh_, kw_, g_, sh_, sw_, pt_, pl_, pb_, pr_)                      \
    {                                                                                              \
        nm, OP_CONVT, c_, h_, w_, m_, kh_, kw_, g_, sh_, sw_, pt_, pl_, pb_, pr_, 0, 0, 0, 0, 0    \
    }
#define MATMUL(nm, batch_, rows_, k_, n_, bb_)                                                     \
    {                                                                                              \
        nm, OP_MATMUL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, batch_, rows_, k_, n_, bb_           \
    }

static const bcase cases[] = {
    /* PP-OCRv4 det, input 1x3x640x640 */
    CONV("det stem 3x3 s2 3->16 @640", 3, 640, 640, 16, 3, 3, 1, 2, 2, 1, 1, 1, 1),
    CONV("det dw3x3 16 @320", 16, 320, 320, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1),
    CONV("det pw 16->32 @320", 16, 320, 320, 32, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("det dw3x3 s2 32 @320", 32, 320, 320, 32, 3, 3, 32, 2, 2, 1, 1, 1, 1),
    CONV("det dw3x3 48 @160", 48, 160, 160, 48, 3, 3, 48, 1, 1, 1, 1, 1, 1),
    CONV("det pw 48->48 @160", 48, 160, 160, 48, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("det 3x3 96->24 @160", 96, 160, 160, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    CONV("det pw 12->96 @160", 12, 160, 160, 96, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("det dw5x5 192 @40", 192, 40, 40, 192, 5, 5, 192, 1, 1, 2, 2, 2, 2),
    CONV("det pw 192->192 @40", 192, 40, 40, 192, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("det dw5x5 384 @20", 384, 20, 20, 384, 5, 5, 384, 1, 1, 2, 2, 2, 2),
    CONV("det pw 384->384 @20", 384, 20, 20, 384, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONVT("det convT 2x2 s2 24->24 @160", 24, 160, 160, 24, 2, 2, 1, 2, 2, 0, 0, 0, 0),
    CONVT("det convT 2x2 s2 24->1 @320", 24, 320, 320, 1, 2, 2, 1, 2, 2, 0, 0, 0, 0),
    /* PP-OCRv4 rec, input 1x3x48x320 */
    CONV("rec dw5x5 240 @12x80", 240, 12, 80, 240, 5, 5, 240, 1, 1, 2, 2, 2, 2),
    CONV("rec pw 240->240 @12x80", 240, 12, 80, 240, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("rec dw5x5 s(2,1) 480 @6x80", 480, 6, 80, 480, 5, 5, 480, 2, 1, 2, 2, 2, 2),
    CONV("rec pw 480->480 @3x80", 480, 3, 80, 480, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("rec 1x3 960->60 @1x40", 960, 1, 40, 60, 1, 3, 1, 1, 1, 0, 1, 0, 1),
    MATMUL("rec matmul 40x120 * 120x6625", 1, 40, 120, 6625, 0),
    MATMUL("rec matmul 40x120 * 120x360", 1, 40, 120, 360, 0),
    MATMUL("rec attention 8x(40x15 * 15x40)", 8, 40, 15, 40, 1),
    /* ppocr cls, input 1x3x48x192 */
    CONV("cls pw 32->200 @2x96", 32, 2, 96, 200, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("cls dw5x5 200 @2x96", 200, 2, 96, 200, 5, 5, 200, 1, 1, 2, 2, 2, 2),
    /* embedding_model, batch 1 */
    CONV("emb 3x1 24->24 @74x32", 24, 74, 32, 24, 3, 1, 1, 1, 1, 0, 0, 0, 0),
    CONV("emb 1x3 48->48 @34x16", 48, 34, 16, 48, 1, 3, 1, 1, 1, 0, 1, 0, 1),
};

/* ---- helpers ----------------------------------------------------------------- */

static void die(const char *what, const kiln_error *err)
{
    char buf[KILN_ERROR_TEXT_SIZE];
    buf[0] = 0;
    if (err)
        kiln_error_format(err, buf, sizeof(buf));
    fprintf(stderr, "bench_kernels: %s%s%s\n", what, buf[0] ? ": " : "", buf);
    exit(1);
}

static void dnnl_check(dnnl_status_t s, const char *what)
{
    if (s != dnnl_success) {
        fprintf(stderr, "bench_kernels: oneDNN: %s failed (status %d)\n", what, (int)s);
        exit(1);
    }
}

static void xnn_check(enum xnn_status s, const char *what)
{
    if (s != xnn_status_success) {
        fprintf(stderr, "bench_kernels: XNNPACK: %s failed (status %d)\n", what, (int)s);
        exit(1);
    }
}

static float *falloc(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) / 64 * 64 + 64);
    if (!p)
        die("out of memory", NULL);
    return p;
}

/* Deterministic values in [-1, 1) (xorshift32). */
static void fill(float *p, size_t n, uint32_t seed)
{
    uint32_t x = seed ? seed : 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (float)((int32_t)(x >> 8) - 8388608) * (1.0f / 8388608.0f);
    }
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*run_fn)(void *arg);

/* Median wall time of @p runs calls after two warm-ups, in microseconds. */
static double time_us(run_fn fn, void *arg, int runs)
{
    double t[256];
    if (runs > 256)
        runs = 256;
    fn(arg);
    fn(arg);
    for (int i = 0; i < runs; i++) {
        double t0 = now();
        fn(arg);
        t[i] = (now() - t0) * 1e6;
    }
    qsort(t, (size_t)runs, sizeof(double), dcmp);
    return t[runs / 2];
}

/* max |a - b| / max(max |b|, 1e-6) */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double md = 0, mb = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md)
            md = d;
        if (fabs((double)b[i]) > mb)
            mb = fabs((double)b[i]);
    }
    return md / mb;
}

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1)
{
    return (in + p0 + p1 - k) / s + 1;
}

/* Output size of case @p c along H (@p h_dim) or W: Conv's or ConvTranspose's. */
static int64_t case_out(const bcase *c, bool h_dim)
{
    const int64_t in = h_dim ? c->h : c->w, k = h_dim ? c->kh : c->kw, s = h_dim ? c->sh : c->sw;
    const int64_t p0 = h_dim ? c->pt : c->pl, p1 = h_dim ? c->pb : c->pr;
    return c->op == OP_CONVT ? s * (in - 1) + k - p0 - p1 : conv_out(in, k, s, p0, p1);
}

/* ---- kiln: one node, its kernel bound through the engine API -------------- */

typedef struct kiln_side {
    kiln_graph *g;
    kiln_kernel_fn fn;
    void *state;
    const char *engine;
    kiln_tensor in[3], out[1];
    int64_t dims[4][4];
    kiln_kernel_args args;
} kiln_side;

/* A Data input, or a Const holding @p value when it is not NULL. */
static kiln_node_id add_input(kiln_graph *g, const char *name, uint32_t rank, const int64_t *d,
                              const float *value)
{
    kiln_node_id n = kiln_graph_add_node(g, name, value ? "Const" : "Data", 0, 1);
    if (!n || kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), (int32_t)rank, d))
        die("building the graph", NULL);
    if (value) {
        int64_t numel = 1;
        for (uint32_t i = 0; i < rank; i++)
            numel *= d[i];
        kiln_tensor_value v = {KILN_DT_FLOAT32, rank, d, value, (size_t)numel * sizeof(float)};
        if (kiln_attrs_set_tensor(kiln_node_attrs_mut(g, n), "value", &v))
            die("building the graph", NULL);
    }
    return n;
}

static void kiln_run_once(void *arg)
{
    kiln_side *k = arg;
    kiln_error err;
    kiln_error_clear(&err);
    if (k->fn(k->state, &k->args, &err) != KILN_OK)
        die("kiln kernel", &err);
}

static void kiln_bind(kiln_side *k, kiln_ctx *ctx, const bcase *c, float *x, float *w, float *b,
                      float *y, bool blas)
{
    memset(k, 0, sizeof(*k));
    k->g = kiln_graph_create(ctx, "bench");
    if (!k->g)
        die("graph create", NULL);
    kiln_graph *g = k->g;
    uint32_t nin, rank[3], orank;
    if (c->op != OP_MATMUL) {
        int64_t oh = case_out(c, true), ow = case_out(c, false);
        int64_t xd[4] = {1, c->c, c->h, c->w}, wd[4] = {c->m, c->c / c->g, c->kh, c->kw};
        if (c->op == OP_CONVT) {
            wd[0] = c->c;
            wd[1] = c->m / c->g;
        }
        int64_t bd[1] = {c->m}, yd[4] = {1, c->m, oh, ow};
        memcpy(k->dims[0], xd, sizeof(xd));
        memcpy(k->dims[1], wd, sizeof(wd));
        memcpy(k->dims[2], bd, sizeof(bd));
        memcpy(k->dims[3], yd, sizeof(yd));
        nin = 3;
        rank[0] = 4, rank[1] = 4, rank[2] = 1, orank = 4;
    } else {
        int64_t xd[3] = {c->batch, c->rows, c->k}, wd3[3] = {c->batch, c->k, c->n};
        int64_t wd2[2] = {c->k, c->n}, yd[3] = {c->batch, c->rows, c->n};
        memcpy(k->dims[0], xd, sizeof(xd));
        if (c->bbatched)
            memcpy(k->dims[1], wd3, sizeof(wd3));
        else
            memcpy(k->dims[1], wd2, sizeof(wd2));
        memcpy(k->dims[3], yd, sizeof(yd));
        nin = 2;
        rank[0] = 3, rank[1] = c->bbatched ? 3 : 2, orank = 3;
    }
    static const char *const in_names[3] = {"x", "w", "b"};
    static const char *const op_names[] = {"Conv", "MatMul", "ConvTranspose"};
    kiln_node_id node = kiln_graph_add_node(g, "op", op_names[c->op], nin, 1);
    if (!node)
        die("building the graph", NULL);
    float *bufs[3] = {x, w, b};
    for (uint32_t i = 0; i < nin; i++) {
        const bool is_const = c->op != OP_MATMUL && i > 0;
        kiln_node_id d = add_input(g, in_names[i], rank[i], k->dims[i], is_const ? bufs[i] : NULL);
        if (kiln_edge_add(g, d, 0, node, i))
            die("building the graph", NULL);
    }
    kiln_tensor_desc *od = kiln_node_output_desc(g, node, 0);
    if (kiln_desc_set_shape(g, od, (int32_t)orank, k->dims[3]))
        die("building the graph", NULL);
    if (c->op != OP_MATMUL) {
        kiln_attrs *a = kiln_node_attrs_mut(g, node);
        int64_t ks[2] = {c->kh, c->kw}, st[2] = {c->sh, c->sw};
        int64_t pads[4] = {c->pt, c->pl, c->pb, c->pr}, dil[2] = {1, 1};
        if (!a || kiln_attrs_set_list_int(a, "kernel_shape", ks, 2) ||
            kiln_attrs_set_list_int(a, "strides", st, 2) ||
            kiln_attrs_set_list_int(a, "pads", pads, 4) ||
            kiln_attrs_set_list_int(a, "dilations", dil, 2) ||
            kiln_attrs_set_int(a, "group", c->g) ||
            (blas && kiln_attrs_set_string(a, "_kiln_conv_backend", "blas")))
            die("building the graph", NULL);
    }
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_engine_kernel(g, node, &k->fn, &k->state, &k->engine, &err) != KILN_OK)
        die(c->name, &err);
    for (uint32_t i = 0; i < nin; i++) {
        int64_t numel = 1;
        for (uint32_t d = 0; d < rank[i]; d++)
            numel *= k->dims[i][d];
        k->in[i] = (kiln_tensor){KILN_DT_FLOAT32, rank[i], k->dims[i], bufs[i],
                                 (size_t)numel * sizeof(float)};
    }
    int64_t onumel = 1;
    for (uint32_t d = 0; d < orank; d++)
        onumel *= k->dims[3][d];
    k->out[0] =
        (kiln_tensor){KILN_DT_FLOAT32, orank, k->dims[3], y, (size_t)onumel * sizeof(float)};
    k->args = (kiln_kernel_args){.struct_size = sizeof(kiln_kernel_args),
                                 .graph = g,
                                 .node = node,
                                 .input_count = nin,
                                 .output_count = 1,
                                 .inputs = k->in,
                                 .outputs = k->out,
                                 .threads = 1};
}

static void kiln_unbind(kiln_side *k)
{
    kiln_engine_kernel_release(k->g, k->engine, k->state);
    kiln_graph_destroy(k->g);
}

/* ---- oneDNN ---------------------------------------------------------------------- */

typedef struct dnnl_side {
    dnnl_engine_t eng;
    dnnl_stream_t s;
    dnnl_primitive_t prim;
    dnnl_exec_arg_t args[4];
    int nargs;
    dnnl_memory_t mem[4]; /* src, weights, bias, dst as the primitive wants them */
} dnnl_side;

static void dnnl_run_once(void *arg)
{
    dnnl_side *d = arg;
    dnnl_check(dnnl_primitive_execute(d->prim, d->s, d->nargs, d->args), "execute");
    dnnl_check(dnnl_stream_wait(d->s), "stream wait");
}

/* A memory in layout @p want holding @p data given in @p have (reordered once). */
static dnnl_memory_t dnnl_mem_from(dnnl_engine_t eng, dnnl_stream_t s,
                                   const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *have,
                                   void *data)
{
    dnnl_memory_t src, dst;
    dnnl_check(dnnl_memory_create(&src, have, eng, data), "memory");
    dnnl_check(dnnl_memory_create(&dst, want, eng, DNNL_MEMORY_ALLOCATE), "memory");
    dnnl_primitive_desc_t rpd;
    dnnl_check(dnnl_reorder_primitive_desc_create(&rpd, have, eng, want, eng, NULL), "reorder pd");
    dnnl_primitive_t r;
    dnnl_check(dnnl_primitive_create(&r, rpd), "reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    dnnl_check(dnnl_primitive_execute(r, s, 2, a), "reorder run");
    dnnl_check(dnnl_stream_wait(s), "stream wait");
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(src);
    return dst;
}

/* Copy memory @p m (any layout) into plain @p plain_md at @p out. */
static void dnnl_mem_to(dnnl_side *d, dnnl_memory_t m, const dnnl_memory_desc_t *plain_md,
                        void *out)
{
    const dnnl_memory_desc_t *have;
    dnnl_check(dnnl_memory_get_memory_desc(m, &have), "memory desc");
    dnnl_memory_t dst;
    dnnl_check(dnnl_memory_create(&dst, plain_md, d->eng, out), "memory");
    dnnl_primitive_desc_t rpd;
    dnnl_check(dnnl_reorder_primitive_desc_create(&rpd, have, d->eng, plain_md, d->eng, NULL),
               "reorder pd");
    dnnl_primitive_t r;
    dnnl_check(dnnl_primitive_create(&r, rpd), "reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, dst}};
    dnnl_check(dnnl_primitive_execute(r, d->s, 2, a), "reorder run");
    dnnl_check(dnnl_stream_wait(d->s), "stream wait");
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(dst);
}

/* @p blocked: source and destination in the primitive's preferred layout. */
static void dnnl_setup(dnnl_side *d, const bcase *c, bool blocked, float *x, float *w, float *b,
                       float *y, dnnl_memory_desc_t *dst_plain)
{
    memset(d, 0, sizeof(*d));
    dnnl_check(dnnl_engine_create(&d->eng, dnnl_cpu, 0), "engine");
    dnnl_check(dnnl_stream_create(&d->s, d->eng, dnnl_stream_default_flags), "stream");
    dnnl_memory_desc_t src_p, wei_p, bia_p, src_a, wei_a, bia_a, dst_a;
    dnnl_primitive_desc_t pd;
    if (c->op != OP_MATMUL) {
        const bool convt = c->op == OP_CONVT;
        int64_t oh = case_out(c, true), ow = case_out(c, false);
        dnnl_dims_t sd = {1, c->c, c->h, c->w}, dd = {1, c->m, oh, ow}, bd = {c->m};
        dnnl_dims_t wd4 = {c->m, c->c, c->kh, c->kw};
        dnnl_dims_t wd5 = {c->g, c->m / c->g, c->c / c->g, c->kh, c->kw};
        bool grouped = c->g > 1;
        dnnl_check(dnnl_memory_desc_init_by_tag(&src_p, 4, sd, dnnl_f32, dnnl_nchw), "md");
        dnnl_check(dnnl_memory_desc_init_by_tag(dst_plain, 4, dd, dnnl_f32, dnnl_nchw), "md");
        /* ONNX's ConvTranspose W [c, m/g, kh, kw] is oneDNN's iohw / giohw */
        dnnl_check(grouped ? dnnl_memory_desc_init_by_tag(&wei_p, 5, wd5, dnnl_f32,
                                                          convt ? dnnl_giohw : dnnl_goihw)
                           : dnnl_memory_desc_init_by_tag(&wei_p, 4, wd4, dnnl_f32,
                                                          convt ? dnnl_iohw : dnnl_oihw),
                   "md");
        dnnl_check(dnnl_memory_desc_init_by_tag(&bia_p, 1, bd, dnnl_f32, dnnl_x), "md");
        dnnl_format_tag_t io = blocked ? dnnl_format_tag_any : dnnl_nchw;
        dnnl_check(dnnl_memory_desc_init_by_tag(&src_a, 4, sd, dnnl_f32, io), "md");
        dnnl_check(dnnl_memory_desc_init_by_tag(&dst_a, 4, dd, dnnl_f32, io), "md");
        dnnl_check(
            grouped ? dnnl_memory_desc_init_by_tag(&wei_a, 5, wd5, dnnl_f32, dnnl_format_tag_any)
                    : dnnl_memory_desc_init_by_tag(&wei_a, 4, wd4, dnnl_f32, dnnl_format_tag_any),
            "md");
        bia_a = bia_p;
        dnnl_dims_t strides = {c->sh, c->sw}, dil = {0, 0};
        dnnl_dims_t pl = {c->pt, c->pl}, pr = {c->pb, c->pr};
        if (convt) {
            dnnl_deconvolution_desc_t dc;
            dnnl_check(dnnl_dilated_deconvolution_forward_desc_init(
                           &dc, dnnl_forward_inference, dnnl_deconvolution_direct, &src_a, &wei_a,
                           &bia_a, &dst_a, strides, dil, pl, pr),
                       "deconvolution desc");
            dnnl_check(dnnl_primitive_desc_create(&pd, &dc, NULL, d->eng, NULL),
                       "deconvolution pd");
        } else {
            dnnl_convolution_desc_t cd;
            dnnl_check(dnnl_dilated_convolution_forward_desc_init(
                           &cd, dnnl_forward_inference, dnnl_convolution_direct, &src_a, &wei_a,
                           &bia_a, &dst_a, strides, dil, pl, pr),
                       "convolution desc");
            dnnl_check(dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, NULL), "convolution pd");
        }
    } else {
        dnnl_dims_t sd = {c->batch, c->rows, c->k}, dd = {c->batch, c->rows, c->n};
        dnnl_dims_t wd = {c->bbatched ? c->batch : 1, c->k, c->n};
        dnnl_check(dnnl_memory_desc_init_by_tag(&src_p, 3, sd, dnnl_f32, dnnl_abc), "md");
        dnnl_check(dnnl_memory_desc_init_by_tag(dst_plain, 3, dd, dnnl_f32, dnnl_abc), "md");
        dnnl_check(dnnl_memory_desc_init_by_tag(&wei_p, 3, wd, dnnl_f32, dnnl_abc), "md");
        src_a = src_p;
        dst_a = *dst_plain;
        dnnl_check(dnnl_memory_desc_init_by_tag(&wei_a, 3, wd, dnnl_f32, dnnl_format_tag_any),
                   "md");
        dnnl_matmul_desc_t md;
        dnnl_check(dnnl_matmul_desc_init(&md, &src_a, &wei_a, NULL, &dst_a), "matmul desc");
        dnnl_check(dnnl_primitive_desc_create(&pd, &md, NULL, d->eng, NULL), "matmul pd");
    }
    const dnnl_memory_desc_t *src_q = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wei_q = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_q = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    d->mem[0] = dnnl_mem_from(d->eng, d->s, src_q, &src_p, x);
    d->mem[1] = dnnl_mem_from(d->eng, d->s, wei_q, &wei_p, w);
    dnnl_check(dnnl_memory_create(&d->mem[3], dst_q, d->eng,
                                  dnnl_memory_desc_equal(dst_q, dst_plain) ? (void *)y
                                                                           : DNNL_MEMORY_ALLOCATE),
               "memory");
    d->args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, d->mem[0]};
    d->args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, d->mem[1]};
    d->args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, d->mem[3]};
    d->nargs = 3;
    if (c->op != OP_MATMUL) {
        d->mem[2] = dnnl_mem_from(d->eng, d->s, &bia_p, &bia_p, b);
        d->args[d->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, d->mem[2]};
    }
    dnnl_check(dnnl_primitive_create(&d->prim, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
}

static void dnnl_teardown(dnnl_side *d)
{
    dnnl_primitive_destroy(d->prim);
    for (int i = 0; i < 4; i++)
        if (d->mem[i])
            dnnl_memory_destroy(d->mem[i]);
    dnnl_stream_destroy(d->s);
    dnnl_engine_destroy(d->eng);
}

/* ---- XNNPACK ------------------------------------------------------------------- */

typedef struct xnn_side {
    xnn_operator_t op;
    pthreadpool_t pool;
} xnn_side;

static void xnn_run_once(void *arg)
{
    xnn_side *s = arg;
    xnn_check(xnn_run_operator(s->op, s->pool), "run");
}

/* NCHW -> NHWC (n = 1) */
static void to_nhwc(const float *x, int64_t c, int64_t h, int64_t w, float *out)
{
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < h * w; i++)
            out[i * c + ch] = x[ch * h * w + i];
}

static void to_nchw(const float *x, int64_t c, int64_t h, int64_t w, float *out)
{
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < h * w; i++)
            out[ch * h * w + i] = x[i * c + ch];
}

/* Returns false when XNNPACK has no operator for the case. */
static bool xnn_setup(xnn_side *s, const bcase *c, int threads, const float *x_nhwc, const float *w,
                      const float *b, float *y_nhwc, float **wpacked)
{
    memset(s, 0, sizeof(*s));
    *wpacked = NULL;
    if (c->op == OP_CONVT)
        return false; /* not compared here */
    if (threads > 1)
        s->pool = pthreadpool_create((size_t)threads);
    if (c->op == OP_CONV) {
        /* ONNX [m, c/g, kh, kw] -> XNNPACK [g][m/g][kh][kw][c/g] */
        int64_t mg = c->m / c->g, cg = c->c / c->g;
        float *wx = falloc((size_t)(c->m * cg * c->kh * c->kw));
        for (int64_t o = 0; o < c->m; o++)
            for (int64_t i = 0; i < cg; i++)
                for (int64_t a = 0; a < c->kh; a++)
                    for (int64_t bb = 0; bb < c->kw; bb++)
                        wx[((o * c->kh + a) * c->kw + bb) * cg + i] =
                            w[((o * cg + i) * c->kh + a) * c->kw + bb];
        *wpacked = wx;
        xnn_check(xnn_create_convolution2d_nhwc_f32(
                      (uint32_t)c->pt, (uint32_t)c->pr, (uint32_t)c->pb, (uint32_t)c->pl,
                      (uint32_t)c->kh, (uint32_t)c->kw, (uint32_t)c->sh, (uint32_t)c->sw, 1, 1,
                      (uint32_t)c->g, (size_t)cg, (size_t)mg, (size_t)c->c, (size_t)c->m, wx, b,
                      -INFINITY, INFINITY, 0, &s->op),
                  "create convolution");
        xnn_check(xnn_setup_convolution2d_nhwc_f32(s->op, 1, (size_t)c->h, (size_t)c->w, x_nhwc,
                                                   y_nhwc, s->pool),
                  "setup convolution");
        return true;
    }
    if (c->bbatched)
        return false;
    xnn_check(xnn_create_fully_connected_nc_f32((size_t)c->k, (size_t)c->n, (size_t)c->k,
                                                (size_t)c->n, w, NULL, -INFINITY, INFINITY,
                                                XNN_FLAG_TRANSPOSE_WEIGHTS, &s->op),
              "create fully connected");
    xnn_check(xnn_setup_fully_connected_nc_f32(s->op, (size_t)(c->batch * c->rows), x_nhwc, y_nhwc,
                                               s->pool),
              "setup fully connected");
    return true;
}

static void xnn_teardown(xnn_side *s)
{
    xnn_delete_operator(s->op);
    if (s->pool)
        pthreadpool_destroy(s->pool);
}

/* ---- one thread count, in a child ---------------------------------------------- */

static int run_child(int threads, int runs, const char *filter)
{
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        die("ctx_create", NULL);
    char def[1200];
    const char *man = getenv("KILN_MANIFEST");
    if (!man || !*man) {
        snprintf(def, sizeof(def), "%s/../share/kiln/manifests/default.json", kiln_exe_dir());
        man = def;
    }
    kiln_pipeline pipe;
    memset(&pipe, 0, sizeof(pipe));
    kiln_error err;
    kiln_error_clear(&err);
    FILE *devnull = fopen("/dev/null", "w");
    pipe.instr.log = devnull;
    if (kiln_manifest_load(ctx, man, &pipe, &err) != KILN_OK)
        die(man, &err);
    xnn_check(xnn_initialize(NULL), "initialize");

    int bad = 0;
    printf("\n%d thread%s (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=%d; XNNPACK pthreadpool)\n",
           threads, threads > 1 ? "s" : "", threads);
    printf("%-34s %-7s %10s %10s %10s %10s %10s %7s %7s %7s %7s\n", "case", "engine", "kiln us",
           "k-blas us", "dnnl us", "dnnl-blk", "xnnpack", "blas/k", "dnnl/k", "blk/k", "xnn/k");
    for (size_t ci = 0; ci < KILN_ARRAY_LEN(cases); ci++) {
        const bcase *c = &cases[ci];
        if (filter && !strstr(c->name, filter))
            continue;
        size_t nx, nw, nb = 0, ny;
        int64_t oh = 0, ow = 0;
        if (c->op != OP_MATMUL) {
            oh = case_out(c, true);
            ow = case_out(c, false);
            nx = (size_t)(c->c * c->h * c->w);
            nw = (size_t)(c->m * (c->c / c->g) * c->kh * c->kw);
            nb = (size_t)c->m;
            ny = (size_t)(c->m * oh * ow);
        } else {
            nx = (size_t)(c->batch * c->rows * c->k);
            nw = (size_t)((c->bbatched ? c->batch : 1) * c->k * c->n);
            ny = (size_t)(c->batch * c->rows * c->n);
        }
        float *x = falloc(nx), *w = falloc(nw), *b = falloc(nb + 1);
        float *yk = falloc(ny), *yd = falloc(ny), *yb = falloc(ny), *yx = falloc(ny);
        float *xt = falloc(nx), *yt = falloc(ny);
        fill(x, nx, 7 + (uint32_t)ci);
        fill(w, nw, 11 + (uint32_t)ci);
        fill(b, nb + 1, 13 + (uint32_t)ci);

        kiln_side ks;
        kiln_bind(&ks, ctx, c, x, w, b, yk, false);
        ks.args.threads = (uint32_t)threads;
        double tk = time_us(kiln_run_once, &ks, runs);
        double tkb = NAN, e_kb = 0;
        if (c->op != OP_MATMUL) {
            kiln_side kb;
            float *ykb = falloc(ny);
            kiln_bind(&kb, ctx, c, x, w, b, ykb, true);
            kb.args.threads = (uint32_t)threads;
            tkb = time_us(kiln_run_once, &kb, runs);
            e_kb = rel_diff(ykb, yk, ny);
            kiln_unbind(&kb);
            free(ykb);
        }

        dnnl_side ds;
        dnnl_memory_desc_t dst_plain;
        dnnl_setup(&ds, c, false, x, w, b, yd, &dst_plain);
        double td = time_us(dnnl_run_once, &ds, runs);
        dnnl_mem_to(&ds, ds.mem[3], &dst_plain, yd);
        dnnl_teardown(&ds);

        double tb = NAN;
        if (c->op != OP_MATMUL) {
            dnnl_setup(&ds, c, true, x, w, b, yb, &dst_plain);
            tb = time_us(dnnl_run_once, &ds, runs);
            dnnl_mem_to(&ds, ds.mem[3], &dst_plain, yb);
            dnnl_teardown(&ds);
        }

        double tx = NAN;
        xnn_side xs;
        float *wpk;
        const float *xin = x;
        if (c->op == OP_CONV) {
            to_nhwc(x, c->c, c->h, c->w, xt);
            xin = xt;
        }
        if (xnn_setup(&xs, c, threads, xin, w, c->op == OP_CONV ? b : NULL, yt, &wpk)) {
            tx = time_us(xnn_run_once, &xs, runs);
            xnn_teardown(&xs);
            if (c->op == OP_CONV)
                to_nchw(yt, c->m, oh, ow, yx);
            else
                memcpy(yx, yt, ny * sizeof(float));
        }
        free(wpk);

        double e_d = rel_diff(yd, yk, ny), e_b = c->op != OP_MATMUL ? rel_diff(yb, yk, ny) : 0;
        double e_x = isnan(tx) ? 0 : rel_diff(yx, yk, ny);
        char eng[8];
        snprintf(eng, sizeof(eng), "%s", ks.engine ? ks.engine : "?");
        printf("%-34s %-7s %10.1f %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f %7.2f %7.2f\n", c->name,
               eng, tk, tkb, td, tb, tx, tkb / tk, td / tk, tb / tk, tx / tk);
        if (e_d > 1e-4 || e_b > 1e-4 || e_x > 1e-4 || e_kb > 1e-4) {
            printf("  MISMATCH: max |lib - kiln| / max |kiln|: k-blas %.2g, dnnl %.2g, "
                   "dnnl-blk %.2g, xnnpack %.2g\n",
                   e_kb, e_d, e_b, e_x);
            bad = 1;
        }
        kiln_unbind(&ks);
        free(x), free(w), free(b), free(yk), free(yd), free(yb), free(yx), free(xt), free(yt);
    }
    xnn_deinitialize();
    kiln_pipeline_clear(&pipe);
    kiln_ctx_destroy(ctx);
    fclose(devnull);
    return bad;
}

int main(int argc, char **argv)
{
    int runs = 21, only_threads = 0;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            only_threads = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_kernels [-n RUNS] [-t THREADS] [CASE_SUBSTRING]\n");
            return 2;
        } else
            filter = argv[i];
    }
    if (runs < 1)
        runs = 1;
    /* as the kiln CLI does: idle OpenMP workers sleep instead of spinning */
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    const char *child = getenv("KILN_BENCH_KERNELS_CHILD");
    if (child)
        return run_child(atoi(child), runs, filter);
    printf("bench_kernels: kiln's kernels beside oneDNN %d.%d and XNNPACK, median of %d runs; "
           "ratio = library / kiln\n",
           dnnl_version()->major, dnnl_version()->minor, runs);
    fflush(stdout);
    int rc = 0;
    for (int t = 1; t <= 2; t++) {
        if (only_threads && t != only_threads)
            continue;
        pid_t pid = fork();
        if (pid < 0)
            die("fork", NULL);
        if (pid == 0) {
            char tv[16];
            snprintf(tv, sizeof(tv), "%d", t);
            setenv("KILN_BENCH_KERNELS_CHILD", tv, 1);
            setenv("OPENBLAS_NUM_THREADS", tv, 1);
            setenv("OMP_NUM_THREADS", tv, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    return rc;
}
