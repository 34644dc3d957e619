/*
 * attrs.c - typed attribute sets (nodes, graphs, tensor descriptors).
 *
 * A set is an array of 16-byte kattr sorted by key string: a lookup resolves
 * the key's symbol through the per-thread key cache (intern.h) and scans a set
 * of up to 48 entries for it (a key never interned is in no set), a larger
 * set is binary-searched by string; inserts shift (sets are small), and
 * iteration (kiln_attrs_key_at) is in key order, so writers are
 * deterministic.  Arrays are on the heap, grown by realloc by 4 entries up to
 * 16 (node sets end at 6 to 15 entries in the default pipeline), then by half:
 * an outgrown array goes back to malloc, which coalesces and reuses it (in
 * the arena it was garbage: a pass that adds a key to every node left a whole
 * generation of arrays behind); the graph frees them with itself
 * (kiln__attrs_free_all).  Keys and string
 * values are interned; lists and small tensors are copied into the owning
 * graph's arena, so replacing a value leaves the old copy as arena garbage.
 * Editing a key the schedule or the symbol table reads bumps their counters
 * (edited(): the context watches those keys).  Tensors of
 * KILN_SHARED_MIN bytes and more keep their bytes in a reference-counted block
 * (kshared, graph_int.h) that kiln_attrs_copy shares instead of copying: a
 * graph split into partitions or subgraphs holds its weights once.
 */
#include "graph_int.h"
#include "ctx.h"

_Static_assert(sizeof(kattr) == 16, "an attribute entry is 16 bytes");

static const kiln_strtab *strtab(const kiln_attrs *a)
{
    return &a->g->ctx->strings;
}

/* Binary search by key string; *pos receives the insertion point. */
static kattr *search(const kiln_attrs *a, const char *key, uint32_t *pos)
{
    const kiln_strtab *t = strtab(a);
    uint32_t lo = 0, hi = a->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        int c = strcmp(kiln__intern_str(t, a->v[mid].key), key);
        if (c == 0) {
            if (pos)
                *pos = mid;
            return &a->v[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos)
        *pos = lo;
    return NULL;
}

/* Sets up to this size (the root graph's attributes included) are scanned
 * for the key's symbol (the key resolved through the per-thread key cache,
 * intern.h: one strcmp on a hit) instead of binary-searched with a strcmp
 * per probe. */
#define LINEAR_MAX 48

static kattr *scan(const kiln_attrs *a, kiln_sym k)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->v[i].key == k)
            return &a->v[i];
    return NULL;
}

static kattr *lookup(const kiln_attrs *a, const char *key)
{
    if (!a || !key || !a->n)
        return NULL;
    if (a->n > LINEAR_MAX)
        return search(a, key, NULL);
    kiln_sym k = kiln__intern_find_cached(strtab(a), key);
    return k ? scan(a, k) : NULL;
}

kiln_attrs *kiln__attrs_new(kiln_graph *g, uint32_t cap)
{
    kiln_attrs *a = kiln__arena_alloc(&g->arena, sizeof(*a));
    if (!a)
        return NULL;
    /* a first array of @p cap entries (none is fine: slot() grows it) */
    if (cap && (a->v = kiln__malloc((size_t)cap * sizeof(kattr))) != NULL)
        a->cap = cap;
    a->g = g;
    a->next = g->attr_sets;
    g->attr_sets = a;
    return a;
}

void kiln__attrs_free_all(kiln_graph *g)
{
    for (kiln_attrs *a = g->attr_sets; a; a = a->next) {
        kiln__free(a->v);
        a->v = NULL;
        a->n = a->cap = 0;
    }
    g->attr_sets = NULL;
}

/* The capacity after @p cap: +4 entries up to 16 (node sets end at 6 to 15
 * entries), then 1.5x. */
static uint32_t grow_cap(uint32_t cap)
{
    return cap < 16 ? cap + 4 : cap + (cap / 2 + 3) / 4 * 4;
}

/* An edit of key @p k: the schedule and the symbol table are invalidated
 * only by the keys they read (ctx.c watches them). */
static void edited(kiln_attrs *a, kiln_sym k)
{
    uint32_t tags = kiln__intern_watch_tags(strtab(a), k);
    if (tags & KILN_WATCH_SCHED)
        a->g->sched_mutation++;
    if (tags & KILN_WATCH_SYMTAB)
        a->g->sym_mutation++;
}

