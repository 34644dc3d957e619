/*
 * mp.h - internal interface of kiln's own memory planner (libkiln_memplan.so,
 * memory-planner component "kiln"; docs/memory_planning.md).
 *
 * The planner works on an "mp_prob": the kiln_mem_problem with time
 * compressed into sections (maximal step ranges in which no block starts or
 * ends), sizes as int64 and each block's alignment resolved.  Four parts:
 *   mp_prep.c    builds the mp_prob, LOAD, per-section totals, time cuts;
 *   mp_greedy.c  fast greedy placements (skyline "lowest floor first" with a
 *                lazy heap and a 64-ary max tree, O(n log n); best fit over the
 *                gaps of the time-overlapping blocks for smaller problems;
 *                the repair of blocks above LOAD into lower gaps);
 *   mp_search.c  MiniMalloc-style decision searches over canonical placements
 *                for small problems, within a node budget;
 *   mp_plan.c    the strategy: orders, peak-first seeds, repair, capacities.
 * The algorithm code uses only libc; plugin.c is the kiln glue.
 */
#ifndef KILN_MEMPLAN_MP_H
#define KILN_MEMPLAN_MP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define MP_NONE UINT32_MAX

/** A planning problem over compressed time. */
typedef struct mp_prob {
    uint32_t n;          /* blocks */
    uint32_t nsec;       /* sections */
    int64_t *size;       /* [n] bytes */
    uint32_t *align;     /* [n] power of two >= 1 */
    uint32_t *lo, *hi;   /* [n] sections [lo, hi) the block is live in */
    int64_t *fixed;      /* [n] offset of a FIXED block, -1 otherwise */
    uint32_t nfixed;     /* FIXED blocks */
    int64_t *sec_total;  /* [nsec] sum of the (alignment-rounded) sizes live in a section */
    uint64_t *sec_t;     /* [nsec + 1] first step of each section (and the end);
                          * NULL when the search cannot run (mp_prob_sections) */
    int64_t load;        /* max of sec_total */
    int64_t capacity;    /* 0 = unbounded */
} mp_prob;

/** Tunables (plugin options). */
typedef struct mp_params {
    double time_budget_ms;  /* wall-clock stop of the search; <= 0: none (deterministic) */
    int effort;             /* 0: one greedy, 1: several greedy orderings, 2: + search */
    uint32_t search_max_blocks; /* problems above this skip the search */
    uint64_t search_nodes;  /* node budget of the whole search (determinism) */
    uint32_t rekey_limit;   /* skyline: re-keys per block */
} mp_params;

/** What happened (for the CLI's verbose line and the tests). */
typedef struct mp_stats {
    int64_t greedy_peak;  /* best greedy peak */
    int64_t search_peak;  /* best peak the search found, 0 = none */
    uint64_t nodes;       /* search nodes visited */
    int64_t lower_bound;  /* a capacity the search proved too small, plus one; 0 = none */
    bool optimal;         /* peak == LOAD, or the search proved it */
    const char *method;   /* which placement won ("skyline/size", "bestfit/area", "search") */
} mp_stats;

/* mp_prep.c */
/** Build @p mp from the problem's arrays (a kiln_mem_problem's blocks,
 *  default alignment @p defalign).  Returns false on out of memory.  O(n log n). */
bool mp_prob_init(mp_prob *mp, uint32_t n, const int64_t *size, const uint32_t *first,
                  const uint32_t *last, const uint32_t *align, const int64_t *fixed,
                  uint32_t defalign, int64_t capacity);
/** Allocate @p mp's block arrays (size, align, lo, hi, fixed) for @p n
 *  blocks, to be filled (lo = first step, hi = last step) before
 *  mp_prob_sections.  false on out of memory. */
bool mp_prob_alloc(mp_prob *mp, uint32_t n, int64_t capacity);
/** Turn the steps in lo / hi into sections and compute the totals and LOAD
 *  (mp_prob_init's second half); sec_t only with @p times (the search reads
 *  it, nothing else: NULL otherwise).  O(n + steps / 64) when the steps are
 *  dense, else O(n) radix passes.  false on out of memory (@p mp is then
 *  freed). */
bool mp_prob_sections(mp_prob *mp, bool times);
void mp_prob_free(mp_prob *mp);
/** Sort @p keys ascending with @p vals moved along, stably (LSD radix over
 *  the 16-bit digits not shared by all keys).  false on out of memory. */
bool mp_sort_pairs(uint64_t *keys, uint32_t *vals, size_t n);
/** Round @p v up to @p a (a power of two). */
static inline int64_t mp_align_up(int64_t v, int64_t a)
{
    return (v + a - 1) & ~(a - 1);
}
/** The peak of offsets @p off: max of off + size.  O(n). */
int64_t mp_peak(const mp_prob *mp, const int64_t *off);
/** true when no two time-overlapping blocks overlap in memory (a debug check;
 *  O(n^2) worst case, used by the standalone driver and asserts only). */
