/*
 * memgraph.c - read the memory plan back from the graph and check it
 * (kiln_memory_plan_verify); declarations in memgraph.h.
 *
 * A buffer is a memory symbol of the root graph whose output anchors carry
 * an offset, or a workspace of a root node.  Its extent is
 * [lowest anchor offset, highest output offset + size), not counting the
 * anchors GE's SetInputOffset placed (an `_inner_offset` into the buffer, or
 * an on-chip input elsewhere: `_kiln_preset_offset`); its life runs from
 * the first step of a node touching it to kiln_schedule_release_step of all
 * those nodes (a variable's or a fixed-address output's: the whole run).
 *
 * The checker's rules, each failing with a message naming the anchors:
 *   [same offset]  an input's own descriptor has its producer's offset (an
 *                  input placed by GE's SetInputOffset: producer + its
 *                  `_kiln_preset_offset`; an on-chip one, L1 or UB, is not
 *                  in its producer's memory and is not checked); an
 *                  output that shares an input's memory (ref_input,
 *                  reuse_input, Reshape/Merge, every input of a Merge or
 *                  StreamMerge, ref_var_src_var_name's variable) has that
 *                  memory's offset; the outputs of a no-padding
 *                  continuous-output node are slices of input 0 in order;
 *                  a symbol's outputs are all planned or none is;
 *   [continuous]   the inputs of a continuous-input node (outputs of a
 *                  continuous-output node) are adjacent and in order: each
 *                  part advances by its size rounded to the plan's alignment,
 *                  or by its exact size without padding;
 *   [overlap]      two buffers (continuous components count as one) whose
 *                  lives intersect do not overlap in memory: a sweep over the
 *                  steps keeps the live buffers in a treap ordered by offset;
 *   [write]        an output that writes an input's memory in place (ref or
 *                  reuse; not the output of a no-padding continuous-input
 *                  concat, a view), or an `_input_mutable` node (each
 *                  input), does not write a constant, and every other reader of the value
 *                  it overwrites happens before it (a NetOutput reads at the
 *                  end of the run, after every writer).
 * Complexity: O(anchors + n log n) for n buffers, O(uses) per in-place write.
 */
#include "memgraph.h"
#include "fileio.h"
#include "sort.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define NONE UINT32_MAX

/* The op types and attribute keys the checker reads, resolved once per run.
 * A symbol 0 was never interned: no node has that op type and no attribute
 * set that key, so its test is skipped without touching the node (on a large
 * graph most of these keys are on no node at all). */
typedef struct mnames {
    kiln_sym var[3], cnst[4];
    kiln_sym identity, netoutput, reshape, merge, stream_merge;
    kiln_sym reuse_input, nopad_out, nopad_in, cont_in, cont_out, preset, inner, ref_var,
        cannot_delete, input_mutable, fixed_addr, ws_bytes;
} mnames;

static void mnames_init(const kiln_graph *g, mnames *m)
{
    static const char *const var[3] = {"Variable", "VariableV2", "VarHandleOp"};
    static const char *const cnst[4] = {"Const", "Constant", "FileConstant", "ConstPlaceHolder"};
    for (int i = 0; i < 3; i++)
        m->var[i] = kiln_sym_lookup(g, var[i]);
    for (int i = 0; i < 4; i++)
        m->cnst[i] = kiln_sym_lookup(g, cnst[i]);
    m->identity = kiln_sym_lookup(g, "Identity");
    m->netoutput = kiln_sym_lookup(g, "NetOutput");
    m->reshape = kiln_sym_lookup(g, "Reshape");
    m->merge = kiln_sym_lookup(g, "Merge");
    m->stream_merge = kiln_sym_lookup(g, "StreamMerge");
    m->reuse_input = kiln_sym_lookup(g, "reuse_input");
    m->nopad_out = kiln_sym_lookup(g, "_no_padding_continuous_output");
    m->nopad_in = kiln_sym_lookup(g, "_no_padding_continuous_input");
    m->cont_in = kiln_sym_lookup(g, "continuous_input");
    m->cont_out = kiln_sym_lookup(g, "continuous_output");
    m->preset = kiln_sym_lookup(g, "_kiln_preset_offset");
    m->inner = kiln_sym_lookup(g, "_inner_offset");
    m->ref_var = kiln_sym_lookup(g, "ref_var_src_var_name");
    m->cannot_delete = kiln_sym_lookup(g, "_cannot_be_deleted");
    m->input_mutable = kiln_sym_lookup(g, "_input_mutable");
    m->fixed_addr = kiln_sym_lookup(g, "_alloc_fixed_addr");
    m->ws_bytes = kiln_sym_lookup(g, "_kiln_workspace_bytes");
}

static bool op_is(const kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}

