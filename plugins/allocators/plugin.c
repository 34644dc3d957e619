/*
 * plugin.c - libkiln_allocators.so (plugin kiln.allocators): the runtime
 * allocator components (docs/allocators.md).
 *
 *   three_layer  the three-layer stack: L1 caching allocator, an L2 pool per
 *                stream with MIF-tracked blocks, L3 borrowing, events carrying
 *                recycle state (GE RT2's memory kernels)
 *   caching      L1 alone: size classes, cached blocks, a release threshold;
 *                streams are ignored (a single-stream pool)
 *
 * A stack maps each pointer it handed out to its block (open addressing on
 * the address) and serialises every call with one lock.
 */
#include "ka.h"

#include <kiln/kiln.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stack's lock -------------------------------------------------------------- */
/* A test-and-test-and-set spin lock: every critical section is short (no system
 * call but the heap's rare growth or trim), and uncontended it costs one atomic
 * exchange where a pthread mutex costs two calls; a waiter yields its core. */
typedef struct spin {
    atomic_int held;
} spin;

static void lock(spin *l)
{
    for (unsigned n = 0;; n++) {
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&l->held, memory_order_relaxed))
            if (++n % 64 == 0)
                sched_yield();
    }
}

static void unlock(spin *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

/* ---- pointer -> block map ------------------------------------------------------ */
#define TOMB ((void *)1)
typedef struct pmap {
    void **key;
    void **val;
    uint64_t *aux;           /* the request's identity for the replay (rp_aux) */
    uint32_t cap, used, live; /* used counts tombstones too */
} pmap;

static uint32_t slot0(const pmap *m, const void *k)
{
    uint64_t h = ((uint64_t)(uintptr_t)k >> 6) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (m->cap - 1);
}

static bool pmap_grow(pmap *m)
{
    pmap n = {0};
    n.cap = m->cap ? (m->live * 4 > m->cap ? m->cap * 2 : m->cap) : 256;
    n.key = calloc(n.cap, sizeof(void *));
    n.val = calloc(n.cap, sizeof(void *));
    n.aux = calloc(n.cap, sizeof(uint64_t));
    if (!n.key || !n.val || !n.aux) {
        free(n.key);
        free(n.val);
        free(n.aux);
        return false;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->key[i] && m->key[i] != TOMB) {
            uint32_t j = slot0(&n, m->key[i]);
            while (n.key[j])
                j = (j + 1) & (n.cap - 1);
            n.key[j] = m->key[i];
            n.val[j] = m->val[i];
            n.aux[j] = m->aux[i];
            n.used++;
            n.live++;
        }
    free(m->key);
    free(m->val);
    free(m->aux);
    *m = n;
    return true;
}

static bool pmap_put(pmap *m, void *k, void *v, uint64_t aux)
{
    if ((m->used + 1) * 4 > m->cap * 3 && !pmap_grow(m))
        return false;
    uint32_t j = slot0(m, k), tomb = UINT32_MAX;
    while (m->key[j]) {
        if (m->key[j] == k) {
            m->val[j] = v;
            m->aux[j] = aux;
            return true;
        }
        if (m->key[j] == TOMB && tomb == UINT32_MAX)
            tomb = j;
        j = (j + 1) & (m->cap - 1);
    }
    if (tomb != UINT32_MAX)
        j = tomb;
    else
        m->used++;
    m->key[j] = k;
    m->val[j] = v;
    m->aux[j] = aux;
    m->live++;
    return true;
}

static uint32_t pmap_find(const pmap *m, const void *k)
{
    if (!m->cap)
        return UINT32_MAX;
    for (uint32_t j = slot0(m, k); m->key[j]; j = (j + 1) & (m->cap - 1))
        if (m->key[j] == k)
            return j;
    return UINT32_MAX;
}

static void pmap_del_at(pmap *m, uint32_t j)
{
    m->key[j] = TOMB;
    m->val[j] = NULL;
    m->live--;
}

/* ---- a stack ----------------------------------------------------------------- */
typedef struct stack {
    spin mu;
    bool caching;            /* L1 only */
    ka_ms *ms;
    ka_rp *rp;               /* learned plans (option replay), NULL when off */
    pmap map;                /* user pointer -> ka_msb (or ka_l1_block when caching),
                                PLANNED for a block of a plan's arena */
    size_t allocated, peak_allocated, steady_peak_allocated; /* caching only */
    uint64_t allocs, frees;
} stack;

/* A map value: the block was served from a plan's arena (ka_rp). */
#define PLANNED ((void *)2)

/* A request's identity in the map: the run (epoch), its stream, its index. */
static uint64_t rp_aux(const stack *st, uint32_t s, uint32_t idx)
{
    return st->rp ? (uint64_t)st->rp->epoch << 32 | (uint64_t)s << 26 | idx : KA_RP_NONE;
}
#define AUX_EPOCH(a) ((uint32_t)((a) >> 32))
#define AUX_STREAM(a) ((uint32_t)((a) >> 26) & 63u)
#define AUX_IDX(a) ((uint32_t)(a)&KA_RP_NONE)

/* Live request bytes: the stack's counters (caching: its own; three_layer: ka_ms's). */
static void count_alloc(stack *st, size_t size)
{
    size_t *a, *pk, *sp;
    uint64_t *n;
    if (st->caching) {
        a = &st->allocated, pk = &st->peak_allocated, sp = &st->steady_peak_allocated;
        n = &st->allocs;
    } else {
        ka_ms_stats *m = &st->ms->st;
        a = &m->allocated, pk = &m->peak_allocated, sp = &m->steady_peak_allocated;
        n = &m->allocs;
    }
    *a += size;
    if (*a > *pk)
        *pk = *a;
    if (*a > *sp)
        *sp = *a;
    ++*n;
}

/* A request from the plan of stream @p s when it serves it (NULL: the normal
 * path); *@p aux receives the request's identity. */
static void *plan_alloc(stack *st, size_t size, uint32_t s, uint64_t *aux)
{
    uint32_t idx = KA_RP_NONE;
    void *p = NULL;
    if (st->rp && s < st->rp->streams && ka_size_class(size))
        p = ka_rp_alloc(st->rp, s, size, &idx);
    *aux = rp_aux(st, s < 64 ? s : 0, idx);
    if (!p)
        return NULL;
    if (!pmap_put(&st->map, p, PLANNED, *aux)) {
        ka_rp_free(st->rp, s, idx, st->rp->epoch, true); /* OOM: give it back */
        return NULL;
    }
    count_alloc(st, size);
    return p;
}

/* Free (or note the free of) one holder of the request at map slot @p j.  A
 * planned block is released here; false for a block of the normal path. */
static bool plan_free(stack *st, uint32_t j)
{
    uint64_t aux = st->map.aux[j];
    bool planned = st->map.val[j] == PLANNED;
    if (!st->rp)
        return false;
    uint32_t o = AUX_STREAM(aux), i = AUX_IDX(aux);
    if (ka_rp_free(st->rp, o, i, AUX_EPOCH(aux), planned)) {
        size_t size = st->rp->req[st->rp->s[o].first + i].size;
        pmap_del_at(&st->map, j);
        if (st->caching) {
            st->allocated -= size;
            st->frees++;
        } else {
            st->ms->st.allocated -= size;
            st->ms->st.frees++;
        }
    } else if (planned && !st->caching) {
        st->ms->st.frees++; /* one holder of a shared planned block */
    }
    return planned;
}

/* The run's end: learn the run when it was clean and did not follow the plan. */
static void plan_end_run(stack *st)
{
    if (!st->rp)
        return;
    size_t live = st->caching ? st->allocated : st->ms->st.allocated;
    if (ka_rp_end_run(st->rp, &st->ms->l1, live == 0)) {
        if (st->caching)
            st->steady_peak_allocated = st->allocated;
        else
            st->ms->st.steady_peak_allocated = st->ms->st.allocated;
    }
}

/* Birth recycle: the pointer is no longer the user's. */
static void on_trace(void *ctx, ka_trace_kind k, uint32_t s, void *addr)
{
    (void)s;
    stack *st = ctx;
    if (k == KA_TR_BIRTH && addr) {
        uint32_t j = pmap_find(&st->map, addr);
        if (j != UINT32_MAX)
            pmap_del_at(&st->map, j);
    }
}

static const kiln_option_def alloc_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "capacity", "0",
     "bytes of system memory the stack may hold, 0 = unlimited (a request beyond it fails "
     "after every cache is released)", 0, 9.0e18},
    {sizeof(kiln_option_def), KILN_OPT_INT, "release_threshold", "-1",
     "cached free bytes L1 keeps at most; beyond it blocks go back to the system, largest "
     "first; -1 = keep all", -1, 9.0e18},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "replay", "true",
     "learn each stream's requests on a clean run (last_wait with nothing live), place "
     "them offline and serve later runs from that plan while they repeat it", 0, 0},
};