/* The entry of @p key, inserted when absent; the caller writes it. */
static kattr *slot(kiln_attrs *a, const char *key)
{
    if (!a || !key || !key[0])
        return NULL;
    uint32_t i = 0;
    kattr *e;
    kiln_sym k = kiln_intern(a->g, key);
    if (!k)
        return NULL;
    edited(a, k);
    if (a->n <= LINEAR_MAX) {
        if ((e = scan(a, k)) != NULL)
            return e;
        search(a, key, &i);
    } else if ((e = search(a, key, &i)) != NULL) {
        return e;
    }
    if (a->n + 1 > a->cap) {
        /* Heap-backed growth (realloc: in place when it can, and an array
         * outgrown goes back to malloc, which coalesces it for reuse). */
        uint32_t cap = grow_cap(a->cap);
        kattr *v = kiln__realloc(a->v, (size_t)cap * sizeof(kattr));
        if (!v) {
            a->g->oom = true;
            return NULL;
        }
        a->v = v;
        a->cap = cap;
    }
    memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof(kattr));
    a->n++;
    memset(&a->v[i], 0, sizeof(kattr));
    a->v[i].key = k;
    return &a->v[i];
}

uint32_t kiln_attrs_count(const kiln_attrs *a)
{
    return a ? a->n : 0;
}

const char *kiln_attrs_key_at(const kiln_attrs *a, uint32_t i, kiln_attr_type *type)
{
    if (!a || i >= a->n)
        return NULL;
    if (type)
        *type = (kiln_attr_type)a->v[i].type;
    return kiln__intern_str(strtab(a), a->v[i].key);
}

kiln_attr_type kiln_attrs_type(const kiln_attrs *a, const char *key)
{
    const kattr *e = lookup(a, key);
    return e ? (kiln_attr_type)e->type : KILN_ATTR_NONE;
}

bool kiln_attrs_has(const kiln_attrs *a, const char *key)
{
    return lookup(a, key) != NULL;
}

bool kiln_attrs_remove(kiln_attrs *a, const char *key)
{
    kattr *e = lookup(a, key);
    if (!e)
        return false;
    uint32_t i = (uint32_t)(e - a->v);
    edited(a, e->key);
    memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof(kattr));
    a->n--;
    a->g->mutation++;
    return true;
}

void kiln_attrs_clear(kiln_attrs *a)
{
    if (a && a->n) {
        a->n = 0;
        a->g->mutation++;
        a->g->sched_mutation++;
        a->g->sym_mutation++;
    }
}

/* ---- getters ------------------------------------------------------------ */

#define GET(T, TYPE, field)                  \
    const kattr *e = lookup(a, key);         \
    if (!e || e->type != (TYPE))             \
        return false;                        \
    if (out)                                 \
        *out = (T)e->v.field;                \
    return true

bool kiln_attrs_get_bool(const kiln_attrs *a, const char *key, bool *out)
{
    GET(bool, KILN_ATTR_BOOL, i);
}
bool kiln_attrs_get_int(const kiln_attrs *a, const char *key, int64_t *out)
{
    GET(int64_t, KILN_ATTR_INT, i);
}
bool kiln_attrs_get_float(const kiln_attrs *a, const char *key, double *out)
{
    GET(double, KILN_ATTR_FLOAT, f);
}
bool kiln_attrs_get_dtype(const kiln_attrs *a, const char *key, kiln_dtype *out)
{
    GET(kiln_dtype, KILN_ATTR_DTYPE, i);
}
bool kiln_attrs_get_string(const kiln_attrs *a, const char *key, const char **out)
{
    const kattr *e = lookup(a, key);
    if (!e || e->type != KILN_ATTR_STRING)
        return false;
    if (out)
        *out = kiln__intern_str(strtab(a), e->v.s);
    return true;
}

#define GET_LIST(T, TYPE)                    \
    const kattr *e = lookup(a, key);         \
    if (!e || e->type != (TYPE))             \
        return false;                        \
    if (v)                                   \
        *v = (T)e->v.p;                      \
    if (n)                                   \
        *n = e->count;                       \
    return true

