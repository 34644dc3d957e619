/*
 * ka.h - the three-layer runtime allocator (docs/allocators.md), the internal
 * interface of libkiln_allocators.so.  Pure C over libc: no kiln calls, so the
 * CUnit suite links these objects directly (tests/core/test_allocators.c) and
 * drives GE's RT scenarios on the structures themselves.
 *
 *   L1  ka_l1     caching allocator over system memory: size classes, cached
 *                 blocks, a release threshold, a capacity (GE CachingMemAllocator)
 *   L2  ka_l2     one stream-aware pool per stream; blocks are ka_msb with a birth
 *                 stream, a version, per-stream counts and a MIF (GE
 *                 MultiStreamL2Allocator, MultiStreamMemBlock)
 *   L3  ka_borrow a stream reuses blocks other streams released (GE BorrowAllocator)
 *
 * plus the recycle-state carriers of GE's event kernels (ka_event_*), and
 * ka_ms, the stack of all of them.  Nothing here locks: the plugin serialises
 * every call on one stack with a mutex, as GE puts every memory kernel under
 * the critical-section key kKernelUseMemory.
 */
#ifndef KA_H
#define KA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KA_MAX_STREAMS 64u   /* a MIF mask is 64 bits */
#define KA_POOL_KEEP 1000u   /* GE's MultiStreamMemBlockPool size (see ka_pool) */

/* ---- growable arrays ------------------------------------------------------ */
typedef struct ka_vec {
    void *p;
    uint32_t n, cap;
} ka_vec;
bool ka_vec_push(ka_vec *v, const void *e, size_t esz);
void ka_vec_free(ka_vec *v);

/* ---- L1: the caching allocator -------------------------------------------- */
/*
 * L1 holds one contiguous region of address space (reserved virtually up to the
 * capacity; pages are committed as the heap grows).  Blocks are chunks of it,
 * described outside the memory (device-like memory holds no headers).  Free
 * chunks are cached in bins by exact size (multiples of 512 B), kept sorted:
 * a request takes the best fit, splits off the rest, and a freed chunk merges
 * with free neighbours (TensorFlow BFC).  The top of the heap grows for a miss;
 * free memory at the top beyond the release threshold goes back to the system.
 */
typedef struct ka_l1_block {
    void *addr;
    size_t size;                 /* bytes, a multiple of 512 */
    struct ka_l1_block *next;    /* in a bin (L1's free bins or an L2 pool) */
    struct ka_l1_block *bprev;   /* L1 free bins: previous in the bin */
    struct ka_l1_block *lo, *hi; /* address neighbours in the heap */
    bool is_free;                /* in L1's free bins */
} ka_l1_block;

/* Blocks grouped by exact size, sizes kept sorted (binary search); empty bins
 * are erased so a best-fit search never walks them. */
typedef struct ka_bin {
    size_t size;
    ka_l1_block *head;
    uint32_t count;
} ka_bin;
typedef struct ka_bins {
    ka_bin *b;
    uint32_t n, cap;
    size_t bytes;              /* sum of the sizes of the blocks held */
} ka_bins;
/** Index of the first bin with size >= @p size (n when none).  O(log bins). */
uint32_t ka_bins_lower(const ka_bins *s, size_t size);
/** Pop a block of the smallest size in [size, max], or NULL. */
ka_l1_block *ka_bins_take_fit(ka_bins *s, size_t size, size_t max);
/** Push @p blk into the bin of its size; false on OOM (block not filed). */
bool ka_bins_put(ka_bins *s, ka_l1_block *blk);
/** Unlink @p blk from its bin (doubly linked: O(log bins)). */
void ka_bins_remove(ka_bins *s, ka_l1_block *blk);
void ka_bins_free(ka_bins *s);

typedef struct ka_l1_stats {
    size_t reserved, peak_reserved; /* bytes of the heap committed (its top) */
    size_t occupied, peak_occupied; /* bytes handed out */
    size_t cached;                  /* bytes free inside the heap */
    size_t steady_peak_reserved;    /* peak reserved since the last plan was adopted
                                       (ka_rp), since creation before any */
    uint64_t system_allocs, system_frees; /* heap growths, releases to the system */
    uint64_t hits, misses, failures;
} ka_l1_stats;

typedef struct ka_l1 {
    size_t capacity;           /* bytes of address space reserved; the heap's limit */
    size_t release_threshold;  /* free bytes at the top kept at most (SIZE_MAX = all) */
    char *base;                /* the region (NULL until the first request) */
    ka_l1_block *top;          /* the highest chunk, NULL when the heap is empty */
    ka_bins cache;             /* free chunks */
    ka_l1_block *spare;        /* free descriptors */
    ka_l1_stats st;
    bool refuse;               /* test hook: the heap never grows */
} ka_l1;