static bool op_in(const kiln_graph *g, kiln_node_id n, const kiln_sym *ops, uint32_t cnt)
{
    kiln_sym op = kiln_node_op(g, n);
    for (uint32_t i = 0; i < cnt; i++)
        if (ops[i] && ops[i] == op)
            return true;
    return false;
}

/* Node attribute @p key is true (@p sym: its symbol, 0 = on no node). */
static bool node_bool(const kiln_graph *g, kiln_node_id n, kiln_sym sym, const char *key)
{
    bool b = false;
    return sym && kiln_attrs_get_bool(kiln_node_attrs(g, n), key, &b) && b;
}

/* Input @p k an output writes in place (desc ref_input, reuse_input), or -1. */
static int64_t written_input(kiln_graph *g, const mnames *nm, kiln_node_id n, uint32_t o)
{
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (!d)
        return -1;
    if (kiln_desc_ref_input(d) >= 0)
        return kiln_desc_ref_input(d);
    bool b = false;
    int64_t k;
    if (nm->reuse_input && kiln_attrs_get_bool(kiln_desc_attrs(d), "reuse_input", &b) && b &&
        kiln_attrs_get_int(kiln_desc_attrs(d), "reuse_input_index", &k))
        return k;
    return -1;
}

/* Input whose memory output @p o of @p n is (views and in-place writes), or -1. */
static int64_t shared_input(kiln_graph *g, const mnames *nm, kiln_node_id n, uint32_t o)
{
    int64_t k = written_input(g, nm, n, o);
    if (k >= 0)
        return k;
    if (o == 0 && (op_is(g, n, nm->reshape) || op_is(g, n, nm->merge)))
        return 0;
    return -1;
}

static bool nopad_views(kiln_graph *g, const mnames *nm, kiln_node_id n)
{
    return node_bool(g, n, nm->nopad_out, "_no_padding_continuous_output") &&
           kiln_node_input_count(g, n) > 0;
}

/* A no-padding continuous-input node whose output 0 reuses input 0: its
 * inputs are laid out in place and its output is their concatenation (GE's
 * no-task concat), a view that writes nothing. */
static bool concat_view(kiln_graph *g, const mnames *nm, kiln_node_id n)
{
    return node_bool(g, n, nm->nopad_in, "_no_padding_continuous_input") &&
           kiln_node_output_count(g, n) > 0 && written_input(g, nm, n, 0) == 0;
}

/* Offset input @p i of @p n is read at: its own descriptor's, else its producer's. */
static int64_t input_offset(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    if (kiln_node_input_has_desc(g, n, i))
        return kiln_desc_offset(kiln_node_input_desc(g, n, i));
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    return p.node ? kiln_desc_offset(kiln_node_output_desc(g, p.node, p.index)) : -1;
}

static int64_t out_size(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    return kiln_desc_size(kiln_node_output_desc(g, n, o));
}

