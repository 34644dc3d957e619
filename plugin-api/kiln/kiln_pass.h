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
 * Fusion pass: pattern / decompose / base kinds (GE's fusion route one): the
 *              kernel matches patterns and applies replacements (below).
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
    KILN_PASS_KIND_FUSION = 3 /* see "fusion passes" below */
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

/* ---- fusion passes (docs/fusion.md) --------------------------------------- */
/*
 * GE's fusion route one (seed ge-compiler-core-flow.txt 3.2-3.3).  A fusion
 * pass is one of three kinds:
 *   PATTERN    patterns() declares small graphs of op types; the kernel's
 *              matcher finds them (GE pattern_matcher: from the pattern's
 *              outputs back along data edges, with backtracking, then the
 *              boundary check), meet_requirements() may veto a match, and
 *              replacement() builds the graph that takes its place;
 *   DECOMPOSE  every live node whose op is in decompose_ops is a one-node
 *              match (GE DecomposePass): meet_requirements(), replacement();
 *   BASE       run() edits the graph itself (GE FusionBasePass), using
 *              kiln_fusion_can_fuse / kiln_fusion_replace / kiln_fusion_report.
 * For PATTERN and DECOMPOSE the executor chains, per match, GE's
 * SubgraphRewriter::Replace: CanFuse (cycle, stream label, engine) ->
 * rewrite -> ReportFuse -> delete the matched nodes; it counts "matched" and
 * "effected" per pass.
 *
 * Where a fusion pass runs: listed by name in a manifest stage, it runs there
 * (root graph, then every subgraph); otherwise the FusionPassExecutor passes
 * of plugins/fusion (RunBuiltinFusionPasses, RunCustomPassBeforeInferShape,
 * ...) run every loaded fusion pass of their stage, in alphabetical order of
 * name (GE's registry is a std::map), honouring the switches
 * ge.optimizationSwitch ("Name:off;Other:on") and ge.fusionSwitchFile.
 */

typedef struct kiln_pattern kiln_pattern;
typedef struct kiln_match kiln_match;
typedef struct kiln_fusion_pass_desc kiln_fusion_pass_desc;

typedef enum kiln_fusion_kind {
    KILN_FUSION_PATTERN = 1,
    KILN_FUSION_DECOMPOSE = 2,
    KILN_FUSION_BASE = 3
} kiln_fusion_kind;

/** GE CustomPassStage values; BUILTIN = an engine's fusion, run at OptimizeOriginalGraph. */
typedef enum kiln_fusion_stage {
    KILN_FUSION_STAGE_BEFORE_INFER_SHAPE = 0,          /* GE kBeforeInferShape (default) */
    KILN_FUSION_STAGE_AFTER_INFER_SHAPE = 1,           /* GE kAfterInferShape */
    KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION = 3,        /* GE kAfterBuiltinFusionPass */
    KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE = 4, /* GE kAfterOriginGraphOptimize */
    KILN_FUSION_STAGE_BUILTIN = 16                     /* kiln: engines' built-in fusions */
} kiln_fusion_stage;

/** kiln_pattern_set_flags: matcher options of the pattern being built. */
#define KILN_PATTERN_COMMUTATIVE 0x1u /* two-input commutative ops (Add, Mul, Max, Min,
                                         And, Or, Xor, Equal, Sum) also match swapped */
#define KILN_PATTERN_CONST_VALUE 0x2u /* GE EnableConstValueMatch: a pattern Const with a
                                         value matches only a byte-equal constant */

