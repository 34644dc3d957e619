/*
 * placed_lowering.c - PlacedLowering: the copies between storage locations
 * (seed ge-memory-conflict-handling.txt 4.4; GE builds them when it lowers a
 * node's result to the placement a consumer needs, runtime/v2
 * lowering/placement/placed_lowering_result.cc).  kiln makes them nodes of
 * the compiled graph, before StreamAllocator and MemoryAssigner, so that
 * they get streams, events and planned memory like any other task.
 *
 * Where a tensor is: the producer output's `_output_memory_type` (GE's
 * codes; none = HBM).  Where a consumer needs it: the consumer's
 * `_input_memory_type` (GE ATTR_NAME_INPUT_MEM_TYPE_LIST, one code per
 * input); an input without one reads the tensor where it is.  Codes fall in
 * three placements: host (0x81 HOST, 0x91 HOST_SVM), P2P (0x10 P2P_HBM, 0x11
 * P2P) and device (every other code).  For an edge whose two placements
 * differ:
 *
 *   host   -> device, P2P   CopyH2D
 *   device -> host          SyncStream + CopyD2H + FreeMemory
 *   P2P    -> host          SyncStream + CopyD2H
 *   device -> P2P           CopyD2D (GE's "P2P copy")
 *   P2P    -> device        CopyD2D
 *
 * The copy's output has the consumer's memory type and the producer's
 * descriptor; every consumer of the same output that needs the same type
 * reads the one copy.  SyncStream has a control edge from the producer and
 * one to the CopyD2H (the device work is done before the copy starts);
 * FreeMemory reads the host copy and has control edges from its consumers,
 * so the host buffer's life ends after the last of them.  The new nodes carry
 * `_kiln_engine` = rts (whose kernels copy between the arenas) and the
 * producer's `_user_stream_label`.  Root graph only (the graph the memory
 * plan covers); O(nodes + edges).
 */
#include "mem_assign.h"

#include <stdio.h>
#include <string.h>

enum { PL_DEVICE = 0, PL_HOST = 1, PL_P2P = 2 };

#define CODE_HBM 0x2
#define CODE_P2P 0x11
#define CODE_HOST 0x81

static int placement(int64_t code)
{
    if (code == 0x81 || code == 0x91)
        return PL_HOST;
    if (code == 0x10 || code == 0x11)
        return PL_P2P;
    return PL_DEVICE;
}

