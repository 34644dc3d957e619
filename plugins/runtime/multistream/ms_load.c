/*
 * ms_load.c - building the multi-stream runtime's loaded model
 * (ms_runtime.h): buffers from the memory symbols and the plan, one task per
 * node with a stream, kernels bound through the engines, events paired as the
 * schedule pairs them.
 *
 * Complexity: O(nodes + edges + symbol anchors) plus the engines'
 * kernel_create calls and O(log records) per wait.
 */
#include "ms_runtime.h"

#include <stdio.h>
#include <stdlib.h>

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* Bytes of output descriptor @p d; -1 when its shape or dtype is not static. */
static int64_t desc_bytes(const kiln_tensor_desc *d)
{
    int32_t rank = kiln_desc_rank(d);
    int64_t numel, bytes;
    size_t esz = kiln_dtype_size(kiln_desc_dtype(d));
    if (rank < 0 || esz == 0 ||
        kiln_dims_numel(kiln_desc_dims(d), (uint32_t)rank, &numel) != KILN_OK ||
        !kiln_mul_i64(numel, (int64_t)esz, &bytes))
        return -1;
    return bytes;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = kiln_alloc(n * size + 1);
    if (p)
        memset(p, 0, n * size + 1);
    return p;
}

/* ---- arenas ------------------------------------------------------------------ */


/* The error of an arena over the memory limit, naming its largest buffer (the
 * root graph's biggest static output of that memory type). */
static kiln_status arena_over_limit(const ms_model *m, const char *type, int64_t size,
                                    kiln_error *err)
{
    kiln_graph *g = m->g;
    kiln_node_id best = 0;
    uint32_t bo = 0;
    int64_t bb = -1;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
            const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
            const char *mt = kiln_desc_memory_type(g, d);
            int64_t b = desc_bytes(d);
            if (b > bb && (!mt || !mt[0] || strcmp(mt, type) == 0)) {
                bb = b;
                best = n;
                bo = o;
            }
        }
    char a[32], l[32], big[600] = "";
    if (best) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, best, bo);
        char shape[256];
        seq_dims_str((uint32_t)kiln_desc_rank(d), kiln_desc_dims(d), shape, sizeof(shape));
        char b[32];
        snprintf(big, sizeof(big), "; its largest buffer: node %.200s (%.60s): output %u (%s %s) "
                 "needs %lld bytes (%s)",
                 kiln_node_name_str(g, best), kiln_node_op_str(g, best), bo,
                 kiln_dtype_name(kiln_desc_dtype(d)), shape, (long long)bb,
                 seq_human_bytes(bb, b, sizeof(b)));
    }
    return kiln_errorf(err, KILN_ERR_LIMIT,
                       "graph %s: the %s arena of %lld bytes (%s) exceeds the memory limit of "
                       "%lld bytes (%s) (max_memory: kiln run --max-memory)%s",
                       kiln_graph_name(g), type, (long long)size, seq_human_bytes(size, a, sizeof(a)),
                       (long long)(m->mem.limit - m->mem.used),
                       seq_human_bytes(m->mem.limit - m->mem.used, l, sizeof(l)), big);
}

/* The plan's arenas from the root attributes; m->planned stays false without a plan. */
static kiln_status build_arenas(ms_model *m, kiln_error *err)
{
    const kiln_attrs *a = kiln_graph_attrs(m->g);
    const char *const *types = NULL;
    const int64_t *sizes = NULL;
    uint32_t nt = 0, ns = 0;
    if (!kiln_attrs_get_list_string(a, "_kiln_memory_types", &types, &nt) ||
        !kiln_attrs_get_list_int(a, "_kiln_memory_sizes", &sizes, &ns))
        return KILN_OK;
    if (nt != ns)
        return kiln_errorf(err, KILN_ERR_INVALID, "graph %s: _kiln_memory_types has %u entries "
                           "and _kiln_memory_sizes %u", kiln_graph_name(m->g), nt, ns);
    m->arenas = xcalloc(nt, sizeof(void *));
    m->arena_size = xcalloc(nt, sizeof(int64_t));
    if (!m->arenas || !m->arena_size)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    m->narenas = nt;
    for (uint32_t i = 0; i < nt; i++) {
        if (sizes[i] < 0 || sizes[i] > m->mem.limit - m->mem.used)
            return arena_over_limit(m, types[i], sizes[i], err);
        size_t sz = ((size_t)sizes[i] + 4095) / 4096 * 4096;
        m->arenas[i] = sz ? aligned_alloc(4096, sz) : NULL;
        if (sz && !m->arenas[i])
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory allocating the %s arena "
                               "(%lld bytes)", types[i], (long long)sizes[i]);
        m->arena_size[i] = sizes[i];
        if (m->fault_event >= 0 && sz) /* test mode: stale memory reads as NaN */
            memset(m->arenas[i], 0xff, sz);
        m->mem.used += sizes[i];
    }
    m->planned = true;
    return KILN_OK;
}

