/*
 * seq_exec.c - running the sequential runtime's plans, and the plugin
 * (kiln.runtime.sequential, runtime component "sequential").
 *
 * run(): the caller's tensors are checked against the root Data descriptors
 * (dtype and dims, an error names the input, what was expected and what was
 * given) and copied into the Data buffers; the steps then execute in
 * topological order, each kernel called with kiln_kernel_args built from the
 * slots; the outputs (the root NetOutput's inputs) are copied into kiln_alloc'd
 * tensors for the caller.  An If evaluates its condition (the first element,
 * nonzero = then_branch), binds the branch's Data nodes to its own inputs by
 * `_parent_node_index`, runs the branch plan and forwards the branch's
 * NetOutput inputs as its outputs, with the branch tensors' dims.  A
 * PartitionedCall does the same with its one subgraph, every run.
 *
 * A kernel's error keeps its message and gets a "node NAME (OP)" frame.
 * Runs of one loaded model must not overlap (the plan holds the views of the
 * current run); distinct models may run concurrently.
 */
#include "seq_runtime.h"

#include <unistd.h>


static kiln_status run_kernel(seq_plan *p, seq_step *s, kiln_error *err)
{
    kiln_tensor *in = s->args, *out = s->args + s->nin;
    for (uint32_t k = 0; k < s->nin; k++) {
        if (s->in_slot[k] == SEQ_NONE)
            memset(&in[k], 0, sizeof(in[k])); /* unconnected optional input */
        else
            in[k] = p->slots[s->in_slot[k]].t;
    }
    for (uint32_t o = 0; o < s->nout; o++) {
        seq_slot *sl = &p->slots[s->out_base + o];
        if (sl->ref >= 0)
            sl->t = in[sl->ref];
        out[o] = sl->t;
    }
    kiln_kernel_args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = sizeof(a);
    a.graph = p->g;
    a.node = s->node;
    a.input_count = s->nin;
    a.output_count = s->nout;
    a.inputs = in;
    a.outputs = out;
    a.threads = 1;
    kiln_status st = s->fn(s->state, &a, err);
    if (st != KILN_OK) {
        if (kiln_error_code(err) == KILN_OK) /* a kernel that failed without saying why */
            kiln_errorf(err, st, "kernel failed (%s)", kiln_status_str(st));
        return kiln_error_push(err, "node %s (%s, engine %s)", kiln_node_name_str(p->g, s->node),
                               kiln_node_op_str(p->g, s->node), s->engine ? s->engine : "?");
    }
    return KILN_OK;
}

static kiln_status run_copy(seq_plan *p, seq_step *s, kiln_error *err)
{
    for (uint32_t k = 0; k < s->nout; k++) {
        const kiln_tensor *in = &p->slots[s->in_slot[k]].t;
        seq_slot *sl = &p->slots[s->out_base + k];
        if (in->nbytes > sl->cap)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "node %s (%s): input %u holds %zu bytes but the output descriptor "
                               "allows %zu",
                               kiln_node_name_str(p->g, s->node), kiln_node_op_str(p->g, s->node),
                               k, in->nbytes, sl->cap);
        if (in->nbytes)
            memcpy(sl->mem, in->data, in->nbytes);
        sl->t.dtype = in->dtype;
        sl->t.rank = in->rank;
        sl->t.dims = in->dims; /* borrowed from the producer's slot for this run */
        sl->t.data = sl->mem;
        sl->t.nbytes = in->nbytes;
    }
    return KILN_OK;
}

/* The first element of the condition tensor, as a truth value. */
kiln_status seq_cond_value(const kiln_graph *g, kiln_node_id n, const kiln_tensor *c, bool *out,
                           kiln_error *err)
{
    size_t esz = kiln_dtype_size(c->dtype);
    if (!c->data || esz == 0 || c->nbytes < esz)
        return kiln_errorf(err, KILN_ERR_INVALID, "If node %s: the condition tensor is empty",
                           kiln_node_name_str(g, n));
    union {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float f32;
        double f64;
    } v;
    memcpy(&v, c->data, esz);
    switch (c->dtype) {
    case KILN_DT_FLOAT32:
        *out = v.f32 != 0.0f;
        break;
    case KILN_DT_FLOAT64:
        *out = v.f64 != 0.0;
        break;
    case KILN_DT_FLOAT16:
    case KILN_DT_BFLOAT16:
        *out = (v.u16 & 0x7fffu) != 0;
        break;
    default:
        *out = esz == 1 ? v.u8 != 0 : esz == 2 ? v.u16 != 0 : esz == 4 ? v.u32 != 0 : v.u64 != 0;
        break;
    }
    return KILN_OK;
}

