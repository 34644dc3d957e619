/*
 * status.c - status names, the error object, and the allocation layer.
 *
 * Errors: the first recorded error is the cause and is kept; later ones only
 * increment count.  Frames pushed after the first error describe where it
 * happened, innermost first, and print outermost first.
 *
 * Allocation goes through one process-wide allocator so tests can inject
 * failures (fail the Nth allocation) and observe that every path reports
 * KILN_ERR_NOMEM instead of crashing.  The fault counter is the only mutable
 * global in core; it exists for tests and is atomic.
 */
#include "base.h"
#include <stdarg.h>
#include <stdatomic.h>

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
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return err->code;
}

kiln_status kiln_error_push(kiln_error *err, const char *fmt, ...)
{
    if (!err)
        return KILN_ERR_INTERNAL;
    if (err->frame_count < KILN_MAX_FRAMES) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->frames[err->frame_count], KILN_FRAME_SIZE, fmt, ap);
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
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t i = err->frame_count; i-- > 0 && len < size;) {
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

static bool fault_now(void)
{
    long c = atomic_load(&fault_countdown);
    if (c <= 0)
        return false;
    if (atomic_fetch_sub(&fault_countdown, 1) == 1) {
        atomic_fetch_add(&fault_hits, 1);
        atomic_store(&fault_countdown, 1); /* keep failing: persistent fault */
        return true;
    }
    return false;
}

void *kiln__malloc(size_t n)
{
    if (fault_now())
        return NULL;
    return malloc(n ? n : 1);
}

void *kiln__calloc(size_t n, size_t size)
{
    if (fault_now())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *kiln__realloc(void *p, size_t n)
{
    if (fault_now())
        return NULL;
    return realloc(p, n ? n : 1);
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

bool kiln__grow(void **arr, uint32_t *cap, uint32_t need, size_t esz)
{
    if (need <= *cap)
        return true;
    uint64_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    void *p = kiln__realloc(*arr, (size_t)n * esz);
    if (!p)
        return false;
    *arr = p;
    *cap = (uint32_t)n;
    return true;
}
