/*
 * ma_buffers.c - MemoryAssigner's view of the graph: running sizes, memory
 * symbols, continuous components, and one kiln_mem_problem per memory type.
 *
 *   1. ma_collect: each root node's output and workspace sizes
 *      (kiln_engine_running_param for a node placed on a loaded engine, the
 *      descriptors' numel x dtype size otherwise: ge_local, unplaced); each symbol's size (max over its root
 *      outputs), kind (planned, zero-copy, weight, on-chip, dynamic), memory
 *      type (`_output_memory_type`, GE codes, default HBM) and life (first
 *      step of a node touching it .. kiln_schedule_release_step of all of
 *      them; variables and fixed-address outputs: the whole run); then the
 *      continuous groups as a weighted union-find (offset(b) = offset(a) +
 *      delta), so nested groups (a concat feeding a concat) become one
 *      component with consistent relative offsets.  A planned symbol's size,
 *      life, stream and order key go straight into a candidate block; per
 *      symbol only its kind, type and block index stay (6 bytes: a large
 *      graph has a million symbols), the union-find only when a group exists.
 *   2. ma_build_problems: one block per component (members merged into the
 *      root's candidate) and per workspace, each sized to the alignment,
 *      sorted in place by key; fixed-address components pinned at the head
 *      of their arena.
 * Complexity: O(anchors + nodes) plus the planner.
 */
#include "mem_assign.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ma_op_in(const kiln_graph *g, kiln_node_id n, const kiln_sym *ops, uint32_t cnt)
{
    kiln_sym op = kiln_node_op(g, n);
    for (uint32_t i = 0; i < cnt; i++)
        if (ops[i] && ops[i] == op)
            return true;
    return false;
}

bool ma_node_bool(const kiln_graph *g, kiln_node_id n, kiln_sym sym, const char *key)
{
    bool b = false;
    return sym && kiln_attrs_get_bool(kiln_node_attrs(g, n), key, &b) && b;
}

void ma_names_init(ma_state *m)
{
    static const char *const data_ops[4] = {"Data", "RefData", "AippData", "AnnData"};
    static const char *const var_ops[3] = {"Variable", "VariableV2", "VarHandleOp"};
    static const char *const const_ops[4] = {"Const", "Constant", "FileConstant",
                                             "ConstPlaceHolder"};
    const kiln_graph *g = m->root;
    ma_names *nm = &m->nm;
    for (int i = 0; i < 4; i++) {
        nm->data[i] = kiln_sym_lookup(g, data_ops[i]);
        nm->cnst[i] = kiln_sym_lookup(g, const_ops[i]);
    }
    for (int i = 0; i < 3; i++)
        nm->var[i] = kiln_sym_lookup(g, var_ops[i]);
    nm->netoutput = kiln_sym_lookup(g, "NetOutput");
    nm->fixed_addr = kiln_sym_lookup(g, "_alloc_fixed_addr");
    nm->out_mem_type = kiln_sym_lookup(g, "_output_memory_type");
    nm->cont_in = kiln_sym_lookup(g, "continuous_input");
    nm->cont_out = kiln_sym_lookup(g, "continuous_output");
    nm->nopad_in = kiln_sym_lookup(g, "_no_padding_continuous_input");
    nm->nopad_out = kiln_sym_lookup(g, "_no_padding_continuous_output");
    nm->reuse_input = kiln_sym_lookup(g, "reuse_input");
    nm->input_mem_types = kiln_sym_lookup(g, "_input_mem_type_list");
    nm->ws_bytes = kiln_sym_lookup(g, "_kiln_workspace_bytes");
    nm->ws_offsets = kiln_sym_lookup(g, "_kiln_workspace_offsets");
    nm->engine = kiln_sym_lookup(g, "_kiln_engine");
}

#define RT_MEMORY_L1 0x10000
#define RT_MEMORY_UB 0x20000

const char *ma_type_name(int64_t code)
{
    switch (code) {
    case 0x0: case 0x2: return "HBM";      /* RT_MEMORY_DEFAULT, RT_MEMORY_HBM */
    case 0x3: return "RDMA_HBM";
    case 0x4: return "DDR";
    case 0x8: return "SPM";
    case 0x10: return "P2P_HBM";
    case 0x11: return "P2P";               /* RT_MEMORY_P2P_DDR */
    case 0x20: return "DDR_NC";
    case 0x40: return "TS";
    case 0x81: return "HOST";              /* RT_MEMORY_HOST */
    case 0x90: return "SVM";
    case 0x91: return "HOST_SVM";
    default: return NULL;
    }
}

