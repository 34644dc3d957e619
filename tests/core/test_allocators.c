/*
 * test_allocators.c - the runtime allocator's layers (plugins/allocators/ka*.c,
 * linked directly) on GE's RT scenarios (GE_SEMANTICS_BUILD.md §6.2 and
 * GE_SEMANTICS.md §9.10): MIF (RT1-RT4, B5), multi-stream blocks (RT5), the
 * borrow allocator (RT7, the bucket-erase fix), the block pool (RT8), L2
 * reuse and the three recycle modes (RT10-RT14), L1 exhaustion falling back
 * to borrowing (RT17), VersionBlocks (RT19), SendEvents / WaitEvents /
 * CreateGertEvents / LastWaitEvents (RT20-RT25), the caching L1 (CMA), and
 * AccessMemCrossStream (share vs wander); the learned plans (ka_rp: the
 * offline placement, adoption, replay, every fallback, re-learning).
 */
#include "kiln_test.h"
#include "ka.h"
#include <string.h>

/* ---- recycle trace ------------------------------------------------------------ */
typedef struct rec {
    ka_trace_kind k;
    uint32_t s;
    void *addr;
} rec;
static rec trace[256];
static uint32_t ntrace;

static void on_trace(void *ctx, ka_trace_kind k, uint32_t s, void *addr)
{
    (void)ctx;
    if (ntrace < 256)
        trace[ntrace++] = (rec){k, s, addr};
}

static uint32_t count_trace(ka_trace_kind k, uint32_t s, void *addr)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < ntrace; i++)
        if (trace[i].k == k && trace[i].s == s && (!addr || trace[i].addr == addr))
            n++;
    return n;
}

static ka_ms *holder(uint32_t n)
{
    ka_ms *ms = ka_ms_create(n, false, 0, SIZE_MAX);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ms);
    ms->trace = on_trace;
    ntrace = 0;
    return ms;
}