static uint32_t arena_of(const ms_model *m, const char *type)
{
    const char *const *types = NULL;
    uint32_t nt = 0;
    kiln_attrs_get_list_string(kiln_graph_attrs(m->g), "_kiln_memory_types", &types, &nt);
    for (uint32_t i = 0; i < nt && i < m->narenas; i++)
        if (strcmp(types[i], type ? type : "HBM") == 0)
            return i;
    return MS_NONE;
}

/* ---- buffers ------------------------------------------------------------------- */

/* What one root anchor says about its symbol's buffer. */
static kiln_status note_anchor(ms_model *m, const kiln_symtab_anchor *an, ms_buf *b,
                               int64_t *offset, const char **mtype, kiln_error *err)
{
    kiln_graph *g = m->g;
    kiln_node_id n = an->node;
    if (!an->is_output) {
        if (op_is(g, n, "NetOutput") && b->kind != MS_BUF_INPUT && b->kind != MS_BUF_CONST &&
            b->kind != MS_BUF_OUTPUT) {
            b->kind = MS_BUF_OUTPUT;
            b->io = an->index;
        }
        return KILN_OK;
    }
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, an->index);
    int64_t bytes = desc_bytes(d);
    if (bytes < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s (%s): output %u has no static "
                           "size; the multistream runtime needs static shapes",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), an->index);
    if (bytes > b->size)
        b->size = bytes;
    if (op_is(g, n, "Data")) {
        int64_t idx;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx) || idx < 0 ||
            idx >= (int64_t)m->ninputs)
            return kiln_errorf(err, KILN_ERR_INVALID, "Data node %s has no valid attribute "
                               "'index'", kiln_node_name_str(g, n));
        b->kind = MS_BUF_INPUT;
        b->io = (uint32_t)idx;
    } else if (seq_is_variable(g, n)) {
        b->var = n;
    } else if ((op_is(g, n, "Const") || op_is(g, n, "Constant")) && b->kind != MS_BUF_INPUT) {
        kiln_tensor_value v;
        if (!kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v) || v.nbytes != (size_t)bytes)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s): no tensor attribute 'value' "
                               "of %lld bytes", kiln_node_name_str(g, n), kiln_node_op_str(g, n),
                               (long long)bytes);
        b->kind = MS_BUF_CONST;
        b->ptr = (void *)(uintptr_t)v.data;
    }
    int64_t off = kiln_desc_offset(d);
    if (off >= 0) {
        if (*offset >= 0 && off != *offset)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s: output %u at offset %lld, another "
                               "anchor of its memory symbol at %lld: the memory plan is "
                               "inconsistent", kiln_node_name_str(g, n), an->index,
                               (long long)off, (long long)*offset);
        *offset = off;
        *mtype = kiln_desc_memory_type(g, d);
        int64_t planned = kiln_desc_size(d);
        if (planned >= 0 && bytes > planned)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s: output %u needs %lld bytes, the "
                               "memory plan gave it %lld (shapes changed since the build?)",
                               kiln_node_name_str(g, n), an->index, (long long)bytes,
                               (long long)planned);
    }
    return KILN_OK;
}

