/*
 * fusion_inspect.c - GE GraphFuseInspectorUtils: kiln_fusion_can_fuse
 * (CanFuse) and kiln_fusion_report (ReportFuse).
 *
 * CanFuse refuses, with GE's reasons: an empty list ("nodes_before_fuse is
 * empty"), an id that is not a live node of the graph, nodes carrying more
 * than one distinct value of `_user_stream_label`, `_super_kernel_scope`,
 * `_super_kernel_options` (GE ComputeGraph::IsSupportFuse) or of the engine
 * attribute `_kiln_engine`, the values named; and a set whose fusion would
 * create a cycle ("it will create cycle after fuse"), decided by the graph's
 * incremental cycle detector (analysis_cycle.c).
 *
 * ReportFuse writes on every after-node GE's records
 * (GraphPassUtil::RecordOriginalNames / StoreAndUpdataOriginFusionPassName):
 *   _datadump_origin_op_names / _datadump_origin_op_types  list_string: per
 *       before-node its own origins when it has them (so the originals
 *       survive repeated fusions), else its name / type;
 *   pass_name  list_string: the before-nodes' pass_name lists, then the
 *       current pass's name;
 * and adds one to the pass's "matched" and "effected" counters.
 */
#include "analysis_cycle.h"
#include "fusion_int.h"
#include "passctx.h"

#include <stdarg.h>

/* Append to the reason buffer (NUL-terminated, truncated). */
static void reason_set(char *reason, size_t size, const char *fmt, ...) KILN_PRINTF(3, 4);
static void reason_set(char *reason, size_t size, const char *fmt, ...)
{
    if (!reason || !size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, size, fmt, ap);
    va_end(ap);
}

/* Attributes that must agree among fused nodes (unset does not count). */
static const char *const same_attrs[] = {"_user_stream_label", "_super_kernel_scope",
                                         "_super_kernel_options", "_kiln_engine"};

/* More than one distinct value of string attribute @p key among the nodes?
 * Names the first two values and their nodes. */
static bool attr_conflict(const kiln_graph *g, const kiln_node_id *nodes, uint32_t n,
                          const char *key, char *reason, size_t size)
{
    const char *first = NULL;
    kiln_node_id first_node = 0;
    for (uint32_t k = 0; k < n; k++) {
        const char *v = NULL;
        if (!kiln_attrs_get_string(kiln_node_attrs(g, nodes[k]), key, &v) || !v)
            continue;
        if (!first) {
            first = v;
            first_node = nodes[k];
        } else if (strcmp(first, v) != 0) {
            reason_set(
                reason, size, "nodes have different %s: \"%s\" on node %s and \"%s\" on node %s",
                key, first, kiln_node_name_str(g, first_node), v, kiln_node_name_str(g, nodes[k]));
            return true;
        }
    }
    return false;
}

bool kiln_fusion_can_fuse(const kiln_graph *cg, const kiln_node_id *nodes, uint32_t n, char *reason,
                          size_t reason_size)
{
    if (reason && reason_size)
        reason[0] = '\0';
    if (!cg) {
        reason_set(reason, reason_size, "no graph given");
        return false;
    }
    if (!nodes || !n) {
        reason_set(reason, reason_size, "nodes_before_fuse is empty");
        return false;
    }
    /* The analysis caches count as mutations (kiln_graph.h thread rules). */
    kiln_graph *g = (kiln_graph *)cg;
    for (uint32_t k = 0; k < n; k++) {
        if (!kiln__live(g, nodes[k])) {
            reason_set(reason, reason_size, "node id %u is not a live node of graph %s", nodes[k],
                       kiln_graph_name(g));
            return false;
        }
    }
    for (size_t a = 0; a < sizeof(same_attrs) / sizeof(same_attrs[0]); a++)
        if (attr_conflict(g, nodes, n, same_attrs[a], reason, reason_size))
            return false;
    kiln_node_id ex = 0, en = 0;
    if (kiln__cycles_would_form(g, nodes, n, &ex, &en)) {
        if (ex && en)
            reason_set(reason, reason_size,
                       "it will create cycle after fuse: a path leaves the nodes at %s and "
                       "re-enters them at %s",
                       kiln_node_name_str(g, ex), kiln_node_name_str(g, en));
        else
            reason_set(reason, reason_size,
                       "it will create cycle after fuse (the check ran out of memory)");
        return false;
    }
    return true;
}

/* ---- ReportFuse ----------------------------------------------------------- */

typedef struct strvec {
    const char **v;
    uint32_t n, cap;
} strvec;

static bool sv_push(strvec *s, const char *str)
{
    if (!KILN_GROW(s->v, s->cap, s->n + 1))
        return false;
    s->v[s->n++] = str;
    return true;
}

/* Append the non-empty entries of list attribute @p key of @p n, or @p self
 * when it has none; false on OOM. */
