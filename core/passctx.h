/*
 * passctx.h - the pass context (struct kiln_pass_ctx): what a running pass
 * sees through the kiln_pass_* / kiln_diag functions of kiln_pass.h.
 *
 * Owned by whoever drives passes (the pass manager, or a test calling
 * kiln__gepass_run directly); it lives for a whole pipeline run and holds:
 *   - the context, the current stage and pass (for messages and crash
 *     attribution), the run's caller-owned kiln_error and the log FILE;
 *   - the GEPass request lists of the current node visit (re-pass,
 *     immediate, global immediate, deleted, suspend, resume).  GE calls
 *     Init() on every pass before each Run(node); here the lists are cleared
 *     by the driver before the passes of one node visit run and harvested
 *     after the last one, which is equivalent because GEPass harvests every
 *     pass's lists in pass order after all passes ran (see gepass.c);
 *   - per pass-instance statistics (kiln_pass_stat_add) and the explanation
 *     log (kiln_pass_explain), both read by the report writer.
 * Only core/ includes this header.
 */
#ifndef KILN_CORE_PASSCTX_H
#define KILN_CORE_PASSCTX_H

#include "plugin.h"

/** A node of some graph of the walk. */
typedef struct kiln_noderef {
    kiln_graph *g;
    kiln_node_id n;
} kiln_noderef;

typedef struct kiln_reqlist {
    kiln_noderef *v;
    uint32_t count, cap;
} kiln_reqlist;

/* The request lists, one per kiln_pass_* request function. */
enum {
    KILN_REQ_REPASS = 0,    /* kiln_pass_repass: vector, duplicates allowed */
    KILN_REQ_IMMEDIATE = 1, /* kiln_pass_repass_immediate */
    KILN_REQ_GLOBAL = 2,    /* kiln_pass_repass_global_immediate */
    KILN_REQ_DELETED = 3,   /* kiln_pass_node_deleted */
    KILN_REQ_SUSPEND = 4,   /* kiln_pass_suspend */
    KILN_REQ_RESUME = 5,    /* kiln_pass_resume */
    KILN_REQ_COUNT = 6
};

/** One kiln_pass_explain record (all strings owned by the pass ctx). */
typedef struct kiln_explanation {
    char *stage; /* "" when no stage */
    char *pass;
    char *graph;
    char *node; /* "" when the node id was 0 / unknown */
    char *text;
} kiln_explanation;

/** One named counter of one pass instance (kiln_pass_stat_add). */
typedef struct kiln_pass_stat {
    char *stage;
    char *pass;
    char *counter;
    int64_t value;
} kiln_pass_stat;

struct kiln_pass_ctx {
    kiln_ctx *ctx;
    const char *stage;          /* current stage name (borrowed), NULL = none */
    const kiln_component *comp; /* pass whose code runs now, NULL = driver */
    kiln_error *err;            /* the run's error (caller-owned) */
    FILE *log;                  /* diagnostics; NULL = stderr, or log_open's */
    /* Opens the log on first use (kiln__passctx_log) when log is NULL: a task
     * of a partitioned graph's stage keeps no stream until it writes one. */
    FILE *(*log_open)(void *user);
    void *log_user;
    kiln_reqlist req[KILN_REQ_COUNT];
    bool after_subgraph;  /* kOptimizeAfterSubGraph: 2nd visit of a subgraph owner */
    bool in_finish_graph; /* inside on_finish_graph: isolate_and_delete adds no in/out re-pass */
    /* The graph GEPass is walking while a run_node or on_suspend_nodes_leaked
     * call runs (NULL otherwise): re-pass, immediate re-pass, suspend and
     * resume requests naming a node of another graph are refused there. */
    kiln_graph *walking;
    kiln_status req_status; /* a refused suspend: the driver fails with it */
    bool oom;             /* a request could not be recorded; the driver fails with NOMEM */
    bool disable_warned;  /* ge.disableOptimizations warnings already printed */
    kiln_pass_stat *stats;
    uint32_t stat_count, stat_cap;
    kiln_explanation *expl;
    uint32_t expl_count, expl_cap;
};

/** Initialise @p pc (all lists empty).  @p err and @p log are borrowed. */
void kiln__passctx_init(kiln_pass_ctx *pc, kiln_ctx *ctx, FILE *log, kiln_error *err);
/** Free everything @p pc owns (not @p pc itself). */
void kiln__passctx_fini(kiln_pass_ctx *pc);
/** Empty every request list (GE Init()). */
void kiln__passctx_clear_requests(kiln_pass_ctx *pc);
/** Log stream of the context (stderr when none was given). */
FILE *kiln__passctx_log(const kiln_pass_ctx *pc);
/** Name of the current pass, "kiln" when the driver itself speaks. */
const char *kiln__passctx_pass_name(const kiln_pass_ctx *pc);

/**
 * Add the stats of @p src to @p dst (counters matched by stage, pass and
 * name; new ones appended in @p src's order) and append its explanations.
 * The pass manager merges the pass context of each parallel task this way,
 * in task-index order.  false on OOM (what was merged stays).
 */
bool kiln__passctx_merge(kiln_pass_ctx *dst, const kiln_pass_ctx *src);
/** Explanation records in recording order; *count receives their number. */
const kiln_explanation *kiln__passctx_explanations(const kiln_pass_ctx *pc, uint32_t *count);
/** Statistics records in first-use order; *count receives their number. */
const kiln_pass_stat *kiln__passctx_stats(const kiln_pass_ctx *pc, uint32_t *count);
/** Value of one counter (0 when never added).  @p stage may be NULL for "any stage". */
int64_t kiln__passctx_stat(const kiln_pass_ctx *pc, const char *stage, const char *pass,
                           const char *counter);

/**
 * GE PassUtils::IsOptimizationDisabled over session option
 * ge.disableOptimizations: true when the part of @p pass_name after its last
 * ':' is listed.  Only RemoveSameConstPass, ConstantFoldingPass and
 * TransOpWithoutReshapeFusionPass may be disabled this way; other listed
 * names get a warning on the context's log (once per pass context) and are
 * ignored.  Tokens are trimmed one by one (GE trims the whole option string
 * instead, so " B" in "A, B" never matches there; kiln does not reproduce
 * that bug).  Used by GEPass and by the pass manager for graph passes.
 */
bool kiln__pass_disabled(kiln_pass_ctx *pc, const char *pass_name);

/**
 * Stable sort of @p n node refs by node name, then graph name (GE's
 * NodeCompareKey, the order of its immediate/resume sets); @p tmp is
 * scratch space of @p n entries.
 */
void kiln__noderef_sort(kiln_noderef *v, kiln_noderef *tmp, uint32_t n);

#endif /* KILN_CORE_PASSCTX_H */
