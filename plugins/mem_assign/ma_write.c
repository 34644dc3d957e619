/*
 * ma_write.c - MemoryAssigner writes the plan on the graph (docs/build.md):
 *   output descriptors   `offset` (the symbol's; -1 when not planned),
 *                        `size` (running size), `memory_type`;
 *                        the outputs of a no-padding continuous-output node
 *                        with inputs are slices of input 0, in order;
 *   input descriptors    of their own: the producer's offset and type;
 *                        with `_input_mem_type_list` (GE SetInputOffset),
 *                        an input whose descriptor carries a pre-set offset
 *                        (one of the first 64 inputs) keeps it when its type
 *                        is on-chip (L1, UB) and gets producer + pre-set
 *                        otherwise, with `_inner_offset` = pre-set + the
 *                        inner offset it had; an output that shares such an
 *                        input (ref_input, reuse_input) takes its offset and
 *                        inner offset.  The pre-set values are kept in
 *                        `_kiln_preset_offset` / `_kiln_preset_inner_offset`
 *                        so that planning again gives the same result;
 *   nodes                `_kiln_workspace_bytes`, `_kiln_workspace_offsets`;
 *   the root             `_kiln_memory_types`, `_kiln_memory_sizes`,
 *                        `_kiln_memory_loads`, `_kiln_memory_buffers`,
 *                        `_kiln_memory_dynamic` (one per type),
 *                        `_kiln_memory_planner`, `_kiln_memory_alignment`,
 *                        `_kiln_memory_report_buffers`, and GE's
 *                        `output_reuse_input_mem_indexes` (ATTR_MODEL_OUTPUT_
 *                        REUSE_INPUT_MEM_INDEXES): flat pairs output, input
 *                        for each model output that shares a model input's
 *                        memory symbol (inplace on a model input), or absent.
 * Nodes are visited in schedule order, so a slice's input offset is known.
 * No timing goes on the graph, the counters or the log (a compile's outputs
 * never depend on the clock): the report's time_ms is the pass's wall time.
 * Complexity: O(nodes + anchors).
 */
#include "mem_assign.h"
#include <string.h>

static int64_t sym_offset(ma_state *m, uint32_t s)
{
    if (s == KILN_SYMTAB_NONE || m->kind[s] != MA_PLAN)
        return -1;
    int64_t rel;
    uint32_t r = ma_find(m, s, &rel);
    int64_t base = m->blk[r] == MA_NONE ? 0 : m->types[m->stype[r]].blocks[m->blk[r]].offset;
    return base + (m->rel ? m->rel[r] : 0) + rel;
}

static bool slices(const ma_state *m, kiln_node_id n)
{
    return ma_node_bool(m->root, n, m->nm.nopad_out, "_no_padding_continuous_output") &&
           kiln_node_input_count(m->root, n) > 0;
}

static int64_t producer_offset(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    return p.node ? kiln_desc_offset(kiln_node_output_desc(g, p.node, p.index)) : -1;
}

static bool on_chip(const char *type)
{
    return strcmp(type, "L1") == 0 || strcmp(type, "UB") == 0;
}

/* The input an output writes in place (ref_input, reuse_input), or -1. */
static int64_t shared_input(const ma_state *m, kiln_node_id n, uint32_t o)
{
    kiln_graph *g = m->root;
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (kiln_desc_ref_input(d) >= 0)
        return kiln_desc_ref_input(d);
    bool reuse = false;
    int64_t k = 0;
    if (m->nm.reuse_input && kiln_attrs_get_bool(kiln_desc_attrs(d), "reuse_input", &reuse) &&
        reuse)
        return kiln_attrs_get_int(kiln_desc_attrs(d), "reuse_input_index", &k) ? k : 0;
    return -1;
}

/* A pre-set value of an input descriptor: the kept copy, else @p now (kept). */
static bool preset_value(kiln_attrs *a, const char *key, int64_t now, int64_t *out)
{
    if (kiln_attrs_get_int(a, key, out))
        return true;
    *out = now;
    return kiln_attrs_set_int(a, key, now) == KILN_OK;
}

/*
 * GE SetInputOffset for a node with `_input_mem_type_list`: places the inputs
 * whose descriptors carry a pre-set offset; bit i of *placed says input i was.
 */
