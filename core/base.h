/*
 * base.h - internal basics shared by every core file: allocation through the
 * context allocator, growable arrays, the error object layout, assertions.
 * Only core/ includes this header.
 */
#ifndef KILN_CORE_BASE_H
#define KILN_CORE_BASE_H

#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Fault injection for tests: fail the Nth allocation from now (0 = off). */
void kiln__fault_set(long nth);
long kiln__fault_hits(void);

void *kiln__malloc(size_t n);
void *kiln__calloc(size_t n, size_t size);
void *kiln__realloc(void *p, size_t n);
void kiln__free(void *p);
/* Give the heap's free pages back to the kernel (glibc: malloc_trim; a no-op
 * elsewhere).  Called between the stages of a large build, where the free
 * fragments a stage leaves would otherwise stay resident. */
void kiln__heap_trim(void);
char *kiln__strdup(const char *s);

/** Monotonic clock in nanoseconds (pass timing). */
static inline uint64_t kiln__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * Grow *arr (element size @p esz) so that it holds at least @p need elements;
 * *cap is updated.  Returns false on OOM (array untouched).  Doubling growth.
 */
bool kiln__grow(void **arr, uint32_t *cap, uint32_t need, size_t esz);
/** The capacity kiln__grow picks for @p need from @p cap (doubling from 8),
 * for parallel arrays that grow together. */
uint32_t kiln__grow_cap(uint32_t cap, uint32_t need);
#define KILN_GROW(arr, cap, need) kiln__grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/*
 * The error object.  Plugins see only a pointer (kiln_status.h declares the
 * type opaque), so its layout is kiln's own and may change.  The message is
 * kept whole up to KILN_MSG_SIZE - 1 bytes (longer ones end in a marker).  Of
 * a longer chain of frames, the first KILN_HEAD_FRAMES pushed (innermost:
 * node, JSON path) and the last KILN_TAIL_FRAMES (outermost: file, pass,
 * stage) are kept, and the format says how many in between were dropped.
 */
#define KILN_HEAD_FRAMES 8
#define KILN_TAIL_FRAMES 8
#define KILN_MAX_FRAMES (KILN_HEAD_FRAMES + KILN_TAIL_FRAMES)
#define KILN_MSG_SIZE 8192
#define KILN_FRAME_SIZE 256
/** A buffer this large holds kiln_error_format's text of any error. */
#define KILN_ERROR_TEXT_SIZE (KILN_MSG_SIZE + KILN_MAX_FRAMES * (KILN_FRAME_SIZE + 2) + 64)

struct kiln_error {
    kiln_status code;
    uint32_t count;       /* errors recorded (first one kept) */
    uint32_t frame_count; /* frames pushed since the first error (also those not kept) */
    char msg[KILN_MSG_SIZE];
    /* [0, HEAD): the first frames pushed, innermost first; [HEAD, MAX): the
     * last ones, a ring (push i > HEAD goes to HEAD + (i - HEAD) % TAIL) */
    char frames[KILN_MAX_FRAMES][KILN_FRAME_SIZE];
};

/**
 * snprintf for text where truncation is acceptable and intended (JSON paths,
 * messages): always NUL-terminates, returns the would-be length.  Being a
 * va_list wrapper, it is not flagged by -Wformat-truncation at -O2.
 */
int kiln__fmt(char *buf, size_t size, const char *fmt, ...) KILN_PRINTF(3, 4);

/** Reset an error object to "no error". */
KILN_API void kiln_error_clear(kiln_error *err);
/** Format "frame: frame: message" (outermost first) into @p buf. */
KILN_API void kiln_error_format(const kiln_error *err, char *buf, size_t size);

#ifndef NDEBUG
#define KILN_ASSERT(c)                                                                      \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            fprintf(stderr, "kiln: internal assertion failed: %s (%s:%d)\n", #c, __FILE__, \
                    __LINE__);                                                              \
            abort();                                                                        \
        }                                                                                   \
    } while (0)
#else
#define KILN_ASSERT(c) ((void)0)
#endif

#define KILN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KILN_UNUSED(x) ((void)(x))

#endif /* KILN_CORE_BASE_H */
