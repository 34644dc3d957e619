/*
 * ma_subgraphs.c - MemoryAssigner's plans of the subgraphs (If branches,
 * PartitionedCall and While/Loop bodies; docs/memory_planning.md
 * "Subgraphs").
 *
 * GE compiles a known-shape subgraph as a model of its own with its own
 * memory.  kiln does the same for every subgraph whose tensors all have
 * static sizes, at any depth: its buffers are planned by the pipeline's
 * memory planner over the subgraph's own order (one stream: the runtimes run
 * a subgraph's steps in order, inside the task of its parent node), and the
 * runtime lays them out in one region of the planned size per subgraph
 * (kiln_seq_core, seq_load.c).  Regions of different subgraphs are separate:
 * a subgraph's outputs are read by its parent after it ran (the runtimes
 * forward or copy them), so they must outlive its steps.
 *
 * What is a buffer follows the runtime's slots: every output of a node that
 * runs a kernel or a copy; not Data (the parent's input), Const/Constant (the
 * weights), NetOutput, the control-flow nodes (their outputs are views of
 * their subgraphs' or loop's memory), NoOp/AtomicAddrClean/MemSet nor the
 * variables (they keep their value from run to run: a buffer of their own).
 * An output that refers to an input (`ref_input`) is planned too (the
 * runtime may alias it instead: planning it only costs bytes).
 *
 * Lifetimes, in the order written as `_kiln_sub_step` on every node:
 * a buffer lives from its producer's step to the last step that reads it,
 * where reading through
 *   - NetOutput means to the end (the parent reads it afterwards),
 *   - a control-flow node means until the last read of that node's outputs
 *     (a branch may forward its input, so the output is a view of it),
 *   - an output with `ref_input` k means until the last read of that output.
 * Computed in reverse order in O(nodes + edges) per subgraph.
 *
 * Written: output descriptors `offset` (within the region; -1 = not
 * planned), on the subgraph `_kiln_memory_types` ["HBM"],
 * `_kiln_memory_sizes`, `_kiln_memory_loads`, `_kiln_memory_buffers`,
 * `_kiln_memory_alignment`; a subgraph with a dynamic size gets none and its
 * stale ones are removed.  On the root: `_kiln_memory_subgraphs`,
 * `_kiln_memory_subgraph_sizes`, `_kiln_memory_subgraph_loads`,
 * `_kiln_memory_subgraph_buffers` (totals; the report's memory_plan.HBM.subgraphs).
 */
#include "mem_assign.h"
#include <string.h>

#define SUB_ALIGN 64

typedef enum sub_kind { SK_BUFFER, SK_VIEW, SK_NETOUTPUT, SK_FLOW } sub_kind;

static sub_kind kind_of(kiln_graph *g, kiln_node_id n)
{
    static const char *const views[] = {"Data",     "Const",           "Constant",
                                        "NoOp",     "AtomicAddrClean", "MemSet",
                                        "Variable", "VariableV2",      "VarHandleOp"};
    static const char *const flows[] = {"If", "PartitionedCall", "While", "StatelessWhile",
                                        "_While"};
    const char *op = kiln_node_op_str(g, n);
    if (strcmp(op, "NetOutput") == 0)
        return SK_NETOUTPUT;
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
        if (strcmp(op, views[i]) == 0)
            return SK_VIEW;
    for (size_t i = 0; i < sizeof(flows) / sizeof(flows[0]); i++)
        if (strcmp(op, flows[i]) == 0)
            return SK_FLOW;
    return kiln_node_subgraph_count(g, n) ? SK_FLOW : SK_BUFFER;
}

static int64_t out_bytes(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    int64_t numel = kiln_desc_numel(d), bytes;
    size_t esz = kiln_dtype_size(kiln_desc_dtype(d));
    if (numel < 0 || esz == 0 || !kiln_mul_i64(numel, (int64_t)esz, &bytes))
        return -1;
    return bytes;
}

typedef struct sub_plan {
    ma_state *m;
    const char *planner;
    int64_t count, size, load, buffers;
} sub_plan;

static void clear_plan(kiln_graph *g)
{
    static const char *const keys[] = {"_kiln_memory_types", "_kiln_memory_sizes",
                                       "_kiln_memory_loads", "_kiln_memory_buffers",
                                       "_kiln_memory_alignment"};
    kiln_attrs *a = kiln_graph_attrs(g);
    for (size_t i = 0; a && i < sizeof(keys) / sizeof(keys[0]); i++)
        kiln_attrs_remove(a, keys[i]);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        kiln_attrs_remove(kiln_node_attrs_mut(g, n), "_kiln_sub_step");
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
            if (kiln_desc_offset(kiln_node_output_desc(g, n, o)) != -1)
                kiln_desc_set_offset(g, kiln_node_output_desc(g, n, o), -1);
    }
}

