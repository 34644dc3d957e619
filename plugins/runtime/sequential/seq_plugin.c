/*
 * seq_plugin.c - the sequential runtime plugin (kiln.runtime.sequential,
 * runtime component "sequential"): instance options, load, run, unload.
 * The plans it runs are seq_load.c's and seq_exec.c's (the kiln_seq_core
 * library, which the multi-stream runtime shares for subgraphs).
 */
#include "seq_runtime.h"

#include "io_reuse.h"

#include <stdlib.h>

/* ---- instance: options ---------------------------------------------------- */

static const kiln_option_def seq_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "max_memory", NULL,
     "bytes the buffers of a loaded model may take in all (default: 3/4 of the physical "
     "memory); a node whose output would exceed it is an error naming the node",
     1, (double)INT64_MAX},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "profile", "false",
     "record every step's start and end time for the run profile (kiln run --trace, "
     "--report); off: nothing is recorded",
     0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "lower_control_flow", "true",
     "lower every If to GE's runtime form at load (bg_condition: InnerData, "
     "PointFromInputs, IdentityAddr) and run that; off: run If branches as compiled "
     "(the session option kiln.lower_control_flow sets it)",
     0, 0},
};

/* The model: its root plan and the budget its plans share. */
typedef struct seq_model {
    seq_plan *plan;
    seq_mem mem;
    bool profile;
    uint32_t runs;         /* runs since load */
    seq_prof prof;         /* the steps recorded (profile on) */
    kiln_prof_task *tasks; /* the last profile() answer */
    kiln_prof_memory memory;
    kiln_io_pair *io_pairs; /* outputs that must reuse an input's memory (io_reuse.h) */
    size_t nio_pairs;
} seq_model;

/* Where slot @p s of the root plan lives: a slot referencing an input (ref_input)
 * is that input's slot, as the run will alias it. */
static const void *slot_addr(const seq_plan *p, uint32_t s)
{
    for (uint32_t depth = 0; depth < p->nslots; depth++) {
        const seq_slot *sl = &p->slots[s];
        if (sl->ref < 0)
            return sl->mem ? sl->mem : sl->t.data;
        const seq_step *owner = NULL;
        for (uint32_t k = 0; k < p->nsteps && !owner; k++)
            if (p->steps[k].nout && s >= p->steps[k].out_base &&
                s < p->steps[k].out_base + p->steps[k].nout)
                owner = &p->steps[k];
        if (!owner || (uint32_t)sl->ref >= owner->nin || owner->in_slot[sl->ref] == SEQ_NONE)
            return sl->t.data;
        s = owner->in_slot[sl->ref];
    }
    return NULL;
}

/* GE CheckIoReuseAddrs on the addresses the run uses: each Data's buffer, the
 * buffer feeding each NetOutput input. */
static kiln_status check_io_reuse(const seq_model *m, kiln_error *err)
{
    const seq_plan *p = m->plan;
    if (!m->nio_pairs || p->netoutput == SEQ_NONE)
        return KILN_OK;
    const seq_step *no = &p->steps[p->netoutput];
    const void **in = malloc(sizeof(*in) * (p->ndata + no->nin + 1));
    if (!in)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    const void **out = in + p->ndata;
    for (uint32_t i = 0; i < p->ndata; i++)
        in[i] = slot_addr(p, p->steps[p->data_steps[i]].out_base);
    for (uint32_t j = 0; j < no->nin; j++)
        out[j] = no->in_slot[j] == SEQ_NONE ? NULL : slot_addr(p, no->in_slot[j]);
    kiln_status st =
        kiln_io_reuse_check(m->io_pairs, m->nio_pairs, in, p->ndata, out, no->nin, err);
    free(in);
    return st;
}

