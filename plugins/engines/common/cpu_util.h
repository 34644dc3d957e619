/*
 * cpu_util.h - helpers shared by the CPU engine's kernels (basic_*.c, nn_*.c):
 * attribute reading with ONNX defaults, the model's opset, axis
 * normalisation, reading int64/int32 index tensors, kernel errors that name
 * the node, and multidirectional (numpy) broadcasting iteration.
 *
 * Broadcasting: cpu_iter_init() right-aligns up to CPU_MAX_BIN inputs against
 * the output, drops size-1 output dims and merges adjacent dims that every
 * input walks contiguously (or not at all), so that the common cases become
 * one row: same shape -> 1 row of numel, [N,C] + [C] -> 1 row per N, ...
 * Kernels then loop over rows with cpu_iter_next() and run a tight inner
 * loop over the last dim with per-input strides that are 0 or 1 in practice.
 */
#ifndef KILN_CPU_UTIL_H
#define KILN_CPU_UTIL_H

#include "cpu_engine.h"

#define CPU_MAX_RANK 8 /* kernels refuse tensors of higher rank */
#define CPU_MAX_BIN 3  /* inputs a broadcast iteration can walk */

/* ---- errors ------------------------------------------------------------- */

/** Record "<op> node <name>: <message>" in @p err; returns @p code. */
kiln_status cpu_fail(const kiln_kernel_args *a, kiln_error *err, kiln_status code,
                     const char *fmt, ...) KILN_PRINTF(4, 5);
/** The same for prepare() (graph and node instead of kernel args). */
kiln_status cpu_fail_node(const kiln_graph *g, kiln_node_id n, kiln_error *err, kiln_status code,
                          const char *fmt, ...) KILN_PRINTF(5, 6);

/* ---- attributes ---------------------------------------------------------- */

/** Integer attribute @p key (also accepts bool), else @p dflt. */
int64_t cpu_attr_int(const kiln_graph *g, kiln_node_id n, const char *key, int64_t dflt);
/** Float attribute @p key (also accepts int), else @p dflt. */
double cpu_attr_float(const kiln_graph *g, kiln_node_id n, const char *key, double dflt);
/** List-of-int attribute @p key; false when absent. */
bool cpu_attr_ints(const kiln_graph *g, kiln_node_id n, const char *key, const int64_t **v,
                   uint32_t *count);
/** String attribute @p key, else @p dflt. */
const char *cpu_attr_str(const kiln_graph *g, kiln_node_id n, const char *key, const char *dflt);
/**
 * Version of the default ONNX domain the model imports (root graph attr
 * onnx_opset_import, "ai.onnx:N"); @p dflt when the graph has none.
 */
int64_t cpu_opset(const kiln_graph *g, int64_t dflt);

/** The `axes` attribute of a node (opset < 13 Squeeze, < 18 Reduce*), read in prepare(). */
#define CPU_MAX_AXES 16
typedef struct cpu_axes {
    bool has; /* the attribute is present */
    uint32_t n;
    int64_t v[CPU_MAX_AXES];
} cpu_axes;
/** Read attribute "axes" into @p ax; ERR_UNSUPPORTED when it has more than CPU_MAX_AXES. */
kiln_status cpu_axes_attr(const kiln_graph *g, kiln_node_id n, cpu_axes *ax, kiln_error *err);
/**
 * The axes of one call: input 1 when present (a 1-D int tensor, else an
 * error), else the attribute @p ax (may be NULL); *has (when @p has is not
 * NULL) = false when neither.
 */
kiln_status cpu_axes_get(const kiln_kernel_args *a, const cpu_axes *ax, int64_t *axes,
                         uint32_t *count, bool *has, kiln_error *err);

/** kiln_alloc(size) zero-filled into *state; ERR_NOMEM naming the node. */
kiln_status cpu_state_new(const kiln_graph *g, kiln_node_id n, size_t size, void **state,
                          kiln_error *err);
/** Release for states made by cpu_state_new. */
void cpu_state_free(void *state);

/* ---- tensors ------------------------------------------------------------- */

/** Element count (1 for rank 0). */
int64_t cpu_numel(const kiln_tensor *t);
/** Is input @p i present (connected, with data)? */
bool cpu_has_input(const kiln_kernel_args *a, uint32_t i);
/** Normalise @p axis (may be negative) against @p rank; accepts [-rank, rank). */
bool cpu_axis(int64_t axis, uint32_t rank, uint32_t *out);
/**
 * Read a 1-D (or scalar) int64/int32 tensor into @p out (at most @p cap values);
 * false on another dtype or too many values.
 */
bool cpu_read_ints(const kiln_tensor *t, int64_t *out, uint32_t cap, uint32_t *count);
/** Check output @p o holds exactly @p nbytes; else an error naming node and sizes. */
kiln_status cpu_check_out_bytes(const kiln_kernel_args *a, uint32_t o, size_t nbytes,
                                kiln_error *err);
/** Check output @p o has rank @p rank and dims @p dims (shape inference agrees). */
kiln_status cpu_check_out_dims(const kiln_kernel_args *a, uint32_t o, uint32_t rank,
                               const int64_t *dims, kiln_error *err);
/** Copy input 0 to output 0 (same byte size), unless they share memory. */
kiln_status cpu_copy_through(const kiln_kernel_args *a, kiln_error *err);

/* ---- broadcasting -------------------------------------------------------- */

typedef struct cpu_iter {
    uint32_t rank; /* >= 1 after collapsing */
    uint32_t nin;
    int64_t dims[CPU_MAX_RANK];
    int64_t str[CPU_MAX_BIN][CPU_MAX_RANK]; /* element strides, 0 = broadcast */
    int64_t rows;                           /* product of dims[0 .. rank-2] */
    int64_t cols;                           /* dims[rank-1] */
} cpu_iter;

/** Position of a row walk: per-input element offsets of the current row. */
typedef struct cpu_pos {
    int64_t idx[CPU_MAX_RANK];
    int64_t off[CPU_MAX_BIN];
} cpu_pos;

/**
 * Set up the broadcast walk of @p nin input shapes onto @p out's shape.
 * Errors (ERR_INVALID) when an input does not broadcast to the output.
 */
kiln_status cpu_iter_init(cpu_iter *it, const kiln_tensor *const *ins, uint32_t nin,
                          const kiln_tensor *out, const kiln_kernel_args *a, kiln_error *err);
/** Advance @p p to the next row (odometer over dims[0 .. rank-2]). */
static inline void cpu_iter_next(const cpu_iter *it, cpu_pos *p)
{
    for (int32_t d = (int32_t)it->rank - 2; d >= 0; d--) {
        for (uint32_t k = 0; k < it->nin; k++)
            p->off[k] += it->str[k][d];
        if (++p->idx[d] < it->dims[d])
            return;
        for (uint32_t k = 0; k < it->nin; k++)
            p->off[k] -= it->str[k][d] * it->dims[d];
        p->idx[d] = 0;
    }
}

#endif