uint32_t ma_type_index(ma_state *m, const char *name)
{
    for (uint32_t i = 0; i < m->ntypes; i++)
        if (strcmp(m->types[i].name, name) == 0)
            return i;
    if (m->ntypes == MA_MAX_TYPES)
        return MA_NONE;
    m->types[m->ntypes].name = name;
    return m->ntypes++;
}

static kiln_status oom(ma_state *m)
{
    return kiln_errorf(m->err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
}

/* ---- running parameters -------------------------------------------------- */

/* The loaded engines' names, read once per run (kiln_engine_at walks the
 * registry: asking it for every node made this pass quadratic in practice). */
typedef struct engine_set {
    const char *name[64];
    uint32_t n;
    const char *last; /* the last name asked (placements repeat), and its answer */
    bool last_loaded;
} engine_set;

static void engine_set_init(kiln_graph *g, engine_set *e)
{
    uint32_t n = kiln_engine_count(g);
    e->n = 0;
    e->last = NULL;
    e->last_loaded = false;
    for (uint32_t i = 0; i < n && e->n < 64; i++)
        e->name[e->n++] = kiln_engine_at(g, i, NULL);
}

/* Whether a loaded engine is called @p name (not ge_local, unplaced, ...). */
static bool engine_loaded(engine_set *e, const char *name)
{
    if (name == e->last)
        return e->last_loaded;
    bool found = false;
    for (uint32_t i = 0; i < e->n && !found; i++)
        found = strcmp(e->name[i], name) == 0;
    e->last = name;
    e->last_loaded = found;
    return found;
}

static kiln_status running_params(ma_state *m)
{
    kiln_graph *g = m->root;
    uint32_t nout = 0, nws = 0;
    m->limit = kiln_graph_id_limit(g);
    m->out_base = kiln_alloc(((size_t)m->limit + 1) * sizeof(uint32_t));
    m->ws_base = kiln_alloc(((size_t)m->limit + 1) * sizeof(uint32_t));
    if (!m->out_base || !m->ws_base)
        return oom(m);
    for (kiln_node_id n = 0; n < m->limit; n++) {
        m->out_base[n] = nout;
        if (kiln_node_is_live(g, n))
            nout += kiln_node_output_count(g, n);
    }
    m->out_base[m->limit] = nout;
    m->out_size = kiln_alloc(((size_t)nout + 1) * sizeof(int64_t));
    if (!m->out_size)
        return oom(m);
    int64_t *ws = NULL; /* workspace sizes in node order, grown as met */
    uint32_t ws_cap = 0;
    kiln_status st = KILN_OK;
    engine_set engines;
    engine_set_init(g, &engines);
    for (kiln_node_id n = 0; n < m->limit && st == KILN_OK; n++) {
        m->ws_base[n] = nws;
        if (!kiln_node_is_live(g, n))
            continue;
        kiln_running_param rp = {.struct_size = sizeof(rp),
                                 .output_sizes = m->out_size + m->out_base[n]};
        const char *engine = NULL;
        if (m->nm.engine &&
            kiln_attrs_get_string(kiln_node_attrs(g, n), "_kiln_engine", &engine) &&
            engine_loaded(&engines, engine)) {
            st = kiln_engine_running_param(g, n, &rp, NULL, m->err);
        } else {
            rp.workspace_count = 0;
            for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
                const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
                int64_t numel = kiln_desc_numel(d);
                size_t es = kiln_dtype_size(kiln_desc_dtype(d));
                rp.output_sizes[o] = numel >= 0 && es && numel <= INT64_MAX / (int64_t)es
                                         ? numel * (int64_t)es
                                         : -1;
            }
        }
        if (st == KILN_OK && rp.workspace_count && nws + rp.workspace_count > ws_cap) {
            uint32_t cap = ws_cap ? 2 * ws_cap : 64;
            while (cap < nws + rp.workspace_count)
                cap *= 2;
            int64_t *nw = kiln_alloc((size_t)cap * sizeof(int64_t));
            if (!nw) {
                st = oom(m);
                break;
            }
            if (nws)
                memcpy(nw, ws, (size_t)nws * sizeof(int64_t));
            kiln_free(ws);
            ws = nw;
            ws_cap = cap;
        }
        for (uint32_t w = 0; st == KILN_OK && w < rp.workspace_count; w++)
            ws[nws + w] = rp.workspace_sizes[w];
        nws += rp.workspace_count;
    }
    m->ws_base[m->limit] = nws;
    if (!nws) { /* the usual case: no per-node array to keep */
        kiln_free(m->ws_base);
        m->ws_base = NULL;
    }
    m->ws_size = kiln_alloc(((size_t)nws + 1) * sizeof(int64_t));
    m->ws_off = kiln_alloc(((size_t)nws + 1) * sizeof(int64_t));
    m->ws_block = kiln_alloc(((size_t)nws + 1) * sizeof(uint32_t));
    if (st == KILN_OK && (!m->ws_size || !m->ws_off || !m->ws_block))
        st = oom(m);
    for (uint32_t w = 0; w < nws && st == KILN_OK; w++) {
        m->ws_size[w] = ws[w];
        m->ws_off[w] = -1;
        m->ws_block[w] = MA_NONE;
    }
    kiln_free(ws);
    if (st != KILN_OK)
        kiln_error_push(m->err, "running parameters");
    return st;
}

