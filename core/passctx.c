/*
 * passctx.c - the pass context and every public kiln_pass_* / kiln_diag
 * function a pass calls while it runs.
 *
 * Request functions only record (graph, node) pairs in the per-visit lists
 * of struct kiln_pass_ctx; the GEPass driver (gepass.c) applies them after
 * the passes of one node visit ran, with GE's rules (which re-pass requests
 * are accepted, name order of immediate/resume sets, ...).  A request that
 * names no node (NULL graph, id 0 or out of range) is ignored, as GE ignores
 * null NodePtrs with a warning.  If a list cannot grow, pc->oom is set and
 * the driver fails the run with KILN_ERR_NOMEM after the current call.
 *
 * kiln_pass_isolate_and_delete follows GE BaseNodePass::IsolateAndDeleteNode:
 * (1) re-pass in-nodes, the node and out-nodes (immediately or not), (2)
 * isolate with io_map (kiln_graph_isolate_node), (3) remove the node without
 * relinking, (4) report it deleted.  Inside on_finish_graph step (1) is left
 * out: GE after-graph passes hand back only the nodes they list explicitly
 * (OnFinishGraph's repass_out), and the pass's own request lists are reset.
 *
 * Diagnostics go to the context's log as "kiln: <severity>: <pass>: <msg>";
 * debug lines only when ctx->verbosity >= 1, info lines unless quiet (< 0),
 * warnings unless errors only (-2, the CLI's -q).
 *
 * Also here, because GEPass and the pass manager share them: GE's node order
 * for ordered sets (name, then graph name) and the ge.disableOptimizations
 * filter (GE PassUtils::IsOptimizationDisabled).
 */
#include "passctx.h"
#include "parallel.h"
#include "graph_int.h"
#include <stdarg.h>

void kiln__passctx_init(kiln_pass_ctx *pc, kiln_ctx *ctx, FILE *log, kiln_error *err)
{
    memset(pc, 0, sizeof(*pc));
    pc->ctx = ctx;
    pc->log = log;
    pc->err = err;
}

void kiln__passctx_fini(kiln_pass_ctx *pc)
{
    if (!pc)
        return;
    for (int i = 0; i < KILN_REQ_COUNT; i++) {
        kiln__free(pc->req[i].v);
        pc->req[i].v = NULL;
        pc->req[i].count = pc->req[i].cap = 0;
    }
    for (uint32_t i = 0; i < pc->stat_count; i++) {
        kiln__free(pc->stats[i].stage);
        kiln__free(pc->stats[i].pass);
        kiln__free(pc->stats[i].counter);
    }
    kiln__free(pc->stats);
    pc->stats = NULL;
    pc->stat_count = pc->stat_cap = 0;
    for (uint32_t i = 0; i < pc->expl_count; i++) {
        kiln_explanation *e = &pc->expl[i];
        kiln__free(e->stage);
        kiln__free(e->pass);
        kiln__free(e->graph);
        kiln__free(e->node);
        kiln__free(e->text);
    }
    kiln__free(pc->expl);
    pc->expl = NULL;
    pc->expl_count = pc->expl_cap = 0;
}

void kiln__passctx_clear_requests(kiln_pass_ctx *pc)
{
    for (int i = 0; i < KILN_REQ_COUNT; i++)
        pc->req[i].count = 0;
    pc->req_status = KILN_OK;
}

FILE *kiln__passctx_log(const kiln_pass_ctx *pc)
{
    if (!pc)
        return stderr;
    if (!pc->log && pc->log_open)
        ((kiln_pass_ctx *)pc)->log = pc->log_open(pc->log_user); /* NULL (OOM): stderr */
    return pc->log ? pc->log : stderr;
}

const char *kiln__passctx_pass_name(const kiln_pass_ctx *pc)
{
    return (pc && pc->comp && pc->comp->name) ? pc->comp->name : "kiln";
}

/* ---- diagnostics, options, stats, explanations -------------------------- */