static kiln_status build_buffers(ms_model *m, const kiln_symtab *st, kiln_error *err)
{
    m->nbufs = kiln_symtab_count(st);
    m->bufs = xcalloc(m->nbufs, sizeof(ms_buf));
    if (!m->bufs)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t s = 0; s < m->nbufs; s++) {
        ms_buf *b = &m->bufs[s];
        b->first = MS_NONE;
        b->kind = MS_BUF_OWN;
        int64_t offset = -1;
        const char *mtype = NULL;
        uint32_t na = 0;
        const kiln_symtab_anchor *an = kiln_symtab_anchors(st, s, &na);
        bool root = false;
        for (uint32_t k = 0; k < na; k++) {
            if (an[k].graph != 0)
                continue;
            root = true;
            kiln_status e = note_anchor(m, &an[k], b, &offset, &mtype, err);
            if (e != KILN_OK)
                return e;
        }
        if (!root || b->kind != MS_BUF_OWN)
            continue;
        if (m->planned && offset >= 0) {
            b->arena = arena_of(m, mtype);
            if (b->arena == MS_NONE || offset > m->arena_size[b->arena] - b->size)
                return kiln_errorf(err, KILN_ERR_INVALID, "memory symbol %u: [%lld, +%lld) of "
                                   "memory type %s lies outside the plan's arenas", s,
                                   (long long)offset, (long long)b->size, mtype ? mtype : "HBM");
            b->kind = MS_BUF_ARENA;
            b->offset = offset;
            b->ptr = (char *)m->arenas[b->arena] + offset;
        } else {
            if (b->size > m->mem.limit - m->mem.used)
                return kiln_errorf(err, KILN_ERR_LIMIT, "memory symbol %u (%lld bytes) takes the "
                                   "model past the runtime's max_memory", s, (long long)b->size);
            b->ptr = kiln_alloc(b->size ? (size_t)b->size : 1);
            if (!b->ptr)
                return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%lld bytes)",
                                   (long long)b->size);
            m->mem.used += b->size;
        }
        /* a variable starts with its value, once: it keeps what runs write */
        kiln_status e = b->var ? seq_var_init(m->g, b->var, b->ptr, (size_t)b->size, err) : KILN_OK;
        if (e != KILN_OK)
            return e;
    }
    return KILN_OK;
}

/* ---- inputs and outputs ------------------------------------------------------------ */

static kiln_status build_io(ms_model *m, const kiln_symtab *st, kiln_error *err)
{
    kiln_graph *g = m->g;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (op_is(g, n, "Data"))
            m->ninputs++;
        else if (op_is(g, n, "NetOutput")) {
            if (m->netoutput)
                return kiln_errorf(err, KILN_ERR_INVALID, "graph %s has two NetOutput nodes "
                                   "(%s, %s)", kiln_graph_name(g),
                                   kiln_node_name_str(g, m->netoutput), kiln_node_name_str(g, n));
            m->netoutput = n;
        }
    }
    m->input_node = xcalloc(m->ninputs, sizeof(kiln_node_id));
    m->input_buf = xcalloc(m->ninputs, sizeof(uint32_t));
    m->noutputs = m->netoutput ? kiln_node_input_count(g, m->netoutput) : 0;
    m->output_buf = xcalloc(m->noutputs, sizeof(uint32_t));
    m->output_desc = xcalloc(m->noutputs, sizeof(*m->output_desc));
    if (!m->input_node || !m->input_buf || !m->output_buf || !m->output_desc)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (!op_is(g, n, "Data"))
            continue;
        int64_t idx;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx) || idx < 0 ||
            idx >= (int64_t)m->ninputs || m->input_node[idx])
            return kiln_errorf(err, KILN_ERR_INVALID, "Data node %s: attribute 'index' missing, "
                               "out of range or taken", kiln_node_name_str(g, n));
        m->input_node[idx] = n;
        m->input_buf[idx] = kiln_symtab_symbol(st, g, n, 0, true);
    }
    for (uint32_t j = 0; j < m->noutputs; j++) {
        kiln_anchor p = kiln_node_input_peer(g, m->netoutput, j);
        if (!p.node)
            return kiln_errorf(err, KILN_ERR_INVALID, "output %u (NetOutput %s input %u) is "
                               "unconnected", j, kiln_node_name_str(g, m->netoutput), j);
        m->output_buf[j] = kiln_symtab_symbol(st, g, m->netoutput, j, false);
        m->output_desc[j] = kiln_node_output_desc(g, p.node, p.index);
    }
    return KILN_OK;
}