struct kiln_fusion_pass_desc {
    uint32_t struct_size;
    const char *name;    /* GE spelling, e.g. "ConvBatchNormFusionPass" */
    const char *summary; /* one line */
    uint32_t flags;      /* KILN_PASS_REQUIRED only */
    uint32_t option_count;
    const kiln_option_def *options;
    kiln_status (*create)(const kiln_options *opts, kiln_error *err, void **inst);
    void (*destroy)(void *inst);
    kiln_fusion_kind kind;
    int32_t stage; /* kiln_fusion_stage; AFTER_ASSIGN_LOGIC_STREAM (2) and others are refused */
    /** PATTERN: build the patterns into @p p (kiln_pattern_*; kiln_pattern_next between
     * alternatives, GE's vector of patterns). */
    kiln_status (*patterns)(void *inst, kiln_pattern *p, kiln_error *err);
    /** DECOMPOSE: the op types it decomposes, NULL-terminated. */
    const char *const *decompose_ops;
    /** PATTERN, DECOMPOSE: veto a match (GE MeetRequirements); NULL = accept all. */
    bool (*meet_requirements)(void *inst, const kiln_graph *g, const kiln_match *m);
    /**
     * PATTERN, DECOMPOSE: build the replacement (GE Replacement) into @p repl, a
     * fresh graph that already holds one Data node per boundary input (attribute
     * "index" = i, output descriptor copied from the boundary's producer; find
     * them with kiln_fusion_replacement_input).  Add the new nodes and exactly one
     * NetOutput whose input j is boundary output j.  KILN_OK replaces the match;
     * KILN_ERR_NOT_FOUND declines it (not counted as effected); any other status
     * fails the pass.  The executor rejects a replacement whose arity differs
     * from the boundary's (extra Data nodes, a NetOutput with another input
     * count, none or two NetOutputs), naming the pass.
     */
    kiln_status (*replacement)(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                               const kiln_match *m, kiln_graph *repl);
    /** BASE: the pass itself (GE FusionBasePass::Run). */
    kiln_pass_result (*run)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
    void *reserved[4];
};

/* -- pattern building (inside patterns()) -- */

/**
 * Add a pattern node of type @p op (GE spelling); returns its index (global over
 * all alternatives) or -1.  "Data" is a boundary input that matches any
 * producer (one pattern Data must bind a single producer anchor); "Const"
 * matches a real constant (Const or Constant).
 */
KILN_API int32_t kiln_pattern_node(kiln_pattern *p, const char *name, const char *op);
/** Pattern edge: output @p so of pattern node @p src to input @p di of @p dst. */
KILN_API kiln_status kiln_pattern_edge(kiln_pattern *p, int32_t src, uint32_t so, int32_t dst,
                                       uint32_t di);
/** Declare output @p so of pattern node @p node as the next pattern output (GE:
 * the pattern's NetOutput inputs, in order).  Every alternative needs one. */
KILN_API kiln_status kiln_pattern_output(kiln_pattern *p, int32_t node, uint32_t so);
/** Matcher options (KILN_PATTERN_*) of the current alternative. */
KILN_API kiln_status kiln_pattern_set_flags(kiln_pattern *p, uint32_t flags);
/** The value a pattern Const must equal (with KILN_PATTERN_CONST_VALUE); copied. */
KILN_API kiln_status kiln_pattern_const_value(kiln_pattern *p, int32_t node,
                                              const kiln_tensor_value *value);
/** Start a new alternative pattern (GE: Patterns() returns a vector). */
KILN_API kiln_status kiln_pattern_next(kiln_pattern *p);

/* -- match results (meet_requirements, replacement) -- */

/** Graph node matched by pattern node @p index (0 for a Data pattern node, or
 * a node of another alternative). */
KILN_API kiln_node_id kiln_match_node(const kiln_match *m, int32_t index);
/** Which alternative pattern matched. */
KILN_API uint32_t kiln_match_pattern_index(const kiln_match *m);
/** Boundary inputs: one per pattern Data node of the alternative, in pattern-node
 * order (DECOMPOSE: the node's inputs in order); each the producer out-anchor. */
KILN_API uint32_t kiln_match_input_count(const kiln_match *m);
KILN_API kiln_anchor kiln_match_input(const kiln_match *m, uint32_t i);
/** Boundary outputs: the out-anchors the pattern outputs matched, in order
 * (DECOMPOSE: the node's outputs). */
KILN_API uint32_t kiln_match_output_count(const kiln_match *m);
KILN_API kiln_anchor kiln_match_output(const kiln_match *m, uint32_t j);
/** The matched (to be deleted) nodes, Data pattern nodes excluded. */
KILN_API uint32_t kiln_match_node_count(const kiln_match *m);
KILN_API kiln_node_id kiln_match_node_at(const kiln_match *m, uint32_t k);

/* -- rewriting: GE SubgraphRewriter and GraphFuseInspectorUtils -- */

