/*
 * cpu_util.c - shared helpers of the CPU engine's kernels: errors naming the
 * node, attribute reading, the model's ONNX opset, index tensors, output
 * checks and the broadcast walk set-up (see cpu_util.h).
 */
#include "cpu_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

static kiln_status vfail(const kiln_graph *g, kiln_node_id n, kiln_error *err, kiln_status code,
                         const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (!g)
        return kiln_errorf(err, code, "%s", msg);
    return kiln_errorf(err, code, "%s node %s: %s", kiln_node_op_str(g, n),
                       kiln_node_name_str(g, n), msg);
}

kiln_status cpu_fail(const kiln_kernel_args *a, kiln_error *err, kiln_status code,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kiln_status st = vfail(a ? a->graph : NULL, a ? a->node : 0, err, code, fmt, ap);
    va_end(ap);
    return st;
}

kiln_status cpu_fail_node(const kiln_graph *g, kiln_node_id n, kiln_error *err, kiln_status code,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kiln_status st = vfail(g, n, err, code, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- attributes ---------------------------------------------------------- */

int64_t cpu_attr_int(const kiln_graph *g, kiln_node_id n, const char *key, int64_t dflt)
{
    const kiln_attrs *at = kiln_node_attrs(g, n);
    int64_t v;
    bool b;
    if (kiln_attrs_get_int(at, key, &v))
        return v;
    if (kiln_attrs_get_bool(at, key, &b))
        return b;
    return dflt;
}

double cpu_attr_float(const kiln_graph *g, kiln_node_id n, const char *key, double dflt)
{
    const kiln_attrs *at = kiln_node_attrs(g, n);
    double v;
    int64_t i;
    if (kiln_attrs_get_float(at, key, &v))
        return v;
    if (kiln_attrs_get_int(at, key, &i))
        return (double)i;
    return dflt;
}

bool cpu_attr_ints(const kiln_graph *g, kiln_node_id n, const char *key, const int64_t **v,
                   uint32_t *count)
{
    return kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, v, count);
}

const char *cpu_attr_str(const kiln_graph *g, kiln_node_id n, const char *key, const char *dflt)
{
    const char *s;
    return kiln_attrs_get_string(kiln_node_attrs(g, n), key, &s) ? s : dflt;
}

int64_t cpu_opset(const kiln_graph *g, int64_t dflt)
{
    /* The graph accessors of the ABI are not const; reading attributes that
     * the importer wrote does not modify the graph. */
    kiln_graph *root = kiln_graph_root((kiln_graph *)(uintptr_t)g);
    const char *const *v;
    uint32_t cnt;
    if (!root || !kiln_attrs_get_list_string(kiln_graph_attrs(root), "onnx_opset_import", &v,
                                             &cnt))
        return dflt;
    for (uint32_t i = 0; i < cnt; i++) {
        const char *s = v[i];
        const char *colon = strrchr(s, ':');
        if (!colon)
            continue;
        size_t dlen = (size_t)(colon - s);
        if (dlen == 0 || (dlen == 7 && strncmp(s, "ai.onnx", 7) == 0))
            return strtoll(colon + 1, NULL, 10);
    }
    return dflt;
}

kiln_status cpu_axes_attr(const kiln_graph *g, kiln_node_id n, cpu_axes *ax, kiln_error *err)
{
    const int64_t *v;
    uint32_t cnt;
    ax->has = false;
    ax->n = 0;
    if (!cpu_attr_ints(g, n, "axes", &v, &cnt))
        return KILN_OK;
    if (cnt > CPU_MAX_AXES)
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "%u axes", cnt);
    memcpy(ax->v, v, cnt * sizeof(int64_t));
    ax->n = cnt;
    ax->has = true;
    return KILN_OK;
}

kiln_status cpu_axes_get(const kiln_kernel_args *a, const cpu_axes *ax, int64_t *axes,
                         uint32_t *count, bool *has, kiln_error *err)
{
    bool given = false;
    *count = 0;
    if (cpu_has_input(a, 1)) {
        if (!cpu_read_ints(&a->inputs[1], axes, CPU_MAX_AXES, count))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axes must be a 1-D int64 tensor");
        given = true;
    } else if (ax && ax->has) {
        *count = ax->n;
        memcpy(axes, ax->v, ax->n * sizeof(int64_t));
        given = true;
    }
    if (has)
        *has = given;
    return KILN_OK;
}

kiln_status cpu_state_new(const kiln_graph *g, kiln_node_id n, size_t size, void **state,
                          kiln_error *err)
{
    void *p = kiln_alloc(size);
    if (!p)
        return cpu_fail_node(g, n, err, KILN_ERR_NOMEM, "out of memory for kernel state");
    memset(p, 0, size);
    *state = p;
    return KILN_OK;
}

void cpu_state_free(void *state)
{
    kiln_free(state);
}

/* ---- tensors ------------------------------------------------------------- */

int64_t cpu_numel(const kiln_tensor *t)
{
    /* a runtime tensor's dims were checked when its buffer was sized; -1
     * (never a wrapped count) should one not have been */
    int64_t n;
    return kiln_dims_numel(t->dims, t->rank, &n) == KILN_OK ? n : -1;
}

bool cpu_has_input(const kiln_kernel_args *a, uint32_t i)
{
    return i < a->input_count && a->inputs[i].data != NULL;
}

bool cpu_axis(int64_t axis, uint32_t rank, uint32_t *out)
{
    if (axis < -(int64_t)rank || axis >= (int64_t)rank)
        return false;
    *out = (uint32_t)(axis < 0 ? axis + rank : axis);
    return true;
}