bool mp_valid(const mp_prob *mp, const int64_t *off);

/** For every block, the largest section total over its sections (a sparse
 *  table).  Returns false on out of memory.  O(S log S + n). */
bool mp_max_totals(const mp_prob *mp, int64_t *out);

/* mp_greedy.c */
/** Rank orders for the greedy placements. */
typedef enum mp_order {
    MP_ORDER_AREA,    /* size x lifetime desc (first: the best on the real traces) */
    MP_ORDER_SIZE,    /* size desc, then lifetime desc */
    MP_ORDER_LENGTH,  /* lifetime desc, then size desc */
    MP_ORDER_TOTAL,   /* max section total desc, then area (MiniMalloc's "WAT" idea) */
    MP_ORDER_COUNT
} mp_order;
extern const char *const mp_order_name[MP_ORDER_COUNT];
/** Sort the block indices into @p perm (n entries) by @p order.  O(n log n). */
bool mp_order_blocks(const mp_prob *mp, mp_order order, uint32_t *perm);
/** Skyline greedy: repeatedly place the block whose lowest possible offset
 *  (top of the placed blocks it overlaps in time) is smallest, ties by
 *  @p rank (rank[b] = position in an order, @p perm its inverse).  A block whose key went stale is
 *  re-keyed at most @p rekey_limit times, then placed at its current lowest
 *  offset (always valid).  Fills @p off; returns the peak, or -1 on out of
 *  memory.  O(n rekey_limit log n) (lazy heap, 64-ary max tree). */
int64_t mp_greedy_skyline(const mp_prob *mp, const uint32_t *perm, const uint32_t *rank,
                          uint32_t rekey_limit, int64_t *off);
/** Best fit: blocks in order @p perm, each into the smallest gap between the
 *  already placed blocks it overlaps in time that fits it (else on top).
 *  Returns the peak or -1 on out of memory.  O(sum over blocks of the placed
 *  blocks they overlap, times a log), so meant for problems of modest overlap. */
int64_t mp_greedy_bestfit(const mp_prob *mp, const uint32_t *perm, bool first_fit, int64_t *off);
/** Repair a plan: every movable block whose top is above LOAD, highest
 *  first, moves down into the lowest gap (between the blocks it overlaps in
 *  time) that holds it; passes repeat while the peak drops, at most
 *  @p max_passes; a plan with more than 1024 blocks above LOAD is left as is.  Returns the new peak, or -1 on out of memory (@p off is
 *  then unchanged).  O(passes x candidates x n), candidates capped so a pass
 *  does at most 4 million overlap tests. */
int64_t mp_repair(const mp_prob *mp, int64_t *off, uint32_t max_passes);
/** Number of time-overlapping pairs (a sweep).  O(n log n). */
uint64_t mp_overlap_pairs(const mp_prob *mp);

/* mp_search.c */
#define MP_SEARCH_ORDERS 5
/** The exact search's state over one problem (overlap lists, preorders,
 *  scratch), reused by every decision attempt. */
typedef struct mp_search mp_search;
/** Build the search state of @p mp (kept by reference).  NULL on out of
 *  memory.  O(n^2 + S log S) time, O(n^2 + S) memory. */
mp_search *mp_search_new(const mp_prob *mp);
void mp_search_free(mp_search *s);
/** Decide: place every block with peak <= @p cap, canonical placements with
 *  preorder @p preorder (0 .. MP_SEARCH_ORDERS-1), perturbed when @p seed is
 *  not 0 (each position swapped with one of the next @p window, from the
 *  seed: a randomized restart, deterministic), within @p node_limit nodes
 *  (placements tried) and @p deadline_ns (CLOCK_MONOTONIC).  Returns 1 and fills @p off when
 *  found, 0 when it proved none exists, -1 when it ran out of nodes or time,
 *  -2 out of memory; @p nodes gets the nodes visited.  Exponential worst case. */
int mp_search_run(mp_search *s, int preorder, uint64_t seed, uint32_t window, int64_t cap,
                  uint64_t node_limit, uint64_t deadline_ns, int64_t *off, uint64_t *nodes);
uint64_t mp_now_ns(void);

/* mp_plan.c */
/** Plan @p mp: the greedy orderings, then (effort 2, small problems, not at
 *  LOAD) the search, within the budget.  Fills @p off (n entries), returns the
 *  peak or -1 on out of memory.  Deterministic for a node limit; with a time
 *  budget the search may find different plans on a loaded machine, never worse
 *  than the greedy one. */
int64_t mp_plan(const mp_prob *mp, const mp_params *prm, int64_t *off, mp_stats *st);

#endif /* KILN_MEMPLAN_MP_H */
