/*
 * intern.c - string interning.  FNV-1a hashes, linear probing at load <= 1/2,
 * strings packed into one growable buffer.  Symbol 0 is the empty string.
 * Each slot holds {sym, hash}, so a probe compares hashes without touching
 * the string buffer; rehashing recomputes hashes from the strings (amortised
 * O(total bytes)), which saves a per-symbol hash array.  Memory per symbol:
 * the string + NUL, a 4-byte offset and 8-16 bytes of slots.
 */
#include "intern.h"
#include "base.h"

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
    if (!t->slots)
        return false;
    /* symbol 0 = "" */
    t->cap = 256;
    t->offs = kiln__malloc(t->cap * sizeof(uint32_t));
    t->buf_cap = 4096;
    t->buf = kiln__malloc(t->buf_cap);
    if (!t->offs || !t->buf) {
        kiln__intern_free(t);
        return false;
    }
    t->buf[0] = 0;
    t->buf_len = 1;
    t->offs[0] = 0;
    t->count = 1;
    return true;
}

void kiln__intern_free(kiln_strtab *t)
{
    kiln__free(t->buf);
    kiln__free(t->offs);
    kiln__free(t->slots);
    memset(t, 0, sizeof(*t));
}

uint32_t kiln__intern_find(const kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t h = hash_str(s, len);
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t sym = t->slots[i].sym;
        if (sym == 0)
            return 0;
        if (t->slots[i].hash == h) {
            const char *c = t->buf + t->offs[sym];
            if (strncmp(c, s, len) == 0 && c[len] == 0)
                return sym;
        }
    }
}

static bool rehash(kiln_strtab *t)
{
    uint32_t n = t->nslots * 2;
    struct kiln_strslot *slots = kiln__calloc(n, sizeof(*slots));
    if (!slots)
        return false;
    for (uint32_t sym = 1; sym < t->count; sym++) {
        const char *str = t->buf + t->offs[sym];
        uint32_t h = hash_str(str, strlen(str));
        uint32_t i = h & (n - 1);
        while (slots[i].sym)
            i = (i + 1) & (n - 1);
        slots[i].sym = sym;
        slots[i].hash = h;
    }
    kiln__free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return true;
}

uint32_t kiln__intern(kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t found = kiln__intern_find(t, s, len);
    if (found)
        return found;
    if ((t->count + 1) * 2 > t->nslots && !rehash(t))
        return 0;
    if (t->count + 1 > t->cap) {
        if (!KILN_GROW(t->offs, t->cap, t->count + 1))
            return 0;
    }
    if (t->buf_len + len + 1 > t->buf_cap) {
        size_t cap = t->buf_cap * 2;
        while (cap < t->buf_len + len + 1)
            cap *= 2;
        char *b = kiln__realloc(t->buf, cap);
        if (!b)
            return 0;
        t->buf = b;
        t->buf_cap = cap;
    }
    uint32_t sym = t->count++;
    t->offs[sym] = (uint32_t)t->buf_len;
    memcpy(t->buf + t->buf_len, s, len);
    t->buf[t->buf_len + len] = 0;
    t->buf_len += len + 1;
    uint32_t h = hash_str(s, len);
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
    return t->buf_cap + (size_t)t->cap * 4 + (size_t)t->nslots * sizeof(*t->slots);
}
