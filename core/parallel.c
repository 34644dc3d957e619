/*
 * parallel.c - kiln__parallel_run and the task scope (parallel.h).
 *
 * One run: the calling thread starts min(threads, n) - 1 workers and works as
 * worker 0.  Every worker claims the next task index from an atomic counter,
 * so tasks start in index order; once a task failed, unclaimed tasks with a
 * higher index are skipped (counted finished) and lower ones still run, so the
 * lowest failing index is the same whatever the scheduling.  Each worker owns
 * one kiln_error, cleared before each task; the error of a failing task is
 * copied to the run when its index is the lowest failure so far (under the run
 * mutex).  The workers are joined before the call returns, then the task-local
 * objects are finished in task-index order on the calling thread.
 *
 * Finished tasks advance `done_prefix` (the number of leading tasks that are
 * finished); kiln__task_wait_turn waits on a condition variable until it
 * reaches the task's index.  A task waiting for its turn never blocks the
 * tasks it waits for: they were claimed earlier, and the lowest unfinished
 * task has nothing to wait for.
 *
 * Crash attribution: each worker starts with the caller's activity record
 * current (crash.h; the record is thread-local), and gets an alternate signal
 * stack of its own so a stack overflow in a task is still reported.
 */
#include "parallel.h"
#include "crash.h"
#include "ctx.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <errno.h>
#include <unistd.h>

typedef struct task_local {
    void *key;
    void *obj;
    kiln_task_finish_fn finish;
} task_local;

typedef struct task_locals {
    task_local *v;
    uint32_t count, cap;
} task_locals;

typedef struct prun {
    uint32_t n;
    kiln_task_fn fn;
    void *arg;
    kiln_activity *activity; /* the caller's, current in every worker */
    atomic_uint next;        /* next index to claim */
    atomic_uint fail_min;    /* lowest failed index, n = none */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *done;        /* per task, under mu */
    uint32_t done_prefix; /* under mu */
    kiln_status status;   /* of the task fail_min, under mu */
    kiln_error *err;      /* that task's error (worker-sized copy), under mu */
    task_locals *locals;  /* per task, written by the task's thread only */
} prun;

typedef struct worker {
    prun *run;
    uint32_t id;
    pthread_t th;
    bool started;
} worker;

/* The task the thread is running (NULL outside tasks). */
static _Thread_local prun *tls_run;
static _Thread_local uint32_t tls_index;
static _Thread_local uint32_t tls_worker;

static void mark_done(prun *r, uint32_t i)
{
    pthread_mutex_lock(&r->mu);
    r->done[i] = 1;
    uint32_t p = r->done_prefix;
    while (p < r->n && r->done[p])
        p++;
    bool advanced = p != r->done_prefix;
    r->done_prefix = p;
    pthread_mutex_unlock(&r->mu);
    if (advanced)
        pthread_cond_broadcast(&r->cv);
}

static void record_failure(prun *r, uint32_t i, kiln_status st, const kiln_error *e)
{
    pthread_mutex_lock(&r->mu);
    if (i < atomic_load(&r->fail_min)) {
        atomic_store(&r->fail_min, i);
        r->status = st;
        *r->err = *e;
    }
    pthread_mutex_unlock(&r->mu);
    pthread_cond_broadcast(&r->cv); /* waiters behind i give up their turn */
}

/* Claim and run tasks until none is left. */
static void work(prun *r, uint32_t id, kiln_error *e)
{
    tls_worker = id;
    for (;;) {
        uint32_t i = atomic_fetch_add(&r->next, 1);
        if (i >= r->n)
            break;
        if (i > atomic_load(&r->fail_min)) {
            mark_done(r, i); /* skipped */
            continue;
        }
        kiln_error_clear(e);
        tls_run = r;
        tls_index = i;
        kiln_status st = r->fn(r->arg, i, e);
        tls_run = NULL;
        if (st != KILN_OK) {
            if (e->code == KILN_OK) /* the task returned an error it did not record */
                kiln_errorf(e, st, "task %u failed (%s)", i, kiln_status_str(st));
            record_failure(r, i, st, e);
        }
        mark_done(r, i);
    }
}

static void *worker_main(void *p)
{
    worker *w = p;
    /* An alternate signal stack of this thread's own for the crash handler. */
    size_t ss_size = 64 * 1024;
    void *ss_mem = malloc(ss_size);
    if (ss_mem) {
        stack_t ss = {.ss_sp = ss_mem, .ss_size = ss_size, .ss_flags = 0};
        if (sigaltstack(&ss, NULL) != 0) {
            free(ss_mem);
            ss_mem = NULL;
        }
    }
    /* the caller's record, made current as it is (enter would refill it) */
    kiln__activity_leave(w->run->activity);
    kiln_error *e = malloc(sizeof(*e));
    if (e) {
        work(w->run, w->id, e);
        free(e);
    }
    /* else: worker 0 and the others claim this worker's share */
    kiln__activity_leave(NULL);
    if (ss_mem) {
        stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
        free(ss_mem);
    }
    return NULL;
}

/* Parse kiln.threads: 0 = default, -1 = invalid. */
static long threads_option(const kiln_ctx *ctx, const char **text)
{
    const char *v = ctx ? kiln_ctx_option(ctx, "kiln.threads") : NULL;
    *text = v;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long t = strtol(v, &end, 10);
    if (errno || *end || end == v || t < 0 || t > (long)KILN_MAX_THREADS)
        return -1;
    return t;
}

