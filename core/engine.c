/*
 * engine.c - binding engine kernels to nodes (the host side of
 * kiln_runtime.h).
 *
 * Engine choice for a node, in order:
 *   1. the engine named by the node attribute `_kiln_engine` (GRAPH_FORMAT's
 *      node `engine`): a placement decision already made is honoured, and an
 *      unknown name is an error;
 *   2. otherwise the engine with the highest priority (ties: registration
 *      order) whose op table lists the op type with a dtype mask that admits
 *      the node's first output dtype and (when the entry lists formats and
 *      the output has one) its format, and whose supports() callback (when
 *      present) accepts the node.
 *
 * The compiler-side hooks (kiln_component.h, docs/engines.md) are driven from
 * here too: optimize_original_graph / optimize_whole_graph over every engine
 * in priority order, optimize_subgraph for one engine, and per node
 * calc_op_running_param and generate_task of the node's engine, each result
 * checked before the caller sees it.
 * Every call into an engine is bracketed for crash attribution.
 * Complexity: O(engines x ops) per node; runtimes bind once per load.
 */
#include "plugin.h"
#include "passctx.h"
#include "ctx.h"
#include "crash.h"
#include "graph_int.h"
#include "graph_json.h"
#include "parallel.h"
#include "kiln/kiln_embed.h"
#include <threads.h>

/* Is @p fmt one of the comma-separated @p list? */
static bool format_listed(const char *list, const char *fmt)
{
    size_t n = strlen(fmt);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, fmt, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* Does op-table entry @p oi admit output dtype @p dt and format @p fmt ("" = unset)? */
static bool admits(const kiln_op_info *oi, kiln_dtype dt, const char *fmt)
{
    return (oi->dtype_mask == 0 || (oi->dtype_mask & (1u << dt))) &&
           (!oi->formats || !fmt[0] || format_listed(oi->formats, fmt));
}

/* ---- the op -> engines index ------------------------------------------------ */
/*
 * Per context: for every op type some engine lists, the (engine, entry) pairs
 * in choice order (priority descending, registration order on ties), indexed
 * by the op type's interned symbol, so a placement query costs O(engines
 * listing the op) instead of a scan of every table.  Built on the first query
 * after an engine was registered or rolled back (kiln__engine_index_invalidate),
 * under a lock; the op types are interned then, so a node created later with
 * one of them has its symbol.  O(total table entries) to build.
 */
typedef struct engine_cand {
    const kiln_component *c;
    const kiln_op_info *oi;
} engine_cand;

struct kiln_engine_index {
    uint32_t nsyms;  /* symbols covered: sym < nsyms */
    uint32_t *start; /* [nsyms + 1]: candidates of sym s are cand[start[s] .. start[s+1]) */
    engine_cand *cand;
    const kiln_component **eng; /* the engines, registration order */
    uint32_t neng;
};

static mtx_t index_mtx;
static once_flag index_once = ONCE_FLAG_INIT;
static void index_mtx_init(void) { mtx_init(&index_mtx, mtx_plain); }

static void index_free(struct kiln_engine_index *x)
{
    if (!x)
        return;
    kiln__free(x->start);
    kiln__free(x->cand);
    kiln__free(x->eng);
    kiln__free(x);
}

void kiln__engine_index_invalidate(kiln_ctx *ctx)
{
    call_once(&index_once, index_mtx_init);
    mtx_lock(&index_mtx);
    index_free(ctx->engines);
    ctx->engines = NULL;
    mtx_unlock(&index_mtx);
}

void kiln__engine_index_destroy(kiln_ctx *ctx)
{
    index_free(ctx->engines);
    ctx->engines = NULL;
}

static struct kiln_engine_index *index_build(kiln_ctx *ctx)
{
    uint32_t total = 0, ncomp = kiln_registry_count(ctx);
    for (uint32_t i = 0; i < ncomp; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind == KILN_COMP_ENGINE)
            total += c->d.engine.op_count;
    }
    struct kiln_engine_index *x = kiln__calloc(1, sizeof(*x));
    uint32_t *sym = kiln__calloc(total ? total : 1, sizeof(uint32_t));
    engine_cand *all = kiln__calloc(total ? total : 1, sizeof(engine_cand));
    bool ok = x && sym && all && (x->eng = kiln__calloc(ncomp + 1, sizeof(*x->eng))) != NULL;
    uint32_t k = 0, maxsym = 0;
    for (uint32_t i = 0; ok && i < ncomp; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_ENGINE)
            continue;
        x->eng[x->neng++] = c;
        for (uint32_t o = 0; ok && o < c->d.engine.op_count; o++) {
            const char *op = c->d.engine.ops[o].op_type;
            sym[k] = kiln__intern(&ctx->strings, op, strlen(op));
            ok = sym[k] != 0;
            all[k++] = (engine_cand){c, &c->d.engine.ops[o]};
            if (ok && sym[k - 1] > maxsym)
                maxsym = sym[k - 1];
        }
    }
    if (ok) {
        x->nsyms = maxsym + 1;
        x->start = kiln__calloc((size_t)x->nsyms + 1, sizeof(uint32_t));
        x->cand = kiln__calloc(total ? total : 1, sizeof(engine_cand));
        ok = x->start && x->cand;
    }
    if (ok) {
        /* counting sort by symbol; within a symbol, priority descending, registration
         * order on ties (engines are visited in registration order) */
        for (uint32_t j = 0; j < k; j++)
            x->start[sym[j] + 1]++;
        for (uint32_t s = 0; s < x->nsyms; s++)
            x->start[s + 1] += x->start[s];
        uint32_t *fill = kiln__calloc(x->nsyms, sizeof(uint32_t));
        ok = fill != NULL;
        for (uint32_t j = 0; ok && j < k; j++) {
            uint32_t s = sym[j], pos = x->start[s] + fill[s]++;
            /* insertion among the (few) candidates of s */
            while (pos > x->start[s]) {
                const engine_cand *prev = &x->cand[pos - 1];
                int32_t pp = prev->c->d.engine.priority, pj = all[j].c->d.engine.priority;
                if (pp >= pj)
                    break; /* registration order holds on ties: j comes later */
                x->cand[pos] = *prev;
                pos--;
            }
            x->cand[pos] = all[j];
        }
        kiln__free(fill);
    }
    kiln__free(sym);
    kiln__free(all);
    if (!ok) {
        index_free(x);
        return NULL;
    }
    return x;
}

