/*
 * seq_load.c - building the sequential runtime's plans (seq_runtime.h).
 *
 * seq_plan_build walks the graph in topological order (kiln_graph_topo_order)
 * and makes one step per node:
 *   Data          root: a buffer of the descriptor's static size that run()
 *                 copies the caller's tensor into; branch: a view bound to the
 *                 If input named by `_parent_node_index` when the branch runs
 *   Const/Constant a view of the `value` tensor attribute
 *   NetOutput     nothing (its inputs are the graph's outputs)
 *   If            the plans of `then_branch` and `else_branch`, built here (a
 *                 branch whose shapes are not static is planned when first taken)
 *   PartitionedCall  the plan of its one subgraph (role `f`), built here or,
 *                 when its shapes are not static, at its first run
 *   Identity, MemcpyAsync, MemcpyAddrAsync  an engine kernel when an engine
 *                 claims them, else a plain copy done by the runtime (input k
 *                 to output k; always so for several inputs)
 *   NoOp, AtomicAddrClean, MemSet  nothing (no device memory to clean)
 *   While, StatelessWhile, _While  the loop (seq_loop.c): its subgraphs'
 *                 plans and its own buffers; the outputs are views of them
 *   anything else an engine kernel (kiln_engine_kernel); other ops carrying
 *                 subgraphs (Case, ...) are refused
 * Every output that is not a view gets its own buffer, sized from its
 * descriptor (numel x dtype size, overflow-checked), allocated once here and
 * reused by every run.  A dynamic dim is an error naming the node and the
 * output; so is a buffer that would take the model's buffers past the
 * runtime's max_memory (seq_mem), checked before the allocator is asked.
 *
 * Complexity: O(nodes + edges) plus the engines' kernel_create calls.
 */
#include "seq_runtime.h"

#include "bg_condition.h"

#include <stdlib.h>

void seq_dims_str(uint32_t rank, const int64_t *dims, char *buf, size_t size)
{
    size_t n = 0;
    if (size == 0)
        return;
    buf[0] = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (uint32_t i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

bool seq_is_variable(const kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    return strcmp(op, "Variable") == 0 || strcmp(op, "VariableV2") == 0 ||
           strcmp(op, "VarHandleOp") == 0;
}

kiln_status seq_var_init(kiln_graph *g, kiln_node_id n, void *dst, size_t bytes, kiln_error *err)
{
    kiln_tensor_value v;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v)) {
        if (bytes)
            memset(dst, 0, bytes);
        return KILN_OK;
    }
    if (v.nbytes != bytes)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "variable %s (%s): its 'value' holds %zu bytes, its descriptor %zu",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), v.nbytes, bytes);
    if (bytes)
        memcpy(dst, v.data, bytes);
    return KILN_OK;
}

seq_kind seq_classify(kiln_graph *g, kiln_node_id n)
{
    if (seq_is_variable(g, n))
        return SEQ_VAR;
    if (op_is(g, n, "Data") || op_is(g, n, "InnerData"))
        return SEQ_DATA;
    if (op_is(g, n, "Const") || op_is(g, n, "Constant"))
        return SEQ_CONST;
    if (op_is(g, n, "NetOutput") || op_is(g, n, "InnerNetOutput"))
        return SEQ_NETOUTPUT;
    if (op_is(g, n, "PointFromInputs") || op_is(g, n, "IdentityAddr"))
        return SEQ_ALIAS;
    if (kiln_bg_is_free_type(kiln_node_op_str(g, n)))
        return SEQ_NOP; /* a guarder: the runtime owns its buffers */
    if (op_is(g, n, "If"))
        return SEQ_IF;
    if (op_is(g, n, "Case"))
        return SEQ_CASE;
    if (op_is(g, n, "PartitionedCall"))
        return SEQ_CALL;
    if (op_is(g, n, "While") || op_is(g, n, "StatelessWhile") || op_is(g, n, "_While"))
        return SEQ_WHILE;
    /* a copy with several inputs (GE's While body memcpy) copies input k to
     * output k, which no engine's one-tensor kernel does */
    if ((op_is(g, n, "Identity") || op_is(g, n, "MemcpyAsync") || op_is(g, n, "MemcpyAddrAsync")) &&
        (kiln_node_input_count(g, n) > 1 || !kiln_engine_for_node(g, n)))
        return SEQ_COPY;
    if (op_is(g, n, "NoOp") || op_is(g, n, "AtomicAddrClean") || op_is(g, n, "MemSet"))
        return SEQ_NOP;
    return SEQ_KERNEL;
}