/* Plan subgraph @p g (or remove its plan when a size is dynamic). */
static kiln_status plan_one(sub_plan *sp, kiln_graph *g)
{
    ma_state *m = sp->m;
    const kiln_node_id *ord;
    uint32_t n;
    kiln_status st = kiln_graph_topo_order(g, &ord, &n, m->err);
    if (st != KILN_OK)
        return kiln_error_push(m->err, "MemoryAssigner: subgraph %s", kiln_graph_name(g));
    uint32_t limit = kiln_graph_id_limit(g);
    kiln_node_id *order = kiln_alloc(sizeof(kiln_node_id) * ((size_t)n + 1));
    uint32_t *step = kiln_alloc(sizeof(uint32_t) * ((size_t)limit + 1));
    uint32_t *obase = kiln_alloc(sizeof(uint32_t) * ((size_t)limit + 1));
    uint8_t *kind = kiln_alloc((size_t)limit + 1); /* sub_kind by node */
    if (!order || !step || !obase || !kind) {
        kiln_free(order), kiln_free(step), kiln_free(obase), kiln_free(kind);
        return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
    }
    memcpy(order, ord, sizeof(kiln_node_id) * n); /* borrowed until the next edit */
    uint32_t nout = 0;
    bool dynamic = false;
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = order[i];
        step[v] = i;
        obase[v] = nout;
        nout += kiln_node_output_count(g, v);
        kind[v] = (uint8_t)kind_of(g, v);
        if (kind[v] == SK_BUFFER)
            for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++)
                if (out_bytes(g, v, o) < 0 &&
                    kiln_desc_ref_input(kiln_node_output_desc(g, v, o)) < 0)
                    dynamic = true;
    }
    if (dynamic || n == 0) {
        clear_plan(g);
        kiln_free(order), kiln_free(step), kiln_free(obase), kiln_free(kind);
        return KILN_OK;
    }
    /* last[k]: the last step reading output k (in obase numbering) */
    uint32_t *last = kiln_alloc(sizeof(uint32_t) * ((size_t)nout + 1));
    kiln_mem_block *blocks = kiln_alloc(sizeof(kiln_mem_block) * ((size_t)nout + 1));
    uint32_t *block_of = kiln_alloc(sizeof(uint32_t) * ((size_t)nout + 1));
    if (!last || !blocks || !block_of) {
        st = kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        goto done;
    }
    for (uint32_t i = n; i-- > 0;) {
        kiln_node_id v = order[i];
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++) {
            uint32_t l = i;
            for (uint32_t c = kiln_use_first(g, v, o); c; c = kiln_use_next(g, c)) {
                kiln_anchor d = kiln_use_dst(g, c);
                sub_kind dk = (sub_kind)kind[d.node];
                uint32_t e = step[d.node];
                if (dk == SK_NETOUTPUT) {
                    e = n - 1;
                } else if (dk == SK_FLOW) { /* its outputs may be views of this one */
                    for (uint32_t q = 0; q < kiln_node_output_count(g, d.node); q++)
                        if (last[obase[d.node] + q] > e)
                            e = last[obase[d.node] + q];
                } else {
                    for (uint32_t q = 0; q < kiln_node_output_count(g, d.node); q++)
                        if (kiln_desc_ref_input(kiln_node_output_desc(g, d.node, q)) ==
                                (int32_t)d.index &&
                            last[obase[d.node] + q] > e)
                            e = last[obase[d.node] + q];
                }
                if (e > l)
                    l = e;
            }
            last[obase[v] + o] = l;
        }
    }
    uint32_t nb = 0;
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = order[i];
        bool buf = kind[v] == SK_BUFFER;
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++) {
            int64_t bytes = buf ? out_bytes(g, v, o) : -1;
            block_of[obase[v] + o] = MA_NONE;
            if (bytes <= 0)
                continue;
            block_of[obase[v] + o] = nb;
            blocks[nb++] = (kiln_mem_block){.size = bytes,
                                            .offset = -1,
                                            .first_use = i,
                                            .last_use = last[obase[v] + o],
                                            .id = obase[v] + o};
        }
    }
    /* a region is the runtime's own memory, laid out on 64 bytes (a cache
     * line; what the kernels' vector loads want), or the option's alignment
     * when that is smaller: GE's 512 would waste most of a region of small
     * tensors */
    int64_t align = m->align < SUB_ALIGN ? m->align : SUB_ALIGN;
    kiln_mem_problem p = {.struct_size = sizeof(p),
                          .block_count = nb,
                          .blocks = blocks,
                          .alignment = (uint32_t)align,
                          .step_count = n,
                          .stream_count = 1,
                          .memory_type = "HBM"};
    int64_t peak = 0;
    if ((st = kiln_mem_plan_run(m->root, sp->planner, NULL, &p, &peak, m->err)) != KILN_OK) {
        kiln_error_push(m->err, "MemoryAssigner: subgraph %s (%u buffers)", kiln_graph_name(g), nb);
        goto done;
    }
    int64_t load = kiln_mem_problem_load(&p);
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = order[i];
        kiln_attrs *a = kiln_node_attrs_mut(g, v);
        if (!a || kiln_attrs_set_int(a, "_kiln_sub_step", i) != KILN_OK) {
            st = kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
            goto done;
        }
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++) {
            uint32_t b = block_of[obase[v] + o];
            kiln_desc_set_offset(g, kiln_node_output_desc(g, v, o),
                                 b == MA_NONE ? -1 : blocks[b].offset);
        }
    }
    kiln_attrs *ga = kiln_graph_attrs(g);
    const char *types[1] = {"HBM"};
    int64_t sizes[1] = {peak}, loads[1] = {load}, bufs[1] = {nb};
    if (!ga || kiln_attrs_set_list_string(ga, "_kiln_memory_types", types, 1) != KILN_OK ||
        kiln_attrs_set_list_int(ga, "_kiln_memory_sizes", sizes, 1) != KILN_OK ||
        kiln_attrs_set_list_int(ga, "_kiln_memory_loads", loads, 1) != KILN_OK ||
        kiln_attrs_set_list_int(ga, "_kiln_memory_buffers", bufs, 1) != KILN_OK ||
        kiln_attrs_set_int(ga, "_kiln_memory_alignment", align) != KILN_OK) {
        st = kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        goto done;
    }
    sp->count++;
    sp->size += peak;
    sp->load += load;
    sp->buffers += nb;