static const char *sev_name(kiln_severity sev)
{
    switch (sev) {
    case KILN_SEV_DEBUG:
        return "debug";
    case KILN_SEV_INFO:
        return "info";
    case KILN_SEV_WARNING:
        return "warning";
    case KILN_SEV_ERROR:
        return "error";
    }
    return "note";
}

void kiln_diag(kiln_pass_ctx *ctx, kiln_severity sev, const char *fmt, ...)
{
    int verbosity = (ctx && ctx->ctx) ? ctx->ctx->verbosity : 0;
    if (sev == KILN_SEV_DEBUG && verbosity < 1)
        return;
    if (sev == KILN_SEV_INFO && verbosity < 0)
        return;
    if (sev == KILN_SEV_WARNING && verbosity < -1)
        return; /* -q: errors only */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    if (fmt)
        vsnprintf(msg, sizeof(msg), fmt, ap);
    else
        msg[0] = 0;
    va_end(ap);
    FILE *out = kiln__passctx_log(ctx);
    fprintf(out, "kiln: %s: %s: %s\n", sev_name(sev), kiln__passctx_pass_name(ctx), msg);
    fflush(out);
}

kiln_error *kiln_pass_error(kiln_pass_ctx *ctx) { return ctx ? ctx->err : NULL; }

kiln_status kiln_pass_parallel_for(kiln_pass_ctx *ctx, uint32_t n, kiln_parallel_fn fn, void *arg)
{
    if (!ctx || !fn)
        return kiln_errorf(ctx ? ctx->err : NULL, KILN_ERR_INVALID,
                           "kiln_pass_parallel_for: NULL context or function");
    return kiln__parallel_run(ctx->ctx, n, 0, fn, arg, ctx->err);
}

const char *kiln_pass_session_option(const kiln_pass_ctx *ctx, const char *key)
{
    if (!ctx || !ctx->ctx || !key)
        return NULL;
    return kiln_ctx_option(ctx->ctx, key);
}

bool kiln_pass_after_subgraph(const kiln_pass_ctx *ctx) { return ctx && ctx->after_subgraph; }

static bool streq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static bool stat_add(kiln_pass_ctx *pc, const char *stage, const char *pass, const char *counter,
                     int64_t value);

void kiln_pass_stat_add(kiln_pass_ctx *ctx, const char *counter, int64_t delta)
{
    if (!ctx || !counter)
        return;
    if (!stat_add(ctx, ctx->stage ? ctx->stage : "", kiln__passctx_pass_name(ctx), counter, delta))
        ctx->oom = true;
}

void kiln_pass_explain(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const char *fmt, ...)
{
    if (!ctx || !fmt)
        return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (!KILN_GROW(ctx->expl, ctx->expl_cap, ctx->expl_count + 1)) {
        ctx->oom = true;
        return;
    }
    /* Dead nodes keep their name symbol, so a just-removed node is still named. */
    const char *node = (g && n && n < g->node_limit) ? kiln_sym_str(g, g->cold[n].name) : "";
    kiln_explanation *e = &ctx->expl[ctx->expl_count];
    e->stage = kiln__strdup(ctx->stage ? ctx->stage : "");
    e->pass = kiln__strdup(kiln__passctx_pass_name(ctx));
    e->graph = kiln__strdup(g ? kiln_graph_name(g) : "");
    e->node = kiln__strdup(node);
    e->text = kiln__strdup(text);
    if (!e->stage || !e->pass || !e->graph || !e->node || !e->text) {
        kiln__free(e->stage);
        kiln__free(e->pass);
        kiln__free(e->graph);
        kiln__free(e->node);
        kiln__free(e->text);
        ctx->oom = true;
        return;
    }
    ctx->expl_count++;
}