/* Give slot @p s its own buffer of the static size of output @p o of @p n. */
const char *seq_human_bytes(int64_t bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%lld bytes", (long long)bytes);
    else
        snprintf(buf, size, "%.1f %s", v, unit[u]);
    return buf;
}

static kiln_status alloc_slot(seq_plan *p, kiln_node_id n, uint32_t o, seq_slot *s,
                              kiln_error *err)
{
    kiln_graph *g = p->g;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    int32_t rank = kiln_desc_rank(d);
    const int64_t *dims = kiln_desc_dims(d);
    int64_t numel = -1;
    kiln_dtype dt = kiln_desc_dtype(d);
    kiln_status cs = rank < 0 ? KILN_ERR_INVALID : kiln_dims_numel(dims, (uint32_t)rank, &numel);
    if (cs == KILN_ERR_LIMIT) {
        char shape[256];
        seq_dims_str((uint32_t)rank, dims, shape, sizeof(shape));
        return kiln_errorf(err, KILN_ERR_LIMIT,
                           "node %s (%s): output %u shape %s has more elements than fit in 64 "
                           "bits",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o, shape);
    }
    if (cs != KILN_OK) {
        char shape[256] = "unknown rank";
        if (rank >= 0)
            seq_dims_str((uint32_t)rank, dims, shape, sizeof(shape));
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node %s (%s): output %u has a dynamic shape %s; the sequential "
                           "runtime needs static shapes (set the input shapes and run "
                           "InferShapes first)",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o, shape);
    }
    size_t esz = kiln_dtype_size(dt);
    if (esz == 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node %s (%s): output %u has dtype %s, which the sequential runtime "
                           "cannot hold",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o,
                           kiln_dtype_name(dt));
    char shape[256], a[32], b[32], lim[32];
    int64_t bytes;
    if (!kiln_mul_i64(numel, (int64_t)esz, &bytes) || (uint64_t)bytes > SIZE_MAX) {
        seq_dims_str((uint32_t)rank, dims, shape, sizeof(shape));
        return kiln_errorf(err, KILN_ERR_LIMIT,
                           "node %s (%s): output %u (%s %s) is larger than the address space",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o,
                           kiln_dtype_name(dt), shape);
    }
    size_t nbytes = (size_t)bytes;
    int64_t planned = kiln_desc_offset(d);
    /* the subgraph's plan: a place in its region (a variable keeps a buffer
     * of its own: it outlives the run) */
    bool in_plan = p->region && planned >= 0 && !seq_is_variable(g, n);
    if (in_plan && (bytes > p->region_size || planned > p->region_size - bytes))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "node %s (%s): output %u at planned offset %lld (%lld bytes) "
                           "lies outside its subgraph's region of %lld bytes",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o,
                           (long long)planned, (long long)bytes, (long long)p->region_size);
    seq_mem *m = p->mem;
    if (!in_plan && m && m->limit > 0 && bytes > m->limit - m->used) {
        seq_dims_str((uint32_t)rank, dims, shape, sizeof(shape));
        return kiln_errorf(err, KILN_ERR_LIMIT,
                           "node %s (%s): output %u (%s %s) needs %lld bytes (%s); with the "
                           "%s already planned that exceeds the memory limit of %lld bytes (%s) "
                           "(max_memory: kiln run --max-memory)",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n), o,
                           kiln_dtype_name(dt), shape, (long long)bytes,
                           seq_human_bytes(bytes, a, sizeof(a)), seq_human_bytes(m->used, b, sizeof(b)),
                           (long long)m->limit, seq_human_bytes(m->limit, lim, sizeof(lim)));
    }
    s->dims = kiln_alloc(sizeof(int64_t) * (rank ? (size_t)rank : 1));
    if (!in_plan) {
        if (m)
            m->used += bytes;
        s->buf = kiln_alloc(nbytes ? nbytes : 1);
    }
    if (!s->dims || (!in_plan && !s->buf))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (node %s, %zu bytes)",
                           kiln_node_name_str(g, n), nbytes);
    if (rank)
        memcpy(s->dims, dims, sizeof(int64_t) * (size_t)rank);
    if (!in_plan)
        memset(s->buf, 0, nbytes ? nbytes : 1);
    s->cap = nbytes;
    s->mem = in_plan ? (void *)(p->region + planned) : s->buf;
    s->t.dtype = dt;
    s->t.rank = (uint32_t)rank;
    s->t.dims = s->dims;
    s->t.data = s->mem;
    s->t.nbytes = nbytes;
    return KILN_OK;
}