/** Bytes a request of @p size takes: @p size rounded up to 512; 0 for 0 and for
 *  sizes that overflow. */
size_t ka_size_class(size_t size);
/** @p capacity 0 = the machine's physical memory. */
void ka_l1_init(ka_l1 *l1, size_t capacity, size_t release_threshold);
/** A block of ka_size_class(@p size) bytes: the best-fitting free chunk (split),
 *  else the heap grows; NULL when it would pass the capacity.  O(log sizes). */
ka_l1_block *ka_l1_alloc(ka_l1 *l1, size_t size);
/** ka_l1_alloc; with @p grow false only a cached chunk serves (NULL otherwise). */
ka_l1_block *ka_l1_alloc_ex(ka_l1 *l1, size_t size, bool grow);
/** Return @p blk: merged with free neighbours and cached; free memory at the
 *  top beyond the release threshold goes back to the system. */
void ka_l1_free(ka_l1 *l1, ka_l1_block *blk);
/** Give the free memory at the top of the heap back to the system. */
void ka_l1_release_cache(ka_l1 *l1);
/** Lower the heap's top while its highest chunk is free, keeping @p keep free
 *  bytes there (their pages stay committed); the rest goes back to the system. */
void ka_l1_trim(ka_l1 *l1, size_t keep);
/** Release the region and every descriptor; blocks still handed out die too. */
void ka_l1_fini(ka_l1 *l1);

/* ---- MIF ----------------------------------------------------------------- */
/* bits[obs] bit s: from observer stream obs's view, stream s still occupies the block. */
typedef struct ka_mif {
    uint32_t n;
    uint64_t *bits;
} ka_mif;
void ka_mif_reinit(ka_mif *m, uint32_t n);             /* n zero masks */
void ka_mif_set(ka_mif *m, uint32_t obs, uint32_t s);
void ka_mif_set_all(ka_mif *m, uint32_t s);            /* bit s in every observer */
void ka_mif_set_maintained_all(ka_mif *m, uint32_t obs); /* all n bits of obs */
void ka_mif_clear(ka_mif *m, uint32_t obs, uint32_t s);
void ka_mif_merge_cleared_from(ka_mif *m, uint32_t src, uint32_t dst); /* dst &= src */
bool ka_mif_is_set(const ka_mif *m, uint32_t obs, uint32_t s);
bool ka_mif_is_any_set(const ka_mif *m, uint32_t obs);
/** All stream bits of @p n streams except @p s (GE ToAllBit). */
uint64_t ka_to_all_bit(uint32_t n, uint32_t s);

/* ---- multi-stream blocks, their pool ----------------------------------------- */
typedef enum ka_trace_kind {
    KA_TR_BIRTH = 0,     /* birth recycle: the block is back in its birth pool */
    KA_TR_BORROW,        /* borrow recycle: filed in the freeing stream's borrow allocator */
    KA_TR_LOCAL,         /* local recycle: pending until an event settles it */
    KA_TR_RECYCLE_RECV,  /* WaitEvents settled a carried local-recycle block */
    KA_TR_MIGRATION_RECV,/* WaitEvents took a borrowed block home (birth recycle) */
    KA_TR_SHRINK,        /* L1 ran out: a stream's pool went back to L1 */
    KA_TR_WANDER,        /* AccessMemCrossStream on device-like memory */
    KA_TR_SHARE,         /* AccessMemCrossStream on host memory */
    KA_TR_KIND_COUNT
} ka_trace_kind;
const char *ka_trace_name(ka_trace_kind k);

struct ka_l2;
typedef struct ka_msb {
    ka_l1_block *mem;        /* NULL once birth-recycled */
    uint64_t version;        /* +1 on every borrow or birth recycle */
    struct ka_l2 *birth;     /* birth allocator (its stream = birth stream) */
    uint32_t type;
    uint32_t refs;           /* host memory: holders sharing it (AccessMemCrossStream) */
    size_t size;             /* the request */
    ka_mif mif;
    uint32_t *count;         /* per stream */
    struct ka_msb *bprev, *bnext; /* borrow: size bucket list */
    struct ka_msb *sprev, *snext; /* borrow: birth-stream list */
    struct ka_msb *pool_next;
    bool in_borrow;
} ka_msb;

