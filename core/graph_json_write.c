/*
 * graph_json_write.c - the graph JSON writer (docs/graph_format.md, version 1).
 *
 * The text is written straight from the IR into a buffer that goes to the
 * file in 64 KiB blocks (kiln_jbuf, json_dump.h): no jansson value is built.
 * The layout is jansson's JSON_INDENT(2) (what kiln__json_dump writes), with
 * the root's nodes at a base indent of four spaces and arrays of scalars
 * (shapes, lists, small tensors, inputs) kept on one line; scalars go through
 * json_dump.c's own formatters, so the bytes are the ones the tree writer
 * wrote (tests/core/test_graph_json.c compares the two on every attribute
 * type).  Strings are checked to be UTF-8 as jansson's json_string checks
 * them, and escaped as jansson escapes them.
 *
 * Determinism: nodes in id order; keys in a fixed order; attributes in key
 * string order; control inputs in the destination's in-list order (creation
 * order, which the reader reproduces).  Floats: each unit (the root's
 * attributes; one root node with its subgraphs) uses the smallest %.*g
 * precision at which every float in it reads back to the same value
 * (float32/float16/bfloat16 tensor elements need only round-trip at their own
 * width): a first walk over the unit's attributes finds it, the second writes.
 * Written forms always re-read to the same IR: empty lists, dtypes, tensors
 * and non-finite floats use the explicit {"type", "value"} form; tensors with
 * more than KILN_JSON_TENSOR_INLINE_MAX elements, non-finite elements, uint64
 * values above INT64_MAX or a byte size that does not match the shape use
 * data_b64, whose base64 is encoded straight into the output buffer (the
 * weights are never copied).
 *
 * Complexity: O(size of the text); memory: the 64 KiB block.
 */
#include "graph_json.h"
#include "graph_int.h"
#include "fileio.h"
#include "json_dump.h"

#include <errno.h>
#include <pthread.h>

/* The quoted text of a symbol that needs no escaping (symtxt cache). */
typedef struct symtxt {
    kiln_sym sym; /* UINT32_MAX: empty entry */
    uint32_t len; /* bytes of txt: "sym" with its quotes */
    char txt[56];
} symtxt;

#define SYMCACHE 2048 /* entries of the symbol text cache (a power of two) */
#define NO_SYM UINT32_MAX

typedef struct wjs {
    kiln_jbuf out; /* the text; flushed to the file in blocks */
    size_t lim;    /* out.len + n <= lim: n bytes fit with no flush or growth */
    kiln_error *err;
    kiln_status st; /* the error reported, KILN_OK while none */
    int prec;       /* digits needed by the floats of the current unit (1..17) */
    /* The symbols of the reserved node attributes in ctx's table (NO_SYM:
     * never interned, so no attribute has that key). */
    const kiln_ctx *ctx;
    kiln_sym r_engine, r_stream, r_topo;
    symtxt *cache; /* SYMCACHE entries for ctx's symbols; NULL: not used */
} wjs;

/* ---- numbers ------------------------------------------------------------ */

static bool same_at(kiln_dtype dt, double x, double y)
{
    switch (dt) {
    case KILN_DT_FLOAT32: {
        float a = (float)x, b = (float)y;
        return memcmp(&a, &b, sizeof(a)) == 0;
    }
    case KILN_DT_FLOAT16:
        return kiln__small_float_encode(x, 10, 5) == kiln__small_float_encode(y, 10, 5);
    case KILN_DT_BFLOAT16:
        return kiln__small_float_encode(x, 7, 8) == kiln__small_float_encode(y, 7, 8);
    default:
        return memcmp(&x, &y, sizeof(x)) == 0;
    }
}

/* Note finite @p x of the unit: the precision becomes the smallest at least
 * the current one at which x reads back at width @p dt.  More digits than the
 * shortest round-trip form still round-trip, so the search starts at the
 * precision the unit already needs. */
static void note_real(wjs *w, double x, kiln_dtype dt)
{
    if (w->prec >= 17)
        return;
    int p;
    for (p = w->prec; p < 17; p++) {
        char buf[40];
        snprintf(buf, sizeof(buf), "%.*g", p, x);
        if (same_at(dt, x, strtod(buf, NULL)))
            break;
    }
    w->prec = p;
}