/*
 * Load the deferred engine plugins (docs/manifest.md) for a query made
 * outside a compile, e.g. by a program that asks kiln_engine_for_node of an
 * imported model.  Never inside a parallel task: a compile or run loads them
 * before its first stage.  A failure is kept by the registry and reported by
 * the next compile or run; the query sees the engines that loaded.
 */
static void need_engines(kiln_ctx *ctx)
{
    uint32_t task;
    if (!ctx->registry->npending || kiln__task_current(&task))
        return;
    kiln_error e;
    kiln_error_clear(&e);
    (void)kiln__registry_need(ctx, KILN_COMP_ENGINE, &e);
}

/* The candidates for op symbol @p op; *n = 0 when none (or out of memory). */
static const engine_cand *candidates(kiln_ctx *ctx, kiln_sym op, uint32_t *n)
{
    need_engines(ctx);
    call_once(&index_once, index_mtx_init);
    mtx_lock(&index_mtx);
    if (!ctx->engines)
        ctx->engines = index_build(ctx);
    const struct kiln_engine_index *x = ctx->engines;
    mtx_unlock(&index_mtx);
    *n = 0;
    if (!x || op >= x->nsyms)
        return NULL;
    *n = x->start[op + 1] - x->start[op];
    return x->cand + x->start[op];
}

const kiln_op_info *kiln__engine_entry(kiln_ctx *ctx, const char *engine, kiln_sym op,
                                      const kiln_component **comp)
{
    call_once(&index_once, index_mtx_init);
    mtx_lock(&index_mtx);
    if (!ctx->engines)
        ctx->engines = index_build(ctx);
    const struct kiln_engine_index *x = ctx->engines;
    mtx_unlock(&index_mtx);
    const kiln_component *c = NULL;
    if (!x) { /* out of memory: the tables themselves */
        c = kiln_registry_find(ctx, KILN_COMP_ENGINE, engine);
        const char *s = c ? kiln__intern_str(&ctx->strings, op) : NULL;
        *comp = c;
        for (uint32_t i = 0; c && i < c->d.engine.op_count; i++)
            if (c->d.engine.ops[i].op_type && strcmp(c->d.engine.ops[i].op_type, s) == 0)
                return &c->d.engine.ops[i];
        return NULL;
    }
    for (uint32_t i = 0; i < x->neng && !c; i++) /* callers pass the engine's own name */
        if (x->eng[i]->name == engine)
            c = x->eng[i];
    for (uint32_t i = 0; i < x->neng && !c; i++)
        if (strcmp(x->eng[i]->name, engine) == 0)
            c = x->eng[i];
    *comp = c;
    if (!c || op >= x->nsyms)
        return NULL;
    for (uint32_t j = x->start[op]; j < x->start[op + 1]; j++)
        if (x->cand[j].c == c)
            return x->cand[j].oi; /* candidates keep each table's order: its first entry */
    return NULL;
}