/* The pool of block objects.  GE deletes objects beyond 1000 free ones; kiln keeps
 * them (a stale recycle entry may still read an object's version), so Release
 * always files the object and Acquire hands the last released one back. */
typedef struct ka_pool {
    uint32_t streams;
    ka_msb *free;
    uint32_t free_count, total;
    ka_vec slabs;            /* void * per slab */
} ka_pool;
void ka_pool_init(ka_pool *p, uint32_t streams);
/** A block object of @p birth holding @p mem, ReInit'ed; NULL on OOM. */
ka_msb *ka_pool_acquire(ka_pool *p, struct ka_l2 *birth, ka_l1_block *mem, uint32_t type);
void ka_pool_release(ka_pool *p, ka_msb *b);
void ka_pool_fini(ka_pool *p);
/** GE ReInit: fails (false) when @p b still holds a block; else counts and MIF
 *  reset for the pool's stream count and NewAccessStream(birth, birth). */
bool ka_msb_reinit(ka_msb *b, struct ka_l2 *birth, ka_l1_block *mem, uint32_t type);
uint32_t ka_msb_birth_stream(const ka_msb *b);
void *ka_msb_addr(const ka_msb *b);
/** count[dst]++ and MIF SetAll(dst): stream dst now occupies the block. */
void ka_msb_new_access(ka_msb *b, uint32_t src, uint32_t dst);
void ka_msb_add_count(ka_msb *b, uint32_t s);
void ka_msb_sub_count(ka_msb *b, uint32_t s);

/* ---- L3: the borrow allocator ------------------------------------------------ */
typedef struct ka_borrow {
    uint32_t streams;
    struct { size_t size; ka_msb *head; } *bucket;
    uint32_t n, cap;
    ka_msb **by_birth;       /* list heads per birth stream */
    size_t bytes;
    uint32_t count;
} ka_borrow;
bool ka_borrow_init(ka_borrow *a, uint32_t streams);
void ka_borrow_fini(ka_borrow *a);
/** A block from the smallest bucket >= @p size (GE lower_bound), or NULL.  The
 *  emptied bucket is erased (GE erases the requested size's key: a bug). */
ka_msb *ka_borrow_alloc(ka_borrow *a, size_t size);
/** File @p b under its size and its birth stream. */
bool ka_borrow_free(ka_borrow *a, ka_msb *b);
/** Remove and return (into @p out, ka_msb *) every block born on @p s. */
bool ka_borrow_get_and_clear(ka_borrow *a, uint32_t s, ka_vec *out);

/* ---- L2 -------------------------------------------------------------------- */
typedef struct ka_version_block {
    uint64_t version;
    ka_msb *block;
    uint64_t sent;           /* destination bits this entry was sent to */
} ka_version_block;

struct ka_ms;
typedef struct ka_l2 {
    struct ka_ms *ms;
    uint32_t stream;
    ka_bins pool;            /* own cached L1 blocks */
    ka_borrow borrow;
    ka_vec local;            /* ka_version_block: local-recycle list */
} ka_l2;

/** GE VersionBlocks FindNext for destination @p dst over @p l2's local list:
 *  stale entries (version moved on) and entries sent to every stream are
 *  dropped, entries already sent to dst skipped, the rest marked sent to dst
 *  and appended to @p out (ka_version_block).  @p for_all (FindNextForAll)
 *  yields entries whether or not dst already got them.  O(entries). */
bool ka_version_blocks_find(ka_l2 *l2, uint32_t dst, bool for_all, ka_vec *out);

/* ---- events ------------------------------------------------------------------ */
typedef struct ka_event {
    uint32_t id, src, dst;
    ka_vec free_by_src;      /* ka_version_block: local-recycle blocks carried */
    ka_vec return_birth;     /* ka_msb *: borrowed blocks going home */
} ka_event;

/* ---- the stack ------------------------------------------------------------------ */
typedef void (*ka_trace_fn)(void *ctx, ka_trace_kind kind, uint32_t stream, void *addr);

typedef struct ka_ms_stats {
    ka_l1_stats l1;
    size_t allocated, peak_allocated; /* bytes of live requests */
    size_t steady_peak_allocated;     /* since the last plan was adopted */
    uint64_t allocs, frees, borrow_hits, birth_recycles, borrow_recycles, local_recycles;
} ka_ms_stats;

typedef struct ka_ms {
    uint32_t streams;
    bool host;               /* host memory: AccessMemCrossStream shares */
    ka_l1 l1;
    ka_l2 *l2;               /* one per stream */
    ka_pool pool;
    ka_event *ev;
    uint32_t ev_count;
    ka_trace_fn trace;
    void *trace_ctx;
    ka_ms_stats st;
} ka_ms;