static const char *nonfinite_name(double x) { return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

/* Element value as double (floats) or integer; false when not representable in JSON. */
static bool elem_value(kiln_dtype dt, const uint8_t *p, double *f, long long *i, bool *is_float)
{
    uint64_t b = kiln__load_le(p, kiln_dtype_size(dt));
    *is_float = true;
    switch (dt) {
    case KILN_DT_FLOAT32: {
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, sizeof(x));
        *f = x;
        return isfinite(*f);
    }
    case KILN_DT_FLOAT64:
        memcpy(f, &b, sizeof(*f));
        return isfinite(*f);
    case KILN_DT_FLOAT16:
        *f = kiln__small_float_decode((uint32_t)b, 10, 5);
        return isfinite(*f);
    case KILN_DT_BFLOAT16:
        *f = kiln__small_float_decode((uint32_t)b, 7, 8);
        return isfinite(*f);
    default:
        break;
    }
    *is_float = false;
    switch (dt) {
    case KILN_DT_INT8:
        *i = (int8_t)b;
        return true;
    case KILN_DT_INT16:
        *i = (int16_t)b;
        return true;
    case KILN_DT_INT32:
        *i = (int32_t)b;
        return true;
    case KILN_DT_INT64:
        *i = (long long)(int64_t)b;
        return true;
    case KILN_DT_UINT8:
    case KILN_DT_UINT16:
    case KILN_DT_UINT32:
        *i = (long long)b;
        return true;
    case KILN_DT_UINT64:
        *i = (long long)b;
        return b <= INT64_MAX;
    case KILN_DT_BOOL:
        *i = (long long)b;
        return b <= 1;
    default:
        return false;
    }
}

/* Elements of @p t when it is written inline as "data", else -1 (data_b64). */
static int64_t inline_numel(const kiln_tensor_value *t)
{
    size_t esz = kiln_dtype_size(t->dtype);
    int64_t numel;
    if (!esz || kiln_dims_numel(t->dims, t->rank, &numel) != KILN_OK || numel < 0 ||
        numel > KILN_JSON_TENSOR_INLINE_MAX || t->nbytes != (size_t)numel * esz)
        return -1;
    const uint8_t *data = t->data;
    double f;
    long long iv;
    bool isf;
    for (int64_t k = 0; k < numel; k++)
        if (!elem_value(t->dtype, data + k * esz, &f, &iv, &isf))
            return -1;
    return numel;
}

/* ---- the precision of a unit (first walk) -------------------------------- */

/* The floats of the unit in the order they are written. */
static void prec_attrs(wjs *w, const kiln_attrs *a)
{
    for (uint32_t i = 0; a && i < a->n; i++) {
        const kattr *e = &a->v[i];
        switch ((kiln_attr_type)e->type) {
        case KILN_ATTR_FLOAT:
            if (isfinite(e->v.f))
                note_real(w, e->v.f, KILN_DT_FLOAT64);
            break;
        case KILN_ATTR_LIST_FLOAT: {
            const double *l = e->v.p;
            for (uint32_t k = 0; k < e->count; k++)
                if (isfinite(l[k]))
                    note_real(w, l[k], KILN_DT_FLOAT64);
            break;
        }
        case KILN_ATTR_TENSOR: {
            kiln_tensor_value t;
            kiln_attrs_get_tensor(a, kiln_sym_str(a->g, e->key), &t);
            int64_t numel = inline_numel(&t);
            size_t esz = kiln_dtype_size(t.dtype);
            double f;
            long long iv;
            bool isf;
            for (int64_t k = 0; k < numel; k++)
                if (elem_value(t.dtype, (const uint8_t *)t.data + k * esz, &f, &iv, &isf) && isf)
                    note_real(w, f, t.dtype);
            break;
        }
        default:
            break;
        }
    }
}

static void prec_graph(wjs *w, const kiln_graph *g);

static void prec_node(wjs *w, const kiln_graph *g, kiln_node_id n)
{
    const knode *k = &g->nodes[n];
    bool own = false; /* input_descs written: every input's descriptor */
    for (uint32_t i = 0; i < k->nin && !own; i++)
        own = kiln_node_input_has_desc(g, n, i);
    for (uint32_t i = 0; own && i < k->nin; i++) {
        const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
        if (d)
            prec_attrs(w, kiln_desc_attrs(d));
    }
    for (uint32_t i = 0; i < k->nout; i++)
        prec_attrs(w, kiln_desc_attrs(g->out[k->out_off + i]));
    prec_attrs(w, g->cold[n].attrs);
    const kowner *ow = kiln__owner(g, n);
    for (uint32_t i = 0; ow && i < ow->nsub; i++)
        prec_graph(w, ow->subs[i].graph);
}

static void prec_graph(wjs *w, const kiln_graph *g)
{
    prec_attrs(w, g->attrs);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        prec_node(w, g, n);
}

/* ---- text ----------------------------------------------------------------- */

static bool fail(wjs *w, kiln_status st)
{
    if (w->st == KILN_OK)
        w->st = st;
    return false;
}

/* Room for @p n bytes at the end of the text (written, then added to
 * out.len by the caller); NULL on failure.  Within the current block this is
 * a comparison: kiln__jbuf_reserve flushes and grows. */
static char *room_slow(wjs *w, size_t n)
{
    char *p = kiln__jbuf_reserve(&w->out, n);
    size_t lim = w->out.cap;
    if ((w->out.f || w->out.direct) && w->out.block && w->out.block < lim)
        lim = w->out.block;
    w->lim = p ? lim : 0;
    return p;
}