kiln_status seq_sub_run(seq_plan *b, const kiln_graph *pg, kiln_node_id n, const char *kind,
                        const char *role, const kiln_tensor *in, uint32_t nin, kiln_tensor *out,
                        uint32_t nout, kiln_error *err)
{
    for (uint32_t i = 0; i < b->ndata; i++) {
        const seq_step *d = &b->steps[b->data_steps[i]];
        if (d->index >= (int64_t)nin || in[d->index].dtype == KILN_DT_COUNT)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "%s node %s, %s: Data node %s stands for input %lld, which the "
                               "%s does not have connected",
                               kind, kiln_node_name_str(pg, n), role,
                               kiln_node_name_str(b->g, d->node), (long long)d->index, kind);
        b->slots[d->out_base].t = in[d->index];
    }
    kiln_status st = seq_plan_exec(b, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "%s node %s, %s", kind, kiln_node_name_str(pg, n), role);
    if (b->netoutput == SEQ_NONE)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s node %s: %s has no NetOutput", kind,
                           kiln_node_name_str(pg, n), role);
    for (uint32_t o = 0; o < nout; o++)
        out[o].dtype = KILN_DT_COUNT; /* "not set" */
    const seq_step *no = &b->steps[b->netoutput];
    for (uint32_t j = 0; j < no->nin; j++) {
        int64_t o = j;
        if (kiln_node_input_has_desc(b->g, no->node, j))
            kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(b->g, no->node, j)),
                               "_parent_node_index", &o);
        if (o < 0 || o >= (int64_t)nout || no->in_slot[j] == SEQ_NONE)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "%s node %s, %s: output %u of the subgraph maps to %s output "
                               "%lld, which does not exist or is unconnected",
                               kind, kiln_node_name_str(pg, n), role, j, kind, (long long)o);
        out[o] = b->slots[no->in_slot[j]].t;
    }
    for (uint32_t o = 0; o < nout; o++)
        if (out[o].dtype == KILN_DT_COUNT)
            return kiln_errorf(err, KILN_ERR_INVALID, "%s node %s: %s yields no output %u", kind,
                               kiln_node_name_str(pg, n), role, o);
    return KILN_OK;
}

/*
 * Run plan s->branch[bi] for step @p s (an If's taken branch, or a
 * PartitionedCall's subgraph) through seq_sub_run, with the step's input
 * slots as the subgraph's inputs and its output slots receiving the views.
 */
/* The inputs of control-flow step @p s in its args (KILN_DT_COUNT: unconnected). */
static kiln_tensor *sub_inputs(seq_plan *p, seq_step *s)
{
    kiln_tensor *in = s->args;
    for (uint32_t k = 0; k < s->nin; k++) {
        if (s->in_slot[k] == SEQ_NONE)
            memset(&in[k], 0, sizeof(in[k])), in[k].dtype = KILN_DT_COUNT;
        else
            in[k] = p->slots[s->in_slot[k]].t;
    }
    return in;
}

/* A control-flow step's outputs: the views its subgraph or loop handed back. */
static kiln_status take_outputs(seq_plan *p, seq_step *s, const kiln_tensor *out)
{
    for (uint32_t o = 0; o < s->nout; o++)
        p->slots[s->out_base + o].t = out[o];
    return KILN_OK;
}

static kiln_status run_sub(seq_plan *p, seq_step *s, int bi, kiln_error *err)
{
    kiln_status st = seq_branch_plan(p, s, bi, err);
    if (st != KILN_OK)
        return st;
    const char *kind = s->kind == SEQ_CALL ? "PartitionedCall" : "If";
    const char *role = s->kind == SEQ_CALL ? kiln_graph_name(s->branch[bi]->g)
                                           : seq_branch_roles[bi];
    kiln_tensor *in = sub_inputs(p, s), *out = s->args + s->nin;
    st = seq_sub_run(s->branch[bi], p->g, s->node, kind, role, in, s->nin, out, s->nout, err);
    return st != KILN_OK ? st : take_outputs(p, s, out);
}

