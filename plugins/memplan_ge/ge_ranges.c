/*
 * ge_ranges.c - the size ranges of GE's block assigners (GE_SEMANTICS_BUILD
 * 4.1 "Range construction").
 *
 * With ranges, a level-1 request is rounded up to the smallest ceiling that
 * holds it, so that more released blocks have "the same size".  The binary-
 * block assigner computes them but does not use them (use_range false: it
 * rounds to 512); the max-block assigner's single range is the largest
 * request; the memory-priority range-binary variants use the binary ranges.
 *
 * Binary ranges, over the sizes sorted ascending (zeros dropped):
 *   min = 512 when the largest size is above 512, else the smallest size;
 *   R = ceil(log2(max / min)), at least 1; limit = (number of sizes) / R;
 *   going down from range R-1 to range 1, the ceiling halves and a range
 *   takes the sizes above ceiling + 512 (+0 when max <= 512) from the top;
 *   the sizes left over belong to no range (range 0 stays empty);
 *   then, until nothing changes, an empty range is dropped and a range with
 *   fewer than `limit` sizes that is not the last is merged into the next,
 *   unless it starts (its first, largest, size) at >= 8 MiB with >= 2 sizes;
 *   each range's ceiling is its largest size; ceilings sorted ascending.
 */
#include "gemem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sizes of the non-FIXED blocks, ascending, no zeros; NULL when out of memory. */
static int64_t *sorted_sizes(const kiln_mem_problem *p, uint32_t *n)
{
    int64_t *v = malloc(((size_t)p->block_count + 1) * sizeof(*v));
    if (!v)
        return NULL;
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->block_count; i++)
        if (!(p->blocks[i].flags & KILN_MEM_BLOCK_FIXED) && p->blocks[i].size > 0)
            v[k++] = p->blocks[i].size;
    if (k == 0) /* GE: "all_memory_size can't be empty" */
        v[k++] = GE_ALIGN;
    qsort(v, k, sizeof(*v), cmp_i64);
    *n = k;
    return v;
}

/* A range: a slice of sizes in the order GE pushed them. */
typedef struct range {
    int64_t *v;
    uint32_t n;
} range;

/* GE's PlanRanges: drop empty ranges, merge small ones into the next. */
static bool plan_ranges(range *r, uint32_t *nr, uint32_t limit)
{
    bool changed;
    do {
        changed = false;
        int64_t *tmp = NULL;
        uint32_t ntmp = 0;
        for (uint32_t i = 0; i < *nr;) {
            if (ntmp) {
                int64_t *v = realloc(r[i].v, (size_t)(r[i].n + ntmp) * sizeof(*v));
                if (!v) {
                    free(tmp);
                    return false;
                }
                memcpy(v + r[i].n, tmp, (size_t)ntmp * sizeof(*v));
                r[i].v = v;
                r[i].n += ntmp;
                free(tmp);
                tmp = NULL;
                ntmp = 0;
            }
            bool large = r[i].n >= 2 && r[i].v[0] >= GE_LARGE_BLOCK;
            if (r[i].n == 0 || (r[i].n < limit && *nr - i > 1 && !large)) {
                if (r[i].n) {
                    tmp = r[i].v;
                    ntmp = r[i].n;
                } else {
                    free(r[i].v);
                }
                memmove(r + i, r + i + 1, (size_t)(*nr - i - 1) * sizeof(*r));
                r[--(*nr)] = (range){NULL, 0};
                changed = true;
            } else {
                i++;
            }
        }
        free(tmp); /* never left over: the last range is never merged */
    } while (changed);
    return true;
}

kiln_status ge_ranges_binary(const kiln_mem_problem *p, int64_t **ceils, uint32_t *n)
{
    uint32_t ns;
    int64_t *sz = sorted_sizes(p, &ns);
    *ceils = NULL;
    *n = 0;
    if (!sz)
        return KILN_ERR_NOMEM;
    int64_t max = sz[ns - 1];
    int64_t min = max > GE_ALIGN ? GE_ALIGN : sz[0];
    uint32_t nr = (uint32_t)ceil(log((double)max / (double)min) / log(2.0));
    if (nr == 0)
        nr = 1;
    uint32_t limit = ns / nr;
    range *r = calloc(nr, sizeof(*r));
    int64_t *out = malloc((size_t)nr * sizeof(*out));
    kiln_status rc = KILN_ERR_NOMEM;
    if (!r || !out)
        goto done;
    int64_t ceil_v = max, margin = max > GE_ALIGN ? GE_ALIGN : 0;
    for (uint32_t i = nr - 1; i > 0 && ceil_v > 0; i--) {
        ceil_v /= 2;
        uint32_t k = 0;
        while (ns > 0 && sz[ns - 1] > ceil_v + margin) {
            if (!r[i].v && !(r[i].v = malloc((size_t)ns * sizeof(int64_t))))
                goto done;
            r[i].v[k++] = sz[--ns];
        }
        r[i].n = k;
    }
    uint32_t live = nr;
    if (!plan_ranges(r, &live, limit))
        goto done;
    uint32_t k = 0;
    for (uint32_t i = 0; i < live; i++) {
        int64_t m = 0;
        for (uint32_t j = 0; j < r[i].n; j++)
            m = r[i].v[j] > m ? r[i].v[j] : m;
        if (r[i].n)
            out[k++] = m;
    }
    qsort(out, k, sizeof(*out), cmp_i64);
    *ceils = out;
    *n = k;
    out = NULL;
    rc = KILN_OK;
done:
    if (r)
        for (uint32_t i = 0; i < nr; i++)
            free(r[i].v);
    free(r);
    free(out);
    free(sz);
    return rc;
}

kiln_status ge_ranges_max(const kiln_mem_problem *p, int64_t **ceils, uint32_t *n)
{
    uint32_t ns;
    int64_t *sz = sorted_sizes(p, &ns);
    *n = 0;
    if (!sz)
        return KILN_ERR_NOMEM;
    sz[0] = sz[ns - 1];
    *ceils = sz;
    *n = 1;
    return KILN_OK;
}
