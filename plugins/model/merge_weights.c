/*
 * merge_weights.c - MergeWeights (GE ModelBuilder::MergeWeights, seed §9):
 * every Const/Constant value of the root graph and its subgraphs laid into
 * one blob, each entry 64-byte aligned, equal values stored once.
 *
 * Equality is decided by SHA-256 of the bytes (nettle), then a
 * byte compare, so a hash collision can never merge two different values;
 * only values whose size and sampled bytes (sample_key) another value shares
 * are hashed.
 * The pass writes the layout on the graph (docs/build.md):
 *   Const node   _kiln_weight_offset, _kiln_weight_size (int, bytes)
 *   root graph   _kiln_weight_size (the blob's size), _kiln_weight_constants,
 *                _kiln_weight_deduplicated
 * and counts `constants`, `deduplicated` and `bytes_saved` as pass stats.
 * The model file's writer lays the bytes out with the same plan.
 */
#include "kmodel.h"

#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

int km_is_const(const kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    return strcmp(op, "Const") == 0 || strcmp(op, "Constant") == 0;
}

static const char *const data_like_ops[6] = {"Data",     "RefData",  "Const",
                                             "Constant", "Variable", "NetOutput"};

int km_is_data_like(const kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    for (size_t i = 0; i < 6; i++)
        if (strcmp(op, data_like_ops[i]) == 0)
            return 1;
    return 0;
}

void km_data_like_init(km_data_like *d, const kiln_graph *g)
{
    for (size_t i = 0; i < 6; i++)
        d->op[i] = kiln_sym_lookup(g, data_like_ops[i]); /* 0: no node has it */
}

int km_data_like_has(const km_data_like *d, const kiln_graph *g, kiln_node_id n)
{
    kiln_sym op = kiln_node_op(g, n);
    for (size_t i = 0; i < 6; i++)
        if (d->op[i] && d->op[i] == op)
            return 1;
    return 0;
}

int km_sha256(const void *p, size_t n, uint8_t out[32])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, p);
    sha256_digest(&c, SHA256_DIGEST_SIZE, out);
    return 1;
}

void km_weights_free(km_weights *w)
{
    free(w->items);
    memset(w, 0, sizeof(*w));
}

/* Hash slot: the index + 1 of the first weight with these digest bits (0 = empty). */
typedef struct slot {
    uint8_t digest[32];
    uint32_t first; /* weight index + 1 */
} slot;

static int64_t align_up(int64_t v, int64_t a)
{
    return (v + a - 1) / a * a;
}

/* Append the constants of @p g to @p w (growing *cap); errors name the node. */
static kiln_status collect(kiln_graph *g, km_weights *w, uint32_t *cap, kiln_error *err)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (!km_is_const(g, n))
            continue;
        kiln_tensor_value v;
        if (!kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v))
            continue; /* no value: nothing to store (a runtime refuses such a Const) */
        if (w->count == *cap) {
            uint32_t nc = *cap ? *cap * 2 : 64;
            km_weight *it = realloc(w->items, sizeof(*it) * nc);
            if (!it)
                return kiln_errorf(err, KILN_ERR_NOMEM, "MergeWeights: out of memory");
            w->items = it;
            *cap = nc;
        }
        km_weight *x = &w->items[w->count++];
        memset(x, 0, sizeof(*x));
        x->graph = g;
        x->node = n;
        x->size = (int64_t)v.nbytes;
        x->data = v.data;
    }
    return KILN_OK;
}

/* Size and a sample of the bytes (the first and last 64, 32 words between):
 * equal values have equal keys, so only values sharing a key can be equal. */
