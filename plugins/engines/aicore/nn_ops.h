/*
 * nn_ops.h - the kernels of the CPU engine's NN op table (nn_*.c), collected
 * into cpu_ops_nn[] by nn_table.c, and the helpers they share (nn_table.c):
 *
 *   - window geometry of Conv/ConvTranspose/pooling: the ONNX attributes
 *     kernel_shape, strides, dilations, pads, auto_pad, ceil_mode read once
 *     in prepare(), resolved against the input's spatial dims.  1-D and 2-D
 *     ops are normalised to 3 spatial dims with leading 1s, so one code path
 *     serves 1-D, 2-D and 3-D;
 *   - scratch buffers: sized in prepare() when the descriptors are static,
 *     else (or when the runtime shapes differ) allocated per call.
 *
 * Everything is float32 (the table's dtype mask); shapes are validated
 * against the runtime tensors on every call, which costs O(rank).
 */
#ifndef KILN_CPU_NN_OPS_H
#define KILN_CPU_NN_OPS_H

#include "cpu_util.h"

#define NN_SP 3 /* spatial dims after normalisation (D, H, W) */

#define NN_PREPARE(name) \
    kiln_status name(const kiln_graph *g, kiln_node_id n, void **state, kiln_error *err)
#define NN_KERNEL(name) kiln_status name(void *state, const kiln_kernel_args *a, kiln_error *err)

/* ---- window geometry ----------------------------------------------------- */

typedef enum nn_auto_pad { NN_PAD_NOTSET, NN_PAD_SAME_UPPER, NN_PAD_SAME_LOWER, NN_PAD_VALID } nn_auto_pad;

/** The window attributes of a node as written (ns = 0: not known yet). */
typedef struct nn_win {
    uint32_t nk, ns, nd, np;        /* lengths of kernel_shape/strides/dilations/pads */
    int64_t k[NN_SP], s[NN_SP], d[NN_SP], pads[2 * NN_SP];
    nn_auto_pad auto_pad;
    bool ceil_mode;
} nn_win;

/** A window resolved for one input: every array is in (D, H, W) order. */
typedef struct nn_geom {
    uint32_t nsp;                           /* spatial rank of the tensor, 1..3 */
    int64_t in[NN_SP], out[NN_SP];          /* spatial sizes; leading dims are 1 */
    int64_t k[NN_SP], s[NN_SP], d[NN_SP];   /* kernel, stride, dilation */
    int64_t pb[NN_SP], pe[NN_SP];           /* pads at begin / end */
} nn_geom;

/** Read the window attributes of node @p n (errors name the node). */
kiln_status nn_win_read(const kiln_graph *g, kiln_node_id n, nn_win *w, kiln_error *err);

/**
 * Resolve @p w for a forward window (Conv, pools) over spatial dims @p in
 * (@p nsp of them); @p kernel (optional) is the weight's spatial shape, which
 * kernel_shape must match when both are given.  Output sizes follow ONNX:
 * floor (or ceil_mode) with explicit pads, ceil(in / stride) for SAME_*.
 */
kiln_status nn_geom_forward(const nn_win *w, uint32_t nsp, const int64_t *in,
                            const int64_t *kernel, nn_geom *geo, const kiln_kernel_args *a,
                            kiln_error *err);

/** Start @p geo for @p nsp spatial dims: every size, kernel, stride and dilation 1, no pads. */
void nn_geom_init(nn_geom *geo, uint32_t nsp);

/**
 * Check that output 0 is [@p n, @p c, out spatial dims of @p geo] (rank
 * 2 + geo->nsp); else an error naming the node and both shapes.
 */
kiln_status nn_check_out_geom(const kiln_kernel_args *a, int64_t n, int64_t c, const nn_geom *geo,
                              kiln_error *err);

/*
 * Range of the positions o*s + off (s > 0) of one window tap along a dim of
 * length len: the first o at or past 0, and the first o at or past len
 * (clamped to [lo, hi]).  im2col / col2im copy only [first, end).
 */
static inline int64_t nn_first_in_range(int64_t off, int64_t s)
{
    return off >= 0 ? 0 : (-off + s - 1) / s;
}
static inline int64_t nn_end_in_range(int64_t off, int64_t s, int64_t len, int64_t lo, int64_t hi)
{
    int64_t num = len - off;
    int64_t e = num <= 0 ? 0 : (num + s - 1) / s;
    if (e < lo)
        e = lo;
    return e > hi ? hi : e;
}