static inline char *room(wjs *w, size_t n)
{
    if (w->out.len + n <= w->lim)
        return w->out.buf + w->out.len;
    return room_slow(w, n);
}

static inline bool raw(wjs *w, const char *s, size_t n)
{
    char *p = room(w, n);
    if (!p)
        return false;
    memcpy(p, s, n);
    w->out.len += n;
    return true;
}
#define LIT(w, s) raw((w), (s), sizeof(s) - 1)

/* Optional comma, newline and @p ind spaces. */
static bool nl(wjs *w, bool comma, int ind)
{
    char *p = room(w, (size_t)ind + 2);
    if (!p)
        return false;
    char *q = p;
    if (comma)
        *q++ = ',';
    *q++ = '\n';
    memset(q, ' ', (size_t)ind);
    w->out.len += (size_t)(q - p) + (size_t)ind;
    return true;
}

/* A key known to need no escaping: [,]\n<ind>"key": (a literal: see KEY) */
#define KEY(w, comma, ind, k) key_n((w), (comma), (ind), "" k, sizeof(k) - 1)

static bool key_n(wjs *w, bool comma, int ind, const char *k, size_t n)
{
    char *p = room(w, (size_t)ind + 2 + n + 4);
    if (!p)
        return false;
    if (comma)
        *p++ = ',';
    *p++ = '\n';
    memset(p, ' ', (size_t)ind);
    p += ind;
    w->out.len = (size_t)(p - w->out.buf);
    p[0] = '"';
    memcpy(p + 1, k, n);
    memcpy(p + 1 + n, "\": ", 3);
    w->out.len += n + 4;
    return true;
}

/* jansson's utf8_check_string: strict UTF-8 (no overlong forms, surrogates
 * or code points above U+10FFFF). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c < 0x80)
            continue;
        size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        if (!len || len > n - i)
            return false;
        uint32_t v = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (size_t j = 1; j < len; j++) {
            unsigned u = s[i + j];
            if (u < 0x80 || u > 0xBF)
                return false;
            v = v << 6 | (u & 0x3F);
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (len == 2 && v < 0x80) ||
            (len == 3 && v < 0x800) || (len == 4 && v < 0x10000))
            return false;
        i += len - 1;
    }
    return true;
}

/* Whether the @p n bytes at @p s are printable ASCII other than '"' and
 * '\\': written as they are, with no escape (and valid UTF-8). */
static inline bool plain(const char *s, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bad |= (unsigned)(c < 0x20) | (unsigned)(c >= 0x80) | (unsigned)(c == '"') |
               (unsigned)(c == '\\');
    }
    return !bad;
}

static bool str_slow(wjs *w, const char *s, size_t n);

/* @p n bytes at @p s as a string value or key, escaped; an error when they
 * are not UTF-8. */
static inline bool strn(wjs *w, const char *s, size_t n)
{
    if (!plain(s, n))
        return str_slow(w, s, n);
    char *p = room(w, n + 2);
    if (!p)
        return false;
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    w->out.len += n + 2;
    return true;
}

/* A string value or key, escaped; an error when it is not UTF-8. */
static bool str(wjs *w, const char *s)
{
    if (!s)
        s = "";
    return strn(w, s, strlen(s));
}

static bool str_slow(wjs *w, const char *s, size_t n)
{
    if (!utf8_ok((const unsigned char *)s, n)) {
        kiln_errorf(w->err, KILN_ERR_INVALID, "cannot encode string \"%.60s\" (not UTF-8?)", s);
        return fail(w, KILN_ERR_INVALID);
    }
    return kiln__jbuf_string(&w->out, s, n);
}

static bool dyn_key(wjs *w, bool comma, int ind, const char *k)
{
    return nl(w, comma, ind) && str(w, k) && LIT(w, ": ");
}

/* The cache entry holding the quoted text of symbol @p s of @p g; NULL when
 * the symbol is written through str (no cache, another context, a string
 * that needs escaping or does not fit an entry). */
static const symtxt *sym_text(wjs *w, const kiln_graph *g, kiln_sym s)
{
    if (!w->cache || g->ctx != w->ctx)
        return NULL;
    symtxt *c = &w->cache[(s * 2654435761u) >> 21 & (SYMCACHE - 1)];
    if (c->sym == s)
        return c;
    const char *t = kiln_sym_str(g, s);
    size_t n = strlen(t);
    if (n + 2 > sizeof(c->txt) || !plain(t, n))
        return NULL;
    c->txt[0] = '"';
    memcpy(c->txt + 1, t, n);
    c->txt[n + 1] = '"';
    c->len = (uint32_t)n + 2;
    c->sym = s;
    return c;
}

/* Symbol @p s of @p g as a string value. */
static inline bool sym_str(wjs *w, const kiln_graph *g, kiln_sym s)
{
    const symtxt *c = sym_text(w, g, s);
    return c ? raw(w, c->txt, c->len) : str(w, kiln_sym_str(g, s));
}