static kiln_status create(const kiln_options *o, const kiln_alloc_config *cfg, kiln_error *err,
                          void **inst, bool caching)
{
    int64_t cap = 0, rel = -1;
    bool replay = true;
    kiln_options_get_int(o, "capacity", &cap);
    kiln_options_get_int(o, "release_threshold", &rel);
    kiln_options_get_bool(o, "replay", &replay);
    stack *st = calloc(1, sizeof(*st));
    if (!st)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    st->caching = caching;
    st->ms = ka_ms_create(caching ? 1 : cfg->stream_count,
                          (cfg->flags & KILN_ALLOC_HOST_MEMORY) != 0, (size_t)cap,
                          rel < 0 ? SIZE_MAX : (size_t)rel);
    if (!st->ms || (!caching && !ka_ms_set_events(st->ms, cfg->events, cfg->event_count))) {
        ka_ms_destroy(st->ms);
        free(st);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory creating a %u-stream stack",
                           cfg->stream_count);
    }
    uint32_t ns = cfg->stream_count ? cfg->stream_count : 1;
    if (replay && !(st->rp = ka_rp_create(ns > KA_MAX_STREAMS ? KA_MAX_STREAMS : ns))) {
        ka_ms_destroy(st->ms);
        free(st);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory creating a %u-stream stack",
                           cfg->stream_count);
    }
    st->ms->trace = on_trace;
    st->ms->trace_ctx = st;
    atomic_init(&st->mu.held, 0);
    *inst = st;
    return KILN_OK;
}

