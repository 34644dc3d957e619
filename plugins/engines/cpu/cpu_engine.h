/*
 * cpu_engine.h - internal interface of the CPU engine plugin (libkiln_cpu.so).
 *
 * The engine is assembled from op tables, each owned by one source area:
 *   cpu_ops_basic[]  elementwise, activations, casts, shape and data-movement
 *                    ops, reductions, softmax            (basic_*.c)
 *   cpu_ops_nn[]     Conv, ConvTranspose, MatMul, Gemm, BatchNormalization,
 *                    pooling, Resize, LSTM (OpenBLAS)    (nn_*.c)
 * plugin.c turns them into the engine's kiln_op_info table (GE's ops kernel
 * info store) and serves kernel_create by op type.  Shape inference is the
 * op registry's (plugins/opsets/onnx); its folding reaches these kernels
 * through the host (kiln_engine_kernel) like any runtime.
 *
 * Kernel contract (kiln_kernel_fn): inputs/outputs are dense row-major
 * tensors whose dims are static; output buffers are allocated by the runtime
 * from the node's output descriptors (nbytes = numel * dtype size) before the
 * call; an optional input that is unconnected is passed with data == NULL and
 * rank 0.  Kernels never allocate per element; scratch memory is allocated in
 * prepare() when its size is known from the descriptors, else per call with
 * kiln_alloc.
 */
#ifndef KILN_CPU_ENGINE_H
#define KILN_CPU_ENGINE_H

#include <kiln/kiln.h>

#define CPU_DT(x) (1u << KILN_DT_##x)
#define CPU_FLOATS (CPU_DT(FLOAT32))

typedef struct cpu_op {
    const char *op_type;
    uint32_t dtype_mask; /* dtypes of output 0 the kernel handles; 0 = any */
    /** Optional: read attributes once, size scratch; *state goes to run/release. */
    kiln_status (*prepare)(const kiln_graph *g, kiln_node_id n, void **state, kiln_error *err);
    kiln_kernel_fn run;
    /** Optional: free what prepare allocated. */
    void (*release)(void *state);
} cpu_op;

extern const cpu_op cpu_ops_basic[];
extern const uint32_t cpu_ops_basic_count;
extern const cpu_op cpu_ops_nn[];
extern const uint32_t cpu_ops_nn_count;

/** The op entry for @p op_type (either table), or NULL. */
const cpu_op *cpu_find_op(const char *op_type);

#endif