/* Add @p value to counter (stage, pass, counter) of @p pc; false on OOM. */
static bool stat_add(kiln_pass_ctx *pc, const char *stage, const char *pass, const char *counter,
                     int64_t value)
{
    for (uint32_t i = 0; i < pc->stat_count; i++) {
        kiln_pass_stat *s = &pc->stats[i];
        if (streq(s->counter, counter) && streq(s->pass, pass) && streq(s->stage, stage)) {
            s->value += value;
            return true;
        }
    }
    if (!KILN_GROW(pc->stats, pc->stat_cap, pc->stat_count + 1))
        return false;
    kiln_pass_stat *s = &pc->stats[pc->stat_count];
    s->stage = kiln__strdup(stage);
    s->pass = kiln__strdup(pass);
    s->counter = kiln__strdup(counter);
    s->value = value;
    if (!s->stage || !s->pass || !s->counter) {
        kiln__free(s->stage);
        kiln__free(s->pass);
        kiln__free(s->counter);
        return false;
    }
    pc->stat_count++;
    return true;
}

bool kiln__passctx_merge(kiln_pass_ctx *dst, const kiln_pass_ctx *src)
{
    for (uint32_t i = 0; i < src->stat_count; i++) {
        const kiln_pass_stat *s = &src->stats[i];
        if (!stat_add(dst, s->stage, s->pass, s->counter, s->value))
            return false;
    }
    for (uint32_t i = 0; i < src->expl_count; i++) {
        if (!KILN_GROW(dst->expl, dst->expl_cap, dst->expl_count + 1))
            return false;
        const kiln_explanation *s = &src->expl[i];
        kiln_explanation *e = &dst->expl[dst->expl_count];
        e->stage = kiln__strdup(s->stage);
        e->pass = kiln__strdup(s->pass);
        e->graph = kiln__strdup(s->graph);
        e->node = kiln__strdup(s->node);
        e->text = kiln__strdup(s->text);
        if (!e->stage || !e->pass || !e->graph || !e->node || !e->text) {
            kiln__free(e->stage);
            kiln__free(e->pass);
            kiln__free(e->graph);
            kiln__free(e->node);
            kiln__free(e->text);
            return false;
        }
        dst->expl_count++;
    }
    return true;
}

const kiln_explanation *kiln__passctx_explanations(const kiln_pass_ctx *pc, uint32_t *count)
{
    if (count)
        *count = pc ? pc->expl_count : 0;
    return pc ? pc->expl : NULL;
}

const kiln_pass_stat *kiln__passctx_stats(const kiln_pass_ctx *pc, uint32_t *count)
{
    if (count)
        *count = pc ? pc->stat_count : 0;
    return pc ? pc->stats : NULL;
}

int64_t kiln__passctx_stat(const kiln_pass_ctx *pc, const char *stage, const char *pass,
                           const char *counter)
{
    int64_t sum = 0;
    for (uint32_t i = 0; pc && i < pc->stat_count; i++) {
        const kiln_pass_stat *s = &pc->stats[i];
        if (streq(s->counter, counter) && streq(s->pass, pass) &&
            (!stage || streq(s->stage, stage)))
            sum += s->value;
    }
    return sum;
}

/* ---- node ordering and the disable filter ------------------------------ */

/* GE NodeCompareKey order: node name, then graph name. */
static int noderef_cmp(const kiln_noderef *a, const kiln_noderef *b)
{
    int c = strcmp(kiln_sym_str(a->g, a->g->cold[a->n].name),
                   kiln_sym_str(b->g, b->g->cold[b->n].name));
    if (c)
        return c;
    if (a->g == b->g)
        return (a->n > b->n) - (a->n < b->n);
    return strcmp(kiln_graph_name(a->g), kiln_graph_name(b->g));
}

/* Stable bottom-up merge sort of v[0..n) using tmp (n entries). */
void kiln__noderef_sort(kiln_noderef *v, kiln_noderef *tmp, uint32_t n)
{
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = noderef_cmp(&v[j], &v[i]) < 0 ? v[j++] : v[i++];
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof(*v));
    }
}

static const char *const disable_whitelist[] = {"RemoveSameConstPass", "ConstantFoldingPass",
                                                "TransOpWithoutReshapeFusionPass"};

