/*
 * kiln_runtime.h - executing a compiled graph: runtime (executor) components
 * and the host calls a runtime uses to bind engine kernels.
 *
 * A runtime loads a graph once (binds a kernel to every node through the
 * engines, plans its buffers) and then runs it any number of times:
 *
 *   load(inst, g, &model, err)            once per compiled graph
 *   run(inst, model, inputs, outputs, err) per inference
 *   unload(inst, model)
 *
 * Inputs are the root graph's Data nodes in `index` order; outputs are the
 * inputs of the root NetOutput in order.  The runtime allocates output data
 * with kiln_alloc; the caller releases it with kiln_free.  Descriptors are
 * static when run() is called (the pipeline infers shapes from the bound
 * inputs first).
 *
 * Descriptor structs are struct_size-prefixed and APPEND ONLY.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "kiln_component.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_registrar kiln_registrar;

/* ---- run profiles (kiln run --trace, --report; docs/run.md) ---------------- */
/*
 * A runtime that can profile declares a bool option `profile`; the host sets
 * it (kiln_model_set_profiling) before load, and the runtime then stamps
 * every task it runs with two CLOCK_MONOTONIC reads.  Without the option on,
 * it records nothing.  profile() hands out what the runs since load
 * recorded, plus the memory the loaded model holds (with or without the
 * option).
 */

/** One executed task: a node of the root graph or, nested (depth > 0), of a subgraph. */
typedef struct kiln_prof_task {
    const kiln_graph *graph; /* the graph holding the node */
    kiln_node_id node;
    const char *engine;      /* the kernel's engine; NULL for ops the runtime runs itself */
    uint32_t stream;         /* the stream (thread) that ran it; 0 for a sequential runtime */
    uint32_t run;            /* 0-based run since load */
    uint32_t depth;          /* 0: a task of the root graph; k: k subgraph calls deep */
    int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
} kiln_prof_task;

/** An event between two tasks: recorded after task `send`, waited for before task `recv`. */
typedef struct kiln_prof_flow {
    uint32_t event; /* the event id (_send_event_ids / _recv_event_ids) */
    uint32_t send, recv; /* indices into kiln_run_profile.tasks */
} kiln_prof_flow;

/** Memory of one memory type the loaded model holds. */
typedef struct kiln_prof_memory {
    const char *memory_type; /* "HBM", "host", ... (the plan's names) */
    int64_t arena_bytes;     /* the plan's arena of this type */
    int64_t own_bytes;       /* buffers outside the plan (own, subgraph, loop buffers) */
} kiln_prof_memory;

typedef struct kiln_run_profile {
    uint32_t struct_size;
    uint32_t stream_count;
    uint32_t run_count;
    uint32_t task_count;
    const kiln_prof_task *tasks; /* grouped by stream, in execution order per stream */
    uint32_t flow_count;
    const kiln_prof_flow *flows;
    uint32_t memory_count;
    const kiln_prof_memory *memory;
    bool truncated;              /* records were dropped for want of memory */
} kiln_run_profile;

typedef struct kiln_runtime_desc {
    uint32_t struct_size;
    const char *name; /* "sequential", ... */
    const char *summary;
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Bind kernels and prepare buffers for @p g; *model is passed to run/unload.
     *  On failure *model stays NULL and the runtime has released what it took. */
    kiln_status (*load)(void *inst, kiln_graph *g, void **model, kiln_error *err);
    /**
     * Execute once.  @p outputs has @p nout entries; the runtime fills dtype,
     * rank, dims (kiln_alloc'd), data (kiln_alloc'd) and nbytes of each.
     */
    kiln_status (*run)(void *inst, void *model, const kiln_tensor *inputs, uint32_t nin,
                       kiln_tensor *outputs, uint32_t nout, kiln_error *err);
    void (*unload)(void *inst, void *model);
    /**
     * Optional (0.5): the profile of @p model's runs since load into @p out
     * (the caller sets out->struct_size); the arrays stay valid until the next
     * run or unload.  NULL when the runtime cannot profile.
     */
    kiln_status (*profile)(void *inst, void *model, kiln_run_profile *out, kiln_error *err);
    void *reserved[3];
} kiln_runtime_desc;

KILN_API kiln_status kiln_register_runtime(kiln_registrar *r, const kiln_runtime_desc *d);

/**
 * Bind a kernel for node @p n of @p g: the engine named by the node's
 * `_kiln_engine` attribute (GRAPH_FORMAT's `engine`) when set, else the
 * highest-priority engine whose op table lists the node's op type (and whose
 * supports() callback, if any, accepts the node).  *fn and *state are what the
 * engine's kernel_create returned; *engine (optional) receives the engine's
 * name, which kiln_engine_kernel_release needs.
 * Errors: KILN_ERR_UNSUPPORTED naming the node and op when no engine supports
 * it; the engine's own error otherwise.
 */