static kiln_status set_input_offsets(ma_state *m, kiln_node_id n, uint64_t *placed)
{
    kiln_graph *g = m->root;
    const char *const *types = NULL;
    uint32_t ntypes = 0, nin = kiln_node_input_count(g, n);
    *placed = 0;
    if (!m->nm.input_mem_types ||
        !kiln_attrs_get_list_string(kiln_node_attrs(g, n), "_input_mem_type_list", &types, &ntypes))
        return KILN_OK;
    for (uint32_t i = 0; i < nin && i < ntypes && i < 64; i++) {
        if (!kiln_node_input_peer(g, n, i).node || !kiln_node_input_has_desc(g, n, i))
            continue;
        kiln_tensor_desc *d = kiln_node_input_desc_mut(g, n, i);
        kiln_attrs *a = d ? kiln_desc_attrs_mut(g, d) : NULL;
        if (!a)
            return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        int64_t preset = -1, inner = 0;
        if (!kiln_attrs_has(a, "_kiln_preset_offset") && kiln_desc_offset(d) < 0)
            continue; /* no pre-set offset: the producer's, as for any input */
        kiln_attrs_get_int(a, "_inner_offset", &inner);
        if (!preset_value(a, "_kiln_preset_offset", kiln_desc_offset(d), &preset) ||
            !preset_value(a, "_kiln_preset_inner_offset", inner, &inner))
            return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        *placed |= 1ull << i;
        kiln_desc_set_memory_type(g, d, types[i]);
        if (on_chip(types[i])) {
            kiln_desc_set_offset(g, d, preset); /* L1 / UB: the pre-set offset is the place */
            continue;
        }
        int64_t base = producer_offset(g, n, i);
        kiln_desc_set_offset(g, d, base >= 0 ? base + preset : -1);
        if (kiln_attrs_set_int(a, "_inner_offset", preset + inner) != KILN_OK)
            return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
    }
    return KILN_OK;
}

static kiln_status write_node(ma_state *m, kiln_node_id n)
{
    kiln_graph *g = m->root;
    uint32_t nout = kiln_node_output_count(g, n), nin = kiln_node_input_count(g, n);
    bool views = slices(m, n);
    int64_t at = views ? producer_offset(g, n, 0) : -1;
    uint64_t placed = 0;
    kiln_status st = set_input_offsets(m, n, &placed);
    if (st != KILN_OK)
        return st;
    for (uint32_t o = 0; o < nout; o++) {
        kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        uint32_t s = kiln_symtab_symbol(m->st, g, n, o, true);
        int64_t size = m->out_size[m->out_base[n] + o];
        int64_t off = sym_offset(m, s);
        if (views && off >= 0) {
            off = at;
            at = at >= 0 && size > 0 ? at + size : at;
        }
        int64_t k = shared_input(m, n, o);
        if (k >= 0 && k < 64 && (placed >> k & 1)) {
            /* it writes a placed input: that input's offset and inner offset */
            const kiln_tensor_desc *in = kiln_node_input_desc(g, n, (uint32_t)k);
            int64_t inner = 0;
            off = kiln_desc_offset(in);
            kiln_attrs *oa = kiln_desc_attrs_mut(g, d);
            if (!oa)
                return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
            if (kiln_attrs_get_int(kiln_desc_attrs(in), "_inner_offset", &inner) &&
                kiln_attrs_set_int(oa, "_inner_offset", inner) != KILN_OK)
                return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        }
        kiln_desc_set_offset(g, d, off);
        kiln_desc_set_size(g, d, size);
        if (s != KILN_SYMTAB_NONE && m->kind[s] != MA_ONCHIP && m->kind[s] != MA_ABSENT)
            kiln_desc_set_memory_type(g, d, m->types[m->stype[s]].name);
    }
    for (uint32_t i = 0; i < nin; i++) {
        if (!kiln_node_input_has_desc(g, n, i) || (i < 64 && (placed >> i & 1)))
            continue;
        kiln_tensor_desc *d = kiln_node_input_desc_mut(g, n, i);
        if (!d)
            return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        kiln_desc_set_offset(g, d, producer_offset(g, n, i));
        if (p.node)
            kiln_desc_set_memory_type(
                g, d, kiln_desc_memory_type(g, kiln_node_output_desc(g, p.node, p.index)));
    }
    uint32_t w0 = m->ws_base ? m->ws_base[n] : 0, nw = m->ws_base ? m->ws_base[n + 1] - w0 : 0;
    if (!nw && !m->nm.ws_bytes && !m->nm.ws_offsets)
        return KILN_OK; /* no node has workspace attributes to remove */
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (!a)
        return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
    if (!nw) {
        kiln_attrs_remove(a, "_kiln_workspace_bytes");
        kiln_attrs_remove(a, "_kiln_workspace_offsets");
        return KILN_OK;
    }
    uint32_t hbm = ma_type_index(m, "HBM");
    int64_t offs[KILN_MAX_WORKSPACES];
    for (uint32_t w = 0; w < nw; w++) {
        uint32_t b = m->ws_block[w0 + w];
        offs[w] = b == MA_NONE ? -1 : m->types[hbm].blocks[b].offset;
    }
    st = kiln_attrs_set_list_int(a, "_kiln_workspace_bytes", m->ws_size + w0, nw);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(a, "_kiln_workspace_offsets", offs, nw);
    return st;
}