/* ---- symbols ------------------------------------------------------------- */

/* Memory type of output @p o of @p n: its name, NULL for on-chip (L1/UB). */
static const char *out_type(const ma_state *m, kiln_node_id n, uint32_t o, bool *onchip)
{
    const kiln_graph *g = m->root;
    const int64_t *v = NULL;
    uint32_t cnt = 0;
    *onchip = false;
    if (!m->nm.out_mem_type ||
        !kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_output_memory_type", &v, &cnt) ||
        o >= cnt)
        return "HBM";
    if (v[o] == RT_MEMORY_L1 || v[o] == RT_MEMORY_UB) {
        *onchip = true;
        return NULL;
    }
    const char *name = ma_type_name(v[o]);
    return name ? name : "HBM";
}

static bool fixed_output(const ma_state *m, kiln_node_id n, uint32_t o)
{
    const kiln_graph *g = m->root;
    int64_t fi = -1;
    return m->nm.fixed_addr && kiln_attrs_has(kiln_node_attrs(g, n), "_alloc_fixed_addr") &&
           kiln_attrs_get_int(kiln_node_attrs(g, n), "_alloc_fixed_addr_index", &fi) &&
           fi == (int64_t)o;
}

/* A planned symbol's candidate block (in symbol order, per memory type),
 * its key in `offset`, its flags in `alignment` (ma_build_problems). */
static kiln_mem_block *add_block(ma_state *m, uint32_t t, uint32_t id, uint64_t key)
{
    ma_type *ty = &m->types[t];
    if (ty->nblocks == ty->cap) {
        /* the first type met (HBM as a rule) gets room for every symbol at
         * once: no copy as it grows (pages never written cost nothing) */
        uint32_t nc = ty->cap ? ty->cap * 2 : t == 0 && m->nsym < UINT32_MAX - 64 ? m->nsym + 64 : 64;
        kiln_mem_block *nb = kiln_alloc((size_t)nc * sizeof(*nb));
        if (!nb)
            return NULL;
        if (ty->nblocks)
            memcpy(nb, ty->blocks, ty->nblocks * sizeof(*nb));
        kiln_free(ty->blocks);
        ty->blocks = nb;
        ty->cap = nc;
    }
    kiln_mem_block *b = &ty->blocks[ty->nblocks++];
    memset(b, 0, sizeof(*b));
    b->id = id;
    b->offset = (int64_t)key;
    return b;
}

