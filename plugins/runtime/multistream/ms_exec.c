/*
 * ms_exec.c - running the multi-stream runtime's loaded model, and the plugin
 * (kiln.runtime.multistream, runtime component "multistream").
 *
 * run(): the caller's tensors are checked against the root Data descriptors
 * and bound as the input buffers (zero-copy: kernels read the caller's
 * memory); each output buffer that a NetOutput input owns is allocated for
 * the caller and written in place by its producer.  Stream 0 runs on the
 * caller's thread, every other stream on its worker; run() returns when all
 * streams are done.  A failing task records its error, sets the abort flag and
 * wakes every event waiter, so the other streams stop at their next wait.
 * Outputs that no task writes in place (a model input or a constant passed
 * through, an output listed twice) are copied at the end.
 *
 * Runs of one loaded model must not overlap; distinct models may run
 * concurrently.
 */
#include "ms_runtime.h"

#include <stdlib.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define MS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MS_ASAN 1
#endif
#endif
#ifdef MS_ASAN
#include <sanitizer/asan_interface.h>
#define MS_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define MS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define MS_POISON(p, n) ((void)(p), (void)(n))
#define MS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- events ---------------------------------------------------------------------- */

static void event_record(ms_model *m, uint32_t id)
{
    ms_event *e = &m->events[id];
    pthread_mutex_lock(&e->mu);
    e->count++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Wait until event @p w->event has been recorded w->need times; false on abort. */
static bool event_wait(ms_model *m, const ms_wait *w)
{
    ms_event *e = &m->events[w->event];
    pthread_mutex_lock(&e->mu);
    while (e->count < w->need && !atomic_load(&m->abort))
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return !atomic_load(&m->abort);
}

static void abort_all(ms_model *m)
{
    atomic_store(&m->abort, true);
    for (uint32_t i = 0; i < m->nevents; i++) {
        pthread_mutex_lock(&m->events[i].mu);
        pthread_cond_broadcast(&m->events[i].cv);
        pthread_mutex_unlock(&m->events[i].mu);
    }
}

/* ---- tasks ---------------------------------------------------------------------------- */

static kiln_status run_kernel(ms_model *m, ms_task *t, kiln_error *err)
{
    kiln_kernel_args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = sizeof(a);
    a.graph = m->g;
    a.node = t->node;
    a.input_count = t->nin;
    a.output_count = t->nout;
    a.inputs = t->args;
    a.outputs = t->args + t->nin;
    a.workspace = t->ws;
    a.workspace_size = t->ws_size;
    a.threads = 1;
    kiln_status st = t->fn(t->state, &a, err);
    if (st != KILN_OK && kiln_error_code(err) == KILN_OK)
        kiln_errorf(err, st, "kernel failed (%s)", kiln_status_str(st));
    return st;
}

/* The subgraph's inputs for task @p t (its input tensors, KILN_DT_COUNT for an
 * unconnected one) in the task's scratch; the views go after them. */
static kiln_tensor *sub_inputs(ms_task *t)
{
    for (uint32_t k = 0; k < t->nin; k++) {
        t->sub_io[k] = t->args[k];
        if (t->in_buf[k] == MS_NONE)
            t->sub_io[k].dtype = KILN_DT_COUNT;
    }
    return t->sub_io;
}

/* Copy the subgraph's output views (task scratch, after the inputs) into the
 * node's planned buffers; a size other than the descriptor's is an error
 * "<kind> node <name>[, <role>]: output o has ... <why>" (formatted only
 * then: this runs every time the task does). */
static kiln_status take_views(const ms_model *m, ms_task *t, const char *kind, const char *role,
                              const char *why, kiln_error *err)
{
    const kiln_tensor *views = t->sub_io + t->nin;
    for (uint32_t o = 0; o < t->nout; o++) {
        kiln_tensor *dst = &t->args[t->nin + o];
        if (views[o].nbytes != dst->nbytes)
            return kiln_errorf(err, KILN_ERR_INVALID, "%s node %s%s%s: output %u has %zu bytes, "
                               "its descriptor says %zu%s", kind,
                               kiln_node_name_str(m->g, t->node), role ? ", " : "",
                               role ? role : "", o, views[o].nbytes, dst->nbytes, why);
        if (dst->nbytes && dst->data != views[o].data)
            memmove(dst->data, views[o].data, dst->nbytes);
    }
    return KILN_OK;
}

static kiln_status run_sub(ms_model *m, ms_task *t, int b, kiln_error *err)
{
    kiln_graph *g = m->g;
    const char *kind = t->kind == MS_T_CALL ? "PartitionedCall" : "If";
    if (!t->sub[b]) { /* a subgraph whose shapes were not static at load */
        kiln_status st = seq_plan_build(t->sub_graph[b], false, &m->mem, &t->sub[b], err);
        if (st != KILN_OK)
            return st;
    }
    const char *role = t->kind == MS_T_CALL ? kiln_graph_name(t->sub_graph[b])
                                            : seq_branch_roles[b];
    kiln_status st = seq_sub_run(t->sub[b], g, t->node, kind, role, sub_inputs(t), t->nin,
                                 t->sub_io + t->nin, t->nout, err);
    return st != KILN_OK ? st : take_views(m, t, kind, role, "", err);
}

/* A While: the loop runs on the sequential core; its results are copied into
 * the node's planned buffers (their sizes must match the descriptors). */
static kiln_status run_while(ms_model *m, ms_task *t, kiln_error *err)
{
    kiln_status st = seq_loop_run(t->loop, sub_inputs(t), t->nin, t->sub_io + t->nin, t->nout,
                                  err);
    return st != KILN_OK ? st
                         : take_views(m, t, "While", NULL,
                                      " (the multistream runtime needs the loop's output shapes "
                                      "static)",
                                      err);
}

static kiln_status run_task(ms_model *m, ms_task *t, kiln_error *err)
{
    for (uint32_t k = 0; k < t->nin; k++)
        t->args[k].data = t->in_buf[k] == MS_NONE ? NULL : m->bufs[t->in_buf[k]].ptr;
    for (uint32_t o = 0; o < t->nout; o++)
        t->args[t->nin + o].data = m->bufs[t->out_buf[o]].ptr;
    switch (t->kind) {
    case MS_T_KERNEL:
        return run_kernel(m, t, err);
    case MS_T_COPY:
        for (uint32_t k = 0; k < t->nout; k++) {
            kiln_tensor *src = &t->args[k], *dst = &t->args[t->nin + k];
            if (src->nbytes != dst->nbytes)
                return kiln_errorf(err, KILN_ERR_INVALID, "copy %u of %zu bytes into %zu", k,
                                   src->nbytes, dst->nbytes);
            if (src->data != dst->data && dst->nbytes)
                memmove(dst->data, src->data, dst->nbytes);
        }
        return KILN_OK;
    case MS_T_IF: {
        bool taken = false;
        kiln_status st = seq_cond_value(m->g, t->node, &t->args[0], &taken, err);
        return st != KILN_OK ? st : run_sub(m, t, taken ? 0 : 1, err);
    }
    case MS_T_CALL:
        return run_sub(m, t, 0, err);
    case MS_T_WHILE:
        return run_while(m, t, err);
    case MS_T_CASE: {
        kiln_status st = seq_cases_run(t->cases, &m->mem, m->g, t->node, sub_inputs(t), t->nin,
                                       t->sub_io + t->nin, t->nout, err);
        return st != KILN_OK ? st : take_views(m, t, "Case", NULL, "", err);
    }
    case MS_T_NOP:
        return KILN_OK;
    }
    return KILN_OK;
}

/* Poisoning (ASan builds): the buffers this task is the first writer of come alive. */
static void task_begin(ms_model *m, uint32_t ti)
{
    ms_task *t = &m->tasks[ti];
    for (uint32_t o = 0; o < t->nout; o++) {
        ms_buf *b = &m->bufs[t->out_buf[o]];
        if (b->kind == MS_BUF_ARENA && b->first == ti && !b->var)
            MS_UNPOISON(b->ptr, (size_t)b->size);
    }
    if (t->ws)
        MS_UNPOISON(t->ws, t->ws_size);
}

/* ... and the buffers whose last use this was die. */
static void task_end(ms_model *m, ms_task *t)
{
    if (t->ws)
        MS_POISON(t->ws, t->ws_size);
    for (uint32_t k = 0; k < t->ntouch; k++) {
        ms_buf *b = &m->bufs[t->touch[k]];
        if (b->kind == MS_BUF_ARENA && atomic_fetch_sub(&b->pending, 1) == 1 && !b->var)
            MS_POISON(b->ptr, (size_t)b->size);
    }
}

/* Profile: a flow record per wait of @p t (its senders' records are final:
 * they were written before the events this task waited for). */
static void record_flows(ms_model *m, ms_task *t, uint32_t s)
{
    ms_flows *f = &m->flows[s];
    for (uint32_t w = 0; w < t->nwait; w++) {
        const ms_task *snd = &m->tasks[t->waits[w].sender];
        if (snd->prof_idx == SIZE_MAX)
            continue;
        if (f->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 64;
            ms_flow_rec *v = kiln_alloc(sizeof(*v) * cap);
            if (!v) {
                m->prof[s].oom = true;
                return;
            }
            if (f->n)
                memcpy(v, f->v, sizeof(*v) * f->n);
            kiln_free(f->v);
            f->v = v;
            f->cap = cap;
        }
        f->v[f->n++] = (ms_flow_rec){t->waits[w].event, snd->stream, s, snd->prof_idx,
                                     t->prof_idx};
    }
}

kiln_status ms_stream_run(ms_model *m, uint32_t s, kiln_error *err)
{
    const ms_stream *ms = &m->streams[s];
    seq_prof *pr = m->profile ? &m->prof[s] : NULL;
    m->worker_cancelled[s] = false;
    if (pr) {
        pr->run = m->runs;
        pr->depth = 1; /* subgraph steps run inside a task */
    }
    seq_prof_set(pr);
    for (uint32_t i = 0; i < ms->ntasks; i++) {
        ms_task *t = &m->tasks[ms->tasks[i]];
        for (uint32_t w = 0; w < t->nwait; w++) {
            if (!event_wait(m, &t->waits[w]))
                return seq_prof_set(NULL), m->worker_cancelled[s] = true, KILN_ERR_INTERNAL;
            if (m->dyn)
                ms_dyn_waited(m, t, w);
        }
        if (atomic_load(&m->abort))
            return seq_prof_set(NULL), m->worker_cancelled[s] = true, KILN_ERR_INTERNAL;
        task_begin(m, ms->tasks[i]);
        kiln_status dst = m->dyn ? ms_dyn_task_begin(m, t, err) : KILN_OK;
        if (dst != KILN_OK) {
            kiln_error_push(err, "node %s (%s), stream %u", kiln_node_name_str(m->g, t->node),
                            kiln_node_op_str(m->g, t->node), s);
            abort_all(m);
            seq_prof_set(NULL);
            return dst;
        }
        if (m->fault_sender && t->node == m->fault_sender)
            usleep(50000); /* test mode: let the receiver whose wait was dropped run ahead */
        int64_t t0 = pr ? seq_now_ns() : 0;
        kiln_status st = run_task(m, t, err);
        if (pr) {
            seq_prof_rec r = {m->g, t->node, t->engine, m->runs, 0, t0, seq_now_ns()};
            t->prof_idx = seq_prof_add(pr, &r);
            if (t->prof_idx != SIZE_MAX)
                record_flows(m, t, s);
        }
        task_end(m, t);
        if (m->dyn)
            ms_dyn_task_end(m, t);
        if (st != KILN_OK) {
            kiln_error_push(err, "node %s (%s%s%s), stream %u", kiln_node_name_str(m->g, t->node),
                            kiln_node_op_str(m->g, t->node), t->engine ? ", engine " : "",
                            t->engine ? t->engine : "", s);
            abort_all(m);
            seq_prof_set(NULL);
            return st;
        }
        if (m->dyn) /* SendEvents: the recycle state goes before the record */
            ms_dyn_send(m, t);
        for (uint32_t r = 0; r < t->nrecord; r++)
            event_record(m, t->records[r]);
    }
    seq_prof_set(NULL);
    return KILN_OK;
}

/* ---- workers -------------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
    ms_worker *w = arg;
    ms_model *m = w->m;
    uint64_t seen = 0;
    pthread_mutex_lock(&m->run_mu);
    for (;;) {
        while (m->generation == seen && !m->quit)
            pthread_cond_wait(&m->run_cv, &m->run_mu);
        if (m->quit)
            break;
        seen = m->generation;
        pthread_mutex_unlock(&m->run_mu);
        kiln_error_clear(m->worker_err[w->stream]);
        m->worker_st[w->stream] = ms_stream_run(m, w->stream, m->worker_err[w->stream]);
        pthread_mutex_lock(&m->run_mu);
        if (--m->running == 0)
            pthread_cond_signal(&m->done_cv);
    }
    pthread_mutex_unlock(&m->run_mu);
    return NULL;
}

static kiln_status start_workers(ms_model *m, kiln_error *err)
{
    for (uint32_t s = 1; s < m->nstreams; s++) {
        ms_worker *w = &m->workers[s];
        w->m = m;
        w->stream = s;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return kiln_errorf(err, KILN_ERR_NOMEM, "cannot start the worker of stream %u", s);
        w->started = true;
    }
    return KILN_OK;
}

static void stop_workers(ms_model *m)
{
    if (!m->workers)
        return;
    pthread_mutex_lock(&m->run_mu);
    m->quit = true;
    pthread_cond_broadcast(&m->run_cv);
    pthread_mutex_unlock(&m->run_mu);
    for (uint32_t s = 1; s < m->nstreams; s++)
        if (m->workers[s].started)
            pthread_join(m->workers[s].thread, NULL);
}

/* ---- freeing -------------------------------------------------------------------------- */

void ms_model_free(ms_model *m)
{
    if (!m)
        return;
    stop_workers(m);
    ms_dyn_free(m);
    free(m->io_pairs);
    for (uint32_t i = 0; i < m->ntasks; i++) {
        ms_task *t = &m->tasks[i];
        if (t->fn && t->engine)
            kiln_engine_kernel_release(m->g, t->engine, t->state);
        seq_plan_free(t->sub[0]);
        seq_plan_free(t->sub[1]);
        seq_loop_free(t->loop);
        seq_cases_free(t->cases);
        kiln_free(t->in_buf);
        kiln_free(t->out_buf);
        kiln_free(t->args);
        kiln_free(t->sub_io);
        kiln_free(t->touch);
        kiln_free(t->waits);
        kiln_free(t->records);
    }
    for (uint32_t i = 0; i < m->nbufs; i++)
        if (m->bufs[i].kind == MS_BUF_OWN)
            kiln_free(m->bufs[i].ptr);
    for (uint32_t i = 0; i < m->narenas; i++) {
        if (m->arenas[i])
            MS_UNPOISON(m->arenas[i], (size_t)m->arena_size[i]);
        free(m->arenas[i]);
    }
    for (uint32_t i = 0; m->events && i < m->nevents; i++) {
        pthread_mutex_destroy(&m->events[i].mu);
        pthread_cond_destroy(&m->events[i].cv);
    }
    for (uint32_t s = 0; s < m->nstreams && m->streams; s++)
        kiln_free(m->streams[s].tasks);
    kiln_free(m->streams);
    kiln_free(m->tasks);
    kiln_free(m->bufs);
    kiln_free(m->arenas);
    kiln_free(m->arena_size);
    kiln_free(m->events);
    kiln_free(m->input_node);
    kiln_free(m->input_buf);
    kiln_free(m->output_buf);
    kiln_free(m->output_desc);
    for (uint32_t s = 0; m->worker_err && s < m->nstreams; s++)
        if (m->worker_err[s])
            kiln_error_destroy(m->worker_err[s]);
    kiln_free(m->worker_err);
    kiln_free(m->worker_st);
    kiln_free(m->worker_cancelled);
    kiln_free(m->workers);
    for (uint32_t s = 0; s < m->nstreams && m->prof; s++) {
        seq_prof_free(&m->prof[s]);
        kiln_free(m->flows[s].v);
    }
    kiln_free(m->prof);
    kiln_free(m->flows);
    kiln_free(m->out_tasks);
    kiln_free(m->out_flows);
    kiln_free(m->out_memory);
    pthread_mutex_destroy(&m->run_mu);
    pthread_cond_destroy(&m->run_cv);
    pthread_cond_destroy(&m->done_cv);
    kiln_free(m);
}

/* ---- one run ---------------------------------------------------------------------------- */

static kiln_status bind_inputs(ms_model *m, const kiln_tensor *inputs, uint32_t nin,
                               kiln_error *err)
{
    if (nin != m->ninputs)
        return kiln_errorf(err, KILN_ERR_INVALID, "the model has %u inputs, got %u", m->ninputs,
                           nin);
    for (uint32_t i = 0; i < nin; i++) {
        const kiln_tensor *t = &inputs[i];
        kiln_node_id n = m->input_node[i];
        const kiln_tensor_desc *d = kiln_node_output_desc(m->g, n, 0);
        int32_t rank = kiln_desc_rank(d);
        bool same = t->dtype == kiln_desc_dtype(d) && rank >= 0 && t->rank == (uint32_t)rank;
        for (uint32_t k = 0; same && k < t->rank; k++)
            same = t->dims && t->dims[k] == kiln_desc_dims(d)[k];
        if (!same) {
            char want[256], got[256] = "?";
            seq_dims_str(rank > 0 ? (uint32_t)rank : 0, kiln_desc_dims(d), want, sizeof(want));
            if (t->dims || !t->rank)
                seq_dims_str(t->rank, t->dims, got, sizeof(got));
            return kiln_errorf(err, KILN_ERR_INVALID, "input %s (index %u): expected %s %s, got "
                               "%s %s", kiln_node_name_str(m->g, n), i,
                               kiln_dtype_name(kiln_desc_dtype(d)), want,
                               (unsigned)t->dtype < KILN_DT_COUNT ? kiln_dtype_name(t->dtype) : "?",
                               got);
        }
        ms_buf *b = &m->bufs[m->input_buf[i]];
        if (b->copy_input) { /* a While updates it in place: a copy, not the caller's memory */
            if (t->nbytes > (size_t)b->size || (t->nbytes && !t->data))
                return kiln_errorf(err, KILN_ERR_INVALID, "input %s (index %u): expected at most "
                                   "%lld bytes, got %zu", kiln_node_name_str(m->g, n), i,
                                   (long long)b->size, t->data ? t->nbytes : 0);
            if (t->nbytes)
                memcpy(b->ptr, t->data, t->nbytes);
            continue;
        }
        if (t->nbytes != (size_t)b->size || (b->size && !t->data))
            return kiln_errorf(err, KILN_ERR_INVALID, "input %s (index %u): expected %lld bytes, "
                               "got %zu", kiln_node_name_str(m->g, n), i, (long long)b->size,
                               t->data ? t->nbytes : 0);
        b->ptr = t->data; /* zero-copy: kernels never write a model input */
    }
    return KILN_OK;
}

static void free_outputs(kiln_tensor *outputs, uint32_t nout)
{
    for (uint32_t j = 0; j < nout; j++) {
        kiln_free((void *)(uintptr_t)outputs[j].dims);
        kiln_free(outputs[j].data);
        memset(&outputs[j], 0, sizeof(outputs[j]));
    }
}

/* The caller's output tensors; the ones a buffer owns become that buffer. */
static kiln_status alloc_outputs(ms_model *m, kiln_tensor *outputs, uint32_t nout,
                                 kiln_error *err)
{
    if (nout != m->noutputs)
        return kiln_errorf(err, KILN_ERR_INVALID, "the model has %u outputs, the caller asked "
                           "for %u", m->noutputs, nout);
    memset(outputs, 0, sizeof(*outputs) * nout);
    for (uint32_t j = 0; j < nout; j++) {
        const kiln_tensor_desc *d = m->output_desc[j];
        int32_t rank = kiln_desc_rank(d);
        size_t bytes = (size_t)m->bufs[m->output_buf[j]].size;
        int64_t numel = 0;
        if (rank >= 0 && kiln_dims_numel(kiln_desc_dims(d), (uint32_t)rank, &numel) == KILN_OK)
            bytes = (size_t)numel * kiln_dtype_size(kiln_desc_dtype(d));
        int64_t *dims = kiln_alloc(sizeof(int64_t) * (rank > 0 ? (size_t)rank : 1));
        void *data = kiln_alloc(bytes ? bytes : 1);
        if (!dims || !data) {
            kiln_free(dims);
            kiln_free(data);
            free_outputs(outputs, nout);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (output %u)", j);
        }
        if (rank > 0)
            memcpy(dims, kiln_desc_dims(d), sizeof(int64_t) * (size_t)rank);
        outputs[j] = (kiln_tensor){kiln_desc_dtype(d), rank > 0 ? (uint32_t)rank : 0, dims, data,
                                   bytes};
        ms_buf *b = &m->bufs[m->output_buf[j]];
        if (b->kind == MS_BUF_OUTPUT && b->io == j)
            b->ptr = data;
    }
    return KILN_OK;
}

/* Outputs no producer wrote in place: copy them from their buffers. */
static void copy_outputs(ms_model *m, kiln_tensor *outputs)
{
    for (uint32_t j = 0; j < m->noutputs; j++) {
        ms_buf *b = &m->bufs[m->output_buf[j]];
        if ((b->kind == MS_BUF_OUTPUT && b->io == j) || !outputs[j].nbytes)
            continue;
        memcpy(outputs[j].data, b->ptr, outputs[j].nbytes);
    }
}

/* GE CheckIoReuseAddrs on the addresses the run uses: each input's buffer
 * (the caller's tensor, zero-copy), the buffer feeding each output. */
static kiln_status check_io_reuse(ms_model *m, kiln_error *err)
{
    if (!m->nio_pairs)
        return KILN_OK;
    const void **in = malloc(sizeof(*in) * (m->ninputs + m->noutputs + 1));
    if (!in)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    const void **out = in + m->ninputs;
    for (uint32_t i = 0; i < m->ninputs; i++)
        in[i] = m->bufs[m->input_buf[i]].ptr;
    for (uint32_t j = 0; j < m->noutputs; j++)
        out[j] = m->bufs[m->output_buf[j]].ptr;
    kiln_status st = kiln_io_reuse_check(m->io_pairs, m->nio_pairs, in, m->ninputs, out,
                                         m->noutputs, err);
    free(in);
    return st;
}

static kiln_status model_run(ms_model *m, const kiln_tensor *inputs, uint32_t nin,
                             kiln_tensor *outputs, uint32_t nout, kiln_error *err)
{
    if (m->dyn_broken)
        return kiln_errorf(err, KILN_ERR_NOMEM, "allocator %s: no stack after a failed run "
                           "(out of memory); load the model again", m->dyn_name);
    kiln_status st = bind_inputs(m, inputs, nin, err);
    if (st != KILN_OK || (st = alloc_outputs(m, outputs, nout, err)) != KILN_OK)
        return st;
    if ((st = check_io_reuse(m, err)) != KILN_OK) {
        free_outputs(outputs, nout);
        return st;
    }
    atomic_store(&m->abort, false);
    for (uint32_t i = 0; i < m->nevents; i++)
        m->events[i].count = 0;
    for (uint32_t i = 0; i < m->nbufs; i++)
        atomic_store(&m->bufs[i].pending, m->bufs[i].uses);
    for (uint32_t i = 0; m->profile && i < m->ntasks; i++)
        m->tasks[i].prof_idx = SIZE_MAX;
    for (uint32_t i = 0; i < m->nbufs; i++) /* loop variables a Const starts */
        if (m->bufs[i].copy_src && m->bufs[i].copy_bytes)
            memcpy(m->bufs[i].ptr, m->bufs[i].copy_src, m->bufs[i].copy_bytes);
    for (uint32_t i = 0; i < m->narenas; i++)
        if (m->arenas[i])
            MS_POISON(m->arenas[i], (size_t)m->arena_size[i]);
    for (uint32_t i = 0; i < m->nbufs; i++) /* variables live across runs */
        if (m->bufs[i].var && m->bufs[i].kind == MS_BUF_ARENA)
            MS_UNPOISON(m->bufs[i].ptr, (size_t)m->bufs[i].size);
    /* GE's first sync stage: the main stream's setup above (inputs bound,
     * outputs allocated, events reset) happens before any stream starts */
    if (m->nstreams > 1) {
        pthread_mutex_lock(&m->run_mu);
        m->running = m->nstreams - 1;
        m->generation++;
        pthread_cond_broadcast(&m->run_cv);
        pthread_mutex_unlock(&m->run_mu);
    }
    st = m->nstreams ? ms_stream_run(m, 0, err) : KILN_OK;
    /* the last sync stage: every stream has finished before the main stream
     * goes on (outputs complete) */
    if (m->nstreams > 1) {
        pthread_mutex_lock(&m->run_mu);
        while (m->running)
            pthread_cond_wait(&m->done_cv, &m->run_mu);
        pthread_mutex_unlock(&m->run_mu);
    }
    /* the final resource clean: the dynamic memory's pending recycles settle
     * and its pools go back to L1; a failed run's leftovers go with its stack */
    if (m->dyn) {
        bool failed = st != KILN_OK;
        for (uint32_t s = 1; s < m->nstreams && !failed; s++)
            failed = m->worker_st[s] != KILN_OK;
        if (!failed)
            ms_dyn_final_clean(m);
        else if (ms_dyn_reset(m, NULL) != KILN_OK)
            m->dyn_broken = true;
    }
    /* the first real failure wins over the streams it cancelled */
    bool lost = st != KILN_OK && m->nstreams && m->worker_cancelled[0];
    for (uint32_t s = 1; s < m->nstreams && (st == KILN_OK || lost); s++)
        if (m->worker_st[s] != KILN_OK && !m->worker_cancelled[s]) {
            lost = false;
            kiln_error_clear(err);
            char msg[1024];
            kiln_error_format(m->worker_err[s], msg, sizeof(msg));
            st = kiln_errorf(err, m->worker_st[s], "%s", msg);
        }
    for (uint32_t i = 0; i < m->narenas; i++)
        if (m->arenas[i])
            MS_UNPOISON(m->arenas[i], (size_t)m->arena_size[i]);
    m->runs++;
    if (st != KILN_OK) {
        free_outputs(outputs, nout);
        return st;
    }
    copy_outputs(m, outputs);
    return KILN_OK;
}

/* ---- the runtime component ------------------------------------------------------------------ */

static const kiln_option_def ms_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "max_memory", NULL,
     "bytes the arenas and buffers of a loaded model may take in all (default: 3/4 of the "
     "physical memory)",
     1, (double)INT64_MAX},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "profile", "false",
     "record every task's start and end time and every event wait for the run profile "
     "(kiln run --trace, --report); off: nothing is recorded",
     0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "lower_control_flow", "true",
     "lower every If to GE's runtime form at load (bg_condition: InnerData, "
     "PointFromInputs, IdentityAddr) and run that; off: run If branches as compiled "
     "(the session option kiln.lower_control_flow sets it)",
     0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "allocator", "",
     "the allocator component (three_layer, caching) serving, per run, the buffers the "
     "memory plan does not cover; empty: a buffer of their own each, made at load "
     "(the session option kiln.allocator, the manifest's \"allocator\", sets it)",
     0, 0},
};