static kiln_status run_if(seq_plan *p, seq_step *s, kiln_error *err)
{
    bool taken = false;
    kiln_status st = seq_cond_value(p->g, s->node, &p->slots[s->in_slot[0]].t, &taken, err);
    if (st != KILN_OK)
        return st;
    return run_sub(p, s, taken ? 0 : 1, err);
}

static kiln_status run_case(seq_plan *p, seq_step *s, kiln_error *err)
{
    kiln_tensor *in = sub_inputs(p, s), *out = s->args + s->nin;
    kiln_status st = seq_cases_run(s->cases, p->mem, p->g, s->node, in, s->nin, out, s->nout, err);
    return st != KILN_OK ? st : take_outputs(p, s, out);
}

static kiln_status run_while(seq_plan *p, seq_step *s, kiln_error *err)
{
    kiln_tensor *in = sub_inputs(p, s), *out = s->args + s->nin;
    kiln_status st = seq_loop_run(s->loop, in, s->nin, out, s->nout, err);
    return st != KILN_OK ? st : take_outputs(p, s, out);
}

/* Whether a step of kind @p k does work a profile records. */
static bool recorded(seq_kind k)
{
    return k == SEQ_KERNEL || k == SEQ_COPY || k == SEQ_IF || k == SEQ_CALL || k == SEQ_WHILE ||
           k == SEQ_CASE;
}

#ifdef SEQ_ASAN
/* A planned region under AddressSanitizer: every slot is poisoned outside
 * its life in this execution (from its step to its last reader's), so a
 * kernel reading memory the plan has handed to another tensor is reported. */
static void region_open(seq_plan *p)
{
    if (p->region)
        ASAN_POISON_MEMORY_REGION(p->region, (size_t)p->region_size);
}

static void region_step(seq_plan *p, uint32_t i, bool before)
{
    if (!p->region)
        return;
    const seq_step *s = &p->steps[i];
    if (before) {
        for (uint32_t o = 0; o < s->nout; o++) {
            seq_slot *sl = &p->slots[s->out_base + o];
            if (seq_in_region(p, sl))
                ASAN_UNPOISON_MEMORY_REGION(sl->mem, sl->cap);
        }
        return;
    }
    for (uint32_t k = p->kill_start[i]; k < p->kill_start[i + 1]; k++)
        ASAN_POISON_MEMORY_REGION(p->slots[p->kill[k]].mem, p->slots[p->kill[k]].cap);
}
#else
#define region_open(p) ((void)(p))
#define region_step(p, i, before) ((void)(p), (void)(i), (void)(before))
#endif

kiln_status seq_plan_exec(seq_plan *p, kiln_error *err)
{
    seq_prof *pr = seq_prof_get();
    uint32_t depth = pr ? pr->depth++ : 0;
    kiln_status st = KILN_OK;
    region_open(p);
    for (uint32_t i = 0; i < p->nsteps && st == KILN_OK; i++) {
        seq_step *s = &p->steps[i];
        bool rec = pr && recorded(s->kind);
        int64_t t0 = rec ? seq_now_ns() : 0;
        region_step(p, i, true);
        switch (s->kind) {
        case SEQ_KERNEL:
            st = run_kernel(p, s, err);
            break;
        case SEQ_COPY:
            st = run_copy(p, s, err);
            break;
        case SEQ_IF:
            st = run_if(p, s, err);
            break;
        case SEQ_CALL:
            st = run_sub(p, s, 0, err);
            break;
        case SEQ_WHILE:
            st = run_while(p, s, err);
            break;
        case SEQ_CASE:
            st = run_case(p, s, err);
            break;
        case SEQ_ALIAS:
            for (uint32_t k = 0; k < s->nout; k++)
                p->slots[s->out_base + k].t = p->slots[s->in_slot[k]].t;
            break;
        case SEQ_DATA:
        case SEQ_CONST:
        case SEQ_NETOUTPUT:
        case SEQ_NOP:
        case SEQ_VAR:
            break;
        }
        if (rec) {
            seq_prof_rec r = {p->g, s->node, s->engine, pr->run, depth, t0, seq_now_ns()};
            seq_prof_add(pr, &r);
        }
        region_step(p, i, false);
    }
    if (pr)
        pr->depth--;
    return st;
}