static bool origins_of(const kiln_graph *g, kiln_node_id n, const char *key, const char *self,
                       strvec *out)
{
    const char *const *v = NULL;
    uint32_t cnt = 0, used = 0;
    if (kiln_attrs_get_list_string(kiln_node_attrs(g, n), key, &v, &cnt))
        for (uint32_t i = 0; i < cnt; i++)
            if (v[i] && v[i][0]) {
                if (!sv_push(out, v[i]))
                    return false;
                used++;
            }
    return used ? true : sv_push(out, self);
}

static kiln_status report_fail(kiln_pass_ctx *ctx, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);
static kiln_status report_fail(kiln_pass_ctx *ctx, kiln_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ctx)
        kiln_errorf(kiln_pass_error(ctx), st, "ReportFuse (pass %s): %s",
                    kiln__passctx_pass_name(ctx), msg);
    return st;
}

const char *kiln__fusion_pass_name(const kiln_pass_ctx *ctx)
{
    return (ctx && ctx->comp && ctx->comp->name && ctx->comp->name[0]) ? ctx->comp->name : NULL;
}

kiln_status kiln__fusion_report_check(kiln_pass_ctx *ctx, const kiln_graph *g,
                                      const kiln_node_id *before, uint32_t nb,
                                      const kiln_node_id *after, uint32_t na)
{
    if (!kiln__fusion_pass_name(ctx))
        return report_fail(ctx, KILN_ERR_INVALID, "called outside a pass (no pass name)");
    if (!g)
        return report_fail(ctx, KILN_ERR_INVALID, "no graph given");
    if (!before || !nb)
        return report_fail(ctx, KILN_ERR_INVALID, "nodes_before_fuse is empty");
    for (uint32_t k = 0; k < nb; k++)
        if (!kiln__live(g, before[k]))
            return report_fail(ctx, KILN_ERR_INVALID,
                               "before-node id %u is not a live node of graph %s", before[k],
                               kiln_graph_name(g));
    if (na && !after)
        return report_fail(ctx, KILN_ERR_INVALID, "nodes_after_fuse is NULL");
    for (uint32_t k = 0; k < na; k++)
        if (!kiln__live(g, after[k]))
            return report_fail(ctx, KILN_ERR_INVALID,
                               "after-node id %u is not a live node of graph %s", after[k],
                               kiln_graph_name(g));
    return KILN_OK;
}

kiln_status kiln__fusion_report_attrs(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *before,
                                      uint32_t nb, const kiln_node_id *after, uint32_t na)
{
    strvec names = {0}, types = {0}, passes = {0};
    kiln_status st = KILN_OK;
    for (uint32_t k = 0; k < nb && st == KILN_OK; k++) {
        kiln_node_id b = before[k];
        const char *const *pv = NULL;
        uint32_t pn = 0;
        if (!origins_of(g, b, KILN_ATTR_ORIGIN_NAMES, kiln_node_name_str(g, b), &names) ||
            !origins_of(g, b, KILN_ATTR_ORIGIN_TYPES, kiln_node_op_str(g, b), &types))
            st = KILN_ERR_NOMEM;
        if (kiln_attrs_get_list_string(kiln_node_attrs(g, b), KILN_ATTR_FUSION_PASSES, &pv, &pn))
            for (uint32_t i = 0; i < pn && st == KILN_OK; i++)
                if (!sv_push(&passes, pv[i]))
                    st = KILN_ERR_NOMEM;
    }
    if (st == KILN_OK && !sv_push(&passes, kiln__fusion_pass_name(ctx)))
        st = KILN_ERR_NOMEM;
    /* The strings are interned symbols (valid for the context's life), so
     * overwriting an after-node that is also a before-node is safe. */
    for (uint32_t k = 0; k < na && st == KILN_OK; k++) {
        kiln_attrs *a = kiln_node_attrs_mut(g, after[k]);
        if (!a)
            st = KILN_ERR_NOMEM;
        else if ((st = kiln_attrs_set_list_string(a, KILN_ATTR_ORIGIN_NAMES, names.v, names.n)) ==
                     KILN_OK &&
                 (st = kiln_attrs_set_list_string(a, KILN_ATTR_ORIGIN_TYPES, types.v, types.n)) ==
                     KILN_OK)
            st = kiln_attrs_set_list_string(a, KILN_ATTR_FUSION_PASSES, passes.v, passes.n);
    }
    kiln__free(names.v);
    kiln__free(types.v);
    kiln__free(passes.v);
    if (st != KILN_OK)
        return report_fail(ctx, st, "out of memory recording the fusion on graph %s",
                           kiln_graph_name(g));
    return KILN_OK;
}

void kiln__fusion_report_count(kiln_pass_ctx *ctx)
{
    kiln_pass_stat_add(ctx, "matched", 1);
    kiln_pass_stat_add(ctx, "effected", 1);
}

kiln_status kiln_fusion_report(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *before,
                               uint32_t nb, const kiln_node_id *after, uint32_t na)
{
    kiln_status st = kiln__fusion_report_check(ctx, g, before, nb, after, na);
    if (st == KILN_OK)
        st = kiln__fusion_report_attrs(ctx, g, before, nb, after, na);
    if (st == KILN_OK)
        kiln__fusion_report_count(ctx);
    return st;
}