bool cpu_read_ints(const kiln_tensor *t, int64_t *out, uint32_t cap, uint32_t *count)
{
    if (!t->data || t->rank > 1)
        return false;
    int64_t n = cpu_numel(t);
    if (n < 0 || n > (int64_t)cap)
        return false;
    if (t->dtype == KILN_DT_INT64) {
        if (t->nbytes < (size_t)n * 8)
            return false;
        memcpy(out, t->data, (size_t)n * sizeof(int64_t));
    } else if (t->dtype == KILN_DT_INT32) {
        if (t->nbytes < (size_t)n * 4)
            return false;
        const int32_t *p = t->data;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
    } else {
        return false;
    }
    *count = (uint32_t)n;
    return true;
}

kiln_status cpu_check_out_bytes(const kiln_kernel_args *a, uint32_t o, size_t nbytes,
                                kiln_error *err)
{
    if (o >= a->output_count)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output %u missing", o);
    if (a->outputs[o].nbytes != nbytes)
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "output %u has %zu bytes, the kernel produces %zu", o,
                        a->outputs[o].nbytes, nbytes);
    return KILN_OK;
}

kiln_status cpu_check_out_dims(const kiln_kernel_args *a, uint32_t o, uint32_t rank,
                               const int64_t *dims, kiln_error *err)
{
    if (o >= a->output_count)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output %u missing", o);
    const kiln_tensor *t = &a->outputs[o];
    bool same = t->rank == rank;
    for (uint32_t d = 0; same && d < rank; d++)
        same = t->dims[d] == dims[d];
    if (same)
        return KILN_OK;
    char want[160] = "", have[160] = "";
    size_t lw = 0, lh = 0;
    for (uint32_t d = 0; d < rank && lw < sizeof(want) - 24; d++)
        lw += (size_t)snprintf(want + lw, sizeof(want) - lw, "%s%lld", d ? "," : "",
                               (long long)dims[d]);
    for (uint32_t d = 0; d < t->rank && lh < sizeof(have) - 24; d++)
        lh += (size_t)snprintf(have + lh, sizeof(have) - lh, "%s%lld", d ? "," : "",
                               (long long)t->dims[d]);
    return cpu_fail(a, err, KILN_ERR_INVALID, "output %u has shape [%s], the op gives [%s]", o,
                    have, want);
}

kiln_status cpu_copy_through(const kiln_kernel_args *a, kiln_error *err)
{
    if (a->input_count < 1 || !a->inputs[0].data)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    kiln_status st = cpu_check_out_bytes(a, 0, a->inputs[0].nbytes, err);
    if (st != KILN_OK)
        return st;
    if (a->outputs[0].data != a->inputs[0].data && a->inputs[0].nbytes)
        memmove(a->outputs[0].data, a->inputs[0].data, a->inputs[0].nbytes);
    return KILN_OK;
}

/* ---- broadcasting -------------------------------------------------------- */

kiln_status cpu_iter_init(cpu_iter *it, const kiln_tensor *const *ins, uint32_t nin,
                          const kiln_tensor *out, const kiln_kernel_args *a, kiln_error *err)
{
    uint32_t r = out->rank;
    if (r > CPU_MAX_RANK || nin > CPU_MAX_BIN)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u above %d", r, CPU_MAX_RANK);
    int64_t str[CPU_MAX_BIN][CPU_MAX_RANK];
    for (uint32_t k = 0; k < nin; k++) {
        const kiln_tensor *t = ins[k];
        if (t->rank > r)
            return cpu_fail(a, err, KILN_ERR_INVALID,
                            "input of rank %u does not broadcast to the output's rank %u",
                            t->rank, r);
        int64_t s = 1;
        for (int32_t d = (int32_t)r - 1; d >= 0; d--) {
            int32_t td = d - (int32_t)(r - t->rank);
            int64_t dim = td >= 0 ? t->dims[td] : 1;
            if (dim == out->dims[d]) {
                str[k][d] = dim == 1 ? 0 : s;
            } else if (dim == 1) {
                str[k][d] = 0;
            } else {
                return cpu_fail(a, err, KILN_ERR_INVALID,
                                "input dim %d (%lld) does not broadcast to the output's %lld",
                                td, (long long)dim, (long long)out->dims[d]);
            }
            s *= dim;
        }
    }
    /* Drop size-1 output dims, then merge dims walked alike by every input. */
    it->nin = nin;
    it->rank = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (out->dims[d] == 1)
            continue;
        uint32_t j = it->rank;
        bool merge = j > 0;
        for (uint32_t k = 0; merge && k < nin; k++) {
            int64_t prev = it->str[k][j - 1];
            merge = (prev == 0 && str[k][d] == 0) ||
                    (str[k][d] != 0 && prev == str[k][d] * out->dims[d]);
        }
        if (merge) {
            it->dims[j - 1] *= out->dims[d];
            for (uint32_t k = 0; k < nin; k++)
                it->str[k][j - 1] = str[k][d];
        } else {
            it->dims[j] = out->dims[d];
            for (uint32_t k = 0; k < nin; k++)
                it->str[k][j] = str[k][d];
            it->rank++;
        }
    }
    if (it->rank == 0) {
        it->rank = 1;
        it->dims[0] = 1;
        for (uint32_t k = 0; k < nin; k++)
            it->str[k][0] = 0;
    }
    it->cols = it->dims[it->rank - 1];
    it->rows = 1;
    for (uint32_t d = 0; d + 1 < it->rank; d++)
        it->rows *= it->dims[d];
    for (uint32_t d = 0; d < r; d++)
        if (out->dims[d] == 0)
            it->rows = 0;
    return KILN_OK;
}