/** Element count of the spatial block of a geometry's input / output. */
static inline int64_t nn_geom_in_size(const nn_geom *g)
{
    return g->in[0] * g->in[1] * g->in[2];
}
static inline int64_t nn_geom_out_size(const nn_geom *g)
{
    return g->out[0] * g->out[1] * g->out[2];
}

/* ---- scratch ------------------------------------------------------------- */

/** A float buffer owned by a kernel state (sized in prepare). */
typedef struct nn_buf {
    float *p;
    size_t n; /* floats */
} nn_buf;

/**
 * A scratch of @p n floats: @p cached when it is big enough, else a fresh
 * kiln_alloc stored in *owned (the caller kiln_free()s it; NULL when unused).
 */
float *nn_scratch(const nn_buf *cached, size_t n, float **owned);
/** Allocate @p b to @p n floats (prepare time). */
kiln_status nn_buf_alloc(nn_buf *b, size_t n, const kiln_graph *g, kiln_node_id nd,
                         kiln_error *err);
void nn_buf_free(nn_buf *b);

/**
 * Static dims of input @p i from its descriptor: its rank (<= @p cap), or -1
 * when the input is unconnected, the rank is unknown or a dim is dynamic.
 */
int32_t nn_input_dims(const kiln_graph *g, kiln_node_id n, uint32_t i, int64_t *dims,
                      uint32_t cap);
/**
 * Inputs @p lo..@p hi-1 are float32 tensors (when present) and, when @p out0,
 * output 0 is a float32 buffer; else an error naming the node.
 */
kiln_status nn_check_float_inputs(const kiln_kernel_args *a, uint32_t lo, uint32_t hi, bool out0,
                                  kiln_error *err);

/* ---- Conv / ConvTranspose (nn_conv.c) ------------------------------------- */

/**
 * Conv / ConvTranspose operands: float inputs X, W (required) and B
 * (optional, NULL when absent), X and W of the same rank >= 3.
 */
kiln_status nn_conv_operands(const kiln_kernel_args *a, const kiln_tensor **X,
                             const kiln_tensor **W, const kiln_tensor **B, kiln_error *err);

/* ---- kernels ------------------------------------------------------------- */

/* nn_conv.c */
NN_PREPARE(nn_conv_prepare);
NN_KERNEL(nn_conv_run);
void nn_conv_release(void *state);
/** im2col of one image block [C, D, H, W] into col [C*kd*kh*kw, out spatial]. */
void nn_im2col(const float *x, int64_t c, const nn_geom *geo, float *col);

/* nn_conv_transpose.c */
NN_PREPARE(nn_convt_prepare);
NN_KERNEL(nn_convt_run);
void nn_convt_release(void *state);

/* nn_fusion.c: the post-op a fused Conv/Gemm applies to its output
 * (node attributes _kiln_fused_activation, _kiln_fused_alpha,
 * _kiln_fused_beta, written by the engine's optimize_original_graph). */
typedef enum nn_act_kind {
    NN_ACT_NONE,
    NN_ACT_RELU,
    NN_ACT_LEAKY_RELU,  /* alpha */
    NN_ACT_CLIP,        /* alpha = min, beta = max */
    NN_ACT_HARD_SIGMOID, /* alpha, beta */
    NN_ACT_HARD_SWISH,
    NN_ACT_SIGMOID,
    NN_ACT_SWISH /* x * Sigmoid(x) */
} nn_act_kind;

typedef struct nn_act {
    nn_act_kind kind;
    float alpha, beta;
    /* then y = y * post_scale + post_shift (PostActivationScaleFusionPass) when has_post */
    bool has_post;
    float post_scale, post_shift;
} nn_act;

/** Read node @p n's fused activation (NN_ACT_NONE without one); unknown names fail. */
kiln_status nn_act_read(const kiln_graph *g, kiln_node_id n, nn_act *act, kiln_error *err);
/** The window attributes, `group` (>= 1, else an error) and fused activation
 * (nn_act_read) of a Conv / ConvTranspose node. */
kiln_status nn_conv_attrs_read(const kiln_graph *g, kiln_node_id n, nn_win *w, int64_t *group,
                               nn_act *act, kiln_error *err);
/** Apply @p act in place to @p count floats. */
void nn_act_apply(const nn_act *act, float *y, int64_t count);
/** aicore's optimize_original_graph (nn_fusion.c): the session option
 * aicore.conv_backend. */
kiln_status nn_aicore_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
/** Register the aicore engine's fusion passes (nn_fusion.c): ConvBatchNormFusionPass,
 * MatMulBiasAddFusionPass, PostActivationFusionPass (stage builtin). */
