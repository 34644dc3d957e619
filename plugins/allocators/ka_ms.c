/*
 * ka_ms.c - L2 and L3 of the runtime allocator: MIF bitmaps, multi-stream
 * blocks and their object pool, the borrow allocator, the per-stream L2
 * allocators with GE's three recycle modes, and VersionBlocks
 * (docs/allocators.md, GE_SEMANTICS.md §7.2-7.4).
 *
 * A block's MIF says, per observer stream, which streams still occupy it.
 * Freeing a block on stream S drops S's count; at zero S clears its own bit
 * (local release).  Then, from S's view:
 *   nobody occupies it and S is its birth stream -> birth recycle (S's pool);
 *   nobody occupies it, S is not the birth stream -> borrow recycle (S's
 *     borrow allocator; version++, MIF reset);
 *   someone still does, S just released it -> local recycle (S's list of
 *     version blocks, settled when an event carries it to another stream).
 */
#include "ka.h"

#include <stdlib.h>
#include <string.h>

/* ---- MIF ----------------------------------------------------------------- */

void ka_mif_reinit(ka_mif *m, uint32_t n)
{
    m->n = n;
    memset(m->bits, 0, (size_t)n * sizeof(*m->bits));
}
void ka_mif_set(ka_mif *m, uint32_t obs, uint32_t s) { m->bits[obs] |= 1ull << s; }
void ka_mif_set_all(ka_mif *m, uint32_t s)
{
    for (uint32_t i = 0; i < m->n; i++)
        m->bits[i] |= 1ull << s;
}
void ka_mif_set_maintained_all(ka_mif *m, uint32_t obs)
{
    m->bits[obs] = m->n >= 64 ? ~0ull : (1ull << m->n) - 1;
}
void ka_mif_clear(ka_mif *m, uint32_t obs, uint32_t s) { m->bits[obs] &= ~(1ull << s); }
void ka_mif_merge_cleared_from(ka_mif *m, uint32_t src, uint32_t dst)
{
    m->bits[dst] &= m->bits[src];
}
bool ka_mif_is_set(const ka_mif *m, uint32_t obs, uint32_t s)
{
    return (m->bits[obs] >> s) & 1u;
}
bool ka_mif_is_any_set(const ka_mif *m, uint32_t obs) { return m->bits[obs] != 0; }
uint64_t ka_to_all_bit(uint32_t n, uint32_t s)
{
    uint64_t all = n >= 64 ? ~0ull : (1ull << n) - 1;
    return all & ~(1ull << s);
}

const char *ka_trace_name(ka_trace_kind k)
{
    static const char *const names[KA_TR_KIND_COUNT] = {
        "birth-recycle", "borrow-recycle", "local-recycle", "recycle-recv",
        "migration-recv", "shrink", "wander", "share"};
    return (unsigned)k < KA_TR_KIND_COUNT ? names[k] : "?";
}

void ka_ms_trace(ka_ms *ms, ka_trace_kind k, uint32_t s, void *addr)
{
    if (ms->trace)
        ms->trace(ms->trace_ctx, k, s, addr);
}

/* ---- blocks and the pool ----------------------------------------------------- */

uint32_t ka_msb_birth_stream(const ka_msb *b) { return b->birth ? b->birth->stream : 0; }
void *ka_msb_addr(const ka_msb *b) { return b->mem ? b->mem->addr : NULL; }
void ka_msb_add_count(ka_msb *b, uint32_t s) { b->count[s]++; }
void ka_msb_sub_count(ka_msb *b, uint32_t s)
{
    if (b->count[s])
        b->count[s]--;
}

void ka_msb_new_access(ka_msb *b, uint32_t src, uint32_t dst)
{
    (void)src;
    b->count[dst]++;
    ka_mif_set_all(&b->mif, dst);
}

static void reset_state(ka_msb *b)
{
    ka_mif_reinit(&b->mif, b->mif.n);
    memset(b->count, 0, (size_t)b->mif.n * sizeof(*b->count));
}