static kiln_status ms_load(void *inst, kiln_graph *g, void **model, kiln_error *err)
{
    const seq_inst *si = inst;
    ms_model *m = NULL;
    *model = NULL;
    kiln_status st = !si || si->lower ? seq_lower_conditions(g, err) : KILN_OK;
    if (st != KILN_OK)
        return st;
    st = ms_model_build(g, si ? si->max_memory : seq_default_max_memory(), &m, err);
    if (st == KILN_OK && si && si->allocator[0] && (st = ms_dyn_setup(m, si->allocator, err)) != KILN_OK) {
        ms_model_free(m);
        return st;
    }
    if (st == KILN_OK && si && si->profile) {
        m->profile = true;
        m->prof = kiln_alloc(sizeof(seq_prof) * (m->nstreams + 1u));
        m->flows = kiln_alloc(sizeof(ms_flows) * (m->nstreams + 1u));
        if (!m->prof || !m->flows)
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        else {
            memset(m->prof, 0, sizeof(seq_prof) * (m->nstreams + 1u));
            memset(m->flows, 0, sizeof(ms_flows) * (m->nstreams + 1u));
        }
    }
    if (st == KILN_OK)
        st = kiln_io_reuse_from_graph(g, false, &m->io_pairs, &m->nio_pairs, err);
    if (st == KILN_OK)
        st = start_workers(m, err);
    if (st != KILN_OK) {
        ms_model_free(m);
        return st;
    }
    if (st == KILN_OK)
        *model = m;
    return st;
}