uint32_t kiln__parallel_threads(const kiln_ctx *ctx)
{
    const char *text;
    long t = threads_option(ctx, &text);
    if (t > 0)
        return (uint32_t)t;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    return cores < 16 ? (uint32_t)cores : 16u;
}

static void finish_locals(prun *r, uint32_t fail_min)
{
    for (uint32_t i = 0; i < r->n; i++) {
        task_locals *l = &r->locals[i];
        for (uint32_t k = 0; k < l->count; k++)
            l->v[k].finish(l->v[k].key, l->v[k].obj, i, i <= fail_min);
        kiln__free(l->v);
    }
}

kiln_status kiln__parallel_run(kiln_ctx *ctx, uint32_t n, uint32_t threads, kiln_task_fn fn,
                               void *arg, kiln_error *err)
{
    if (!fn)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln__parallel_run: no task function");
    if (threads == 0) {
        const char *text;
        if (threads_option(ctx, &text) < 0)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "option kiln.threads: '%s' is not a thread count (0 = one per "
                               "core up to 16, or 1..%u)",
                               text, KILN_MAX_THREADS);
        threads = kiln__parallel_threads(ctx);
    }
    if (threads > KILN_MAX_THREADS)
        threads = KILN_MAX_THREADS;
    if (n == 0)
        return KILN_OK;
    if (tls_run) {
        /* Nested: part of the running task, in order on this thread. */
        for (uint32_t i = 0; i < n; i++) {
            kiln_status st = fn(arg, i, err);
            if (st != KILN_OK)
                return st;
        }
        return KILN_OK;
    }
    prun r;
    memset(&r, 0, sizeof(r));
    r.n = n;
    r.fn = fn;
    r.arg = arg;
    atomic_init(&r.next, 0);
    atomic_init(&r.fail_min, n);
    r.status = KILN_OK;
    r.done = kiln__calloc(n, 1);
    r.locals = kiln__calloc(n, sizeof(*r.locals));
    r.err = kiln__malloc(sizeof(*r.err));
    kiln_error *e0 = kiln__malloc(sizeof(*e0));
    uint32_t nw = threads < n ? threads : n;
    worker *ws = nw > 1 ? kiln__calloc(nw, sizeof(*ws)) : NULL;
    if (!r.done || !r.locals || !r.err || !e0 || (nw > 1 && !ws)) {
        kiln__free(r.done);
        kiln__free(r.locals);
        kiln__free(r.err);
        kiln__free(e0);
        kiln__free(ws);
        return kiln_errorf(err, KILN_ERR_NOMEM, "parallel run of %u tasks: out of memory", n);
    }
    kiln_error_clear(r.err);
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.activity = kiln__activity_enter(NULL);
    kiln__activity_leave(r.activity);
    for (uint32_t k = 1; k < nw; k++) {
        ws[k].run = &r;
        ws[k].id = k;
        ws[k].started = pthread_create(&ws[k].th, NULL, worker_main, &ws[k]) == 0;
        /* a worker that could not start leaves its share to the others */
    }
    uint32_t saved_worker = tls_worker;
    work(&r, 0, e0);
    tls_worker = saved_worker;
    for (uint32_t k = 1; k < nw; k++)
        if (ws[k].started)
            pthread_join(ws[k].th, NULL);
    uint32_t fail_min = atomic_load(&r.fail_min);
    finish_locals(&r, fail_min);
    kiln_status st = r.status;
    if (st != KILN_OK && err) {
        if (err->code == KILN_OK && err->count == 0)
            *err = *r.err;
        else
            err->count++;
    }
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
    kiln__free(ws);
    kiln__free(e0);
    kiln__free(r.err);
    kiln__free(r.locals);
    kiln__free(r.done);
    return st;
}

/* ---- task scope ------------------------------------------------------------ */

void *kiln__task_local(void *key, void *(*create)(void *key), kiln_task_finish_fn finish)
{
    prun *r = tls_run;
    if (!r)
        return NULL;
    task_locals *l = &r->locals[tls_index];
    for (uint32_t k = 0; k < l->count; k++)
        if (l->v[k].key == key)
            return l->v[k].obj;
    if (!KILN_GROW(l->v, l->cap, l->count + 1))
        return NULL;
    void *obj = create(key);
    if (!obj)
        return NULL;
    l->v[l->count].key = key;
    l->v[l->count].obj = obj;
    l->v[l->count].finish = finish;
    l->count++;
    return obj;
}

bool kiln__task_current(uint32_t *index)
{
    if (!tls_run)
        return false;
    if (index)
        *index = tls_index;
    return true;
}

bool kiln__task_wait_turn(void)
{
    prun *r = tls_run;
    if (!r)
        return true;
    uint32_t i = tls_index;
    pthread_mutex_lock(&r->mu);
    while (r->done_prefix < i && atomic_load(&r->fail_min) > i)
        pthread_cond_wait(&r->cv, &r->mu);
    bool turn = r->done_prefix >= i;
    pthread_mutex_unlock(&r->mu);
    return turn;
}

uint32_t kiln__worker_index(void)
{
    return tls_worker;
}