static ka_msb *alloc_block(ka_ms *ms, uint32_t s, size_t size)
{
    ka_msb *b = ka_l2_malloc(&ms->l2[s], size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    return b;
}

/* ---- MIF ------------------------------------------------------------------------ */

static void test_mif(void)
{
    uint64_t bits[8];
    ka_mif m = {0, bits};
    /* RT1 */
    ka_mif_reinit(&m, 8);
    CU_ASSERT_FALSE(ka_mif_is_set(&m, 0, 1));
    ka_mif_set(&m, 0, 1);
    CU_ASSERT_TRUE(ka_mif_is_set(&m, 0, 1));
    ka_mif_clear(&m, 0, 1);
    CU_ASSERT_FALSE(ka_mif_is_set(&m, 0, 1));
    /* RT2 */
    ka_mif_reinit(&m, 8);
    ka_mif_set_all(&m, 0);
    for (uint32_t i = 0; i < 8; i++)
        CU_ASSERT_TRUE(ka_mif_is_set(&m, i, 0));
    /* RT4: dst &= src keeps an empty dst empty */
    ka_mif_reinit(&m, 8);
    ka_mif_set_maintained_all(&m, 0);
    for (uint32_t i = 0; i < 8; i++)
        CU_ASSERT_TRUE(ka_mif_is_set(&m, 0, i));
    CU_ASSERT_FALSE(ka_mif_is_any_set(&m, 1));
    ka_mif_merge_cleared_from(&m, 0, 1);
    for (uint32_t i = 0; i < 8; i++)
        CU_ASSERT_FALSE(ka_mif_is_set(&m, 1, i));
    /* ... and clears what src no longer has */
    ka_mif_set(&m, 2, 3);
    ka_mif_set(&m, 2, 4);
    ka_mif_set(&m, 5, 4);
    ka_mif_merge_cleared_from(&m, 5, 2);
    CU_ASSERT_FALSE(ka_mif_is_set(&m, 2, 3));
    CU_ASSERT_TRUE(ka_mif_is_set(&m, 2, 4));
    /* B5: ToAllBit */
    CU_ASSERT_EQUAL(ka_to_all_bit(4, 0), 0xEu);
    CU_ASSERT_EQUAL(ka_to_all_bit(4, 1), 0xDu);
    CU_ASSERT_EQUAL(ka_to_all_bit(64, 63), ~0ull >> 1);
}

/* RT5: ReInit on allocator 0 */
static void test_msb_init(void)
{
    ka_ms *ms = holder(2);
    ka_l1_block *blk = ka_l1_alloc(&ms->l1, 100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(blk);
    ka_msb *b = ka_pool_acquire(&ms->pool, &ms->l2[0], blk, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(b), blk->addr);
    CU_ASSERT_EQUAL(b->size, blk->size);
    CU_ASSERT_EQUAL(ka_msb_birth_stream(b), 0);
    CU_ASSERT_EQUAL(b->count[0], 1);
    CU_ASSERT_EQUAL(b->count[1], 0);
    /* ReInit fails while a block is attached */
    CU_ASSERT_FALSE(ka_msb_reinit(b, &ms->l2[1], blk, 0));
    ka_msb_add_count(b, 1);
    CU_ASSERT_EQUAL(b->count[1], 1);
    ka_msb_sub_count(b, 1);
    CU_ASSERT_EQUAL(b->count[1], 0);
    ka_l2_birth_recycle(&ms->l2[0], b);
    CU_ASSERT_PTR_NULL(b->mem); /* after a birth recycle the mem block is null */
    ka_ms_destroy(ms);
}

/* RT7 and the bucket-erase fix */
static void test_borrow(void)
{
    ka_ms *ms = holder(1);
    ka_msb *b = alloc_block(ms, 0, 100);
    void *addr = ka_msb_addr(b);
    ka_borrow *bo = &ms->l2[0].borrow;
    CU_ASSERT_TRUE(ka_borrow_free(bo, b));
    ka_msb *got = ka_borrow_alloc(bo, 100);
    CU_ASSERT_PTR_EQUAL(got, b);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(got), addr);
    /* an empty borrow allocator */
    CU_ASSERT_PTR_NULL(ka_borrow_alloc(bo, 1024));
    /* a bigger bucket serves a smaller request, and is erased once empty */
    CU_ASSERT_TRUE(ka_borrow_free(bo, b));
    CU_ASSERT_PTR_EQUAL(ka_borrow_alloc(bo, 50), b);
    CU_ASSERT_EQUAL(bo->n, 0);
    CU_ASSERT_PTR_NULL(ka_borrow_alloc(bo, 50));
    /* GetAndClearBorrowBlocks: by birth stream; an unknown stream gives nothing */
    CU_ASSERT_TRUE(ka_borrow_free(bo, b));
    ka_vec out = {0};
    CU_ASSERT_TRUE(ka_borrow_get_and_clear(bo, 7, &out));
    CU_ASSERT_EQUAL(out.n, 0);
    CU_ASSERT_TRUE(ka_borrow_get_and_clear(bo, 0, &out));
    CU_ASSERT_EQUAL(out.n, 1);
    CU_ASSERT_EQUAL(bo->count, 0);
    CU_ASSERT_PTR_NULL(ka_borrow_alloc(bo, 1));
    ka_vec_free(&out);
    ka_l2_birth_recycle(&ms->l2[0], b);
    ka_ms_destroy(ms);
}

/* RT8: Release then Acquire hands the same object back */
static void test_pool(void)
{
    ka_ms *ms = holder(1);
    ka_l1_block *m1 = ka_l1_alloc(&ms->l1, 64), *m2 = ka_l1_alloc(&ms->l1, 64);
    ka_msb *x = ka_pool_acquire(&ms->pool, &ms->l2[0], m1, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    uint64_t v = x->version;
    x->mem = NULL;
    ka_pool_release(&ms->pool, x);
    CU_ASSERT_TRUE(x->version > v); /* stale entries can tell */
    ka_msb *y = ka_pool_acquire(&ms->pool, &ms->l2[0], m2, 0);
    CU_ASSERT_PTR_EQUAL(y, x);
    CU_ASSERT_PTR_EQUAL(y->mem, m2);
    CU_ASSERT_EQUAL(y->count[0], 1);
    ka_l1_free(&ms->l1, m1);
    ka_l2_birth_recycle(&ms->l2[0], y);
    ka_ms_destroy(ms);
}

/* RT10: free then malloc the same size reuses the block object */
static void test_l2_reuse(void)
{
    ka_ms *ms = holder(1);
    ka_msb *b1 = alloc_block(ms, 0, 4849664);
    ka_msb *b2 = alloc_block(ms, 0, 4849664);
    void *a1 = ka_msb_addr(b1);
    CU_ASSERT_PTR_NOT_EQUAL(b1, b2);
    ka_msb_free(b1, 0);
    ka_msb *b3 = alloc_block(ms, 0, 4849664);
    CU_ASSERT_PTR_EQUAL(b3, b1);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(b3), a1);
    CU_ASSERT_EQUAL(ms->l1.st.system_allocs, 2);
    ka_msb_free(b2, 0);
    ka_msb_free(b3, 0);
    ka_ms_destroy(ms);
}

/* RT11, RT12, RT14: local, borrow and birth recycle */
static void test_recycle_modes(void)
{
    ka_ms *ms = holder(2);
    ka_msb *b = alloc_block(ms, 0, 1024);
    void *addr = ka_msb_addr(b);
    ka_msb_new_access(b, 0, 1);
    ka_msb_free(b, 0);
    CU_ASSERT_EQUAL(ka_msb_birth_stream(b), 0);
    CU_ASSERT_EQUAL(b->count[0], 0);
    CU_ASSERT_EQUAL(b->count[1], 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_LOCAL, 0, addr), 1);
    ka_ms_destroy(ms);

    /* RT12: borrow recycle at stream 1 during the sync */
    ms = holder(2);
    b = alloc_block(ms, 0, 1024);
    addr = ka_msb_addr(b);
    ka_msb_new_access(b, 0, 1);
    ka_msb_free(b, 0);
    ka_msb_free(b, 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_BORROW, 1, addr), 0);
    ka_msb_sync_local(b, 0, 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_BORROW, 1, addr), 1);
    CU_ASSERT_TRUE(b->in_borrow);
    CU_ASSERT_EQUAL(ms->l2[1].borrow.count, 1);
    ka_ms_last_wait(ms); /* sends it home */
    CU_ASSERT_PTR_NULL(b->mem);
    CU_ASSERT_EQUAL(ms->st.allocated, 0);
    ka_ms_destroy(ms);

    /* RT14: birth recycle at stream 0 during the sync */
    ms = holder(2);
    b = alloc_block(ms, 0, 1024);
    addr = ka_msb_addr(b);
    ka_msb_new_access(b, 0, 1);
    ka_msb_free(b, 1);
    ka_msb_free(b, 0);
    CU_ASSERT_EQUAL(count_trace(KA_TR_BIRTH, 0, addr), 0);
    ka_msb_sync_local(b, 1, 0);
    CU_ASSERT_EQUAL(count_trace(KA_TR_BIRTH, 0, addr), 1);
    CU_ASSERT_PTR_NULL(b->mem);
    /* the memory is in stream 0's pool: the next malloc there gets it */
    ka_msb *c = alloc_block(ms, 0, 1024);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(c), addr);
    ka_msb_free(c, 0);
    ka_ms_destroy(ms);
}