static int64_t round_up(int64_t v, int64_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

static int64_t plan_alignment(kiln_graph *root)
{
    int64_t a = 512;
    kiln_attrs_get_int(kiln_graph_attrs(root), "_kiln_memory_alignment", &a);
    return a > 0 ? a : 512;
}

/* ---- [same offset] ---------------------------------------------------- */

static kiln_status mismatch(kiln_graph *g, kiln_error *err, kiln_node_id a, const char *ka,
                            uint32_t ia, int64_t oa, kiln_node_id b, const char *kb, uint32_t ib,
                            int64_t ob, const char *why)
{
    return kiln_errorf(err, KILN_ERR_INVALID,
                       "memory plan [same offset]: %s_%s_%u at %lld but %s_%s_%u at %lld (%s)",
                       kiln_node_name_str(g, a), ka, ia, (long long)oa, kiln_node_name_str(g, b),
                       kb, ib, (long long)ob, why);
}

static kiln_status check_node_offsets(kiln_graph *g, const mnames *nm, kiln_node_id n,
                                      kiln_error *err)
{
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (!p.node || !kiln_node_input_has_desc(g, n, i))
            continue;
        int64_t mine = input_offset(g, n, i);
        int64_t theirs = kiln_desc_offset(kiln_node_output_desc(g, p.node, p.index));
        const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
        int64_t preset = 0;
        if (nm->preset && kiln_attrs_get_int(kiln_desc_attrs(d), "_kiln_preset_offset", &preset)) {
            const char *mt = kiln_desc_memory_type(g, d);
            if (mt && (strcmp(mt, "L1") == 0 || strcmp(mt, "UB") == 0))
                continue;
            if (theirs >= 0)
                theirs += preset;
        }
        if (mine != theirs)
            return mismatch(g, err, n, "in", i, mine, p.node, "out", p.index, theirs,
                            "an input is its producer's memory");
    }
    bool views = nopad_views(g, nm, n);
    int64_t at = views ? input_offset(g, n, 0) : -1;
    for (uint32_t o = 0; o < nout; o++) {
        int64_t off = kiln_desc_offset(kiln_node_output_desc(g, n, o));
        if (views) {
            if (at >= 0 && off != at)
                return mismatch(g, err, n, "out", o, off, n, "in", 0, input_offset(g, n, 0),
                                "no-padding continuous outputs are slices of input 0 in order");
            if (at >= 0)
                at += out_size(g, n, o) > 0 ? out_size(g, n, o) : 0;
            continue;
        }
        const char *var = NULL;
        if (nm->ref_var &&
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)),
                                  "ref_var_src_var_name", &var)) {
            kiln_node_id v = kiln_graph_find_node(g, var);
            int64_t voff = v && kiln_node_output_count(g, v)
                               ? kiln_desc_offset(kiln_node_output_desc(g, v, 0))
                               : off;
            if (voff != off)
                return mismatch(g, err, n, "out", o, off, v, "out", 0, voff,
                                "ref_var_src_var_name: the output is the variable's memory");
        }
        /* Merge / StreamMerge: every connected input is output 0's memory */
        bool merge = o == 0 && (op_is(g, n, nm->merge) || op_is(g, n, nm->stream_merge));
        for (uint32_t i = merge ? 0 : nin; i < nin; i++) {
            int64_t in = input_offset(g, n, i);
            if (kiln_node_input_peer(g, n, i).node && in != off)
                return mismatch(g, err, n, "out", 0, off, n, "in", i, in,
                                "a Merge's inputs and output share one memory");
        }
        int64_t k = shared_input(g, nm, n, o);
        if (k < 0 || (uint64_t)k >= nin || !kiln_node_input_peer(g, n, (uint32_t)k).node)
            continue;
        int64_t in = input_offset(g, n, (uint32_t)k);
        if (in != off)
            return mismatch(g, err, n, "out", o, off, n, "in", (uint32_t)k, in,
                            "the output shares the input's memory");
    }
    return KILN_OK;
}

/* ---- [continuous] ------------------------------------------------------ */

static kiln_status check_group(kiln_graph *g, kiln_node_id n, bool inputs, bool nopad,
                               int64_t align, kiln_error *err)
{
    uint32_t cnt = inputs ? kiln_node_input_count(g, n) : kiln_node_output_count(g, n);
    int64_t prev = -1, prev_size = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        int64_t off, size;
        if (inputs) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            if (!p.node)
                return KILN_OK;
            off = input_offset(g, n, i);
            size = out_size(g, p.node, p.index);
        } else {
            off = kiln_desc_offset(kiln_node_output_desc(g, n, i));
            size = out_size(g, n, i);
        }
        if (off < 0 || size < 0)
            return KILN_OK; /* unplanned (dynamic, user memory): nothing to lay out */
        if (i > 0) {
            int64_t want = prev + (nopad ? prev_size : round_up(prev_size, align));
            if (off != want)
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "memory plan [continuous]: %s_%s_%u at %lld, expected %lld "
                                   "(%s_%u at %lld + %lld bytes%s)",
                                   kiln_node_name_str(g, n), inputs ? "in" : "out", i,
                                   (long long)off, (long long)want, inputs ? "in" : "out", i - 1,
                                   (long long)prev, (long long)prev_size,
                                   nopad ? ", no padding" : ", padded");
        }
        prev = off;
        prev_size = size;
    }
    return KILN_OK;
}

static kiln_status check_groups(kiln_graph *g, const mnames *nm, kiln_node_id n, int64_t align,
                                kiln_error *err)
{
    kiln_status st = KILN_OK;
    if (!nm->cont_in && !nm->nopad_in && !nm->cont_out && !nm->nopad_out)
        return KILN_OK;
    bool ci = node_bool(g, n, nm->cont_in, "continuous_input");
    bool ni = node_bool(g, n, nm->nopad_in, "_no_padding_continuous_input");
    bool co = node_bool(g, n, nm->cont_out, "continuous_output");
    bool no = node_bool(g, n, nm->nopad_out, "_no_padding_continuous_output") &&
              !nopad_views(g, nm, n);
    if ((ci || ni) && kiln_node_input_count(g, n) > 1)
        st = check_group(g, n, true, ni && !ci, align, err);
    if (st == KILN_OK && (co || no) && kiln_node_output_count(g, n) > 1)
        st = check_group(g, n, false, no && !co, align, err);
    return st;
}

/* ---- reading the buffers ------------------------------------------------ */