static kiln_status read_symbol(ma_state *m, uint32_t s, kiln_node_id **uses, uint32_t *cap)
{
    kiln_graph *g = m->root;
    uint32_t cnt = 0, nuses = 0;
    const kiln_symtab_anchor *an = kiln_symtab_anchors(m->st, s, &cnt);
    int64_t ysize = 0;
    uint32_t first = MA_NONE;
    uint64_t ykey = UINT64_MAX;
    int32_t stream = -1;
    bool whole = false, fixed = false;
    m->kind[s] = MA_ABSENT;
    m->stype[s] = 0;
    m->blk[s] = MA_NONE;
    const char *type = NULL;
    bool zero_copy = false, weight = false, onchip = false, dynamic = false, producer = false;
    for (uint32_t i = 0; i < cnt; i++) {
        const kiln_symtab_anchor *a = &an[i];
        if (a->graph != 0) {
            /* a constant inside a subgraph (a PartitionedCall's weights) is a weight */
            kiln_graph *sg = kiln_symtab_graph(m->st, a->graph);
            weight |= a->is_output && sg && ma_op_in(sg, a->node, m->nm.cnst, 4);
            continue;
        }
        if (nuses == *cap) {
            uint32_t nc = *cap ? *cap * 2 : 16;
            kiln_node_id *nu = kiln_alloc((size_t)nc * sizeof(*nu));
            if (!nu)
                return oom(m);
            if (*uses)
                memcpy(nu, *uses, (size_t)nuses * sizeof(*nu));
            kiln_free(*uses);
            *uses = nu;
            *cap = nc;
        }
        (*uses)[nuses++] = a->node;
        uint32_t step = kiln_schedule_step(m->s, a->node);
        if (step < first)
            first = step;
        if (!a->is_output) {
            zero_copy |= ma_op_in(g, a->node, &m->nm.netoutput, 1);
            continue;
        }
        int64_t size = m->out_size[m->out_base[a->node] + a->index];
        uint64_t key = (uint64_t)step << 32 | a->index;
        ykey = key < ykey ? key : ykey;
        dynamic |= size < 0;
        if (size > ysize)
            ysize = size;
        zero_copy |= ma_op_in(g, a->node, m->nm.data, 4);
        weight |= ma_op_in(g, a->node, m->nm.cnst, 4);
        whole |= ma_op_in(g, a->node, m->nm.var, 3);
        bool fx = fixed_output(m, a->node, a->index);
        fixed |= fx;
        whole |= fx;
        bool oc = false;
        const char *t = out_type(m, a->node, a->index, &oc);
        onchip |= oc;
        if (!producer) {
            producer = true;
            type = t;
            stream = kiln_schedule_stream(m->s, a->node);
        }
    }
    if (!nuses)
        return KILN_OK;
    uint8_t kind = zero_copy ? MA_ZERO_COPY
                   : weight  ? MA_WEIGHT
                   : onchip  ? MA_ONCHIP
                   : dynamic ? MA_DYNAMIC
                             : MA_PLAN;
    uint32_t t = ma_type_index(m, type ? type : "HBM");
    if (t == MA_NONE)
        return kiln_errorf(m->err, KILN_ERR_LIMIT, "MemoryAssigner: more than %d memory types",
                           MA_MAX_TYPES);
    m->kind[s] = kind;
    m->stype[s] = (uint8_t)t;
    if (kind != MA_PLAN)
        return KILN_OK; /* its life is never asked */
    if (first == MA_NONE)
        first = 0;
    uint32_t last = whole ? m->steps - 1 : kiln_schedule_release_step(m->s, *uses, nuses);
    if (last < first || last >= m->steps)
        last = whole ? m->steps - 1 : first;
    if (whole)
        first = 0;
    kiln_mem_block *b = add_block(m, t, s, ykey);
    if (!b)
        return oom(m);
    m->blk[s] = m->types[t].nblocks - 1;
    b->size = ysize;
    b->first_use = first;
    b->last_use = last;
    b->stream = stream < 0 ? 0 : (uint32_t)stream;
    b->alignment = (whole ? MA_B_WHOLE : 0) | (fixed ? MA_B_FIXED : 0);
    return KILN_OK;
}

/* ---- continuous groups: weighted union-find ------------------------------- */

uint32_t ma_find(ma_state *m, uint32_t s, int64_t *rel)
{
    if (!m->parent) {
        if (rel)
            *rel = 0;
        return s;
    }
    int64_t r = 0;
    uint32_t x = s;
    while (m->parent[x] != x) {
        r += m->rel[x];
        x = m->parent[x];
    }
    /* path compression: point every node on the path at the root */
    int64_t acc = r;
    for (uint32_t y = s; m->parent[y] != y;) {
        uint32_t next = m->parent[y];
        int64_t step = m->rel[y];
        m->parent[y] = x;
        m->rel[y] = acc;
        acc -= step;
        y = next;
    }
    if (rel)
        *rel = r;
    return x;
}

