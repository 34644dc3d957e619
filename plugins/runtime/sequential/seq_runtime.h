/*
 * seq_runtime.h - internal interface of the sequential runtime plugin
 * (libkiln_runtime_seq.so, runtime component "sequential").
 *
 * A loaded model is a plan per graph (the root, every If branch and every
 * PartitionedCall subgraph): the
 * graph's nodes in topological order as steps, and one slot per node output.
 * A slot is the tensor consumers read: its own buffer (allocated once at load
 * from the output descriptor, reused by every run; in a subgraph that
 * MemoryAssigner planned, a place in the subgraph's one region at the
 * planned offset, the steps in the planned order) or a view of another
 * tensor (a Const's `value` attribute, the If input a branch Data stands for,
 * the branch output an If forwards, the input a reference output aliases).
 *
 *   seq_load.c   building and freeing plans (kernel binding, buffer sizing)
 *   seq_exec.c   running plans, binding inputs, copying outputs
 *   seq_plugin.c the runtime component and the plugin registration
 *
 * seq_load.c and seq_exec.c form the static library kiln_seq_core, which the
 * multi-stream runtime links to run subgraphs (If branches, PartitionedCall).
 *
 * Ownership: everything in a plan is kiln_alloc'd and freed by seq_plan_free;
 * views borrow from the graph (Const values) or from other slots, so a plan is
 * valid while the graph is unchanged.
 */
#ifndef KILN_SEQ_RUNTIME_H
#define KILN_SEQ_RUNTIME_H

#include <kiln/kiln.h>
#include <stdio.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SEQ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEQ_ASAN 1
#endif
#endif
#ifdef SEQ_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define SEQ_NONE UINT32_MAX /* unconnected input slot */

/** What a step does. */
typedef enum seq_kind {
    SEQ_KERNEL = 0, /* an engine kernel */
    SEQ_DATA,       /* graph input: root = copy of the caller's tensor, branch = view */
    SEQ_CONST,      /* Const/Constant: view of the `value` tensor attribute */
    SEQ_NETOUTPUT,  /* graph outputs: nothing to execute */
    SEQ_COPY,       /* Identity/MemcpyAsync/MemcpyAddrAsync no engine claims: copy */
    SEQ_IF,         /* run the taken branch, forward its outputs */
    SEQ_NOP,        /* NoOp, AtomicAddrClean, MemSet: nothing to do on the CPU */
    SEQ_CALL,       /* PartitionedCall: run its one subgraph, forward its outputs */
    SEQ_WHILE,      /* While / StatelessWhile / _While: run the loop (seq_loop.c) */
    SEQ_ALIAS,      /* PointFromInputs, IdentityAddr (a lowered If's branch, seq_lower.c):
                     * output k is input k's tensor */
    SEQ_CASE,       /* Case: run the branch input 0 selects (seq_case.c) */
    SEQ_VAR         /* Variable / VariableV2 / VarHandleOp: a buffer of its own that keeps
                     * its value from run to run, set at load (seq_var_init) */
} seq_kind;

typedef struct seq_slot {
    kiln_tensor t; /* what consumers read now */
    int64_t *dims; /* owned dims storage (static descriptor shape), or NULL */
    void *buf;     /* owned buffer, or NULL for a view */
    void *mem;     /* where the slot's own bytes live: buf, or its place in the
                    * subgraph's planned region; NULL for a view */
    size_t cap;    /* bytes of buf */
    int32_t ref;   /* output references input k (descriptor ref_input), or -1 */
} seq_slot;

typedef struct seq_plan seq_plan;
typedef struct seq_loop seq_loop;
typedef struct seq_cases seq_cases;

/** The memory budget of one loaded model: the buffers of its plans (root and
 * branches, including branches planned on first use) may total @p limit bytes. */
typedef struct seq_mem {
    int64_t limit;
    _Atomic int64_t used; /* atomic: the multistream runtime's streams plan
                           * subgraphs and grow loop buffers concurrently */
} seq_mem;

