/*
 * intern.h - the context's string intern table (QBE intern/str, MIR
 * string_store).  Symbols are dense uint32_t ids, 0 = none ("").  Strings live
 * in fixed chunks that are never moved, so a pointer from kiln__intern_str
 * stays valid for the life of the table (the context).  Only core/ includes
 * this header.
 */
#ifndef KILN_CORE_INTERN_H
#define KILN_CORE_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A slot keeps the hash next to the symbol so probes touch one cache line. */
struct kiln_strslot {
    uint32_t sym;
    uint32_t hash;
};

struct kiln_strchunk;

typedef struct kiln_strtab {
    struct kiln_strchunk *chunks; /* newest first; strings never move */
    size_t chunk_used, chunk_size, bytes;
    const char **strs; /* sym -> string */
    uint32_t count, cap;
    struct kiln_strslot *slots; /* open addressing; sym 0 = empty */
    uint32_t nslots;            /* power of two */
} kiln_strtab;

bool kiln__intern_init(kiln_strtab *t);
void kiln__intern_free(kiln_strtab *t);
/** Intern @p s (length @p len); 0 on OOM. */
uint32_t kiln__intern(kiln_strtab *t, const char *s, size_t len);
/** Look up without inserting; 0 when absent. */
uint32_t kiln__intern_find(const kiln_strtab *t, const char *s, size_t len);
static inline const char *kiln__intern_str(const kiln_strtab *t, uint32_t sym)
{
    return sym < t->count ? t->strs[sym] : "";
}
size_t kiln__intern_memory(const kiln_strtab *t);

#endif
