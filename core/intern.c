/*
 * intern.c - string interning.  FNV-1a hashes, linear probing at load <= 1/2.
 * Strings are packed into 64 KiB chunks (a longer string gets a chunk of its
 * own) that are never reallocated, so returned pointers are stable.  Each
 * slot holds {sym, hash}, so a probe compares hashes without touching the
 * string; rehashing recomputes hashes from the strings (amortised O(total
 * bytes)).  Memory per symbol: the string + NUL, an 8-byte pointer and 8-16
 * bytes of slots.  Symbol 0 is the empty string.
 */
#include "intern.h"
#include "base.h"

#define CHUNK_SIZE (64u * 1024u)

struct kiln_strchunk {
    struct kiln_strchunk *next;
    char data[];
};

static uint32_t hash_str(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

bool kiln__intern_init(kiln_strtab *t)
{
    memset(t, 0, sizeof(*t));
    t->nslots = 1024;
    t->slots = kiln__calloc(t->nslots, sizeof(*t->slots));
    t->cap = 256;
    t->strs = kiln__malloc(t->cap * sizeof(*t->strs));
    if (!t->slots || !t->strs) {
        kiln__intern_free(t);
        return false;
    }
    t->strs[0] = "";
    t->count = 1;
    return true;
}

void kiln__intern_free(kiln_strtab *t)
{
    struct kiln_strchunk *c = t->chunks;
    while (c) {
        struct kiln_strchunk *n = c->next;
        kiln__free(c);
        c = n;
    }
    kiln__free(t->strs);
    kiln__free(t->slots);
    memset(t, 0, sizeof(*t));
}

/* Probe for @p s whose hash is @p h; 0 when absent. */
static uint32_t find_hashed(const kiln_strtab *t, const char *s, size_t len, uint32_t h)
{
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t sym = t->slots[i].sym;
        if (sym == 0)
            return 0;
        if (t->slots[i].hash == h) {
            const char *c = t->strs[sym];
            if (strncmp(c, s, len) == 0 && c[len] == 0)
                return sym;
        }
    }
}

uint32_t kiln__intern_find(const kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0 || !t->slots)
        return 0;
    return find_hashed(t, s, len, hash_str(s, len));
}

static bool rehash(kiln_strtab *t)
{
    uint32_t n = t->nslots * 2;
    struct kiln_strslot *slots = kiln__calloc(n, sizeof(*slots));
    if (!slots)
        return false;
    /* the slots keep each string's hash: no string is read again */
    for (uint32_t j = 0; j < t->nslots; j++) {
        if (!t->slots[j].sym)
            continue;
        uint32_t i = t->slots[j].hash & (n - 1);
        while (slots[i].sym)
            i = (i + 1) & (n - 1);
        slots[i] = t->slots[j];
    }
    kiln__free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return true;
}

/* Copy a string into chunk storage; NULL on OOM. */
static char *store(kiln_strtab *t, const char *s, size_t len)
{
    size_t need = len + 1;
    if (!t->chunks || t->chunk_used + need > t->chunk_size) {
        size_t size = need > CHUNK_SIZE / 4 ? need : CHUNK_SIZE;
        struct kiln_strchunk *c = kiln__malloc(sizeof(*c) + size);
        if (!c)
            return NULL;
        t->bytes += size;
        if (size == need && t->chunks) {
            /* A big string: its own chunk, behind the current one. */
            c->next = t->chunks->next;
            t->chunks->next = c;
            memcpy(c->data, s, len);
            c->data[len] = 0;
            return c->data;
        }
        c->next = t->chunks;
        t->chunks = c;
        t->chunk_used = 0;
        t->chunk_size = size;
    }
    char *p = t->chunks->data + t->chunk_used;
    memcpy(p, s, len);
    p[len] = 0;
    t->chunk_used += need;
    return p;
}

uint32_t kiln__intern(kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t h = hash_str(s, len);
    uint32_t found = t->slots ? find_hashed(t, s, len, h) : 0;
    if (found)
        return found;
    if ((t->count + 1) * 2 > t->nslots && !rehash(t))
        return 0;
    if (t->count + 1 > t->cap && !KILN_GROW(t->strs, t->cap, t->count + 1))
        return 0;
    char *p = store(t, s, len);
    if (!p)
        return 0;
    uint32_t sym = t->count++;
    t->strs[sym] = p;
    uint32_t mask = t->nslots - 1;
    uint32_t i = h & mask;
    while (t->slots[i].sym)
        i = (i + 1) & mask;
    t->slots[i].sym = sym;
    t->slots[i].hash = h;
    return sym;
}

size_t kiln__intern_memory(const kiln_strtab *t)
{
    return t->bytes + (size_t)t->cap * sizeof(*t->strs) + (size_t)t->nslots * sizeof(*t->slots);
}