static const kiln_component *choose(kiln_graph *g, kiln_node_id n, kiln_error *err)
{
    kiln_ctx *ctx = g->ctx;
    const char *want;
    if (kiln_attrs_get_string(kiln_node_attrs(g, n), KILN_ATTR_ENGINE, &want) && want[0]) {
        need_engines(ctx);
        const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_ENGINE, want);
        if (!c)
            kiln_errorf(err, KILN_ERR_NOT_FOUND,
                        "node %s (%s) is placed on engine '%s', which no loaded plugin provides",
                        kiln_node_name_str(g, n), kiln_node_op_str(g, n), want);
        return c;
    }
    kiln_dtype dt = KILN_DT_FLOAT32;
    const char *fmt = "";
    if (kiln_node_output_count(g, n)) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        dt = kiln_desc_dtype(d);
        fmt = kiln_desc_format(g, d);
        if (!fmt)
            fmt = "";
    }
    uint32_t nc = 0;
    const engine_cand *cand = candidates(ctx, kiln_node_op(g, n), &nc);
    const kiln_component *best = NULL;
    for (uint32_t i = 0; i < nc && !best; i++) {
        const kiln_component *c = cand[i].c;
        if (!admits(cand[i].oi, dt, fmt))
            continue;
        if (c->d.engine.supports) {
            void *inst = NULL;
            if (kiln__engine_instance(c, &inst, NULL) != KILN_OK)
                continue;
            kiln_activity act =
                KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "engine supports", g, n);
            kiln_activity *prev = kiln__activity_enter(&act);
            bool ok = c->d.engine.supports(inst, g, n);
            kiln__activity_leave(prev);
            if (!ok)
                continue;
        }
        best = c;
    }
    if (!best)
        kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: no loaded engine supports op %s (%s)",
                    kiln_node_name_str(g, n), kiln_node_op_str(g, n), kiln_dtype_name(dt));
    return best;
}

const char *kiln_engine_for_node(kiln_graph *g, kiln_node_id n)
{
    if (!g || !kiln__live(g, n))
        return NULL;
    const kiln_component *c = choose(g, n, NULL);
    return c ? c->name : NULL;
}

kiln_status kiln_engine_kernel(kiln_graph *g, kiln_node_id n, kiln_kernel_fn *fn, void **state,
                               const char **engine, kiln_error *err)
{
    kiln_error local; /* a NULL err still gets the right status back */
    if (!err) {
        kiln_error_clear(&local);
        err = &local;
    }
    if (!g || !kiln__live(g, n) || !fn || !state)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_engine_kernel: bad arguments");
    *fn = NULL;
    *state = NULL;
    const kiln_component *c = choose(g, n, err);
    if (!c)
        return kiln_error_code(err);
    if (engine)
        *engine = c->name;
    if (!c->d.engine.kernel_create)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "engine %s has no kernels (node %s, op %s)",
                           c->name, kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    void *inst = NULL;
    kiln_status st = kiln__engine_instance(c, &inst, err);
    if (st != KILN_OK)
        return st;
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "kernel_create", g, n);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = c->d.engine.kernel_create(inst, g, n, fn, state, err);
    kiln__activity_leave(prev);
    if (st == KILN_OK && !*fn)
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "engine %s returned no kernel for node %s",
                         c->name, kiln_node_name_str(g, n));
    if (st != KILN_OK)
        kiln_error_push(err, "engine %s", c->name);
    return st;
}

void kiln_engine_kernel_release(kiln_graph *g, const char *engine, void *state)
{
    if (!g || !engine)
        return;
    const kiln_component *c = kiln_registry_find(g->ctx, KILN_COMP_ENGINE, engine);
    if (c && c->d.engine.kernel_destroy) {
        kiln_activity act = {.plugin = kiln__comp_plugin(c),
                             .component = c->name,
                             .stage = "kernel release",
                             .graph = g,
                             .doing = "releasing a kernel"};
        kiln_activity *prev = kiln__activity_enter(&act);
        c->d.engine.kernel_destroy(c->inst, state);
        kiln__activity_leave(prev);
    }
}

