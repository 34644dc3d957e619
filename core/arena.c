/*
 * arena.c - chunked bump allocator.  Chunks grow geometrically from 512 B to
 * 1 MiB; an allocation larger than a quarter chunk gets a chunk of its own
 * (inserted behind the head so the head's free space is not wasted).
 */
#include "arena.h"
#include "base.h"

struct kiln_arena_chunk {
    kiln_arena_chunk *next;
    size_t size; /* payload bytes */
    _Alignas(8) unsigned char data[];
};

#define ARENA_MIN 512u
#define ARENA_MAX (1u << 20)

void kiln__arena_init(kiln_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}

static kiln_arena_chunk *chunk_new(size_t size)
{
    kiln_arena_chunk *c = kiln__malloc(sizeof(*c) + size);
    if (c) {
        c->next = NULL;
        c->size = size;
    }
    return c;
}

void *kiln__arena_alloc(kiln_arena *a, size_t size)
{
    size = (size + 7u) & ~(size_t)7u;
    if (size == 0)
        size = 8;
    if (a->head && a->used + size <= a->head->size) {
        void *p = a->head->data + a->used;
        a->used += size;
        memset(p, 0, size);
        return p;
    }
    size_t next = a->head ? a->head->size * 2 : ARENA_MIN;
    if (next > ARENA_MAX)
        next = ARENA_MAX;
    if (size > next / 4 && a->head) {
        /* Big block: its own chunk, behind the head. */
        kiln_arena_chunk *c = chunk_new(size);
        if (!c)
            return NULL;
        c->next = a->head->next;
        a->head->next = c;
        a->total += size;
        memset(c->data, 0, size);
        return c->data;
    }
    if (next < size)
        next = size;
    kiln_arena_chunk *c = chunk_new(next);
    if (!c)
        return NULL;
    c->next = a->head;
    a->head = c;
    a->used = size;
    a->total += next;
    memset(c->data, 0, size);
    return c->data;
}

void *kiln__arena_dup(kiln_arena *a, const void *src, size_t size)
{
    void *p = kiln__arena_alloc(a, size);
    if (p && size)
        memcpy(p, src, size);
    return p;
}

void kiln__arena_free(kiln_arena *a)
{
    kiln_arena_chunk *c = a->head;
    while (c) {
        kiln_arena_chunk *n = c->next;
        kiln__free(c);
        c = n;
    }
    kiln__arena_init(a);
}