KILN_API kiln_status kiln_engine_kernel(kiln_graph *g, kiln_node_id n, kiln_kernel_fn *fn,
                                        void **state, const char **engine, kiln_error *err);
/** Release a kernel state obtained from kiln_engine_kernel. */
KILN_API void kiln_engine_kernel_release(kiln_graph *g, const char *engine, void *state);
/**
 * Name of the engine that would execute node @p n (as kiln_engine_kernel
 * chooses it), or NULL when none supports it.
 */
KILN_API const char *kiln_engine_for_node(kiln_graph *g, kiln_node_id n);

/** Number of registered engines in the graph's context. */
KILN_API uint32_t kiln_engine_count(const kiln_graph *g);
/** Name of the i-th engine in registration order (NULL past the end); *priority optional. */
KILN_API const char *kiln_engine_at(const kiln_graph *g, uint32_t i, int32_t *priority);
/**
 * Whether @p engine takes node @p n: its op table lists the op, with a dtype
 * mask admitting the first output's dtype and a format list admitting every
 * output's format, and its supports() callback (if any) accepts the node.
 * KILN_OK when it does; KILN_ERR_UNSUPPORTED with the reason in @p why ("no op
 * entry for X", "dtype ...", "format ...", "supports() said no");
 * KILN_ERR_NOT_FOUND when no loaded plugin provides the engine.
 */
KILN_API kiln_status kiln_engine_check(kiln_graph *g, const char *engine, kiln_node_id n,
                                       char *why, size_t size);

/* ---- engine compiler hooks (docs/engines.md) ------------------------------ */

/**
 * Run every loaded engine's optimize_original_graph on @p root, highest
 * priority first (ties: registration order); engines without the hook are
 * skipped.  The stage driver calls it at the end of stage optimize_original.
 * @p ctx (may be NULL) is the pass context the hooks get, with the engine as
 * the current component.  Errors: the first failing engine's, with a frame
 * naming the engine and the hook.
 */
KILN_API kiln_status kiln_engines_optimize_original(kiln_pass_ctx *ctx, kiln_graph *root,
                                                    kiln_error *err);
/**
 * Run optimize_subgraph of engine @p engine on the partitioned subgraph @p g
 * (GE OptimizeFusedGraph); KILN_OK when the engine has no such hook,
 * KILN_ERR_NOT_FOUND when no loaded plugin provides @p engine.  Safe to call
 * from worker threads on distinct graphs (engine instances are created under
 * a lock); the hook itself must not touch shared mutable state.
 */
KILN_API kiln_status kiln_engine_optimize_subgraph(const char *engine, kiln_pass_ctx *ctx,
                                                   kiln_graph *g, kiln_error *err);
/** The same as kiln_engines_optimize_original with optimize_whole_graph, after the merge. */
KILN_API kiln_status kiln_engines_optimize_whole(kiln_pass_ctx *ctx, kiln_graph *root,
                                                 kiln_error *err);
/**
 * Running parameters of node @p n (GE CalcOpRunningParam) from the node's
 * engine (chosen as kiln_engine_kernel does).  The caller sets
 * rp->struct_size and rp->output_sizes (room for every output of @p n); the
 * host fills output_count, the descriptors' sizes (numel x dtype size, -1
 * when dynamic) and zero workspaces, then calls the engine's hook, if any.
 * The result is checked: an output below its descriptor's size, more than
 * KILN_MAX_WORKSPACES workspaces or a negative workspace is an error naming
 * the engine and the node.  *engine (optional) receives the engine's name.
 */
KILN_API kiln_status kiln_engine_running_param(kiln_graph *g, kiln_node_id n,
                                               kiln_running_param *rp, const char **engine,
                                               kiln_error *err);
/**
 * The task of node @p n (GE GenerateTask) from the node's engine.  The caller
 * sets task->struct_size and optionally args / args_capacity; the host fills
 * the rest as kiln_task_desc says.  An engine without generate_task gives one
 * KILN_TASK_KERNEL named "<engine>.<op>" (a string that lives as long as the
 * context).  A kind out of range, a kernel task without a name or args_size
 * past args_capacity is an error naming the engine and the node.
 */
KILN_API kiln_status kiln_engine_generate_task(kiln_graph *g, kiln_node_id n,
                                               kiln_task_desc *task, const char **engine,
                                               kiln_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KILN_RUNTIME_H */