/* Check input @p i against its Data descriptor and copy it in. */
kiln_status seq_bind_input(seq_plan *p, uint32_t i, const kiln_tensor *t, kiln_error *err)
{
    const seq_step *d = &p->steps[p->data_steps[i]];
    seq_slot *sl = &p->slots[d->out_base];
    bool same = t->dtype == sl->t.dtype && t->rank == sl->t.rank;
    for (uint32_t k = 0; same && k < t->rank; k++)
        same = t->dims && t->dims[k] == sl->t.dims[k];
    if (!same) {
        char want[256], got[256];
        seq_dims_str(sl->t.rank, sl->t.dims, want, sizeof(want));
        if (t->dims || !t->rank)
            seq_dims_str(t->rank, t->dims, got, sizeof(got));
        else
            snprintf(got, sizeof(got), "rank %u without dims", t->rank);
        return kiln_errorf(err, KILN_ERR_INVALID, "input %s (index %u): expected %s %s, got %s %s",
                           kiln_node_name_str(p->g, d->node), i, kiln_dtype_name(sl->t.dtype), want,
                           (unsigned)t->dtype < KILN_DT_COUNT ? kiln_dtype_name(t->dtype) : "?",
                           got);
    }
    if (t->nbytes != sl->cap || (sl->cap && !t->data))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "input %s (index %u): expected %zu bytes, got %zu",
                           kiln_node_name_str(p->g, d->node), i, sl->cap, t->data ? t->nbytes : 0);
    if (sl->cap)
        memcpy(sl->mem, t->data, sl->cap);
    return KILN_OK;
}

void seq_free_outputs(kiln_tensor *outputs, uint32_t nout)
{
    for (uint32_t j = 0; j < nout; j++) {
        kiln_free((void *)(uintptr_t)outputs[j].dims);
        kiln_free(outputs[j].data);
        memset(&outputs[j], 0, sizeof(outputs[j]));
    }
}

kiln_status seq_copy_outputs(seq_plan *p, kiln_tensor *outputs, uint32_t nout,
                             kiln_error *err)
{
    const seq_step *no = p->netoutput == SEQ_NONE ? NULL : &p->steps[p->netoutput];
    uint32_t have = no ? no->nin : 0;
    if (nout != have)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "the model has %u outputs, the caller asked for %u", have, nout);
    memset(outputs, 0, sizeof(*outputs) * nout);
    for (uint32_t j = 0; j < nout; j++) {
        if (no->in_slot[j] == SEQ_NONE) {
            seq_free_outputs(outputs, nout);
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "output %u (NetOutput %s input %u) is unconnected", j,
                               kiln_node_name_str(p->g, no->node), j);
        }
        const kiln_tensor *t = &p->slots[no->in_slot[j]].t;
        int64_t *dims = kiln_alloc(sizeof(int64_t) * (t->rank ? t->rank : 1));
        void *data = kiln_alloc(t->nbytes ? t->nbytes : 1);
        if (!dims || !data) {
            kiln_free(dims);
            kiln_free(data);
            seq_free_outputs(outputs, nout);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (output %u)", j);
        }
        if (t->rank)
            memcpy(dims, t->dims, sizeof(int64_t) * t->rank);
        if (t->nbytes)
            memcpy(data, t->data, t->nbytes);
        outputs[j].dtype = t->dtype;
        outputs[j].rank = t->rank;
        outputs[j].dims = dims;
        outputs[j].data = data;
        outputs[j].nbytes = t->nbytes;
    }
    return KILN_OK;
}


int64_t seq_default_max_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return INT64_C(16) << 30;
    int64_t phys;
    if (!kiln_mul_i64(pages, page, &phys))
        return INT64_MAX;
    return phys / 4 * 3;
}

kiln_status seq_inst_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    seq_inst *s = kiln_alloc(sizeof(*s));
    if (!s)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (!opts || !kiln_options_get_int(opts, "max_memory", &s->max_memory) || s->max_memory <= 0)
        s->max_memory = seq_default_max_memory();
    s->profile = false;
    s->lower = true;
    s->allocator[0] = 0;
    const char *alloc = NULL;
    if (opts) {
        kiln_options_get_bool(opts, "profile", &s->profile);
        kiln_options_get_bool(opts, "lower_control_flow", &s->lower);
    }
    if (opts && kiln_options_get_string(opts, "allocator", &alloc) && alloc) {
        if (strlen(alloc) >= sizeof(s->allocator)) {
            kiln_free(s);
            return kiln_errorf(err, KILN_ERR_PARAM, "option allocator: name too long: %s", alloc);
        }
        strcpy(s->allocator, alloc);
    }
    *inst = s;
    return KILN_OK;
}

void seq_inst_destroy(void *inst)
{
    kiln_free(inst);
}

