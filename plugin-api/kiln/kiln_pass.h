/*
 * kiln_pass.h - passes: graph passes, node passes (GEPass), fusion passes,
 * typed per-pass options and the pass context.
 *
 * Graph pass:  run_graph(inst, ctx, graph) -> CHANGED / NOT_CHANGED / FAILED.
 *              The pass manager runs it on the root, then on every subgraph
 *              (GE PassManager semantics).
 * Node pass:   run_node(inst, ctx, graph, node) -> status.  Driven by GEPass:
 *              every node is visited in dependency order and a pass may ask for
 *              re-passes, report deleted nodes, suspend and resume nodes through
 *              the kiln_pass_* request functions below, which record requests
 *              for the current invocation only (GE's Init() before every Run).
 * Fusion pass: pattern / requirements / replacement hooks (EXPERIMENTAL: see
 *              below; no fusion executor exists yet).
 *
 * All descriptors are struct_size-prefixed and APPEND ONLY: new fields go at
 * the end, and the host reads only the bytes a plugin declares.
 *
 * Thread rules (docs/threads.md): in the optimize_subgraph stage the passes
 * run in parallel tasks, one per partitioned subgraph.  A pass instance is
 * never called from two threads at once: each task creates the instances it
 * runs (desc.create on first use in the task; desc.destroy when the stage's
 * tasks are done, maybe on another thread), so an instance sees the graphs of
 * one task only and must not count on state carried between subgraphs.  The
 * kiln_pass_ctx a call receives belongs to its task (diagnostics, stats,
 * explanations are buffered per task and merged in subgraph order); do not
 * keep it past the call.  A pass must not keep unsynchronised static state,
 * set session options, or print to stdout/stderr itself (use kiln_diag).
 */
#ifndef KILN_PASS_H
#define KILN_PASS_H

#include "kiln_analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of struct T up to and including member m. */
#define KILN_SIZE_THROUGH(T, m) (offsetof(T, m) + sizeof(((T *)0)->m))

typedef struct kiln_pass_ctx kiln_pass_ctx;
typedef struct kiln_options kiln_options;

typedef enum kiln_pass_result {
    KILN_PASS_NOT_CHANGED = 0,
    KILN_PASS_CHANGED = 1,
    KILN_PASS_FAILED = 2
} kiln_pass_result;

typedef enum kiln_severity {
    KILN_SEV_DEBUG = 0,
    KILN_SEV_INFO = 1,
    KILN_SEV_WARNING = 2,
    KILN_SEV_ERROR = 3
} kiln_severity;

/* ---- typed options ------------------------------------------------------ */

typedef enum kiln_option_type {
    KILN_OPT_BOOL = 1,
    KILN_OPT_INT = 2,
    KILN_OPT_FLOAT = 3,
    KILN_OPT_STRING = 4
} kiln_option_type;

/** One declared option of a component.  APPEND ONLY. */
typedef struct kiln_option_def {
    uint32_t struct_size;
    kiln_option_type type;
    const char *name;
    const char *default_value; /* textual default ("4", "true", "x"); NULL = unset */
    const char *help;
    double min, max;           /* for INT/FLOAT when min < max; ignored otherwise */
} kiln_option_def;

KILN_API bool kiln_options_get_bool(const kiln_options *o, const char *key, bool *out);
KILN_API bool kiln_options_get_int(const kiln_options *o, const char *key, int64_t *out);
KILN_API bool kiln_options_get_float(const kiln_options *o, const char *key, double *out);
KILN_API bool kiln_options_get_string(const kiln_options *o, const char *key, const char **out);

/* ---- pass descriptors --------------------------------------------------- */

typedef enum kiln_pass_kind {
    KILN_PASS_KIND_GRAPH = 1,
    KILN_PASS_KIND_NODE = 2,
    KILN_PASS_KIND_FUSION = 3 /* experimental (see "fusion passes" below) */
} kiln_pass_kind;

