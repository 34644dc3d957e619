/*
 * kiln_component.h - the non-pass component kinds a plugin may register:
 * engines, memory-conflict checkers, memory planners, runtime allocators,
 * model importers/exporters (frontends), tuners and instruments.
 *
 * Every descriptor starts with struct_size and is APPEND ONLY.  The host copies
 * min(struct_size, sizeof) bytes and zero-fills the rest, so a plugin built
 * against an older minor version reads as "absent" for newer fields.
 * Callbacks marked optional may be NULL.
 */
#ifndef KILN_COMPONENT_H
#define KILN_COMPONENT_H

#include "kiln_pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- memory-conflict checkers (GE mem_layout_conflict) ------------------- */

/** GE AnchorAttribute, in GE's enum order (used as table index). APPEND ONLY. */
#define KILN_ANCHOR_ATTR_MAP(X)                                            \
    X(USER_MEMORY_INPUT, 0)                                                \
    X(USER_MEMORY_OUTPUT, 1)                                               \
    X(IMMUTABLE_ADDRESS_OUTPUT, 2)                                         \
    X(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT, 3)                      \
    X(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT, 4)                       \
    X(CONTINUOUS_INPUT, 5)                                                 \
    X(CONTINUOUS_OUTPUT, 6)                                                \
    X(NOPADDING_CONTINUOUS_INPUT, 7)                                       \
    X(NOPADDING_CONTINUOUS_OUTPUT, 8)                                      \
    X(RTS_SPECIAL_TYPE_INPUT, 9)                                           \
    X(RTS_SPECIAL_TYPE_OUTPUT, 10)                                         \
    X(REFERENCE_OUTPUT, 11)                                                \
    X(NORMAL_INPUT, 12)                                                    \
    X(NORMAL_OUTPUT, 13)

typedef enum kiln_anchor_attr {
#define KILN__AA(name, v) KILN_AA_##name = v,
    KILN_ANCHOR_ATTR_MAP(KILN__AA)
#undef KILN__AA
    KILN_AA_COUNT = 14
} kiln_anchor_attr;

/** Verdict of the unconditional tables for an attribute pair. */
typedef enum kiln_conflict_class {
    KILN_CONFLICT_CONDITIONAL = 0, /* ask the registered checker (none = no conflict) */
    KILN_CONFLICT_NEVER = 1,       /* absolutely no conflict */
    KILN_CONFLICT_ALWAYS = 2       /* absolutely conflict */
} kiln_conflict_class;

/** An anchor in a memory symbol: input or output @c index of @c node in @c graph. */
typedef struct kiln_mem_anchor {
    kiln_graph *graph;
    kiln_node_id node;
    uint32_t index;
    uint32_t is_output; /* 1 = output anchor, 0 = input anchor */
} kiln_mem_anchor;

/* Graph-info bits passed to checkers (GE GraphInfo, GE_SEMANTICS 3.3). */
#define KILN_GI_ROOT_GRAPH_STATIC 0x1u
#define KILN_GI_FEATURE_MAP_REFRESHABLE 0x2u
#define KILN_GI_USER_INPUT_NOPADDING_OUTPUT_OK 0x4u
#define KILN_GI_PHYSICAL_MEMORY_REFRESHABLE 0x8u

typedef struct kiln_checker_result kiln_checker_result;

/** What a conditional checker is asked about one anchor pair. */
typedef struct kiln_checker_query {
    uint32_t struct_size;
    uint32_t graph_info;            /* KILN_GI_* bits */
    kiln_graph *root;
    kiln_mem_anchor a, b;
    kiln_anchor_attr type_a, type_b;
    const kiln_mem_anchor *symbol;  /* every anchor of the symbol */
    uint32_t symbol_count;
} kiln_checker_query;

/** Checker result: ask for @p anchor to be isolated (an Identity before/after it). */
KILN_API kiln_status kiln_checker_isolate(kiln_checker_result *r, const kiln_mem_anchor *anchor);
/** Record the rule that decided (shown by --report and -v). */
KILN_API void kiln_checker_reason(kiln_checker_result *r, const char *fmt, ...) KILN_PRINTF(2, 3);

typedef struct kiln_attr_pair {
    uint8_t a, b; /* kiln_anchor_attr values; registration is symmetric */
} kiln_attr_pair;

#define KILN_CHECKER_CALL_AS_SYMBOL 0x1u /* run once per symbol per type pair */