/* ---- compiler hooks -------------------------------------------------------- */

/* Engines of @p ctx, highest priority first (ties: registration order). */
static const kiln_component **engines_by_priority(kiln_ctx *ctx, uint32_t *count)
{
    uint32_t n = 0, total = kiln_registry_count(ctx);
    const kiln_component **v = kiln__calloc(total ? total : 1, sizeof(*v));
    if (!v)
        return NULL;
    for (uint32_t i = 0; i < total; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_ENGINE)
            continue;
        uint32_t k = n++; /* insertion sort: stable, engines are few */
        while (k > 0 && v[k - 1]->d.engine.priority < c->d.engine.priority) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = c;
    }
    *count = n;
    return v;
}

typedef kiln_status (*graph_hook)(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);

/* Call @p hook of engine @p c on @p g, attributed to the engine (crash
 * reports, diagnostics and stats of the pass ctx). */
static kiln_status call_graph_hook(const kiln_component *c, graph_hook hook, const char *what,
                                   kiln_pass_ctx *pc, kiln_graph *g, kiln_error *err)
{
    void *inst = NULL;
    kiln_status st = kiln__engine_instance(c, &inst, err);
    if (st != KILN_OK)
        return st;
    const kiln_component *prev_comp = pc ? pc->comp : NULL;
    kiln_error *prev_err = pc ? pc->err : NULL;
    if (pc) { /* the hook's diagnostics and kiln_pass_error go to this call's error */
        pc->comp = c;
        pc->err = err;
    }
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, what, g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = hook(inst, pc, g);
    kiln__activity_leave(prev);
    if (pc) {
        pc->comp = prev_comp;
        pc->err = prev_err;
    }
    if (st != KILN_OK) {
        if (kiln_error_code(err) == KILN_OK)
            kiln_errorf(err, st, "failed (%s)", kiln_status_str(st));
        kiln_error_push(err, "engine %s: %s of graph %s", c->name, what, kiln_graph_name(g));
    }
    return st;
}

static kiln_status all_engines(kiln_pass_ctx *pc, kiln_graph *root, bool whole, kiln_error *err)
{
    if (!root)
        return kiln_errorf(err, KILN_ERR_INVALID, "engine graph optimisation: no graph");
    uint32_t n = 0;
    const kiln_component **v = engines_by_priority(root->ctx, &n);
    if (!v)
        return kiln_errorf(err, KILN_ERR_NOMEM, "engine graph optimisation: out of memory");
    kiln_status st = KILN_OK;
    /* Outside a stage run (the driver calls between passes): name the stage
     * for the hooks' diagnostics and stats. */
    const char *prev_stage = pc ? pc->stage : NULL;
    if (pc && !pc->stage)
        pc->stage = whole ? "optimize_after_subgraph" : "optimize_original";
    for (uint32_t i = 0; i < n && st == KILN_OK; i++) {
        const kiln_engine_desc *e = &v[i]->d.engine;
        graph_hook h = whole ? e->optimize_whole_graph : e->optimize_original_graph;
        if (h)
            st = call_graph_hook(
                v[i], h, whole ? "optimize_whole_graph" : "optimize_original_graph", pc, root, err);
    }
    if (pc)
        pc->stage = prev_stage;
    kiln__free(v);
    return st;
}

kiln_status kiln_engines_optimize_original(kiln_pass_ctx *ctx, kiln_graph *root, kiln_error *err)
{
    return all_engines(ctx, root, false, err);
}

kiln_status kiln_engines_optimize_whole(kiln_pass_ctx *ctx, kiln_graph *root, kiln_error *err)
{
    return all_engines(ctx, root, true, err);
}

kiln_status kiln_engine_optimize_subgraph(const char *engine, kiln_pass_ctx *ctx, kiln_graph *g,
                                          kiln_error *err)
{
    if (!engine || !g)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_engine_optimize_subgraph: bad arguments");
    const kiln_component *c = kiln_registry_find(g->ctx, KILN_COMP_ENGINE, engine);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "subgraph %s is placed on engine '%s', which no loaded plugin provides",
                           kiln_graph_name(g), engine);
    if (!c->d.engine.optimize_subgraph)
        return KILN_OK;
    return call_graph_hook(c, c->d.engine.optimize_subgraph, "optimize_subgraph", ctx, g, err);
}