bool kiln_attrs_get_list_int(const kiln_attrs *a, const char *key, const int64_t **v, uint32_t *n)
{
    GET_LIST(const int64_t *, KILN_ATTR_LIST_INT);
}
bool kiln_attrs_get_list_float(const kiln_attrs *a, const char *key, const double **v, uint32_t *n)
{
    GET_LIST(const double *, KILN_ATTR_LIST_FLOAT);
}
bool kiln_attrs_get_list_bool(const kiln_attrs *a, const char *key, const uint8_t **v, uint32_t *n)
{
    GET_LIST(const uint8_t *, KILN_ATTR_LIST_BOOL);
}
bool kiln_attrs_get_list_string(const kiln_attrs *a, const char *key, const char *const **v,
                                uint32_t *n)
{
    GET_LIST(const char *const *, KILN_ATTR_LIST_STRING);
}

/* list_list_int layout in the arena: uint32_t count; then per list
 * {uint32_t len; uint32_t pad; int64_t *data}. */
typedef struct kll_entry {
    uint32_t len;
    uint32_t pad;
    const int64_t *data;
} kll_entry;

bool kiln_attrs_get_list_list_int(const kiln_attrs *a, const char *key, uint32_t *n)
{
    const kattr *e = lookup(a, key);
    if (!e || e->type != KILN_ATTR_LIST_LIST_INT)
        return false;
    if (n)
        *n = e->count;
    return true;
}

bool kiln_attrs_get_list_list_int_at(const kiln_attrs *a, const char *key, uint32_t i,
                                     const int64_t **v, uint32_t *len)
{
    const kattr *e = lookup(a, key);
    if (!e || e->type != KILN_ATTR_LIST_LIST_INT || i >= e->count)
        return false;
    const kll_entry *l = (const kll_entry *)e->v.p;
    if (v)
        *v = l[i].data;
    if (len)
        *len = l[i].len;
    return true;
}

bool kiln_attrs_get_tensor(const kiln_attrs *a, const char *key, kiln_tensor_value *out)
{
    const kattr *e = lookup(a, key);
    if (!e || e->type != KILN_ATTR_TENSOR)
        return false;
    if (out)
        *out = ((const ktensor *)e->v.p)->v;
    return true;
}

/* ---- setters ------------------------------------------------------------ */

#define SET(TYPE, field, val)                \
    kattr *e = slot(a, key);                 \
    if (!e)                                  \
        return KILN_ERR_NOMEM;               \
    e->type = (TYPE);                        \
    e->count = 0;                            \
    e->v.field = (val);                      \
    a->g->mutation++;                        \
    return KILN_OK

kiln_status kiln_attrs_set_bool(kiln_attrs *a, const char *key, bool v)
{
    SET(KILN_ATTR_BOOL, i, v ? 1 : 0);
}
kiln_status kiln_attrs_set_int(kiln_attrs *a, const char *key, int64_t v)
{
    SET(KILN_ATTR_INT, i, v);
}
kiln_status kiln_attrs_set_float(kiln_attrs *a, const char *key, double v)
{
    SET(KILN_ATTR_FLOAT, f, v);
}
kiln_status kiln_attrs_set_dtype(kiln_attrs *a, const char *key, kiln_dtype v)
{
    SET(KILN_ATTR_DTYPE, i, (int64_t)v);
}
/* An allocation for a value failed: the graph's sticky OOM flag is set, so a
 * caller that ignores the status is still caught (kiln_graph_oom). */
static kiln_status value_nomem(kiln_attrs *a)
{
    a->g->oom = true;
    return KILN_ERR_NOMEM;
}

kiln_status kiln_attrs_set_string(kiln_attrs *a, const char *key, const char *v)
{
    if (!a)
        return KILN_ERR_INVALID;
    kiln_sym s = kiln_intern(a->g, v ? v : "");
    if (!s && v && v[0])
        return value_nomem(a);
    SET(KILN_ATTR_STRING, s, s);
}

/* Store an arena value @p p (list, tensor) under @p key. */
static kiln_status store(kiln_attrs *a, const char *key, kiln_attr_type type, uint32_t count,
                         void *p)
{
    if (count > KILN_ATTR_COUNT_MAX)
        return KILN_ERR_LIMIT;
    kattr *e = slot(a, key);
    if (!e)
        return KILN_ERR_NOMEM;
    e->type = (uint8_t)type;
    e->count = count;
    e->v.p = p;
    a->g->mutation++;
    return KILN_OK;
}

static kiln_status set_blob(kiln_attrs *a, const char *key, kiln_attr_type type, const void *src,
                            size_t bytes, uint32_t count)
{
    if (!a)
        return KILN_ERR_INVALID;
    void *p = bytes ? kiln__arena_dup(&a->g->arena, src, bytes) : NULL;
    if (bytes && !p)
        return value_nomem(a);
    return store(a, key, type, count, p);
}