static kiln_status write_root(ma_state *m, const char *planner, bool report)
{
    kiln_attrs *a = kiln_graph_attrs(m->root);
    const char *names[MA_MAX_TYPES];
    int64_t sizes[MA_MAX_TYPES], loads[MA_MAX_TYPES], bufs[MA_MAX_TYPES], dyn[MA_MAX_TYPES];
    for (uint32_t t = 0; t < m->ntypes; t++) {
        const ma_type *ty = &m->types[t];
        names[t] = ty->name;
        sizes[t] = ty->peak;
        loads[t] = ty->load;
        bufs[t] = ty->buffers;
        dyn[t] = ty->dynamic;
        kiln_pass_stat_add(m->ctx, "buffers", ty->buffers);
        kiln_pass_stat_add(m->ctx, "dynamic", ty->dynamic);
    }
    kiln_status st = kiln_attrs_set_list_string(a, "_kiln_memory_types", names, m->ntypes);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(a, "_kiln_memory_sizes", sizes, m->ntypes);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(a, "_kiln_memory_loads", loads, m->ntypes);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(a, "_kiln_memory_buffers", bufs, m->ntypes);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(a, "_kiln_memory_dynamic", dyn, m->ntypes);
    if (st == KILN_OK)
        st = kiln_attrs_set_string(a, "_kiln_memory_planner", planner);
    if (st == KILN_OK)
        st = kiln_attrs_set_int(a, "_kiln_memory_alignment", m->align);
    if (st == KILN_OK)
        st = kiln_attrs_set_bool(a, "_kiln_memory_report_buffers", report);
    return st;
}

/* Model outputs whose memory symbol holds a model input (GE's inplace IO). */
static kiln_status write_io_reuse(ma_state *m)
{
    kiln_graph *g = m->root;
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && !no && m->nm.netoutput;
         n = kiln_graph_next_node(g, n))
        if (kiln_node_op(g, n) == m->nm.netoutput)
            no = n;
    uint32_t nout = no ? kiln_node_input_count(g, no) : 0, k = 0;
    int64_t *pairs = nout ? kiln_alloc(sizeof(int64_t) * 2 * nout) : NULL;
    if (nout && !pairs)
        return kiln_errorf(m->err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j < nout; j++) {
        uint32_t sym = kiln_symtab_symbol(m->st, g, no, j, false), na = 0;
        const kiln_symtab_anchor *an = kiln_symtab_anchors(m->st, sym, &na);
        for (uint32_t x = 0; x < na; x++) {
            int64_t idx;
            if (an[x].graph != 0 || !an[x].is_output || !m->nm.data[0] ||
                kiln_node_op(g, an[x].node) != m->nm.data[0] ||
                !kiln_attrs_get_int(kiln_node_attrs(g, an[x].node), "index", &idx))
                continue;
            pairs[2 * k] = j;
            pairs[2 * k + 1] = idx;
            k++;
            break;
        }
    }
    kiln_attrs *a = kiln_graph_attrs(g);
    /* the user's declaration (GE: the option's string, "in,out|...") wins */
    const char *opt = kiln_pass_session_option(m->ctx, "ge.exec.outputReuseInputMemIndexes");
    kiln_status st =
        opt && opt[0] ? kiln_attrs_set_string(a, "output_reuse_input_mem_indexes", opt)
        : k           ? kiln_attrs_set_list_int(a, "output_reuse_input_mem_indexes", pairs, 2 * k)
                      : (kiln_attrs_remove(a, "output_reuse_input_mem_indexes"), KILN_OK);
    kiln_free(pairs);
    return st;
}

kiln_status ma_write(ma_state *m, const char *planner, bool report_buffers)
{
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < m->steps && st == KILN_OK; i++)
        st = write_node(m, kiln_schedule_node(m->s, i));
    if (st == KILN_OK)
        st = write_root(m, planner, report_buffers);
    if (st == KILN_OK)
        st = write_io_reuse(m);
    if (st != KILN_OK)
        return kiln_error_push(m->err, "writing the plan");
    return KILN_OK;
}