/* RT17: own malloc fails, borrowing succeeds */
static void test_borrow_when_l1_fails(void)
{
    ka_ms *ms = holder(2);
    ka_msb *b0 = ka_l2_malloc(&ms->l2[0], 4849664);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b0);
    void *addr = ka_msb_addr(b0);
    ka_msb_new_access(b0, 0, 1);
    CU_ASSERT_EQUAL(b0->count[1], 1);
    ka_msb_free(b0, 0); /* local recycle, block kept */
    CU_ASSERT_EQUAL(b0->count[0], 0);
    CU_ASSERT_PTR_NOT_NULL(b0->mem);
    ka_vec lst = {0};
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[0], 1, &lst));
    CU_ASSERT_EQUAL_FATAL(lst.n, 1);
    ka_version_block *v = lst.p;
    ka_msb_sync_local(v[0].block, 0, 1);
    ka_msb_free(b0, 1); /* borrow recycle into a1 */
    CU_ASSERT_EQUAL(count_trace(KA_TR_BORROW, 1, addr), 1);
    ka_ms_fail_l1(ms, true);
    ka_msb *b1 = ka_l2_malloc(&ms->l2[1], 4849664);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b1);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(b1), addr);
    CU_ASSERT_EQUAL(ms->st.borrow_hits, 1);
    CU_ASSERT_EQUAL(b1->count[1], 1);
    ka_msb_free(b1, 1);
    ka_vec got = {0};
    CU_ASSERT_TRUE(ka_borrow_get_and_clear(&ms->l2[1].borrow, 0, &got));
    CU_ASSERT_EQUAL_FATAL(got.n, 1);
    CU_ASSERT_PTR_EQUAL(((ka_msb **)got.p)[0], b0);
    ka_l2_birth_recycle(&ms->l2[0], ((ka_msb **)got.p)[0]);
    CU_ASSERT_PTR_NULL(b0->mem);
    /* L1 cannot grow, but stream 0's pool shrinks into it: its chunk serves */
    ntrace = 0;
    ka_msb *b2 = ka_l2_malloc(&ms->l2[1], 1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 0, NULL), 1);
    CU_ASSERT_PTR_EQUAL(ka_msb_addr(b2), addr);
    /* nothing left anywhere: malloc fails cleanly */
    CU_ASSERT_PTR_NULL(ka_l2_malloc(&ms->l2[1], 8 << 20));
    ka_msb_free(b2, 1);
    ka_ms_fail_l1(ms, false);
    ka_vec_free(&lst);
    ka_vec_free(&got);
    ka_ms_destroy(ms);
}

/* L1 exhausted: other streams' pools are shrunk into L1 one at a time */
static void test_shrink_pools(void)
{
    ka_ms *ms = ka_ms_create(3, false, 3 * 65536, SIZE_MAX);
    ms->trace = on_trace;
    ntrace = 0;
    ka_msb *a = alloc_block(ms, 1, 65536), *b = alloc_block(ms, 2, 65536);
    ka_msb_free(a, 1);
    ka_msb_free(b, 2); /* both pooled at their birth streams */
    ka_msb *c = alloc_block(ms, 0, 65536);
    ka_msb *d = ka_l2_malloc(&ms->l2[0], 3 * 65536); /* 64 KiB live: 3 x 64 KiB cannot fit */
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 1, NULL), 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 2, NULL), 1);
    ka_msb_free(c, 0);
    ka_ms_destroy(ms);

    /* the first shrink makes room: the second pool is left alone */
    ms = ka_ms_create(3, false, 3 * 65536, SIZE_MAX);
    ms->trace = on_trace;
    ntrace = 0;
    a = alloc_block(ms, 1, 2 * 65536);
    b = alloc_block(ms, 2, 65536);
    ka_msb_free(a, 1);
    ka_msb_free(b, 2);
    d = ka_l2_malloc(&ms->l2[0], 2 * 65536);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 1, NULL), 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 2, NULL), 0);
    ka_msb_free(d, 0);
    ka_ms_destroy(ms);

    /* room only once both pools are back */
    ms = ka_ms_create(3, false, 2 * 65536, SIZE_MAX);
    ms->trace = on_trace;
    ntrace = 0;
    a = alloc_block(ms, 1, 65536);
    b = alloc_block(ms, 2, 65536);
    ka_msb_free(a, 1);
    ka_msb_free(b, 2);
    d = ka_l2_malloc(&ms->l2[0], 2 * 65536);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 1, NULL), 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHRINK, 2, NULL), 1);
    CU_ASSERT_EQUAL(ms->l1.st.reserved, 2 * 65536);
    ka_msb_free(d, 0);
    ka_ms_destroy(ms);
}

/* RT19: the "Fake1" fixture, 4 streams, blocks of 1024 B */
static ka_ms *fake1(ka_msb *blk[4])
{
    ka_ms *ms = holder(4);
    blk[0] = alloc_block(ms, 0, 1024);
    ka_msb_new_access(blk[0], 0, 1);
    ka_msb_free(blk[0], 1);
    blk[1] = alloc_block(ms, 0, 1024);
    ka_msb_new_access(blk[1], 0, 1);
    ka_msb_free(blk[1], 0);
    ka_msb_free(blk[1], 1);
    blk[2] = alloc_block(ms, 1, 1024);
    ka_msb_new_access(blk[2], 1, 0);
    ka_msb_new_access(blk[2], 1, 2);
    ka_msb_free(blk[2], 1);
    ka_msb_free(blk[2], 2);
    blk[3] = alloc_block(ms, 1, 1024);
    ka_msb_new_access(blk[3], 1, 0);
    ka_msb_new_access(blk[3], 1, 2);
    ka_msb_free(blk[3], 0);
    ka_msb_free(blk[3], 2);
    return ms;
}

static bool has(const ka_vec *v, const ka_msb *b)
{
    for (uint32_t i = 0; i < v->n; i++)
        if (((ka_version_block *)v->p)[i].block == b)
            return true;
    return false;
}