/** A stack of @p streams (1..64) L2 allocators over one L1.  NULL on a bad
 *  count or OOM. */
ka_ms *ka_ms_create(uint32_t streams, bool host, size_t capacity, size_t release_threshold);
void ka_ms_destroy(ka_ms *ms);
/** L2 Malloc on stream @p s (GE MultiStreamL2Allocator::Malloc): own pool; L1's
 *  cache (s's pool handed to it first); L1's cache again after each other
 *  stream's pool is shrunk into it, stopping at the first success; L1 growing
 *  its heap; then the borrow allocator (re-registered with NewAccessStream(s,
 *  s)).  NULL when all fail.  (GE shrinks only when L1 fails outright; kiln
 *  shrinks before growing the heap, so pools never hold memory a heap growth
 *  would duplicate.) */
ka_msb *ka_l2_malloc(ka_l2 *a, size_t size);
/** Free @p b on stream @p s: local release, then birth, borrow or local recycle. */
void ka_msb_free(ka_msb *b, uint32_t s);
/** SyncLocalRecycleStatus(src, dst): dst's view merges src's; empty -> Free(dst). */
void ka_msb_sync_local(ka_msb *b, uint32_t src, uint32_t dst);
/** SyncAllLocalRecycleStatus(dst): merge from every other stream; empty -> Free(dst). */
void ka_msb_sync_all(ka_msb *b, uint32_t dst);
/** Birth recycle at @p a (the block's birth allocator): memory to a's pool, the
 *  object to the pool of objects. */
void ka_l2_birth_recycle(ka_l2 *a, ka_msb *b);
/** RecycleFreeMem: every block of @p a's own pool back to L1. */
void ka_l2_recycle_free_mem(ka_l2 *a);
/** Every local-recycle entry of @p a for @p dst (FindNext), into @p out. */
bool ka_l2_get_clear_local(ka_l2 *a, uint32_t dst, ka_vec *out);
/** AccessMemCrossStream: host memory shares (refs++), device-like memory
 *  wanders (NewAccessStream(src, dst), MIF marked). */
void ka_ms_access(ka_ms *ms, ka_msb *b, uint32_t src, uint32_t dst);

/** CreateGertEvents: one event per (src, dst) pair, id = index.  false on OOM or a
 *  stream out of range. */
bool ka_ms_set_events(ka_ms *ms, const uint32_t *src_dst, uint32_t count);
/** SendEvents on stream @p s for @p ids: each event takes s's local-recycle
 *  blocks for its dst (FindNext) and s's borrow blocks born on its dst.
 *  -1 when an id is out of range or an event's source is not s. */
int ka_ms_send_events(ka_ms *ms, uint32_t s, const uint32_t *ids, uint32_t n);
/** WaitEvents on stream @p s: each carried version block still current is synced
 *  (the event's src -> its dst), each carried borrow block birth-recycled at
 *  its birth stream; lists cleared.  -1 when an id is out of range (like GE,
 *  the waiter is not checked against the events' destinations). */
int ka_ms_wait_events(ka_ms *ms, uint32_t s, const uint32_t *ids, uint32_t n);
/** LastWaitEvents: settle every pending local recycle at the birth streams,
 *  send every borrowed block home, and every pool back to L1. */
void ka_ms_last_wait(ka_ms *ms);
/** Test hook: make L1 refuse every system allocation (GE's "device malloc fails"). */
void ka_ms_fail_l1(ka_ms *ms, bool fail);
void ka_ms_trace(ka_ms *ms, ka_trace_kind k, uint32_t s, void *addr);

/* ---- learned plans, replayed on later runs (ka_plan.c) ------------------------ */
/*
 * An inference repeats the same requests every run.  Each stream's requests
 * are recorded during a run (the size of each, in the stream's own order) with
 * their lifetimes on one clock (the stack's calls are serialised); at the end
 * of a clean run (last_wait with nothing live) the lifetimes are placed
 * offline in one arena (greedy: largest or busiest first, lowest offset clear
 * of every time-overlapping block placed).  On later runs request i of stream
 * s takes its planned place when its size is the recorded one and every block
 * that last held those bytes before it in the plan (its predecessors) was
 * served from the plan in this run and freed by every holder: whatever the
 * interleaving of the streams, two live planned blocks never share a byte
 * (docs/allocators.md#replay).  Otherwise the normal path serves it.  Another
 * size, more or fewer requests, or fallbacks in two runs in a row make the
 * next clean run learned again.
 */