static kiln_status seq_load(void *inst, kiln_graph *g, void **model, kiln_error *err)
{
    const seq_inst *si = inst;
    seq_model *m = kiln_alloc(sizeof(*m));
    *model = NULL;
    if (!m)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(m, 0, sizeof(*m));
    m->profile = si && si->profile;
    m->plan = NULL;
    m->mem.limit = si ? si->max_memory : seq_default_max_memory();
    m->mem.used = 0;
    kiln_status st = !si || si->lower ? seq_lower_conditions(g, err) : KILN_OK;
    if (st == KILN_OK)
        st = seq_plan_build(g, true, &m->mem, &m->plan, err);
    /* every tensor has a buffer of its own here, not the build's plan: only the
     * user's declaration (the option) is checked, not the plan's record */
    if (st == KILN_OK)
        st = kiln_io_reuse_from_graph(g, true, &m->io_pairs, &m->nio_pairs, err);
    if (st != KILN_OK) { /* a failed load leaves nothing to unload */
        seq_plan_free(m->plan);
        kiln_free(m);
        return st;
    }
    *model = m;
    return KILN_OK;
}

static kiln_status seq_run(void *inst, void *model, const kiln_tensor *inputs, uint32_t nin,
                           kiln_tensor *outputs, uint32_t nout, kiln_error *err)
{
    (void)inst;
    seq_plan *p = model ? ((seq_model *)model)->plan : NULL;
    if (!p)
        return kiln_errorf(err, KILN_ERR_INVALID, "sequential runtime: no model loaded");
    if (nin != p->ndata)
        return kiln_errorf(err, KILN_ERR_INVALID, "the model has %u inputs, got %u", p->ndata, nin);
    kiln_status st;
    seq_model *sm = model;
    for (uint32_t i = 0; i < nin; i++)
        if ((st = seq_bind_input(p, i, &inputs[i], err)) != KILN_OK)
            return st;
    if ((st = check_io_reuse(sm, err)) != KILN_OK)
        return st;
    if (sm->profile) {
        sm->prof.run = sm->runs;
        sm->prof.depth = 0;
        seq_prof_set(&sm->prof);
    }
    st = seq_plan_exec(p, err);
    seq_prof_set(NULL);
    sm->runs++;
    if (st != KILN_OK)
        return st;
    return seq_copy_outputs(p, outputs, nout, err);
}

/* The profile: one stream, the steps recorded, the buffers of all plans. */
static kiln_status seq_profile(void *inst, void *model, kiln_run_profile *out, kiln_error *err)
{
    (void)inst;
    seq_model *m = model;
    kiln_free(m->tasks);
    m->tasks = kiln_alloc(sizeof(kiln_prof_task) * (m->prof.n + 1));
    if (!m->tasks)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->prof.n; i++) {
        const seq_prof_rec *r = &m->prof.v[i];
        m->tasks[i] = (kiln_prof_task){r->g, r->node, r->engine, 0, r->run, r->depth, r->t0, r->t1};
    }
    m->memory = (kiln_prof_memory){"HBM", 0, m->mem.used};
    out->stream_count = 1;
    out->run_count = m->runs;
    out->task_count = (uint32_t)m->prof.n;
    out->tasks = m->tasks;
    out->memory_count = 1;
    out->memory = &m->memory;
    out->truncated = m->prof.oom;
    return KILN_OK;
}

static void seq_unload(void *inst, void *model)
{
    (void)inst;
    seq_model *m = model;
    if (!m)
        return;
    seq_plan_free(m->plan);
    seq_prof_free(&m->prof);
    free(m->io_pairs);
    kiln_free(m->tasks);
    kiln_free(m);
}

static const kiln_runtime_desc seq_runtime = {
    .struct_size = sizeof(kiln_runtime_desc),
    .name = "sequential",
    .summary = "one node after another in topological order, each tensor in its own buffer",
    .option_count = sizeof(seq_options) / sizeof(seq_options[0]),
    .options = seq_options,
    .create = seq_inst_create,
    .destroy = seq_inst_destroy,
    .load = seq_load,
    .run = seq_run,
    .unload = seq_unload,
    .profile = seq_profile,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_runtime(r, &seq_runtime);
}

KILN_PLUGIN_DEFINE("kiln.runtime.sequential", "0.1.0", "Apache-2.0",
                   "sequential runtime: executes a static-shape graph node by node on the "
                   "engines' kernels",
                   init, NULL)
