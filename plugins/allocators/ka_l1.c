/*
 * ka_l1.c - growable arrays, size bins and L1, the caching allocator over
 * system memory (docs/allocators.md#l1).
 *
 * L1 is a best-fit heap with coalescing (TensorFlow's BFC) in one region of
 * address space reserved up to the capacity (mmap, MAP_NORESERVE: pages are
 * committed when first touched).  A request is rounded to 512 B and takes the
 * smallest free chunk that holds it, splitting off the rest; a freed chunk
 * merges with free neighbours, so memory freed by one size serves another
 * and the heap's top (reserved memory) stays close to the live peak.  The
 * heap grows at its top on a miss; free memory at the top beyond the release
 * threshold is given back (MADV_DONTNEED) and the top lowered.  A request the
 * capacity cannot hold fails and returns NULL (GE: 1 TiB fails).
 */
#include "ka.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static void erase_bin(ka_bins *s, uint32_t i)
{
    memmove(s->b + i, s->b + i + 1, (size_t)(s->n - i - 1) * sizeof(*s->b));
    s->n--;
}

ka_l1_block *ka_bins_take_fit(ka_bins *s, size_t size, size_t max)
{
    uint32_t i = ka_bins_lower(s, size);
    if (i == s->n || s->b[i].size > max)
        return NULL;
    ka_l1_block *blk = s->b[i].head;
    s->b[i].head = blk->next;
    if (blk->next)
        blk->next->bprev = NULL;
    s->bytes -= blk->size;
    if (--s->b[i].count == 0)
        erase_bin(s, i);
    blk->next = blk->bprev = NULL;
    return blk;
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
    blk->bprev = NULL;
    blk->next = s->b[i].head;
    if (blk->next)
        blk->next->bprev = blk;
    s->b[i].head = blk;
    s->b[i].count++;
    s->bytes += blk->size;
    return true;
}

void ka_bins_remove(ka_bins *s, ka_l1_block *blk)
{
    uint32_t i = ka_bins_lower(s, blk->size);
    if (blk->bprev)
        blk->bprev->next = blk->next;
    else
        s->b[i].head = blk->next;
    if (blk->next)
        blk->next->bprev = blk->bprev;
    s->bytes -= blk->size;
    if (--s->b[i].count == 0)
        erase_bin(s, i);
    blk->next = blk->bprev = NULL;
}

void ka_bins_free(ka_bins *s)
{
    free(s->b);
    memset(s, 0, sizeof(*s));
}

/* ---- L1 ------------------------------------------------------------------ */

#define GRAIN 512u

size_t ka_size_class(size_t size)
{
    if (size == 0 || size > (SIZE_MAX >> 2))
        return 0;
    return (size + GRAIN - 1) & ~(size_t)(GRAIN - 1);
}

void ka_l1_init(ka_l1 *l1, size_t capacity, size_t release_threshold)
{
    memset(l1, 0, sizeof(*l1));
    if (!capacity) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        capacity = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : ((size_t)1 << 36);
    }
    l1->capacity = ka_size_class(capacity) ? ka_size_class(capacity) : capacity;
    l1->release_threshold = release_threshold;
}

static ka_l1_block *desc(ka_l1 *l1)
{
    ka_l1_block *d = l1->spare;
    if (d)
        l1->spare = d->next;
    else if (!(d = malloc(sizeof(*d))))
        return NULL;
    memset(d, 0, sizeof(*d));
    return d;
}

static void undesc(ka_l1 *l1, ka_l1_block *d)
{
    d->next = l1->spare;
    l1->spare = d;
}

static size_t top_end(const ka_l1 *l1)
{
    return l1->top ? (size_t)((char *)l1->top->addr - l1->base) + l1->top->size : 0;
}

/* Lower the heap's top while its highest chunk is free and more than the
 * threshold of free bytes sits there; the pages go back to the system. */
static void trim(ka_l1 *l1, size_t keep)
{
    ka_l1_block *t = l1->top;
    if (!t || !t->is_free || t->size <= keep)
        return;
    size_t cut = (t->size - keep) & ~(size_t)(GRAIN - 1);
    if (!cut)
        return;
    char *from = (char *)t->addr + (t->size - cut);
    long psz = sysconf(_SC_PAGESIZE);
    uintptr_t pa = ((uintptr_t)from + (uintptr_t)psz - 1) & ~(uintptr_t)(psz - 1);
    uintptr_t pe = (uintptr_t)from + cut;
    if (pe > pa)
        madvise((void *)pa, pe - pa, MADV_DONTNEED);
    ka_bins_remove(&l1->cache, t);
    t->size -= cut;
    l1->st.reserved -= cut;
    l1->st.system_frees++;
    if (t->size) {
        ka_bins_put(&l1->cache, t); /* same or smaller bin: cannot fail for space... */
    } else {
        l1->top = t->lo;
        if (t->lo)
            t->lo->hi = NULL;
        undesc(l1, t);
    }
    l1->st.cached = l1->cache.bytes;
}