/* The union-find, at the first group: every symbol its own root. */
static kiln_status uf_init(ma_state *m)
{
    if (m->parent)
        return KILN_OK;
    m->parent = kiln_alloc(((size_t)m->nsym + 1) * sizeof(uint32_t));
    m->rel = kiln_alloc(((size_t)m->nsym + 1) * sizeof(int64_t));
    if (!m->parent || !m->rel) {
        kiln_free(m->parent);
        kiln_free(m->rel);
        m->parent = NULL;
        m->rel = NULL;
        return oom(m);
    }
    for (uint32_t s = 0; s < m->nsym; s++) {
        m->parent[s] = s;
        m->rel[s] = 0;
    }
    return KILN_OK;
}

static int64_t round_up(int64_t v, int64_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

/* offset(b) = offset(a) + delta, for part @p i of the group of @p n. */
static kiln_status unite(ma_state *m, uint32_t a, uint32_t b, int64_t delta, kiln_node_id n,
                         uint32_t i)
{
    kiln_status st = uf_init(m);
    if (st != KILN_OK)
        return st;
    int64_t pa, pb;
    uint32_t ra = ma_find(m, a, &pa), rb = ma_find(m, b, &pb);
    if (ra == rb) {
        if (pb - pa == delta)
            return KILN_OK;
        char name[256];
        kiln_symtab_symbol_name(m->st, b, name, sizeof name);
        return kiln_errorf(m->err, KILN_ERR_INVALID,
                           "MemoryAssigner: the continuous group of %s needs %s at %lld bytes "
                           "after part 0, but another group already places it at %lld "
                           "(HandleMemoryLayoutConflict isolates such anchors)",
                           kiln_node_name_str(m->root, n), name, (long long)delta,
                           (long long)(pb - pa));
    }
    (void)i;
    m->parent[rb] = ra;
    m->rel[rb] = pa + delta - pb;
    return KILN_OK;
}

static kiln_status group(ma_state *m, kiln_node_id n, bool inputs, bool nopad)
{
    kiln_graph *g = m->root;
    uint32_t cnt = inputs ? kiln_node_input_count(g, n) : kiln_node_output_count(g, n);
    uint32_t s0 = MA_NONE;
    int64_t at = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        int64_t size;
        if (inputs) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            if (!p.node)
                return KILN_OK;
            size = m->out_size[m->out_base[p.node] + p.index];
        } else {
            size = m->out_size[m->out_base[n] + i];
        }
        uint32_t s = kiln_symtab_symbol(m->st, g, n, i, !inputs);
        if (s == KILN_SYMTAB_NONE)
            return KILN_OK;
        uint8_t k = m->kind[s];
        if (k == MA_ZERO_COPY || k == MA_WEIGHT || k == MA_ONCHIP) {
            char name[256];
            kiln_symtab_symbol_name(m->st, s, name, sizeof name);
            return kiln_errorf(m->err, KILN_ERR_INVALID,
                               "MemoryAssigner: the continuous %s of %s include %s, %s "
                               "(HandleMemoryLayoutConflict isolates such anchors)",
                               inputs ? "inputs" : "outputs", kiln_node_name_str(g, n), name,
                               k == MA_ZERO_COPY ? "a model input or output (user memory)"
                               : k == MA_WEIGHT  ? "a constant (weight memory)"
                                                 : "on-chip memory");
        }
        if (size < 0) {
            /* unknown size: the whole group stays unplanned */
            for (uint32_t j = 0; j < cnt; j++) {
                uint32_t t = kiln_symtab_symbol(m->st, g, n, j, !inputs);
                if (t != KILN_SYMTAB_NONE && m->kind[t] == MA_PLAN)
                    m->kind[t] = MA_DYNAMIC;
            }
            return KILN_OK;
        }
        if (s0 == MA_NONE) {
            s0 = s;
        } else {
            kiln_status st = unite(m, s0, s, at, n, i);
            if (st != KILN_OK)
                return st;
        }
        at += nopad ? size : round_up(size, m->align);
    }
    return KILN_OK;
}