typedef struct rd {
    kiln_graph *root;
    mnames nm;
    const kiln_symtab *st;
    const kiln_schedule *s;
    kiln_memgraph *mg;
    uint32_t *buf_of_sym; /* symbol -> buffer, NONE when unplanned */
    kiln_node_id *uses;
    uint32_t nuses, cuses;
} rd;

static uint32_t type_index(kiln_memgraph *mg, const char *t)
{
    if (!t || !*t)
        t = "HBM";
    for (uint32_t i = 0; i < mg->ntypes; i++)
        if (strcmp(mg->types[i], t) == 0)
            return i;
    const char **nt = kiln__realloc(mg->types, (mg->ntypes + 1) * sizeof(*nt));
    if (!nt)
        return NONE;
    mg->types = nt;
    mg->types[mg->ntypes] = t;
    return mg->ntypes++;
}

static kiln_mg_buf *new_buf(kiln_memgraph *mg)
{
    if (mg->nbufs == mg->cap && !KILN_GROW(mg->bufs, mg->cap, mg->nbufs + 1))
        return NULL;
    kiln_mg_buf *b = &mg->bufs[mg->nbufs];
    memset(b, 0, sizeof(*b));
    b->group = mg->nbufs++;
    return b;
}

static bool add_use(rd *r, kiln_node_id n)
{
    if (r->nuses == r->cuses) {
        uint32_t cap = r->cuses ? r->cuses * 2 : 16;
        kiln_node_id *nu = kiln__realloc(r->uses, cap * sizeof(*nu));
        if (!nu)
            return false;
        r->uses = nu;
        r->cuses = cap;
    }
    r->uses[r->nuses++] = n;
    return true;
}

static bool whole_run(kiln_graph *g, const mnames *nm, kiln_node_id n, uint32_t idx,
                      bool is_output)
{
    if (!is_output)
        return false;
    int64_t fi = -1;
    if (op_in(g, n, nm->var, 3))
        return true;
    return nm->fixed_addr && kiln_attrs_has(kiln_node_attrs(g, n), "_alloc_fixed_addr") &&
           kiln_attrs_get_int(kiln_node_attrs(g, n), "_alloc_fixed_addr_index", &fi) &&
           fi == (int64_t)idx;
}

/* Buffer of symbol @p sym, when its output anchors carry offsets. */
static kiln_status read_symbol(rd *r, uint32_t sym, kiln_error *err)
{
    uint32_t cnt = 0;
    const kiln_symtab_anchor *an = kiln_symtab_anchors(r->st, sym, &cnt);
    kiln_graph *g = r->root;
    int64_t lo = INT64_MAX, hi = -1;
    uint32_t first = NONE, planned = 0, unplanned = 0;
    bool whole = false, iso = false;
    const kiln_symtab_anchor *head = NULL, *miss = NULL;
    const char *type = NULL;
    r->nuses = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        const kiln_symtab_anchor *a = &an[i];
        if (a->graph != 0)
            continue;
        if (!add_use(r, a->node))
            return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
        uint32_t step = kiln_schedule_step(r->s, a->node);
        if (step < first)
            first = step;
        whole |= whole_run(g, &r->nm, a->node, a->index, a->is_output);
        const kiln_tensor_desc *d = a->is_output ? kiln_node_output_desc(g, a->node, a->index)
                                  : kiln_node_input_has_desc(g, a->node, a->index)
                                      ? kiln_node_input_desc(g, a->node, a->index)
                                      : NULL;
        if (!d)
            continue;
        int64_t off = kiln_desc_offset(d), size = kiln_desc_size(d);
        bool inner = (r->nm.inner && kiln_attrs_has(kiln_desc_attrs(d), "_inner_offset")) ||
                     (r->nm.preset && kiln_attrs_has(kiln_desc_attrs(d), "_kiln_preset_offset"));
        if (inner && a->is_output) {
            if (off >= 0) { /* a view into the buffer: its offset was checked */
                planned++;
            } else {
                unplanned++;
                miss = a;
            }
            continue;
        }
        if (inner)
            continue;
        if (!a->is_output) {
            if (off >= 0 && off < lo)
                lo = off;
            continue;
        }
        if (off < 0) {
            unplanned++;
            miss = a;
            continue;
        }
        planned++;
        if (!head) {
            head = a;
            type = kiln_desc_memory_type(g, d);
            iso = op_is(g, a->node, r->nm.identity) &&
                  node_bool(g, a->node, r->nm.cannot_delete, "_cannot_be_deleted");
        }
        lo = off < lo ? off : lo;
        if (off + (size > 0 ? size : 0) > hi)
            hi = off + (size > 0 ? size : 0);
    }
    if (!planned) {
        r->mg->unplanned++;
        return KILN_OK;
    }
    if (unplanned) {
        char k1[256], k2[256];
        kiln_symtab_anchor_key(r->st, head, k1, sizeof k1);
        kiln_symtab_anchor_key(r->st, miss, k2, sizeof k2);
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "memory plan [same offset]: %s has an offset but %s, of the same "
                           "symbol, has none",
                           k1, k2);
    }
    kiln_mg_buf *b = new_buf(r->mg);
    if (!b)
        return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
    b->sym = sym;
    b->node = head->node;
    b->index = head->index;
    b->type = type_index(r->mg, type);
    if (b->type == NONE)
        return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
    b->offset = lo;
    b->end = hi;
    b->first = whole ? 0 : first;
    b->last = whole ? r->mg->steps - 1 : kiln_schedule_release_step(r->s, r->uses, r->nuses);
    if (b->last < b->first || b->last == NONE)
        b->last = b->first;
    b->stream = kiln_schedule_stream(r->s, head->node);
    b->isolation = iso;
    r->buf_of_sym[sym] = r->mg->nbufs - 1;
    return KILN_OK;
}

