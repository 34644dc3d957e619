/*
 * intern.c - string interning.  FNV-1a hashes, linear probing at load <= 1/2.
 * Strings are packed into 64 KiB chunks (a longer string gets a chunk of its
 * own) that are never reallocated, so returned pointers are stable.  Each
 * slot holds {sym, hash}, so a probe compares hashes without touching the
 * string; rehashing recomputes hashes from the strings (amortised O(total
 * bytes)).  Memory per symbol: the string + NUL, an 8-byte pointer and 8-16
 * bytes of slots.  Symbol 0 is the empty string.
 *
 * Threads (intern.h): one mutex serialises kiln__intern and kiln__intern_find
 * (an uncontended lock costs ~20 ns, small next to hashing and probing);
 * kiln__intern_str reads without it.  Growing the sym -> string array copies
 * it into a new one, publishes that with a release store and keeps the old
 * one (geometric growth: the kept arrays add less than the current one).
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

static atomic_uint next_uid = 1;

bool kiln__intern_init(kiln_strtab *t)
{
    memset(t, 0, sizeof(*t));
    t->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
    pthread_mutex_init(&t->lock, NULL);
    t->nslots = 1024;
    t->slots = kiln__calloc(t->nslots, sizeof(*t->slots));
    t->cap = 256;
    const char **strs = kiln__malloc(t->cap * sizeof(*strs));
    atomic_init(&t->strs, strs);
    if (!t->slots || !strs) {
        kiln__intern_free(t);
        return false;
    }
    strs[0] = "";
    atomic_init(&t->count, 1);
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
    for (uint32_t i = 0; i < t->nretired; i++)
        kiln__free(t->retired[i]);
    kiln__free(t->retired);
    kiln__free((void *)atomic_load(&t->strs));
    kiln__free(t->slots);
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof(*t));
}

/* Probe for @p s whose hash is @p h; 0 when absent.  Lock held. */
static uint32_t find_hashed(const kiln_strtab *t, const char *s, size_t len, uint32_t h)
{
    const char **strs = atomic_load_explicit(&t->strs, memory_order_relaxed);
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t sym = t->slots[i].sym;
        if (sym == 0)
            return 0;
        if (t->slots[i].hash == h) {
            const char *c = strs[sym];
            if (strncmp(c, s, len) == 0 && c[len] == 0)
                return sym;
        }
    }
}

uint32_t kiln__intern_find(const kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t h = hash_str(s, len);
    /* the lock is not part of the table's value: finding changes nothing */
    pthread_mutex_t *lock = (pthread_mutex_t *)&t->lock;
    pthread_mutex_lock(lock);
    uint32_t sym = t->slots ? find_hashed(t, s, len, h) : 0;
    pthread_mutex_unlock(lock);
    return sym;
}