static void test_version_blocks(void)
{
    ka_msb *blk[4];
    ka_ms *ms = fake1(blk);
    ka_vec v = {0};
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[1], 0, &v));
    CU_ASSERT_EQUAL(v.n, 3);
    CU_ASSERT(has(&v, blk[0]) && has(&v, blk[1]) && has(&v, blk[2]) && !has(&v, blk[3]));
    v.n = 0;
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[1], 0, &v));
    CU_ASSERT_EQUAL(v.n, 0);
    ka_vec_free(&v);
    ka_ms_last_wait(ms);
    ka_ms_destroy(ms);

    ms = fake1(blk);
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[1], 0, &v));
    v.n = 0;
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[1], 3, &v));
    CU_ASSERT_EQUAL(v.n, 3);
    CU_ASSERT(has(&v, blk[0]) && has(&v, blk[1]) && has(&v, blk[2]));
    /* sent to 0, 3 and now 2: every stream but the source had them -> dropped */
    v.n = 0;
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[1], 2, &v));
    CU_ASSERT_EQUAL(v.n, 3);
    CU_ASSERT_TRUE(ka_version_blocks_find(&ms->l2[1], 2, true, &v));
    CU_ASSERT_EQUAL(ms->l2[1].local.n, 0);
    /* FindNextForAll yields entries a destination already had */
    ka_msb *x = alloc_block(ms, 3, 1024);
    ka_msb_new_access(x, 3, 0);
    ka_msb_free(x, 3);
    v.n = 0;
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[3], 0, &v));
    CU_ASSERT_EQUAL(v.n, 1);
    v.n = 0;
    CU_ASSERT_TRUE(ka_version_blocks_find(&ms->l2[3], 0, true, &v));
    CU_ASSERT_EQUAL(v.n, 1);
    /* a stale entry (the block moved on) is skipped and dropped */
    x->version++;
    v.n = 0;
    CU_ASSERT_TRUE(ka_version_blocks_find(&ms->l2[3], 1, false, &v));
    CU_ASSERT_EQUAL(v.n, 0);
    CU_ASSERT_EQUAL(ms->l2[3].local.n, 0);
    x->version--;
    ka_msb_free(x, 0);
    ka_vec_free(&v);
    ka_ms_last_wait(ms);
    ka_ms_destroy(ms);
}

/* RT20 / RT21 fixture: 4 streams, 2 local-recycled and 2 borrow-recycled blocks at 0 */
static ka_ms *event_fixture(ka_msb *loc[2], ka_msb *bor[2])
{
    ka_ms *ms = holder(4);
    static const uint32_t ev[] = {0, 1, 0, 2, 0, 3};
    CU_ASSERT_TRUE_FATAL(ka_ms_set_events(ms, ev, 3));
    for (int i = 0; i < 2; i++) {
        loc[i] = alloc_block(ms, 0, 1024);
        ka_msb_new_access(loc[i], 0, 1);
        ka_msb_free(loc[i], 0);
        bor[i] = alloc_block(ms, 1, 2048);
        ka_msb_new_access(bor[i], 1, 0);
        ka_msb_free(bor[i], 1);
        ka_msb_sync_local(bor[i], 1, 0);
        ka_msb_free(bor[i], 0);
        CU_ASSERT_TRUE(bor[i]->in_borrow);
    }
    return ms;
}

static bool carries(const ka_event *e, const ka_msb *b, uint64_t version)
{
    for (uint32_t i = 0; i < e->free_by_src.n; i++) {
        const ka_version_block *v = &((ka_version_block *)e->free_by_src.p)[i];
        if (v->block == b && v->version == version)
            return true;
    }
    return false;
}

static bool returns(const ka_event *e, const ka_msb *b)
{
    for (uint32_t i = 0; i < e->return_birth.n; i++)
        if (((ka_msb **)e->return_birth.p)[i] == b)
            return true;
    return false;
}

static void test_send_events(void)
{
    ka_msb *loc[2], *bor[2];
    ka_ms *ms = event_fixture(loc, bor);
    const uint32_t ids[] = {0, 2};
    CU_ASSERT_EQUAL(ka_ms_send_events(ms, 0, ids, 2), 0);
    ka_event *e0 = &ms->ev[0], *e2 = &ms->ev[2];
    CU_ASSERT_EQUAL(e0->free_by_src.n, 2);
    CU_ASSERT_EQUAL(e2->free_by_src.n, 2);
    CU_ASSERT(carries(e0, loc[0], 0) && carries(e0, loc[1], 0));
    CU_ASSERT(carries(e2, loc[0], 0) && carries(e2, loc[1], 0));
    CU_ASSERT_EQUAL(e0->return_birth.n, 2);
    CU_ASSERT(returns(e0, bor[0]) && returns(e0, bor[1]));
    CU_ASSERT_EQUAL(e2->return_birth.n, 0);
    ka_vec v = {0};
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[0], 1, &v));
    CU_ASSERT_EQUAL(v.n, 0); /* local-recycle list for dst 1 empty */
    CU_ASSERT_TRUE(ka_l2_get_clear_local(&ms->l2[0], 2, &v));
    CU_ASSERT_EQUAL(v.n, 2); /* for dst 2 not */
    CU_ASSERT_PTR_NULL(ms->l2[0].borrow.by_birth[1]);
    ka_vec_free(&v);
    /* errors: an id out of range, a NULL list, an event of another source */
    CU_ASSERT_EQUAL(ka_ms_send_events(ms, 0, (const uint32_t[]){3}, 1), -1);
    CU_ASSERT_EQUAL(ka_ms_send_events(ms, 0, NULL, 1), -1);
    CU_ASSERT_EQUAL(ka_ms_send_events(ms, 1, (const uint32_t[]){0}, 1), -1);
    CU_ASSERT_EQUAL(ka_ms_wait_events(ms, 1, (const uint32_t[]){9}, 1), -1);
    CU_ASSERT_EQUAL(ka_ms_wait_events(ms, 1, NULL, 1), -1);
    ka_msb_free(loc[0], 1); /* stream 1 is done with the local blocks too */
    ka_msb_free(loc[1], 1);
    ka_ms_last_wait(ms);
    CU_ASSERT_EQUAL(ms->st.allocated, 0);
    ka_ms_destroy(ms);
}