static kiln_status read_workspaces(rd *r, kiln_node_id n, kiln_error *err)
{
    const int64_t *bytes = NULL, *offs = NULL;
    uint32_t nb = 0, no = 0;
    if (!r->nm.ws_bytes)
        return KILN_OK;
    const kiln_attrs *a = kiln_node_attrs(r->root, n);
    if (!kiln_attrs_get_list_int(a, "_kiln_workspace_bytes", &bytes, &nb))
        return KILN_OK;
    kiln_attrs_get_list_int(a, "_kiln_workspace_offsets", &offs, &no);
    for (uint32_t w = 0; w < nb; w++) {
        if (bytes[w] <= 0)
            continue;
        if (w >= no || offs[w] < 0)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "memory plan: workspace %u of %s (%lld bytes) has no offset", w,
                               kiln_node_name_str(r->root, n), (long long)bytes[w]);
        kiln_mg_buf *b = new_buf(r->mg);
        if (!b)
            return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
        b->sym = KILN_SYMTAB_NONE;
        b->node = n;
        b->index = w;
        b->type = type_index(r->mg, "HBM");
        b->offset = offs[w];
        b->end = offs[w] + bytes[w];
        b->first = kiln_schedule_step(r->s, n);
        b->last = kiln_schedule_release_step(r->s, &n, 1);
        b->stream = kiln_schedule_stream(r->s, n);
        if (b->type == NONE)
            return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
    }
    return KILN_OK;
}

/* Union-find over buffers for the continuous components. */
static uint32_t find(kiln_mg_buf *b, uint32_t i)
{
    while (b[i].group != i) {
        b[i].group = b[b[i].group].group;
        i = b[i].group;
    }
    return i;
}

static void join_groups(rd *r, kiln_node_id n)
{
    kiln_graph *g = r->root;
    const mnames *nm = &r->nm;
    bool in = (node_bool(g, n, nm->cont_in, "continuous_input") ||
               node_bool(g, n, nm->nopad_in, "_no_padding_continuous_input")) &&
              kiln_node_input_count(g, n) > 1;
    bool out = (node_bool(g, n, nm->cont_out, "continuous_output") ||
                node_bool(g, n, nm->nopad_out, "_no_padding_continuous_output")) &&
               kiln_node_output_count(g, n) > 1;
    uint32_t prev = NONE;
    for (int pass = 0; pass < 2; pass++) {
        bool inputs = pass == 0;
        if (inputs ? !in : !out)
            continue;
        prev = NONE;
        uint32_t cnt = inputs ? kiln_node_input_count(g, n) : kiln_node_output_count(g, n);
        for (uint32_t i = 0; i < cnt; i++) {
            uint32_t sym = kiln_symtab_symbol(r->st, g, n, i, !inputs);
            uint32_t b = sym == KILN_SYMTAB_NONE ? NONE : r->buf_of_sym[sym];
            if (b == NONE)
                continue;
            if (prev != NONE) {
                uint32_t x = find(r->mg->bufs, prev), y = find(r->mg->bufs, b);
                if (x != y)
                    r->mg->bufs[x > y ? x : y].group = x < y ? x : y;
            }
            prev = b;
        }
    }
}

