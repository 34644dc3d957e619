/*
 * checker_api.c - the public face of the memory-conflict checker registry
 * (kiln_component.h, "checker lookups for passes").
 *
 * GE's Checker::CheckConflict looks the attribute pair of two anchors up in
 * two global tables (absolutely no conflict / absolutely conflict) and, for a
 * conditional pair, calls the function REGISTER_FUNC wrote into the 14x14
 * matrix.  In kiln the tables live in the context (core/checker.c) and the
 * conflict-finding pass is a plugin, so the pass reaches them through the
 * functions below, all of which take a graph and use the graph's context:
 *
 *   kiln_checker_classify   unconditional class of a pair (symmetric);
 *   kiln_checker_find       name and flags of the registered checker;
 *   kiln_checker_run        run that checker on a query into a result;
 *   kiln_checker_result_*   create / destroy / read a result.
 *
 * The result object is the one checkers already fill through
 * kiln_checker_isolate / kiln_checker_reason; a pass owns one result and
 * reuses it for every run (each run clears it first).
 *
 * Thread rules: the tables are filled while plugins load and only read here,
 * so concurrent classify/find calls are safe; one result per thread.
 */
#include "checker.h"
#include "graph_int.h"
#include "plugin.h"
#include "crash.h"

/* The checker table of @p g's context, or NULL. */
static const struct kiln_checker_table *table_of(const kiln_graph *g)
{
    if (!g)
        return NULL;
    const kiln_ctx *ctx = kiln_graph_ctx(g);
    return ctx ? ctx->checkers : NULL;
}

static bool attr_ok(kiln_anchor_attr a)
{
    return (unsigned)a < KILN_AA_COUNT;
}

kiln_conflict_class kiln_checker_classify(const kiln_graph *g, kiln_anchor_attr a,
                                          kiln_anchor_attr b)
{
    if (!table_of(g) || !attr_ok(a) || !attr_ok(b))
        return KILN_CONFLICT_NEVER;
    return kiln_checker_class(kiln_graph_ctx(g), a, b);
}

/* The registered checker component of (a, b), or NULL. */
static const kiln_component *find_comp(const kiln_graph *g, kiln_anchor_attr a,
                                       kiln_anchor_attr b)
{
    if (!table_of(g) || !attr_ok(a) || !attr_ok(b))
        return NULL;
    if (kiln_checker_class(kiln_graph_ctx(g), a, b) != KILN_CONFLICT_CONDITIONAL)
        return NULL;
    return kiln_checker_lookup(kiln_graph_ctx(g), a, b);
}

const char *kiln_checker_find(const kiln_graph *g, kiln_anchor_attr a, kiln_anchor_attr b,
                              uint32_t *flags)
{
    const kiln_component *c = find_comp(g, a, b);
    if (flags)
        *flags = c ? c->d.checker.flags : 0;
    return c ? c->name : NULL;
}

kiln_checker_result *kiln_checker_result_create(void)
{
    return kiln__calloc(1, sizeof(kiln_checker_result));
}

void kiln_checker_result_destroy(kiln_checker_result *r)
{
    if (!r)
        return;
    kiln__checker_result_free(r);
    kiln__free(r);
}

/* Smallest query a checker may be handed: through the symbol list. */
#define QUERY_MIN_SIZE KILN_SIZE_THROUGH(kiln_checker_query, symbol_count)

kiln_status kiln_checker_run(kiln_graph *g, const kiln_checker_query *q,
                             kiln_checker_result *r, kiln_error *err)
{
    if (!g || !q || !r)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_checker_run: NULL argument");
    kiln__checker_result_reset(r);
    if (q->struct_size < QUERY_MIN_SIZE)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_checker_run: query struct_size %u is smaller than %u",
                           (unsigned)q->struct_size, (unsigned)QUERY_MIN_SIZE);
    if (!attr_ok(q->type_a) || !attr_ok(q->type_b))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_checker_run: attribute pair (%u, %u) out of range",
                           (unsigned)q->type_a, (unsigned)q->type_b);
    if (kiln_checker_class(kiln_graph_ctx(g), q->type_a, q->type_b) != KILN_CONFLICT_CONDITIONAL)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_checker_run: pair (%s, %s) is decided by the unconditional table",
                           kiln_anchor_attr_name(q->type_a), kiln_anchor_attr_name(q->type_b));
    const kiln_component *c = kiln_checker_lookup(kiln_graph_ctx(g), q->type_a, q->type_b);
    if (!c || !c->d.checker.check)
        return KILN_ERR_NOT_FOUND; /* no checker: GE treats the pair as no conflict */
    kiln_activity act = {.plugin = kiln__comp_plugin(c),
                         .component = c->name,
                         .stage = "memory conflict check",
                         .graph = g,
                         .doing = "checking a memory conflict"};
    kiln_activity *prev = kiln__activity_enter(&act);
    kiln_status st = c->d.checker.check(q, r);
    kiln__activity_leave(prev);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "checker %s failed on (%s, %s)", c->name,
                           kiln_anchor_attr_name(q->type_a), kiln_anchor_attr_name(q->type_b));
    return KILN_OK;
}

uint32_t kiln_checker_result_count(const kiln_checker_result *r)
{
    return r ? r->count : 0;
}

const kiln_mem_anchor *kiln_checker_result_anchor(const kiln_checker_result *r, uint32_t i)
{
    if (!r || i >= r->count)
        return NULL;
    return &r->anchors[i];
}

const char *kiln_checker_result_reason(const kiln_checker_result *r)
{
    return r ? r->reason : "";
}