/* The engine of node @p n for a build-stage hook, with its instance. */
static const kiln_component *node_engine(kiln_graph *g, kiln_node_id n, void **inst,
                                         kiln_error *err)
{
    const kiln_component *c = choose(g, n, err);
    if (c && kiln__engine_instance(c, inst, err) != KILN_OK)
        return NULL;
    return c;
}

kiln_status kiln_engine_running_param(kiln_graph *g, kiln_node_id n, kiln_running_param *rp,
                                      const char **engine, kiln_error *err)
{
    if (!g || !kiln__live(g, n) || !rp ||
        rp->struct_size < KILN_SIZE_THROUGH(kiln_running_param, workspace_sizes))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_engine_running_param: bad arguments");
    uint32_t nout = kiln_node_output_count(g, n);
    if (nout && !rp->output_sizes)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_engine_running_param: node %s has %u outputs and no "
                           "output_sizes buffer",
                           kiln_node_name_str(g, n), nout);
    rp->output_count = nout;
    rp->workspace_count = 0;
    memset(rp->workspace_sizes, 0, sizeof(rp->workspace_sizes));
    for (uint32_t o = 0; o < nout; o++) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        int64_t numel = kiln_desc_numel(d), bytes;
        size_t es = kiln_dtype_size(kiln_desc_dtype(d));
        rp->output_sizes[o] =
            numel >= 0 && es && kiln_mul_i64(numel, (int64_t)es, &bytes) ? bytes : -1;
    }
    void *inst = NULL;
    const kiln_component *c = node_engine(g, n, &inst, err);
    if (!c)
        return kiln_error_code(err) ? kiln_error_code(err) : KILN_ERR_UNSUPPORTED;
    if (engine)
        *engine = c->name;
    if (!c->d.engine.calc_op_running_param)
        return KILN_OK;
    int64_t *floor = nout ? kiln__malloc(nout * sizeof(int64_t)) : NULL;
    if (nout && !floor)
        return kiln_errorf(err, KILN_ERR_NOMEM, "node %s: out of memory", kiln_node_name_str(g, n));
    if (nout)
        memcpy(floor, rp->output_sizes, nout * sizeof(int64_t));
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "calc_op_running_param", g, n);
    kiln_activity *prev = kiln__activity_enter(&act);
    kiln_status st = c->d.engine.calc_op_running_param(inst, g, n, rp, err);
    kiln__activity_leave(prev);
    if (st == KILN_OK && (rp->output_count != nout || rp->workspace_count > KILN_MAX_WORKSPACES))
        st = kiln_errorf(err, KILN_ERR_INTERNAL,
                         "returned %u outputs (node has %u) and %u workspaces (at most %d)",
                         rp->output_count, nout, rp->workspace_count, KILN_MAX_WORKSPACES);
    for (uint32_t o = 0; st == KILN_OK && o < nout; o++)
        if (rp->output_sizes[o] < floor[o] || (floor[o] < 0 && rp->output_sizes[o] < -1))
            st = kiln_errorf(err, KILN_ERR_INTERNAL,
                             "output %u size %lld is below the descriptor's %lld bytes", o,
                             (long long)rp->output_sizes[o], (long long)floor[o]);
    for (uint32_t w = 0; st == KILN_OK && w < rp->workspace_count; w++)
        if (rp->workspace_sizes[w] < 0)
            st = kiln_errorf(err, KILN_ERR_INTERNAL, "workspace %u has negative size %lld", w,
                             (long long)rp->workspace_sizes[w]);
    kiln__free(floor);
    if (st != KILN_OK)
        kiln_error_push(err, "engine %s: calc_op_running_param of node %s (%s)", c->name,
                        kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    return st;
}