static int64_t out_code(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const int64_t *v = NULL;
    uint32_t cnt = 0;
    if (kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_output_memory_type", &v, &cnt) && o < cnt)
        return v[o];
    return CODE_HBM;
}

/* The code input @p i of @p n needs, or -1 (none: it reads the tensor where it is). */
static int64_t in_code(const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    const int64_t *v = NULL;
    uint32_t cnt = 0;
    if (kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_input_memory_type", &v, &cnt) && i < cnt)
        return v[i];
    return -1;
}

typedef struct pl_run {
    kiln_pass_ctx *ctx;
    kiln_graph *g;
    kiln_error *err;
    int64_t copies, syncs, frees;
} pl_run;

/* A new node named after @p base and @p what (a suffix on a clash). */
static kiln_node_id add(pl_run *r, const char *base, const char *what, uint32_t nin, uint32_t nout)
{
    char name[512];
    snprintf(name, sizeof(name), "%s_%s", base, what);
    kiln_node_id n = kiln_graph_add_node(r->g, name, what, nin, nout);
    for (uint32_t k = 1; !n && k < 1000000 && !kiln_graph_oom(r->g); k++) {
        snprintf(name, sizeof(name), "%s_%s_%u", base, what, k);
        n = kiln_graph_add_node(r->g, name, what, nin, nout);
    }
    if (n) {
        kiln_attrs *a = kiln_node_attrs_mut(r->g, n);
        if (!a || kiln_attrs_set_string(a, "_kiln_engine", "rts") != KILN_OK)
            return 0;
    }
    return n;
}

static kiln_status nomem(pl_run *r)
{
    return kiln_errorf(r->err, KILN_ERR_NOMEM, "PlacedLowering: out of memory");
}

/* The copy of (p, o) into memory type @p code (and its FreeMemory, or 0). */
typedef struct pl_copy {
    int64_t code;
    kiln_node_id copy, free;
} pl_copy;

static kiln_status make_copy(pl_run *r, kiln_node_id p, uint32_t o, int64_t code, pl_copy *out)
{
    kiln_graph *g = r->g;
    int from = placement(out_code(g, p, o)), to = placement(code);
    const char *op = from == PL_HOST ? "CopyH2D" : to == PL_HOST ? "CopyD2H" : "CopyD2D";
    char base[400];
    snprintf(base, sizeof(base), "%s_%u", kiln_node_name_str(g, p), o);
    kiln_node_id c = add(r, base, op, 1, 1);
    if (!c || kiln_edge_add(g, p, o, c, 0) != KILN_OK)
        return nomem(r);
    kiln_tensor_desc *d = kiln_node_output_desc(g, c, 0);
    const char *label = NULL;
    if (kiln_desc_copy(g, d, kiln_node_output_desc(g, p, o)) != KILN_OK ||
        kiln_attrs_set_list_int(kiln_node_attrs_mut(g, c), "_output_memory_type", &code, 1) !=
            KILN_OK)
        return nomem(r);
    kiln_desc_set_offset(g, d, -1);
    kiln_desc_set_ref_input(g, d, -1);
    if (kiln_attrs_get_string(kiln_node_attrs(g, p), "_user_stream_label", &label) &&
        kiln_attrs_set_string(kiln_node_attrs_mut(g, c), "_user_stream_label", label) != KILN_OK)
        return nomem(r);
    r->copies++;
    kiln_pass_explain(r->ctx, g, c, "PlacedLowering: %s:%u is in %s memory, a consumer needs %s",
                      kiln_node_name_str(g, p), o,
                      from == PL_HOST ? "host" : from == PL_P2P ? "P2P" : "device",
                      to == PL_HOST ? "host" : to == PL_P2P ? "P2P" : "device");
    *out = (pl_copy){code, c, 0};
    if (to == PL_HOST) { /* the device work is done before the copy starts */
        kiln_node_id s = add(r, base, "SyncStream", 0, 0);
        if (!s || kiln_ctrl_add(g, p, s) != KILN_OK || kiln_ctrl_add(g, s, c) != KILN_OK)
            return nomem(r);
        r->syncs++;
    }
    if (to == PL_HOST && from == PL_DEVICE) { /* the host copy's life ends after its readers */
        kiln_node_id f = add(r, base, "FreeMemory", 1, 0);
        if (!f || kiln_edge_add(g, c, 0, f, 0) != KILN_OK)
            return nomem(r);
        out->free = f;
        r->frees++;
    }
    return KILN_OK;
}

/* Consumer input @p a reads the copy instead of (p, o). */
static kiln_status attach(pl_run *r, const pl_copy *c, kiln_anchor a)
{
    kiln_graph *g = r->g;
    if (kiln_edge_remove(g, a.node, a.index) != KILN_OK ||
        kiln_edge_add(g, c->copy, 0, a.node, a.index) != KILN_OK)
        return nomem(r);
    if (c->free && !kiln_ctrl_exists(g, a.node, c->free) && kiln_ctrl_add(g, a.node, c->free) != KILN_OK)
        return nomem(r);
    return KILN_OK;
}

/* Every consumer of (p, o) that needs another placement reads a copy. */
static kiln_status lower_output(pl_run *r, kiln_node_id p, uint32_t o)
{
    kiln_graph *g = r->g;
    int from = placement(out_code(g, p, o));
    pl_copy made[16];
    uint32_t nmade = 0;
    for (;;) {
        /* one consumer at a time: attach() changes the use list */
        kiln_anchor a = {0, 0};
        int64_t want = -1;
        for (uint32_t u = kiln_use_first(g, p, o); u; u = kiln_use_next(g, u)) {
            kiln_anchor d = kiln_use_dst(g, u);
            int64_t w = in_code(g, d.node, d.index);
            if (w >= 0 && placement(w) != from) {
                a = d;
                want = w;
                break;
            }
        }
        if (!a.node)
            return KILN_OK;
        const pl_copy *c = NULL;
        for (uint32_t k = 0; k < nmade && !c; k++)
            if (made[k].code == want)
                c = &made[k];
        if (!c) {
            if (nmade == sizeof(made) / sizeof(made[0]))
                return kiln_errorf(r->err, KILN_ERR_LIMIT,
                                   "PlacedLowering: %s:%u is read in more than %u memory types",
                                   kiln_node_name_str(g, p), o, nmade);
            kiln_status st = make_copy(r, p, o, want, &made[nmade]);
            if (st != KILN_OK)
                return st;
            c = &made[nmade++];
        }
        kiln_status st = attach(r, c, a);
        if (st != KILN_OK)
            return st;
    }
}

static kiln_pass_result pl_run_graph(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    pl_run r = {ctx, g, kiln_pass_error(ctx), 0, 0, 0};
    kiln_status st = KILN_OK;
    /* the producers before any copy is added: new nodes are not revisited;
     * with `_input_memory_type` on no node (never interned) no consumer needs
     * another placement */
    uint32_t limit = kiln_sym_lookup(g, "_input_memory_type") ? kiln_graph_id_limit(g) : 0;
    for (kiln_node_id p = kiln_graph_next_node(g, 0); st == KILN_OK && p && p < limit;
         p = kiln_graph_next_node(g, p))
        for (uint32_t o = 0; st == KILN_OK && o < kiln_node_output_count(g, p); o++)
            st = lower_output(&r, p, o);
    kiln_pass_stat_add(ctx, "copies", r.copies);
    kiln_pass_stat_add(ctx, "sync_streams", r.syncs);
    kiln_pass_stat_add(ctx, "free_memories", r.frees);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return r.copies ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_placed_lowering_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "PlacedLowering",
    .summary = "copies between storage locations: CopyH2D, SyncStream + CopyD2H (+ FreeMemory), "
               "CopyD2D where a consumer's _input_memory_type differs from its producer's "
               "_output_memory_type",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = pl_run_graph,
};
