/*
 * kmodel_file.c - pieces of the model file shared by the writer and the
 * loader: section names, little-endian fields, the writer's arena.
 */
#include "kmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *km_section_name(uint32_t kind, char *buf, size_t size)
{
    switch (kind) {
    case KM_SEC_META: return "META";
    case KM_SEC_GRAPH: return "GRAPH";
    case KM_SEC_WEIGHTS: return "WEIGHTS";
    default: snprintf(buf, size, "kind %u", kind); return buf;
    }
}

void km_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

void km_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void km_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint16_t km_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t km_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t km_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

struct km_arena_block {
    km_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *km_arena_alloc(km_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    km_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof(*b) + cap);
        if (!b) {
            a->oom = 1;
            return NULL;
        }
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void km_arena_free(km_arena *a)
{
    while (a->head) {
        km_arena_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    a->oom = 0;
}