static void test_wait_events(void)
{
    ka_msb *loc[2], *bor[2];
    ka_ms *ms = event_fixture(loc, bor);
    CU_ASSERT_EQUAL(ka_ms_send_events(ms, 0, (const uint32_t[]){0}, 1), 0);
    /* stream 1 still uses the local blocks itself: free them there first */
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_TRUE(ka_mif_is_set(&loc[i]->mif, 1, 0)); /* 0 occupies, in 1's view */
        ka_msb_free(loc[i], 1);
    }
    ntrace = 0;
    CU_ASSERT_EQUAL(ka_ms_wait_events(ms, 1, (const uint32_t[]){0, 2}, 2), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_FALSE(ka_mif_is_set(&loc[i]->mif, 1, 0));
        CU_ASSERT_EQUAL(count_trace(KA_TR_RECYCLE_RECV, 1, ka_msb_addr(loc[i])), 1);
    }
    CU_ASSERT_EQUAL(count_trace(KA_TR_RECYCLE_RECV, 1, NULL), 2);
    CU_ASSERT_EQUAL(count_trace(KA_TR_MIGRATION_RECV, 1, NULL), 2);
    CU_ASSERT_EQUAL(ms->ev[0].free_by_src.n, 0);
    CU_ASSERT_EQUAL(ms->ev[0].return_birth.n, 0);
    /* the borrowed blocks are home (birth recycled at stream 1), the local ones
     * went to stream 1's borrow allocator (nobody occupies them in 1's view) */
    CU_ASSERT_PTR_NULL(bor[0]->mem);
    CU_ASSERT_PTR_NULL(bor[1]->mem);
    CU_ASSERT_EQUAL(count_trace(KA_TR_BORROW, 1, NULL), 2);
    /* a second wait carries nothing stale */
    CU_ASSERT_EQUAL(ka_ms_wait_events(ms, 1, (const uint32_t[]){0}, 1), 0);
    ka_ms_last_wait(ms);
    CU_ASSERT_EQUAL(ms->st.allocated, 0);
    CU_ASSERT_EQUAL(ms->l1.st.occupied, 0);
    ka_ms_destroy(ms);
}

/* RT23 */
static void test_create_events(void)
{
    ka_ms *ms = holder(4);
    static const uint32_t ev[] = {0, 1, 0, 1, 1, 0, 2, 3};
    CU_ASSERT_TRUE_FATAL(ka_ms_set_events(ms, ev, 4));
    CU_ASSERT_EQUAL(ms->ev_count, 4);
    for (uint32_t i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(ms->ev[i].id, i);
        CU_ASSERT_EQUAL(ms->ev[i].src, ev[2 * i]);
        CU_ASSERT_EQUAL(ms->ev[i].dst, ev[2 * i + 1]);
        CU_ASSERT_EQUAL(ms->ev[i].free_by_src.n, 0);
        CU_ASSERT_EQUAL(ms->ev[i].return_birth.n, 0);
    }
    static const uint32_t bad[] = {0, 4};
    CU_ASSERT_FALSE(ka_ms_set_events(ms, bad, 1));
    ka_ms_destroy(ms);
}

/* RT25: LastWaitEvents returns every L2 pool to L1 */
static void test_last_wait_to_l1(void)
{
    ka_ms *ms = holder(4);
    size_t before = ms->l1.st.occupied;
    for (uint32_t s = 0; s < 4; s++) {
        ka_msb *b = alloc_block(ms, s, 1024);
        ka_msb_free(b, s);
    }
    CU_ASSERT(ms->l1.st.occupied > before);
    ka_ms_last_wait(ms);
    CU_ASSERT_EQUAL(ms->l1.st.occupied, before);
    ka_ms_destroy(ms);
}

/* CMA: the caching L1 */
static void test_caching_l1(void)
{
    ka_l1 l1;
    ka_l1_init(&l1, 0, SIZE_MAX);
    CU_ASSERT_PTR_NULL(ka_l1_alloc(&l1, (size_t)1 << 40)); /* 1 TiB */
    ka_l1_block *a = ka_l1_alloc(&l1, 3000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a->size, 3072);
    ka_l1_free(&l1, a);
    ka_l1_block *b = ka_l1_alloc(&l1, 3000);
    CU_ASSERT_PTR_EQUAL(b, a);
    CU_ASSERT_EQUAL(l1.st.system_allocs, 1);
    CU_ASSERT_EQUAL(l1.st.hits, 1);
    /* sizes: 512-byte steps */
    CU_ASSERT_EQUAL(ka_size_class(1), 512);
    CU_ASSERT_EQUAL(ka_size_class(65536), 65536);
    CU_ASSERT_EQUAL(ka_size_class(65537), 65536 + 512);
    CU_ASSERT_EQUAL(ka_size_class(0), 0);
    /* best fit with coalescing: two freed neighbours serve a request of both */
    ka_l1_free(&l1, b);
    ka_l1_block *p1 = ka_l1_alloc(&l1, 1024), *p2 = ka_l1_alloc(&l1, 1024);
    ka_l1_block *p3 = ka_l1_alloc(&l1, 1024);
    void *lo = p1->addr;
    size_t grown = l1.st.reserved;
    ka_l1_free(&l1, p1);
    ka_l1_free(&l1, p2);
    ka_l1_block *p4 = ka_l1_alloc(&l1, 2048);
    CU_ASSERT_PTR_EQUAL(p4->addr, lo);
    CU_ASSERT_EQUAL(l1.st.reserved, grown); /* no growth */
    ka_l1_block *p5 = ka_l1_alloc(&l1, 512); /* nothing free: the top grows by 512 */
    CU_ASSERT_EQUAL(l1.st.reserved, grown + 512);
    ka_l1_free(&l1, p5);
    ka_l1_free(&l1, p4);
    ka_l1_free(&l1, p3);
    CU_ASSERT_EQUAL(l1.st.occupied, 0);
    ka_l1_release_cache(&l1);
    CU_ASSERT_EQUAL(l1.st.reserved, 0); /* everything merged into the top, given back */
    /* the release threshold: free bytes at the top beyond it go back */
    ka_l1 r;
    ka_l1_init(&r, 0, 4096);
    ka_l1_block *x = ka_l1_alloc(&r, 4096), *y = ka_l1_alloc(&r, 4096);
    ka_l1_free(&r, x);
    CU_ASSERT_EQUAL(r.cache.bytes, 4096);
    CU_ASSERT_EQUAL(r.st.reserved, 8192);
    ka_l1_free(&r, y);
    CU_ASSERT_EQUAL(r.cache.bytes, 4096);
    CU_ASSERT_EQUAL(r.st.system_frees, 1);
    CU_ASSERT_EQUAL(r.st.reserved, 4096);
    ka_l1_block *z = ka_l1_alloc(&r, 2048);
    CU_ASSERT_EQUAL(r.st.reserved, 4096);
    ka_l1_free(&r, z);
    /* the capacity bounds reserved memory */
    ka_l1 c;
    ka_l1_init(&c, 8192, SIZE_MAX);
    ka_l1_block *p = ka_l1_alloc(&c, 8192);
    CU_ASSERT_PTR_NOT_NULL(p);
    CU_ASSERT_PTR_NULL(ka_l1_alloc(&c, 512));
    ka_l1_free(&c, p);
    CU_ASSERT_PTR_NOT_NULL(p = ka_l1_alloc(&c, 4096)); /* the cache makes room */
    ka_l1_free(&c, p);
    ka_l1_fini(&c);
    ka_l1_fini(&r);
    ka_l1_fini(&l1);
}