typedef struct kiln_checker_desc {
    uint32_t struct_size;
    const char *name; /* GE checker name, e.g. "ContinuousInputAndContinuousInput" */
    const char *summary;
    uint32_t flags;
    uint32_t pair_count;
    const kiln_attr_pair *pairs;
    /** Decide; call kiln_checker_isolate for each anchor to isolate. */
    kiln_status (*check)(const kiln_checker_query *q, kiln_checker_result *r);
    void *reserved[4];
} kiln_checker_desc;

/* ---- engines ------------------------------------------------------------ */

/** One op an engine supports (GE ops kernel info store entry). */
typedef struct kiln_op_info {
    uint32_t struct_size;
    const char *op_type;
    uint32_t dtype_mask; /* bit (1u << kiln_dtype) per supported dtype; 0 = any */
    const char *formats; /* comma-separated formats, NULL = any */
    uint32_t flags;
} kiln_op_info;

/** A runtime tensor handed to kernels. */
typedef struct kiln_tensor {
    kiln_dtype dtype;
    uint32_t rank;
    const int64_t *dims;
    void *data;
    size_t nbytes;
} kiln_tensor;

typedef struct kiln_kernel_args {
    uint32_t struct_size;
    const kiln_graph *graph;
    kiln_node_id node;
    uint32_t input_count;
    uint32_t output_count;
    const kiln_tensor *inputs;
    kiln_tensor *outputs;
    void *workspace;
    size_t workspace_size;
    uint32_t threads;
} kiln_kernel_args;

typedef kiln_status (*kiln_kernel_fn)(void *kernel_state, const kiln_kernel_args *args,
                                      kiln_error *err);

/*
 * Per-node running parameters (GE CalcOpRunningParam): what the build stage
 * needs to plan memory for a node.  The host fills struct_size, output_count
 * and output_sizes[] with the descriptors' static sizes (numel x dtype size,
 * -1 when a dim is dynamic) and zeroes the workspaces before calling the
 * engine, which may raise an output size (padding, alignment) and declare up
 * to KILN_MAX_WORKSPACES scratch buffers.  APPEND ONLY.
 */
#define KILN_MAX_WORKSPACES 8
typedef struct kiln_running_param {
    uint32_t struct_size;
    uint32_t output_count;       /* entries of output_sizes (the node's outputs) */
    int64_t *output_sizes;       /* in/out: bytes per output, -1 = unknown */
    uint32_t workspace_count;    /* out: entries used of workspace_sizes */
    int64_t workspace_sizes[KILN_MAX_WORKSPACES]; /* out: bytes per workspace */
} kiln_running_param;

/* Kinds of task a node generates (GE ModelTaskType's subset). APPEND ONLY. */
typedef enum kiln_task_kind {
    KILN_TASK_NONE = 0,          /* nothing to execute (the engine says so) */
    KILN_TASK_KERNEL = 1,        /* call the engine's kernel kernel_name */
    KILN_TASK_MEMCPY = 2,        /* copy input 0 to output 0 (MemcpyAsync) */
    KILN_TASK_EVENT_RECORD = 3,  /* record event_id on the stream (Send) */
    KILN_TASK_EVENT_WAIT = 4,    /* wait for event_id on the stream (Recv) */
    KILN_TASK_STREAM_ACTIVE = 5, /* activate the streams of the node's attribute */
    KILN_TASK_STREAM_SWITCH = 6, /* activate target_stream_id when the condition holds */
    KILN_TASK_KIND_COUNT = 7
} kiln_task_kind;

/*
 * One task of a node (GE GenerateTask's TaskDef): what the model file stores
 * and a runtime executes.  The host fills struct_size, stream_id (node
 * attribute `_kiln_stream_id`, else 0), args (a buffer of args_capacity bytes) and
 * zeroes the rest; the engine sets kind and the fields that kind uses and
 * may write up to args_capacity bytes of kernel arguments (args_size).
 * kernel_name must be static storage (the host copies it).  APPEND ONLY.
 */
typedef struct kiln_task_desc {
    uint32_t struct_size;
    uint32_t kind;             /* kiln_task_kind */
    uint32_t stream_id;        /* in/out: stream the task is issued on */
    uint32_t event_id;         /* EVENT_RECORD / EVENT_WAIT */
    uint32_t target_stream_id; /* STREAM_SWITCH */
    uint32_t args_size;        /* out: bytes written to args */
    const char *kernel_name;   /* KERNEL: the engine's kernel ("vector.Add") */
    void *args;                /* in: buffer for the kernel's argument blob */
    uint32_t args_capacity;    /* in: its size in bytes */
    uint32_t flags;
} kiln_task_desc;