static kiln_status groups(ma_state *m)
{
    kiln_graph *g = m->root;
    const ma_names *nm = &m->nm;
    kiln_status st = KILN_OK;
    if (!nm->cont_in && !nm->nopad_in && !nm->cont_out && !nm->nopad_out)
        return KILN_OK;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        bool ci = ma_node_bool(g, n, nm->cont_in, "continuous_input");
        bool ni = ma_node_bool(g, n, nm->nopad_in, "_no_padding_continuous_input");
        bool co = ma_node_bool(g, n, nm->cont_out, "continuous_output");
        /* no-padding outputs of a node with inputs are slices of input 0 (views) */
        bool no = ma_node_bool(g, n, nm->nopad_out, "_no_padding_continuous_output") &&
                  kiln_node_input_count(g, n) == 0;
        if ((ci || ni) && kiln_node_input_count(g, n) > 1)
            st = group(m, n, true, ni && !ci);
        if (st == KILN_OK && (co || no) && kiln_node_output_count(g, n) > 1)
            st = group(m, n, false, no && !co);
    }
    return st;
}

/* Memory types by name (they were met in symbol order, which is not stable);
 * no block exists yet, only the symbols' type indexes move. */
static void sort_types(ma_state *m)
{
    const char *old[MA_MAX_TYPES];
    uint32_t map[MA_MAX_TYPES];
    for (uint32_t i = 0; i < m->ntypes; i++)
        old[i] = m->types[i].name;
    for (uint32_t i = 1; i < m->ntypes; i++)
        for (uint32_t j = i; j > 0 && strcmp(m->types[j - 1].name, m->types[j].name) > 0; j--) {
            ma_type t = m->types[j];
            m->types[j] = m->types[j - 1];
            m->types[j - 1] = t;
        }
    for (uint32_t i = 0; i < m->ntypes; i++)
        for (uint32_t j = 0; j < m->ntypes; j++)
            if (strcmp(old[i], m->types[j].name) == 0)
                map[i] = j;
    for (uint32_t s = 0; s < m->nsym; s++)
        if (m->kind[s] != MA_ABSENT && m->stype[s] < m->ntypes)
            m->stype[s] = (uint8_t)map[m->stype[s]];
}

kiln_status ma_collect(ma_state *m)
{
    kiln_status st;
    ma_names_init(m);
    if ((st = kiln_symtab_get(m->root, &m->st, m->err)) != KILN_OK ||
        (st = kiln_schedule_get(m->root, &m->s, m->err)) != KILN_OK)
        return st;
    m->steps = kiln_schedule_step_count(m->s);
    m->streams = kiln_schedule_stream_count(m->s);
    if ((st = running_params(m)) != KILN_OK)
        return st;
    m->nsym = kiln_symtab_count(m->st);
    m->kind = kiln_alloc((size_t)m->nsym + 1);
    m->stype = kiln_alloc((size_t)m->nsym + 1);
    m->blk = kiln_alloc(((size_t)m->nsym + 1) * sizeof(uint32_t));
    if (!m->kind || !m->stype || !m->blk)
        return oom(m);
    kiln_node_id *uses = NULL;
    uint32_t cap = 0;
    for (uint32_t s = 0; s < m->nsym && st == KILN_OK; s++)
        st = read_symbol(m, s, &uses, &cap);
    kiln_free(uses);
    if (st == KILN_OK)
        st = groups(m);
    if (st != KILN_OK)
        return st;
    /* a component is planned only when all its members are; one memory type */
    for (uint32_t s = 0; m->parent && s < m->nsym; s++) {
        uint32_t r = ma_find(m, s, NULL);
        if (r == s)
            continue;
        if (m->stype[s] != m->stype[r]) {
            char a[256], b[256];
            kiln_symtab_symbol_name(m->st, s, a, sizeof a);
            kiln_symtab_symbol_name(m->st, r, b, sizeof b);
            return kiln_errorf(m->err, KILN_ERR_INVALID,
                               "MemoryAssigner: %s (%s) and %s (%s) are one continuous block "
                               "but have different memory types",
                               a, m->types[m->stype[s]].name, b, m->types[m->stype[r]].name);
        }
        if (m->kind[s] == MA_DYNAMIC)
            m->kind[r] = MA_DYNAMIC;
    }
    for (uint32_t s = 0; m->parent && s < m->nsym; s++)
        if (m->kind[ma_find(m, s, NULL)] == MA_DYNAMIC && m->kind[s] == MA_PLAN)
            m->kind[s] = MA_DYNAMIC;
    sort_types(m);
    return KILN_OK;
}