kiln_status nn_register_fusion_passes(kiln_registrar *r, kiln_error *err);
/** The MatMul fusions (nn_fusion_matmul.c): MatMulScaleFusionPass,
 * MatMulTransposeFusionPass, both making FusedMatMul. */
kiln_status nn_register_matmul_fusion_passes(kiln_registrar *r, kiln_error *err);
/* aicore.fusion bits of the MatMul fusions (the others are nn_fusion.c's) */
#define NN_FUSE_MATMUL_SCALE 8u
#define NN_FUSE_MATMUL_TRANSPOSE 16u
/* nn_fusion.c's helpers for the fusion passes: a node a fusion may delete
 * (not pinned elsewhere, not _cannot_be_deleted, no control edges); one the
 * aicore engine may absorb (deletable, on aicore, vector or no engine); a node read by a NetOutput; KILN_OK
 * when aicore.fusion enables @p which (KILN_ERR_NOT_FOUND: decline); whether
 * CanFuse takes the match; the head copied into the replacement with its
 * first @p k inputs from the replacement's Data nodes; the NetOutput. */
bool nn_fx_deletable(const kiln_graph *g, kiln_node_id n);
bool nn_fx_absorbable(const kiln_graph *g, kiln_node_id n);
bool nn_fx_feeds_netoutput(const kiln_graph *g, kiln_node_id n);
kiln_status nn_fx_enabled(kiln_pass_ctx *ctx, unsigned which);
bool nn_fx_will_fuse(const kiln_graph *g, const kiln_match *m);
kiln_node_id nn_fx_copy_head(kiln_graph *repl, const kiln_graph *g, kiln_node_id head, uint32_t k);
kiln_status nn_fx_finish(kiln_graph *repl, kiln_node_id n);
/** The float32 value of the Const feeding input @p i of @p n (and its element count). */
bool nn_fx_const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, kiln_tensor_value *v,
                       int64_t *numel);
/** A new Const [dims] of float32 @p data in @p repl feeding input @p di of @p dst. */
kiln_status nn_fx_const(kiln_graph *repl, kiln_node_id dst, uint32_t di, const char *name,
                        const int64_t *dims, uint32_t rank, const float *data, int64_t numel);
/** The affine fusions (nn_fusion_affine.c): ConvAffineFusionPass,
 * PostActivationScaleFusionPass. */
kiln_status nn_register_affine_fusion_passes(kiln_registrar *r, kiln_error *err);
#define NN_FUSE_CONV_AFFINE 32u
#define NN_FUSE_POST_SCALE 64u

/* nn_layout.c: channels-last (data_format NHWC) tensors and TransData */
/** True when node @p n carries data_format "NHWC" (its rank-4 X and Y are [N, H, W, C]). */
bool nn_is_nhwc(const kiln_graph *g, kiln_node_id n);
/** @p out = the NCHW order of the NHWC dims @p in ([N, H, W, C] -> [N, C, H, W]). */
void nn_nhwc_to_nchw_dims(const int64_t *in, int64_t *out);
/** Transpose one rank-4 tensor between NCHW and NHWC (@p to_nhwc picks the direction). */
void nn_transpose_4d(const void *x, void *y, const int64_t *src_dims, size_t esize, bool to_nhwc);
NN_PREPARE(nn_transdata_prepare);
NN_KERNEL(nn_transdata_run);
/** The aicore engine's format selection (optimize_original_graph): see nn_layout.c. */
kiln_status nn_layout_select(kiln_pass_ctx *ctx, kiln_graph *root);

/* nn_dnnl.c: Conv on oneDNN, the default backend of nn_conv.c */
typedef struct nn_dnnl_conv nn_dnnl_conv;
/**
 * The oneDNN convolution of node @p n (static shapes, float32): primitive,
 * reorders and packed weights (a Const W is packed here, once).  NULL when
 * oneDNN refuses the node; @p why then says why.
 */
nn_dnnl_conv *nn_dnnl_conv_create(const kiln_graph *g, kiln_node_id n, const nn_win *win,
                                  int64_t group, const nn_act *act, char *why, size_t whysz);
void nn_dnnl_conv_destroy(nn_dnnl_conv *c);
/** Whether the call's X, W and B have the shapes @p c was made for. */
bool nn_dnnl_conv_matches(const nn_dnnl_conv *c, const kiln_tensor *X, const kiln_tensor *W,
                          const kiln_tensor *B);