/* The caller's output tensors are allocated per run (kiln_model_run): each
 * must fit what the plan's arenas and own buffers leave of the limit. */
static kiln_status check_outputs(ms_model *m, kiln_error *err)
{
    kiln_graph *g = m->g;
    for (uint32_t j = 0; j < m->noutputs; j++) {
        kiln_anchor p = kiln_node_input_peer(g, m->netoutput, j);
        const int64_t bytes = desc_bytes(m->output_desc[j]);
        if (bytes > m->mem.limit - m->mem.used) {
            char shape[256], a[32], u[32], l[32];
            const kiln_tensor_desc *d = m->output_desc[j];
            seq_dims_str((uint32_t)kiln_desc_rank(d), kiln_desc_dims(d), shape, sizeof(shape));
            return kiln_errorf(err, KILN_ERR_LIMIT,
                               "node %s (%s): output %u (%s %s) needs %lld bytes (%s) as the "
                               "model's output %u; with the %s already planned that exceeds the "
                               "memory limit of %lld bytes (%s) (max_memory: kiln run "
                               "--max-memory)",
                               kiln_node_name_str(g, p.node), kiln_node_op_str(g, p.node),
                               p.index, kiln_dtype_name(kiln_desc_dtype(d)), shape,
                               (long long)bytes, seq_human_bytes(bytes, a, sizeof(a)), j,
                               seq_human_bytes(m->mem.used, u, sizeof(u)), (long long)m->mem.limit,
                               seq_human_bytes(m->mem.limit, l, sizeof(l)));
        }
    }
    return KILN_OK;
}

/* ---- tasks ------------------------------------------------------------------------- */

/* Fill @p t (dims borrowed from the descriptor) for output @p o of @p n. */
static void tensor_of(kiln_graph *g, kiln_node_id n, uint32_t o, kiln_tensor *t)
{
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    t->dtype = kiln_desc_dtype(d);
    t->rank = (uint32_t)(kiln_desc_rank(d) > 0 ? kiln_desc_rank(d) : 0);
    t->dims = kiln_desc_dims(d);
    t->data = NULL;
    t->nbytes = (size_t)desc_bytes(d);
}

static void add_touch(ms_task *t, uint32_t b)
{
    if (b == MS_NONE)
        return;
    for (uint32_t i = 0; i < t->ntouch; i++)
        if (t->touch[i] == b)
            return;
    t->touch[t->ntouch++] = b;
}

/* Record steps of each event id, in order (for pairing waits with records). */
typedef struct rec_index {
    uint32_t *off;   /* nevents + 1 */
    uint32_t *steps; /* record steps per id, ascending */
} rec_index;

static kiln_status index_records(ms_model *m, const kiln_schedule *s, rec_index *ri,
                                 kiln_error *err)
{
    uint32_t nsteps = kiln_schedule_step_count(s), maxid = 0, total = 0;
    for (uint32_t i = 0; i < nsteps; i++)
        for (int w = 0; w < 2; w++) {
            const int64_t *ids;
            uint32_t c = 0;
            if (kiln_attrs_get_list_int(kiln_node_attrs(m->g, kiln_schedule_node(s, i)),
                                        w ? "_recv_event_ids" : "_send_event_ids", &ids, &c))
                for (uint32_t k = 0; k < c; k++) {
                    if ((uint64_t)ids[k] + 1 > maxid)
                        maxid = (uint32_t)ids[k] + 1;
                    total += !w;
                }
        }
    m->nevents = maxid;
    ri->off = xcalloc((size_t)maxid + 1, sizeof(uint32_t));
    ri->steps = xcalloc(total, sizeof(uint32_t));
    uint32_t *fill = xcalloc((size_t)maxid + 1, sizeof(uint32_t));
    if (!ri->off || !ri->steps || !fill) {
        kiln_free(fill);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nsteps; i++) {
            const int64_t *ids;
            uint32_t c = 0;
            if (!kiln_attrs_get_list_int(kiln_node_attrs(m->g, kiln_schedule_node(s, i)),
                                         "_send_event_ids", &ids, &c))
                continue;
            for (uint32_t k = 0; k < c; k++) {
                if (pass == 0)
                    ri->off[ids[k] + 1]++;
                else
                    ri->steps[fill[ids[k]]++] = i;
            }
        }
        if (pass == 0) {
            for (uint32_t e = 0; e < maxid; e++)
                ri->off[e + 1] += ri->off[e];
            memcpy(fill, ri->off, (size_t)maxid * sizeof(uint32_t));
        }
    }
    kiln_free(fill);
    return KILN_OK;
}

