/*
 * graph_json.h - read and write graphs in the kiln graph JSON format, version
 * 1 (docs/graph_format.md).  Only core/, the CLI and tests include this
 * header.
 *
 * Mapping between the format and the IR:
 *   - nodes get ids in document order (the reader adds them in order), and the
 *     writer emits them in id order, so a read/write cycle keeps the order;
 *   - node keys `engine` (string), `stream_id` (int) and `id` (int) are stored
 *     as node attributes with the reserved names below; the writer turns
 *     attributes of those names and types back into the keys (and leaves
 *     them out of `attrs`);
 *   - TENSOR_DESC `offset`/`size` map to kiln_desc_offset/size (-1 = unset,
 *     not written), `memory_type` to kiln_desc_memory_type;
 *   - an explicit `{"type": "graph", "value": "<subgraph name>"}` attribute is
 *     stored as a string attribute (the IR has no graph attribute type).
 * The writer is deterministic: node order = id order, attributes in key string
 * order, `JSON_INDENT(2)`, and floats printed with the fewest digits (per node,
 * up to 17) that read back to the same value, so write -> read -> write gives
 * identical bytes.
 */
#ifndef KILN_CORE_GRAPH_JSON_H
#define KILN_CORE_GRAPH_JSON_H

#include "base.h"
#include <math.h>

/** Node attribute holding the `engine` key (string). */
#define KILN_ATTR_ENGINE "_kiln_engine"
/** Node attribute holding the `stream_id` key (int). */
#define KILN_ATTR_STREAM_ID "_kiln_stream_id"
/** Node attribute holding the `id` key (int, topological id written after build). */
#define KILN_ATTR_TOPO_ID "_kiln_id"

/** Tensors with more elements than this are written as `data_b64`. */
#define KILN_JSON_TENSOR_INLINE_MAX 64

/**
 * Read a graph JSON file.  On success *out is a new root graph in @p ctx (the
 * caller destroys it with kiln_graph_destroy); on failure *out is NULL and
 * @p err holds the first error: a syntax error as "<path>:<line>:<col>:
 * syntax error: ...", any other error as "$.json.path: ..." under a frame
 * naming @p path.  The graph is verified (kiln_graph_verify) before it is
 * returned, so cycles and bad `_parent_node_index` values are rejected.
 * O(size of the file); nodes are parsed one at a time, and a regular file is
 * mapped with only a window of it kept resident, so peak memory is the graph
 * plus about 8 MB of text and one node's jansson tree.
 */
KILN_API kiln_status kiln_graph_read_json_file(kiln_ctx *ctx, const char *path, kiln_graph **out,
                                               kiln_error *err);

/**
 * Like kiln_graph_read_json_file for @p len bytes at @p text (need not be
 * NUL-terminated).  @p source_name (optional) names the text in messages.
 */
KILN_API kiln_status kiln_graph_read_json_string(kiln_ctx *ctx, const char *text, size_t len,
                                                 const char *source_name, kiln_graph **out,
                                                 kiln_error *err);

/**
 * Write @p g (with its subgraphs) as a graph JSON document to @p f.  The text
 * is written in 256 KiB blocks as it is produced; when @p f has a file
 * descriptor, @p f is flushed first and the blocks go to the descriptor with
 * write(2), past f's buffer (so ftell(f) afterwards is not meaningful).
 * Errors: KILN_ERR_IO on a write error, KILN_ERR_NOMEM, KILN_ERR_INVALID for
 * a string that is not UTF-8.  The graph is not modified.
 */
KILN_API kiln_status kiln_graph_write_json(const kiln_graph *g, FILE *f, kiln_error *err);

/**
 * The document kiln_graph_write_json would write, as a NUL-terminated string
 * allocated with kiln__malloc (free with kiln__free).  NULL on failure.
 */
KILN_API char *kiln_graph_to_json_string(const kiln_graph *g, kiln_error *err);

/** Write @p g to @p path atomically (kiln_file_write_atomic). */
KILN_API kiln_status kiln_graph_write_json_file(const kiln_graph *g, const char *path,
                                                kiln_error *err);

/* ---- shared by graph_json_read.c, _attr.c and _write.c (internal) ------ */

#define KILN_JSON_PATH_MAX 256 /* JSON path buffer size; longer paths are truncated */

/* Text bytes per slot of the two-thread "nodes" reader (graph_json_read.c);
 * 0 = the default.  Nonzero also makes the reader use two threads whenever
 * the text is longer than two slots, whatever the thread count: for tests. */
extern size_t kiln__json_read_chunk;

struct json_t; /* jansson */

/** Attribute-value parsing state: reusable scratch buffers and the error. */
typedef struct kiln__jattr {
    kiln_error *err;
    int64_t *ibuf; /* also holds the dims after kiln__json_int_list */
    uint32_t icap;
    double *fbuf;
    uint32_t fcap;
    uint8_t *bbuf;
    uint32_t bcap;
    const char **sbuf;
    uint32_t scap;
    /* the attribute being parsed: its path is pbase.pkey (built into pbuf
     * only for an error message) */
    const char *pbase, *pkey;
    char pbuf[KILN_JSON_PATH_MAX];
} kiln__jattr;

/** Grow scratch buffer (r)->buf to @p need elements; false on OOM. */
#define KILN_JSON_SCRATCH(r, buf, cap, need) \
    ((need) <= (r)->cap || KILN_GROW((r)->buf, (r)->cap, (need)))

