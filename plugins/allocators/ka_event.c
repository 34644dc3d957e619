/*
 * ka_event.c - the stack (ka_ms: L1, one L2 per stream, the block pool) and
 * the recycle state GE's event kernels carry (event.cc): CreateGertEvents,
 * SendEvents, WaitEvents, LastWaitEvents (docs/allocators.md#events).
 *
 * A real runtime records and waits its own events; these calls move the
 * allocator's state along with them: the sender hands each event the blocks
 * its stream released locally (for the event's destination) and the blocks
 * it borrowed from the destination; the waiter settles them.  Once the
 * waiter has waited, everything the sender did before the record is ordered
 * before what the waiter does next, so a block the sender released is free
 * in the waiter's view too.
 */
#include "ka.h"

#include <stdlib.h>
#include <string.h>

ka_ms *ka_ms_create(uint32_t streams, bool host, size_t capacity, size_t release_threshold)
{
    if (streams == 0 || streams > KA_MAX_STREAMS)
        return NULL;
    ka_ms *ms = calloc(1, sizeof(*ms));
    if (!ms)
        return NULL;
    ms->streams = streams;
    ms->host = host;
    ka_l1_init(&ms->l1, capacity, release_threshold);
    ka_pool_init(&ms->pool, streams);
    ms->l2 = calloc(streams, sizeof(*ms->l2));
    if (!ms->l2) {
        free(ms);
        return NULL;
    }
    for (uint32_t s = 0; s < streams; s++) {
        ms->l2[s].ms = ms;
        ms->l2[s].stream = s;
        if (!ka_borrow_init(&ms->l2[s].borrow, streams)) {
            ka_ms_destroy(ms);
            return NULL;
        }
    }
    return ms;
}

static void clear_events(ka_ms *ms)
{
    for (uint32_t i = 0; i < ms->ev_count; i++) {
        ka_vec_free(&ms->ev[i].free_by_src);
        ka_vec_free(&ms->ev[i].return_birth);
    }
    free(ms->ev);
    ms->ev = NULL;
    ms->ev_count = 0;
}

void ka_ms_destroy(ka_ms *ms)
{
    if (!ms)
        return;
    clear_events(ms);
    for (uint32_t s = 0; s < ms->streams && ms->l2; s++) {
        ka_l2 *a = &ms->l2[s];
        ka_l2_recycle_free_mem(a);
        ka_bins_free(&a->pool);
        ka_borrow_fini(&a->borrow);
        ka_vec_free(&a->local);
    }
    free(ms->l2);
    ka_pool_fini(&ms->pool);
    ka_l1_fini(&ms->l1);
    free(ms);
}

void ka_ms_fail_l1(ka_ms *ms, bool fail) { ms->l1.refuse = fail; }

bool ka_ms_set_events(ka_ms *ms, const uint32_t *src_dst, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (src_dst[2 * i] >= ms->streams || src_dst[2 * i + 1] >= ms->streams)
            return false;
    clear_events(ms);
    if (count && !(ms->ev = calloc(count, sizeof(*ms->ev))))
        return false;
    for (uint32_t i = 0; i < count; i++) {
        ms->ev[i].id = i;
        ms->ev[i].src = src_dst[2 * i];
        ms->ev[i].dst = src_dst[2 * i + 1];
    }
    ms->ev_count = count;
    return true;
}

int ka_ms_send_events(ka_ms *ms, uint32_t s, const uint32_t *ids, uint32_t n)
{
    if (n && !ids)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= ms->ev_count || ms->ev[ids[i]].src != s)
            return -1;
    ka_l2 *a = &ms->l2[s];
    for (uint32_t i = 0; i < n; i++) {
        ka_event *e = &ms->ev[ids[i]];
        if (!ka_version_blocks_find(a, e->dst, false, &e->free_by_src) ||
            !ka_borrow_get_and_clear(&a->borrow, e->dst, &e->return_birth))
            return -1;
    }
    return 0;
}

int ka_ms_wait_events(ka_ms *ms, uint32_t s, const uint32_t *ids, uint32_t n)
{
    if (n && !ids)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= ms->ev_count)
            return -1;
    (void)s; /* the event's own destination is settled (GE does not check the waiter) */
    for (uint32_t i = 0; i < n; i++) {
        ka_event *e = &ms->ev[ids[i]];
        ka_version_block *v = e->free_by_src.p;
        for (uint32_t k = 0; k < e->free_by_src.n; k++) {
            if (v[k].version != v[k].block->version)
                continue; /* stale: a previous waiter already recycled it */
            ka_ms_trace(ms, KA_TR_RECYCLE_RECV, e->dst, ka_msb_addr(v[k].block));
            ka_msb_sync_local(v[k].block, e->src, e->dst);
        }
        ka_msb **b = e->return_birth.p;
        for (uint32_t k = 0; k < e->return_birth.n; k++) {
            ka_ms_trace(ms, KA_TR_MIGRATION_RECV, e->dst, ka_msb_addr(b[k]));
            ka_l2_birth_recycle(b[k]->birth, b[k]);
        }
        e->free_by_src.n = 0;
        e->return_birth.n = 0;
    }
    return 0;
}

void ka_ms_last_wait(ka_ms *ms)
{
    ka_vec tmp = {0};
    /* blocks still travelling on events are settled as if waited */
    for (uint32_t i = 0; i < ms->ev_count; i++) {
        uint32_t id = i;
        ka_ms_wait_events(ms, ms->ev[i].dst, &id, 1);
    }
    for (uint32_t s = 0; s < ms->streams; s++) {
        tmp.n = 0;
        ka_version_blocks_find(&ms->l2[s], s, true, &tmp);
        ka_version_block *v = tmp.p;
        for (uint32_t k = 0; k < tmp.n; k++)
            if (v[k].version == v[k].block->version)
                ka_msb_sync_all(v[k].block, ka_msb_birth_stream(v[k].block));
        ms->l2[s].local.n = 0;
    }
    for (uint32_t s = 0; s < ms->streams; s++)
        for (uint32_t d = 0; d < ms->streams; d++) {
            tmp.n = 0;
            ka_borrow_get_and_clear(&ms->l2[s].borrow, d, &tmp);
            ka_msb **b = tmp.p;
            for (uint32_t k = 0; k < tmp.n; k++)
                ka_l2_birth_recycle(b[k]->birth, b[k]);
        }
    for (uint32_t s = 0; s < ms->streams; s++)
        ka_l2_recycle_free_mem(&ms->l2[s]);
    ka_vec_free(&tmp);
}
