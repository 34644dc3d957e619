/*
 * graph_json_read.c - the graph JSON reader (docs/graph_format.md, version 1).
 *
 * Streaming: the top-level object is scanned by hand (whitespace, braces,
 * commas, colons); every value in it -- and each element of the root "nodes"
 * array -- is parsed separately with json_loadb(JSON_DISABLE_EOF_CHECK), so
 * only one root node's jansson tree exists at a time (its blocks come from a
 * per-node arena).  Subgraphs are parsed from their parent node's tree.  A
 * file is mapped rather than copied, and the pages already parsed are
 * dropped, so the text is never resident whole.  A long "nodes" list is
 * parsed on a second thread while the calling thread builds the graph from
 * the trees already parsed ("nodes" on two threads, below).
 *
 * Two passes per graph, because nodes may come in any order: pass 1 creates
 * each node (ids follow document order) with descriptors, attributes and
 * subgraphs, and records its inputs as (producer name symbol, output index)
 * plus its control inputs (a producer already added is looked up there and
 * then, while its entries are still cached); pass 2 (finish_graph) resolves
 * the other names with the graph's O(1) name index and adds the edges in
 * node order.  JSON paths for messages are built only when an error is
 * reported (lpath).  The finished root is verified
 * (cycles, `_parent_node_index` ranges, NetOutput rules).
 *
 * Errors name a JSON path ("$.nodes[3].inptus: unknown key") and go under a
 * frame naming the source; syntax errors read "<source>:<line>:<col>: syntax
 * error: <jansson message>" and get no extra frame.  Unknown keys are errors
 * except `x-*` keys (ignored) and keys inside `attrs`.
 *
 * Complexity: O(text length + nodes + edges).
 */
#include "graph_json.h"
#include "graph_int.h"
#include "ctx.h"
#include "fileio.h"
#include "parallel.h"
#include "verify.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JFLAGS (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES)

/* The node arena's chunks (described under "jansson's allocations"). */
typedef struct achunk {
    struct achunk *next;
    size_t size, used;
    alignas(max_align_t) char data[];
} achunk;

/* A set of chunks, oldest first; cur is the chunk being filled (the ones
 * after it are free since the last rewind). */
typedef struct aset {
    achunk *first, *cur;
    size_t big; /* blocks from the previous allocator since the last rewind */
} aset;

typedef struct pend_in {
    kiln_sym prod;    /* producer name (prefix before ":k") */
    kiln_node_id src; /* the producer named prod when it was already added, else 0 */
    uint32_t k;       /* output index */
    uint8_t form;     /* 0 = null, 1 = "name", 2 = "name:k" */
} pend_in;

typedef struct pend_node {
    uint32_t in_off;  /* first entry in rgraph.ins */
    uint32_t ctl_off; /* first entry in rgraph.ctl */
    uint32_t nctl;
} pend_node;

/* A JSON path, built only when a message needs it: up's path, ".key", then
 * "[idx]" when has_idx; a path with no up is the string key. */
typedef struct lpath {
    const struct lpath *up;
    const char *key;
    size_t idx;
    bool has_idx;
} lpath;

/* The path @p l into @p out (KILN_JSON_PATH_MAX bytes, truncated as
 * kiln__json_path_key and kiln__json_path_idx truncate); its length. */
static size_t lp_cat(const lpath *l, char *out)
{
    if (!l->up)
        return kiln__json_path_cat(out, 0, l->key);
    size_t n = lp_cat(l->up, out);
    n = kiln__json_path_cat(out, n, ".");
    n = kiln__json_path_cat(out, n, l->key);
    if (l->has_idx) {
        char num[24], *e = num + sizeof(num), *q = e;
        size_t i = l->idx;
        *--q = 0;
        *--q = ']';
        do
            *--q = (char)('0' + i % 10);
        while ((i /= 10) != 0);
        *--q = '[';
        n = kiln__json_path_cat(out, n, q);
    }
    return n;
}

static const char *lp_str(const lpath *l, char *out)
{
    out[lp_cat(l, out)] = 0;
    return out;
}

/* The path of key @p key of the object at @p l. */
static const char *lp_key(const lpath *l, const char *key, char *out)
{
    lpath c = {l, key, 0, false};
    return lp_str(&c, out);
}

/* The path of element @p i of list @p key of the object at @p l. */
static const char *lp_idx(const lpath *l, const char *key, size_t i, char *out)
{
    lpath c = {l, key, i, true};
    return lp_str(&c, out);
}

/* Per-graph state between pass 1 and pass 2. */
typedef struct rgraph {
    kiln_graph *g;
    const lpath *lp; /* JSON path of the graph object */
    pend_in *ins;
    uint32_t nins, ins_cap;
    kiln_sym *ctl;
    uint32_t nctl, ctl_cap;
    pend_node *nodes; /* indexed by node id */
    uint32_t nodes_cap;
} rgraph;

typedef struct rjs {
    const char *src; /* source name for messages */
    const char *text;
    size_t len, pos;
    kiln_error *err;
    kiln_graph *root;
    bool syntax; /* the error is a syntax error (message carries the source) */
    kiln__jattr ja; /* attribute parsing scratch (graph_json_attr.c) */
    char *cbuf;
    uint32_t ccap;
    bool mapped;    /* text is a file mapping: pages behind pos may be dropped */
    bool arena;     /* the reader owns the node arena (arena_acquire) */
    aset seq;       /* the arena's chunks for one node at a time */
    size_t dropped; /* text[0, dropped) is dropped (page-aligned) */
} rjs;

/* ---- errors ------------------------------------------------------------- */

#define rerr(r, ...) kiln__json_err((r)->err, __VA_ARGS__)

static kiln_status nomem(rjs *r)
{
    return kiln_errorf(r->err, KILN_ERR_NOMEM, "out of memory reading %s", r->src);
}