static kiln_status bind_const(kiln_graph *g, kiln_node_id n, seq_slot *s, kiln_error *err)
{
    kiln_tensor_value v;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v))
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s) has no tensor attribute 'value'",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    int64_t numel, nbytes;
    if (kiln_dims_numel(v.dims, v.rank, &numel) != KILN_OK ||
        !kiln_mul_i64(numel, (int64_t)kiln_dtype_size(v.dtype), &nbytes) ||
        (size_t)nbytes != v.nbytes)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "node %s: 'value' holds %zu bytes, not what its dims and dtype %s say",
                           kiln_node_name_str(g, n), v.nbytes, kiln_dtype_name(v.dtype));
    s->t.dtype = v.dtype;
    s->t.rank = v.rank;
    s->t.dims = v.dims;
    s->t.data = (void *)(uintptr_t)v.data; /* kernels never write their inputs */
    s->t.nbytes = v.nbytes;
    return KILN_OK;
}

/* The subgraph of If node @p n with role @p role. */
kiln_graph *seq_branch_of(kiln_graph *g, kiln_node_id n, const char *role)
{
    for (uint32_t i = 0; i < kiln_node_subgraph_count(g, n); i++) {
        const char *r = NULL;
        kiln_graph *sg = kiln_node_subgraph(g, n, i, &r);
        if (r && strcmp(r, role) == 0)
            return sg;
    }
    return NULL;
}

/*
 * True when every buffer a plan of @p g would allocate has a static size.  A
 * branch that InferShapes could not make static (it cannot run with the bound
 * shapes, say) is planned only when it is first taken, so that a model whose
 * other branch is the one that runs still loads.
 */
bool seq_shapes_static(kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        seq_kind k = seq_classify(g, n);
        if (k != SEQ_KERNEL && k != SEQ_COPY)
            continue;
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
            const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
            if (kiln_desc_numel(d) < 0 && (k == SEQ_COPY || kiln_desc_ref_input(d) < 0))
                return false;
        }
    }
    return true;
}

const char *const seq_branch_roles[2] = {"then_branch", "else_branch"};

kiln_status seq_branch_plan(seq_plan *p, seq_step *s, int b, kiln_error *err)
{
    if (s->branch[b])
        return KILN_OK;
    if (seq_plan_build(s->branch_graph[b], false, p->mem, &s->branch[b], err) != KILN_OK) {
        if (s->kind == SEQ_CALL)
            return kiln_error_push(err, "PartitionedCall node %s, subgraph %s",
                                   kiln_node_name_str(p->g, s->node),
                                   kiln_graph_name(s->branch_graph[b]));
        return kiln_error_push(err, "If node %s, %s", kiln_node_name_str(p->g, s->node),
                               seq_branch_roles[b]);
    }
    return KILN_OK;
}