kiln_status kiln_attrs_set_list_int(kiln_attrs *a, const char *key, const int64_t *v, uint32_t n)
{
    return set_blob(a, key, KILN_ATTR_LIST_INT, v, (size_t)n * sizeof(*v), n);
}
kiln_status kiln_attrs_set_list_float(kiln_attrs *a, const char *key, const double *v, uint32_t n)
{
    return set_blob(a, key, KILN_ATTR_LIST_FLOAT, v, (size_t)n * sizeof(*v), n);
}
kiln_status kiln_attrs_set_list_bool(kiln_attrs *a, const char *key, const uint8_t *v, uint32_t n)
{
    return set_blob(a, key, KILN_ATTR_LIST_BOOL, v, (size_t)n, n);
}

kiln_status kiln_attrs_set_list_string(kiln_attrs *a, const char *key, const char *const *v,
                                       uint32_t n)
{
    if (!a)
        return KILN_ERR_INVALID;
    const char **arr = n ? kiln__arena_alloc(&a->g->arena, n * sizeof(char *)) : NULL;
    if (n && !arr)
        return value_nomem(a);
    for (uint32_t i = 0; i < n; i++) {
        kiln_sym s = kiln_intern(a->g, v[i] ? v[i] : "");
        if (!s && v[i] && v[i][0])
            return value_nomem(a);
        arr[i] = kiln_sym_str(a->g, s); /* interned strings live as long as the ctx */
    }
    return store(a, key, KILN_ATTR_LIST_STRING, n, (void *)arr);
}

kiln_status kiln_attrs_set_list_list_int(kiln_attrs *a, const char *key,
                                         const int64_t *const *lists, const uint32_t *lens,
                                         uint32_t n)
{
    if (!a)
        return KILN_ERR_INVALID;
    kll_entry *l = n ? kiln__arena_alloc(&a->g->arena, n * sizeof(kll_entry)) : NULL;
    if (n && !l)
        return value_nomem(a);
    for (uint32_t i = 0; i < n; i++) {
        l[i].len = lens[i];
        if (lens[i]) {
            l[i].data = kiln__arena_dup(&a->g->arena, lists[i], lens[i] * sizeof(int64_t));
            if (!l[i].data)
                return value_nomem(a);
        }
    }
    return store(a, key, KILN_ATTR_LIST_LIST_INT, n, l);
}

/* Room in @p g's list of shared references for one more. */
static bool shared_room(kiln_graph *g)
{
    if (g->nshared < g->shared_cap)
        return true;
    uint32_t cap = g->shared_cap ? 2 * g->shared_cap : 8;
    kshared **v = kiln__realloc(g->shared, cap * sizeof(*v));
    if (!v)
        return false;
    g->shared = v;
    g->shared_cap = cap;
    return true;
}

/* Tensor @p v under @p key: its bytes referenced from @p share when given,
 * else copied (into a new shared block when large, else into the arena). */
static kiln_status set_tensor(kiln_attrs *a, const char *key, const kiln_tensor_value *v,
                              kshared *share)
{
    if (!a || !v)
        return KILN_ERR_INVALID;
    kiln_graph *g = a->g;
    kiln_arena *ar = &g->arena;
    ktensor *t = kiln__arena_alloc(ar, sizeof(*t));
    if (!t)
        return value_nomem(a);
    t->v = *v;
    t->shared = NULL;
    t->v.dims = v->rank ? kiln__arena_dup(ar, v->dims, v->rank * sizeof(int64_t)) : NULL;
    if (v->rank && !t->v.dims)
        return value_nomem(a);
    if (!share && v->nbytes >= KILN_SHARED_MIN) {
        if (!shared_room(g) || !(share = kiln__malloc(sizeof(*share) + v->nbytes)))
            return value_nomem(a);
        atomic_init(&share->refs, 1);
        share->n = v->nbytes;
        memcpy(share->data, v->data, v->nbytes);
        t->v.data = share->data;
    } else if (share) {
        if (!shared_room(g))
            return value_nomem(a);
        atomic_fetch_add_explicit(&share->refs, 1, memory_order_relaxed);
    }
    if (share) {
        g->shared[g->nshared++] = share;
        t->shared = share;
        if (!v->nbytes)
            t->v.data = share->data;
        /* else t->v.data already points into the block: a new copy, or the
         * shared bytes at the caller's offset (kiln_attrs_copy, a block) */
    } else {
        t->v.data = v->nbytes ? kiln__arena_dup(ar, v->data, v->nbytes) : NULL;
        if (v->nbytes && !t->v.data)
            return value_nomem(a);
    }
    return store(a, key, KILN_ATTR_TENSOR, 0, t);
}