kiln_status kiln__memgraph_read(kiln_graph *root, kiln_memgraph *mg, kiln_error *err)
{
    memset(mg, 0, sizeof(*mg));
    rd r = {.root = root, .mg = mg};
    mnames_init(root, &r.nm);
    kiln_status st;
    if ((st = kiln_symtab_get(root, &r.st, err)) != KILN_OK ||
        (st = kiln_schedule_get(root, &r.s, err)) != KILN_OK)
        return kiln_error_push(err, "memory plan");
    mg->steps = kiln_schedule_step_count(r.s);
    uint32_t nsym = kiln_symtab_count(r.st);
    r.buf_of_sym = kiln__malloc(((size_t)nsym + 1) * sizeof(uint32_t));
    if (!r.buf_of_sym)
        return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
    memset(r.buf_of_sym, 0xff, ((size_t)nsym + 1) * sizeof(uint32_t));
    /* at most one buffer per symbol, then the workspaces */
    if (nsym && !(mg->bufs = kiln__malloc((size_t)nsym * sizeof(*mg->bufs)))) {
        kiln__free(r.buf_of_sym);
        return kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
    }
    mg->cap = nsym;
    for (uint32_t s = 0; s < nsym && st == KILN_OK; s++)
        st = read_symbol(&r, s, err);
    for (kiln_node_id n = kiln_graph_next_node(root, 0); n && st == KILN_OK && r.nm.ws_bytes;
         n = kiln_graph_next_node(root, n))
        st = read_workspaces(&r, n, err);
    bool groups = r.nm.cont_in || r.nm.nopad_in || r.nm.cont_out || r.nm.nopad_out;
    for (kiln_node_id n = kiln_graph_next_node(root, 0); n && st == KILN_OK && groups;
         n = kiln_graph_next_node(root, n))
        join_groups(&r, n);
    for (uint32_t i = 0; st == KILN_OK && i < mg->nbufs; i++)
        mg->bufs[i].group = find(mg->bufs, i);
    kiln__free(r.buf_of_sym);
    kiln__free(r.uses);
    if (st != KILN_OK)
        kiln__memgraph_free(mg);
    return st;
}

void kiln__memgraph_free(kiln_memgraph *mg)
{
    kiln__free(mg->bufs);
    kiln__free(mg->types);
    memset(mg, 0, sizeof(*mg));
}

void kiln__memgraph_name(kiln_graph *root, const kiln_mg_buf *b, char *buf, size_t size)
{
    if (b->sym == KILN_SYMTAB_NONE) {
        snprintf(buf, size, "%s_ws_%u", kiln_node_name_str(root, b->node), b->index);
        return;
    }
    const kiln_symtab *st = NULL;
    if (kiln_symtab_get(root, &st, NULL) == KILN_OK)
        kiln_symtab_symbol_name(st, b->sym, buf, size);
    else
        snprintf(buf, size, "%s_out_%u", kiln_node_name_str(root, b->node), b->index);
}

bool kiln__memgraph_planned(const kiln_graph *root)
{
    const char *p;
    return kiln_attrs_get_string(kiln_graph_attrs((kiln_graph *)root), "_kiln_memory_planner", &p);
}

/* ---- [overlap]: sweep over steps, live buffers in a treap by offset ------ */

typedef struct item {
    int64_t off, end;
    uint32_t first, last, buf; /* buf: a representative buffer, for names */
} item;

typedef struct treap {
    uint32_t *l, *r, *pri;
    const item *it;
    uint32_t root;
} treap;

static bool before(const treap *t, uint32_t a, uint32_t b)
{
    return t->it[a].off < t->it[b].off || (t->it[a].off == t->it[b].off && a < b);
}

static uint32_t tp_insert(treap *t, uint32_t root, uint32_t x)
{
    if (root == NONE)
        return x;
    if (before(t, x, root)) {
        t->l[root] = tp_insert(t, t->l[root], x);
        if (t->pri[t->l[root]] > t->pri[root]) {
            uint32_t y = t->l[root];
            t->l[root] = t->r[y];
            t->r[y] = root;
            return y;
        }
    } else {
        t->r[root] = tp_insert(t, t->r[root], x);
        if (t->pri[t->r[root]] > t->pri[root]) {
            uint32_t y = t->r[root];
            t->r[root] = t->l[y];
            t->l[y] = root;
            return y;
        }
    }
    return root;
}

static uint32_t tp_merge(treap *t, uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    if (t->pri[a] > t->pri[b]) {
        t->r[a] = tp_merge(t, t->r[a], b);
        return a;
    }
    t->l[b] = tp_merge(t, a, t->l[b]);
    return b;
}

static uint32_t tp_erase(treap *t, uint32_t root, uint32_t x)
{
    if (root == NONE)
        return NONE;
    if (root == x)
        return tp_merge(t, t->l[x], t->r[x]);
    if (before(t, x, root))
        t->l[root] = tp_erase(t, t->l[root], x);
    else
        t->r[root] = tp_erase(t, t->r[root], x);
    return root;
}