/* ---- problems ------------------------------------------------------------ */

/* ---- a deterministic block order ------------------------------------------
 * Symbol ids follow the symbol table's walk, which may differ between two
 * builds of one graph (a JSON round trip, a resumed build); the planner must
 * see the blocks in an order that depends on the graph only: by the schedule
 * step and index of each block's first output (workspaces after their
 * node's outputs).  Keys are distinct but for the symbols without a root
 * output (UINT64_MAX), which keep their symbol order. */

/* qsort_r comparator over block positions: the keys in the blocks' offsets. */
static int cmp_key(const void *a, const void *b, void *ctx)
{
    const kiln_mem_block *bl = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint64_t x = (uint64_t)bl[i].offset, y = (uint64_t)bl[j].offset;
    return x != y ? (x < y ? -1 : 1) : (i > j) - (i < j);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Drop the dead candidates, sort the rest by key in place, then the final
 * fields: the symbols' and workspaces' block indexes, the FIXED blocks at the
 * head of the arena (in symbol order), flags and offsets for the planner. */
static kiln_status order_blocks(ma_state *m, ma_type *ty)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < ty->nblocks; i++)
        if (!(ty->blocks[i].alignment & MA_B_DEAD))
            ty->blocks[n++] = ty->blocks[i];
    ty->nblocks = n;
    uint32_t *perm = kiln_alloc(((size_t)n + 1) * sizeof(uint32_t));
    if (!perm)
        return oom(m);
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    if (n > 1)
        qsort_r(perm, n, sizeof(uint32_t), cmp_key, ty->blocks);
    /* blocks[i] = old blocks[perm[i]], cycle by cycle */
    for (uint32_t i = 0; i < n; i++) {
        if (perm[i] == i)
            continue;
        kiln_mem_block tmp = ty->blocks[i];
        uint32_t j = i;
        while (perm[j] != i) {
            uint32_t k = perm[j];
            ty->blocks[j] = ty->blocks[k];
            perm[j] = j;
            j = k;
        }
        ty->blocks[j] = tmp;
        perm[j] = j;
    }
    uint32_t nfixed = 0;
    for (uint32_t i = 0; i < n; i++) {
        kiln_mem_block *b = &ty->blocks[i];
        if (b->alignment & MA_B_WS)
            m->ws_block[b->id] = i;
        else
            m->blk[b->id] = i;
        if (b->alignment & MA_B_FIXED)
            perm[nfixed++] = b->id; /* perm is free again */
        b->flags = 0;
        b->offset = 0;
        b->alignment = 0;
    }
    if (nfixed > 1)
        qsort(perm, nfixed, sizeof(uint32_t), cmp_u32);
    for (uint32_t k = 0; k < nfixed; k++) {
        kiln_mem_block *b = &ty->blocks[m->blk[perm[k]]];
        b->flags = KILN_MEM_BLOCK_FIXED;
        b->offset = ty->fixed_end;
        ty->fixed_end += b->size;
    }
    kiln_free(perm);
    ty->cap = n;
    return KILN_OK;
}

