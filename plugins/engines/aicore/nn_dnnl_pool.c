/*
 * nn_dnnl_pool.c - the aicore engine's MaxPool and AveragePool kernels:
 * oneDNN pooling (nn_dnnl.c) where oneDNN takes the node, else the engine's
 * own loops (nn_norm_pool.c).
 *
 * prepare() binds both: the loops' state always (they serve calls whose
 * shapes differ from the bound ones) and the oneDNN primitive when the node
 * has static shapes, float32, no used Indices output and, for AveragePool,
 * count_include_pad 0.  A node the aicore format selection made channels-last
 * (data_format NHWC, nn_layout.c) runs on oneDNN with NHWC tensors, or on the
 * loops over transposed copies.  KILN_AICORE_ONEDNN_STRICT=1 turns a refusal
 * into an error, as for Conv.
 */
#include "nn_ops.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool_any {
    void *loops;        /* nn_pool_prepare's state */
    nn_dnnl_pool *dnnl; /* NULL: the loops */
    bool nhwc;
} pool_any;

NN_PREPARE(nn_pool_any_prepare)
{
    pool_any *s = kiln_alloc(sizeof(*s));
    if (!s)
        return cpu_fail_node(g, n, err, KILN_ERR_NOMEM, "out of memory");
    memset(s, 0, sizeof(*s));
    *state = s;
    kiln_status st = nn_pool_prepare(g, n, &s->loops, err);
    if (st != KILN_OK)
        return st;
    s->nhwc = nn_is_nhwc(g, n);
    if (!nn_conv_wants_dnnl(g, n))
        return KILN_OK;
    nn_win win;
    if ((st = nn_win_read(g, n, &win, err)) != KILN_OK)
        return st;
    const bool avg = strcmp(kiln_node_op_str(g, n), "AveragePool") == 0;
    char why[256];
    s->dnnl = nn_dnnl_pool_create(g, n, &win, avg, cpu_attr_int(g, n, "count_include_pad", 0) != 0,
                                  why, sizeof(why));
    const char *strict = getenv("KILN_AICORE_ONEDNN_STRICT");
    if (!s->dnnl && strict && strcmp(strict, "1") == 0)
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                             "oneDNN refused the pooling (KILN_AICORE_ONEDNN_STRICT=1): %s", why);
    return KILN_OK;
}

void nn_pool_any_release(void *state)
{
    pool_any *s = state;
    if (!s)
        return;
    cpu_state_free(s->loops);
    nn_dnnl_pool_destroy(s->dnnl);
    kiln_free(s);
}

static kiln_status pool_run(pool_any *s, kiln_kernel_fn loops, const kiln_kernel_args *a,
                            kiln_error *err)
{
    kiln_status st = nn_check_float_inputs(a, 0, 1, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "X is required");
    /* oneDNN gives no Indices: a call that passes a buffer for them runs the loops */
    const bool indices = a->output_count > 1 && a->outputs[1].data;
    if (s->dnnl && !indices && nn_dnnl_pool_matches(s->dnnl, &a->inputs[0]))
        return nn_dnnl_pool_run(s->dnnl, a, &a->inputs[0], err);
    if (s->nhwc)
        return nn_run_nchw_on_nhwc(loops, s->loops, a, err);
    return loops(s->loops, a, err);
}

NN_KERNEL(nn_maxpool_any_run) { return pool_run(state, nn_maxpool_run, a, err); }

NN_KERNEL(nn_avgpool_any_run) { return pool_run(state, nn_avgpool_run, a, err); }
