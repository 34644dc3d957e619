/*
 * intern.c - string interning.  FNV-1a hashes, linear probing at load <= 1/2,
 * strings packed into one growable buffer.  Symbol 0 is the empty string.
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
    t->slots = kiln__calloc(t->nslots, sizeof(uint32_t));
    if (!t->slots)
        return false;
    /* symbol 0 = "" */
    t->cap = 256;
    t->offs = kiln__malloc(t->cap * sizeof(uint32_t));
    t->hashes = kiln__malloc(t->cap * sizeof(uint32_t));
    t->buf_cap = 4096;
    t->buf = kiln__malloc(t->buf_cap);
    if (!t->offs || !t->hashes || !t->buf) {
        kiln__intern_free(t);
        return false;
    }
    t->buf[0] = 0;
    t->buf_len = 1;
    t->offs[0] = 0;
    t->hashes[0] = hash_str("", 0);
    t->count = 1;
    return true;
}

void kiln__intern_free(kiln_strtab *t)
{
    kiln__free(t->buf);
    kiln__free(t->offs);
    kiln__free(t->hashes);
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
        uint32_t sym = t->slots[i];
        if (sym == 0)
            return 0;
        if (t->hashes[sym] == h) {
            const char *c = t->buf + t->offs[sym];
            if (strncmp(c, s, len) == 0 && c[len] == 0)
                return sym;
        }
    }
}

static bool rehash(kiln_strtab *t)
{
    uint32_t n = t->nslots * 2;
    uint32_t *slots = kiln__calloc(n, sizeof(uint32_t));
    if (!slots)
        return false;
    for (uint32_t sym = 1; sym < t->count; sym++) {
        uint32_t i = t->hashes[sym] & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = sym;
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
        uint32_t cap = t->cap;
        if (!KILN_GROW(t->offs, cap, t->count + 1))
            return 0;
        uint32_t *h = kiln__realloc(t->hashes, (size_t)cap * sizeof(uint32_t));
        if (!h)
            return 0;
        t->hashes = h;
        t->cap = cap;
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
    t->hashes[sym] = h;
    uint32_t mask = t->nslots - 1;
    uint32_t i = h & mask;
    while (t->slots[i])
        i = (i + 1) & mask;
    t->slots[i] = sym;
    return sym;
}

size_t kiln__intern_memory(const kiln_strtab *t)
{
    return t->buf_cap + (size_t)t->cap * 8 + (size_t)t->nslots * 4;
}
