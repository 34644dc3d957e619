/*
 * graph_json_ref.c - the graph JSON writer as it was before it wrote text
 * straight from the IR (core/graph_json_write.c): each root node built as a
 * jansson tree, dumped by kiln__json_dump (json_dump.c) and freed.  Kept
 * only as the reference the direct writer is compared with byte for byte
 * (tests/core/test_graph_json.c); nothing else uses it.
 */
#include "graph_json.h"
#include "graph_int.h"
#include "fileio.h"
#include "json_dump.h"
#include "graph_json_ref.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <time.h>

/* Bytes a data_b64 string stands for: the tree holds a short placeholder
 * string and dump() writes the base64 text straight to the file. */
typedef struct b64blob {
    const uint8_t *p;
    size_t n;
} b64blob;

typedef struct wjs {
    kiln_jbuf out; /* text of the unit being dumped */
    const kiln_graph *root;
    kiln_error *err;
    int prec; /* digits needed by the floats of the current unit (1..17) */
    b64blob *blobs; /* data_b64 strings of the current unit, placeholder order */
    uint32_t nblobs, blobs_cap;
    char tag[40]; /* placeholder prefix: "\"kiln-b64-<nonce>-" (never in real data) */
    size_t tag_len;
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

/* A JSON real for finite @p x, noting how many digits it needs at width @p dt. */
static json_t *mk_real(wjs *w, double x, kiln_dtype dt)
{
    /* More digits than the shortest round-trip form still round-trip, so start
     * at the precision the unit already needs. */
    if (w->prec < 17) {
        int p;
        for (p = w->prec; p < 17; p++) {
            char buf[40];
            snprintf(buf, sizeof(buf), "%.*g", p, x);
            if (same_at(dt, x, strtod(buf, NULL)))
                break;
        }
        w->prec = p;
    }
    return json_real(x);
}

static const char *nonfinite_name(double x)
{
    return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

/* ---- small helpers ------------------------------------------------------ */

static kiln_status oom(wjs *w)
{
    return kiln_errorf(w->err, KILN_ERR_NOMEM, "out of memory writing graph JSON");
}

/* json_object_set_new that reports failure (NULL value = OOM or bad UTF-8). */
static bool put(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0;
}

static bool push(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0;
}

static json_t *str_json(wjs *w, const char *s)
{
    json_t *j = json_string(s);
    if (!j)
        kiln_errorf(w->err, KILN_ERR_INVALID, "cannot encode string \"%.60s\" (not UTF-8?)", s);
    return j;
}

/* {"type": type, "value": value}; consumes @p value. */
static json_t *explicit_form(const char *type, json_t *value)
{
    json_t *o = value ? json_object() : NULL;
    if (!o || !put(o, "type", json_string(type))) {
        json_decref(value);
        json_decref(o);
        return NULL;
    }
    if (!put(o, "value", value)) { /* json_object_set_new consumed value */
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *int_array(const int64_t *v, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < n; i++)
        if (!push(a, json_integer(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* ---- tensors ------------------------------------------------------------ */

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * A data_b64 value: a placeholder string "kiln-b64-<nonce>-<k>" that dump()
 * replaces by the base64 of blob k, written straight to the file.  Base64
 * needs no JSON escaping, so jansson never has to scan (and the re-indenter
 * never has to copy) the megabytes of a model's weights.  The nonce is drawn
 * per document; a real string equal to a placeholder would need to guess it.
 */
static json_t *b64_json(wjs *w, const uint8_t *p, size_t n)
{
    if (!KILN_GROW(w->blobs, w->blobs_cap, w->nblobs + 1))
        return NULL;
    char ph[64];
    kiln__fmt(ph, sizeof(ph), "%s%u", w->tag + 1, w->nblobs);
    w->blobs[w->nblobs++] = (b64blob){p, n};
    return json_string(ph);
}

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

/* Write the standard base64 of @p n bytes at @p p to @p f (whole triples
 * through the pair table, in blocks that stdio passes straight to write(2)). */
static bool b64_write(FILE *f, const uint8_t *p, size_t n)
{
    pthread_once(&b64pairs_once, b64pairs_init);
    char o[32768]; /* a multiple of 4 */
    size_t j = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        memcpy(o + j, b64pairs + 2 * (v >> 12), 2);
        memcpy(o + j + 2, b64pairs + 2 * (v & 4095), 2);
        j += 4;
        if (j == sizeof(o)) {
            if (fwrite(o, 1, j, f) != j)
                return false;
            j = 0;
        }
    }
    if (i < n) { /* one or two bytes left: padded */
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        o[j++] = b64chars[(v >> 18) & 63];
        o[j++] = b64chars[(v >> 12) & 63];
        o[j++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        o[j++] = '=';
    }
    return fwrite(o, 1, j, f) == j;
}

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
    case KILN_DT_FLOAT16: *f = kiln__small_float_decode((uint32_t)b, 10, 5); return isfinite(*f);
    case KILN_DT_BFLOAT16: *f = kiln__small_float_decode((uint32_t)b, 7, 8); return isfinite(*f);
    default: break;
    }
    *is_float = false;
    switch (dt) {
    case KILN_DT_INT8: *i = (int8_t)b; return true;
    case KILN_DT_INT16: *i = (int16_t)b; return true;
    case KILN_DT_INT32: *i = (int32_t)b; return true;
    case KILN_DT_INT64: *i = (long long)(int64_t)b; return true;
    case KILN_DT_UINT8:
    case KILN_DT_UINT16:
    case KILN_DT_UINT32: *i = (long long)b; return true;
    case KILN_DT_UINT64: *i = (long long)b; return b <= INT64_MAX;
    case KILN_DT_BOOL: *i = (long long)b; return b <= 1;
    default: return false;
    }
}

static json_t *tensor_json(wjs *w, const kiln_tensor_value *t)
{
    json_t *o = json_object();
    if (!o || !put(o, "dtype", json_string(kiln_dtype_name(t->dtype))) ||
        !put(o, "shape", int_array(t->dims, t->rank)))
        goto fail;
    size_t esz = kiln_dtype_size(t->dtype);
    int64_t numel;
    if (kiln_dims_numel(t->dims, t->rank, &numel) != KILN_OK)
        numel = -1; /* written as data_b64 */
    const uint8_t *data = t->data;
    bool inline_ok = esz && numel >= 0 && numel <= KILN_JSON_TENSOR_INLINE_MAX &&
                     t->nbytes == (size_t)numel * esz;
    double f;
    long long iv;
    bool isf;
    for (int64_t k = 0; inline_ok && k < numel; k++)
        inline_ok = elem_value(t->dtype, data + k * esz, &f, &iv, &isf);
    if (!inline_ok) {
        if (!put(o, "data_b64", b64_json(w, data, t->nbytes)))
            goto fail;
        return o;
    }
    json_t *arr = json_array();
    if (!put(o, "data", arr))
        goto fail;
    for (int64_t k = 0; k < numel; k++) {
        elem_value(t->dtype, data + k * esz, &f, &iv, &isf);
        json_t *e = isf                         ? mk_real(w, f, t->dtype)
                    : t->dtype == KILN_DT_BOOL ? json_boolean(iv)
                                               : json_integer(iv);
        if (!push(arr, e))
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* ---- attributes --------------------------------------------------------- */

static json_t *float_value(wjs *w, double x, bool *explicit_needed)
{
    if (isfinite(x))
        return mk_real(w, x, KILN_DT_FLOAT64);
    *explicit_needed = true;
    return json_string(nonfinite_name(x));
}

static json_t *attr_json(wjs *w, const kiln_attrs *a, const char *key, kiln_attr_type type)
{
    bool expl = false;
    json_t *v = NULL;
    uint32_t n = 0;
    switch (type) {
    case KILN_ATTR_BOOL: {
        bool b = false;
        kiln_attrs_get_bool(a, key, &b);
        return json_boolean(b);
    }
    case KILN_ATTR_INT: {
        int64_t i = 0;
        kiln_attrs_get_int(a, key, &i);
        return json_integer(i);
    }
    case KILN_ATTR_FLOAT: {
        double f = 0;
        kiln_attrs_get_float(a, key, &f);
        v = float_value(w, f, &expl);
        break;
    }
    case KILN_ATTR_STRING: {
        const char *s = "";
        kiln_attrs_get_string(a, key, &s);
        return str_json(w, s);
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *l = NULL;
        kiln_attrs_get_list_int(a, key, &l, &n);
        v = int_array(l, n);
        break;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *l = NULL;
        kiln_attrs_get_list_float(a, key, &l, &n);
        v = json_array();
        for (uint32_t i = 0; v && i < n; i++)
            if (!push(v, float_value(w, l[i], &expl))) {
                json_decref(v);
                return NULL;
            }
        break;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *l = NULL;
        kiln_attrs_get_list_string(a, key, &l, &n);
        v = json_array();
        for (uint32_t i = 0; v && i < n; i++)
            if (!push(v, str_json(w, l[i]))) {
                json_decref(v);
                return NULL;
            }
        break;
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *l = NULL;
        kiln_attrs_get_list_bool(a, key, &l, &n);
        v = json_array();
        for (uint32_t i = 0; v && i < n; i++)
            if (!push(v, json_boolean(l[i]))) {
                json_decref(v);
                return NULL;
            }
        break;
    }
    case KILN_ATTR_LIST_LIST_INT: {
        kiln_attrs_get_list_list_int(a, key, &n);
        v = json_array();
        for (uint32_t i = 0; v && i < n; i++) {
            const int64_t *l = NULL;
            uint32_t len = 0;
            kiln_attrs_get_list_list_int_at(a, key, i, &l, &len);
            if (!push(v, int_array(l, len))) {
                json_decref(v);
                return NULL;
            }
        }
        break;
    }
    case KILN_ATTR_DTYPE: {
        kiln_dtype dt = KILN_DT_FLOAT32;
        kiln_attrs_get_dtype(a, key, &dt);
        return explicit_form("dtype", json_string(kiln_dtype_name(dt)));
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value t;
        kiln_attrs_get_tensor(a, key, &t);
        return explicit_form("tensor", tensor_json(w, &t));
    }
    case KILN_ATTR_NONE: return NULL;
    }
    if (v && (expl || (type != KILN_ATTR_FLOAT && n == 0)))
        return explicit_form(kiln__json_attr_type_name(type), v);
    return v;
}

static bool is_reserved(const char *key, kiln_attr_type t)
{
    return (t == KILN_ATTR_STRING && strcmp(key, KILN_ATTR_ENGINE) == 0) ||
           (t == KILN_ATTR_INT && (strcmp(key, KILN_ATTR_STREAM_ID) == 0 ||
                                   strcmp(key, KILN_ATTR_TOPO_ID) == 0));
}

/* Attributes in key string order (the order attrs.c keeps them in) as an
 * object; NULL on failure.  Keys that are written as node keys are skipped
 * when @p skip_reserved. */
static json_t *attrs_json(wjs *w, const kiln_attrs *a, bool skip_reserved)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (uint32_t i = 0; a && i < a->n; i++) {
        const kattr *e = &a->v[i];
        const char *key = kiln_sym_str(a->g, e->key);
        kiln_attr_type t = (kiln_attr_type)e->type;
        if (t == KILN_ATTR_NONE || (skip_reserved && is_reserved(key, t)))
            continue;
        if (!put(o, key, attr_json(w, a, key, t))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* ---- descriptors, nodes, graphs ----------------------------------------- */

static json_t *desc_json(wjs *w, const kiln_graph *g, const kiln_tensor_desc *d)
{
    json_t *o = json_object();
    if (!o || !put(o, "dtype", json_string(kiln_dtype_name(kiln_desc_dtype(d)))))
        goto fail;
    if (d->rank >= 0 && !put(o, "shape", int_array(d->dims, (uint32_t)d->rank)))
        goto fail;
    if (d->format && !put(o, "format", str_json(w, kiln_desc_format(g, d))))
        goto fail;
    if (d->ref_input >= 0 && !put(o, "ref_input", json_integer(d->ref_input)))
        goto fail;
    if (kiln_desc_offset(d) != -1 && !put(o, "offset", json_integer(kiln_desc_offset(d))))
        goto fail;
    if (kiln_desc_size(d) != -1 && !put(o, "size", json_integer(kiln_desc_size(d))))
        goto fail;
    const char *mt = kiln_desc_memory_type(g, d);
    if (mt && !put(o, "memory_type", str_json(w, mt)))
        goto fail;
    if (kiln_attrs_count(kiln_desc_attrs(d)) &&
        !put(o, "attrs", attrs_json(w, kiln_desc_attrs(d), false)))
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

static json_t *graph_json(wjs *w, const kiln_graph *g);

static json_t *node_json(wjs *w, const kiln_graph *g, kiln_node_id n)
{
    const knode *k = &g->nodes[n];
    const knode_cold *c = &g->cold[n];
    json_t *o = json_object(), *arr;
    if (!o || !put(o, "name", str_json(w, kiln_node_name_str(g, n))) ||
        !put(o, "type", str_json(w, kiln_node_op_str(g, n))))
        goto fail;
    if (k->nin) {
        if (!put(o, "inputs", arr = json_array()))
            goto fail;
        for (uint32_t i = 0; i < k->nin; i++) {
            const kuse *r = &g->in[k->in_off + i];
            json_t *v;
            if (r->src) {
                /* "name:k" in a stack buffer; the heap only for long names */
                const char *pn = kiln_node_name_str(g, r->src);
                size_t len = strlen(pn) + 12;
                char sbuf[256], *buf = len <= sizeof(sbuf) ? sbuf : kiln__malloc(len);
                if (!buf)
                    goto fail;
                snprintf(buf, len, "%s:%u", pn, r->src_idx);
                v = str_json(w, buf);
                if (buf != sbuf)
                    kiln__free(buf);
            } else {
                v = json_null();
            }
            if (!push(arr, v))
                goto fail;
        }
    }
    if (k->ctrl_in) {
        if (!put(o, "control_inputs", arr = json_array()))
            goto fail;
        for (uint32_t e = k->ctrl_in; e; e = g->ctrl[e].in_next)
            if (!push(arr, str_json(w, kiln_node_name_str(g, g->ctrl[e].src))))
                goto fail;
    }
    bool own = false;
    for (uint32_t i = 0; i < k->nin && !own; i++)
        own = kiln_node_input_has_desc(g, n, i);
    if (own) {
        if (!put(o, "input_descs", arr = json_array()))
            goto fail;
        static const kiln_tensor_desc deflt = {.rank = -1, .ref_input = -1};
        for (uint32_t i = 0; i < k->nin; i++) {
            const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
            if (!push(arr, desc_json(w, g, d ? d : &deflt)))
                goto fail;
        }
    }
    if (k->nout) {
        if (!put(o, "outputs", arr = json_array()))
            goto fail;
        for (uint32_t i = 0; i < k->nout; i++)
            if (!push(arr, desc_json(w, g, g->out[k->out_off + i])))
                goto fail;
    }
    json_t *attrs = attrs_json(w, c->attrs, true);
    if (!attrs)
        goto fail;
    if (json_object_size(attrs) == 0)
        json_decref(attrs);
    else if (!put(o, "attrs", attrs))
        goto fail;
    const kowner *ow = kiln__owner(g, n);
    if (ow && ow->nsub) {
        json_t *subs = json_object();
        if (!put(o, "subgraphs", subs))
            goto fail;
        for (uint32_t i = 0; i < ow->nsub; i++) {
            const char *role = kiln_sym_str(g, ow->subs[i].role);
            if (json_object_get(subs, role)) {
                kiln_errorf(w->err, KILN_ERR_INVALID,
                            "node \"%s\" has two subgraphs with role \"%s\"",
                            kiln_node_name_str(g, n), role);
                goto fail;
            }
            if (!put(subs, role, graph_json(w, ow->subs[i].graph)))
                goto fail;
        }
    }
    const char *engine;
    int64_t iv;
    if (kiln_attrs_get_string(c->attrs, KILN_ATTR_ENGINE, &engine) &&
        !put(o, "engine", str_json(w, engine)))
        goto fail;
    if (kiln_attrs_get_int(c->attrs, KILN_ATTR_STREAM_ID, &iv) &&
        !put(o, "stream_id", json_integer(iv)))
        goto fail;
    if (kiln_attrs_get_int(c->attrs, KILN_ATTR_TOPO_ID, &iv) && !put(o, "id", json_integer(iv)))
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* A subgraph as a GRAPH object (built whole: subgraphs are small). */
static json_t *graph_json(wjs *w, const kiln_graph *g)
{
    json_t *o = json_object(), *nodes;
    if (!o || !put(o, "name", str_json(w, kiln_graph_name(g))))
        goto fail;
    if (kiln_attrs_count(g->attrs) && !put(o, "attrs", attrs_json(w, g->attrs, false)))
        goto fail;
    if (!put(o, "nodes", nodes = json_array()))
        goto fail;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (!push(nodes, node_json(w, g, n)))
            goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* ---- streaming ---------------------------------------------------------- */

/* Dump @p j (consumed) at @p indent with the unit's float precision. */
static kiln_status dump(wjs *w, json_t *j, FILE *f, int indent)
{
    if (!j)
        return kiln_error_code(w->err) != KILN_OK ? kiln_error_code(w->err) : oom(w);
    kiln_jbuf *d = &w->out;
    d->len = 0;
    /* arrays of scalars (shapes, lists, small tensors) on one line: readable,
     * and the file half the size of one element per line */
    kiln_json_fmt fmt = {.step = 2, .base = indent, .prec = w->prec, .inline_scalars = true};
    bool dumped = kiln__json_dump(d, j, &fmt);
    json_decref(j);
    w->prec = 1;
    if (!dumped)
        return d->oom ? oom(w) : kiln_errorf(w->err, KILN_ERR_INTERNAL, "cannot encode JSON");
    /* the text, with each data_b64 placeholder ("<tag><k>") replaced by its base64 */
    const char *b = d->buf, *end = d->buf + d->len;
    bool ok = true;
    for (uint32_t k = 0; ok && k < w->nblobs; k++) {
        const char *at = memmem(b, (size_t)(end - b), w->tag, w->tag_len);
        if (!at)
            return kiln_errorf(w->err, KILN_ERR_INTERNAL, "graph JSON: data_b64 %u lost", k);
        const char *q = at + w->tag_len;
        uint32_t idx = 0;
        while (q < end && *q >= '0' && *q <= '9' && idx < w->nblobs)
            idx = idx * 10 + (uint32_t)(*q++ - '0');
        if (q >= end || *q != '"' || idx >= w->nblobs)
            return kiln_errorf(w->err, KILN_ERR_INTERNAL, "graph JSON: bad data_b64 placeholder");
        ok = fwrite(b, 1, (size_t)(at + 1 - b), f) == (size_t)(at + 1 - b) &&
             b64_write(f, w->blobs[idx].p, w->blobs[idx].n);
        b = q;
    }
    w->nblobs = 0;
    if (!ok || fwrite(b, 1, (size_t)(end - b), f) != (size_t)(end - b))
        return kiln_errorf(w->err, KILN_ERR_IO, "cannot write graph JSON: %s", strerror(errno));
    return KILN_OK;
}

static kiln_status write_doc(wjs *w, const kiln_graph *g, FILE *f)
{
    kiln_status st;
    fputs("{\n  \"kiln_graph\": 1,\n  \"name\": ", f);
    if ((st = dump(w, str_json(w, kiln_graph_name(g)), f, 2)) != KILN_OK)
        return st;
    if (kiln_attrs_count(g->attrs)) {
        fputs(",\n  \"attrs\": ", f);
        if ((st = dump(w, attrs_json(w, g->attrs, false), f, 2)) != KILN_OK)
            return st;
    }
    fputs(",\n  \"nodes\": [", f);
    bool any = false;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        fputs(any ? ",\n    " : "\n    ", f);
        any = true;
        if ((st = dump(w, node_json(w, g, n), f, 4)) != KILN_OK)
            return st;
    }
    fputs(any ? "\n  ]\n}\n" : "]\n}\n", f);
    if (ferror(f))
        return kiln_errorf(w->err, KILN_ERR_IO, "cannot write graph JSON: %s", strerror(errno));
    return KILN_OK;
}

static kiln_status ref_write(wjs *w, const kiln_graph *g, FILE *f)
{
    /* the placeholder prefix: a quote, then a per-document nonce (stack
     * address and clock: unpredictable to the graph's author) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t nonce = ((uint64_t)(uintptr_t)w * 0x9E3779B97F4A7C15ull) ^
                     ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
    w->tag_len = (size_t)kiln__fmt(w->tag, sizeof(w->tag), "\"kiln-b64-%016llx-",
                                   (unsigned long long)nonce);
    kiln_status st = write_doc(w, g, f);
    kiln__jbuf_free(&w->out);
    kiln__free(w->blobs);
    return st;
}

char *kiln_test_graph_json_ref(const kiln_graph *g, kiln_error *err)
{
    char *mem = NULL, *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return NULL;
    wjs w = {.root = g->root, .err = err, .prec = 1};
    kiln_status st = ref_write(&w, g, f);
    if (fclose(f) != 0)
        st = KILN_ERR_NOMEM;
    if (st == KILN_OK && (out = kiln__malloc(len + 1)) != NULL)
        memcpy(out, mem, len + 1);
    free(mem);
    return out;
}
