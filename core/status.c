/*
 * status.c - status names, the error object, and the allocation layer.
 *
 * Errors: the first recorded error is the cause and is kept whole (up to
 * KILN_MSG_SIZE); later ones only increment count.  Frames pushed after the
 * first error describe where it happened, innermost first, and print
 * outermost first.  Of a long chain the first and the last frames are kept
 * (the node and JSON path, and the file, pass and stage), the middle ones
 * are counted and reported as left out.
 *
 * Allocation goes through one process-wide allocator so tests can inject
 * failures (fail the Nth allocation) and observe that every path reports
 * KILN_ERR_NOMEM instead of crashing.  The fault counter is the only mutable
 * global in core; it exists for tests and is atomic.  Everything here may be
 * called from several threads at once (an error object belongs to one thread
 * at a time: kiln__parallel_run gives each task its own).
 *
 * Large blocks (>= 2 MiB: the dense arrays of a graph past ~100k nodes, the
 * analyses' arrays) are advised for transparent huge pages.  Whole-graph
 * walks over a million nodes touch hundreds of megabytes; with 4 KiB pages
 * every random step costs a TLB miss and every fresh array a page fault per
 * 4 KiB, with 2 MiB pages neither.  Where the kernel runs THP in "madvise"
 * mode (Debian's default) nothing else enables them.  KILN_HUGEPAGES=0 in the
 * environment turns the advice off (to measure its effect).
 */
#include "base.h"
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

int kiln__fmt(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

const char *kiln_status_name(kiln_status st)
{
    switch (st) {
#define X(name, value, desc) \
    case KILN_##name:        \
        return #name;
        KILN_STATUS_MAP(X)
#undef X
    }
    return "UNKNOWN";
}

const char *kiln_status_str(kiln_status st)
{
    switch (st) {
#define X(name, value, desc) \
    case KILN_##name:        \
        return desc;
        KILN_STATUS_MAP(X)
#undef X
    }
    return "unknown status";
}

void kiln_error_clear(kiln_error *err)
{
    if (!err)
        return;
    err->code = KILN_OK;
    err->count = 0;
    err->frame_count = 0;
    err->msg[0] = 0;
}

kiln_status kiln_errorf(kiln_error *err, kiln_status code, const char *fmt, ...)
{
    if (!err)
        return code;
    if (err->count++ == 0 || err->code == KILN_OK) {
        err->code = code;
        err->frame_count = 0;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        static const char cut[] = " [message cut]";
        if (n >= (int)sizeof(err->msg))
            memcpy(err->msg + sizeof(err->msg) - sizeof(cut), cut, sizeof(cut));
    }
    return err->code;
}

/* Slot of the i-th frame pushed (0-based), see struct kiln_error. */
static uint32_t frame_slot(uint32_t i)
{
    return i < KILN_HEAD_FRAMES ? i : KILN_HEAD_FRAMES + (i - KILN_HEAD_FRAMES) % KILN_TAIL_FRAMES;
}

kiln_status kiln_error_push(kiln_error *err, const char *fmt, ...)
{
    if (!err)
        return KILN_ERR_INTERNAL;
    if (err->frame_count < UINT32_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->frames[frame_slot(err->frame_count)], KILN_FRAME_SIZE, fmt, ap);
        va_end(ap);
        err->frame_count++;
    }
    return err->code;
}

kiln_status kiln_error_code(const kiln_error *err)
{
    return err ? err->code : KILN_OK;
}

const char *kiln_error_message(const kiln_error *err)
{
    return err ? err->msg : "";
}