/* AccessMemCrossStream: host memory shares, device-like memory wanders */
static void test_access(void)
{
    ka_ms *ms = holder(2);
    ka_msb *b = alloc_block(ms, 0, 1024);
    ka_ms_access(ms, b, 0, 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_WANDER, 1, ka_msb_addr(b)), 1);
    CU_ASSERT_EQUAL(b->count[1], 1);
    CU_ASSERT_TRUE(ka_mif_is_set(&b->mif, 0, 1));
    CU_ASSERT_TRUE(ka_mif_is_set(&b->mif, 1, 1));
    CU_ASSERT_EQUAL(b->refs, 1);
    ka_msb_free(b, 0);
    ka_msb_free(b, 1);
    ka_ms_last_wait(ms);
    ka_ms_destroy(ms);

    ms = ka_ms_create(2, true, 0, SIZE_MAX);
    ms->trace = on_trace;
    ntrace = 0;
    b = alloc_block(ms, 0, 1024);
    ka_ms_access(ms, b, 0, 1);
    CU_ASSERT_EQUAL(count_trace(KA_TR_SHARE, 1, ka_msb_addr(b)), 1);
    CU_ASSERT_EQUAL(b->refs, 2);
    CU_ASSERT_EQUAL(b->count[1], 0); /* no stream marks on host memory */
    CU_ASSERT_FALSE(ka_mif_is_set(&b->mif, 0, 1));
    ka_l2_birth_recycle(b->birth, b);
    ka_ms_destroy(ms);
}

/* ---- learned plans (ka_rp) ------------------------------------------------------ */

/* Every pair of planned requests live at once is apart in memory. */
static bool plan_disjoint(const ka_rp_req *r, uint32_t n, size_t extent)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!r[i].planned)
            continue;
        if (r[i].off % KA_RP_ALIGN || r[i].off + r[i].size > extent)
            return false;
        for (uint32_t j = i + 1; j < n; j++) {
            if (!r[j].planned)
                continue;
            bool time = r[i].t_alloc < r[j].t_free && r[j].t_alloc < r[i].t_free;
            bool mem = r[i].off < r[j].off + r[j].size && r[j].off < r[i].off + r[i].size;
            if (time && mem)
                return false;
        }
    }
    return true;
}

static void test_rp_place(void)
{
    /* random traces: each step frees some live requests and allocates one */
    uint64_t rng = 12345;
    for (int round = 0; round < 50; round++) {
        enum { N = 300 };
        ka_rp_req r[N];
        uint32_t live[N], nl = 0, t = 0;
        size_t now = 0, peak = 0;
        for (uint32_t i = 0; i < N; i++) {
            while (nl && (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 61 < 3) {
                uint32_t k = (uint32_t)(rng >> 33) % nl;
                r[live[k]].t_free = t++;
                now -= r[live[k]].size;
                live[k] = live[--nl];
            }
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t size = 64 * (1 + (rng >> 40) % 4096);
            r[i] = (ka_rp_req){.size = size, .t_alloc = t++, .t_free = KA_RP_NONE, .planned = true};
            live[nl++] = i;
            now += size;
            if (now > peak)
                peak = now;
        }
        while (nl)
            r[live[--nl]].t_free = t++;
        r[7].planned = false; /* an unplanned request takes no room */
        size_t extent = ka_rp_place(r, N);
        CU_ASSERT(extent != SIZE_MAX);
        CU_ASSERT(plan_disjoint(r, N, extent));
        CU_ASSERT(extent >= peak - r[7].size);
        CU_ASSERT(extent <= peak + peak / 4); /* a good greedy, not a first fit */
    }
}

/* The arena blocks a test holds: two live ones sharing a byte is a failure. */
typedef struct held {
    char *p;
    size_t n;
    uint32_t s, idx, epoch;
} held;
static held rp_live[256];
static uint32_t rp_nlive;
static int rp_overlaps;

static void *rp_get(ka_rp *rp, uint32_t s, size_t size, uint32_t *idx)
{
    void *p = ka_rp_alloc(rp, s, size, idx);
    if (p) {
        for (uint32_t k = 0; k < rp_nlive; k++)
            if ((char *)p < rp_live[k].p + rp_live[k].n && rp_live[k].p < (char *)p + size)
                rp_overlaps++;
        if (rp_nlive < 256)
            rp_live[rp_nlive++] = (held){p, size, s, *idx, rp->epoch};
    }
    return p;
}

/* One holder of request @p idx of stream @p s frees it. */
static void rp_put(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch, void *p)
{
    if (ka_rp_free(rp, s, idx, epoch, p != NULL))
        for (uint32_t k = 0; k < rp_nlive; k++)
            if (rp_live[k].p == p) {
                rp_live[k] = rp_live[--rp_nlive];
                break;
            }
}

/* One run of stream @p s: request i allocated at step i and freed after
 * request i + span[i]; the arena addresses handed out land in @p got. */
static void rp_run(ka_rp *rp, uint32_t s, const size_t *size, const uint32_t *span, uint32_t n,
                   void **got)
{
    uint32_t idx[64];
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < i; k++)
            if (k + span[k] == i)
                rp_put(rp, s, idx[k], rp->epoch, got[k]);
        got[i] = rp_get(rp, s, size[i], &idx[i]);
        CU_ASSERT_EQUAL(idx[i], i);
    }
    for (uint32_t k = 0; k < n; k++)
        if (k + span[k] >= n)
            rp_put(rp, s, idx[k], rp->epoch, got[k]);
}