static int64_t sample_key(const km_weight *x)
{
    const unsigned char *p = x->data;
    size_t n = (size_t)x->size;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
#define MIX(off)                                                                                   \
    do {                                                                                           \
        uint64_t w_;                                                                               \
        memcpy(&w_, p + (off), 8);                                                                 \
        h = (h ^ w_) * 0xff51afd7ed558ccdull;                                                      \
        h ^= h >> 32;                                                                              \
    } while (0)
    if (!p || n < 8)
        for (size_t i = 0; p && i < n; i++)
            h = (h ^ p[i]) * 0x100000001b3ull;
    else if (n <= 512)
        for (size_t i = 0; i + 8 <= n; i += 8)
            MIX(i);
    else {
        for (size_t i = 0; i < 64; i += 8) {
            MIX(i);
            MIX(n - 64 + i);
        }
        for (size_t k = 0, step = (n - 136) / 32; k < 32; k++)
            MIX(64 + k * step);
    }
#undef MIX
    return (int64_t)h;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* How many entries of the sorted @p v equal @p x (0, 1 or "2 or more"). */
static uint32_t size_count(const int64_t *v, uint32_t n, int64_t x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t c = 0;
    for (uint32_t i = lo; i < n && v[i] == x && c < 2; i++)
        c++;
    return c;
}

kiln_status km_weights_plan(kiln_graph *root, km_weights *w, kiln_error *err)
{
    memset(w, 0, sizeof(*w));
    uint32_t cap = 0;
    kiln_status st = collect(root, w, &cap, err);
    for (uint32_t i = 0; st == KILN_OK && i < kiln_graph_all_subgraph_count(root); i++)
        st = collect(kiln_graph_all_subgraph(root, i), w, &cap, err);
    if (st != KILN_OK) {
        km_weights_free(w);
        return st;
    }
    /* Open addressing over the digests, load factor <= 1/2. */
    size_t nslots = 16;
    while (nslots < (size_t)w->count * 2)
        nslots *= 2;
    slot *tab = calloc(nslots, sizeof(*tab));
    if (!tab) {
        km_weights_free(w);
        return kiln_errorf(err, KILN_ERR_NOMEM, "MergeWeights: out of memory");
    }
    /* Only a value whose size and sampled bytes another value shares can be
     * stored once: the others skip the digest (most of a model's weights
     * have a size of their own, and hashing all of them was most of this
     * pass's time; a model with two branches of equal shapes shares keys). */
    int64_t *keys = malloc(((size_t)w->count + 1) * sizeof(*keys));
    if (!keys) {
        free(tab);
        km_weights_free(w);
        return kiln_errorf(err, KILN_ERR_NOMEM, "MergeWeights: out of memory");
    }
    for (uint32_t i = 0; i < w->count; i++)
        keys[i] = w->items[i].key = sample_key(&w->items[i]);
    qsort(keys, w->count, sizeof(*keys), cmp_i64);
    int64_t end = 0;
    for (uint32_t i = 0; i < w->count; i++) {
        km_weight *x = &w->items[i];
        if (size_count(keys, w->count, x->key) < 2) {
            x->offset = end;
            end = align_up(end + x->size, KM_WEIGHT_ALIGN);
            continue;
        }
        uint8_t d[32];
        if (!km_sha256(x->data ? x->data : "", (size_t)x->size, d)) {
            free(keys);
            free(tab);
            km_weights_free(w);
            return kiln_errorf(err, KILN_ERR_INTERNAL, "MergeWeights: SHA-256 failed");
        }
        uint64_t h;
        memcpy(&h, d, sizeof(h));
        size_t k = (size_t)h & (nslots - 1);
        const km_weight *same = NULL;
        for (; tab[k].first; k = (k + 1) & (nslots - 1)) {
            const km_weight *y = &w->items[tab[k].first - 1];
            if (memcmp(tab[k].digest, d, 32) == 0 && y->size == x->size &&
                (x->size == 0 || memcmp(y->data, x->data, (size_t)x->size) == 0)) {
                same = y;
                break;
            }
        }
        if (same) {
            x->offset = same->offset;
            x->dedup = 1;
            w->deduplicated++;
            continue;
        }
        memcpy(tab[k].digest, d, 32);
        tab[k].first = i + 1;
        x->offset = end;
        end = align_up(end + x->size, KM_WEIGHT_ALIGN);
    }
    free(keys);
    free(tab);
    w->blob_size = end;
    return KILN_OK;
}

static kiln_pass_result merge_weights_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    km_weights w;
    kiln_error *err = kiln_pass_error(ctx);
    if (km_weights_plan(g, &w, err) != KILN_OK)
        return KILN_PASS_FAILED;
    int64_t saved = 0;
    for (uint32_t i = 0; i < w.count; i++) {
        const km_weight *x = &w.items[i];
        kiln_attrs *a = kiln_node_attrs_mut(x->graph, x->node);
        if (!a || kiln_attrs_set_int(a, KM_ATTR_WEIGHT_OFFSET, x->offset) != KILN_OK ||
            kiln_attrs_set_int(a, KM_ATTR_WEIGHT_SIZE, x->size) != KILN_OK) {
            km_weights_free(&w);
            kiln_errorf(err, KILN_ERR_NOMEM, "MergeWeights: out of memory");
            return KILN_PASS_FAILED;
        }
        if (x->dedup)
            saved += x->size;
    }
    kiln_attrs *ra = kiln_graph_attrs(g);
    kiln_status st = ra ? kiln_attrs_set_int(ra, KM_ATTR_WEIGHT_SIZE, w.blob_size) : KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = kiln_attrs_set_int(ra, KM_ATTR_WEIGHT_CONSTS, w.count);
    if (st == KILN_OK)
        st = kiln_attrs_set_int(ra, KM_ATTR_WEIGHT_DEDUP, w.deduplicated);
    kiln_pass_stat_add(ctx, "constants", w.count);
    kiln_pass_stat_add(ctx, "deduplicated", w.deduplicated);
    kiln_pass_stat_add(ctx, "bytes_saved", saved);
    kiln_pass_stat_add(ctx, "blob_bytes", w.blob_size);
    km_weights_free(&w);
    if (st != KILN_OK) {
        kiln_errorf(err, KILN_ERR_NOMEM, "MergeWeights: out of memory");
        return KILN_PASS_FAILED;
    }
    return KILN_PASS_CHANGED;
}

const kiln_pass_desc km_merge_weights_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "MergeWeights",
    .summary = "lay every Const value into one 64-byte-aligned blob, equal values once "
               "(SHA-256 + byte compare): _kiln_weight_offset/_kiln_weight_size",
    .flags = KILN_PASS_PRESERVES_CFG | KILN_PASS_NO_SUBGRAPHS,
    .run_graph = merge_weights_run,
};