kiln_status kiln_engine_generate_task(kiln_graph *g, kiln_node_id n, kiln_task_desc *task,
                                      const char **engine, kiln_error *err)
{
    if (!g || !kiln__live(g, n) || !task ||
        task->struct_size < KILN_SIZE_THROUGH(kiln_task_desc, flags))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_engine_generate_task: bad arguments");
    void *args = task->args;
    uint32_t cap = args ? task->args_capacity : 0;
    uint32_t size = task->struct_size;
    memset(task, 0, sizeof(*task));
    task->struct_size = size < sizeof(*task) ? size : (uint32_t)sizeof(*task);
    task->args = args;
    task->args_capacity = cap;
    int64_t sid = 0;
    if (kiln_attrs_get_int(kiln_node_attrs(g, n), "_kiln_stream_id", &sid) && sid >= 0 &&
        sid <= UINT32_MAX)
        task->stream_id = (uint32_t)sid;
    void *inst = NULL;
    const kiln_component *c = node_engine(g, n, &inst, err);
    if (!c)
        return kiln_error_code(err) ? kiln_error_code(err) : KILN_ERR_UNSUPPORTED;
    if (engine)
        *engine = c->name;
    kiln_status st = KILN_OK;
    if (c->d.engine.generate_task) {
        kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "generate_task", g, n);
        kiln_activity *prev = kiln__activity_enter(&act);
        st = c->d.engine.generate_task(inst, g, n, task, err);
        kiln__activity_leave(prev);
    } else {
        /* No hook: one kernel task named "<engine>.<op>" (interned: lives with the context). */
        char name[256];
        int len = snprintf(name, sizeof(name), "%s.%s", c->name, kiln_node_op_str(g, n));
        uint32_t sym = len > 0 && (size_t)len < sizeof(name)
                           ? kiln__intern(&g->ctx->strings, name, (size_t)len)
                           : 0;
        if (!sym)
            return kiln_errorf(err, KILN_ERR_NOMEM, "node %s: out of memory",
                               kiln_node_name_str(g, n));
        task->kind = KILN_TASK_KERNEL;
        task->kernel_name = kiln__intern_str(&g->ctx->strings, sym);
    }
    if (st == KILN_OK && task->kind >= KILN_TASK_KIND_COUNT)
        st =
            kiln_errorf(err, KILN_ERR_INTERNAL, "task kind %u is not a kiln_task_kind", task->kind);
    else if (st == KILN_OK && task->kind == KILN_TASK_KERNEL &&
             (!task->kernel_name || !task->kernel_name[0]))
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "kernel task without a kernel name");
    else if (st == KILN_OK && task->args_size > cap)
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "wrote %u bytes of arguments into %u",
                         task->args_size, cap);
    if (st != KILN_OK)
        kiln_error_push(err, "engine %s: generate_task of node %s (%s)", c->name,
                        kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    return st;
}

/* ---- kiln plugins ENGINE --------------------------------------------------- */

void kiln_engine_describe(FILE *f, const kiln_engine_desc *e)
{
    if (!f || !e)
        return;
    if (e->summary)
        fprintf(f, "  summary   %s\n", e->summary);
    fprintf(f, "  priority  %d\n", e->priority);
    static const struct {
        size_t off;
        const char *name;
    } hooks[] = {
        {offsetof(kiln_engine_desc, optimize_original_graph), "optimize_original_graph"},
        {offsetof(kiln_engine_desc, optimize_subgraph), "optimize_subgraph"},
        {offsetof(kiln_engine_desc, optimize_whole_graph), "optimize_whole_graph"},
        {offsetof(kiln_engine_desc, calc_op_running_param), "calc_op_running_param"},
        {offsetof(kiln_engine_desc, generate_task), "generate_task"},
        {offsetof(kiln_engine_desc, supports), "supports"},
        {offsetof(kiln_engine_desc, kernel_create), "kernel_create"},
    };
    fprintf(f, "  hooks    ");
    int any = 0;
    for (unsigned i = 0; i < KILN_ARRAY_LEN(hooks); i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)e + hooks[i].off, sizeof(fn));
        if (fn) {
            fprintf(f, " %s", hooks[i].name);
            any = 1;
        }
    }
    fprintf(f, "%s\n", any ? "" : " (none)");
    fprintf(f, "  ops       %u (op, dtypes of output 0, formats)\n", e->op_count);
    for (uint32_t o = 0; o < e->op_count; o++) {
        const kiln_op_info *oi = &e->ops[o];
        char dts[256];
        size_t n = 0;
        dts[0] = 0;
        for (unsigned dt = 0; dt < KILN_DT_COUNT && n < sizeof(dts); dt++)
            if (oi->dtype_mask & (1u << dt))
                n += (size_t)snprintf(dts + n, sizeof(dts) - n, "%s%s", n ? "," : "",
                                      kiln_dtype_name((kiln_dtype)dt));
        fprintf(f, "  op        %-20s %-40s %s\n", oi->op_type, oi->dtype_mask ? dts : "any-dtype",
                oi->formats ? oi->formats : "any-format");
    }
}