kiln_status kiln_attrs_set_tensor(kiln_attrs *a, const char *key, const kiln_tensor_value *v)
{
    return set_tensor(a, key, v, NULL);
}

static kshared *block_of(void *block)
{
    return (kshared *)(void *)((unsigned char *)block - offsetof(kshared, data));
}

void *kiln_tensor_block_new(size_t n)
{
    if (n > SIZE_MAX - sizeof(kshared))
        return NULL;
    kshared *s = kiln__malloc(sizeof(*s) + n);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->n = n;
    return s->data;
}

void kiln_tensor_block_release(void *block)
{
    if (!block)
        return;
    kshared *s = block_of(block);
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        kiln__free(s);
}

kiln_status kiln_attrs_set_tensor_block(kiln_attrs *a, const char *key, const kiln_tensor_value *v,
                                        void *block)
{
    if (!block)
        return set_tensor(a, key, v, NULL);
    if (!a || !v)
        return KILN_ERR_INVALID;
    kshared *s = block_of(block);
    uintptr_t lo = (uintptr_t)s->data, p = (uintptr_t)v->data;
    if (v->nbytes && (!v->data || p < lo || p - lo > s->n || v->nbytes > s->n - (p - lo)))
        return KILN_ERR_INVALID;
    return set_tensor(a, key, v, s);
}

kiln_status kiln_attrs_copy(kiln_attrs *dst, const kiln_attrs *src)
{
    if (!src || !dst || src == dst)
        return KILN_OK;
    for (uint32_t i = 0; i < src->n; i++) {
        const kattr *e = &src->v[i];
        const char *key = kiln_sym_str(src->g, e->key);
        kiln_status st = KILN_OK;
        switch ((kiln_attr_type)e->type) {
        case KILN_ATTR_BOOL: st = kiln_attrs_set_bool(dst, key, e->v.i != 0); break;
        case KILN_ATTR_INT: st = kiln_attrs_set_int(dst, key, e->v.i); break;
        case KILN_ATTR_DTYPE: st = kiln_attrs_set_dtype(dst, key, (kiln_dtype)e->v.i); break;
        case KILN_ATTR_FLOAT: st = kiln_attrs_set_float(dst, key, e->v.f); break;
        case KILN_ATTR_STRING:
            st = kiln_attrs_set_string(dst, key, kiln_sym_str(src->g, e->v.s));
            break;
        case KILN_ATTR_LIST_INT: st = kiln_attrs_set_list_int(dst, key, e->v.p, e->count); break;
        case KILN_ATTR_LIST_FLOAT:
            st = kiln_attrs_set_list_float(dst, key, e->v.p, e->count);
            break;
        case KILN_ATTR_LIST_BOOL: st = kiln_attrs_set_list_bool(dst, key, e->v.p, e->count); break;
        case KILN_ATTR_LIST_STRING:
            st = kiln_attrs_set_list_string(dst, key, e->v.p, e->count);
            break;
        case KILN_ATTR_LIST_LIST_INT: {
            const kll_entry *l = e->v.p;
            const int64_t **lists = kiln__malloc((e->count + 1) * sizeof(*lists));
            uint32_t *lens = kiln__malloc((e->count + 1) * sizeof(*lens));
            if (!lists || !lens) {
                kiln__free(lists);
                kiln__free(lens);
                return KILN_ERR_NOMEM;
            }
            for (uint32_t j = 0; j < e->count; j++) {
                lists[j] = l[j].data;
                lens[j] = l[j].len;
            }
            st = kiln_attrs_set_list_list_int(dst, key, lists, lens, e->count);
            kiln__free(lists);
            kiln__free(lens);
            break;
        }
        case KILN_ATTR_TENSOR: {
            const ktensor *t = e->v.p; /* large bytes: a reference, not a copy */
            st = set_tensor(dst, key, &t->v, t->shared);
            break;
        }
        case KILN_ATTR_NONE: break;
        }
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}