/* [,]\n<ind>"key": for key symbol @p s of @p g. */
static bool sym_key(wjs *w, bool comma, int ind, const kiln_graph *g, kiln_sym s)
{
    const symtxt *c = sym_text(w, g, s);
    if (!c)
        return dyn_key(w, comma, ind, kiln_sym_str(g, s));
    char *p = room(w, (size_t)ind + 2 + c->len + 2);
    if (!p)
        return false;
    char *q = p;
    if (comma)
        *q++ = ',';
    *q++ = '\n';
    memset(q, ' ', (size_t)ind);
    q += ind;
    memcpy(q, c->txt, c->len);
    q += c->len;
    q[0] = ':';
    q[1] = ' ';
    w->out.len += (size_t)(q + 2 - p);
    return true;
}

/* Look up the reserved attribute symbols of @p g's context (once per context). */
static void reserved_syms(wjs *w, const kiln_graph *g)
{
    if (g->ctx == w->ctx)
        return;
    kiln_sym e = kiln_sym_lookup(g, KILN_ATTR_ENGINE), s = kiln_sym_lookup(g, KILN_ATTR_STREAM_ID),
             t = kiln_sym_lookup(g, KILN_ATTR_TOPO_ID);
    w->r_engine = e ? e : NO_SYM;
    w->r_stream = s ? s : NO_SYM;
    w->r_topo = t ? t : NO_SYM;
    if (w->cache)
        for (uint32_t i = 0; i < SYMCACHE; i++)
            w->cache[i].sym = NO_SYM;
    w->ctx = g->ctx;
}

/* An integer: two digits per step from a table (the bytes kiln__jbuf_int writes). */
static bool int_(wjs *w, long long v)
{
    static const char d2[] = "0001020304050607080910111213141516171819"
                             "2021222324252627282930313233343536373839"
                             "4041424344454647484950515253545556575859"
                             "6061626364656667686970717273747576777879"
                             "8081828384858687888990919293949596979899";
    char *o = room(w, 21);
    if (!o)
        return false;
    if (v >= 0 && v < 10) {
        *o = (char)('0' + v);
        w->out.len++;
        return true;
    }
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    /* magnitude as unsigned: INT64_MIN has no positive counterpart */
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    while (u >= 100) {
        unsigned k = (unsigned)(u % 100) * 2;
        u /= 100;
        p -= 2;
        p[0] = d2[k];
        p[1] = d2[k + 1];
    }
    if (u >= 10) {
        p -= 2;
        p[0] = d2[u * 2];
        p[1] = d2[u * 2 + 1];
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0)
        *--p = '-';
    size_t n = (size_t)(e - p);
    memcpy(o, p, n);
    w->out.len += n;
    return true;
}

static inline bool real(wjs *w, double x) { return kiln__jbuf_real(&w->out, x, w->prec); }

/* [1, 2, 3] on one line ([] when empty). */
static bool int_array(wjs *w, const int64_t *v, uint32_t n)
{
    if (!LIT(w, "["))
        return false;
    for (uint32_t i = 0; i < n; i++)
        if ((i && !LIT(w, ", ")) || !int_(w, v[i]))
            return false;
    return LIT(w, "]");
}

/* ---- tensors ------------------------------------------------------------ */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two base64 characters per 12 bits: one table load per character pair. */
static char b64pairs[4096 * 2];
static pthread_once_t b64pairs_once = PTHREAD_ONCE_INIT;

static void b64pairs_init(void)
{
    for (uint32_t v = 0; v < 4096; v++) {
        b64pairs[2 * v] = b64chars[v >> 6];
        b64pairs[2 * v + 1] = b64chars[v & 63];
    }
}

/* The standard base64 of @p n bytes at @p p, encoded into the output buffer
 * in 64 KiB blocks (whole triples through the pair table). */
static bool b64(wjs *w, const uint8_t *p, size_t n)
{
    pthread_once(&b64pairs_once, b64pairs_init);
    size_t i = 0;
    while (n - i >= 3) {
        size_t triples = (n - i) / 3;
        if (triples > 16384)
            triples = 16384;
        char *o = kiln__jbuf_reserve(&w->out, triples * 4);
        if (!o)
            return false;
        for (size_t t = 0; t < triples; t++, i += 3, o += 4) {
            uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
            memcpy(o, b64pairs + 2 * (v >> 12), 2);
            memcpy(o + 2, b64pairs + 2 * (v & 4095), 2);
        }
        w->out.len += triples * 4;
    }
    if (i < n) { /* one or two bytes left: padded */
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        char o[4] = {b64chars[(v >> 18) & 63], b64chars[(v >> 12) & 63],
                     i + 1 < n ? b64chars[(v >> 6) & 63] : '=', '='};
        return raw(w, o, 4);
    }
    return true;
}