/*
 * An engine (GE's OpsKernelInfoStore + GraphOptimizer + OpsKernelBuilder of
 * one engine).  Hooks, in the order the compiler reaches them
 * (docs/engines.md):
 *   optimize_original_graph  end of stage optimize_original, once per engine
 *                            in priority order, on the whole root graph
 *                            (GE OptimizeOriginalGraph)
 *   optimize_subgraph        per partitioned subgraph of this engine (GE
 *                            OptimizeFusedGraph); may run in a worker thread
 *   optimize_whole_graph     after the subgraphs are merged back (GE
 *                            OptimizeWholeGraph)
 *   calc_op_running_param    per node placed on the engine, build stage (GE
 *                            CalcOpRunningParam)
 *   generate_task            per node placed on the engine, build stage (GE
 *                            GenerateTask)
 *   kernel_create/destroy    per node, when a runtime loads the graph
 */
typedef struct kiln_engine_desc {
    uint32_t struct_size;
    const char *name; /* "cpu", "hccl", ... */
    const char *summary;
    uint32_t flags;
    int32_t priority; /* higher wins placement ties */
    uint32_t option_count;
    const kiln_option_def *options;
    uint32_t op_count;
    const kiln_op_info *ops;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Optional finer support check than the op table (shapes, attributes). */
    bool (*supports)(void *inst, const kiln_graph *g, kiln_node_id n);
    /** Optional: optimise one partitioned subgraph of this engine (GE OptimizeFusedGraph;
     *  the partitioner calls it, possibly in a worker thread: no shared mutable state). */
    kiln_status (*optimize_subgraph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
    /** Optional: bind a kernel for node @p n; *state is passed back to the kernel. */
    kiln_status (*kernel_create)(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_kernel_fn *fn, void **state, kiln_error *err);
    void (*kernel_destroy)(void *inst, void *state);
    /** Optional: optimise the whole root graph (GE OptimizeOriginalGraph). */
    kiln_status (*optimize_original_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
    /** Optional: optimise the merged root graph (GE OptimizeWholeGraph). */
    kiln_status (*optimize_whole_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
    /** Optional: output and workspace sizes of node @p n (GE CalcOpRunningParam). */
    kiln_status (*calc_op_running_param)(void *inst, const kiln_graph *g, kiln_node_id n,
                                         kiln_running_param *rp, kiln_error *err);
    /** Optional: the task of node @p n (GE GenerateTask); none = one KILN_TASK_KERNEL. */
    kiln_status (*generate_task)(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_task_desc *task, kiln_error *err);
    /**
     * Optional, beside optimize_subgraph: whether optimize_subgraph could change
     * partition @p rank of @p g, whose nodes are @p nodes (@p count, id order),
     * asked before the partition is split: @p g is the partitioned graph, where a
     * node's producers and consumers in other partitions stand for the
     * PlaceHolders and Ends of the split.  false promises that the hook would
     * leave the partition as it is (no edit, no counter, no error); the
     * partition is then neither split nor merged back, so a graph of a million
     * nodes in 100k partitions pays only for the partitions with work.  @p ctx
     * reads session options.  Asked on the stage's thread, before any partition
     * is split; not asked when the optimize_subgraph stage has passes (they run
     * on every partition).  Since ABI minor 11; takes what was reserved[0] (size
     * unchanged): a host that does not know it runs the hook on every partition.
     */
    bool (*optimize_subgraph_wanted)(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                     uint32_t rank, const kiln_node_id *nodes, uint32_t count);
    void *reserved[3];
} kiln_engine_desc;

/* ---- memory planners (docs/memory_planning.md) -------------------------- */
/*
 * A memory planner places buffers in one arena of one memory type: the build
 * stage's MemoryAssigner turns the graph into a kiln_mem_problem (one block
 * per memory symbol after ProcessInplace, continuous groups already merged
 * into one block, zero-copy model inputs and outputs left out), calls the
 * planner chosen by the pipeline's `memory_planner` (or the assigner's
 * option), then checks the result with kiln_mem_plan_check: a planner that
 * breaks a constraint fails the build naming the planner and the blocks.
 *
 * Time is a step index in the build schedule (kiln_schedule_*): a block is
 * live over [first_use, last_use], both inclusive.  Blocks whose intervals do
 * not intersect may share memory; the assigner has already widened every
 * interval so that this is sound across streams (kiln_schedule_release_step).
 */

/* kiln_mem_block.flags */
#define KILN_MEM_BLOCK_FIXED 0x1u /* offset is given (MarkSameAddr, pinned): keep it */

/** One buffer to place. */
typedef struct kiln_mem_block {
    int64_t size;       /* bytes (> 0) */
    int64_t offset;     /* out: assigned offset (in: the offset of a FIXED block) */
    uint32_t first_use; /* first step the block is live (inclusive) */
    uint32_t last_use;  /* last step the block is live (inclusive), >= first_use */
    uint32_t alignment; /* bytes, power of two; 0 = the problem's alignment */
    uint32_t flags;     /* KILN_MEM_BLOCK_* */
    uint32_t stream;    /* stream of the producing node (GE keys level-1 reuse by it) */
    uint32_t id;        /* caller's id (symbol), for messages; planners ignore it */
} kiln_mem_block;

/**
 * Optional question a stream-aware planner may ask (GE level-2 reuse,
 * "depend life begin"): the latest step on @p stream that is ordered before
 * step @p step by stream order and events, or UINT32_MAX when none.
 */
typedef uint32_t (*kiln_mem_latest_before_fn)(void *ctx, uint32_t step, uint32_t stream);

typedef struct kiln_mem_problem {
    uint32_t struct_size;
    uint32_t block_count;
    kiln_mem_block *blocks;
    int64_t capacity;          /* 0 = unbounded; else a plan above it is an error */
    uint32_t alignment;        /* default alignment of blocks (512 unless an option says) */
    uint32_t step_count;       /* steps are 0 .. step_count-1 */
    uint32_t stream_count;     /* streams are 0 .. stream_count-1 */
    const char *memory_type;   /* "HBM", "HOST", "P2P", ... (for messages) */
    kiln_mem_latest_before_fn latest_before; /* optional, see above */
    void *latest_before_ctx;
    double time_budget_ms;     /* a search planner's budget; 0 = its default */
} kiln_mem_problem;

typedef struct kiln_mem_planner_desc kiln_mem_planner_desc;
struct kiln_mem_planner_desc {
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Assign every block's offset; *peak receives the arena size used. */
    kiln_status (*plan)(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err);
    void *reserved[4];
};

/**
 * LOAD of @p p: the largest sum of live block sizes (each rounded up to its
 * alignment) at any step.  No plan can use less.  O(n log n).
 */
KILN_API int64_t kiln_mem_problem_load(const kiln_mem_problem *p);
/**
 * Check a plan: every offset non-negative and aligned, FIXED blocks where they
 * were, no two blocks with intersecting lifetimes overlapping in memory,
 * @p peak >= every block's end and within the capacity.  KILN_OK, or
 * KILN_ERR_INVALID with @p err naming the rule and the block ids.
 * O(n log n).
 */
KILN_API kiln_status kiln_mem_plan_check(const kiln_mem_problem *p, int64_t peak,
                                         kiln_error *err);
/**
 * Run memory planner @p planner (a loaded component; NULL = the pipeline's
 * `memory_planner`, else "kiln") of @p g's context on @p p with options
 * @p opts (may be NULL), then kiln_mem_plan_check.  *peak receives the arena
 * size.  Errors: KILN_ERR_NOT_FOUND when no loaded plugin provides the
 * planner; the planner's error or the check's, with a frame naming the planner.
 */
KILN_API kiln_status kiln_mem_plan_run(kiln_graph *g, const char *planner,
                                       const kiln_options *opts, kiln_mem_problem *p,
                                       int64_t *peak, kiln_error *err);

/* ---- runtime allocators (docs/allocators.md) ------------------------------ */
/*
 * A stable kind (the multistream runtime serves the memory its plan does not
 * cover from them): the layouts below are frozen by the ABI test and only
 * ever grow at the end.  Programs and plugins drive an allocator through
 * kiln_alloc_api.h (kiln_alloc_stack_*), which calls these hooks.
 *
 * An allocator instance is a stack for one run: stream_count streams, the
 * model's events (GE CreateGertEvents: one per compile-time (src, dst) pair),
 * memory that is host memory (AccessMemCrossStream shares) or device-like
 * (it wanders: the destination stream is marked in the block's MIF).
 */

typedef struct kiln_allocator_desc kiln_allocator_desc;
typedef struct kiln_alloc_config kiln_alloc_config;
typedef struct kiln_alloc_stats kiln_alloc_stats;
typedef struct kiln_alloc_stack kiln_alloc_stack; /* kiln_alloc_api.h */

/* kiln_alloc_config.flags */
#define KILN_ALLOC_HOST_MEMORY 0x1u /* host memory: cross-stream access shares the block */

/** What an allocator stack is created for. APPEND ONLY. */
struct kiln_alloc_config {
    uint32_t struct_size;
    uint32_t stream_count;   /* 1..64 */
    uint32_t event_count;    /* events of the run, ids 0..event_count-1 */
    const uint32_t *events;  /* event_count (src stream, dst stream) pairs */
    uint32_t flags;          /* KILN_ALLOC_* */
};

/** Figures of a stack (bytes and counts). APPEND ONLY. */
struct kiln_alloc_stats {
    uint32_t struct_size;
    uint64_t reserved;       /* held from the system now */
    uint64_t peak_reserved;
    uint64_t allocated;      /* live requests now (their requested sizes) */
    uint64_t peak_allocated;
    uint64_t cached;         /* L1's free cached bytes */
    uint64_t allocs, frees;
    uint64_t system_allocs, system_frees; /* L1 <-> the system */
    uint64_t cache_hits;     /* L1 requests served from its cache */
    uint64_t borrow_hits;    /* L2 requests served by the borrow allocator (L3) */
    uint64_t birth_recycles, borrow_recycles, local_recycles;
    /* learned plans replayed on later runs (docs/allocators.md#replay) */
    uint64_t steady_peak_reserved;  /* peak reserved since the last plan was adopted
                                       (since creation before any) */
    uint64_t steady_peak_allocated; /* peak allocated since then */
    uint64_t plans;                 /* plans adopted */
    uint64_t plan_hits;             /* requests served from a plan's arena */
    uint64_t plan_fallbacks;        /* requests a plan had no place for this time (another
                                       size, one more, a predecessor still held): the
                                       normal path served them */
    uint64_t plan_arena;            /* bytes of the adopted plans' arenas (in reserved) */
};

struct kiln_allocator_desc {
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    /** Optional: a stack for @p cfg (never NULL) with options @p opts. */
    kiln_status (*create)(const kiln_options *opts, const kiln_alloc_config *cfg,
                          kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** @p size bytes for stream @p stream, or NULL. */
    void *(*alloc)(void *inst, size_t size, uint32_t stream);
    /** Free @p ptr on stream @p stream (the stream that used it last). */
    void (*free)(void *inst, void *ptr, uint32_t stream);
    /** Optional: @p ptr, live on @p src, is used by @p dst too (AccessMemCrossStream). */
    kiln_status (*access)(void *inst, void *ptr, uint32_t src, uint32_t dst, kiln_error *err);
    /** Optional: stream @p stream records events @p ids (SendEvents). */
    kiln_status (*send_events)(void *inst, uint32_t stream, const uint32_t *ids, uint32_t n,
                               kiln_error *err);
    /** Optional: stream @p stream waited for events @p ids (WaitEvents). */
    kiln_status (*wait_events)(void *inst, uint32_t stream, const uint32_t *ids, uint32_t n,
                               kiln_error *err);
    /** Optional: every stream finished (LastWaitEvents, the final resource clean). */
    void (*last_wait)(void *inst);
    /** Optional: the stack's figures. */
    void (*stats)(void *inst, kiln_alloc_stats *out);
    void *reserved[4];
};

/* ---- frontends (model importers / exporters) ---------------------------- */

/* kiln_frontend_desc.flags */
#define KILN_FRONTEND_IO_NAMES 0x1u /* before export_file, the host pins the model's output
                                       names (as described at import) on the NetOutput's
                                       input descriptors (`_onnx_name`) where passes
                                       changed the name the graph gives */

typedef struct kiln_frontend_desc {
    uint32_t struct_size;
    const char *name;       /* "onnx" */
    const char *summary;
    uint32_t flags;
    const char *extensions; /* comma-separated, with dot: ".onnx" */
    /** Optional: fill the empty root graph @p g from @p path. */
    kiln_status (*import_file)(kiln_graph *g, const char *path, kiln_error *err);
    /** Optional: write @p g to @p path (the host renames it into place). */
    kiln_status (*export_file)(kiln_graph *g, const char *path, kiln_error *err);
    void *reserved[4];
} kiln_frontend_desc;

/* ---- tuners (AOE-style build-step hooks) -------------------------------- */

/* Build-step names (GE tuning_utils.h). */
#define KILN_STEP_BEFORE_UB_MATCH "before_ub_match"
#define KILN_STEP_AFTER_UB_MATCH "after_ub_match"
#define KILN_STEP_AFTER_BUILD "after_build"

typedef struct kiln_tuner_desc {
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Called at each build step reached; may inspect and edit the graph. */
    kiln_status (*on_build_step)(void *inst, kiln_pass_ctx *ctx, const char *step,
                                 kiln_graph *root);
    void *reserved[4];
} kiln_tuner_desc;

/* ---- instruments (pass instrumentation callbacks) ----------------------- */

typedef struct kiln_instrument_desc {
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint32_t flags;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    void (*before_stage)(void *inst, const char *stage, const kiln_graph *g);
    void (*after_stage)(void *inst, const char *stage, const kiln_graph *g);
    void (*before_pass)(void *inst, const char *stage, const char *pass, const kiln_graph *g);
    void (*after_pass)(void *inst, const char *stage, const char *pass, const kiln_graph *g,
                       kiln_pass_result result);
    void (*after_pass_failed)(void *inst, const char *stage, const char *pass,
                              const kiln_graph *g);
    void *reserved[4];
} kiln_instrument_desc;

/* ---- checker lookups for passes (GE Checker::CheckConflict driver) ------- */
/*
 * A pass that finds memory-layout conflicts (HandleMemoryLayoutConflict) asks
 * the kernel which class an attribute pair has and runs the conditional
 * checker registered for it.  The tables belong to the context of @p g.
 */

/** GE enum name of an anchor attribute ("CONTINUOUS_INPUT"); "RESERVED" when out of range. */
KILN_API const char *kiln_anchor_attr_name(kiln_anchor_attr a);
/**
 * Unconditional class of the attribute pair (a, b) in the context of @p g
 * (symmetric).  KILN_CONFLICT_NEVER for an attribute out of range or a NULL graph.
 */
KILN_API kiln_conflict_class kiln_checker_classify(const kiln_graph *g, kiln_anchor_attr a,
                                                   kiln_anchor_attr b);
/**
 * Name of the conditional checker registered for (a, b) (symmetric), or NULL
 * when the pair has none (GE: no conflict).  @p flags (optional) receives the
 * checker's flags (KILN_CHECKER_CALL_AS_SYMBOL).
 */
KILN_API const char *kiln_checker_find(const kiln_graph *g, kiln_anchor_attr a,
                                       kiln_anchor_attr b, uint32_t *flags);
/** An empty checker result for kiln_checker_run; NULL on OOM.  Destroy when done. */
KILN_API kiln_checker_result *kiln_checker_result_create(void);
KILN_API void kiln_checker_result_destroy(kiln_checker_result *r);
/**
 * Run the checker registered for (q->type_a, q->type_b) on @p q: @p r is
 * cleared, then filled with the anchors the checker isolates and its reason.
 * Errors: KILN_ERR_NOT_FOUND when the pair has no checker (no conflict);
 * KILN_ERR_INVALID for a NULL argument, a query whose struct_size is too
 * small or an unconditional pair; otherwise the checker's own status, with
 * @p err naming the checker.
 */
KILN_API kiln_status kiln_checker_run(kiln_graph *g, const kiln_checker_query *q,
                                      kiln_checker_result *r, kiln_error *err);
/** Number of anchors the last run asked to isolate. */
KILN_API uint32_t kiln_checker_result_count(const kiln_checker_result *r);
/** Anchor @p i of the result (borrowed until the next run), NULL when out of range. */
KILN_API const kiln_mem_anchor *kiln_checker_result_anchor(const kiln_checker_result *r,
                                                           uint32_t i);
/** The deciding rule the checker recorded ("" when none). */
KILN_API const char *kiln_checker_result_reason(const kiln_checker_result *r);

#ifdef __cplusplus
}
#endif

#endif /* KILN_COMPONENT_H */