bool kiln__pass_disabled(kiln_pass_ctx *pc, const char *pass_name)
{
    const char *opt = (pc && pc->ctx) ? kiln_ctx_option(pc->ctx, "ge.disableOptimizations") : NULL;
    FILE *log =
        pc->disable_warned || (pc->ctx && pc->ctx->verbosity < -1) ? NULL : kiln__passctx_log(pc);
    if (!opt || !*opt || !pass_name)
        return false;
    const char *colon = strrchr(pass_name, ':');
    const char *suffix = colon ? colon + 1 : pass_name;
    bool disabled = false;
    for (const char *p = opt; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (len && (*s == ' ' || *s == '\t'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len) {
            bool listed = false;
            for (size_t i = 0; i < KILN_ARRAY_LEN(disable_whitelist); i++)
                if (strlen(disable_whitelist[i]) == len && !strncmp(disable_whitelist[i], s, len))
                    listed = true;
            if (!listed) {
                if (log)
                    fprintf(log,
                            "kiln: warning: optimization %.*s is not allowed to be disabled "
                            "(ge.disableOptimizations)\n",
                            (int)len, s);
            } else if (strlen(suffix) == len && !strncmp(suffix, s, len)) {
                disabled = true;
            }
        }
        p = e ? e + 1 : p + strlen(p);
    }
    pc->disable_warned = true;
    return disabled;
}

/* ---- GEPass requests ---------------------------------------------------- */

static const char *const req_names[KILN_REQ_COUNT] = {
    "re-pass", "immediate re-pass", "global immediate re-pass", "deleted", "suspend", "resume"};

/*
 * Requests that act on the walk's own state (GE GraphLevelState: re-pass,
 * immediate re-pass, suspend, resume) name nodes of the graph being walked.
 * GE puts a node of another graph into that state anyway, where it is never
 * seen or passed, so re-pass, immediate re-pass and resume do nothing and a
 * suspend leaks until the walk fails.  kiln says so when the request is made:
 * a warning for the three no-ops, an error for the suspend.  A global
 * immediate re-pass names a node of the root graph.  Deletions may name any
 * graph; after-graph hooks (walking == NULL) may name any graph too.
 */
static bool req_foreign(kiln_pass_ctx *pc, int k, kiln_graph *g, kiln_node_id n)
{
    if (!pc->walking || k == KILN_REQ_DELETED)
        return false;
    kiln_graph *want = k == KILN_REQ_GLOBAL ? kiln_graph_root(pc->walking) : pc->walking;
    if (g == want)
        return false;
    const char *node = kiln_sym_str(g, g->cold[n].name);
    if (k == KILN_REQ_SUSPEND) {
        kiln_errorf(pc->err, KILN_ERR_PARAM,
                    "pass %s suspended node %s of graph %s while walking graph %s: suspend and "
                    "resume act only on nodes of the graph being walked",
                    kiln__passctx_pass_name(pc), node, kiln_graph_name(g),
                    kiln_graph_name(pc->walking));
        if (pc->req_status == KILN_OK)
            pc->req_status = KILN_ERR_PARAM;
    } else if (k == KILN_REQ_GLOBAL) {
        kiln_diag(pc, KILN_SEV_WARNING,
                  "global immediate re-pass of node %s of graph %s ignored: it takes nodes of "
                  "the root graph %s",
                  node, kiln_graph_name(g), kiln_graph_name(want));
    } else {
        kiln_diag(pc, KILN_SEV_WARNING,
                  "%s of node %s of graph %s ignored: the walk is in graph %s, and requests act "
                  "only on nodes of the graph being walked",
                  req_names[k], node, kiln_graph_name(g), kiln_graph_name(pc->walking));
    }
    return true;
}

/* Record (g, n) in list @p k.  Dead nodes are accepted: a pass reports a node
 * deleted right after removing it. */
static void req_add(kiln_pass_ctx *pc, int k, kiln_graph *g, kiln_node_id n)
{
    if (!pc || !g || n == 0 || n >= g->node_limit) {
        if (pc)
            kiln_diag(pc, KILN_SEV_DEBUG, "ignoring a GEPass request for no node");
        return;
    }
    if (req_foreign(pc, k, g, n))
        return;
    kiln_reqlist *l = &pc->req[k];
    if (!KILN_GROW(l->v, l->cap, l->count + 1)) {
        pc->oom = true;
        return;
    }
    l->v[l->count].g = g;
    l->v[l->count].n = n;
    l->count++;
}

void kiln_pass_repass(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_REPASS, g, n);
}