static kiln_status ms_create(const kiln_options *o, const kiln_alloc_config *cfg, kiln_error *err,
                             void **inst)
{
    return create(o, cfg, err, inst, false);
}

static kiln_status l1_create(const kiln_options *o, const kiln_alloc_config *cfg, kiln_error *err,
                             void **inst)
{
    return create(o, cfg, err, inst, true);
}

static void destroy(void *inst)
{
    stack *st = inst;
    if (!st)
        return;
    /* what the user never freed goes back with the stack */
    for (uint32_t i = 0; i < st->map.cap; i++) {
        if (!st->map.key[i] || st->map.key[i] == TOMB || st->map.val[i] == PLANNED)
            continue; /* a planned block is in its arena, which goes with L1 */
        if (st->caching) {
            ka_l1_free(&st->ms->l1, st->map.val[i]);
        } else {
            ka_msb *b = st->map.val[i];
            if (b->mem) {
                ka_l1_free(&st->ms->l1, b->mem);
                b->mem = NULL;
            }
        }
    }
    free(st->map.key);
    free(st->map.val);
    free(st->map.aux);
    ka_rp_destroy(st->rp, NULL);
    ka_ms_destroy(st->ms);
    free(st);
}

static void *l1_alloc(void *inst, size_t size, uint32_t stream)
{
    stack *st = inst;
    lock(&st->mu);
    uint64_t aux;
    void *p = plan_alloc(st, size, stream, &aux);
    if (p) {
        unlock(&st->mu);
        return p;
    }
    ka_l1_block *b = ka_l1_alloc(&st->ms->l1, size);
    if (b && pmap_put(&st->map, b->addr, b, aux)) {
        p = b->addr;
        count_alloc(st, size);
        /* remember the request in the descriptor's spare field: next is NULL while out */
        b->next = (ka_l1_block *)(uintptr_t)size;
    } else if (b) {
        ka_l1_free(&st->ms->l1, b);
    }
    unlock(&st->mu);
    return p;
}