/* The tensor object {"dtype", "shape", "data" | "data_b64"} at indent @p ind. */
static bool tensor(wjs *w, const kiln_tensor_value *t, int ind)
{
    if (!LIT(w, "{") || !KEY(w, false, ind + 2, "dtype") || !str(w, kiln_dtype_name(t->dtype)) ||
        !KEY(w, true, ind + 2, "shape") || !int_array(w, t->dims, t->rank))
        return false;
    int64_t numel = inline_numel(t);
    if (numel < 0) {
        if (!KEY(w, true, ind + 2, "data_b64") || !LIT(w, "\"") || !b64(w, t->data, t->nbytes) ||
            !LIT(w, "\""))
            return false;
    } else {
        if (!KEY(w, true, ind + 2, "data") || !LIT(w, "["))
            return false;
        size_t esz = kiln_dtype_size(t->dtype);
        for (int64_t k = 0; k < numel; k++) {
            double f;
            long long iv;
            bool isf;
            elem_value(t->dtype, (const uint8_t *)t->data + k * esz, &f, &iv, &isf);
            if ((k && !LIT(w, ", ")) ||
                !(isf                        ? real(w, f)
                  : t->dtype == KILN_DT_BOOL ? (iv ? LIT(w, "true") : LIT(w, "false"))
                                             : int_(w, iv)))
                return false;
        }
        if (!LIT(w, "]"))
            return false;
    }
    return nl(w, false, ind) && LIT(w, "}");
}

/* ---- attributes --------------------------------------------------------- */

/* {"type": T, "value": ...} at indent @p ind, up to the value (the caller
 * writes the value and calls explicit_end). */
static bool explicit_begin(wjs *w, const char *type, int ind)
{
    return LIT(w, "{") && KEY(w, false, ind + 2, "type") && str(w, type) &&
           KEY(w, true, ind + 2, "value");
}

static bool explicit_end(wjs *w, int ind) { return nl(w, false, ind) && LIT(w, "}"); }

static bool float_elem(wjs *w, double x)
{
    if (isfinite(x))
        return real(w, x);
    return LIT(w, "\"") && raw(w, nonfinite_name(x), strlen(nonfinite_name(x))) && LIT(w, "\"");
}

/* The value of attribute @p e (of set @p a) whose key is at indent @p ind. */
static bool attr_value(wjs *w, const kiln_attrs *a, const kattr *e, int ind)
{
    kiln_attr_type type = (kiln_attr_type)e->type;
    uint32_t n = e->count;
    bool expl = false; /* lists: explicit form needed */
    switch (type) {
    case KILN_ATTR_BOOL:
        return e->v.i ? LIT(w, "true") : LIT(w, "false");
    case KILN_ATTR_INT:
        return int_(w, e->v.i);
    case KILN_ATTR_FLOAT:
        if (isfinite(e->v.f))
            return real(w, e->v.f);
        return explicit_begin(w, "float", ind) && float_elem(w, e->v.f) && explicit_end(w, ind);
    case KILN_ATTR_STRING:
        return sym_str(w, a->g, e->v.s);
    case KILN_ATTR_DTYPE:
        return explicit_begin(w, "dtype", ind) && str(w, kiln_dtype_name((kiln_dtype)e->v.i)) &&
               explicit_end(w, ind);
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value t;
        kiln_attrs_get_tensor(a, kiln_sym_str(a->g, e->key), &t);
        return explicit_begin(w, "tensor", ind) && tensor(w, &t, ind + 2) && explicit_end(w, ind);
    }
    case KILN_ATTR_LIST_FLOAT:
        for (uint32_t i = 0; i < n && !expl; i++)
            expl = !isfinite(((const double *)e->v.p)[i]);
        break;
    case KILN_ATTR_LIST_INT:
    case KILN_ATTR_LIST_STRING:
    case KILN_ATTR_LIST_BOOL:
    case KILN_ATTR_LIST_LIST_INT:
        break;
    case KILN_ATTR_NONE:
        return true;
    }
    /* lists: the explicit form when empty or holding a non-finite float */
    expl = expl || n == 0;
    int vind = expl ? ind + 2 : ind; /* indent of the value's own line */
    if (expl && !explicit_begin(w, kiln__json_attr_type_name(type), ind))
        return false;
    if (!LIT(w, "["))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        bool ok;
        switch (type) {
        case KILN_ATTR_LIST_INT:
            ok = (!i || LIT(w, ", ")) && int_(w, ((const int64_t *)e->v.p)[i]);
            break;
        case KILN_ATTR_LIST_FLOAT:
            ok = (!i || LIT(w, ", ")) && float_elem(w, ((const double *)e->v.p)[i]);
            break;
        case KILN_ATTR_LIST_STRING:
            ok = (!i || LIT(w, ", ")) && str(w, ((const char *const *)e->v.p)[i]);
            break;
        case KILN_ATTR_LIST_BOOL:
            ok = (!i || LIT(w, ", ")) &&
                 (((const uint8_t *)e->v.p)[i] ? LIT(w, "true") : LIT(w, "false"));
            break;
        default: { /* list_list_int: one inner list per line */
            const int64_t *l = NULL;
            uint32_t len = 0;
            kiln_attrs_get_list_list_int_at(a, kiln_sym_str(a->g, e->key), i, &l, &len);
            ok = nl(w, i > 0, vind + 2) && int_array(w, l, len);
            break;
        }
        }
        if (!ok)
            return false;
    }
    if (type == KILN_ATTR_LIST_LIST_INT && n && !nl(w, false, vind))
        return false;
    return LIT(w, "]") && (!expl || explicit_end(w, ind));
}