/* A live item overlapping [off, end) among the neighbours of @p x, or NONE. */
static uint32_t tp_clash(const treap *t, uint32_t x)
{
    uint32_t pred = NONE, succ = NONE;
    for (uint32_t c = t->root; c != NONE;) {
        if (c == x) {
            /* in-order neighbours below x: the extremes of its subtrees */
            for (uint32_t y = t->l[x]; y != NONE; y = t->r[y])
                pred = y;
            for (uint32_t y = t->r[x]; y != NONE; y = t->l[y])
                succ = y;
            break;
        }
        if (before(t, c, x)) {
            pred = c;
            c = t->r[c];
        } else {
            succ = c;
            c = t->l[c];
        }
    }
    if (pred != NONE && t->it[pred].end > t->it[x].off)
        return pred;
    if (succ != NONE && t->it[succ].off < t->it[x].end)
        return succ;
    return NONE;
}

/* @p out: the item indexes 0..n-1 ordered by first (@p by_first) or last
 * step, ties by index (a stable radix sort).  false on out of memory. */
static bool order_items(const item *it, uint32_t n, bool by_first, uint32_t *out)
{
    uint64_t *k = kiln__malloc(((size_t)n + 1) * sizeof(*k));
    if (!k)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        k[i] = by_first ? it[i].first : it[i].last;
        out[i] = i;
    }
    bool ok = kiln__sort_pairs_u64(k, out, n);
    kiln__free(k);
    return ok;
}

static kiln_status overlap_fail(kiln_graph *root, const kiln_memgraph *mg, const item *a,
                                const item *b, kiln_error *err)
{
    char na[256], nb[256];
    kiln__memgraph_name(root, &mg->bufs[a->buf], na, sizeof na);
    kiln__memgraph_name(root, &mg->bufs[b->buf], nb, sizeof nb);
    return kiln_errorf(err, KILN_ERR_INVALID,
                       "memory plan [overlap]: %s [%lld, %lld) live steps %u..%u and %s "
                       "[%lld, %lld) live steps %u..%u share memory (%s) but neither happens "
                       "before the other",
                       na, (long long)a->off, (long long)a->end, a->first, a->last, nb,
                       (long long)b->off, (long long)b->end, b->first, b->last,
                       mg->types[mg->bufs[a->buf].type]);
}

/* Components of type @p type as items, swept over the steps. */
static kiln_status sweep_type(kiln_graph *root, const kiln_memgraph *mg, uint32_t type,
                              kiln_error *err)
{
    uint32_t n = 0, *comp = kiln__malloc(((size_t)mg->nbufs + 1) * sizeof(uint32_t));
    item *it = kiln__malloc(((size_t)mg->nbufs + 1) * sizeof(item));
    uint32_t *byf = kiln__malloc(((size_t)mg->nbufs + 1) * sizeof(uint32_t) * 5);
    kiln_status st = KILN_OK;
    if (!comp || !it || !byf) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < mg->nbufs; i++)
        comp[i] = NONE;
    for (uint32_t i = 0; i < mg->nbufs; i++) {
        const kiln_mg_buf *b = &mg->bufs[i];
        if (b->type != type || b->end <= b->offset)
            continue;
        uint32_t g = b->group;
        if (comp[g] == NONE) {
            comp[g] = n;
            it[n] = (item){b->offset, b->end, b->first, b->last, i};
            n++;
            continue;
        }
        item *c = &it[comp[g]];
        c->off = b->offset < c->off ? b->offset : c->off;
        c->end = b->end > c->end ? b->end : c->end;
        c->first = b->first < c->first ? b->first : c->first;
        c->last = b->last > c->last ? b->last : c->last;
    }
    uint32_t *byl = byf + n, *pri = byl + n;
    treap t = {.l = pri + n, .r = pri + 2 * n, .pri = pri, .it = it, .root = NONE};
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < n; i++) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 7;
        rnd ^= rnd << 17;
        pri[i] = (uint32_t)rnd;
        t.l[i] = t.r[i] = NONE;
    }
    if (!order_items(it, n, true, byf) || !order_items(it, n, false, byl)) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "memory plan: out of memory");
        goto done;
    }
    for (uint32_t i = 0, j = 0; i < n; i++) {
        uint32_t x = byf[i];
        while (j < n && it[byl[j]].last < it[x].first) {
            if (it[byl[j]].first <= it[byl[j]].last)
                t.root = tp_erase(&t, t.root, byl[j]);
            j++;
        }
        t.root = tp_insert(&t, t.root, x);
        uint32_t c = tp_clash(&t, x);
        if (c != NONE) {
            st = overlap_fail(root, mg, &it[c], &it[x], err);
            goto done;
        }
    }
done:
    kiln__free(comp);
    kiln__free(it);
    kiln__free(byf);
    return st;
}

/* ---- [write]: in-place writers come after the readers of what they overwrite */

/* Readers of output @p p other than writer @p w (through its input @p wk) must
 * happen before @p w; @p who names the writer in messages. */