kiln_status ma_build_problems(ma_state *m)
{
    /* component extents: lowest relative offset and end (with groups only;
     * a lone symbol spans [0, size)), life and stream on the root's block */
    int64_t *lo = NULL, *hi = NULL;
    if (m->parent) {
        lo = kiln_alloc(((size_t)m->nsym + 1) * sizeof(int64_t));
        hi = kiln_alloc(((size_t)m->nsym + 1) * sizeof(int64_t));
        if (!lo || !hi) {
            kiln_free(lo);
            kiln_free(hi);
            return oom(m);
        }
        for (uint32_t s = 0; s < m->nsym; s++) {
            lo[s] = INT64_MAX;
            hi[s] = INT64_MIN;
        }
        for (uint32_t s = 0; s < m->nsym; s++) {
            if (m->kind[s] != MA_PLAN)
                continue;
            int64_t rel;
            uint32_t r = ma_find(m, s, &rel);
            kiln_mem_block *y = &m->types[m->stype[s]].blocks[m->blk[s]];
            lo[r] = rel < lo[r] ? rel : lo[r];
            hi[r] = rel + y->size > hi[r] ? rel + y->size : hi[r];
            if (r != s) {
                kiln_mem_block *root = &m->types[m->stype[r]].blocks[m->blk[r]];
                if (y->first_use < root->first_use) {
                    root->first_use = y->first_use;
                    root->stream = y->stream;
                }
                root->last_use = y->last_use > root->last_use ? y->last_use : root->last_use;
                root->alignment |= y->alignment & (MA_B_WHOLE | MA_B_FIXED);
                root->offset = (uint64_t)y->offset < (uint64_t)root->offset ? y->offset
                                                                            : root->offset;
                y->alignment |= MA_B_DEAD;
                m->blk[s] = MA_NONE;
            }
        }
    }
    kiln_status st = KILN_OK;
    for (uint32_t t = 0; t < m->ntypes; t++) {
        ma_type *ty = &m->types[t];
        for (uint32_t i = 0; i < ty->nblocks; i++) {
            kiln_mem_block *b = &ty->blocks[i];
            uint32_t s = b->id;
            if (b->alignment & MA_B_DEAD)
                continue;
            if (m->kind[s] != MA_PLAN) { /* dynamic after all (its group) */
                b->alignment |= MA_B_DEAD;
                m->blk[s] = MA_NONE;
                continue;
            }
            ty->buffers++;
            int64_t size = round_up(lo ? hi[s] - lo[s] : b->size, m->align);
            if (lo)
                m->rel[s] = -lo[s]; /* root's offset = block offset - lo */
            if (size <= 0) {
                b->alignment |= MA_B_DEAD;
                m->blk[s] = MA_NONE; /* offset 0 */
                continue;
            }
            bool whole = b->alignment & MA_B_WHOLE;
            b->size = size;
            b->first_use = whole ? 0 : b->first_use;
            b->last_use = whole ? m->steps - 1 : b->last_use;
        }
    }
    for (uint32_t s = 0; s < m->nsym; s++)
        if (m->kind[s] == MA_DYNAMIC)
            m->types[m->stype[s]].dynamic++;
    kiln_free(lo);
    kiln_free(hi);
    /* workspaces: HBM, live for their node's step */
    for (kiln_node_id n = 0; m->ws_base && n < m->limit && st == KILN_OK; n++) {
        for (uint32_t w = m->ws_base[n]; w < m->ws_base[n + 1]; w++) {
            if (m->ws_size[w] <= 0)
                continue;
            uint32_t t = ma_type_index(m, "HBM");
            uint32_t step = kiln_schedule_step(m->s, n);
            uint64_t key = (uint64_t)step << 32 | 0x80000000u | (w - m->ws_base[n]);
            kiln_mem_block *b = t == MA_NONE ? NULL : add_block(m, t, w, key);
            if (!b) {
                st = oom(m);
                break;
            }
            b->size = round_up(m->ws_size[w], m->align);
            b->first_use = step;
            b->last_use = kiln_schedule_release_step(m->s, &n, 1);
            if (b->last_use < step || b->last_use >= m->steps)
                b->last_use = step;
            int32_t sid = kiln_schedule_stream(m->s, n);
            b->stream = sid < 0 ? 0 : (uint32_t)sid;
            b->alignment = MA_B_WS;
            m->types[t].buffers++;
        }
    }
    for (uint32_t t = 0; t < m->ntypes && st == KILN_OK; t++)
        st = order_blocks(m, &m->types[t]);
    return st;
}

void ma_free(ma_state *m)
{
    kiln_free(m->kind);
    kiln_free(m->stype);
    kiln_free(m->blk);
    kiln_free(m->parent);
    kiln_free(m->rel);
    kiln_free(m->out_base);
    kiln_free(m->out_size);
    kiln_free(m->ws_base);
    kiln_free(m->ws_size);
    kiln_free(m->ws_off);
    kiln_free(m->ws_block);
    m->kind = m->stype = NULL;
    m->blk = m->parent = NULL;
    m->rel = NULL;
    m->out_base = m->ws_base = NULL;
    m->out_size = m->ws_size = m->ws_off = NULL;
    m->ws_block = NULL;
    for (uint32_t t = 0; t < m->ntypes; t++) {
        kiln_free(m->types[t].blocks);
        m->types[t].blocks = NULL;
        m->types[t].nblocks = m->types[t].cap = 0;
    }
}