/* Pass flags. */
#define KILN_PASS_REQUIRED 0x1u        /* cannot be disabled or bisected away */
#define KILN_PASS_AFTER_GRAPH 0x2u     /* node pass whose on_finish_graph runs (GE 1.3) */
#define KILN_PASS_PRESERVES_CFG 0x4u   /* graph pass edits attributes only (nodes and edges
                                          stay, so topo order and reachability survive);
                                          the pass manager fails a pass that breaks it */
#define KILN_PASS_NO_SUBGRAPHS 0x8u    /* graph pass: do not rerun on subgraphs */

typedef struct kiln_pass_desc {
    uint32_t struct_size;
    kiln_pass_kind kind;
    const char *name;    /* registered name, GE spelling: "PruneGraphPass" */
    const char *summary; /* one line */
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    /** Create one instance with its validated options; may be NULL (inst = NULL). */
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Graph passes. */
    kiln_pass_result (*run_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
    /** Node passes (GE BaseNodePass::Run). */
    kiln_status (*run_node)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
    /** Node passes: start of every graph walk and before an owner node's 2nd visit. */
    void (*on_start_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
    /** Node passes: queue drained while nodes are still suspended. */
    void (*on_suspend_nodes_leaked)(void *inst, kiln_pass_ctx *ctx);
    /** After-graph node passes (flag AFTER_GRAPH): called on the root when the queue drains. */
    kiln_status (*on_finish_graph)(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);
    void *reserved[4];
} kiln_pass_desc;

/* ---- pass context: diagnostics, options, GEPass requests ----------------- */

KILN_API void kiln_diag(kiln_pass_ctx *ctx, kiln_severity sev, const char *fmt, ...)
    KILN_PRINTF(3, 4);
/** The caller-owned error of this pass run (record failures with kiln_errorf). */
KILN_API kiln_error *kiln_pass_error(kiln_pass_ctx *ctx);
/** Session option by GE name ("ge.exec.atomicCleanPolicy"); NULL if unset. */
KILN_API const char *kiln_pass_session_option(const kiln_pass_ctx *ctx, const char *key);
/** True while an owner node is passed the 2nd time, after its subgraphs (kOptimizeAfterSubGraph). */
KILN_API bool kiln_pass_after_subgraph(const kiln_pass_ctx *ctx);
/** A task of kiln_pass_parallel_for: work item @p index, its own @p err. */
typedef kiln_status (*kiln_parallel_fn)(void *arg, uint32_t index, kiln_error *err);
/**
 * Run fn(arg, i, err_i) for every i in [0, n) on the kernel's thread pool (at
 * most kiln.threads threads; docs/threads.md) and return when all have
 * returned.  Deterministic: KILN_OK, or the status of the failing task with
 * the lowest index, its error copied into kiln_pass_error(ctx).  Tasks must
 * be independent: they may read the graph and call the kernel's read-only
 * queries and kiln_engine_generate_task / kiln_engine_running_param, but not
 * edit a graph or call the pass-context functions (counters, diagnostics);
 * collect results per index and apply them after the call.  Called from
 * inside a task, the items run in order on that thread.
 */
KILN_API kiln_status kiln_pass_parallel_for(kiln_pass_ctx *ctx, uint32_t n, kiln_parallel_fn fn,
                                            void *arg);
/** Add to a named counter of this pass instance (printed by --time-passes / reports). */
KILN_API void kiln_pass_stat_add(kiln_pass_ctx *ctx, const char *counter, int64_t delta);
/** Record an explanation for an inserted/removed node (reports, -v). */
KILN_API void kiln_pass_explain(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                const char *fmt, ...) KILN_PRINTF(4, 5);

/*
 * GEPass requests (node passes; docs/node_passes.md has the rules).  They act
 * on the walk of the graph being passed (the @p g of run_node), so from
 * run_node and on_suspend_nodes_leaked:
 *   - re-pass, immediate re-pass, suspend and resume name a node of that
 *     graph.  A node of another graph (a parent, a sibling subgraph, an
 *     unrelated graph) is refused: re-pass, immediate re-pass and resume are
 *     ignored with a warning, a suspend fails the walk with KILN_ERR_PARAM;
 *   - global immediate re-pass names a node of the root graph (others are
 *     ignored with a warning);
 *   - node_deleted may name a node of any graph.
 * From on_finish_graph, re-pass requests may name a node of any graph: its
 * ancestor on the root graph is passed again.
 */
KILN_API void kiln_pass_repass(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
KILN_API void kiln_pass_repass_immediate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
KILN_API void kiln_pass_repass_global_immediate(kiln_pass_ctx *ctx, kiln_graph *g,
                                                kiln_node_id n);
KILN_API void kiln_pass_node_deleted(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
KILN_API void kiln_pass_suspend(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
KILN_API void kiln_pass_resume(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n);
/** Re-pass all in-nodes, @p n and all out-nodes (immediately when @p immediate). */
KILN_API void kiln_pass_repass_with_inout(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                          bool immediate);
/**
 * GE IsolateAndDeleteNode: re-pass in/out/self, isolate with @p io_map, remove
 * the node, report it deleted.  ERR_PARAM when the map is longer than the
 * output count or isolation fails, and (nothing changed, the reason recorded
 * in kiln_pass_error) when @p n owns a graph the walk is inside of, at any
 * depth: the While node cannot be deleted from a visit of its body.  For a
 * node of another graph than the one being walked, in/out/self are not
 * re-passed (a warning says so).
 */
KILN_API kiln_status kiln_pass_isolate_and_delete(kiln_pass_ctx *ctx, kiln_graph *g,
                                                  kiln_node_id n, const int32_t *io_map,
                                                  uint32_t nmap, bool immediate);

/* ---- fusion passes (EXPERIMENTAL) ---------------------------------------- */
/*
 * EXPERIMENTAL until its first user lands: kiln has no fusion executor (pattern matcher) yet.  The
 * declarations below are visible only when KILN_EXPERIMENTAL is defined before
 * including kiln.h; their layout is not frozen by the ABI test and may change
 * in a minor release.  The host registers such components (so they can be
 * developed and listed) but refuses to use them: "experimental: no executor
 * yet".  The host-table slots of their functions are ABI like any other.
 */

typedef struct kiln_pattern kiln_pattern;
typedef struct kiln_match kiln_match;
typedef struct kiln_fusion_pass_desc kiln_fusion_pass_desc;

#ifdef KILN_EXPERIMENTAL
/**
 * A fusion pass declares patterns (a small graph of op types), is shown each
 * match, may veto it, and rewrites it.  The host owns matching and applies the
 * replacement atomically.
 */
struct kiln_fusion_pass_desc {
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint32_t flags;
    uint32_t option_count;
    const kiln_option_def *options;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    /** Build the patterns into @p p (see kiln_pattern_* in the host). */
    kiln_status (*patterns)(void *inst, kiln_pattern *p, kiln_error *err);
    /** Veto a match (GE MeetRequirements); NULL = accept all. */
    bool (*meet_requirements)(void *inst, const kiln_graph *g, const kiln_match *m);
    /** Rewrite the match in place (GE Replacement). */
    kiln_status (*replace)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, const kiln_match *m);
    void *reserved[4];
};

/** Pattern building: add a pattern node of @p op; returns its index. */
KILN_API int32_t kiln_pattern_node(kiln_pattern *p, const char *name, const char *op);
/** Pattern edge: output @p so of pattern node @p src to input @p di of @p dst. */
KILN_API kiln_status kiln_pattern_edge(kiln_pattern *p, int32_t src, uint32_t so, int32_t dst,
                                       uint32_t di);
/** Start a new alternative pattern (GE: Patterns() returns a vector). */
KILN_API kiln_status kiln_pattern_next(kiln_pattern *p);
/** Graph node matched by pattern node @p index. */
KILN_API kiln_node_id kiln_match_node(const kiln_match *m, int32_t index);
/** Which alternative pattern matched. */
KILN_API uint32_t kiln_match_pattern_index(const kiln_match *m);
#endif /* KILN_EXPERIMENTAL */

#ifdef __cplusplus
}
#endif

#endif /* KILN_PASS_H */