/* Which reserved node key attribute @p e of @p a is: 1 engine, 2 stream_id,
 * 3 id; 0 none. */
static int reserved(wjs *w, const kiln_attrs *a, const kattr *e)
{
    if (!e->key || (e->type != KILN_ATTR_STRING && e->type != KILN_ATTR_INT))
        return 0;
    if (a->g->ctx == w->ctx) {
        if (e->type == KILN_ATTR_STRING)
            return e->key == w->r_engine;
        return e->key == w->r_stream ? 2 : e->key == w->r_topo ? 3 : 0;
    }
    const char *key = kiln_sym_str(a->g, e->key);
    if (e->type == KILN_ATTR_STRING)
        return strcmp(key, KILN_ATTR_ENGINE) == 0;
    return strcmp(key, KILN_ATTR_STREAM_ID) == 0 ? 2 : strcmp(key, KILN_ATTR_TOPO_ID) == 0 ? 3 : 0;
}

static bool written(wjs *w, const kiln_attrs *a, const kattr *e, bool skip_reserved)
{
    return e->type != KILN_ATTR_NONE && !(skip_reserved && reserved(w, a, e));
}

/* The attributes of @p a in key string order (the order attrs.c keeps them
 * in) as an object whose key is at indent @p ind ({} when none is written).
 * Attributes written as node keys are skipped when @p skip_reserved. */
static bool attrs_obj(wjs *w, const kiln_attrs *a, bool skip_reserved, int ind)
{
    bool any = false;
    for (uint32_t i = 0; a && i < a->n; i++) {
        const kattr *e = &a->v[i];
        if (!written(w, a, e, skip_reserved))
            continue;
        if ((!any && !LIT(w, "{")) || !sym_key(w, any, ind + 2, a->g, e->key) ||
            !attr_value(w, a, e, ind + 2))
            return false;
        any = true;
    }
    return any ? nl(w, false, ind) && LIT(w, "}") : LIT(w, "{}");
}

/* Whether attrs_obj(skip_reserved) would write at least one of the node
 * attributes @p a; res[0..2] receive the engine, stream_id and id
 * attributes (or NULL). */
static bool node_attrs_scan(wjs *w, const kiln_attrs *a, const kattr *res[3])
{
    bool any = false;
    res[0] = res[1] = res[2] = NULL;
    for (uint32_t i = 0; a && i < a->n; i++) {
        const kattr *e = &a->v[i];
        if (e->type == KILN_ATTR_NONE)
            continue;
        int r = reserved(w, a, e);
        if (r)
            res[r - 1] = e;
        else
            any = true;
    }
    return any;
}

/* ---- descriptors, nodes, graphs ----------------------------------------- */

/* The dtype names, quoted (0 length: written through str). */
static char dtype_txt[KILN_DT_COUNT][24];
static uint8_t dtype_len[KILN_DT_COUNT];
static pthread_once_t dtype_once = PTHREAD_ONCE_INIT;

static void dtype_txt_init(void)
{
    for (int dt = 0; dt < KILN_DT_COUNT; dt++) {
        const char *name = kiln_dtype_name((kiln_dtype)dt);
        size_t n = name ? strlen(name) : 0;
        if (!name || n + 2 > sizeof(dtype_txt[dt]) || !plain(name, n))
            continue;
        dtype_txt[dt][0] = '"';
        memcpy(dtype_txt[dt] + 1, name, n);
        dtype_txt[dt][n + 1] = '"';
        dtype_len[dt] = (uint8_t)(n + 2);
    }
}

/* A dtype's name as a string. */
static bool dtype_str(wjs *w, kiln_dtype dt)
{
    pthread_once(&dtype_once, dtype_txt_init);
    if ((unsigned)dt >= KILN_DT_COUNT || !dtype_len[dt])
        return str(w, kiln_dtype_name(dt));
    return raw(w, dtype_txt[dt], dtype_len[dt]);
}