/** A runtime instance's options (both runtimes declare max_memory and profile). */
typedef struct seq_inst {
    int64_t max_memory; /* bytes the buffers of one loaded model may take */
    bool profile;       /* record every step's start and end (kiln run --trace) */
    bool lower;         /* lower If/Case to GE's runtime form at load (seq_lower.c) */
    char allocator[64]; /* multistream: the allocator component for the memory the
                         * plan does not cover ("" = none: buffers of their own) */
} seq_inst;

/** Runtime create/destroy callbacks for a seq_inst read from the options. */
kiln_status seq_inst_create(const kiln_options *opts, kiln_error *err, void **inst);
void seq_inst_destroy(void *inst);

/** Default of the runtime option max_memory (bytes): three quarters of the
 * physical memory, 16 GiB when the system does not say. */
int64_t seq_default_max_memory(void);

typedef struct seq_step {
    kiln_node_id node;
    seq_kind kind;
    uint32_t nin, nout;
    uint32_t *in_slot; /* nin slot indices (SEQ_NONE when unconnected) */
    uint32_t out_base; /* slot of output 0; outputs are consecutive */
    int64_t index;     /* Data: model input position or _parent_node_index */
    kiln_kernel_fn fn; /* SEQ_KERNEL */
    void *state;
    const char *engine;
    kiln_tensor *args;   /* nin + nout tensors handed to the kernel */
    seq_plan *branch[2]; /* SEQ_IF: then_branch, else_branch (NULL until planned);
                            SEQ_CALL: branch[0] is the subgraph's plan */
    kiln_graph *branch_graph[2];
    seq_loop *loop;      /* SEQ_WHILE: the loop's subgraph plans and buffers */
    seq_cases *cases;    /* SEQ_CASE: its branches and their plans */
} seq_step;

struct seq_plan {
    kiln_graph *g;
    seq_step *steps; /* topological order */
    uint32_t nsteps;
    seq_slot *slots;
    uint32_t nslots;
    uint32_t ndata;       /* Data steps */
    uint32_t *data_steps; /* step indices of the Data nodes (root: by `index`) */
    uint32_t netoutput;   /* step index of the NetOutput, SEQ_NONE when absent */
    seq_mem *mem;         /* the model's budget (owned by the root plan's loader) */
    /* a subgraph MemoryAssigner planned (docs/memory_planning.md "Subgraphs"):
     * its buffers at their planned offsets in one region, steps in the
     * planned order (`_kiln_sub_step`); NULL = a buffer per output */
    unsigned char *region;
    int64_t region_size;
    /* under AddressSanitizer, the region's slots whose last reader is step i
     * are poisoned after it: kill[kill_start[i] .. kill_start[i + 1]) (slots
     * read through NetOutput, a control-flow node or a reference output stay
     * readable until the next execution of the plan) */
    uint32_t *kill_start, *kill;
};

/** Whether slot @p sl lives in @p p's planned region (not a buffer of its own). */
static inline bool seq_in_region(const seq_plan *p, const seq_slot *sl)
{
    return sl->mem && (const unsigned char *)sl->mem >= p->region &&
           (const unsigned char *)sl->mem < p->region + p->region_size;
}

/**
 * Build the plan of @p g (recursively for If branches).  Errors name the
 * node: a dynamic output shape, an op no engine supports, a Const without a
 * `value`, a subgraph-carrying op other than If, a root Data without `index`,
 * an output whose buffer would take the model past @p mem's limit.
 */
kiln_status seq_plan_build(kiln_graph *g, bool is_root, seq_mem *mem, seq_plan **out,
                           kiln_error *err);
void seq_plan_free(seq_plan *p);

/**
 * The plan of branch @p b (0 then, 1 else) of If step @p s, or of the
 * subgraph of PartitionedCall step @p s (b = 0), built now when load deferred
 * it because its shapes were not static; errors name the node.
 */
kiln_status seq_branch_plan(seq_plan *p, seq_step *s, int b, kiln_error *err);

/** Execute @p p once; Data slots must be bound.  Kernel errors get the node pushed. */
kiln_status seq_plan_exec(seq_plan *p, kiln_error *err);

