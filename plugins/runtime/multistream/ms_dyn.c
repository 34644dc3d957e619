/*
 * ms_dyn.c - the multistream runtime's dynamic memory: the buffers the
 * compile-time memory plan does not cover (a graph built without
 * MemoryAssigner, outputs of unknown size at build time) come from a stack of
 * the allocator component named by the runtime option `allocator`
 * (docs/allocators.md), per run, as GE RT2 serves its dynamic memory:
 *
 *   - a buffer is allocated on its birth stream when its first writer task
 *     begins, and at once made known to every other stream that uses it
 *     (AccessMemCrossStream: device-like memory wanders, so those streams are
 *     marked in the block's MIF before any of them can run);
 *   - each stream frees it after its own last use; a block another stream
 *     still occupies waits in the freeing stream's local-recycle list (an
 *     allocator that does not track streams, such as caching, gets it back
 *     once, from the task that used it last on any stream: a per-run
 *     countdown of its uses);
 *   - the events carry the recycle state: a recording task hands its
 *     pending entries to each event it records (SendEvents, before the
 *     record, so the waiter finds them), a waiting task settles what its
 *     event carried (WaitEvents);
 *   - at the end of a run, once every stream is done, the final resource
 *     clean (LastWaitEvents) settles everything left and gives the pools
 *     back to L1, so the next run starts from the cache.
 *
 * The allocator's events are the schedule's wait pairs: one per (recording
 * task, waiting task) of the run, so an event id the stream allocator reused
 * between other streams is still one (src, dst) pair to the stack.  Buffers
 * a While updates in place, and buffers never written, keep buffers of their
 * own.  Setup is O(tasks + touches); per task, O(its DYN buffers + waits).
 */
#include "ms_runtime.h"

#include <stdio.h>
#include <stdlib.h>

static uint32_t *grow_push(uint32_t *v, uint32_t *n, uint32_t x, bool *oom)
{
    /* sizes are small (a task's buffers and waits): one realloc per push */
    uint32_t *p = realloc(v, sizeof(*v) * (*n + 1));
    if (!p) {
        *oom = true;
        return v;
    }
    p[(*n)++] = x;
    return p;
}

kiln_status ms_dyn_setup(ms_model *m, const char *allocator, kiln_error *err)
{
    if (!allocator || !allocator[0])
        return KILN_OK;
    if (m->nstreams > 64)
        return kiln_errorf(err, KILN_ERR_LIMIT, "allocator %s: %u streams, a stack serves 64",
                           allocator, m->nstreams);
    bool oom = false;
    /* which buffers: unplanned, written, not a loop variable's own copy */
    for (uint32_t b = 0; b < m->nbufs; b++) {
        ms_buf *x = &m->bufs[b];
        if (x->kind != MS_BUF_OWN || x->first == MS_NONE || x->copy_input || x->copy_src)
            continue;
        x->kind = MS_BUF_DYN;
        kiln_free(x->ptr); /* the load-time buffer: the stack serves it from now on */
        m->mem.used -= x->size;
        x->ptr = NULL;
        x->dyn_users = 0;
    }
    /* per stream, in order: the last task touching each DYN buffer frees it there */
    uint32_t *last = malloc(sizeof(uint32_t) * (m->nbufs ? m->nbufs : 1));
    if (!last)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t s = 0; s < m->nstreams; s++) {
        for (uint32_t b = 0; b < m->nbufs; b++)
            last[b] = MS_NONE;
        const ms_stream *st = &m->streams[s];
        for (uint32_t i = 0; i < st->ntasks; i++) {
            ms_task *t = &m->tasks[st->tasks[i]];
            for (uint32_t k = 0; k < t->ntouch; k++) {
                ms_buf *x = &m->bufs[t->touch[k]];
                if (x->kind != MS_BUF_DYN)
                    continue;
                last[t->touch[k]] = st->tasks[i];
                if (m->tasks[x->first].stream != s)
                    x->dyn_users |= 1ull << s;
            }
        }
        for (uint32_t b = 0; b < m->nbufs; b++)
            if (last[b] != MS_NONE) {
                ms_task *t = &m->tasks[last[b]];
                t->dyn_free = grow_push(t->dyn_free, &t->ndyn_free, b, &oom);
            }
    }
    free(last);
    for (uint32_t b = 0; b < m->nbufs; b++)
        if (m->bufs[b].kind == MS_BUF_DYN) {
            ms_task *t = &m->tasks[m->bufs[b].first];
            t->dyn_alloc = grow_push(t->dyn_alloc, &t->ndyn_alloc, b, &oom);
        }
    /* the stack's events: one per wait, (sender's stream, waiter's stream) */
    uint32_t nev = 0;
    for (uint32_t i = 0; i < m->ntasks; i++)
        nev += m->tasks[i].nwait;
    uint32_t *pairs = malloc(sizeof(uint32_t) * 2 * (nev ? nev : 1));
    if (!pairs || oom) {
        free(pairs);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    uint32_t e = 0;
    for (uint32_t i = 0; i < m->ntasks; i++) {
        ms_task *t = &m->tasks[i];
        for (uint32_t w = 0; w < t->nwait; w++) {
            ms_task *snd = &m->tasks[t->waits[w].sender];
            t->waits[w].aev = e;
            pairs[2 * e] = snd->stream;
            pairs[2 * e + 1] = t->stream;
            snd->dyn_send = grow_push(snd->dyn_send, &snd->ndyn_send, e, &oom);
            e++;
        }
    }
    m->dyn_pairs = pairs;
    m->dyn_nev = nev;
    snprintf(m->dyn_name, sizeof(m->dyn_name), "%s", allocator);
    if (oom)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    return ms_dyn_reset(m, err);
}