done:
    kiln_free(order), kiln_free(step), kiln_free(obase), kiln_free(kind);
    kiln_free(last), kiln_free(blocks), kiln_free(block_of);
    return st;
}

/* Every subgraph of every node of @p g, depth first. */
static kiln_status plan_below(sub_plan *sp, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        for (uint32_t i = 0; i < kiln_node_subgraph_count(g, n); i++) {
            kiln_graph *sg = kiln_node_subgraph(g, n, i, NULL);
            if (!sg)
                continue;
            kiln_status st = plan_one(sp, sg);
            if (st == KILN_OK)
                st = plan_below(sp, sg);
            if (st != KILN_OK)
                return st;
        }
    return KILN_OK;
}

/* Switched off: no stale plan may survive (the runtime would use it). */
static void clear_below(kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        for (uint32_t i = 0; i < kiln_node_subgraph_count(g, n); i++) {
            kiln_graph *sg = kiln_node_subgraph(g, n, i, NULL);
            if (sg) {
                clear_plan(sg);
                clear_below(sg);
            }
        }
}

kiln_status ma_plan_subgraphs(ma_state *m, const char *planner, bool enabled)
{
    sub_plan sp = {m, planner, 0, 0, 0, 0};
    kiln_status st = KILN_OK;
    if (enabled)
        st = plan_below(&sp, m->root);
    else
        clear_below(m->root);
    if (st != KILN_OK)
        return st;
    kiln_attrs *ra = kiln_graph_attrs(m->root);
    if (!ra || kiln_attrs_set_int(ra, "_kiln_memory_subgraphs", sp.count) != KILN_OK ||
        kiln_attrs_set_int(ra, "_kiln_memory_subgraph_sizes", sp.size) != KILN_OK ||
        kiln_attrs_set_int(ra, "_kiln_memory_subgraph_loads", sp.load) != KILN_OK ||
        kiln_attrs_set_int(ra, "_kiln_memory_subgraph_buffers", sp.buffers) != KILN_OK)
        return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
    kiln_pass_stat_add(m->ctx, "subgraphs_planned", sp.count);
    kiln_pass_stat_add(m->ctx, "subgraph_bytes", sp.size);
    return KILN_OK;
}