/** What a step of node @p n does (Data, Const, If, a kernel, ...). */
seq_kind seq_classify(kiln_graph *g, kiln_node_id n);
/** The subgraph of If node @p n with role @p role ("then_branch"), or NULL. */
kiln_graph *seq_branch_of(kiln_graph *g, kiln_node_id n, const char *role);
/**
 * True when every buffer a plan of @p g would allocate has a static size (a
 * branch that is not is planned when first taken).
 */
bool seq_shapes_static(kiln_graph *g);

/** The first element of If node @p n's condition tensor @p c, as a truth value. */
kiln_status seq_cond_value(const kiln_graph *g, kiln_node_id n, const kiln_tensor *c, bool *out,
                           kiln_error *err);

/**
 * Run plan @p b (a built subgraph plan) as the body of node @p n of graph
 * @p pg (an If branch or a PartitionedCall subgraph; @p kind and @p role name
 * them in errors): its Data nodes view the @p nin tensors @p in by
 * `_parent_node_index` (dtype KILN_DT_COUNT = unconnected), and @p out
 * (@p nout entries) receives views of the subgraph's NetOutput inputs, valid
 * until the plan runs again.
 */
kiln_status seq_sub_run(seq_plan *b, const kiln_graph *pg, kiln_node_id n, const char *kind,
                        const char *role, const kiln_tensor *in, uint32_t nin, kiln_tensor *out,
                        uint32_t nout, kiln_error *err);

/** Check root input @p i against its Data descriptor and copy it in. */
kiln_status seq_bind_input(seq_plan *p, uint32_t i, const kiln_tensor *t, kiln_error *err);
/** Copy the root NetOutput's inputs into kiln_alloc'd @p outputs (freed on error). */
kiln_status seq_copy_outputs(seq_plan *p, kiln_tensor *outputs, uint32_t nout, kiln_error *err);
/** Free what seq_copy_outputs allocated and zero the tensors. */
void seq_free_outputs(kiln_tensor *outputs, uint32_t nout);

/** "[1,3,224,224]" into @p buf (truncated to @p size). */
void seq_dims_str(uint32_t rank, const int64_t *dims, char *buf, size_t size);
/** "1.5 GiB" (or "12 bytes") for @p bytes into @p buf; returns @p buf. */
const char *seq_human_bytes(int64_t bytes, char *buf, size_t size);

/* ---- loops (seq_loop.c) ------------------------------------------------------ */

/**
 * Prepare While node @p n of @p g for execution.  Two forms:
 *   ONNX Loop (attr `_onnx_op` "Loop", subgraph `body`; docs/onnx.md): inputs
 *   [M, cond, v_1..v_N, captures...], outputs [cond_final, v_1..v_N,
 *   scan_1..scan_K], N = `_onnx_loop_carried`; the body's inputs are
 *   (iteration, cond, v_1..v_N, captures) and its outputs (cond, v_1..v_N,
 *   scan elements);
 *   GE While (subgraphs `cond` and `body`): inputs = outputs = the loop
 *   variables; `cond` yields the predicate, `body` the next variables.
 * Subgraph plans with static shapes are built now, others at their first
 * iteration.  Errors name the node: a missing subgraph, arities that do not
 * fit the form, a plan that cannot be built.
 */
kiln_status seq_loop_prepare(kiln_graph *g, kiln_node_id n, seq_mem *mem, seq_loop **out,
                             kiln_error *err);
/**
 * Run loop @p l with the node's @p nin inputs @p in (dtype KILN_DT_COUNT =
 * unconnected); @p out (@p nout entries) receives views of the final values
 * (buffers the loop owns, valid until it runs again).  Scan outputs stack the
 * iterations' elements along a new first dim.  Errors: a body failure (with a
 * frame naming the node and iteration), a scan element whose shape changes,
 * a loop-carried value whose dtype changes, the memory limit.
 * Complexity: iterations x (body run + copy of the carried values).
 */