/* Kind-specific part of a step: kernels, buffers, views, branches. */
static kiln_status prepare_step(seq_plan *p, seq_step *s, bool is_root, kiln_error *err)
{
    kiln_graph *g = p->g;
    kiln_node_id n = s->node;
    kiln_status st = KILN_OK;
    if (s->kind != SEQ_IF && s->kind != SEQ_CALL && s->kind != SEQ_WHILE &&
        s->kind != SEQ_CASE && kiln_node_subgraph_count(g, n))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node %s: op %s carries subgraphs; the sequential runtime executes "
                           "only If, Case, While and PartitionedCall",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    if (s->kind == SEQ_IF || s->kind == SEQ_CALL || s->kind == SEQ_WHILE ||
        s->kind == SEQ_CASE) { /* views */
        s->args = kiln_alloc(sizeof(kiln_tensor) * ((size_t)s->nin + s->nout + 1));
        if (!s->args)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    switch (s->kind) {
    case SEQ_DATA: { /* a lowered branch's InnerData names the lowered node's input by index */
        const char *key = is_root || op_is(g, n, "InnerData") ? "index" : "_parent_node_index";
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), key, &s->index) || s->index < 0)
            return kiln_errorf(err, KILN_ERR_INVALID, "Data node %s has no valid attribute '%s'",
                               kiln_node_name_str(g, n), key);
        if (s->nout != 1)
            return kiln_errorf(err, KILN_ERR_INVALID, "Data node %s has %u outputs, not 1",
                               kiln_node_name_str(g, n), s->nout);
        p->data_steps[p->ndata++] = (uint32_t)(s - p->steps);
        return is_root ? alloc_slot(p, n, 0, &p->slots[s->out_base], err) : KILN_OK;
    }
    case SEQ_CONST:
        return s->nout ? bind_const(g, n, &p->slots[s->out_base], err) : KILN_OK;
    case SEQ_VAR: /* a buffer of its own (alloc_slot: never a region's) */
        if (s->nout != 1)
            return kiln_errorf(err, KILN_ERR_INVALID, "variable %s has %u outputs, not 1",
                               kiln_node_name_str(g, n), s->nout);
        st = alloc_slot(p, n, 0, &p->slots[s->out_base], err);
        return st == KILN_OK ? seq_var_init(g, n, p->slots[s->out_base].mem,
                                            p->slots[s->out_base].cap, err)
                             : st;
    case SEQ_NETOUTPUT:
        if (p->netoutput != SEQ_NONE)
            return kiln_errorf(err, KILN_ERR_INVALID, "graph %s has two NetOutput nodes (%s, %s)",
                               kiln_graph_name(g),
                               kiln_node_name_str(g, p->steps[p->netoutput].node),
                               kiln_node_name_str(g, n));
        p->netoutput = (uint32_t)(s - p->steps);
        return KILN_OK;
    case SEQ_IF:
        if (s->nin < 1 || s->in_slot[0] == SEQ_NONE)
            return kiln_errorf(err, KILN_ERR_INVALID, "If node %s has no condition input",
                               kiln_node_name_str(g, n));
        for (int b = 0; b < 2; b++) {
            kiln_graph *sg = seq_branch_of(g, n, seq_branch_roles[b]);
            if (!sg)
                return kiln_errorf(err, KILN_ERR_INVALID, "If node %s has no %s subgraph",
                                   kiln_node_name_str(g, n), seq_branch_roles[b]);
            s->branch_graph[b] = sg;
            /* A branch whose shapes are not static is planned when first taken. */
            if (seq_shapes_static(sg) && (st = seq_branch_plan(p, s, b, err)) != KILN_OK)
                return st;
        }
        return KILN_OK;
    case SEQ_CALL: {
        uint32_t nsub = kiln_node_subgraph_count(g, n);
        if (nsub != 1)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "PartitionedCall node %s has %u subgraphs, not 1",
                               kiln_node_name_str(g, n), nsub);
        s->branch_graph[0] = kiln_node_subgraph(g, n, 0, NULL);
        if (seq_shapes_static(s->branch_graph[0]) && (st = seq_branch_plan(p, s, 0, err)) != KILN_OK)
            return st;
        return KILN_OK;
    }
    case SEQ_WHILE: /* its outputs are views of the loop's own buffers */
        return seq_loop_prepare(g, n, p->mem, &s->loop, err);
    case SEQ_CASE: /* its outputs are views of the taken branch's */
        return seq_cases_prepare(g, n, p->mem, &s->cases, err);
    case SEQ_NOP:
        return KILN_OK;
    case SEQ_ALIAS: /* views: output k is input k's tensor */
        for (uint32_t k = 0; k < s->nout; k++)
            if (k >= s->nin || s->in_slot[k] == SEQ_NONE)
                return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s): output %u has no input "
                                   "%u to stand for", kiln_node_name_str(g, n),
                                   kiln_node_op_str(g, n), k, k);
        return KILN_OK;
    case SEQ_KERNEL:
        st = kiln_engine_kernel(g, n, &s->fn, &s->state, &s->engine, err);
        if (st != KILN_OK)
            return st;
        s->args = kiln_alloc(sizeof(kiln_tensor) * ((size_t)s->nin + s->nout + 1));
        if (!s->args)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        break;
    case SEQ_COPY:
        for (uint32_t k = 0; k < s->nout; k++)
            if (k >= s->nin || s->in_slot[k] == SEQ_NONE)
                return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s): output %u has no input "
                                   "%u to copy", kiln_node_name_str(g, n), kiln_node_op_str(g, n),
                                   k, k);
        if (s->nout < 1)
            return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s) has no output",
                               kiln_node_name_str(g, n), kiln_node_op_str(g, n));
        break;
    }
    for (uint32_t o = 0; o < s->nout; o++) {
        seq_slot *sl = &p->slots[s->out_base + o];
        int32_t k = kiln_desc_ref_input(kiln_node_output_desc(g, n, o));
        if (s->kind == SEQ_KERNEL && k >= 0 && (uint32_t)k < s->nin && s->in_slot[k] != SEQ_NONE) {
            sl->ref = k; /* the kernel writes input k in place; aliased at run */
            continue;
        }
        if ((st = alloc_slot(p, n, o, sl, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* Sort the root's Data steps by `index` and check the indices are 0..n-1. */
static kiln_status order_inputs(seq_plan *p, kiln_error *err)
{
    for (uint32_t i = 1; i < p->ndata; i++) /* insertion sort: few inputs */
        for (uint32_t j = i;
             j > 0 && p->steps[p->data_steps[j - 1]].index > p->steps[p->data_steps[j]].index;
             j--) {
            uint32_t t = p->data_steps[j];
            p->data_steps[j] = p->data_steps[j - 1];
            p->data_steps[j - 1] = t;
        }
    for (uint32_t i = 0; i < p->ndata; i++) {
        const seq_step *s = &p->steps[p->data_steps[i]];
        if (s->index != (int64_t)i)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "Data node %s has index %lld; the %u inputs must be numbered "
                               "0..%u without gaps or duplicates",
                               kiln_node_name_str(p->g, s->node), (long long)s->index, p->ndata,
                               p->ndata - 1);
    }
    return KILN_OK;
}

/*
 * The planned order of subgraph @p g into @p planned (count nodes): the
 * nodes sorted by `_kiln_sub_step`, which must number them 0..count-1 in an
 * order every data and control edge respects.  False when the subgraph has
 * no plan or the graph changed since it was planned (a node without a step,
 * a step out of range or twice, an edge against the order): then it runs
 * unplanned, each output in a buffer of its own.
 */
static bool planned_order(kiln_graph *g, const kiln_node_id *order, uint32_t count,
                          kiln_node_id *planned, int64_t *region_size)
{
    const int64_t *sizes = NULL;
    const char *const *types = NULL;
    uint32_t ns = 0, nt = 0;
    const kiln_attrs *ga = kiln_graph_attrs(g);
    if (!kiln_attrs_get_list_int(ga, "_kiln_memory_sizes", &sizes, &ns) ||
        !kiln_attrs_get_list_string(ga, "_kiln_memory_types", &types, &nt) || ns != 1 ||
        nt != 1 || strcmp(types[0], "HBM") != 0 || sizes[0] <= 0 ||
        (uint64_t)sizes[0] > SIZE_MAX / 2)
        return false;
    for (uint32_t i = 0; i < count; i++)
        planned[i] = 0;
    for (uint32_t i = 0; i < count; i++) {
        int64_t k = -1;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, order[i]), "_kiln_sub_step", &k) || k < 0 ||
            k >= (int64_t)count || planned[k])
            return false;
        planned[k] = order[i];
    }
    /* every producer before its consumers (the graph is not written: several
     * streams may plan subgraphs of one model at once) */
    uint8_t *done = kiln_alloc((size_t)kiln_graph_id_limit(g) + 1);
    if (!done)
        return false;
    memset(done, 0, (size_t)kiln_graph_id_limit(g) + 1);
    bool ok = true;
    for (uint32_t i = 0; i < count && ok; i++) {
        kiln_node_id v = planned[i];
        for (uint32_t k = 0; k < kiln_node_input_count(g, v) && ok; k++) {
            kiln_anchor a = kiln_node_input_peer(g, v, k);
            ok = !a.node || done[a.node];
        }
        for (uint32_t c = kiln_ctrl_in_first(g, v); c && ok; c = kiln_ctrl_in_next(g, c))
            ok = done[kiln_ctrl_src(g, c)];
        done[v] = 1;
    }
    kiln_free(done);
    if (ok)
        *region_size = sizes[0];
    return ok;
}