/* The count event @p id reaches when the record at step @p step is done. */
static uint32_t record_ordinal(const rec_index *ri, uint32_t id, uint32_t step)
{
    uint32_t lo = ri->off[id], hi = ri->off[id + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ri->steps[mid] <= step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - ri->off[id];
}

static kiln_status task_events(ms_model *m, const kiln_schedule *s, const rec_index *ri,
                               ms_task *t, kiln_error *err)
{
    uint32_t nev = 0;
    const kiln_sched_event *ev = kiln_schedule_events(s, &nev);
    for (uint32_t k = 0; k < nev; k++)
        if (ev[k].receiver == t->node)
            t->nwait++;
    const int64_t *ids = NULL;
    uint32_t c = 0;
    kiln_attrs_get_list_int(kiln_node_attrs(m->g, t->node), "_send_event_ids", &ids, &c);
    t->waits = xcalloc(t->nwait, sizeof(ms_wait));
    t->records = xcalloc(c, sizeof(uint32_t));
    if (!t->waits || !t->records)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    t->nwait = 0;
    for (uint32_t k = 0; k < nev; k++) {
        if (ev[k].receiver != t->node)
            continue;
        if (m->fault_event == (int64_t)k) { /* test mode: this wait is dropped */
            m->fault_sender = ev[k].sender;
            continue;
        }
        t->waits[t->nwait++] = (ms_wait){ev[k].id,
                                         record_ordinal(ri, ev[k].id,
                                                        kiln_schedule_step(s, ev[k].sender)),
                                         kiln_schedule_step(s, ev[k].sender), 0};
    }
    for (uint32_t k = 0; k < c; k++)
        t->records[t->nrecord++] = (uint32_t)ids[k];
    return KILN_OK;
}

static kiln_status task_kind(ms_model *m, ms_task *t, kiln_error *err)
{
    kiln_graph *g = m->g;
    kiln_node_id n = t->node;
    int64_t tk;
    if (kiln_attrs_get_int(kiln_node_attrs(g, n), "_kiln_task_kind", &tk) && tk == KILN_TASK_NONE) {
        t->kind = MS_T_NOP;
        return KILN_OK;
    }
    switch (seq_classify(g, n)) {
    case SEQ_KERNEL:
        t->kind = MS_T_KERNEL;
        return kiln_engine_kernel(g, n, &t->fn, &t->state, &t->engine, err);
    case SEQ_COPY:
        t->kind = MS_T_COPY; /* input k to output k */
        if (t->nout < 1 || t->nin < t->nout)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s) needs an input per output",
                               kiln_node_name_str(g, n), kiln_node_op_str(g, n));
        return KILN_OK;
    case SEQ_IF:
        t->kind = MS_T_IF;
        if (t->nin < 1 || t->in_buf[0] == MS_NONE)
            return kiln_errorf(err, KILN_ERR_INVALID, "If node %s has no condition input",
                               kiln_node_name_str(g, n));
        for (int b = 0; b < 2; b++) {
            t->sub_graph[b] = seq_branch_of(g, n, seq_branch_roles[b]);
            if (!t->sub_graph[b])
                return kiln_errorf(err, KILN_ERR_INVALID, "If node %s has no %s",
                                   kiln_node_name_str(g, n), seq_branch_roles[b]);
        }
        return KILN_OK;
    case SEQ_WHILE:
        t->kind = MS_T_WHILE;
        return seq_loop_prepare(g, n, &m->mem, &t->loop, err);
    case SEQ_CASE:
        t->kind = MS_T_CASE;
        return seq_cases_prepare(g, n, &m->mem, &t->cases, err);
    case SEQ_CALL:
        t->kind = MS_T_CALL;
        if (kiln_node_subgraph_count(g, n) != 1)
            return kiln_errorf(err, KILN_ERR_INVALID, "PartitionedCall node %s has %u "
                               "subgraphs, not 1", kiln_node_name_str(g, n),
                               kiln_node_subgraph_count(g, n));
        t->sub_graph[0] = kiln_node_subgraph(g, n, 0, NULL);
        return KILN_OK;
    default: /* Data, Const, NetOutput, NoOp...: nothing to run, but events still apply */
        t->kind = MS_T_NOP;
        return KILN_OK;
    }
}