/* Syntax error at byte offset @p off of the text. */
static kiln_status syntax_at(rjs *r, size_t off, const char *what)
{
    int line = 1, col = 1;
    if (off > r->len)
        off = r->len;
    for (size_t i = 0; i < off; i++) {
        if (r->text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    r->syntax = true;
    return kiln_errorf(r->err, KILN_ERR_PARSE, "%s:%d:%d: syntax error: %s", r->src, line, col,
                       what);
}


/* ---- the mapped file ----------------------------------------------------- */

/* A file mapping's pages count in the resident set until they are unmapped:
 * the pages of text already parsed are dropped in blocks of this many bytes
 * (they come back from the page cache if an error message needs them), so
 * reading keeps only a window of the file resident, not the whole text. */
#define DROP_BLOCK ((size_t)8 << 20)

static void drop_to(rjs *r, size_t off)
{
    if (!r->mapped || off < r->dropped + DROP_BLOCK)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t upto = off / page * page;
    madvise((void *)(uintptr_t)(r->text + r->dropped), upto - r->dropped, MADV_DONTNEED);
    r->dropped = upto;
}

/* ---- jansson's allocations for one node ------------------------------------ */

/*
 * A root node's tree is parsed, converted and thrown away: its allocations
 * come from a bump arena that is rewound after the node, instead of one
 * malloc and one free per value, key and bucket array.  The arena is reached
 * through jansson's process-wide allocator hooks, installed once and chained
 * to the functions installed before them.  One reader at a time owns the
 * arena (arena_acquire .. arena_release; a reader on another thread at the
 * same time parses without it): the hooks only bump-allocate on the owning
 * thread while `on`, into the chunk set `set`, and only blocks up to
 * ARENA_BIG (larger ones, such as a weight's data_b64 text, go to the
 * previous allocator and are freed by json_decref as usual).  The owner is a
 * global compared with pthread_self, not a thread-local variable: in a shared
 * library every access to one is a call to __tls_get_addr.  When something
 * replaced the hooks after kiln installed them, the arena is not used.
 * Saves a tenth of the reading time (one malloc and free per JSON value).
 * While `on`, nothing that outlives the set's rewind may be allocated
 * through jansson on the owning thread.  The sequential reader uses one set
 * per node; the two-thread reader (below) one per slot, with its parsing
 * thread as the owner.  A set keeps its chunks when rewound: they are reused.
 */
#define ARENA_CHUNK ((size_t)256 << 10)
#define ARENA_BIG ((size_t)16 << 10)

/* Written by the owner only; the other threads read on and owner. */
static struct {
    aset *set;
    pthread_t owner;
    atomic_bool on;   /* the owner allocates from set */
    atomic_bool busy; /* a reader owns the arena */
} arena;

static json_malloc_t prev_malloc;
static json_free_t prev_free;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

/* Whether the calling thread is allocating from the arena. */
static inline bool arena_mine(void)
{
    return atomic_load_explicit(&arena.on, memory_order_acquire) &&
           pthread_equal(arena.owner, pthread_self());
}

static void *arena_malloc(size_t n)
{
    if (!arena_mine())
        return prev_malloc(n);
    aset *s = arena.set;
    if (n > ARENA_BIG) {
        s->big++;
        return prev_malloc(n);
    }
    n = (n + 15) & ~(size_t)15;
    achunk *c = s->cur;
    while (!c || c->size - c->used < n) {
        if (c && c->next) {
            c = c->next;
            c->used = 0;
            continue;
        }
        achunk *nc = malloc(sizeof(achunk) + ARENA_CHUNK);
        if (!nc)
            return NULL;
        nc->size = ARENA_CHUNK;
        nc->used = 0;
        nc->next = NULL;
        if (c)
            c->next = nc;
        else
            s->first = nc;
        c = nc;
    }
    s->cur = c;
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void arena_free(void *p)
{
    if (!p)
        return;
    if (arena_mine()) {
        for (achunk *c = arena.set->first; c; c = c->next) {
            if ((char *)p >= c->data && (char *)p < c->data + c->size)
                return;
            if (c == arena.set->cur)
                break;
        }
    }
    prev_free(p);
}

static void arena_install(void)
{
    json_get_alloc_funcs(&prev_malloc, &prev_free);
    json_set_alloc_funcs(arena_malloc, arena_free);
}

/* Take the arena for the reader on this thread; false when another reader
 * has it.  Not under AddressSanitizer: it is to see each of jansson's blocks. */
static bool arena_acquire(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return false;
#endif
    pthread_once(&arena_once, arena_install);
    bool idle = false;
    if (!atomic_compare_exchange_strong(&arena.busy, &idle, true))
        return false;
    arena.owner = pthread_self();
    return true;
}

/* Whether jansson's hooks are still kiln's. */
static bool arena_hooked(void)
{
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    return m == arena_malloc && f == arena_free;
}

/* Make the calling thread the owner and allocate into @p s.  The owner
 * changes only while the arena is off. */
static void arena_on(aset *s)
{
    arena.owner = pthread_self();
    arena.set = s;
    atomic_store_explicit(&arena.on, true, memory_order_release);
}

static void arena_off(void) { atomic_store_explicit(&arena.on, false, memory_order_release); }

/* Free the @p n trees at @p js, parsed into @p s (the arena on and set to
 * @p s, or @p s NULL: parsed without the arena), and rewind @p s.  A tree
 * that lives in the arena only needs no walk. */
static void aset_rewind(aset *s, json_t **js, size_t n)
{
    if (!s || s->big)
        for (size_t i = 0; i < n; i++)
            json_decref(js[i]);
    if (!s)
        return;
    s->big = 0;
    s->cur = s->first;
    if (s->cur)
        s->cur->used = 0;
}

static void aset_free(aset *s)
{
    for (achunk *c = s->first, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    s->first = s->cur = NULL;
}

/* Start a node's allocations into @p s (NULL: the reader does not own the
 * arena); false when it does not or the hooks are not kiln's. */
static bool node_arena_begin(aset *s)
{
    if (!s || !arena_hooked())
        return false;
    arena_on(s);
    return true;
}

/* Free @p j (parsed since node_arena_begin(@p s)) and rewind the arena. */
static void node_arena_end(aset *s, json_t *j)
{
    aset_rewind(s, &j, j ? 1 : 0);
    arena_off();
}

/* Give the arena up (@p own: arena_acquire returned true). */
static void arena_release(bool own)
{
    if (!own)
        return;
    arena.set = NULL;
    atomic_store(&arena.busy, false);
}

/* ---- the top-level scanner ---------------------------------------------- */

static void skip_ws(rjs *r)
{
    while (r->pos < r->len && (r->text[r->pos] == ' ' || r->text[r->pos] == '\t' ||
                               r->text[r->pos] == '\n' || r->text[r->pos] == '\r'))
        r->pos++;
}

static bool eat(rjs *r, char c)
{
    skip_ws(r);
    if (r->pos < r->len && r->text[r->pos] == c) {
        r->pos++;
        return true;
    }
    return false;
}

static kiln_status parse_value(rjs *r, json_t **out)
{
    json_error_t e;
    skip_ws(r);
    size_t start = r->pos;
    *out = json_loadb(r->text + start, r->len - start, JFLAGS, &e);
    if (!*out) {
        size_t pos = (size_t)(e.position > 0 ? e.position - 1 : 0);
        return syntax_at(r, start + pos, e.text);
    }
    r->pos = start + (size_t)e.position;
    return KILN_OK;
}

/* ---- tensor descriptors ------------------------------------------------- */

/* Whether every element of JSON array @p v is an integer. */
static bool all_ints(json_t *v)
{
    for (size_t i = 0, n = json_array_size(v); i < n; i++)
        if (!json_is_integer(json_array_get(v, i)))
            return false;
    return true;
}

static kiln_status parse_desc(rjs *r, const lpath *dp, kiln_graph *g, json_t *j,
                              kiln_tensor_desc *d)
{
    char p[KILN_JSON_PATH_MAX];
    if (!d)
        return nomem(r);
    if (!json_is_object(j))
        return rerr(r, KILN_ERR_INVALID, lp_str(dp, p), "tensor descriptor must be an object");
    const char *k;
    json_t *v;
    /* the key's path, built for messages only */
#define KP lp_key(dp, k, p)
    json_object_foreach(j, k, v) {
        if (strcmp(k, "dtype") == 0) {
            kiln_dtype dt;
            if (!json_is_string(v) || !kiln_dtype_parse(json_string_value(v), &dt))
                return rerr(r, KILN_ERR_INVALID, KP, "bad dtype %s%s%s",
                            json_is_string(v) ? "\"" : "",
                            json_is_string(v) ? json_string_value(v) : "(not a string)",
                            json_is_string(v) ? "\"" : "");
            kiln_desc_set_dtype(g, d, dt);
        } else if (strcmp(k, "shape") == 0) {
            uint32_t rank;
            if (!json_is_array(v) || json_array_size(v) > INT32_MAX)
                return rerr(r, KILN_ERR_INVALID, KP, "shape must be a list of integers");
            kiln_status st = kiln__json_int_list(&r->ja, all_ints(v) ? "" : KP, v, &rank);
            if (st != KILN_OK)
                return st;
            for (uint32_t i = 0; i < rank; i++)
                if (r->ja.ibuf[i] < -1)
                    return rerr(r, KILN_ERR_INVALID, KP, "dim %u is %lld (use -1 for unknown)",
                                i, (long long)r->ja.ibuf[i]);
            if (rank > KILN_MAX_RANK)
                return rerr(r, KILN_ERR_INVALID, KP, "shape has %u dims; kiln supports at most %d",
                            rank, KILN_MAX_RANK);
            if (kiln_desc_set_shape(g, d, (int32_t)rank, r->ja.ibuf) != KILN_OK)
                return nomem(r);
        } else if (strcmp(k, "format") == 0 || strcmp(k, "memory_type") == 0) {
            if (!json_is_string(v))
                return rerr(r, KILN_ERR_INVALID, KP, "%s must be a string", k);
            if (k[0] == 'f')
                kiln_desc_set_format(g, d, json_string_value(v));
            else
                kiln_desc_set_memory_type(g, d, json_string_value(v));
        } else if (strcmp(k, "ref_input") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT16_MAX)
                return rerr(r, KILN_ERR_INVALID, KP, "ref_input must be an input index");
            kiln_desc_set_ref_input(g, d, (int32_t)json_integer_value(v));
        } else if (strcmp(k, "offset") == 0 || strcmp(k, "size") == 0) {
            if (!json_is_integer(v))
                return rerr(r, KILN_ERR_INVALID, KP, "%s must be an integer", k);
            if (k[0] == 'o')
                kiln_desc_set_offset(g, d, json_integer_value(v));
            else
                kiln_desc_set_size(g, d, json_integer_value(v));
        } else if (strcmp(k, "attrs") == 0) {
            kiln_status st = kiln__json_parse_attrs(&r->ja, KP, v, kiln_desc_attrs_mut(g, d));
            if (st != KILN_OK)
                return st;
        } else if (!kiln__json_is_xkey(k)) {
            return rerr(r, KILN_ERR_INVALID, KP, "unknown key \"%s\"", k);
        }
    }
#undef KP
    return kiln_graph_oom(g) ? nomem(r) : KILN_OK;
}

/* ---- nodes and graphs ---------------------------------------------------- */

static kiln_status add_node(rjs *r, rgraph *rg, json_t *jn, size_t idx);
static kiln_status finish_graph(rjs *r, rgraph *rg);

static void rgraph_free(rgraph *rg)
{
    kiln__free(rg->ins);
    kiln__free(rg->ctl);
    kiln__free(rg->nodes);
}

static kiln_status parse_subgraph(rjs *r, const lpath *sp, kiln_graph *g, kiln_node_id n,
                                  const char *role, json_t *j)
{
    char path[KILN_JSON_PATH_MAX]; /* its path (messages and attrs) */
    lp_str(sp, path);
    if (!json_is_object(j))
        return rerr(r, KILN_ERR_INVALID, path, "subgraph must be an object");
    static const char *const keys[] = {"name", "nodes", "attrs"};
    json_t *vals[3];
    char p[KILN_JSON_PATH_MAX];
    const char *bad = kiln__json_pick(j, keys, vals, 3);
    if (bad) {
        kiln__json_path_key(p, path, bad);
        return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", bad);
    }
    json_t *name = vals[0], *nodes = vals[1], *attrs = vals[2];
    const char *sname = json_string_value(name);
    if (!sname || !sname[0])
        return rerr(r, KILN_ERR_INVALID, path, "subgraph needs a non-empty \"name\"");
    if (!json_is_array(nodes))
        return rerr(r, KILN_ERR_INVALID, path, "subgraph needs a \"nodes\" list");
    kiln_graph *sg = kiln_node_add_subgraph(g, n, role, sname);
    if (!sg) {
        if (kiln_graph_find_subgraph(r->root, sname))
            return rerr(r, KILN_ERR_DUPLICATE, path, "duplicate subgraph name \"%s\"", sname);
        return nomem(r);
    }
    kiln_status st = KILN_OK;
    if (attrs) {
        kiln__json_path_key(p, path, "attrs");
        if ((st = kiln__json_parse_attrs(&r->ja, p, attrs, kiln_graph_attrs(sg))) != KILN_OK)
            return st;
    }
    rgraph srg = {.g = sg, .lp = sp};
    for (size_t i = 0; i < json_array_size(nodes) && st == KILN_OK; i++)
        st = add_node(r, &srg, json_array_get(nodes, i), i);
    if (st == KILN_OK)
        st = finish_graph(r, &srg);
    rgraph_free(&srg);
    return st;
}

/* Record input @p i (@p v: "name", "name:k" or null) of the node at @p np.
 * A producer added already is looked up now, while its name's entries are
 * likely still cached. */
static kiln_status pend_input(rjs *r, rgraph *rg, const lpath *np, uint32_t i, json_t *v)
{
    pend_in pi = {0, 0, 0, 0};
    if (!json_is_null(v)) {
        const char *s = json_string_value(v);
        char path[KILN_JSON_PATH_MAX];
        if (!s || !s[0])
            return rerr(r, KILN_ERR_INVALID, lp_idx(np, "inputs", i, path),
                        "an input is \"producer:k\", \"producer\" or null");
        size_t len = strlen(s), colon = len;
        while (colon > 0 && s[colon - 1] >= '0' && s[colon - 1] <= '9')
            colon--;
        unsigned long long k = 0;
        if (colon > 1 && colon < len && s[colon - 1] == ':' && len - colon <= 10)
            k = strtoull(s + colon, NULL, 10);
        if (colon > 1 && colon < len && s[colon - 1] == ':' && len - colon <= 10 &&
            k <= UINT32_MAX) {
            if (!KILN_JSON_SCRATCH(r, cbuf, ccap, (uint32_t)colon))
                return nomem(r);
            memcpy(r->cbuf, s, colon - 1);
            r->cbuf[colon - 1] = 0;
            pi = (pend_in){kiln_intern(rg->g, r->cbuf), 0, (uint32_t)k, 2};
        } else {
            pi = (pend_in){kiln_intern(rg->g, s), 0, 0, 1};
        }
        if (!pi.prod)
            return nomem(r);
        pi.src = kiln__name_lookup(rg->g, pi.prod);
    }
    if (!KILN_GROW(rg->ins, rg->ins_cap, rg->nins + 1))
        return nomem(r);
    rg->ins[rg->nins++] = pi;
    return KILN_OK;
}

static kiln_status add_node(rjs *r, rgraph *rg, json_t *jn, size_t idx)
{
    kiln_graph *g = rg->g;
    char path[KILN_JSON_PATH_MAX], p[KILN_JSON_PATH_MAX];
    const lpath np = {rg->lp, "nodes", idx, true};
#define NP lp_str(&np, path) /* the node's path, built for messages only */
    if (!json_is_object(jn))
        return rerr(r, KILN_ERR_INVALID, NP, "node must be an object");
    static const char *const keys[] = {"name",    "type",  "inputs",    "control_inputs",
                                       "input_descs", "outputs", "attrs", "subgraphs",
                                       "engine",  "stream_id", "id"};
    json_t *vals[11];
    const char *bad = kiln__json_pick(jn, keys, vals, 11);
    if (bad) {
        lp_key(&np, bad, p);
        return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", bad);
    }
    json_t *name = vals[0], *type = vals[1], *inputs = vals[2], *ctrl = vals[3];
    json_t *idescs = vals[4], *outputs = vals[5], *attrs = vals[6], *subs = vals[7];
    json_t *engine = vals[8], *stream = vals[9], *id = vals[10];
    const char *sname = json_string_value(name), *stype = json_string_value(type);
    if (!sname || !sname[0])
        return rerr(r, KILN_ERR_INVALID, NP, "node needs a non-empty string \"name\"");
    if (!stype || !stype[0])
        return rerr(r, KILN_ERR_INVALID, NP, "node \"%s\" needs a non-empty string \"type\"",
                    sname);
    static const char *const list_keys[] = {"inputs", "control_inputs", "input_descs",
                                            "outputs"};
    json_t *lists[] = {inputs, ctrl, idescs, outputs};
    for (int i = 0; i < 4; i++) {
        if (lists[i] && !json_is_array(lists[i])) {
            lp_key(&np, list_keys[i], p);
            return rerr(r, KILN_ERR_INVALID, p, "must be a list");
        }
    }
    uint32_t nin = (uint32_t)json_array_size(inputs), nout = (uint32_t)json_array_size(outputs);
    if (idescs && json_array_size(idescs) != nin) {
        lp_key(&np, "input_descs", p);
        return rerr(r, KILN_ERR_INVALID, p, "node \"%s\" has %u inputs but %zu input_descs",
                    sname, nin, json_array_size(idescs));
    }
    kiln_node_id n = kiln_graph_add_node(g, sname, stype, nin, nout);
    if (!n) {
        if (kiln_graph_find_node(g, sname)) {
            lp_key(&np, "name", p);
            return rerr(r, KILN_ERR_DUPLICATE, p, "duplicate node name \"%s\"", sname);
        }
        return nomem(r);
    }
    /* Pending edges, resolved in finish_graph. */
    if (!KILN_GROW(rg->nodes, rg->nodes_cap, n + 1))
        return nomem(r);
    rg->nodes[n] = (pend_node){rg->nins, rg->nctl, (uint32_t)json_array_size(ctrl)};
    kiln_status st;
    for (uint32_t i = 0; i < nin; i++) {
        if ((st = pend_input(r, rg, &np, i, json_array_get(inputs, i))) != KILN_OK)
            return st;
    }
    for (size_t i = 0; i < json_array_size(ctrl); i++) {
        const char *c = json_string_value(json_array_get(ctrl, i));
        if (!c || !c[0])
            return rerr(r, KILN_ERR_INVALID, lp_idx(&np, "control_inputs", i, p),
                        "a control input is a node name");
        if (!KILN_GROW(rg->ctl, rg->ctl_cap, rg->nctl + 1))
            return nomem(r);
        if (!(rg->ctl[rg->nctl++] = kiln_intern(g, c)))
            return nomem(r);
    }
    for (uint32_t i = 0; i < nout; i++) {
        const lpath dp = {&np, "outputs", i, true};
        st = parse_desc(r, &dp, g, json_array_get(outputs, i), kiln_node_output_desc(g, n, i));
        if (st != KILN_OK)
            return st;
    }
    for (uint32_t i = 0; idescs && i < nin; i++) {
        const lpath dp = {&np, "input_descs", i, true};
        st = parse_desc(r, &dp, g, json_array_get(idescs, i), kiln_node_input_desc_mut(g, n, i));
        if (st != KILN_OK)
            return st;
    }
    if (attrs) {
        lp_key(&np, "attrs", p);
        if ((st = kiln__json_parse_attrs(&r->ja, p, attrs, kiln_node_attrs_mut(g, n))) != KILN_OK)
            return st;
    }
    if (engine || stream || id) {
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        if (!a)
            return nomem(r);
        if (engine && !json_is_string(engine))
            return rerr(r, KILN_ERR_INVALID, lp_key(&np, "engine", p), "engine must be a string");
        if ((stream && !json_is_integer(stream)) || (id && !json_is_integer(id)))
            return rerr(r, KILN_ERR_INVALID,
                        lp_key(&np, stream && !json_is_integer(stream) ? "stream_id" : "id", p),
                        "must be an integer");
        if ((engine && kiln_attrs_set_string(a, KILN_ATTR_ENGINE, json_string_value(engine))) ||
            (stream &&
             kiln_attrs_set_int(a, KILN_ATTR_STREAM_ID, json_integer_value(stream))) ||
            (id && kiln_attrs_set_int(a, KILN_ATTR_TOPO_ID, json_integer_value(id))))
            return nomem(r);
    }
    if (subs) {
        const lpath subs_p = {&np, "subgraphs", 0, false};
        if (!json_is_object(subs))
            return rerr(r, KILN_ERR_INVALID, lp_str(&subs_p, p),
                        "subgraphs must be an object (role -> graph)");
        const char *k;
        json_t *v;
        json_object_foreach(subs, k, v) {
            const lpath sp = {&subs_p, k, 0, false};
            if ((st = parse_subgraph(r, &sp, g, n, k, v)) != KILN_OK)
                return st;
        }
    }
#undef NP
    return kiln_graph_oom(g) ? nomem(r) : KILN_OK;
}

/* JSON path of input / control input @p i of node @p n (error messages only). */
static const char *edge_path(char *p, const rgraph *rg, kiln_node_id n, const char *list,
                             uint32_t i)
{
    const lpath np = {rg->lp, "nodes", n - 1, true};
    return lp_idx(&np, list, i, p);
}

/* Pass 2: connect data and control edges of every node of @p rg.  Producers
 * are found by their interned name symbol (no string hashing per edge). */
static kiln_status finish_graph(rjs *r, rgraph *rg)
{
    kiln_graph *g = rg->g;
    char p[KILN_JSON_PATH_MAX];
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        const pend_node *pn = &rg->nodes[n];
        uint32_t nin = kiln_node_input_count(g, n);
        for (uint32_t i = 0; i < nin; i++) {
            const pend_in *pi = &rg->ins[pn->in_off + i];
            if (!pi->form)
                continue;
            kiln_node_id src = pi->src ? pi->src : kiln__name_lookup(g, pi->prod);
            uint32_t k = pi->k;
            if (!src && pi->form == 2) {
                /* "a:1" may be the whole name of a node (output 0). */
                const char *pname = kiln_sym_str(g, pi->prod);
                char tail[16];
                size_t plen = strlen(pname);
                int tl = snprintf(tail, sizeof(tail), ":%u", k);
                if (!KILN_JSON_SCRATCH(r, cbuf, ccap, (uint32_t)(plen + (size_t)tl + 1)))
                    return nomem(r);
                memcpy(r->cbuf, pname, plen);
                memcpy(r->cbuf + plen, tail, (size_t)tl + 1);
                src = kiln_graph_find_node(g, r->cbuf);
                k = 0;
            }
            if (!src)
                return rerr(r, KILN_ERR_NOT_FOUND, edge_path(p, rg, n, "inputs", i),
                            "node \"%s\": input %u names missing producer \"%s\"",
                            kiln_node_name_str(g, n), i, kiln_sym_str(g, pi->prod));
            if (k >= kiln_node_output_count(g, src))
                return rerr(r, KILN_ERR_INVALID, edge_path(p, rg, n, "inputs", i),
                            "node \"%s\": input %u reads output %u of \"%s\", which has %u "
                            "outputs (output index out of range)",
                            kiln_node_name_str(g, n), i, k, kiln_node_name_str(g, src),
                            kiln_node_output_count(g, src));
            if (kiln_edge_add(g, src, k, n, i) != KILN_OK)
                return rerr(r, KILN_ERR_INTERNAL, edge_path(p, rg, n, "inputs", i),
                            "cannot connect input %u", i);
        }
        for (uint32_t i = 0; i < pn->nctl; i++) {
            kiln_sym cname = rg->ctl[pn->ctl_off + i];
            kiln_node_id src = kiln__name_lookup(g, cname);
            if (!src)
                return rerr(r, KILN_ERR_NOT_FOUND, edge_path(p, rg, n, "control_inputs", i),
                            "node \"%s\": no control input node named \"%s\"",
                            kiln_node_name_str(g, n), kiln_sym_str(g, cname));
            if (src == n)
                return rerr(r, KILN_ERR_INVALID, edge_path(p, rg, n, "control_inputs", i),
                            "node \"%s\": control input on itself", kiln_node_name_str(g, n));
            if (kiln_ctrl_add(g, src, n) != KILN_OK)
                return nomem(r);
        }
    }
    return kiln_graph_oom(g) ? nomem(r) : KILN_OK;
}

/* ---- "nodes" on two threads ---------------------------------------------- */

/*
 * When the "nodes" list is long, a second thread parses it (json_loadb per
 * node, as read_nodes does) while the calling thread builds the graph from
 * the trees: the list is handed over in slots of about PIPE_CHUNK bytes of
 * text, PIPE_SLOTS of them in a ring.  The parsing thread fills a free slot
 * (freeing the trees left in it first) and marks it full; the calling thread
 * adds a full slot's nodes in order and marks it free.  Each slot has its
 * own arena chunk set, owned by the parsing thread while it runs.  A syntax
 * error ends the list: it is recorded in the slot and reported when the
 * calling thread reaches it, after the nodes before it, so messages and their
 * order are those of the sequential reader.  On an error of its own the
 * calling thread stops the parser.  Both threads read the text; only the
 * parser moves through it (and drops the pages behind it).
 */
#define PIPE_SLOTS 3
#define PIPE_CHUNK ((size_t)128 << 10)

size_t kiln__json_read_chunk;

typedef struct pslot {
    json_t **nodes;
    uint32_t n, cap;
    aset as;
    bool full;    /* the calling thread's turn */
    uint8_t last; /* 0: more slots follow, 1: the list ended, 2: syntax error, 3: no memory */
    size_t end;   /* text offset after the slot */
    size_t err_off;
    char err_text[JSON_ERROR_TEXT_LENGTH];
} pslot;

typedef struct npipe {
    rjs *r;
    size_t pos, chunk;
    bool arena; /* the parser allocates from the slots' chunk sets */
    bool stop;  /* the calling thread gave up */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pslot slots[PIPE_SLOTS];
} npipe;

/* Free the trees of @p s (on the thread that owns the arena, if in use). */
static void pslot_clear(npipe *p, pslot *s)
{
    if (p->arena)
        arena.set = &s->as;
    aset_rewind(p->arena ? &s->as : NULL, s->nodes, s->n);
    s->n = 0;
}

/* Parse nodes from p->pos into @p s until PIPE_CHUNK bytes, the list's end
 * or an error. */
static void pslot_fill(npipe *p, pslot *s)
{
    const rjs *r = p->r;
    const char *t = r->text;
    size_t pos = p->pos, start = pos, len = r->len;
    s->last = 0;
    for (;;) {
        while (pos < len && (t[pos] == ' ' || t[pos] == '\t' || t[pos] == '\n' || t[pos] == '\r'))
            pos++;
        if (s->n == s->cap && !KILN_GROW(s->nodes, s->cap, s->n + 1)) {
            s->last = 3;
            break;
        }
        json_error_t e;
        json_t *j = json_loadb(t + pos, len - pos, JFLAGS, &e);
        if (!j) {
            s->last = 2;
            s->err_off = pos + (size_t)(e.position > 0 ? e.position - 1 : 0);
            memcpy(s->err_text, e.text, sizeof(s->err_text));
            break;
        }
        s->nodes[s->n++] = j;
        pos += (size_t)e.position;
        while (pos < len && (t[pos] == ' ' || t[pos] == '\t' || t[pos] == '\n' || t[pos] == '\r'))
            pos++;
        if (pos < len && t[pos] == ']') {
            pos++;
            s->last = 1;
            break;
        }
        if (pos >= len || t[pos] != ',') {
            s->last = 2;
            s->err_off = pos;
            snprintf(s->err_text, sizeof(s->err_text), "expected ',' or ']' in \"nodes\"");
            break;
        }
        pos++;
        if (pos - start >= p->chunk)
            break;
    }
    s->end = p->pos = pos;
}

static void *pipe_parser(void *arg)
{
    npipe *p = arg;
    if (p->arena)
        arena_on(&p->slots[0].as);
    for (uint32_t k = 0;; k = (k + 1) % PIPE_SLOTS) {
        pslot *s = &p->slots[k];
        pthread_mutex_lock(&p->mu);
        while (s->full && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        pslot_clear(p, s);
        pslot_fill(p, s);
        drop_to(p->r, p->pos);
        pthread_mutex_lock(&p->mu);
        s->full = true;
        pthread_cond_broadcast(&p->cv);
        if (s->last) /* the calling thread is done with the others already */
            while (s->full && !p->stop)
                pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (s->last)
            break;
    }
    /* the calling thread has stopped reading the slots: free them here, on
     * the arena's owner */
    for (uint32_t k = 0; k < PIPE_SLOTS; k++)
        pslot_clear(p, &p->slots[k]);
    if (p->arena)
        arena_off();
    return NULL;
}

/* Read the rest of "nodes" (after its '[' and first element's start) on two
 * threads; false when the parser thread could not start (nothing read). */
static bool read_nodes_piped(rjs *r, rgraph *rg, size_t chunk, kiln_status *st)
{
    npipe *p = kiln__calloc(1, sizeof(*p));
    if (!p)
        return false;
    p->r = r;
    p->pos = r->pos;
    p->chunk = chunk;
    p->arena = r->arena && arena_hooked();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_t th;
    bool started = pthread_create(&th, NULL, pipe_parser, p) == 0;
    *st = KILN_OK;
    size_t idx = 0;
    for (uint32_t k = 0; started; k = (k + 1) % PIPE_SLOTS) {
        pslot *s = &p->slots[k];
        pthread_mutex_lock(&p->mu);
        while (!s->full)
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        for (uint32_t i = 0; i < s->n && *st == KILN_OK; i++)
            *st = add_node(r, rg, s->nodes[i], idx++);
        if (*st == KILN_OK && s->last == 2)
            *st = syntax_at(r, s->err_off, s->err_text);
        else if (*st == KILN_OK && s->last == 3)
            *st = nomem(r);
        bool last = s->last != 0;
        pthread_mutex_lock(&p->mu);
        s->full = false;
        p->stop = *st != KILN_OK;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (*st != KILN_OK || last) {
            r->pos = s->end;
            break;
        }
    }
    if (started)
        pthread_join(th, NULL);
    for (uint32_t k = 0; k < PIPE_SLOTS; k++) {
        kiln__free(p->slots[k].nodes);
        aset_free(&p->slots[k].as);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    kiln__free(p);
    return started;
}

/* ---- the document -------------------------------------------------------- */

static kiln_status read_nodes(rjs *r, rgraph *rg)
{
    if (!eat(r, '['))
        return syntax_at(r, r->pos, "\"nodes\" must be a list");
    if (eat(r, ']'))
        return KILN_OK;
    size_t chunk = kiln__json_read_chunk ? kiln__json_read_chunk : PIPE_CHUNK;
    kiln_status st;
    if (r->len - r->pos > 2 * chunk &&
        (kiln__json_read_chunk || kiln__parallel_threads(kiln_graph_ctx(r->root)) > 1) &&
        read_nodes_piped(r, rg, chunk, &st))
        return st;
    for (size_t idx = 0;; idx++) {
        json_t *jn;
        bool in_arena = node_arena_begin(r->arena ? &r->seq : NULL);
        st = parse_value(r, &jn);
        if (st == KILN_OK)
            st = add_node(r, rg, jn, idx);
        if (in_arena)
            node_arena_end(&r->seq, jn);
        else
            json_decref(jn);
        if (st != KILN_OK)
            return st;
        drop_to(r, r->pos);
        if (eat(r, ']'))
            return KILN_OK;
        if (!eat(r, ','))
            return syntax_at(r, r->pos, "expected ',' or ']' in \"nodes\"");
    }
}

static kiln_status read_doc(rjs *r)
{
    static const lpath root = {NULL, "$", 0, false};
    rgraph rg = {.g = r->root, .lp = &root};
    kiln_status st = KILN_OK;
    unsigned seen = 0; /* 1 version, 2 name, 4 attrs, 8 nodes */
    if (!eat(r, '{')) {
        st = syntax_at(r, r->pos, "a graph document is a JSON object");
        goto done;
    }
    if (!eat(r, '}')) {
        for (;;) {
            json_t *key, *v = NULL;
            skip_ws(r);
            size_t kpos = r->pos;
            if ((st = parse_value(r, &key)) != KILN_OK)
                goto done;
            const char *k = json_string_value(key);
            if (!k || !eat(r, ':')) {
                json_decref(key);
                st = syntax_at(r, k ? r->pos : kpos, k ? "expected ':'" : "expected a key");
                goto done;
            }
            char p[KILN_JSON_PATH_MAX];
            kiln__json_path_key(p, "$", k);
            unsigned bit = strcmp(k, "kiln_graph") == 0 ? 1
                           : strcmp(k, "name") == 0     ? 2
                           : strcmp(k, "attrs") == 0    ? 4
                           : strcmp(k, "nodes") == 0    ? 8
                                                        : 0;
            if (bit & seen)
                st = rerr(r, KILN_ERR_INVALID, p, "duplicate key");
            else if (!bit && !kiln__json_is_xkey(k))
                st = rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", k);
            seen |= bit;
            if (st == KILN_OK && bit == 8)
                st = read_nodes(r, &rg);
            else if (st == KILN_OK)
                st = parse_value(r, &v);
            if (st == KILN_OK && bit == 1 &&
                (!json_is_integer(v) || json_integer_value(v) != 1))
                st = rerr(r, KILN_ERR_VERSION, p, "unsupported version (this reader reads "
                          "\"kiln_graph\": 1)");
            if (st == KILN_OK && bit == 2) {
                if (!json_is_string(v))
                    st = rerr(r, KILN_ERR_INVALID, p, "name must be a string");
                else if (!(r->root->name = kiln_intern(r->root, json_string_value(v))) &&
                         json_string_length(v))
                    st = nomem(r);
            }
            if (st == KILN_OK && bit == 4)
                st = kiln__json_parse_attrs(&r->ja, p, v, kiln_graph_attrs(r->root));
            json_decref(v);
            json_decref(key);
            if (st != KILN_OK)
                goto done;
            if (eat(r, '}'))
                break;
            if (!eat(r, ',')) {
                st = syntax_at(r, r->pos, "expected ',' or '}'");
                goto done;
            }
        }
    }
    skip_ws(r);
    if (r->pos != r->len) {
        st = syntax_at(r, r->pos, "data after the document");
        goto done;
    }
    if (!(seen & 1)) {
        st = rerr(r, KILN_ERR_VERSION, "$", "missing \"kiln_graph\": 1 (not a kiln graph "
                  "document?)");
        goto done;
    }
    if (!(seen & 8)) {
        st = rerr(r, KILN_ERR_INVALID, "$", "missing \"nodes\"");
        goto done;
    }
    if ((st = finish_graph(r, &rg)) != KILN_OK)
        goto done;
    /* The root name may have come after the subgraphs. */
    if (kiln_graph_find_subgraph(r->root, kiln_graph_name(r->root)))
        st = rerr(r, KILN_ERR_DUPLICATE, "$.name", "subgraph with the root's name \"%s\"",
                  kiln_graph_name(r->root));
done:
    rgraph_free(&rg);
    return st;
}

/* Occurrences of "name" in @p n bytes at @p s. */
static uint64_t count_names(const char *s, size_t n)
{
    uint64_t c = 0;
    for (const char *end = s + n; (s = memmem(s, (size_t)(end - s), "\"name\"", 6)) != NULL;
         s += 6)
        c++;
    return c;
}

/*
 * The number of nodes to reserve for: the "name" keys of the text, counted
 * in three windows (start, middle, end) of NAME_WINDOW bytes and scaled to
 * the length (all of them when the text is shorter than the windows).  A
 * reservation only sizes arrays (too small, they grow; too large, the tail
 * is never touched), so the estimate need not be exact, and sampling keeps
 * the whole text from being read (and its pages faulted in) twice.
 */
#define NAME_WINDOW ((size_t)1 << 20)

static uint64_t estimate_names(const char *text, size_t len)
{
    if (len <= 4 * NAME_WINDOW)
        return count_names(text, len);
    uint64_t c = count_names(text, NAME_WINDOW) +
                 count_names(text + (len - NAME_WINDOW) / 2, NAME_WINDOW) +
                 count_names(text + len - NAME_WINDOW, NAME_WINDOW);
    return c * len / (3 * NAME_WINDOW);
}

static kiln_status read_text(kiln_ctx *ctx, const char *text, size_t len, const char *source_name,
                             bool mapped, kiln_graph **out, kiln_error *err)
{
    *out = NULL;
    rjs r = {.src = source_name ? source_name : "<string>",
             .text = text,
             .len = len,
             .err = err,
             .mapped = mapped};
    r.ja.err = err;
    r.arena = arena_acquire();
    kiln_status st;
    r.root = kiln_graph_create(ctx, "");
    if (!r.root) {
        st = nomem(&r);
        goto fail;
    }
    uint64_t names = estimate_names(text, len);
    if (names > 1 && names < UINT32_MAX / 8) {
        kiln_graph_reserve(r.root, (uint32_t)names, 0, 0);
        kiln__intern_reserve(&ctx->strings, (uint32_t)names);
    }
    if ((st = read_doc(&r)) != KILN_OK)
        goto fail;
    if ((st = kiln_graph_verify(r.root, err)) != KILN_OK)
        goto fail;
    if (kiln_graph_oom(r.root)) {
        st = nomem(&r);
        goto fail;
    }
    *out = r.root;
    st = KILN_OK;
    goto done;
fail:
    kiln_graph_destroy(r.root);
    if (!r.syntax && source_name)
        kiln_error_push(err, "%s", source_name);
done:
    kiln__json_scratch_free(&r.ja);
    kiln__free(r.cbuf);
    aset_free(&r.seq);
    arena_release(r.arena);
    return st;
}

kiln_status kiln_graph_read_json_string(kiln_ctx *ctx, const char *text, size_t len,
                                        const char *source_name, kiln_graph **out, kiln_error *err)
{
    return read_text(ctx, text, len, source_name, false, out, err);
}

/*
 * A regular file is mapped, not copied: the text is read from the page cache
 * in place, and drop_to keeps only a window of it resident.  Anything else
 * (a pipe, an empty file, a failed mmap) is read whole by kiln_file_read_all,
 * which also words the errors of files that cannot be opened.
 */
kiln_status kiln_graph_read_json_file(kiln_ctx *ctx, const char *path, kiln_graph **out,
                                      kiln_error *err)
{
    char *text;
    size_t len;
    *out = NULL;
    /* stat first: opening a FIFO would wait for its writer */
    struct stat sb;
    int fd = strcmp(path, "-") != 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)
                 ? open(path, O_RDONLY | O_CLOEXEC)
                 : -1;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uint64_t)sb.st_size <= SIZE_MAX) {
        len = (size_t)sb.st_size;
        void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            close(fd);
            kiln_status st = read_text(ctx, map, len, path, true, out, err);
            munmap(map, len);
            return st;
        }
    }
    if (fd >= 0)
        close(fd);
    kiln_status st = kiln_file_read_all(path, &text, &len, err);
    if (st != KILN_OK)
        return st;
    st = read_text(ctx, text, len, path, false, out, err);
    kiln__free(text);
    return st;
}