/*
 * For the poisoning of a planned region (seq_exec.c): after which step each
 * region slot is read for the last time.  A slot read by NetOutput (the
 * parent reads it after the plan ran), by a control-flow step (its outputs
 * may be views of it) or through a kernel's reference output is never
 * poisoned during the execution.  O(steps + edges).
 */
static kiln_status region_kills(seq_plan *p, kiln_error *err)
{
    uint32_t *last = kiln_alloc(sizeof(uint32_t) * ((size_t)p->nslots + 1));
    p->kill_start = kiln_alloc(sizeof(uint32_t) * ((size_t)p->nsteps + 2));
    if (!last || !p->kill_start) {
        kiln_free(last);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < p->nsteps; i++)
        for (uint32_t o = 0; o < p->steps[i].nout; o++)
            last[p->steps[i].out_base + o] = i;
    for (uint32_t i = 0; i < p->nsteps; i++) {
        const seq_step *s = &p->steps[i];
        bool keep = s->kind == SEQ_NETOUTPUT || s->kind == SEQ_IF || s->kind == SEQ_CALL ||
                    s->kind == SEQ_WHILE || s->kind == SEQ_ALIAS || s->kind == SEQ_CASE;
        for (uint32_t k = 0; k < s->nin; k++) {
            uint32_t in = s->in_slot[k];
            if (in == SEQ_NONE)
                continue;
            bool ref = false;
            for (uint32_t o = 0; o < s->nout; o++)
                ref |= p->slots[s->out_base + o].ref == (int32_t)k;
            last[in] = keep || ref ? UINT32_MAX : (i > last[in] ? i : last[in]);
        }
    }
    memset(p->kill_start, 0, sizeof(uint32_t) * ((size_t)p->nsteps + 2));
    uint32_t n = 0;
    for (uint32_t sl = 0; sl < p->nslots; sl++)
        if (last[sl] != UINT32_MAX && seq_in_region(p, &p->slots[sl]))
            p->kill_start[last[sl] + 1]++, n++;
    for (uint32_t i = 0; i < p->nsteps; i++)
        p->kill_start[i + 1] += p->kill_start[i];
    p->kill = kiln_alloc(sizeof(uint32_t) * ((size_t)n + 1));
    uint32_t *fill = kiln_alloc(sizeof(uint32_t) * ((size_t)p->nsteps + 1));
    if (!p->kill || !fill) {
        kiln_free(last), kiln_free(fill);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    memcpy(fill, p->kill_start, sizeof(uint32_t) * p->nsteps);
    for (uint32_t sl = 0; sl < p->nslots; sl++)
        if (last[sl] != UINT32_MAX && seq_in_region(p, &p->slots[sl]))
            p->kill[fill[last[sl]]++] = sl;
    kiln_free(last), kiln_free(fill);
    return KILN_OK;
}

kiln_status seq_plan_build(kiln_graph *g, bool is_root, seq_mem *mem, seq_plan **out,
                           kiln_error *err)
{
    *out = NULL;
    const kiln_node_id *order;
    uint32_t count;
    kiln_status st = kiln_graph_topo_order(g, &order, &count, err);
    if (st != KILN_OK)
        return st;
    kiln_node_id *sub_order = NULL;
    int64_t region_size = 0;
    if (!is_root && count) {
        sub_order = kiln_alloc(sizeof(kiln_node_id) * count);
        if (!sub_order)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        if (planned_order(g, order, count, sub_order, &region_size)) {
            order = sub_order;
        } else {
            region_size = 0;
        }
    }
    seq_plan *p = kiln_alloc(sizeof(*p));
    uint32_t *base = kiln_alloc(sizeof(uint32_t) * ((size_t)kiln_graph_id_limit(g) + 1));
    if (p)
        memset(p, 0, sizeof(*p));
    if (!p || !base) {
        kiln_free(base);
        kiln_free(p);
        kiln_free(sub_order);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    p->g = g;
    p->mem = mem;
    p->netoutput = SEQ_NONE;
    if (region_size > 0) { /* the subgraph's plan: one region, charged to the budget */
        char a[32], b[32], lim[32];
        if (mem && mem->limit > 0 && region_size > mem->limit - mem->used) {
            st = kiln_errorf(err, KILN_ERR_LIMIT,
                             "subgraph %s: its planned region needs %lld bytes (%s); with the %s "
                             "already planned that exceeds the memory limit of %lld bytes (%s) "
                             "(max_memory: kiln run --max-memory)",
                             kiln_graph_name(g), (long long)region_size,
                             seq_human_bytes(region_size, a, sizeof(a)),
                             seq_human_bytes(mem->used, b, sizeof(b)), (long long)mem->limit,
                             seq_human_bytes(mem->limit, lim, sizeof(lim)));
            goto fail;
        }
        /* 64-byte aligned (the plan's offsets are multiples of its alignment) */
        size_t bytes = ((size_t)region_size + 63u) & ~(size_t)63u;
        p->region = aligned_alloc(64, bytes);
        if (!p->region) {
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (subgraph %s region, %lld bytes)",
                             kiln_graph_name(g), (long long)region_size);
            goto fail;
        }
        memset(p->region, 0, bytes);
        p->region_size = region_size;
        if (mem)
            mem->used += region_size;
    }
    p->steps = kiln_alloc(sizeof(seq_step) * ((size_t)count + 1));
    p->data_steps = kiln_alloc(sizeof(uint32_t) * ((size_t)count + 1));
    if (!p->steps || !p->data_steps) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memset(p->steps, 0, sizeof(seq_step) * ((size_t)count + 1));
    /* Copy the order (it is borrowed until the next mutation) and number the slots. */
    for (uint32_t i = 0; i < count; i++) {
        seq_step *s = &p->steps[i];
        s->node = order[i];
        s->nin = kiln_node_input_count(g, s->node);
        s->nout = kiln_node_output_count(g, s->node);
        s->out_base = p->nslots;
        base[s->node] = p->nslots;
        p->nslots += s->nout;
    }
    p->nsteps = count;
    p->slots = kiln_alloc(sizeof(seq_slot) * ((size_t)p->nslots + 1));
    if (!p->slots) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memset(p->slots, 0, sizeof(seq_slot) * ((size_t)p->nslots + 1));
    for (uint32_t i = 0; i < p->nslots; i++)
        p->slots[i].ref = -1;
    for (uint32_t i = 0; i < count; i++) {
        seq_step *s = &p->steps[i];
        s->in_slot = kiln_alloc(sizeof(uint32_t) * ((size_t)s->nin + 1));
        if (!s->in_slot) {
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (uint32_t k = 0; k < s->nin; k++) {
            kiln_anchor a = kiln_node_input_peer(g, s->node, k);
            s->in_slot[k] = a.node ? base[a.node] + a.index : SEQ_NONE;
        }
    }
    for (uint32_t i = 0; i < count; i++) {
        seq_step *s = &p->steps[i];
        s->kind = seq_classify(g, s->node);
        if ((st = prepare_step(p, s, is_root, err)) != KILN_OK)
            goto fail;
    }
    if (is_root && (st = order_inputs(p, err)) != KILN_OK)
        goto fail;
    if (p->region && (st = region_kills(p, err)) != KILN_OK)
        goto fail;
    kiln_free(base);
    kiln_free(sub_order);
    *out = p;
    return KILN_OK;
fail:
    kiln_free(base);
    kiln_free(sub_order);
    seq_plan_free(p);
    return st;
}

void seq_plan_free(seq_plan *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; p->steps && i < p->nsteps; i++) {
        seq_step *s = &p->steps[i];
        if (s->kind == SEQ_KERNEL && s->fn && s->state)
            kiln_engine_kernel_release(p->g, s->engine, s->state);
        seq_plan_free(s->branch[0]);
        seq_plan_free(s->branch[1]);
        seq_loop_free(s->loop);
        seq_cases_free(s->cases);
        kiln_free(s->in_slot);
        kiln_free(s->args);
    }
    for (uint32_t i = 0; p->slots && i < p->nslots; i++) {
        kiln_free(p->slots[i].dims);
        kiln_free(p->slots[i].buf);
    }
    kiln_free(p->slots);
    kiln_free(p->steps);
    kiln_free(p->data_steps);
#ifdef SEQ_ASAN
    if (p->region) /* the allocator's own poisoning takes over */
        ASAN_UNPOISON_MEMORY_REGION(p->region, (size_t)p->region_size);
#endif
    free(p->region);
    kiln_free(p->kill_start);
    kiln_free(p->kill);
    kiln_free(p);
}