#define KA_RP_NONE 0x3ffffffu      /* "no index" (26 bits: ka_rp indices fit) */
#define KA_RP_MAX_REQS (1u << 22)   /* requests recorded per stream per run at most */
#define KA_RP_MAX_PAIRS (1u << 24)  /* time-overlapping pairs a placement handles at most */
#define KA_RP_ALIGN 64u             /* planned blocks are 64-byte aligned */

typedef struct ka_rp_req {
    size_t size;              /* the request */
    size_t off;               /* plan: offset in the arena */
    uint32_t t_alloc, t_free; /* on the stack's clock (t_free KA_RP_NONE: still held) */
    uint32_t holders;         /* holders left (1 + accesses, minus frees) */
    uint32_t dep, ndep;       /* plan: its predecessors, ka_rp.dep[dep .. dep + ndep) */
    uint32_t served, done;    /* replay: the run that served it, that saw it freed */
    bool planned;             /* plan: has a place in the arena */
} ka_rp_req;

typedef struct ka_rp_stream {
    ka_rp_req *rec;           /* this run's requests */
    uint32_t nrec, caprec, nalloc;
    uint32_t first, nreq;     /* the plan's requests of the stream: ka_rp.req[first ..] */
} ka_rp_stream;

typedef struct ka_rp_stats {
    uint64_t plans;           /* plans adopted */
    uint64_t hits;            /* requests served from the plan's arena */
    uint64_t fallbacks;       /* requests the plan could not serve (another size, one
                                 more, a predecessor not freed yet in this run) */
    size_t arena;             /* bytes of the adopted arena */
} ka_rp_stats;

typedef struct ka_rp {
    uint32_t streams;
    uint32_t epoch;           /* the run (runs ended by last_wait so far) */
    uint32_t clock;           /* this run's allocs and last frees so far */
    uint32_t run;             /* stamp of this run in ka_rp_req.served/done (never 0) */
    bool have_plan, on;       /* a plan is adopted; this run may use it */
    bool mismatch, fell_back, overflow; /* this run: shape differs; a fallback; not all recorded */
    uint32_t fallback_runs;   /* runs in a row with fallbacks */
    ka_rp_stream *s;
    ka_rp_req *req;           /* the plan: every stream's requests */
    uint32_t nreq;
    uint32_t *dep;            /* predecessors' indices in req */
    uint32_t live;            /* arena blocks handed out, not yet freed */
    ka_l1_block *arena;
    size_t extent;
    ka_rp_stats st;
} ka_rp;

ka_rp *ka_rp_create(uint32_t streams);
/** Free @p rp; its arena goes back to @p l1 (NULL: L1 is gone already). */
void ka_rp_destroy(ka_rp *rp, ka_l1 *l1);
/** A request of @p size on stream @p s.  The arena address when the plan
 *  serves it, else NULL (the normal path serves it); *@p idx receives the
 *  request's index in s's run (KA_RP_NONE past the limit).  O(predecessors). */
void *ka_rp_alloc(ka_rp *rp, uint32_t s, size_t size, uint32_t *idx);
/** Request @p idx of stream @p s (of run @p epoch) is freed by one holder;
 *  @p planned: it came from the arena.  True when that arena block has no
 *  holder left (it is free).  O(1). */
bool ka_rp_free(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch, bool planned);
/** Request @p idx of @p s is used by another stream too: one more holder. */
void ka_rp_access(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch, bool planned);
/** The end of a run (last_wait).  @p clean: nothing is live.  A clean run is
 *  learned when there is no plan, when its requests differ from the plan's,
 *  or after fallbacks in two runs in a row: the old arena goes back to @p l1,
 *  the heap's free top is given back, the new arena is taken and L1's steady
 *  peak restarts.  True when a plan was adopted. */
bool ka_rp_end_run(ka_rp *rp, ka_l1 *l1, bool clean);
/** The offline placement: offsets (into r[i].off) for the @p n requests with
 *  planned set, lifetimes [t_alloc, t_free] (distinct times); blocks whose
 *  lifetimes overlap never overlap in memory.  Sizes are rounded to
 *  KA_RP_ALIGN.  Two orders are placed (largest first; busiest moment first),
 *  the smaller extent kept.  Returns the extent, or SIZE_MAX on OOM or more
 *  than KA_RP_MAX_PAIRS overlapping pairs.  O(n log n + P log P), P = pairs of
 *  planned requests live at once. */
size_t ka_rp_place(ka_rp_req *r, uint32_t n);

#endif /* KA_H */