kiln_status seq_loop_run(seq_loop *l, const kiln_tensor *in, uint32_t nin, kiln_tensor *out,
                         uint32_t nout, kiln_error *err);
void seq_loop_free(seq_loop *l);

/* ---- profiling (kiln run --trace / --report) ----------------------------------- */

/** One executed step: node @p node of graph @p g from t0 to t1 (CLOCK_MONOTONIC ns). */
typedef struct seq_prof_rec {
    const kiln_graph *g;
    kiln_node_id node;
    const char *engine;
    uint32_t run, depth;
    int64_t t0, t1;
} seq_prof_rec;

/** The records of one thread (a stream); grows by doubling. */
typedef struct seq_prof {
    seq_prof_rec *v;
    size_t n, cap;
    uint32_t run;   /* run number stamped on new records */
    uint32_t depth; /* subgraph nesting of the step being run */
    bool oom;       /* a record was dropped (memory, SEQ_PROF_MAX) */
} seq_prof;

/**
 * seq_prof_get: the recorder of the calling thread, NULL when profiling is off: the
 * runtime sets it before it executes a plan on this thread and clears it
 * after; seq_plan_exec then records every step it runs (cost: two clock
 * reads per step, nothing when NULL).
 */
seq_prof *seq_prof_get(void);
/** Set (NULL: clear) the calling thread's recorder. */
void seq_prof_set(seq_prof *p);
/** CLOCK_MONOTONIC in nanoseconds. */
int64_t seq_now_ns(void);
/** Records one recorder keeps at most (48 MiB); later ones are dropped (oom set). */
#define SEQ_PROF_MAX ((size_t)1 << 20)
/** Append a record; its index, or SIZE_MAX when out of memory or past
 * SEQ_PROF_MAX (p->oom set: the profile is truncated). */
size_t seq_prof_add(seq_prof *p, const seq_prof_rec *r);
void seq_prof_reset(seq_prof *p);
void seq_prof_free(seq_prof *p);

/** The subgraph roles of an If, indexed like seq_step.branch. */
extern const char *const seq_branch_roles[2];

/**
 * The value variable node @p n of @p g starts with, into @p dst (@p bytes):
 * its tensor attribute `value` when it has one (of exactly @p bytes, else
 * an error naming the node), else zeros.  GE's variables are set by the
 * session (VarManager); kiln's keep whatever Assign wrote, run after run.
 */
kiln_status seq_var_init(kiln_graph *g, kiln_node_id n, void *dst, size_t bytes, kiln_error *err);
bool seq_is_variable(const kiln_graph *g, kiln_node_id n);

/**
 * A Case node @p n of @p g (seq_case.c): its branches branch_0..branch_{N-1}
 * (a role once each), planned at load when their shapes are static, against
 * @p mem.  Errors name the node.
 */
kiln_status seq_cases_prepare(kiln_graph *g, kiln_node_id n, seq_mem *mem, seq_cases **out,
                              kiln_error *err);
void seq_cases_free(seq_cases *c);
/** Run the branch @p in[0] selects (out of range: the last) on @p in; its outputs
 * into @p out as views (seq_sub_run). */
kiln_status seq_cases_run(seq_cases *c, seq_mem *mem, const kiln_graph *g, kiln_node_id n,
                          const kiln_tensor *in, uint32_t nin, kiln_tensor *out, uint32_t nout,
                          kiln_error *err);

/**
 * GE's runtime graph build of If/Case (bg_condition, kiln_rt_common) on a
 * graph about to be loaded: every If/Case of @p g and its subgraphs is
 * lowered in place (innermost first; already lowered ones are left), its
 * branches' InnerData bound by `index`, PointFromInputs / IdentityAddr run as
 * views (SEQ_ALIAS).  A branch MemoryAssigner planned gets its
 * `_kiln_sub_step` order renumbered over the nodes the lowering added, so its
 * region still applies.  Errors name the node (kiln_bg_lower_cond's).
 */
kiln_status seq_lower_conditions(kiln_graph *g, kiln_error *err);

#endif /* KILN_SEQ_RUNTIME_H */