void kiln_pass_repass_immediate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_IMMEDIATE, g, n);
}

void kiln_pass_repass_global_immediate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_GLOBAL, g, n);
}

void kiln_pass_node_deleted(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_DELETED, g, n);
}

void kiln_pass_suspend(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_SUSPEND, g, n);
}

void kiln_pass_resume(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    req_add(ctx, KILN_REQ_RESUME, g, n);
}

/* GE AddRePassNodesWithInOut: in-nodes (data then control), n, out-nodes
 * (data then control), duplicates included like GE's GetInNodes/GetOutNodes. */
void kiln_pass_repass_with_inout(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, bool immediate)
{
    if (!ctx || !g || !kiln__live(g, n))
        return;
    int k = immediate ? KILN_REQ_IMMEDIATE : KILN_REQ_REPASS;
    uint32_t nin = kiln_node_input_count(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (p.node)
            req_add(ctx, k, g, p.node);
    }
    for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c))
        req_add(ctx, k, g, kiln_ctrl_src(g, c));
    req_add(ctx, k, g, n);
    uint32_t nout = kiln_node_output_count(g, n);
    for (uint32_t o = 0; o < nout; o++)
        for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c))
            req_add(ctx, k, g, kiln_use_dst(g, c).node);
    for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c))
        req_add(ctx, k, g, kiln_ctrl_dst(g, c));
}

kiln_status kiln_pass_isolate_and_delete(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                         const int32_t *io_map, uint32_t nmap, bool immediate)
{
    if (!g || !kiln__live(g, n)) {
        kiln_diag(ctx, KILN_SEV_DEBUG, "isolate-and-delete: node %u has no owner graph", n);
        return KILN_ERR_PARAM;
    }
    if (nmap && !io_map)
        return KILN_ERR_PARAM;
    kiln_graph *walked = kiln__graph_walked_below(g, n);
    if (walked) {
        /* Removing n would free a graph the walk is inside of. */
        kiln_errorf(ctx ? ctx->err : NULL, KILN_ERR_PARAM,
                    "pass %s cannot delete node %s of graph %s: it owns graph %s, which the "
                    "node-pass walk is inside of",
                    kiln__passctx_pass_name(ctx), kiln_node_name_str(g, n), kiln_graph_name(g),
                    kiln_graph_name(walked));
        return KILN_ERR_PARAM;
    }
    if (ctx && ctx->walking && g != ctx->walking) {
        /* A node of another graph (a parent's, say): GE's re-pass requests for
         * its neighbours would be dropped one by one; say it once. */
        kiln_diag(ctx, KILN_SEV_WARNING,
                  "deleting node %s of graph %s while walking graph %s: its neighbours are not "
                  "re-passed",
                  kiln_node_name_str(g, n), kiln_graph_name(g), kiln_graph_name(ctx->walking));
    } else if (ctx && !ctx->in_finish_graph) {
        kiln_pass_repass_with_inout(ctx, g, n, immediate);
    }
    kiln_status st = kiln_graph_isolate_node(g, n, io_map, nmap);
    if (st != KILN_OK) {
        kiln_diag(ctx, KILN_SEV_DEBUG, "isolate-and-delete: isolating %s failed: %s",
                  kiln_node_name_str(g, n), kiln_status_str(st));
        return KILN_ERR_PARAM;
    }
    st = kiln_graph_remove_node(g, n);
    if (st != KILN_OK) {
        kiln_diag(ctx, KILN_SEV_DEBUG, "isolate-and-delete: removing %s failed: %s",
                  kiln_node_name_str(g, n), kiln_status_str(st));
        return KILN_ERR_INTERNAL;
    }
    kiln_pass_node_deleted(ctx, g, n);
    return KILN_OK;
}