static void l1_free(void *inst, void *ptr, uint32_t stream)
{
    (void)stream;
    stack *st = inst;
    lock(&st->mu);
    uint32_t j = pmap_find(&st->map, ptr);
    if (j != UINT32_MAX && !plan_free(st, j)) {
        ka_l1_block *b = st->map.val[j];
        pmap_del_at(&st->map, j);
        st->allocated -= (size_t)(uintptr_t)b->next;
        b->next = NULL;
        st->frees++;
        ka_l1_free(&st->ms->l1, b);
    }
    unlock(&st->mu);
}

static void *ms_alloc(void *inst, size_t size, uint32_t stream)
{
    stack *st = inst;
    if (stream >= st->ms->streams)
        return NULL;
    lock(&st->mu);
    uint64_t aux;
    void *p = plan_alloc(st, size, stream, &aux);
    if (p) {
        unlock(&st->mu);
        return p;
    }
    ka_msb *b = ka_l2_malloc(&st->ms->l2[stream], size);
    if (b) {
        p = ka_msb_addr(b);
        if (!pmap_put(&st->map, p, b, aux)) {
            ka_msb_free(b, stream);
            p = NULL;
        }
    }
    unlock(&st->mu);
    return p;
}

static void ms_free(void *inst, void *ptr, uint32_t stream)
{
    stack *st = inst;
    if (stream >= st->ms->streams)
        return;
    lock(&st->mu);
    uint32_t j = pmap_find(&st->map, ptr);
    if (j != UINT32_MAX && !plan_free(st, j)) {
        ka_msb *b = st->map.val[j];
        st->ms->st.frees++;
        if (st->ms->host) {
            if (b->refs && --b->refs == 0)
                ka_l2_birth_recycle(b->birth, b);
        } else {
            ka_msb_free(b, stream);
        }
    }
    unlock(&st->mu);
}

static kiln_status ms_access(void *inst, void *ptr, uint32_t src, uint32_t dst, kiln_error *err)
{
    stack *st = inst;
    if (src >= st->ms->streams || dst >= st->ms->streams)
        return kiln_errorf(err, KILN_ERR_INVALID, "access %u -> %u: stream out of range (%u "
                           "streams)", src, dst, st->ms->streams);
    lock(&st->mu);
    uint32_t j = pmap_find(&st->map, ptr);
    if (j != UINT32_MAX && st->rp) {
        uint64_t aux = st->map.aux[j];
        ka_rp_access(st->rp, AUX_STREAM(aux), AUX_IDX(aux), AUX_EPOCH(aux),
                     st->map.val[j] == PLANNED);
    }
    if (j != UINT32_MAX && st->map.val[j] != PLANNED)
        ka_ms_access(st->ms, st->map.val[j], src, dst);
    unlock(&st->mu);
    if (j == UINT32_MAX)
        return kiln_errorf(err, KILN_ERR_INVALID, "access %u -> %u: %p was not allocated by "
                           "this stack", src, dst, ptr);
    return KILN_OK;
}

static kiln_status ms_events(stack *st, bool send, uint32_t stream, const uint32_t *ids,
                             uint32_t n, kiln_error *err)
{
    if (stream >= st->ms->streams)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s events: stream %u out of range (%u "
                           "streams)", send ? "send" : "wait", stream, st->ms->streams);
    lock(&st->mu);
    int rc = send ? ka_ms_send_events(st->ms, stream, ids, n)
                  : ka_ms_wait_events(st->ms, stream, ids, n);
    unlock(&st->mu);
    if (rc == 0)
        return KILN_OK;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= st->ms->ev_count)
            return kiln_errorf(err, KILN_ERR_INVALID, "%s events on stream %u: event %u out of "
                               "range (%u events)", send ? "send" : "wait", stream, ids[i],
                               st->ms->ev_count);
    return kiln_errorf(err, KILN_ERR_INVALID, "%s events on stream %u: an event's %s stream is "
                       "not %u", send ? "send" : "wait", stream, send ? "source" : "destination",
                       stream);
}