static kiln_status task_workspace(ms_model *m, ms_task *t, kiln_error *err)
{
    const int64_t *off = NULL, *bytes = NULL;
    uint32_t no = 0, nb = 0;
    const kiln_attrs *a = kiln_node_attrs(m->g, t->node);
    if (!kiln_attrs_get_list_int(a, "_kiln_workspace_offsets", &off, &no) ||
        !kiln_attrs_get_list_int(a, "_kiln_workspace_bytes", &bytes, &nb) || !no || !nb ||
        !m->planned)
        return KILN_OK;
    uint32_t ar = arena_of(m, "HBM");
    if (ar == MS_NONE || off[0] < 0 || bytes[0] < 0 || off[0] > m->arena_size[ar] - bytes[0])
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s: workspace [%lld, +%lld) lies outside "
                           "the plan's arena", kiln_node_name_str(m->g, t->node),
                           (long long)off[0], (long long)bytes[0]);
    t->ws = (char *)m->arenas[ar] + off[0];
    t->ws_size = (size_t)bytes[0];
    return KILN_OK;
}

static kiln_status build_task(ms_model *m, const kiln_symtab *st, const kiln_schedule *s,
                              const rec_index *ri, ms_task *t, kiln_node_id n, kiln_error *err)
{
    kiln_graph *g = m->g;
    t->node = n;
    t->nin = kiln_node_input_count(g, n);
    t->nout = kiln_node_output_count(g, n);
    t->in_buf = xcalloc(t->nin, sizeof(uint32_t));
    t->out_buf = xcalloc(t->nout, sizeof(uint32_t));
    t->args = xcalloc((size_t)t->nin + t->nout, sizeof(kiln_tensor));
    t->touch = xcalloc((size_t)t->nin + t->nout, sizeof(uint32_t));
    if (!t->in_buf || !t->out_buf || !t->args || !t->touch)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < t->nin; k++) {
        kiln_anchor p = kiln_node_input_peer(g, n, k);
        t->in_buf[k] = p.node ? kiln_symtab_symbol(st, g, p.node, p.index, true) : MS_NONE;
        if (p.node)
            tensor_of(g, p.node, p.index, &t->args[k]);
        add_touch(t, t->in_buf[k]);
    }
    for (uint32_t o = 0; o < t->nout; o++) {
        t->out_buf[o] = kiln_symtab_symbol(st, g, n, o, true);
        tensor_of(g, n, o, &t->args[t->nin + o]);
        add_touch(t, t->out_buf[o]);
    }
    kiln_status e = task_kind(m, t, err);
    if (e == KILN_OK &&
        (t->kind == MS_T_IF || t->kind == MS_T_CALL || t->kind == MS_T_WHILE ||
         t->kind == MS_T_CASE) &&
        !(t->sub_io = xcalloc((size_t)t->nin + t->nout, sizeof(kiln_tensor))))
        e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (e == KILN_OK)
        e = task_workspace(m, t, err);
    if (e == KILN_OK)
        e = task_events(m, s, ri, t, err);
    if (e != KILN_OK)
        return kiln_error_push(err, "node %s (%s)", kiln_node_name_str(g, n),
                               kiln_node_op_str(g, n));
    if (t->kind == MS_T_IF || t->kind == MS_T_CALL)
        for (int b = 0; b < (t->kind == MS_T_IF ? 2 : 1); b++)
            if (seq_shapes_static(t->sub_graph[b]) &&
                (e = seq_plan_build(t->sub_graph[b], false, &m->mem, &t->sub[b], err)) != KILN_OK)
                return kiln_error_push(err, "node %s (%s)", kiln_node_name_str(g, n),
                                       kiln_node_op_str(g, n));
    return KILN_OK;
}

