/*
 * cpu_engine.h - what the built-in host engines share (static library
 * kiln_engine_common, plugins/engines/common/): the kernel entry type, the
 * op tables each engine owns and the glue that turns a table into an engine.
 *
 * One op table per engine (docs/engines.md says why each op sits where):
 *   cpu_ops_nn[]      engine aicore  (aicore/nn_*.c: Conv, ConvTranspose,
 *                     MatMul, Gemm, LSTM, BatchNormalization, pooling, Resize)
 *   cpu_ops_vector[]  engine vector  (vector/: element-wise, Cast, reductions,
 *                     Softmax)
 *   cpu_ops_host[]    engine hostcpu (hostcpu/: shape computation and data
 *                     movement)
 *   cpu_ops_rts[]     engine rts     (rts/: stream, event and copy nodes)
 * Each engine's plugin.c serves its own table through CPU_ENGINE (the glue
 * of engine_glue.c).  Shape inference is the op registry's
 * (plugins/opsets/onnx); its folding reaches these kernels through the host
 * (kiln_engine_kernel) like any runtime.
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
#include <threads.h>

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

extern const cpu_op cpu_ops_nn[];
extern const uint32_t cpu_ops_nn_count;
extern const cpu_op cpu_ops_vector[];
extern const uint32_t cpu_ops_vector_count;
extern const cpu_op cpu_ops_host[];
extern const uint32_t cpu_ops_host_count;
extern const cpu_op cpu_ops_rts[];
extern const uint32_t cpu_ops_rts_count;


/* ---- engine glue (engine_glue.c) ------------------------------------------ */

#define CPU_ENGINE_MAX_OPS 128
#define CPU_TASK_NAME_MAX 48

/** One built-in engine: its name, priority, op table and optional hooks. */
typedef struct cpu_engine_def {
    const char *name;
    const char *summary;
    int32_t priority;
    const cpu_op *table;
    const uint32_t *count; /* its entries (the table's _count variable) */
    const char *formats;   /* formats every op accepts ("ND,NCHW"), NULL = any */
    /**
     * Optional: complete the task of node @p n, which the glue set to
     * KILN_TASK_KERNEL with kernel "<engine>.<op>" (the rts engine's copies,
     * events and stream switches set their own kind and ids).
     */
    void (*task_fill)(const kiln_graph *g, kiln_node_id n, kiln_task_desc *task);
    kiln_status (*optimize_original_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
    kiln_status (*optimize_subgraph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
    bool (*optimize_subgraph_wanted)(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                     uint32_t rank, const kiln_node_id *nodes, uint32_t count);
    kiln_status (*optimize_whole_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
} cpu_engine_def;

/**
 * A built-in engine and what the glue derives from its table: the
 * kiln_op_info table (GE's ops kernel info store; first entry of an op type
 * wins) and the task kernel names "<engine>.<op>" (by table index).  Static
 * storage, filled once per process (call_once), read-only afterwards: the
 * host keeps pointers into it while the plugin is loaded.  The instance the
 * engine hands to its callbacks is the cpu_engine itself.
 */
typedef struct cpu_engine {
    cpu_engine_def def;
    once_flag once;
    uint32_t count; /* entries of ops; > CPU_ENGINE_MAX_OPS when the table is too big */
    kiln_op_info ops[CPU_ENGINE_MAX_OPS];
    char task_names[CPU_ENGINE_MAX_OPS][CPU_TASK_NAME_MAX];
} cpu_engine;

/** The entry for @p op_type in @p table (@p count entries), or NULL. */
const cpu_op *cpu_table_find(const cpu_op *table, uint32_t count, const char *op_type);

/** Fill @p e's op infos and task names from its def (call through call_once). */
void cpu_engine_fill(cpu_engine *e);

/**
 * Register @p e (filled) with @p create returning it as the instance.  The
 * descriptor gets the glue's kernel_create / kernel_destroy (prepare, a
 * {op, state} binding and a trampoline: one indirect call per invocation),
 * calc_op_running_param (the host's output sizes, no workspace: kernels size
 * their scratch in prepare()) and generate_task (one task: a
 * kernel "<engine>.<op>"), plus the def's optimisation hooks.
 */
kiln_status cpu_engine_register(kiln_registrar *r, cpu_engine *e,
                                kiln_status (*create)(const kiln_options *, kiln_error *, void **),
                                kiln_error *err);

/**
 * Remove the nodes of @p root placed on engine @p engine that do nothing
 * (engine_opt.c): no-op Casts for the vector engine (@p vector), same-shape
 * Reshape / Flatten / Squeeze / Unsqueeze for the host-CPU engine.
 */
kiln_status cpu_remove_noops(kiln_pass_ctx *ctx, kiln_graph *root, const char *engine, bool vector);
/**
 * An engine's on/off session option @p key (engine_opt.c): *on = true when
 * it is unset, empty or "on", false for "off"; any other value is
 * KILN_ERR_INVALID "session option KEY=VALUE: expected on or off".
 */
kiln_status cpu_session_switch(kiln_pass_ctx *ctx, const char *key, bool *on);
/** cpu_session_switch's reading without the error: 1 on, 0 off, -1 a bad value
 *  (an engine's optimize_subgraph_wanted leaves that to its hook to report). */
int cpu_switch_value(kiln_pass_ctx *ctx, const char *key);

/** optimize_original_graph of the vector and host-CPU engines (engine_opt.c). */
kiln_status cpu_vector_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
kiln_status cpu_host_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);

/**
 * Define the static engine @p var from a cpu_engine_def initializer and the
 * function `var##_register(registrar, err)` a plugin's init calls.
 */
#define CPU_ENGINE(var, ...)                                                                       \
    static cpu_engine var = {.def = __VA_ARGS__, .once = ONCE_FLAG_INIT};                          \
    static void var##_fill(void) { cpu_engine_fill(&var); }                                        \
    static kiln_status var##_create(const kiln_options *o, kiln_error *e, void **inst)             \
    {                                                                                              \
        (void)o;                                                                                   \
        (void)e;                                                                                   \
        *inst = &var;                                                                              \
        return KILN_OK;                                                                            \
    }                                                                                              \
    static kiln_status var##_register(kiln_registrar *r, kiln_error *err)                          \
    {                                                                                              \
        call_once(&var.once, var##_fill);                                                          \
        return cpu_engine_register(r, &var, var##_create, err);                                    \
    }

#endif