/* Grow the sym -> string array to hold @p need entries.  Lock held. */
static bool grow_strs(kiln_strtab *t, uint32_t need)
{
    if (need <= t->cap)
        return true;
    if (!KILN_GROW(t->retired, t->retired_cap, t->nretired + 1))
        return false;
    uint32_t cap = kiln__grow_cap(t->cap, need);
    const char **old = atomic_load_explicit(&t->strs, memory_order_relaxed);
    const char **strs = kiln__malloc((size_t)cap * sizeof(*strs));
    if (!strs)
        return false;
    memcpy(strs, old, (size_t)atomic_load_explicit(&t->count, memory_order_relaxed) * sizeof(*strs));
    atomic_store_explicit(&t->strs, strs, memory_order_release);
    /* readers may still hold the old array: keep it */
    t->retired[t->nretired++] = (void *)old;
    t->retired_bytes += (size_t)t->cap * sizeof(*strs);
    t->cap = cap;
    return true;
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

bool kiln__intern_reserve(kiln_strtab *t, uint32_t n)
{
    pthread_mutex_lock(&t->lock);
    uint64_t need = (uint64_t)atomic_load_explicit(&t->count, memory_order_relaxed) + n;
    bool ok = t->slots && need < UINT32_MAX / 4;
    /* rehash doubles: the same sizes as growing one string at a time */
    while (ok && need * 2 > t->nslots)
        ok = rehash(t);
    ok = ok && grow_strs(t, (uint32_t)need);
    pthread_mutex_unlock(&t->lock);
    return ok;
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

void kiln__intern_watch(kiln_strtab *t, const char *s, uint32_t tag)
{
    if (t->nwatch == KILN_WATCH_MAX)
        return;
    uint32_t i = t->nwatch;
    size_t len = strlen(s);
    t->watch_str[i] = s;
    t->watch_hash[i] = hash_str(s, len);
    t->watch_tag[i] = tag;
    pthread_mutex_lock(&t->lock);
    uint32_t sym = t->slots ? find_hashed(t, s, len, t->watch_hash[i]) : 0;
    atomic_store_explicit(&t->watch_sym[i], sym ? sym : UINT32_MAX, memory_order_release);
    t->nwatch = i + 1;
    pthread_mutex_unlock(&t->lock);
}

static uint32_t intern_locked(kiln_strtab *t, const char *s, size_t len, uint32_t h)
{
    uint32_t found = t->slots ? find_hashed(t, s, len, h) : 0;
    if (found || !t->slots)
        return found;
    uint32_t count = atomic_load_explicit(&t->count, memory_order_relaxed);
    if ((count + 1) * 2 > t->nslots && !rehash(t))
        return 0;
    if (!grow_strs(t, count + 1))
        return 0;
    char *p = store(t, s, len);
    if (!p)
        return 0;
    uint32_t sym = count;
    atomic_load_explicit(&t->strs, memory_order_relaxed)[sym] = p;
    atomic_store_explicit(&t->count, count + 1, memory_order_release);
    uint32_t mask = t->nslots - 1;
    uint32_t i = h & mask;
    while (t->slots[i].sym)
        i = (i + 1) & mask;
    t->slots[i].sym = sym;
    t->slots[i].hash = h;
    for (uint32_t w = 0; w < t->nwatch; w++)
        if (t->watch_hash[w] == h && strncmp(t->watch_str[w], s, len) == 0 &&
            t->watch_str[w][len] == 0)
            atomic_store_explicit(&t->watch_sym[w], sym, memory_order_release);
    return sym;
}

uint32_t kiln__intern(kiln_strtab *t, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t h = hash_str(s, len);
    pthread_mutex_lock(&t->lock);
    uint32_t sym = intern_locked(t, s, len, h);
    pthread_mutex_unlock(&t->lock);
    return sym;
}

size_t kiln__intern_memory(const kiln_strtab *t)
{
    pthread_mutex_t *lock = (pthread_mutex_t *)&t->lock;
    pthread_mutex_lock(lock);
    size_t n = t->bytes + (size_t)t->cap * sizeof(const char *) + t->retired_bytes +
               (size_t)t->nslots * sizeof(*t->slots);
    pthread_mutex_unlock(lock);
    return n;
}

/* ---- the per-thread key cache ----------------------------------------------
 * Direct-mapped by the string's address.  An entry names its table by uid (a
 * freed table's successor at the same address is another table).  A present
 * symbol is checked by comparing the bytes at the address with its string; an
 * absent one (find only) by a copy of the bytes, and only while the table has
 * not grown since.  Each thread has its own entries: no lock, no sharing. */

#define KC_BITS 8
#define KC_COPY 44 /* an entry is one 64-byte line */

typedef struct kc_entry {
    const char *p;
    uint32_t uid;
    uint32_t sym;   /* 0: absent while the table's count is `stamp` */
    uint32_t stamp;
    char copy[KC_COPY];
} kc_entry;

static _Thread_local kc_entry key_cache[1u << KC_BITS];

static kc_entry *kc_at(const char *s)
{
    uint64_t x = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
    return &key_cache[x >> (64 - KC_BITS)];
}

/* The cached answer for @p s in @p t: a symbol, 0 for absent, or UINT32_MAX
 * when the cache does not know. */
static uint32_t kc_get(const kiln_strtab *t, const kc_entry *e, const char *s)
{
    if (e->p != s || e->uid != t->uid)
        return UINT32_MAX;
    if (e->sym)
        return strcmp(kiln__intern_str(t, e->sym), s) == 0 ? e->sym : UINT32_MAX;
    return e->stamp == atomic_load_explicit(&t->count, memory_order_acquire) &&
                   strcmp(e->copy, s) == 0
               ? 0
               : UINT32_MAX;
}

static void kc_put(const kiln_strtab *t, kc_entry *e, const char *s, size_t len, uint32_t sym,
                   uint32_t stamp)
{
    if (!sym && len >= KC_COPY) {
        e->p = NULL;
        return;
    }
    e->p = s;
    e->uid = t->uid;
    e->sym = sym;
    e->stamp = stamp;
    if (!sym)
        memcpy(e->copy, s, len + 1);
}

uint32_t kiln__intern_cached(kiln_strtab *t, const char *s)
{
    if (!s[0])
        return 0;
    kc_entry *e = kc_at(s);
    uint32_t sym = kc_get(t, e, s);
    if (sym && sym != UINT32_MAX)
        return sym;
    size_t len = strlen(s);
    sym = kiln__intern(t, s, len);
    if (sym)
        kc_put(t, e, s, len, sym, 0);
    return sym;
}

uint32_t kiln__intern_find_cached(const kiln_strtab *t, const char *s)
{
    if (!s[0])
        return 0;
    kc_entry *e = kc_at(s);
    uint32_t sym = kc_get(t, e, s);
    if (sym != UINT32_MAX)
        return sym;
    size_t len = strlen(s);
    uint32_t h = hash_str(s, len);
    pthread_mutex_t *lock = (pthread_mutex_t *)&t->lock;
    pthread_mutex_lock(lock);
    sym = t->slots ? find_hashed(t, s, len, h) : 0;
    /* the count under the lock: an absent answer holds until it changes */
    uint32_t stamp = atomic_load_explicit(&t->count, memory_order_relaxed);
    pthread_mutex_unlock(lock);
    kc_put(t, e, s, len, sym, stamp);
    return sym;
}
