/*
 * set_input_output_offset_pass.c - SetInputOutputOffsetPass (GE
 * set_input_output_offset_pass.cc; GE_SEMANTICS 6.7, seed 3.1.8).  Runs after
 * memory planning has written `offset` on the descriptors; a graph pass, run on
 * the root and on every subgraph.
 *
 * Zero copy patches user addresses into the model; where an op reads a model
 * input (or writes a model output) at a position inside a larger block, the
 * runtime needs the block's base and the op's position relative to it:
 *   - nodes with `_is_connected_to_data`:
 *       * with `_input_memory_type`: every input whose memory type is not
 *         L1 (65536) / UB (131072) and whose producer is a Data-like node
 *         (followed out of subgraphs through `_parent_node_index`) appends to
 *         that Data `_zero_copy_basic_offset` += Data output offset and
 *         `_zero_copy_relative_offset` += input offset - Data output offset;
 *       * with `continuous_input`: every input fed by a Data whose output
 *         offset differs from the input offset appends the same pair;
 *   - nodes with `_is_connected_to_netoutput`:
 *       * `_no_task` concat-like (`continuous_input` or
 *         `_no_padding_continuous_input`): the root NetOutput gets basic =
 *         output 0 offset and relative = producer output offset - basic for
 *         each input;
 *       * HCCL ops: basic = offset of the first output listed in the attribute,
 *         relative = consumer input offset - basic for each consumer of that
 *         output, appended to the root NetOutput.
 * Descriptors without an offset (-1) contribute nothing.  FFTS+ subgraphs
 * (graph attr `_ffts_plus_sub_graph`) are skipped.  Not idempotent (as in
 * GE): the lists are appended to.
 * Requires: memory planning (offsets).  Preserves: the CFG (attributes only).
 * Complexity: O(n + e) plus O(depth) per subgraph crossing.
 */
#include "mc_passes.h"
#include <string.h>

#define RT_MEMORY_L1 65536
#define RT_MEMORY_UB 131072

typedef struct off_run {
    kiln_pass_ctx *ctx;
    bool changed;
    kiln_status st;
} off_run;

static void append_pair(off_run *r, kiln_graph *g, kiln_node_id n, int64_t basic, int64_t rel)
{
    static const char *const keys[] = {"_zero_copy_basic_offset", "_zero_copy_relative_offset"};
    int64_t vals[2] = {basic, rel};
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (!a) {
        r->st = KILN_ERR_NOMEM;
        return;
    }
    for (int k = 0; k < 2; k++) {
        const int64_t *old = NULL;
        uint32_t cnt = 0;
        kiln_attrs_get_list_int(a, keys[k], &old, &cnt);
        int64_t *nv = kiln_alloc(((size_t)cnt + 1) * sizeof(*nv));
        if (!nv) {
            r->st = KILN_ERR_NOMEM;
            return;
        }
        if (cnt)
            memcpy(nv, old, (size_t)cnt * sizeof(*nv));
        nv[cnt] = vals[k];
        if (kiln_attrs_set_list_int(a, keys[k], nv, cnt + 1) != KILN_OK)
            r->st = KILN_ERR_NOMEM;
        kiln_free(nv);
    }
    r->changed = true;
}

/* The Data-like node feeding (g, n, i), followed out of subgraphs; *dg its graph. */
static kiln_node_id feeding_data(kiln_graph *g, kiln_node_id n, uint32_t i, kiln_graph **dg)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node || !mc_is_data_like(g, p.node))
        return 0;
    for (uint32_t depth = 0; depth < 64; depth++) {
        kiln_graph *parent = kiln_graph_parent(g);
        int64_t pidx = -1;
        if (!parent || !kiln_attrs_get_int(kiln_node_attrs(g, p.node), "_parent_node_index", &pidx))
            break;
        kiln_node_id pn = kiln_graph_parent_node(g);
        if (pidx < 0 || pidx >= (int64_t)kiln_node_input_count(parent, pn))
            break;
        kiln_anchor q = kiln_node_input_peer(parent, pn, (uint32_t)pidx);
        if (!q.node || !mc_is_data_like(parent, q.node))
            break;
        g = parent;
        p = q;
    }
    *dg = g;
    return p.node;
}