/** A boundary for kiln_fusion_replace (what a match describes). */
typedef struct kiln_fusion_boundary {
    uint32_t struct_size;
    const kiln_node_id *nodes; /* replaced nodes; all in @p g */
    uint32_t node_count;
    const kiln_anchor *inputs; /* producer out-anchors: replacement Data i */
    uint32_t input_count;
    const kiln_anchor *outputs; /* out-anchors of replaced nodes: replacement NetOutput input j */
    uint32_t output_count;
} kiln_fusion_boundary;

/**
 * GE GraphFuseInspectorUtils::CanFuse: may @p nodes (of @p g) become one? False,
 * with a reason in @p reason (NUL-terminated, truncated to @p reason_size),
 * when the list is empty, a node is not live, the nodes carry different
 * `_user_stream_label`s or engines (`_kiln_engine`), or fusing them would create
 * a cycle (a path leaving the set and re-entering it, data or control edges).
 * The cycle check uses the graph's incremental cycle detector: near O(nodes
 * between the set's topological positions), not a DFS over the graph.
 */
KILN_API bool kiln_fusion_can_fuse(const kiln_graph *g, const kiln_node_id *nodes, uint32_t n,
                                   char *reason, size_t reason_size);
/**
 * GE ReportFuse: record that @p after (live nodes of @p g) replaced @p before
 * (names and types read now, so call it before deleting them): each after-node
 * gets `_datadump_origin_op_names` / `_datadump_origin_op_types` (the origins,
 * kept through repeated fusions) and `pass_name` (GE's record: the
 * before-nodes' pass_name lists, then the current pass's name); the pass's
 * "matched" and "effected" counters grow by one.  KILN_ERR_INVALID when @p before is empty, a node is dead or the call is
 * outside a pass.  Empty @p after = a pure deletion.
 */
KILN_API kiln_status kiln_fusion_report(kiln_pass_ctx *ctx, kiln_graph *g,
                                        const kiln_node_id *before, uint32_t nb,
                                        const kiln_node_id *after, uint32_t na);
/**
 * A fresh replacement graph for @p b: one Data node per boundary input (as
 * described for the replacement hook).  Free with kiln_fusion_replacement_free
 * unless passed to kiln_fusion_replace, which takes it.  NULL on OOM.
 */
KILN_API kiln_graph *kiln_fusion_replacement_new(const kiln_graph *g,
                                                 const kiln_fusion_boundary *b);
/** The Data node of replacement input @p i (0 if none). */
KILN_API kiln_node_id kiln_fusion_replacement_input(const kiln_graph *repl, uint32_t i);
KILN_API void kiln_fusion_replacement_free(kiln_graph *repl);
/**
 * Copy node @p n of @p src (op, attributes, output descriptors, input count; no
 * edges, no subgraphs) into @p dst as @p name (NULL: the same name).  Returns
 * the new node or 0 (name taken, OOM).
 */
KILN_API kiln_node_id kiln_graph_copy_node(kiln_graph *dst, const kiln_graph *src, kiln_node_id n,
                                           const char *name);
/**
 * GE SubgraphRewriter::Replace(boundary, replacement, ctx): CanFuse on the
 * boundary's nodes (KILN_ERR_CONFLICT with the reason when it refuses, the graph
 * unchanged), check the replacement's arity against the boundary
 * (KILN_ERR_INVALID), move the replacement's nodes into @p g (renamed on a name
 * clash), rewire inputs and outputs, copy control edges of the replaced nodes
 * to the new ones, ReportFuse, delete the replaced nodes.  Takes @p repl in
 * every case.  Atomic: on any error the graph is as before.
 */
KILN_API kiln_status kiln_fusion_replace(kiln_pass_ctx *ctx, kiln_graph *g,
                                         const kiln_fusion_boundary *b, kiln_graph *repl);
/** The boundary a match describes (valid while the match is). */
KILN_API const kiln_fusion_boundary *kiln_match_boundary(const kiln_match *m);
/**
 * Run every loaded fusion pass of @p stage over @p g (root, then subgraphs) in
 * alphabetical order of name, skipping those switched off (GE
 * FusionPassExecutor::RunPasses).  Used by plugins/fusion's executor passes.
 */
KILN_API kiln_pass_result kiln_fusion_run_stage(kiln_pass_ctx *ctx, kiln_graph *g, int32_t stage);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PASS_H */
