/*
 * onnx_util.c - small helpers of the ONNX frontend: a string-keyed open
 * addressing hash map (FNV-1a, linear probing, load factor <= 1/2), a bump
 * arena for the protobuf-c structures the exporter builds, the UTF-8 check
 * the JSON writer needs, and unique node naming.  No global state.
 */
#include "onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- string map ---------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

void ox_map_free(ox_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

static bool map_grow(ox_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(ncap, sizeof(*keys));
    uint64_t *vals = calloc(ncap, sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = (size_t)hash_str(m->keys[i]) & (ncap - 1);
        while (keys[j])
            j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    return true;
}

bool ox_map_put(ox_map *m, const char *key, uint64_t val)
{
    if ((m->count + 1) * 2 > m->cap && !map_grow(m))
        return false;
    size_t j = (size_t)hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            m->vals[j] = val;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->count++;
    return true;
}

bool ox_map_get(const ox_map *m, const char *key, uint64_t *val)
{
    if (!m->cap)
        return false;
    size_t j = (size_t)hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            if (val)
                *val = m->vals[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

/* ---- arena --------------------------------------------------------------- */

#define ARENA_BLOCK (64u * 1024u)

struct ox_arena_block {
    ox_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *ox_arena_alloc(ox_arena *a, size_t size)
{
    size = (size + 15u) & ~(size_t)15u;
    if (size == 0)
        size = 16;
    ox_arena_block *b = a->head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->used = 0;
        /* A big allocation gets its own block behind the current one, so
         * the current block's free space stays usable. */
        if (a->head && size > ARENA_BLOCK) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *ox_arena_strdup(ox_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ox_arena_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *ox_arena_printf(ox_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = ox_arena_alloc(a, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void ox_arena_free(ox_arena *a)
{
    ox_arena_block *b = a->head;
    while (b) {
        ox_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

/* The rules of jansson (the JSON writer refuses anything else): no overlong
 * forms, no surrogates, nothing above U+10FFFF.  NUL bytes are the caller's. */
bool ox_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

/* ---- naming -------------------------------------------------------------- */

bool ox_unique_node_name(const kiln_graph *g, const char *base, uint32_t *next, char *buf,
                         size_t size)
{
    int n = snprintf(buf, size, "%s", base);
    if (n < 0 || (size_t)n >= size)
        return false;
    if (base[0] && !kiln_graph_find_node(g, buf))
        return true;
    for (uint32_t k = *next ? *next : 1;; k++) {
        n = snprintf(buf, size, "%s_%u", base[0] ? base : "node", k);
        if (n < 0 || (size_t)n >= size)
            return false;
        if (!kiln_graph_find_node(g, buf)) {
            *next = k + 1;
            return true;
        }
    }
}