bool ka_msb_reinit(ka_msb *b, ka_l2 *birth, ka_l1_block *mem, uint32_t type)
{
    if (b->mem)
        return false;
    b->mem = mem;
    b->birth = birth;
    b->type = type;
    b->refs = 1;
    b->size = mem ? mem->size : 0;
    reset_state(b);
    ka_msb_new_access(b, birth->stream, birth->stream);
    return true;
}

void ka_pool_init(ka_pool *p, uint32_t streams)
{
    memset(p, 0, sizeof(*p));
    p->streams = streams;
}

static bool grow(ka_pool *p)
{
    const uint32_t per = 64;
    size_t one = sizeof(ka_msb) + (size_t)p->streams * (sizeof(uint64_t) + sizeof(uint32_t));
    one = (one + 15) & ~(size_t)15;
    char *slab = calloc(per, one);
    if (!slab || !ka_vec_push(&p->slabs, &slab, sizeof(slab))) {
        free(slab);
        return false;
    }
    for (uint32_t i = per; i-- > 0;) {
        ka_msb *b = (ka_msb *)(slab + (size_t)i * one);
        b->mif.n = p->streams;
        b->mif.bits = (uint64_t *)(b + 1);
        b->count = (uint32_t *)(b->mif.bits + p->streams);
        b->pool_next = p->free;
        p->free = b;
    }
    p->free_count += per;
    p->total += per;
    return true;
}

ka_msb *ka_pool_acquire(ka_pool *p, ka_l2 *birth, ka_l1_block *mem, uint32_t type)
{
    if (!p->free && !grow(p))
        return NULL;
    ka_msb *b = p->free;
    p->free = b->pool_next;
    p->free_count--;
    b->pool_next = NULL;
    b->mem = NULL;
    ka_msb_reinit(b, birth, mem, type);
    return b;
}

void ka_pool_release(ka_pool *p, ka_msb *b)
{
    b->mem = NULL;
    b->version++;
    b->pool_next = p->free;
    p->free = b;
    p->free_count++;
}

void ka_pool_fini(ka_pool *p)
{
    for (uint32_t i = 0; i < p->slabs.n; i++)
        free(((void **)p->slabs.p)[i]);
    ka_vec_free(&p->slabs);
    memset(p, 0, sizeof(*p));
}

/* ---- L3: borrow ---------------------------------------------------------------- */

bool ka_borrow_init(ka_borrow *a, uint32_t streams)
{
    memset(a, 0, sizeof(*a));
    a->streams = streams;
    a->by_birth = calloc(streams, sizeof(*a->by_birth));
    return a->by_birth != NULL;
}

void ka_borrow_fini(ka_borrow *a)
{
    free(a->bucket);
    free(a->by_birth);
    memset(a, 0, sizeof(*a));
}

