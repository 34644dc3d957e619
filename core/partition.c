/*
 * partition.c - engine queries for placement and the partition table of a
 * graph (kiln_runtime.h, kiln_graph.h; docs/partition.md).
 *
 * Engines: kiln_engine_count/kiln_engine_at list the registered engines in
 * registration order with their priority; kiln_engine_check asks one engine
 * whether it takes a node and, when not, says why (no op entry, dtype,
 * format, supports() declined), so a placer can report every engine it
 * consulted.
 *
 * Partitions: the partitioner records its result on the graph it partitioned
 * (the root or any subgraph), as attributes so that graph JSON, the paused
 * state and every dump carry it unchanged:
 *   graph attrs  _kiln_partition_seq            int, T (graphs partitioned before)
 *                _kiln_partition_sub_graphs     list_int, index = rank: k of
 *                                               new_sub_graph<k>, -1 = input nodes
 *                _kiln_partition_engines        list_string
 *                _kiln_partition_stream_labels  list_string ("" = none)
 *   node attr    _kiln_partition                int, the node's rank
 * Rank 0 is the input-nodes partition (engine inputNodesSubGraph) when the
 * graph has data-like nodes.
 */
#include "plugin.h"
#include "crash.h"
#include "graph_int.h"
#include "partition_graph.h"

uint32_t kiln_engine_count(const kiln_graph *g)
{
    if (!g)
        return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < kiln_registry_count(g->ctx); i++)
        n += kiln_registry_at(g->ctx, i)->kind == KILN_COMP_ENGINE;
    return n;
}

static const kiln_component *engine_at(const kiln_ctx *ctx, uint32_t idx)
{
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind == KILN_COMP_ENGINE && idx-- == 0)
            return c;
    }
    return NULL;
}

const char *kiln_engine_at(const kiln_graph *g, uint32_t i, int32_t *priority)
{
    const kiln_component *c = g ? engine_at(g->ctx, i) : NULL;
    if (c && priority)
        *priority = c->d.engine.priority;
    return c ? c->name : NULL;
}

/* Whether the comma-separated list @p list holds @p item. */
static bool in_list(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && *p == ' ') {
            p++;
            len--;
        }
        while (len && p[len - 1] == ' ')
            len--;
        if (len == n && strncmp(p, item, n) == 0)
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

kiln_status kiln_engine_check(kiln_graph *g, const char *engine, kiln_node_id n, char *why,
                              size_t size)
{
    /* the reason is formatted only for a caller that asks for it: a placement
     * asks every engine in turn, most of them say no */
    char dummy[1];
    if (!why || !size) {
        why = dummy;
        size = 0;
    } else {
        why[0] = 0;
    }
#define WHY(...)                               \
    do {                                       \
        if (size)                              \
            snprintf(why, size, __VA_ARGS__); \
    } while (0)
    if (!g || !engine || !kiln__live(g, n)) {
        WHY("bad arguments");
        return KILN_ERR_INVALID;
    }
    const kiln_component *c = NULL;
    const kiln_op_info *oi = kiln__engine_entry(g->ctx, engine, kiln_node_op(g, n), &c);
    if (!c) {
        WHY("no loaded plugin provides engine '%s'", engine);
        return KILN_ERR_NOT_FOUND;
    }
    const kiln_engine_desc *e = &c->d.engine;
    const char *op = kiln_node_op_str(g, n);
    if (!oi) {
        WHY("no op entry for %s", op);
        return KILN_ERR_UNSUPPORTED;
    }
    /* the dtype rule of core/engine.c: the first output's dtype; formats: every output */
    uint32_t nout = kiln_node_output_count(g, n);
    if (nout && oi->dtype_mask) {
        kiln_dtype dt = kiln_desc_dtype(kiln_node_output_desc(g, n, 0));
        if (!(oi->dtype_mask & (1u << dt))) {
            WHY("dtype %s of output 0 is not in its %s entry", kiln_dtype_name(dt), op);
            return KILN_ERR_UNSUPPORTED;
        }
    }
    for (uint32_t o = 0; o < nout && oi->formats; o++) {
        const char *fmt = kiln_desc_format(g, kiln_node_output_desc(g, n, o));
        if (fmt && !in_list(oi->formats, fmt)) {
            WHY("format %s of output %u is not in its %s entry (%s)", fmt, o, op, oi->formats);
            return KILN_ERR_UNSUPPORTED;
        }
    }
    if (e->supports) {
        void *inst = NULL;
        kiln_error sub;
        kiln_error_clear(&sub);
        if (kiln__engine_instance(c, &inst, &sub) != KILN_OK) {
            char msg[KILN_MSG_SIZE];
            kiln_error_format(&sub, msg, sizeof(msg));
            WHY("engine instance failed: %s", msg);
            return KILN_ERR_UNSUPPORTED;
        }
        kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "engine supports", g, n);
        kiln_activity *prev = kiln__activity_enter(&act);
        bool ok = e->supports(inst, g, n);
        kiln__activity_leave(prev);
        if (!ok) {
            WHY("supports() said no");
            return KILN_ERR_UNSUPPORTED;
        }
    }
    return KILN_OK;
#undef WHY
}

/* ---- partition table ---------------------------------------------------- */

static const char *part_str(const kiln_graph *g, const char *key, uint32_t rank)
{
    const char *const *v = NULL;
    uint32_t n = 0;
    if (!g || !kiln_attrs_get_list_string(g->attrs, key, &v, &n) || rank >= n)
        return NULL;
    return v[rank];
}

uint32_t kiln_graph_partition_count(const kiln_graph *g)
{
    const char *const *v = NULL;
    uint32_t n = 0;
    if (!g || !kiln_attrs_get_list_string(g->attrs, KILN_PART_ENGINES, &v, &n))
        return 0;
    return n;
}

void kiln__partition_name_format(char *buf, size_t size, int64_t seq, uint32_t rank, int64_t k)
{
    if (k < 0)
        snprintf(buf, size, "partition%lld_rank%u_inputNodesSubGraph", (long long)seq, rank);
    else
        snprintf(buf, size, "partition%lld_rank%u_new_sub_graph%lld", (long long)seq, rank,
                 (long long)k);
}

const char *kiln_graph_partition_name(const kiln_graph *g, uint32_t rank)
{
    const int64_t *k = NULL;
    uint32_t n = 0;
    int64_t t = 0;
    if (rank >= kiln_graph_partition_count(g) ||
        !kiln_attrs_get_list_int(g->attrs, KILN_PART_SUBGRAPHS, &k, &n) || rank >= n)
        return NULL;
    kiln_attrs_get_int(g->attrs, KILN_PART_SEQ, &t);
    char buf[96];
    kiln__partition_name_format(buf, sizeof(buf), t, rank, k[rank]);
    /* interning only adds to the context's string table, never to the graph */
    kiln_sym s = kiln_intern((kiln_graph *)g, buf);
    return s ? kiln_sym_str(g, s) : NULL;
}

const char *kiln_graph_partition_engine(const kiln_graph *g, uint32_t rank)
{
    return part_str(g, KILN_PART_ENGINES, rank);
}

const char *kiln_graph_partition_stream_label(const kiln_graph *g, uint32_t rank)
{
    return part_str(g, KILN_PART_LABELS, rank);
}

int32_t kiln_node_partition(const kiln_graph *g, kiln_node_id n)
{
    int64_t r;
    if (!g || !kiln__live(g, n) || !kiln_attrs_get_int(kiln_node_attrs(g, n), KILN_PART_NODE, &r) ||
        r < 0 || r >= (int64_t)kiln_graph_partition_count(g))
        return -1;
    return (int32_t)r;
}