static bool desc(wjs *w, const kiln_graph *g, const kiln_tensor_desc *d, int ind)
{
    if (!LIT(w, "{") || !KEY(w, false, ind + 2, "dtype") || !dtype_str(w, kiln_desc_dtype(d)))
        return false;
    if (d->rank >= 0 &&
        (!KEY(w, true, ind + 2, "shape") || !int_array(w, d->dims, (uint32_t)d->rank)))
        return false;
    if (d->format && (!KEY(w, true, ind + 2, "format") || !sym_str(w, g, d->format)))
        return false;
    if (d->ref_input >= 0 && (!KEY(w, true, ind + 2, "ref_input") || !int_(w, d->ref_input)))
        return false;
    if (kiln_desc_offset(d) != -1 &&
        (!KEY(w, true, ind + 2, "offset") || !int_(w, kiln_desc_offset(d))))
        return false;
    if (kiln_desc_size(d) != -1 && (!KEY(w, true, ind + 2, "size") || !int_(w, kiln_desc_size(d))))
        return false;
    const char *mt = kiln_desc_memory_type(g, d);
    if (mt && (!KEY(w, true, ind + 2, "memory_type") || !str(w, mt)))
        return false;
    const kiln_attrs *a = kiln_desc_attrs(d);
    if (kiln_attrs_count(a) &&
        (!KEY(w, true, ind + 2, "attrs") || !attrs_obj(w, a, false, ind + 2)))
        return false;
    return nl(w, false, ind) && LIT(w, "}");
}

static bool graph_obj(wjs *w, const kiln_graph *g, int ind);

/* Node @p n of @p g as an object whose opening brace is at indent @p ind. */
static bool node(wjs *w, const kiln_graph *g, kiln_node_id n, int ind)
{
    const knode *k = &g->nodes[n];
    const knode_cold *c = &g->cold[n];
    int in = ind + 2;
    if (!LIT(w, "{") || !KEY(w, false, in, "name") || !str(w, kiln_sym_str(g, c->name)) ||
        !KEY(w, true, in, "type") || !sym_str(w, g, k->op))
        return false;
    if (k->nin) {
        if (!KEY(w, true, in, "inputs") || !LIT(w, "["))
            return false;
        for (uint32_t i = 0; i < k->nin; i++) {
            const kuse *r = &g->in[k->in_off + i];
            if (i && !LIT(w, ", "))
                return false;
            if (!r->src) {
                if (!LIT(w, "null"))
                    return false;
                continue;
            }
            /* "producer:k": the name escaped, then ":k" */
            if (!str(w, kiln_sym_str(g, g->cold[r->src].name)))
                return false;
            w->out.len--; /* the closing quote (the last byte written: still buffered) */
            if (!LIT(w, ":") || !int_(w, r->src_idx) || !LIT(w, "\""))
                return false;
        }
        if (!LIT(w, "]"))
            return false;
    }
    if (k->ctrl_in) {
        if (!KEY(w, true, in, "control_inputs") || !LIT(w, "["))
            return false;
        for (uint32_t e = k->ctrl_in; e; e = g->ctrl[e].in_next)
            if ((e != k->ctrl_in && !LIT(w, ", ")) ||
                !str(w, kiln_node_name_str(g, g->ctrl[e].src)))
                return false;
        if (!LIT(w, "]"))
            return false;
    }
    bool own = false;
    for (uint32_t i = 0; i < k->nin && !own; i++)
        own = kiln_node_input_has_desc(g, n, i);
    if (own) {
        static const kiln_tensor_desc deflt = {.rank = -1, .ref_input = -1};
        if (!KEY(w, true, in, "input_descs") || !LIT(w, "["))
            return false;
        for (uint32_t i = 0; i < k->nin; i++) {
            const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
            if (!nl(w, i > 0, in + 2) || !desc(w, g, d ? d : &deflt, in + 2))
                return false;
        }
        if (!nl(w, false, in) || !LIT(w, "]"))
            return false;
    }
    if (k->nout) {
        if (!KEY(w, true, in, "outputs") || !LIT(w, "["))
            return false;
        for (uint32_t i = 0; i < k->nout; i++)
            if (!nl(w, i > 0, in + 2) || !desc(w, g, g->out[k->out_off + i], in + 2))
                return false;
        if (!nl(w, false, in) || !LIT(w, "]"))
            return false;
    }
    const kattr *res[3];
    if (node_attrs_scan(w, c->attrs, res) &&
        (!KEY(w, true, in, "attrs") || !attrs_obj(w, c->attrs, true, in)))
        return false;
    const kowner *ow = kiln__owner(g, n);
    if (ow && ow->nsub) {
        if (!KEY(w, true, in, "subgraphs") || !LIT(w, "{"))
            return false;
        for (uint32_t i = 0; i < ow->nsub; i++) {
            const char *role = kiln_sym_str(g, ow->subs[i].role);
            for (uint32_t j = 0; j < i; j++)
                if (strcmp(kiln_sym_str(g, ow->subs[j].role), role) == 0) {
                    kiln_errorf(w->err, KILN_ERR_INVALID,
                                "node \"%s\" has two subgraphs with role \"%s\"",
                                kiln_node_name_str(g, n), role);
                    return fail(w, KILN_ERR_INVALID);
                }
            if (!dyn_key(w, i > 0, in + 2, role) || !graph_obj(w, ow->subs[i].graph, in + 2))
                return false;
        }
        if (!nl(w, false, in) || !LIT(w, "}"))
            return false;
    }
    if (res[0] && (!KEY(w, true, in, "engine") || !sym_str(w, c->attrs->g, res[0]->v.s)))
        return false;
    if (res[1] && (!KEY(w, true, in, "stream_id") || !int_(w, res[1]->v.i)))
        return false;
    if (res[2] && (!KEY(w, true, in, "id") || !int_(w, res[2]->v.i)))
        return false;
    return nl(w, false, ind) && LIT(w, "}");
}

