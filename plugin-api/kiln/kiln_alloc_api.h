/*
 * kiln_alloc_api.h - drive a runtime allocator stack (docs/allocators.md):
 * create one by component name with options, allocate and free on streams,
 * mark cross-stream use, move recycle state with events, read figures.
 *
 * A stable API, like the allocator kind it drives.  A plugin (a runtime)
 * creates a stack from its graph; a program that embeds kiln uses
 * kiln_session_alloc_stack_create (kiln_embed.h).  Example, two streams and one event 0 -> 1:
 *
 *   uint32_t ev[2] = {0, 1};
 *   kiln_alloc_config cfg = {sizeof(cfg), 2, 1, ev, 0};
 *   kiln_alloc_stack *a;
 *   kiln_session_alloc_stack_create(s, "three_layer", NULL, 0, &cfg, &a, err);
 *   void *p = kiln_alloc_stack_alloc(a, 4096, 0);      // born on stream 0
 *   kiln_alloc_stack_access(a, p, 0, 1, err);          // stream 1 reads it too
 *   kiln_alloc_stack_free(a, p, 0);                    // 0 is done: local recycle
 *   kiln_alloc_stack_send_events(a, 0, (uint32_t[]){0}, 1, err);
 *   kiln_alloc_stack_free(a, p, 1);                    // 1 is done too
 *   kiln_alloc_stack_wait_events(a, 1, (uint32_t[]){0}, 1, err);
 *   kiln_alloc_stack_last_wait(a);                     // final resource clean
 *   kiln_alloc_stack_destroy(a);
 *
 * A stack is thread safe: every call on one stack is serialised (GE runs all
 * memory kernels under one critical section).
 */
#ifndef KILN_ALLOC_API_H
#define KILN_ALLOC_API_H

#include "kiln_component.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kiln_alloc_stack, kiln_alloc_config, kiln_alloc_stats: kiln_component.h */

/**
 * A stack of allocator component @p name (e.g. "three_layer", "caching") of
 * @p g's context, for @p cfg, with @p nopts "KEY=VALUE" options @p opts.
 * Errors: KILN_ERR_NOT_FOUND (no loaded plugin provides it), KILN_ERR_PARAM /
 * KILN_ERR_NOT_FOUND for a malformed or unknown option, KILN_ERR_INVALID for a
 * bad config, the allocator's own error; each names the allocator.
 */
KILN_API kiln_status kiln_alloc_stack_create(kiln_graph *g, const char *name,
                                             const char *const *opts, uint32_t nopts,
                                             const kiln_alloc_config *cfg,
                                             kiln_alloc_stack **out, kiln_error *err);
/** Destroy @p a; memory still allocated from it is released with it. NULL is fine. */
KILN_API void kiln_alloc_stack_destroy(kiln_alloc_stack *a);
/** @p size bytes born on @p stream (64-byte aligned), or NULL (out of memory,
 *  size 0, stream out of range). */
KILN_API void *kiln_alloc_stack_alloc(kiln_alloc_stack *a, size_t size, uint32_t stream);
/** Free @p ptr on @p stream; it is reused once no stream occupies it. */
KILN_API void kiln_alloc_stack_free(kiln_alloc_stack *a, void *ptr, uint32_t stream);
/** Stream @p dst uses @p ptr (live on @p src) too; free it on dst as well. */
KILN_API kiln_status kiln_alloc_stack_access(kiln_alloc_stack *a, void *ptr, uint32_t src,
                                             uint32_t dst, kiln_error *err);
/** Stream @p stream recorded events @p ids: they carry its recycle state. */
KILN_API kiln_status kiln_alloc_stack_send_events(kiln_alloc_stack *a, uint32_t stream,
                                                  const uint32_t *ids, uint32_t n,
                                                  kiln_error *err);
/** Stream @p stream waited for events @p ids: it settles what they carry. */
KILN_API kiln_status kiln_alloc_stack_wait_events(kiln_alloc_stack *a, uint32_t stream,
                                                  const uint32_t *ids, uint32_t n,
                                                  kiln_error *err);
/** Every stream finished: settle all pending recycles, pools back to L1. */
KILN_API void kiln_alloc_stack_last_wait(kiln_alloc_stack *a);
/** The stack's figures into @p out (struct_size set by the caller). */
KILN_API void kiln_alloc_stack_stats(kiln_alloc_stack *a, kiln_alloc_stats *out);
/**
 * Whether the stack's allocator tracks streams (it has an access hook): then
 * every stream that accessed a block frees it; a stream-blind allocator
 * (caching) must be given a block back once, after its last use on any stream.
 */
KILN_API bool kiln_alloc_stack_tracks_streams(const kiln_alloc_stack *a);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ALLOC_API_H */