static kiln_status ms_run(void *inst, void *model, const kiln_tensor *inputs, uint32_t nin,
                          kiln_tensor *outputs, uint32_t nout, kiln_error *err)
{
    (void)inst;
    if (!model)
        return kiln_errorf(err, KILN_ERR_INVALID, "multistream runtime: no model loaded");
    return model_run(model, inputs, nin, outputs, nout, err);
}

/* The memory entry of type @p type in @p mem (@p n so far), added when missing. */
static kiln_prof_memory *mem_entry(kiln_prof_memory *mem, uint32_t *n, const char *type)
{
    for (uint32_t i = 0; i < *n; i++)
        if (strcmp(mem[i].memory_type, type) == 0)
            return &mem[i];
    mem[*n] = (kiln_prof_memory){type, 0, 0};
    return &mem[(*n)++];
}

/*
 * The profile: the streams' records concatenated stream by stream, the
 * flows with global indices, and memory per type (the plan's arenas; the
 * buffers of the runtime's own and the subgraph and loop buffers as HBM).
 */
static kiln_status ms_profile(void *inst, void *model, kiln_run_profile *out, kiln_error *err)
{
    (void)inst;
    ms_model *m = model;
    size_t ntask = 0, nflow = 0;
    for (uint32_t s = 0; m->profile && s < m->nstreams; s++)
        ntask += m->prof[s].n, nflow += m->flows[s].n;
    kiln_free(m->out_tasks);
    kiln_free(m->out_flows);
    kiln_free(m->out_memory);
    m->out_tasks = kiln_alloc(sizeof(kiln_prof_task) * (ntask + 1));
    m->out_flows = kiln_alloc(sizeof(kiln_prof_flow) * (nflow + 1));
    m->out_memory = kiln_alloc(sizeof(kiln_prof_memory) * (m->narenas + 2u));
    size_t *base = kiln_alloc(sizeof(size_t) * (m->nstreams + 1u));
    if (!m->out_tasks || !m->out_flows || !m->out_memory || !base) {
        kiln_free(base);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    size_t k = 0, f = 0;
    bool oom = false;
    for (uint32_t s = 0; m->profile && s < m->nstreams; s++) {
        base[s] = k;
        oom |= m->prof[s].oom;
        for (size_t i = 0; i < m->prof[s].n; i++, k++) {
            const seq_prof_rec *r = &m->prof[s].v[i];
            m->out_tasks[k] = (kiln_prof_task){r->g, r->node, r->engine, s, r->run, r->depth,
                                               r->t0, r->t1};
        }
    }
    for (uint32_t s = 0; m->profile && s < m->nstreams; s++)
        for (size_t i = 0; i < m->flows[s].n; i++) {
            const ms_flow_rec *r = &m->flows[s].v[i];
            m->out_flows[f++] = (kiln_prof_flow){r->event, (uint32_t)(base[r->send_stream] + r->send_idx),
                                                 (uint32_t)(base[r->recv_stream] + r->recv_idx)};
        }
    kiln_free(base);
    uint32_t nmem = 0;
    const char *const *types = NULL;
    uint32_t nt = 0;
    kiln_attrs_get_list_string(kiln_graph_attrs(m->g), "_kiln_memory_types", &types, &nt);
    for (uint32_t i = 0; i < m->narenas && i < nt; i++)
        mem_entry(m->out_memory, &nmem, types[i])->arena_bytes += m->arena_size[i];
    int64_t own = m->mem.used; /* arenas, own buffers, subgraph plans and loops */
    if (m->dyn) { /* the buffers the allocator stack serves: what it held at most */
        kiln_alloc_stats as;
        memset(&as, 0, sizeof(as));
        as.struct_size = sizeof(as);
        kiln_alloc_stack_stats(m->dyn, &as);
        own += (int64_t)as.peak_reserved;
    }
    for (uint32_t i = 0; i < m->narenas; i++)
        own -= m->arena_size[i];
    mem_entry(m->out_memory, &nmem, "HBM")->own_bytes += own;
    out->stream_count = m->nstreams;
    out->run_count = m->runs;
    out->task_count = (uint32_t)ntask;
    out->tasks = m->out_tasks;
    out->flow_count = (uint32_t)nflow;
    out->flows = m->out_flows;
    out->memory_count = nmem;
    out->memory = m->out_memory;
    out->truncated = oom;
    return KILN_OK;
}

static void ms_unload(void *inst, void *model)
{
    (void)inst;
    ms_model_free(model);
}

static const kiln_runtime_desc ms_runtime = {
    .struct_size = sizeof(kiln_runtime_desc),
    .name = "multistream",
    .summary = "one worker thread per stream, events between them, buffers in the build's "
               "memory plan (zero-copy inputs and outputs)",
    .option_count = sizeof(ms_options) / sizeof(ms_options[0]),
    .options = ms_options,
    .create = seq_inst_create,
    .destroy = seq_inst_destroy,
    .load = ms_load,
    .run = ms_run,
    .unload = ms_unload,
    .profile = ms_profile,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_runtime(r, &ms_runtime);
}

KILN_PLUGIN_DEFINE("kiln.runtime.multistream", "0.1.0", "Apache-2.0",
                   "multi-stream runtime: executes the build stage's streams, events and memory "
                   "plan on worker threads",
                   init, NULL)