static kiln_status ms_send(void *inst, uint32_t stream, const uint32_t *ids, uint32_t n,
                           kiln_error *err)
{
    return ms_events(inst, true, stream, ids, n, err);
}

static kiln_status ms_wait(void *inst, uint32_t stream, const uint32_t *ids, uint32_t n,
                           kiln_error *err)
{
    return ms_events(inst, false, stream, ids, n, err);
}

static void ms_last_wait(void *inst)
{
    stack *st = inst;
    lock(&st->mu);
    ka_ms_last_wait(st->ms);
    plan_end_run(st);
    unlock(&st->mu);
}

static void l1_last_wait(void *inst)
{
    stack *st = inst;
    lock(&st->mu);
    plan_end_run(st);
    unlock(&st->mu);
}

static void stats(void *inst, kiln_alloc_stats *o)
{
    stack *st = inst;
    lock(&st->mu);
    const ka_ms_stats *m = &st->ms->st;
    const ka_l1_stats *l = &st->ms->l1.st;
    o->reserved = l->reserved;
    o->peak_reserved = l->peak_reserved;
    o->cached = st->ms->l1.cache.bytes;
    o->system_allocs = l->system_allocs;
    o->system_frees = l->system_frees;
    o->cache_hits = l->hits;
    if (st->caching) {
        o->allocated = st->allocated;
        o->peak_allocated = st->peak_allocated;
        o->allocs = st->allocs;
        o->frees = st->frees;
    } else {
        o->allocated = m->allocated;
        o->peak_allocated = m->peak_allocated;
        o->allocs = m->allocs;
        o->frees = m->frees;
        o->borrow_hits = m->borrow_hits;
        o->birth_recycles = m->birth_recycles;
        o->borrow_recycles = m->borrow_recycles;
        o->local_recycles = m->local_recycles;
    }
    if (o->struct_size >= offsetof(kiln_alloc_stats, plan_arena) + sizeof(o->plan_arena)) {
        o->steady_peak_reserved = l->steady_peak_reserved;
        o->steady_peak_allocated = st->caching ? st->steady_peak_allocated
                                               : m->steady_peak_allocated;
        if (st->rp) {
            o->plans = st->rp->st.plans;
            o->plan_hits = st->rp->st.hits;
            o->plan_fallbacks = st->rp->st.fallbacks;
            o->plan_arena = st->rp->st.arena;
        }
    }
    unlock(&st->mu);
}

static const kiln_allocator_desc ms_desc = {
    .struct_size = sizeof(kiln_allocator_desc),
    .name = "three_layer",
    .summary = "three layers: L1 caching allocator, stream-aware L2 pools with MIF-tracked "
               "blocks (birth, borrow and local recycle), L3 borrowing; events carry recycle "
               "state (GE RT2)",
    .option_count = sizeof(alloc_options) / sizeof(alloc_options[0]),
    .options = alloc_options,
    .create = ms_create,
    .destroy = destroy,
    .alloc = ms_alloc,
    .free = ms_free,
    .access = ms_access,
    .send_events = ms_send,
    .wait_events = ms_wait,
    .last_wait = ms_last_wait,
    .stats = stats,
};

static const kiln_allocator_desc l1_desc = {
    .struct_size = sizeof(kiln_allocator_desc),
    .name = "caching",
    .summary = "L1 alone: size classes, cached blocks, a release threshold; streams ignored",
    .option_count = sizeof(alloc_options) / sizeof(alloc_options[0]),
    .options = alloc_options,
    .create = l1_create,
    .destroy = destroy,
    .alloc = l1_alloc,
    .free = l1_free,
    .last_wait = l1_last_wait,
    .stats = stats,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_allocator(r, &ms_desc);
    return st ? st : kiln_register_allocator(r, &l1_desc);
}

KILN_PLUGIN_DEFINE("kiln.allocators", "0.1.0", "Apache-2.0",
                   "runtime allocators: three_layer (L1 caching, L2 stream pools, L3 borrow) "
                   "and caching (L1)", init, NULL)