static int64_t in_offset(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
    return d ? kiln_desc_offset(d) : -1;
}

static int64_t out_offset(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    return d ? kiln_desc_offset(d) : -1;
}

static void connected_to_data(off_run *r, kiln_graph *g, kiln_node_id n)
{
    const int64_t *mt;
    uint32_t cnt;
    uint32_t nin = kiln_node_input_count(g, n);
    if (kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_input_memory_type", &mt, &cnt)) {
        for (uint32_t i = 0; i < nin && r->st == KILN_OK; i++) {
            /* re-read: appending may have moved the attribute storage */
            kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_input_memory_type", &mt, &cnt);
            if (i < cnt && (mt[i] == RT_MEMORY_L1 || mt[i] == RT_MEMORY_UB))
                continue;
            kiln_graph *dg = NULL;
            kiln_node_id d = feeding_data(g, n, i, &dg);
            int64_t base = d ? out_offset(dg, d, 0) : -1, io = in_offset(g, n, i);
            if (d && base >= 0 && io >= 0)
                append_pair(r, dg, d, base, io - base);
        }
    }
    if (!mc_node_bool(g, n, "continuous_input"))
        return;
    for (uint32_t i = 0; i < nin && r->st == KILN_OK; i++) {
        kiln_graph *dg = NULL;
        kiln_node_id d = feeding_data(g, n, i, &dg);
        int64_t base = d ? out_offset(dg, d, 0) : -1, io = in_offset(g, n, i);
        if (d && base >= 0 && io >= 0 && base != io)
            append_pair(r, dg, d, base, io - base);
    }
}

static void connected_to_netoutput(off_run *r, kiln_graph *g, kiln_node_id n)
{
    kiln_graph *root = kiln_graph_root(g);
    kiln_node_id no = mc_find_netoutput(root);
    if (!no)
        return;
    bool concat = mc_node_bool(g, n, "continuous_input") ||
                  mc_node_bool(g, n, "_no_padding_continuous_input");
    if (mc_node_bool(g, n, "_no_task") && concat) {
        int64_t basic = out_offset(g, n, 0);
        if (basic < 0)
            return;
        for (uint32_t i = 0; i < kiln_node_input_count(g, n) && r->st == KILN_OK; i++) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            int64_t po = p.node ? out_offset(g, p.node, p.index) : -1;
            if (po >= 0)
                append_pair(r, root, no, basic, po - basic);
        }
        return;
    }
    if (!mc_is_hcom(g, n))
        return;
    const int64_t *outs;
    uint32_t cnt;
    if (!kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_is_connected_to_netoutput", &outs,
                                 &cnt) ||
        cnt == 0 || outs[0] < 0 || outs[0] >= (int64_t)kiln_node_output_count(g, n))
        return;
    uint32_t o = (uint32_t)outs[0];
    int64_t basic = out_offset(g, n, o);
    if (basic < 0)
        return;
    for (uint32_t u = kiln_use_first(g, n, o); u && r->st == KILN_OK; u = kiln_use_next(g, u)) {
        kiln_anchor d = kiln_use_dst(g, u);
        int64_t io = in_offset(g, d.node, d.index);
        if (io >= 0)
            append_pair(r, root, no, basic, io - basic);
    }
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    bool ffts = false;
    if (kiln_attrs_get_bool(kiln_graph_attrs(g), "_ffts_plus_sub_graph", &ffts) && ffts)
        return KILN_PASS_NOT_CHANGED;
    off_run r = {ctx, false, KILN_OK};
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && r.st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        if (mc_node_has(g, n, "_is_connected_to_data"))
            connected_to_data(&r, g, n);
        if (r.st == KILN_OK && mc_node_has(g, n, "_is_connected_to_netoutput"))
            connected_to_netoutput(&r, g, n);
    }
    if (r.st != KILN_OK) {
        kiln_errorf(kiln_pass_error(ctx), r.st, "SetInputOutputOffsetPass failed on graph %s",
                    kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    return r.changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_set_input_output_offset_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "SetInputOutputOffsetPass",
    .summary = "record zero-copy base/relative offsets of model inputs and outputs",
    .flags = KILN_PASS_PRESERVES_CFG,
    .run_graph = run,
};