kiln_status ms_dyn_reset(ms_model *m, kiln_error *err)
{
    kiln_alloc_stack_destroy(m->dyn);
    m->dyn = NULL;
    kiln_alloc_config cfg = {sizeof(cfg), m->nstreams ? m->nstreams : 1, m->dyn_nev,
                             m->dyn_pairs, 0};
    kiln_status st = kiln_alloc_stack_create(m->g, m->dyn_name, NULL, 0, &cfg, &m->dyn, err);
    m->dyn_streams = st == KILN_OK && kiln_alloc_stack_tracks_streams(m->dyn);
    return st;
}

kiln_status ms_dyn_task_begin(ms_model *m, ms_task *t, kiln_error *err)
{
    for (uint32_t k = 0; k < t->ndyn_alloc; k++) {
        ms_buf *x = &m->bufs[t->dyn_alloc[k]];
        x->ptr = kiln_alloc_stack_alloc(m->dyn, x->size ? (size_t)x->size : 1, t->stream);
        if (!x->ptr)
            return kiln_errorf(err, KILN_ERR_NOMEM,
                               "allocator %s: no memory for %lld bytes on stream %u",
                               m->dyn_name, (long long)x->size, t->stream);
        for (uint32_t s = 0; m->dyn_streams && s < m->nstreams; s++) {
            if (!(x->dyn_users >> s & 1))
                continue;
            kiln_status st = kiln_alloc_stack_access(m->dyn, x->ptr, t->stream, s, err);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

void ms_dyn_task_end(ms_model *m, ms_task *t)
{
    if (!m->dyn_streams) { /* once, by the last use of the run on any stream */
        for (uint32_t k = 0; k < t->ntouch; k++) {
            ms_buf *x = &m->bufs[t->touch[k]];
            if (x->kind == MS_BUF_DYN && x->ptr && atomic_fetch_sub(&x->pending, 1) == 1)
                kiln_alloc_stack_free(m->dyn, x->ptr, t->stream);
        }
        return;
    }
    for (uint32_t k = 0; k < t->ndyn_free; k++) {
        ms_buf *x = &m->bufs[t->dyn_free[k]];
        if (x->ptr)
            kiln_alloc_stack_free(m->dyn, x->ptr, t->stream);
    }
}

void ms_dyn_waited(ms_model *m, ms_task *t, uint32_t w)
{
    /* the stack's own errors here name a stream or event out of range: the
     * setup built both from the schedule, so they cannot happen */
    kiln_alloc_stack_wait_events(m->dyn, t->stream, &t->waits[w].aev, 1, NULL);
}

void ms_dyn_send(ms_model *m, ms_task *t)
{
    if (t->ndyn_send)
        kiln_alloc_stack_send_events(m->dyn, t->stream, t->dyn_send, t->ndyn_send, NULL);
}

void ms_dyn_final_clean(ms_model *m)
{
    kiln_alloc_stack_last_wait(m->dyn);
}

void ms_dyn_free(ms_model *m)
{
    for (uint32_t i = 0; m->tasks && i < m->ntasks; i++) {
        free(m->tasks[i].dyn_alloc);
        free(m->tasks[i].dyn_free);
        free(m->tasks[i].dyn_send);
    }
    kiln_alloc_stack_destroy(m->dyn);
    m->dyn = NULL;
    free(m->dyn_pairs);
    m->dyn_pairs = NULL;
}