/* A subgraph as a GRAPH object whose opening brace is at indent @p ind. */
static bool graph_obj(wjs *w, const kiln_graph *g, int ind)
{
    reserved_syms(w, g);
    if (!LIT(w, "{") || !KEY(w, false, ind + 2, "name") || !str(w, kiln_graph_name(g)))
        return false;
    if (kiln_attrs_count(g->attrs) &&
        (!KEY(w, true, ind + 2, "attrs") || !attrs_obj(w, g->attrs, false, ind + 2)))
        return false;
    if (!KEY(w, true, ind + 2, "nodes"))
        return false;
    bool any = false;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if ((!any && !LIT(w, "[")) || !nl(w, any, ind + 4) || !node(w, g, n, ind + 4))
            return false;
        any = true;
    }
    if (any ? !nl(w, false, ind + 2) || !LIT(w, "]") : !LIT(w, "[]"))
        return false;
    return nl(w, false, ind) && LIT(w, "}");
}

/* ---- the document ------------------------------------------------------- */

static bool write_doc(wjs *w, const kiln_graph *g)
{
    reserved_syms(w, g);
    if (!LIT(w, "{\n  \"kiln_graph\": 1,\n  \"name\": ") || !str(w, kiln_graph_name(g)))
        return false;
    if (kiln_attrs_count(g->attrs)) {
        w->prec = 1;
        prec_attrs(w, g->attrs);
        if (!LIT(w, ",\n  \"attrs\": ") || !attrs_obj(w, g->attrs, false, 2))
            return false;
    }
    if (!LIT(w, ",\n  \"nodes\": ["))
        return false;
    bool any = false;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        w->prec = 1;
        prec_node(w, g, n);
        if (!nl(w, any, 4) || !node(w, g, n, 4))
            return false;
        any = true;
    }
    return any ? LIT(w, "\n  ]\n}\n") : LIT(w, "]\n}\n");
}

kiln_status kiln_graph_write_json(const kiln_graph *g, FILE *f, kiln_error *err)
{
    wjs w = {.out = {.f = f, .block = (size_t)256 << 10}, .err = err, .prec = 1};
    w.cache = kiln__malloc(SYMCACHE * sizeof(*w.cache)); /* NULL: every symbol through str */
    /* A file descriptor takes the blocks straight from the buffer: stdio
     * would copy every byte once more into its own buffer. */
    int fd = fileno(f);
    if (fd >= 0 && fflush(f) == 0) {
        w.out.direct = true;
        w.out.fd = fd;
    }
    bool ok = write_doc(&w, g) && kiln__jbuf_flush(&w.out);
    kiln_status st = KILN_OK;
    if (!ok || ferror(f)) {
        if (w.st != KILN_OK)
            st = w.st;
        else if (w.out.oom)
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing graph JSON");
        else
            st = kiln_errorf(err, KILN_ERR_IO, "cannot write graph JSON: %s", strerror(errno));
    }
    kiln__jbuf_free(&w.out);
    kiln__free(w.cache);
    return st;
}

char *kiln_graph_to_json_string(const kiln_graph *g, kiln_error *err)
{
    char *mem = NULL, *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f) {
        kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing graph JSON");
        return NULL;
    }
    kiln_status st = kiln_graph_write_json(g, f, err);
    if (fclose(f) != 0 && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing graph JSON");
    if (st == KILN_OK) {
        out = kiln__malloc(len + 1);
        if (out)
            memcpy(out, mem, len + 1);
        else
            kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing graph JSON");
    }
    free(mem); /* allocated by the C library, not by kiln__malloc */
    return out;
}

static kiln_status write_cb(FILE *f, void *ud, kiln_error *err)
{
    return kiln_graph_write_json(ud, f, err);
}

kiln_status kiln_graph_write_json_file(const kiln_graph *g, const char *path, kiln_error *err)
{
    kiln_status st = kiln_file_write_atomic(path, write_cb, (void *)g, err);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", path);
    return st;
}
