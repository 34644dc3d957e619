/*
 * ka_l1.c - growable arrays, size-class bins and L1, the caching allocator
 * over system memory (docs/allocators.md#l1).
 *
 * A request is rounded to its size class (ka_size_class); freed blocks stay
 * cached in a bin per class and serve the next request of the class (or of a
 * class at most 1/16 smaller) without a system call.  On a miss the cache is
 * given back to the system first when it holds at least the request's bytes
 * (memory held but unusable for this request), so reserved memory tracks the
 * live peak instead of the sum of every size ever seen; the release threshold
 * bounds the cached bytes after every free; the capacity bounds reserved
 * memory (GE: a request the device cannot hold fails and returns NULL).
 */
#include "ka.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool ka_vec_push(ka_vec *v, const void *e, size_t esz)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 8;
        void *p = realloc(v->p, (size_t)cap * esz);
        if (!p)
            return false;
        v->p = p;
        v->cap = cap;
    }
    memcpy((char *)v->p + (size_t)v->n * esz, e, esz);
    v->n++;
    return true;
}

void ka_vec_free(ka_vec *v)
{
    free(v->p);
    memset(v, 0, sizeof(*v));
}

/* ---- bins ---------------------------------------------------------------- */

uint32_t ka_bins_lower(const ka_bins *s, size_t size)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->b[mid].size < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ka_l1_block *pop(ka_bins *s, uint32_t i)
{
    ka_l1_block *blk = s->b[i].head;
    s->b[i].head = blk->next;
    s->b[i].count--;
    s->bytes -= blk->size;
    blk->next = NULL;
    return blk;
}

ka_l1_block *ka_bins_take(ka_bins *s, size_t size)
{
    uint32_t i = ka_bins_lower(s, size);
    if (i < s->n && s->b[i].size == size && s->b[i].head)
        return pop(s, i);
    return NULL;
}

ka_l1_block *ka_bins_take_fit(ka_bins *s, size_t size, size_t max)
{
    for (uint32_t i = ka_bins_lower(s, size); i < s->n && s->b[i].size <= max; i++)
        if (s->b[i].head)
            return pop(s, i);
    return NULL;
}

bool ka_bins_put(ka_bins *s, ka_l1_block *blk)
{
    uint32_t i = ka_bins_lower(s, blk->size);
    if (i == s->n || s->b[i].size != blk->size) {
        if (s->n == s->cap) {
            uint32_t cap = s->cap ? s->cap * 2 : 16;
            ka_bin *b = realloc(s->b, (size_t)cap * sizeof(*b));
            if (!b)
                return false;
            s->b = b;
            s->cap = cap;
        }
        memmove(s->b + i + 1, s->b + i, (size_t)(s->n - i) * sizeof(*s->b));
        s->b[i] = (ka_bin){blk->size, NULL, 0};
        s->n++;
    }
    blk->next = s->b[i].head;
    s->b[i].head = blk;
    s->b[i].count++;
    s->bytes += blk->size;
    return true;
}

void ka_bins_free(ka_bins *s)
{
    free(s->b);
    memset(s, 0, sizeof(*s));
}

/* ---- L1 ------------------------------------------------------------------ */

size_t ka_size_class(size_t size)
{
    if (size == 0 || size > (SIZE_MAX >> 2))
        return 0;
    if (size <= 65536)
        return (size + 511) & ~(size_t)511;
    size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)size));
    size_t g = top >> 5;
    return (size + g - 1) & ~(g - 1);
}

void ka_l1_init(ka_l1 *l1, size_t capacity, size_t release_threshold)
{
    memset(l1, 0, sizeof(*l1));
    if (!capacity) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        capacity = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : SIZE_MAX;
    }
    l1->capacity = capacity;
    l1->release_threshold = release_threshold;
    l1->alignment = 64;
}

static void sys_free(ka_l1 *l1, ka_l1_block *blk)
{
    free(blk->addr);
    l1->st.reserved -= blk->size;
    l1->st.system_frees++;
    blk->addr = NULL;
    blk->next = l1->spare;
    l1->spare = blk;
}

/* Give cached blocks back to the system, largest classes first, until at most
 * @p keep bytes stay cached. */
static void release_down_to(ka_l1 *l1, size_t keep)
{
    for (uint32_t i = l1->cache.n; i-- > 0 && l1->cache.bytes > keep;)
        while (l1->cache.b[i].head && l1->cache.bytes > keep)
            sys_free(l1, pop(&l1->cache, i));
}

void ka_l1_release_cache(ka_l1 *l1)
{
    release_down_to(l1, 0);
    l1->st.cached = 0;
}

static void *sys_alloc(ka_l1 *l1, size_t size)
{
    if (l1->refuse || (l1->capacity && l1->st.reserved + size > l1->capacity))
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, l1->alignment, size) != 0)
        return NULL;
    return p;
}

static ka_l1_block *hand_out(ka_l1 *l1, ka_l1_block *blk)
{
    l1->st.occupied += blk->size;
    if (l1->st.occupied > l1->st.peak_occupied)
        l1->st.peak_occupied = l1->st.occupied;
    l1->st.cached = l1->cache.bytes;
    return blk;
}

ka_l1_block *ka_l1_alloc(ka_l1 *l1, size_t size)
{
    size_t cls = ka_size_class(size);
    if (!cls) {
        l1->st.failures++;
        return NULL;
    }
    ka_l1_block *blk = ka_bins_take_fit(&l1->cache, cls, cls + cls / 16);
    if (blk) {
        l1->st.hits++;
        return hand_out(l1, blk);
    }
    l1->st.misses++;
    /* what is cached cannot serve this class: when it could hold it, give it back */
    if (l1->cache.bytes >= cls)
        release_down_to(l1, 0);
    void *p = sys_alloc(l1, cls);
    if (!p && l1->cache.bytes) {
        release_down_to(l1, 0);
        p = sys_alloc(l1, cls);
    }
    if (!p) {
        l1->st.failures++;
        l1->st.cached = l1->cache.bytes;
        return NULL;
    }
    blk = l1->spare;
    if (blk)
        l1->spare = blk->next;
    else if (!(blk = malloc(sizeof(*blk)))) {
        free(p);
        l1->st.failures++;
        return NULL;
    }
    blk->addr = p;
    blk->size = cls;
    blk->next = NULL;
    l1->st.system_allocs++;
    l1->st.reserved += cls;
    if (l1->st.reserved > l1->st.peak_reserved)
        l1->st.peak_reserved = l1->st.reserved;
    return hand_out(l1, blk);
}

void ka_l1_free(ka_l1 *l1, ka_l1_block *blk)
{
    if (!blk)
        return;
    l1->st.occupied -= blk->size;
    if (!ka_bins_put(&l1->cache, blk))
        sys_free(l1, blk);
    if (l1->cache.bytes > l1->release_threshold)
        release_down_to(l1, l1->release_threshold);
    l1->st.cached = l1->cache.bytes;
}

void ka_l1_fini(ka_l1 *l1)
{
    ka_l1_release_cache(l1);
    ka_bins_free(&l1->cache);
    while (l1->spare) {
        ka_l1_block *n = l1->spare->next;
        free(l1->spare);
        l1->spare = n;
    }
}