void kiln_error_format(const kiln_error *err, char *buf, size_t size)
{
    if (!size)
        return;
    size_t len = 0;
    buf[0] = 0;
    uint32_t n = err->frame_count;
    uint32_t head = n < KILN_HEAD_FRAMES ? n : KILN_HEAD_FRAMES;
    /* the kept tail: pushes [first_tail, n) */
    uint32_t first_tail = n - head > KILN_TAIL_FRAMES ? n - KILN_TAIL_FRAMES : head;
    for (uint32_t i = n; i-- > first_tail && len < size;) {
        int k = snprintf(buf + len, size - len, "%s: ", err->frames[frame_slot(i)]);
        if (k > 0)
            len += (size_t)k;
    }
    if (first_tail > head && len < size) {
        int k = snprintf(buf + len, size - len, "[%u frames left out]: ", first_tail - head);
        if (k > 0)
            len += (size_t)k;
    }
    for (uint32_t i = head; i-- > 0 && len < size;) {
        int k = snprintf(buf + len, size - len, "%s: ", err->frames[i]);
        if (k > 0)
            len += (size_t)k;
    }
    if (len < size)
        snprintf(buf + len, size - len, "%s", err->msg[0] ? err->msg : kiln_status_str(err->code));
}

/* ---- allocation -------------------------------------------------------- */

static atomic_long fault_countdown; /* 0 = off */
static atomic_long fault_hits;

void kiln__fault_set(long nth)
{
    atomic_store(&fault_countdown, nth);
    atomic_store(&fault_hits, 0);
}

long kiln__fault_hits(void)
{
    return atomic_load(&fault_hits);
}

/* One compare-and-swap step per allocation while a fault is armed, so threads
 * allocating at once count exactly: the Nth allocation fails, and every one
 * after it (the countdown stays at 1: a persistent fault). */
static bool fault_now(void)
{
    long c = atomic_load(&fault_countdown);
    while (c > 0) {
        if (atomic_compare_exchange_weak(&fault_countdown, &c, c == 1 ? 1 : c - 1)) {
            if (c == 1) {
                atomic_fetch_add(&fault_hits, 1);
                return true;
            }
            return false;
        }
    }
    return false;
}

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_MIN ((size_t)2 << 20)

/* -1 = not read yet, 0 = off, 1 = on */
static atomic_int huge_state = -1;

static bool huge_enabled(void)
{
    int s = atomic_load_explicit(&huge_state, memory_order_relaxed);
    if (s < 0) {
        const char *e = getenv("KILN_HUGEPAGES");
        s = !(e && strcmp(e, "0") == 0);
        atomic_store_explicit(&huge_state, s, memory_order_relaxed);
    }
    return s != 0;
}

/* Advise the 2 MiB-aligned interior of a large block for huge pages.  Only
 * advice: failure (no THP in this kernel) changes nothing. */
static void *advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    if (p && n >= HUGE_MIN && huge_enabled()) {
        uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        uintptr_t e = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)n;
#endif
    return p;
}

void *kiln__malloc(size_t n)
{
    if (fault_now())
        return NULL;
    return advise_huge(malloc(n ? n : 1), n);
}

void *kiln__calloc(size_t n, size_t size)
{
    if (fault_now())
        return NULL;
    size_t total = n && size && n <= SIZE_MAX / size ? n * size : 0;
    return advise_huge(calloc(n ? n : 1, size ? size : 1), total);
}

void *kiln__realloc(void *p, size_t n)
{
    if (fault_now())
        return NULL;
    return advise_huge(realloc(p, n ? n : 1), n);
}

void kiln__heap_trim(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

void kiln__free(void *p)
{
    free(p);
}

char *kiln__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void *kiln_alloc(size_t size)
{
    return kiln__malloc(size);
}

void kiln_free(void *ptr)
{
    kiln__free(ptr);
}

uint32_t kiln__grow_cap(uint32_t cap, uint32_t need)
{
    uint64_t n = cap ? cap : 8;
    while (n < need)
        n *= 2;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

bool kiln__grow(void **arr, uint32_t *cap, uint32_t need, size_t esz)
{
    if (need <= *cap)
        return true;
    uint32_t n = kiln__grow_cap(*cap, need);
    void *p = kiln__realloc(*arr, (size_t)n * esz);
    if (!p)
        return false;
    *arr = p;
    *cap = n;
    return true;
}