static uint32_t bucket_lower(const ka_borrow *a, size_t size)
{
    uint32_t lo = 0, hi = a->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a->bucket[mid].size < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Unlink @p b from both lists; an emptied bucket is erased. */
static void unlink_borrow(ka_borrow *a, ka_msb *b)
{
    uint32_t i = bucket_lower(a, b->size);
    if (b->bprev)
        b->bprev->bnext = b->bnext;
    else
        a->bucket[i].head = b->bnext;
    if (b->bnext)
        b->bnext->bprev = b->bprev;
    if (!a->bucket[i].head) {
        memmove(a->bucket + i, a->bucket + i + 1, (size_t)(a->n - i - 1) * sizeof(*a->bucket));
        a->n--;
    }
    uint32_t s = ka_msb_birth_stream(b);
    if (b->sprev)
        b->sprev->snext = b->snext;
    else
        a->by_birth[s] = b->snext;
    if (b->snext)
        b->snext->sprev = b->sprev;
    b->bprev = b->bnext = b->sprev = b->snext = NULL;
    b->in_borrow = false;
    a->bytes -= b->size;
    a->count--;
}

ka_msb *ka_borrow_alloc(ka_borrow *a, size_t size)
{
    uint32_t i = bucket_lower(a, size);
    if (i == a->n)
        return NULL;
    ka_msb *b = a->bucket[i].head;
    unlink_borrow(a, b);
    return b;
}

bool ka_borrow_free(ka_borrow *a, ka_msb *b)
{
    uint32_t i = bucket_lower(a, b->size);
    if (i == a->n || a->bucket[i].size != b->size) {
        if (a->n == a->cap) {
            uint32_t cap = a->cap ? a->cap * 2 : 8;
            void *p = realloc(a->bucket, (size_t)cap * sizeof(*a->bucket));
            if (!p)
                return false;
            a->bucket = p;
            a->cap = cap;
        }
        memmove(a->bucket + i + 1, a->bucket + i, (size_t)(a->n - i) * sizeof(*a->bucket));
        a->bucket[i].size = b->size;
        a->bucket[i].head = NULL;
        a->n++;
    }
    b->bprev = NULL;
    b->bnext = a->bucket[i].head;
    if (b->bnext)
        b->bnext->bprev = b;
    a->bucket[i].head = b;
    uint32_t s = ka_msb_birth_stream(b);
    b->sprev = NULL;
    b->snext = a->by_birth[s];
    if (b->snext)
        b->snext->sprev = b;
    a->by_birth[s] = b;
    b->in_borrow = true;
    a->bytes += b->size;
    a->count++;
    return true;
}

bool ka_borrow_get_and_clear(ka_borrow *a, uint32_t s, ka_vec *out)
{
    if (s >= a->streams)
        return true;
    while (a->by_birth[s]) {
        ka_msb *b = a->by_birth[s];
        unlink_borrow(a, b);
        if (!ka_vec_push(out, &b, sizeof(b)))
            return false;
    }
    return true;
}

/* ---- L2 ------------------------------------------------------------------------ */

/* A block handed to a user is live (KA_LIVE in type) until a birth or borrow
 * recycle: the stack's allocated bytes count it once. */
#define KA_LIVE 0x100u
static void unlive(ka_ms *ms, ka_msb *b)
{
    if (b->type & KA_LIVE) {
        b->type &= ~KA_LIVE;
        ms->st.allocated -= b->size;
    }
}
static void live(ka_ms *ms, ka_msb *b)
{
    b->type |= KA_LIVE;
    ms->st.allocated += b->size;
    if (ms->st.allocated > ms->st.peak_allocated)
        ms->st.peak_allocated = ms->st.allocated;
    if (ms->st.allocated > ms->st.steady_peak_allocated)
        ms->st.steady_peak_allocated = ms->st.allocated;
    ms->st.allocs++;
}

void ka_l2_birth_recycle(ka_l2 *a, ka_msb *b)
{
    ka_ms *ms = a->ms;
    void *addr = ka_msb_addr(b);
    ka_ms_trace(ms, KA_TR_BIRTH, a->stream, addr);
    ms->st.birth_recycles++;
    unlive(ms, b);
    if (b->mem && !ka_bins_put(&a->pool, b->mem))
        ka_l1_free(&ms->l1, b->mem);
    ka_pool_release(&ms->pool, b);
}

static void borrow_recycle(ka_ms *ms, ka_msb *b, uint32_t s)
{
    ka_ms_trace(ms, KA_TR_BORROW, s, ka_msb_addr(b));
    unlive(ms, b);
    ms->st.borrow_recycles++;
    b->version++;
    reset_state(b);
    if (!ka_borrow_free(&ms->l2[s].borrow, b))
        ka_l2_birth_recycle(b->birth, b); /* OOM: send it home at once */
}

void ka_msb_free(ka_msb *b, uint32_t s)
{
    if (!b->mem || b->in_borrow)
        return; /* already recycled: a second free is ignored */
    ka_ms *ms = b->birth->ms;
    bool released = false;
    if (b->count[s] > 0 && --b->count[s] == 0) {
        ka_mif_clear(&b->mif, s, s);
        released = true;
    }
    if (!ka_mif_is_any_set(&b->mif, s)) {
        if (ka_msb_birth_stream(b) == s)
            ka_l2_birth_recycle(b->birth, b);
        else
            borrow_recycle(ms, b, s);
    } else if (released) {
        ka_version_block e = {b->version, b, 0};
        ka_ms_trace(ms, KA_TR_LOCAL, s, ka_msb_addr(b));
        ms->st.local_recycles++;
        if (!ka_vec_push(&ms->l2[s].local, &e, sizeof(e))) {
            /* OOM: the entry is lost; LastWaitEvents' sweep cannot see it, so
             * keep the block out of reuse for good rather than risk it */
        }
    }
}

void ka_msb_sync_local(ka_msb *b, uint32_t src, uint32_t dst)
{
    ka_mif_merge_cleared_from(&b->mif, src, dst);
    if (!ka_mif_is_any_set(&b->mif, dst))
        ka_msb_free(b, dst);
}

void ka_msb_sync_all(ka_msb *b, uint32_t dst)
{
    for (uint32_t s = 0; s < b->mif.n; s++)
        if (s != dst)
            ka_mif_merge_cleared_from(&b->mif, s, dst);
    if (!ka_mif_is_any_set(&b->mif, dst))
        ka_msb_free(b, dst);
}

void ka_l2_recycle_free_mem(ka_l2 *a)
{
    ka_l1 *l1 = &a->ms->l1;
    ka_l1_block *blk;
    while ((blk = ka_bins_take_fit(&a->pool, 0, SIZE_MAX)))
        ka_l1_free(l1, blk);
}

ka_msb *ka_l2_malloc(ka_l2 *a, size_t size)
{
    ka_ms *ms = a->ms;
    size_t cls = ka_size_class(size);
    if (!cls)
        return NULL;
    ka_l1_block *mem = ka_bins_take_fit(&a->pool, cls, cls + cls / 32);
    if (!mem)
        mem = ka_l1_alloc_ex(&ms->l1, size, false);
    if (!mem && a->pool.bytes) {
        /* what this stream keeps cannot serve the request: hand it to L1, where
         * it merges with its neighbours, rather than grow the heap beside it */
        ka_l2_recycle_free_mem(a);
        mem = ka_l1_alloc_ex(&ms->l1, size, false);
    }
    for (uint32_t i = 0; !mem && i < ms->streams; i++) {
        ka_l2 *o = &ms->l2[i];
        if (!o->pool.bytes)
            continue;
        ka_ms_trace(ms, KA_TR_SHRINK, o->stream, NULL);
        ka_l2_recycle_free_mem(o);
        mem = ka_l1_alloc_ex(&ms->l1, size, false);
    }
    if (!mem)
        mem = ka_l1_alloc(&ms->l1, size);
    ka_msb *b = NULL;
    if (mem) {
        if (!(b = ka_pool_acquire(&ms->pool, a, mem, 0))) {
            ka_l1_free(&ms->l1, mem);
            return NULL;
        }
        b->size = size;
        live(ms, b);
        return b;
    }
    b = ka_borrow_alloc(&a->borrow, size);
    if (b) {
        ms->st.borrow_hits++;
        ka_msb_new_access(b, a->stream, a->stream);
        live(ms, b);
    }
    return b;
}

bool ka_version_blocks_find(ka_l2 *l2, uint32_t dst, bool for_all, ka_vec *out)
{
    ka_version_block *e = l2->local.p;
    uint64_t all = ka_to_all_bit(l2->ms->streams, l2->stream);
    uint64_t bit = 1ull << dst;
    uint32_t w = 0;
    bool ok = true;
    for (uint32_t i = 0; i < l2->local.n; i++) {
        ka_version_block v = e[i];
        if (v.version != v.block->version || (v.sent & all) == all)
            continue; /* stale, or every stream had it: drop */
        if (for_all || !(v.sent & bit)) {
            v.sent |= bit;
            if (ok && !ka_vec_push(out, &v, sizeof(v))) {
                ok = false;
                v.sent &= ~bit;
            }
        }
        e[w++] = v;
    }
    l2->local.n = w;
    return ok;
}

bool ka_l2_get_clear_local(ka_l2 *a, uint32_t dst, ka_vec *out)
{
    return ka_version_blocks_find(a, dst, false, out);
}

void ka_ms_access(ka_ms *ms, ka_msb *b, uint32_t src, uint32_t dst)
{
    if (ms->host) {
        b->refs++;
        ka_ms_trace(ms, KA_TR_SHARE, dst, ka_msb_addr(b));
    } else {
        ka_ms_trace(ms, KA_TR_WANDER, dst, ka_msb_addr(b));
        ka_msb_new_access(b, src, dst);
    }
}