/** Parse the `attrs` object @p obj (at JSON path @p path) into @p a (NULL = OOM). */
/**
 * Take the values of the known @p keys of object @p obj into @p vals (NULL
 * for absent keys).  Returns the first key that is neither known nor an `x-`
 * key (the caller reports it with its JSON path), or NULL.
 */
const char *kiln__json_pick(struct json_t *obj, const char *const *keys, struct json_t **vals,
                            uint32_t n);

/** Record "<path>: <message>" in @p err (the reader's one error format). */
kiln_status kiln__json_err(kiln_error *err, kiln_status code, const char *path, const char *fmt,
                           ...) KILN_PRINTF(4, 5);
kiln_status kiln__json_parse_attrs(kiln__jattr *r, const char *path, struct json_t *obj,
                                   kiln_attrs *a);
/** Parse a list of integers into r->ibuf; *n receives its length. */
kiln_status kiln__json_int_list(kiln__jattr *r, const char *path, struct json_t *arr,
                                uint32_t *n);
void kiln__json_scratch_free(kiln__jattr *r);

static inline bool kiln__json_is_xkey(const char *k)
{
    return k[0] == 'x' && k[1] == '-';
}

/* Append @p s to the path of length @p n in @p out (truncated at
 * KILN_JSON_PATH_MAX - 1 bytes, as snprintf would); the new length. */
static inline size_t kiln__json_path_cat(char *out, size_t n, const char *s)
{
    size_t len = strlen(s);
    if (len > KILN_JSON_PATH_MAX - 1 - n)
        len = KILN_JSON_PATH_MAX - 1 - n;
    memcpy(out + n, s, len);
    return n + len;
}

/** "<base>.<key>" into @p out (KILN_JSON_PATH_MAX bytes, not @p base).
 * Built on every key the reader visits, so no printf. */
static inline void kiln__json_path_key(char *out, const char *base, const char *key)
{
    size_t n = kiln__json_path_cat(out, 0, base);
    n = kiln__json_path_cat(out, n, ".");
    out[kiln__json_path_cat(out, n, key)] = 0;
}

/** "<base>.<key>[<i>]" into @p out (KILN_JSON_PATH_MAX bytes). */
static inline void kiln__json_path_idx(char *out, const char *base, const char *key, size_t i)
{
    char num[24], *e = num + sizeof(num), *q = e;
    *--q = 0;
    *--q = ']';
    do
        *--q = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    *--q = '[';
    kiln__json_path_key(out, base, key);
    size_t n = strlen(out);
    out[kiln__json_path_cat(out, n, q)] = 0;
}

/** Name of an attribute type in the explicit `{"type": T}` form. */
static inline const char *kiln__json_attr_type_name(kiln_attr_type t)
{
    switch (t) {
    case KILN_ATTR_BOOL: return "bool";
    case KILN_ATTR_INT: return "int";
    case KILN_ATTR_FLOAT: return "float";
    case KILN_ATTR_STRING: return "string";
    case KILN_ATTR_LIST_INT: return "list_int";
    case KILN_ATTR_LIST_FLOAT: return "list_float";
    case KILN_ATTR_LIST_STRING: return "list_string";
    case KILN_ATTR_LIST_BOOL: return "list_bool";
    case KILN_ATTR_LIST_LIST_INT: return "list_list_int";
    case KILN_ATTR_DTYPE: return "dtype";
    case KILN_ATTR_TENSOR: return "tensor";
    case KILN_ATTR_NONE: break;
    }
    return "none";
}

/** Load a little-endian unsigned integer of @p size bytes (1, 2, 4 or 8). */
static inline uint64_t kiln__load_le(const uint8_t *p, size_t size)
{
    uint64_t v = 0;
    for (size_t i = size; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

/** Store the low @p size bytes of @p v little-endian. */
static inline void kiln__store_le(uint8_t *p, size_t size, uint64_t v)
{
    for (size_t i = 0; i < size; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/*
 * Small binary floats (float16: 10 mantissa / 5 exponent bits, bfloat16: 7 / 8)
 * as bit patterns in the low bits of a uint32_t.  Encoding rounds to nearest
 * even directly from double (no double rounding through float).
 */
static inline uint32_t kiln__small_float_encode(double d, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t sign = signbit(d) ? 1u << (mbits + ebits) : 0;
    uint32_t inf = ((1u << ebits) - 1) << mbits;
    if (isnan(d))
        return sign | inf | (1u << (mbits - 1));
    double a = fabs(d);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e;
    double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    int E = e - 1 + bias;
    if (E <= 0) /* subnormal; m == 1 << mbits is the smallest normal, encoded right */
        return sign | (uint32_t)nearbyint(ldexp(a, bias - 1 + mbits));
    double m = nearbyint((fr * 2 - 1) * (double)(1u << mbits));
    if (m == (double)(1u << mbits)) {
        m = 0;
        E++;
    }
    if (E >= (1 << ebits) - 1)
        return sign | inf;
    return sign | (uint32_t)E << mbits | (uint32_t)m;
}

static inline double kiln__small_float_decode(uint32_t b, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t m = b & ((1u << mbits) - 1), E = (b >> mbits) & ((1u << ebits) - 1);
    double v;
    if (E == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else if (E == (1u << ebits) - 1)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m + (1u << mbits)), (int)E - bias - mbits);
    return (b >> (mbits + ebits)) & 1 ? -v : v;
}

#endif /* KILN_CORE_GRAPH_JSON_H */