/* Streams 0 and 1 truly concurrent over the six @p size requests: request i
 * of each stream, then the frees of both streams' request i - 1. */
static void lockstep(ka_rp *rp, const size_t *size, void **g0, uint32_t *i0, void **g1,
                     uint32_t *i1)
{
    for (uint32_t i = 0; i < 6; i++) {
        if (i) {
            rp_put(rp, 0, i0[i - 1], rp->epoch, g0[i - 1]);
            rp_put(rp, 1, i1[i - 1], rp->epoch, g1[i - 1]);
        }
        g0[i] = rp_get(rp, 0, size[i], &i0[i]);
        g1[i] = rp_get(rp, 1, size[i], &i1[i]);
    }
    rp_put(rp, 0, i0[5], rp->epoch, g0[5]);
    rp_put(rp, 1, i1[5], rp->epoch, g1[5]);
}

static uint32_t count_got(void **got, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += got[i] != NULL;
    return c;
}

static void test_rp_replay(void)
{
    ka_l1 l1;
    ka_l1_init(&l1, (size_t)1 << 30, SIZE_MAX);
    ka_rp *rp = ka_rp_create(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rp);
    rp_overlaps = 0;
    const size_t size[8] = {1000, 5000, 300, 5000, 70, 9000, 64, 1000};
    const uint32_t span[8] = {2, 1, 3, 2, 1, 3, 1, 1};
    void *got[8];
    rp_run(rp, 0, size, span, 8, got);
    CU_ASSERT_EQUAL(count_got(got, 8), 0); /* nothing learned yet */
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    CU_ASSERT_EQUAL(rp->st.plans, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rp->arena);
    CU_ASSERT(plan_disjoint(rp->req, rp->nreq, rp->extent));
    /* the plan serves every request, inside the arena */
    char *base = rp->arena->addr;
    rp_run(rp, 0, size, span, 8, got);
    for (int i = 0; i < 8; i++) {
        CU_ASSERT_PTR_NOT_NULL(got[i]);
        CU_ASSERT((char *)got[i] >= base && (char *)got[i] + size[i] <= base + rp->extent);
        CU_ASSERT_EQUAL((uintptr_t)got[i] % KA_RP_ALIGN, 0);
    }
    CU_ASSERT_EQUAL(rp->st.hits, 8);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true)); /* followed: kept */
    /* another size at request 3: it and whatever follows it in its bytes take
     * the normal path; the run is learned again */
    size_t other[8];
    memcpy(other, size, sizeof(other));
    other[3] = 4000;
    rp_run(rp, 0, other, span, 8, got);
    CU_ASSERT_PTR_NULL(got[3]);
    CU_ASSERT(count_got(got, 8) >= 3 && count_got(got, 8) < 8);
    CU_ASSERT(rp->st.fallbacks >= 1);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    CU_ASSERT_EQUAL(rp->st.plans, 2);
    rp_run(rp, 0, other, span, 8, got);
    CU_ASSERT_EQUAL(count_got(got, 8), 8);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true));
    /* one request more: served by the normal path, learned again */
    size_t more[9];
    uint32_t span9[9];
    memcpy(more, other, sizeof(other));
    memcpy(span9, span, sizeof(span));
    more[8] = 64;
    span9[8] = 1;
    void *got9[9];
    rp_run(rp, 0, more, span9, 9, got9);
    CU_ASSERT_EQUAL(count_got(got9, 8), 8);
    CU_ASSERT_PTR_NULL(got9[8]);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    /* fewer requests: learned again too */
    rp_run(rp, 0, more, span9, 7, got9);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    CU_ASSERT_EQUAL(rp->st.plans, 4);
    CU_ASSERT_EQUAL(rp_overlaps, 0);
    CU_ASSERT_EQUAL(rp_nlive, 0);
    ka_rp_destroy(rp, &l1);
    CU_ASSERT_EQUAL(l1.st.occupied, 0); /* the arena went back */
    ka_l1_fini(&l1);
}

/* Two streams learned in one interleaving, replayed in others: the plan shares
 * bytes between the streams, and the predecessors keep live blocks apart. */
