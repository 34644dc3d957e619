/*
 * arena.h - bump allocator with a chunk list (libFirm obstack, QBE pools).
 * Nothing is freed individually; kiln__arena_free drops every chunk.  Only
 * core/ includes this header.
 */
#ifndef KILN_CORE_ARENA_H
#define KILN_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct kiln_arena_chunk kiln_arena_chunk;

typedef struct kiln_arena {
    kiln_arena_chunk *head; /* current chunk */
    size_t used;            /* bytes used in head */
    size_t total;           /* bytes allocated over all chunks */
} kiln_arena;

void kiln__arena_init(kiln_arena *a);
/** 8-byte aligned (enough for every IR type: pointers, int64, double), zeroed
 * memory; NULL on OOM. */
void *kiln__arena_alloc(kiln_arena *a, size_t size);
void *kiln__arena_dup(kiln_arena *a, const void *src, size_t size);
void kiln__arena_free(kiln_arena *a);

#endif