/** Run @p c: output 0 of @p a = conv(X, W, B) with the fused activation. */
kiln_status nn_dnnl_conv_run(nn_dnnl_conv *c, const kiln_kernel_args *a, const kiln_tensor *X,
                             const kiln_tensor *W, const kiln_tensor *B, kiln_error *err);
/* nn_dnnl.c: MaxPool / AveragePool on oneDNN (nn_dnnl_pool.c's kernels) */
typedef struct nn_dnnl_pool nn_dnnl_pool;
/** The oneDNN pooling of node @p n (static shapes, float32, NCHW or data_format NHWC);
 * NULL with @p why when oneDNN refuses it. */
nn_dnnl_pool *nn_dnnl_pool_create(const kiln_graph *g, kiln_node_id n, const nn_win *win, bool avg,
                                  bool count_include_pad, char *why, size_t whysz);
void nn_dnnl_pool_destroy(nn_dnnl_pool *c);
bool nn_dnnl_pool_matches(const nn_dnnl_pool *c, const kiln_tensor *X);
kiln_status nn_dnnl_pool_run(nn_dnnl_pool *c, const kiln_kernel_args *a, const kiln_tensor *X,
                             kiln_error *err);
NN_PREPARE(nn_pool_any_prepare);
NN_KERNEL(nn_maxpool_any_run);
NN_KERNEL(nn_avgpool_any_run);
void nn_pool_any_release(void *state);
/** Run @p fn (an NCHW kernel with @p state) for a channels-last node: X and Y
 * transposed to NCHW copies around the call (the fallback of the NHWC kernels). */
kiln_status nn_run_nchw_on_nhwc(kiln_kernel_fn fn, void *state, const kiln_kernel_args *a,
                                kiln_error *err);

/** Free the process's oneDNN engine and scratch (plugin unload). */
void nn_dnnl_shutdown(void);
/**
 * The convolution backend node @p n asks for: true for oneDNN (the default),
 * false when its attribute _kiln_conv_backend is "blas" (set by the engine's
 * optimize_original_graph from the session option aicore.conv_backend).
 */
bool nn_conv_wants_dnnl(const kiln_graph *g, kiln_node_id n);

/* nn_dnnl_deconv.c: ConvTranspose on oneDNN, the default backend of nn_conv_transpose.c */
typedef struct nn_dnnl_deconv nn_dnnl_deconv;
/**
 * The oneDNN deconvolution of ConvTranspose node @p n (static shapes,
 * float32) for the window @p geo resolved by nn_conv_transpose.c (in = X's
 * spatial dims, out = Y's, pads at begin and end after output_padding and
 * output_shape): primitive, reorders and packed weights (a Const W is
 * packed here, once).  @p nhwc: X is [N, spatial..., C] and Y [N,
 * spatial..., M] (channels last) instead of NC(D)HW.  NULL when oneDNN
 * refuses the node; @p why then says why.
 */
/** Below this many output channels a dense deconvolution runs on plain NCHW
 * (oneDNN's blocked and channels-last kernels pad the channels to 16). */
#define NN_DECONV_PLAIN_M 8
nn_dnnl_deconv *nn_dnnl_deconv_create(const kiln_graph *g, kiln_node_id n, const nn_geom *geo,
                                      int64_t group, const nn_act *act, bool nhwc, char *why,
                                      size_t whysz);
void nn_dnnl_deconv_destroy(nn_dnnl_deconv *c);
/** Whether the call's X, W and B have the shapes @p c was made for. */
bool nn_dnnl_deconv_matches(const nn_dnnl_deconv *c, const kiln_tensor *X, const kiln_tensor *W,
                            const kiln_tensor *B);
/** Run @p c: output 0 of @p a = ConvTranspose(X, W, B) with the fused activation. */
kiln_status nn_dnnl_deconv_run(nn_dnnl_deconv *c, const kiln_kernel_args *a, const kiln_tensor *X,
                               const kiln_tensor *W, const kiln_tensor *B, kiln_error *err);

/*
 * nn_dnnl.c's oneDNN loader, shared by nn_dnnl.c and nn_dnnl_deconv.c (they
 * include <oneapi/dnnl/dnnl.h> before this header): the functions resolved
 * by dlopen on the first binding, the process's CPU engine, the scratch for
 * blocked copies, and helpers.
 */
