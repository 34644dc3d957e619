/*
 * gemem.h - GE's BlockMemAssigner family over kiln's block ABI
 * (libkiln_memplan_ge.so; docs/memory_planning.md "GE's planners").
 *
 * A GE MemoryBlock is a *group* here: the kiln blocks (GE's node entries,
 * NodeTypeIndex) that level-1 reuse put one after the other into the same
 * memory during the step walk.  Level 2 (ReuseBlocksByLifeTime) nests groups
 * inside larger ones (children side by side from the parent's head), and the
 * final layout places the top-level groups back to back.  Every kiln block of
 * a group gets the group's head offset.
 *
 * Internal to the plugin; nothing here is ABI.
 */
#ifndef KILN_MEMPLAN_GE_H
#define KILN_MEMPLAN_GE_H

#include <kiln/kiln.h>
#include <stdbool.h>
#include <stdint.h>

#define GE_NONE UINT32_MAX
#define GE_ALIGN 512          /* GE's MEM_ALIGN_SIZE */
#define GE_MAX_DEPTH 100      /* GE's kMaxDepthNum (level-2 nesting) */
#define GE_LARGE_BLOCK 8388608 /* 8 MiB: a large range of >= 2 sizes is never merged */

/** GE's ReuseStrategy plus the assigner-level switches. */
typedef struct ge_strategy {
    bool use_range;       /* request -> range ceiling (max-block, range-binary) */
    bool ascending;       /* level-2 tie order (CompareLifeInterval) */
    bool first_release_first_reuse; /* level-1 pool end taken */
    bool memory_priority; /* re-sort after every split (MemoryPriority mode) */
    bool level2;          /* NeedLevel2Reuse: binary true, max-block false */
    bool reuse;           /* false: ge.exec.disableReuseMemory="1" */
} ge_strategy;

/** Growable array of uint32 ids. */
typedef struct ge_ids {
    uint32_t *v;
    uint32_t n, cap;
} ge_ids;

/** One GE MemoryBlock. */
typedef struct ge_group {
    ge_ids members;       /* kiln block indices, in time order (disjoint, sorted) */
    ge_ids children;      /* hosted groups, side by side from head */
    int64_t block_size;   /* level-1 key: 512-rounded request or range ceiling */
    int64_t align_cache;  /* GE's max_real_size_ (0 = recompute; stale after a split) */
    int64_t child_offset; /* sum of the children's aligned sizes */
    int64_t size;         /* after resize */
    int64_t head;         /* offset after layout */
} ge_group;

/** The fields of a group level 2 reads for every pair, packed apart (cache). */
typedef struct ge_hot {
    uint32_t stream;      /* stream of the first member (GE stream_id_) */
    uint32_t begin, end;  /* first member's first_use, last member's last_use */
    uint32_t tail;        /* last member's first_use (GE: its node's topo id) */
    bool is_child;
    bool has_children;
} ge_hot;

/** Blocks by step: which start and which end at each step (CSR). */
typedef struct ge_steps {
    uint32_t count;
    uint32_t *start_off, *start_ids; /* start_ids[start_off[s] .. start_off[s+1]) */
    uint32_t *end_off, *end_ids;     /* inputs-like first, then same-step (workspace-like) */
} ge_steps;

/** One assigner run. */
typedef struct ge_plan {
    const kiln_mem_problem *p;
    const ge_steps *steps;
    ge_strategy s;
    int64_t unit;        /* 512, or a larger alignment the problem asks */
    const int64_t *ceils; /* range ceilings, ascending (use_range) */
    uint32_t nceils;
    ge_group *g;
    ge_hot *h;           /* parallel to g */
    uint32_t ng, capg;
    uint32_t *group_of;  /* kiln block -> group */
    ge_ids order;        /* GE's memory_blocks_ */
    int64_t total;       /* arena bytes of the layout (GE's mem_offset) */
} ge_plan;

/* ---- ge_util.c ---------------------------------------------------------- */
bool ge_ids_push(ge_ids *a, uint32_t x);
bool ge_ids_insert(ge_ids *a, uint32_t at, const uint32_t *x, uint32_t n);
void ge_ids_free(ge_ids *a);
int64_t ge_align_up(int64_t v, int64_t unit);

/**
 * Validate @p p and build its step lists.  KILN_ERR_INVALID naming the block
 * (non-positive size, last_use < first_use, a use beyond step_count, an
 * alignment that is not a power of two); KILN_ERR_NOMEM.  O(n + steps).
 */
kiln_status ge_steps_build(const kiln_mem_problem *p, ge_steps *st, kiln_error *err);
void ge_steps_free(ge_steps *st);
/** The rounding unit: 512, or the largest power-of-two alignment asked if larger. */
int64_t ge_unit(const kiln_mem_problem *p);
/** Arena start of the planned blocks: end of the FIXED blocks, rounded to @p unit. */
int64_t ge_fixed_base(const kiln_mem_problem *p, int64_t unit);

/* ---- ge_ranges.c -------------------------------------------------------- */
/**
 * BinaryBlockMemAssigner::GetMemoryRanges over the sizes of the non-FIXED
 * blocks: ceilings ascending into *ceils (caller frees), count in *n.
 * KILN_ERR_NOMEM.  O(n log n).
 */
kiln_status ge_ranges_binary(const kiln_mem_problem *p, int64_t **ceils, uint32_t *n);
/** MaxBlockMemAssigner::GetMemoryRanges: the one ceiling, the largest size. */
kiln_status ge_ranges_max(const kiln_mem_problem *p, int64_t **ceils, uint32_t *n);

/* ---- ge_walk.c ---------------------------------------------------------- */
/** Aligned size of group @p gi (GE MemoryBlock::AlignSize, cached like GE). */
int64_t ge_group_align(ge_plan *pl, uint32_t gi);
/** Refresh the cached begin/end/tail of group @p gi from its members. */
void ge_group_bounds(ge_plan *pl, uint32_t gi);
/** A new empty group; GE_NONE when out of memory. */
uint32_t ge_group_new(ge_plan *pl, int64_t block_size, uint32_t stream);
/**
 * Level 1: walk the steps, give each block a group (a released group of the
 * same stream and block size, last released first unless first-release-
 * first-reuse, else a new group).  KILN_ERR_NOMEM.  O(n + steps) expected.
 */
kiln_status ge_walk(ge_plan *pl, kiln_error *err);

/* ---- ge_level2.c -------------------------------------------------------- */
/**
 * Level 2 (ReuseBlocksByLifeTime) when the strategy asks, then resize and
 * lay the top-level groups out back to back from @p base; pl->total is the
 * arena size GE reports.  KILN_ERR_NOMEM.  O(G^2 log m) for G groups.
 */
kiln_status ge_level2_and_layout(ge_plan *pl, kiln_error *err);
/** Stable sort of @p ids[0..n) by GE's CompareLifeInterval. */
kiln_status ge_sort_groups(ge_plan *pl, uint32_t *ids, uint32_t n);

/* ---- plugin.c ----------------------------------------------------------- */
/**
 * One assigner run on @p p with strategy @p s: offsets into @p off (one per
 * block, FIXED blocks keep theirs), the peak into *peak.  Errors as above.
 */
kiln_status ge_assign(const kiln_mem_problem *p, const ge_steps *st, ge_strategy s,
                      int64_t *off, int64_t *peak, kiln_error *err);

#endif /* KILN_MEMPLAN_GE_H */
