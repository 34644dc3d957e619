/*
 * intern.h - the context's string intern table (QBE intern/str, MIR
 * string_store).  Symbols are dense uint32_t ids, 0 = none ("").  Strings live
 * in fixed chunks that are never moved, so a pointer from kiln__intern_str
 * stays valid for the life of the table (the context).  Only core/ includes
 * this header.
 *
 * Threads: kiln__intern and kiln__intern_find may be called from several
 * threads at once (a mutex guards the hash table and the chunks), and
 * kiln__intern_str takes no lock: the sym -> string array is published with
 * release/acquire atomics, and an array outgrown is kept until the table is
 * freed, so a reader holding the old one still reads valid entries.  A symbol
 * is safe to look up in any thread that received it from kiln__intern (or
 * from a graph it may read).
 */
#ifndef KILN_CORE_INTERN_H
#define KILN_CORE_INTERN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KILN_WATCH_MAX 16

/* A slot keeps the hash next to the symbol so probes touch one cache line. */
struct kiln_strslot {
    uint32_t sym;
    uint32_t hash;
};

struct kiln_strchunk;

typedef struct kiln_strtab {
    struct kiln_strchunk *chunks; /* newest first; strings never move */
    size_t chunk_used, chunk_size, bytes;
    _Atomic(const char **) strs; /* sym -> string; readers load it with acquire */
    atomic_uint count;           /* symbols; published with release after strs[sym] */
    uint32_t cap;
    void **retired; /* outgrown strs arrays, freed with the table */
    uint32_t nretired, retired_cap;
    size_t retired_bytes;
    struct kiln_strslot *slots; /* open addressing; sym 0 = empty */
    uint32_t nslots;            /* power of two */
    pthread_mutex_t lock;       /* writers and kiln__intern_find */
    uint32_t uid;               /* never reused: tells tables apart in the key cache */
    /* watched strings (kiln__intern_watch): their symbol once interned, set
     * under the lock when the string is inserted, read with acquire */
    uint32_t nwatch;
    const char *watch_str[KILN_WATCH_MAX];
    uint32_t watch_hash[KILN_WATCH_MAX];
    uint32_t watch_tag[KILN_WATCH_MAX];
    atomic_uint watch_sym[KILN_WATCH_MAX];
} kiln_strtab;

bool kiln__intern_init(kiln_strtab *t);
void kiln__intern_free(kiln_strtab *t);
/** Intern @p s (length @p len); 0 on OOM. */
uint32_t kiln__intern(kiln_strtab *t, const char *s, size_t len);
/** Make room for @p n more symbols (optional: growing the table as it fills
 * rehashes it over and over); false on OOM. */
bool kiln__intern_reserve(kiln_strtab *t, uint32_t n);
/** Look up without inserting; 0 when absent. */
uint32_t kiln__intern_find(const kiln_strtab *t, const char *s, size_t len);
/**
 * The same through a per-thread cache keyed by the address of @p s (a string
 * literal at a call site, in practice: attribute keys, op types): a hit costs
 * one strcmp against the cached symbol's string, which also makes a reused
 * buffer holding another string a miss.  A miss hashes and probes as above.
 * kiln__intern_cached interns (0 on OOM), kiln__intern_find_cached does not
 * (0 when absent; an absent key is remembered until the table grows).
 */
uint32_t kiln__intern_cached(kiln_strtab *t, const char *s);
/**
 * Watch string @p s (a literal: it is kept by address) with @p tag: from
 * when it is interned, kiln__intern_watch_tags reports @p tag for its symbol.
 * At most KILN_WATCH_MAX strings; call before the table is shared between
 * threads.  A string never interned has no symbol, so no attribute set can
 * hold it as a key: watching costs nothing until it is used.
 */
void kiln__intern_watch(kiln_strtab *t, const char *s, uint32_t tag);
/** The tags of the watched strings whose symbol is @p sym (0: none). */
static inline uint32_t kiln__intern_watch_tags(const kiln_strtab *t, uint32_t sym)
{
    uint32_t tags = 0;
    for (uint32_t i = 0; i < t->nwatch; i++)
        if (atomic_load_explicit(&t->watch_sym[i], memory_order_acquire) == sym)
            tags |= t->watch_tag[i];
    return tags;
}
uint32_t kiln__intern_find_cached(const kiln_strtab *t, const char *s);
static inline const char *kiln__intern_str(const kiln_strtab *t, uint32_t sym)
{
    if (sym >= atomic_load_explicit(&t->count, memory_order_acquire))
        return "";
    return atomic_load_explicit(&t->strs, memory_order_acquire)[sym];
}
size_t kiln__intern_memory(const kiln_strtab *t);

#endif