#ifdef ONEAPI_DNNL_DNNL_H
#define NN_DNNL_FUNCS(X)                                                                           \
    X(dnnl_dilated_convolution_forward_desc_init)                                                  \
    X(dnnl_dilated_deconvolution_forward_desc_init)                                                \
    X(dnnl_engine_create)                                                                          \
    X(dnnl_engine_destroy)                                                                         \
    X(dnnl_memory_create)                                                                          \
    X(dnnl_memory_desc_equal)                                                                      \
    X(dnnl_memory_desc_get_size)                                                                   \
    X(dnnl_memory_desc_init_by_tag)                                                                \
    X(dnnl_memory_destroy)                                                                         \
    X(dnnl_memory_set_data_handle)                                                                 \
    X(dnnl_pooling_v2_forward_desc_init)                                                           \
    X(dnnl_post_ops_append_eltwise)                                                                \
    X(dnnl_post_ops_create)                                                                        \
    X(dnnl_post_ops_destroy)                                                                       \
    X(dnnl_primitive_attr_create)                                                                  \
    X(dnnl_primitive_attr_destroy)                                                                 \
    X(dnnl_primitive_attr_set_post_ops)                                                            \
    X(dnnl_primitive_create)                                                                       \
    X(dnnl_primitive_desc_create)                                                                  \
    X(dnnl_primitive_desc_destroy)                                                                 \
    X(dnnl_primitive_desc_query_md)                                                                \
    X(dnnl_primitive_destroy)                                                                      \
    X(dnnl_primitive_execute)                                                                      \
    X(dnnl_reorder_primitive_desc_create)                                                          \
    X(dnnl_stream_create)                                                                          \
    X(dnnl_stream_destroy)                                                                         \
    X(dnnl_stream_wait)
#define NN_DNNL_FIELD(f) __typeof__(&f) f;
struct nn_dnnl_fns {
    NN_DNNL_FUNCS(NN_DNNL_FIELD)
};
/** The resolved functions (valid once nn_dnnl_engine returned an engine). */
extern struct nn_dnnl_fns nn_dnnl_fn;
/** The process's oneDNN CPU engine, loading libdnnl on first use; NULL with @p why set. */
dnnl_engine_t nn_dnnl_engine(char *why, size_t whysz);
/** A reorder primitive from @p from to @p to on the engine. */
dnnl_status_t nn_dnnl_make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                   dnnl_primitive_t *out);
dnnl_status_t nn_dnnl_run_reorder(dnnl_stream_t st, dnnl_primitive_t r, dnnl_memory_t from,
                                  dnnl_memory_t to);
/** Append @p act to @p po as eltwise post-ops (false: none matches it). */
bool nn_dnnl_act_post_ops(const nn_act *act, dnnl_post_ops_t po);
/** The Const float32 value feeding input @p i of @p n with @p count floats, or NULL. */
const float *nn_dnnl_const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, int64_t count);
/** Whether a primitive of @p macs multiply-adds runs on the calling thread alone. */
bool nn_dnnl_is_serial(double macs);
/** Around a serial primitive's creation or execution: the thread count to
 * restore with nn_dnnl_serial_end (0: nothing to restore). */
int nn_dnnl_serial_begin(bool serial);
void nn_dnnl_serial_end(int saved);
/**
 * @p need bytes (64-aligned) for a call's blocked copies: the shared scratch
 * when it is free (*locked true: pass it back to nn_dnnl_scratch_put), else
 * a private buffer (*owned); NULL when out of memory.
 */
void *nn_dnnl_scratch_get(size_t need, bool *locked, void **owned);
void nn_dnnl_scratch_put(bool locked, void *owned);
#endif

/* nn_matmul.c */
NN_KERNEL(nn_matmul_run);
NN_PREPARE(nn_fused_matmul_prepare);
NN_KERNEL(nn_fused_matmul_run);
NN_PREPARE(nn_gemm_prepare);
NN_KERNEL(nn_gemm_run);

/* nn_norm_pool.c */
NN_PREPARE(nn_batchnorm_prepare);
NN_KERNEL(nn_batchnorm_run);
NN_PREPARE(nn_pool_prepare);
NN_KERNEL(nn_avgpool_run);
NN_KERNEL(nn_maxpool_run);
NN_KERNEL(nn_global_avgpool_run);
NN_KERNEL(nn_global_maxpool_run);

/* nn_resize.c */
NN_PREPARE(nn_resize_prepare);
NN_KERNEL(nn_resize_run);

/* nn_lstm.c */
NN_PREPARE(nn_lstm_prepare);
NN_KERNEL(nn_lstm_run);
void nn_lstm_release(void *state);

#endif