void ka_l1_release_cache(ka_l1 *l1) { trim(l1, 0); }
void ka_l1_trim(ka_l1 *l1, size_t keep) { trim(l1, keep); }

static ka_l1_block *hand_out(ka_l1 *l1, ka_l1_block *blk)
{
    blk->is_free = false;
    l1->st.occupied += blk->size;
    if (l1->st.occupied > l1->st.peak_occupied)
        l1->st.peak_occupied = l1->st.occupied;
    l1->st.cached = l1->cache.bytes;
    return blk;
}

/* Split @p blk to @p size; the rest becomes a free chunk right after it. */
static void split(ka_l1 *l1, ka_l1_block *blk, size_t size)
{
    if (blk->size - size < GRAIN)
        return;
    ka_l1_block *r = desc(l1);
    if (!r)
        return; /* keep it whole */
    r->addr = (char *)blk->addr + size;
    r->size = blk->size - size;
    r->lo = blk;
    r->hi = blk->hi;
    if (blk->hi)
        blk->hi->lo = r;
    else
        l1->top = r;
    blk->hi = r;
    blk->size = size;
    r->is_free = true;
    if (!ka_bins_put(&l1->cache, r)) {
        /* no room to file it: give it back to blk */
        blk->hi = r->hi;
        if (r->hi)
            r->hi->lo = blk;
        else
            l1->top = blk;
        blk->size += r->size;
        undesc(l1, r);
    }
}

static bool map_region(ka_l1 *l1)
{
    if (l1->base)
        return true;
    void *p = mmap(NULL, l1->capacity, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    l1->base = p;
    return true;
}

ka_l1_block *ka_l1_alloc(ka_l1 *l1, size_t size) { return ka_l1_alloc_ex(l1, size, true); }

ka_l1_block *ka_l1_alloc_ex(ka_l1 *l1, size_t size, bool grow)
{
    size_t cls = ka_size_class(size);
    if (!cls || cls > l1->capacity || !map_region(l1)) {
        l1->st.failures++;
        return NULL;
    }
    ka_l1_block *blk = ka_bins_take_fit(&l1->cache, cls, SIZE_MAX);
    if (blk) {
        l1->st.hits++;
        split(l1, blk, cls);
        return hand_out(l1, blk);
    }
    if (!grow)
        return NULL;
    l1->st.misses++;
    /* grow the top: a free top chunk is extended, else a new chunk appended */
    ka_l1_block *t = l1->top;
    size_t end = top_end(l1);
    size_t need = t && t->is_free ? cls - t->size : cls;
    if (l1->refuse || end + need > l1->capacity) {
        l1->st.failures++;
        return NULL;
    }
    if (t && t->is_free) {
        ka_bins_remove(&l1->cache, t);
        t->size = cls;
        blk = t;
    } else {
        if (!(blk = desc(l1))) {
            l1->st.failures++;
            return NULL;
        }
        blk->addr = l1->base + end;
        blk->size = cls;
        blk->lo = t;
        if (t)
            t->hi = blk;
        l1->top = blk;
    }
    l1->st.system_allocs++;
    l1->st.reserved += need;
    if (l1->st.reserved > l1->st.peak_reserved)
        l1->st.peak_reserved = l1->st.reserved;
    if (l1->st.reserved > l1->st.steady_peak_reserved)
        l1->st.steady_peak_reserved = l1->st.reserved;
    return hand_out(l1, blk);
}

void ka_l1_free(ka_l1 *l1, ka_l1_block *blk)
{
    if (!blk)
        return;
    l1->st.occupied -= blk->size;
    blk->next = blk->bprev = NULL;
    ka_l1_block *lo = blk->lo, *hi = blk->hi;
    if (hi && hi->is_free) {
        ka_bins_remove(&l1->cache, hi);
        blk->size += hi->size;
        blk->hi = hi->hi;
        if (hi->hi)
            hi->hi->lo = blk;
        else
            l1->top = blk;
        undesc(l1, hi);
    }
    if (lo && lo->is_free) {
        ka_bins_remove(&l1->cache, lo);
        lo->size += blk->size;
        lo->hi = blk->hi;
        if (blk->hi)
            blk->hi->lo = lo;
        else
            l1->top = lo;
        undesc(l1, blk);
        blk = lo;
    }
    blk->is_free = true;
    if (!ka_bins_put(&l1->cache, blk))
        blk->is_free = false; /* OOM filing it: leaked until fini, never reused twice */
    if (l1->top && l1->top->is_free && l1->top->size > l1->release_threshold)
        trim(l1, l1->release_threshold);
    l1->st.cached = l1->cache.bytes;
}

void ka_l1_fini(ka_l1 *l1)
{
    for (ka_l1_block *t = l1->top; t;) {
        ka_l1_block *lo = t->lo;
        free(t);
        t = lo;
    }
    l1->top = NULL;
    ka_bins_free(&l1->cache);
    while (l1->spare) {
        ka_l1_block *n = l1->spare->next;
        free(l1->spare);
        l1->spare = n;
    }
    if (l1->base)
        munmap(l1->base, l1->capacity);
    l1->base = NULL;
}