static kiln_status check_readers(kiln_graph *root, const mnames *nm, const kiln_schedule *s,
                                 kiln_node_id w, uint32_t wk, const char *who, kiln_anchor p,
                                 uint32_t depth, kiln_error *err)
{
    for (uint32_t u = kiln_use_first(root, p.node, p.index); u; u = kiln_use_next(root, u)) {
        kiln_anchor d = kiln_use_dst(root, u);
        if (d.node == w)
            continue;
        bool at_end = op_is(root, d.node, nm->netoutput);
        if (at_end || !kiln_schedule_happens_before(s, d.node, w))
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "memory plan [write]: %s writes the memory of %s_out_%u "
                               "(through input %u) while %s_in_%u still reads it: %s",
                               who, kiln_node_name_str(root, p.node), p.index, wk,
                               kiln_node_name_str(root, d.node), d.index,
                               at_end ? "a model output is read after the run"
                                      : "the reader does not happen before the writer "
                                        "(an isolation copy is missing)");
        /* readers of a view (Reshape, no-padding slices, no-task concat) read
         * the same memory */
        bool slices = nopad_views(root, nm, d.node);
        bool view = slices ? d.index == 0
                           : concat_view(root, nm, d.node) ||
                                 (op_is(root, d.node, nm->reshape) && d.index == 0);
        if (!view || depth > 64)
            continue;
        for (uint32_t o = 0; o < kiln_node_output_count(root, d.node); o++) {
            if (!slices && o > 0)
                break;
            kiln_status st = check_readers(root, nm, s, w, wk, who, (kiln_anchor){d.node, o},
                                           depth + 1, err);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* Node @p n writes input @p k in place; @p who names it. */
static kiln_status check_write(kiln_graph *root, const mnames *nm, const kiln_schedule *s,
                               kiln_node_id n, uint32_t k, const char *who, kiln_error *err)
{
    kiln_anchor p = kiln_node_input_peer(root, n, k);
    if (!p.node)
        return KILN_OK;
    if (op_in(root, p.node, nm->cnst, 4))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "memory plan [write]: %s writes the constant %s (%s) in place through "
                           "input %u (an isolation copy is missing)",
                           who, kiln_node_name_str(root, p.node), kiln_node_op_str(root, p.node),
                           k);
    return check_readers(root, nm, s, n, k, who, p, 0, err);
}

/* The in-place writes of @p n: outputs that ref or reuse an input, and every
 * input of an `_input_mutable` node (GE ScopeWriteable). */
static kiln_status check_writes(kiln_graph *root, const mnames *nm, const kiln_schedule *s,
                                kiln_node_id n, kiln_error *err)
{
    char who[300];
    uint32_t nin = kiln_node_input_count(root, n);
    for (uint32_t o = concat_view(root, nm, n) ? 1 : 0; o < kiln_node_output_count(root, n);
         o++) {
        int64_t k = written_input(root, nm, n, o);
        if (k < 0 || (uint64_t)k >= nin)
            continue;
        snprintf(who, sizeof who, "%s_out_%u", kiln_node_name_str(root, n), o);
        kiln_status st = check_write(root, nm, s, n, (uint32_t)k, who, err);
        if (st != KILN_OK)
            return st;
    }
    if (!node_bool(root, n, nm->input_mutable, "_input_mutable"))
        return KILN_OK;
    snprintf(who, sizeof who, "%s (_input_mutable)", kiln_node_name_str(root, n));
    for (uint32_t k = 0; k < nin; k++) {
        kiln_status st = check_write(root, nm, s, n, k, who, err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status kiln_memory_plan_verify(kiln_graph *root, kiln_error *err)
{
    if (!root)
        return kiln_errorf(err, KILN_ERR_PARAM, "kiln_memory_plan_verify: NULL graph");
    const kiln_schedule *s = NULL;
    kiln_status st = kiln_schedule_get(root, &s, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "memory plan");
    int64_t align = plan_alignment(root);
    mnames nm;
    mnames_init(root, &nm);
    for (kiln_node_id n = kiln_graph_next_node(root, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(root, n))
        if ((st = check_node_offsets(root, &nm, n, err)) == KILN_OK &&
            (st = check_groups(root, &nm, n, align, err)) == KILN_OK)
            st = check_writes(root, &nm, s, n, err);
    if (st != KILN_OK)
        return st;
    kiln_memgraph mg;
    if ((st = kiln__memgraph_read(root, &mg, err)) != KILN_OK)
        return st;
    for (uint32_t t = 0; t < mg.ntypes && st == KILN_OK; t++)
        st = sweep_type(root, &mg, t, err);
    kiln__memgraph_free(&mg);
    return st;
}