static void test_rp_interleaving(void)
{
    ka_l1 l1;
    ka_l1_init(&l1, (size_t)1 << 30, SIZE_MAX);
    ka_rp *rp = ka_rp_create(2);
    rp_overlaps = 0;
    const size_t size[6] = {8192, 4096, 8192, 4096, 8192, 4096};
    const uint32_t span[6] = {1, 1, 1, 1, 1, 1};
    void *g0[6], *g1[6];
    /* learned: stream 0's run wholly before stream 1's */
    rp_run(rp, 0, size, span, 6, g0);
    rp_run(rp, 1, size, span, 6, g1);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    CU_ASSERT(rp->extent < 2 * (8192 + 4096)); /* the streams share bytes */
    CU_ASSERT(plan_disjoint(rp->req, rp->nreq, rp->extent));
    /* the same order: all from the plan */
    rp_run(rp, 0, size, span, 6, g0);
    rp_run(rp, 1, size, span, 6, g1);
    CU_ASSERT_EQUAL(count_got(g0, 6) + count_got(g1, 6), 12);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true));
    /* stream 1 first: its blocks wait for predecessors of stream 0 that have
     * not run yet, so they take the normal path; stream 0 follows the plan */
    uint64_t fb = rp->st.fallbacks;
    rp_run(rp, 1, size, span, 6, g1);
    rp_run(rp, 0, size, span, 6, g0);
    CU_ASSERT(count_got(g1, 6) < 6);
    CU_ASSERT(rp->st.fallbacks > fb);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true)); /* one run of fallbacks: kept */
    /* truly concurrent: each step of one stream, then of the other */
    uint32_t i0[6], i1[6];
    lockstep(rp, size, g0, i0, g1, i1);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true)); /* fallbacks two runs in a row: learned */
    CU_ASSERT_EQUAL(rp->st.plans, 2);
    /* that interleaving again: all from the new plan */
    lockstep(rp, size, g0, i0, g1, i1);
    CU_ASSERT_EQUAL(count_got(g0, 6) + count_got(g1, 6), 12);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true));
    /* a block another stream uses too: held until both free it */
    uint32_t a, b;
    void *pa = rp_get(rp, 0, size[0], &a);
    void *pb = rp_get(rp, 1, size[0], &b);
    CU_ASSERT_PTR_NOT_NULL(pa);
    CU_ASSERT_PTR_NOT_NULL(pb);
    ka_rp_access(rp, 0, a, rp->epoch, true);
    rp_put(rp, 0, a, rp->epoch, pa);            /* stream 0 is done, stream 1 not */
    CU_ASSERT_EQUAL(rp->live, 2);
    rp_put(rp, 0, b, rp->epoch, pb);
    rp_put(rp, 1, a, rp->epoch, pa);            /* now free */
    CU_ASSERT_EQUAL(rp->live, 0);
    CU_ASSERT_EQUAL(rp_overlaps, 0);
    ka_rp_destroy(rp, &l1);
    ka_l1_fini(&l1);
}

static void test_rp_live_at_end(void)
{
    ka_l1 l1;
    ka_l1_init(&l1, (size_t)1 << 30, SIZE_MAX);
    ka_rp *rp = ka_rp_create(1);
    uint32_t a, b;
    ka_rp_alloc(rp, 0, 4096, &a);
    ka_rp_alloc(rp, 0, 4096, &b);
    ka_rp_free(rp, 0, a, rp->epoch, false);
    ka_rp_free(rp, 0, b, rp->epoch, false);
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    void *pa = ka_rp_alloc(rp, 0, 4096, &a);
    CU_ASSERT_PTR_NOT_NULL(pa);
    CU_ASSERT(!ka_rp_end_run(rp, &l1, true)); /* pa still held: not clean, not learned */
    CU_ASSERT(!rp->on);                        /* and the arena is not used next run */
    CU_ASSERT_PTR_NULL(ka_rp_alloc(rp, 0, 4096, &b));
    CU_ASSERT(ka_rp_free(rp, 0, 0, rp->epoch - 1, true)); /* the old block, freed late */
    ka_rp_free(rp, 0, b, rp->epoch, false);
    ka_rp_end_run(rp, &l1, true);
    CU_ASSERT(rp->on);
    CU_ASSERT_PTR_NOT_NULL(ka_rp_alloc(rp, 0, 4096, &a));
    ka_rp_destroy(rp, &l1);
    ka_l1_fini(&l1);
}

/* No room for the arena (L1 refuses to grow): the plan serves nothing, and the
 * runs that repeat it are not learned again and again. */
static void test_rp_no_room(void)
{
    ka_l1 l1;
    ka_l1_init(&l1, (size_t)1 << 30, SIZE_MAX);
    ka_rp *rp = ka_rp_create(1);
    const size_t size[4] = {4096, 4096, 8192, 64};
    const uint32_t span[4] = {1, 1, 1, 1};
    void *got[4];
    rp_run(rp, 0, size, span, 4, got);
    l1.refuse = true;
    CU_ASSERT(ka_rp_end_run(rp, &l1, true));
    CU_ASSERT_PTR_NULL(rp->arena);
    for (int run = 0; run < 3; run++) {
        rp_run(rp, 0, size, span, 4, got);
        CU_ASSERT_EQUAL(count_got(got, 4), 0);
        CU_ASSERT(!ka_rp_end_run(rp, &l1, true));
    }
    CU_ASSERT_EQUAL(rp->st.plans, 1);
    CU_ASSERT_EQUAL(rp->st.fallbacks, 0);
    ka_rp_destroy(rp, &l1);
    ka_l1_fini(&l1);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"MIF Set/Clear/SetAll/MergeClearedFrom, ToAllBit (RT1-RT4, B5)", test_mif},
        {"multi-stream block init (RT5)", test_msb_init},
        {"borrow allocator (RT7, bucket erase)", test_borrow},
        {"block pool reuse (RT8)", test_pool},
        {"L2 malloc reuses a freed block (RT10)", test_l2_reuse},
        {"local, borrow and birth recycle (RT11, RT12, RT14)", test_recycle_modes},
        {"own malloc fails, borrow succeeds (RT17)", test_borrow_when_l1_fails},
        {"L1 exhausted: pools shrunk one at a time", test_shrink_pools},
        {"VersionBlocks FindNext/FindNextForAll (RT19)", test_version_blocks},
        {"SendEvents (RT20)", test_send_events},
        {"WaitEvents (RT21)", test_wait_events},
        {"CreateGertEvents (RT23)", test_create_events},
        {"LastWaitEvents recycles L2 to L1 (RT25)", test_last_wait_to_l1},
        {"caching L1 (CMA)", test_caching_l1},
        {"AccessMemCrossStream share / wander", test_access},
        {"learned plans: the offline placement", test_rp_place},
        {"learned plans: adopt, replay, fall back, learn again", test_rp_replay},
        {"learned plans: other interleavings of two streams", test_rp_interleaving},
        {"learned plans: a block live at a run's end", test_rp_live_at_end},
        {"learned plans: no room for the arena", test_rp_no_room},
        {NULL, NULL}};
    return kiln_test_run("allocators", cases);
}