/* Stream-less nodes run nothing: refuse one that would have to. */
static kiln_status check_streamless(ms_model *m, const kiln_schedule *s, kiln_error *err)
{
    for (uint32_t i = 0; i < kiln_schedule_step_count(s); i++) {
        kiln_node_id n = kiln_schedule_node(s, i);
        if (kiln_schedule_stream(s, n) >= 0)
            continue;
        int64_t tk;
        if (kiln_attrs_get_int(kiln_node_attrs(m->g, n), "_kiln_task_kind", &tk) &&
            tk == KILN_TASK_NONE)
            continue;
        seq_kind k = seq_classify(m->g, n);
        if (k == SEQ_KERNEL || k == SEQ_COPY || k == SEQ_IF || k == SEQ_CALL || k == SEQ_WHILE)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s) has no stream but has work "
                               "to do (the stream allocation left it out)",
                               kiln_node_name_str(m->g, n), kiln_node_op_str(m->g, n));
    }
    return KILN_OK;
}

static kiln_status build_tasks(ms_model *m, const kiln_symtab *st, const kiln_schedule *s,
                               kiln_error *err)
{
    kiln_status e = check_streamless(m, s, err);
    if (e != KILN_OK)
        return e;
    rec_index ri = {NULL, NULL};
    if ((e = index_records(m, s, &ri, err)) != KILN_OK)
        goto out;
    m->nstreams = kiln_schedule_stream_count(s);
    m->streams = xcalloc(m->nstreams, sizeof(ms_stream));
    for (uint32_t k = 0; k < m->nstreams; k++)
        kiln_schedule_stream_steps(s, k, &m->streams[k].ntasks), m->ntasks += m->streams[k].ntasks;
    m->tasks = xcalloc(m->ntasks, sizeof(ms_task));
    if (!m->streams || !m->tasks) {
        e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* tasks in global step order, so buf->first is the earliest writer */
    uint32_t *task_of_step = xcalloc(kiln_schedule_step_count(s), sizeof(uint32_t));
    if (!task_of_step) {
        e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint32_t nt = 0;
    for (uint32_t i = 0; i < kiln_schedule_step_count(s) && e == KILN_OK; i++) {
        kiln_node_id n = kiln_schedule_node(s, i);
        task_of_step[i] = MS_NONE;
        if (kiln_schedule_stream(s, n) < 0)
            continue;
        ms_task *t = &m->tasks[nt];
        task_of_step[i] = nt++;
        e = build_task(m, st, s, &ri, t, n, err);
        for (uint32_t k = 0; e == KILN_OK && k < t->ntouch; k++)
            m->bufs[t->touch[k]].uses++;
        for (uint32_t o = 0; e == KILN_OK && o < t->nout; o++)
            if (m->bufs[t->out_buf[o]].first == MS_NONE)
                m->bufs[t->out_buf[o]].first = task_of_step[i];
    }
    for (uint32_t k = 0; e == KILN_OK && k < m->nstreams; k++) {
        uint32_t cnt = 0;
        const uint32_t *steps = kiln_schedule_stream_steps(s, k, &cnt);
        m->streams[k].tasks = xcalloc(cnt, sizeof(uint32_t));
        if (!m->streams[k].tasks) {
            e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
            break;
        }
        for (uint32_t i = 0; i < cnt; i++) {
            m->streams[k].tasks[i] = task_of_step[steps[i]];
            m->tasks[task_of_step[steps[i]]].stream = k;
        }
    }
    for (uint32_t i = 0; e == KILN_OK && i < m->ntasks; i++) /* wait senders: steps -> tasks */
        for (uint32_t w = 0; w < m->tasks[i].nwait; w++)
            m->tasks[i].waits[w].sender = task_of_step[m->tasks[i].waits[w].sender];
    kiln_free(task_of_step);
out:
    kiln_free(ri.off);
    kiln_free(ri.steps);
    return e;
}

kiln_status ms_protect_loop_vars(ms_model *m, kiln_error *err)
{
    for (uint32_t i = 0; i < m->ntasks; i++) {
        const ms_task *t = &m->tasks[i];
        for (uint32_t o = 0; t->kind == MS_T_WHILE && o < t->nout; o++)
            for (uint32_t o2 = o + 1; o2 < t->nout; o2++)
                if (t->out_buf[o] == t->out_buf[o2])
                    return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                                       "While node %s: outputs %u and %u share one memory symbol "
                                       "(the body passes one loop variable to another, and a "
                                       "While updates them in place); run the memory-conflict "
                                       "passes first (SubgraphPass inserts the body's copies; "
                                       "the default manifest does)",
                                       kiln_node_name_str(m->g, t->node), o, o2);
        for (uint32_t o = 0; t->kind == MS_T_WHILE && o < t->nout; o++) {
            ms_buf *b = &m->bufs[t->out_buf[o]];
            if (b->kind != MS_BUF_INPUT && b->kind != MS_BUF_CONST)
                continue;
            if (b->size > m->mem.limit - m->mem.used)
                return kiln_errorf(err, KILN_ERR_LIMIT, "While node %s: loop variable %u (%lld "
                                   "bytes) takes the model past the runtime's max_memory",
                                   kiln_node_name_str(m->g, t->node), o, (long long)b->size);
            void *own = kiln_alloc(b->size ? (size_t)b->size : 1);
            if (!own)
                return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
            m->mem.used += b->size;
            if (b->kind == MS_BUF_INPUT)
                b->copy_input = true;
            else
                b->copy_src = b->ptr, b->copy_bytes = (size_t)b->size;
            b->kind = MS_BUF_OWN;
            b->ptr = own;
        }
    }
    return KILN_OK;
}

kiln_status ms_model_build(kiln_graph *g, int64_t max_memory, ms_model **out, kiln_error *err)
{
    *out = NULL;
    ms_model *m = xcalloc(1, sizeof(*m));
    if (!m)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    m->g = g;
    m->mem.limit = max_memory;
    m->fault_event = -1;
    const char *fe = getenv("KILN_TEST_MS_DROP_EVENT");
    if (fe && *fe)
        m->fault_event = strtoll(fe, NULL, 10);
    pthread_mutex_init(&m->run_mu, NULL);
    pthread_cond_init(&m->run_cv, NULL);
    pthread_cond_init(&m->done_cv, NULL);
    const kiln_schedule *s = NULL;
    const kiln_symtab *st = NULL;
    kiln_status e = kiln_schedule_get(g, &s, err);
    if (e == KILN_OK) /* an unordered cross-stream edge would be a data race */
        e = kiln_schedule_check(g, s, err);
    if (e == KILN_OK)
        e = kiln_symtab_get(g, &st, err);
    if (e == KILN_OK)
        e = build_io(m, st, err);
    if (e == KILN_OK)
        e = build_arenas(m, err);
    if (e == KILN_OK)
        e = build_buffers(m, st, err);
    if (e == KILN_OK)
        e = check_outputs(m, err);
    if (e == KILN_OK)
        e = build_tasks(m, st, s, err);
    if (e == KILN_OK)
        e = ms_protect_loop_vars(m, err);
    if (e == KILN_OK) {
        m->events = xcalloc(m->nevents, sizeof(ms_event));
        m->worker_err = xcalloc(m->nstreams, sizeof(kiln_error *));
        m->worker_st = xcalloc(m->nstreams, sizeof(kiln_status));
        m->worker_cancelled = xcalloc(m->nstreams, sizeof(bool));
        m->workers = xcalloc(m->nstreams, sizeof(ms_worker));
        if (!m->events || !m->worker_err || !m->worker_st || !m->workers ||
            !m->worker_cancelled)
            e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; e == KILN_OK && i < m->nstreams; i++)
            if (!(m->worker_err[i] = kiln_error_create()))
                e = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; e == KILN_OK && i < m->nevents; i++) {
            pthread_mutex_init(&m->events[i].mu, NULL);
            pthread_cond_init(&m->events[i].cv, NULL);
        }
    }
    if (e != KILN_OK) {
        ms_model_free(m);
        return e;
    }
    *out = m;
    return KILN_OK;
}
