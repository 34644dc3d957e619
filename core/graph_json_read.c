/*
 * graph_json_read.c - the graph JSON reader (GRAPH_FORMAT.md, version 1).
 *
 * Streaming: the top-level object is scanned by hand (whitespace, braces,
 * commas, colons); every value in it -- and each element of the root "nodes"
 * array -- is parsed separately with json_loadb(JSON_DISABLE_EOF_CHECK), so
 * only one root node's jansson tree exists at a time.  Subgraphs are parsed
 * from their parent node's tree.
 *
 * Two passes per graph, because nodes may come in any order: pass 1 creates
 * each node (ids follow document order) with descriptors, attributes and
 * subgraphs, and records its inputs as (producer name symbol, output index)
 * plus its control inputs; pass 2 (finish_graph) resolves the names with the
 * graph's O(1) name index and adds the edges.  The finished root is verified
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
#include "fileio.h"
#include "verify.h"

#include <stdarg.h>
#include <jansson.h>

#define KPATH 256
#define JFLAGS (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES)

typedef struct pend_in {
    kiln_sym prod; /* producer name (prefix before ":k") */
    uint32_t k;    /* output index */
    uint8_t form;  /* 0 = null, 1 = "name", 2 = "name:k" */
} pend_in;

typedef struct pend_node {
    uint32_t in_off;  /* first entry in rgraph.ins */
    uint32_t ctl_off; /* first entry in rgraph.ctl */
    uint32_t nctl;
} pend_node;

/* Per-graph state between pass 1 and pass 2. */
typedef struct rgraph {
    kiln_graph *g;
    const char *path; /* JSON path of the graph object */
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
    int64_t *ibuf;
    uint32_t icap;
    double *fbuf;
    uint32_t fcap;
    uint8_t *bbuf;
    uint32_t bcap;
    const char **sbuf;
    uint32_t scap;
    char *cbuf;
    uint32_t ccap;
} rjs;

/* ---- errors ------------------------------------------------------------- */

static kiln_status rerr(rjs *r, kiln_status code, const char *path, const char *fmt, ...)
    KILN_PRINTF(4, 5);

static kiln_status rerr(rjs *r, kiln_status code, const char *path, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kiln_errorf(r->err, code, "%s: %s", path, msg);
}

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

static void path_key(char *out, const char *base, const char *key)
{
    snprintf(out, KPATH, "%s.%s", base, key);
}

static void path_idx(char *out, const char *base, const char *key, size_t i)
{
    snprintf(out, KPATH, "%s.%s[%zu]", base, key, i);
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

/* ---- scratch buffers ---------------------------------------------------- */

#define SCRATCH(r, buf, cap, need) \
    ((need) <= (r)->cap || KILN_GROW((r)->buf, (r)->cap, (need)))

static bool is_xkey(const char *k)
{
    return k[0] == 'x' && k[1] == '-';
}

/* ---- attribute values --------------------------------------------------- */

static bool get_float(json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (!s)
        return false;
    if (strcmp(s, "nan") == 0)
        *out = NAN;
    else if (strcmp(s, "inf") == 0)
        *out = INFINITY;
    else if (strcmp(s, "-inf") == 0)
        *out = -INFINITY;
    else
        return false;
    return true;
}

static kiln_status int_list(rjs *r, const char *path, json_t *arr, uint32_t *n)
{
    *n = (uint32_t)json_array_size(arr);
    if (!SCRATCH(r, ibuf, icap, *n + 1))
        return nomem(r);
    for (uint32_t i = 0; i < *n; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_integer(e))
            return rerr(r, KILN_ERR_INVALID, path, "element %u is not an integer", i);
        r->ibuf[i] = json_integer_value(e);
    }
    return KILN_OK;
}

static kiln_status set_list(rjs *r, const char *path, kiln_attrs *a, const char *key,
                            kiln_attr_type t, json_t *arr)
{
    uint32_t n = (uint32_t)json_array_size(arr);
    kiln_status st = KILN_OK;
    switch (t) {
    case KILN_ATTR_LIST_INT:
        if ((st = int_list(r, path, arr, &n)) == KILN_OK)
            st = kiln_attrs_set_list_int(a, key, r->ibuf, n);
        break;
    case KILN_ATTR_LIST_FLOAT:
        if (!SCRATCH(r, fbuf, fcap, n + 1))
            return nomem(r);
        for (uint32_t i = 0; i < n; i++)
            if (!get_float(json_array_get(arr, i), &r->fbuf[i]))
                return rerr(r, KILN_ERR_INVALID, path, "element %u is not a number", i);
        st = kiln_attrs_set_list_float(a, key, r->fbuf, n);
        break;
    case KILN_ATTR_LIST_BOOL:
        if (!SCRATCH(r, bbuf, bcap, n + 1))
            return nomem(r);
        for (uint32_t i = 0; i < n; i++) {
            json_t *e = json_array_get(arr, i);
            if (!json_is_boolean(e))
                return rerr(r, KILN_ERR_INVALID, path, "element %u is not a bool", i);
            r->bbuf[i] = json_is_true(e);
        }
        st = kiln_attrs_set_list_bool(a, key, r->bbuf, n);
        break;
    case KILN_ATTR_LIST_STRING:
        if (!SCRATCH(r, sbuf, scap, n + 1))
            return nomem(r);
        for (uint32_t i = 0; i < n; i++)
            if (!(r->sbuf[i] = json_string_value(json_array_get(arr, i))))
                return rerr(r, KILN_ERR_INVALID, path, "element %u is not a string", i);
        st = kiln_attrs_set_list_string(a, key, r->sbuf, n);
        break;
    case KILN_ATTR_LIST_LIST_INT: {
        size_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
            json_t *e = json_array_get(arr, i);
            if (!json_is_array(e))
                return rerr(r, KILN_ERR_INVALID, path, "element %u is not a list", i);
            total += json_array_size(e);
        }
        int64_t *flat = kiln__malloc((total + 1) * sizeof(*flat));
        const int64_t **lists = kiln__malloc((n + 1) * sizeof(*lists));
        uint32_t *lens = kiln__malloc((n + 1) * sizeof(*lens));
        if (!flat || !lists || !lens) {
            st = nomem(r);
        } else {
            size_t at = 0;
            for (uint32_t i = 0; i < n && st == KILN_OK; i++) {
                json_t *e = json_array_get(arr, i);
                lists[i] = flat + at;
                lens[i] = (uint32_t)json_array_size(e);
                for (uint32_t j = 0; j < lens[i]; j++, at++) {
                    json_t *x = json_array_get(e, j);
                    if (!json_is_integer(x)) {
                        st = rerr(r, KILN_ERR_INVALID, path, "element [%u][%u] is not an integer",
                                  i, j);
                        break;
                    }
                    flat[at] = json_integer_value(x);
                }
            }
            if (st == KILN_OK)
                st = kiln_attrs_set_list_list_int(a, key, lists, lens, n);
        }
        kiln__free(flat);
        kiln__free(lists);
        kiln__free(lens);
        break;
    }
    default: st = KILN_ERR_INTERNAL; break;
    }
    if (st == KILN_ERR_NOMEM)
        return nomem(r);
    return st;
}

/* Strict base64 (standard alphabet, '=' padding) into r->bbuf. */
static bool b64_decode(rjs *r, const char *s, size_t len, size_t *out_len)
{
    if (len % 4)
        return false;
    if (!SCRATCH(r, bbuf, bcap, (uint32_t)(len / 4 * 3 + 1)))
        return false;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            uint32_t d;
            if (c >= 'A' && c <= 'Z')
                d = (uint32_t)(c - 'A');
            else if (c >= 'a' && c <= 'z')
                d = (uint32_t)(c - 'a' + 26);
            else if (c >= '0' && c <= '9')
                d = (uint32_t)(c - '0' + 52);
            else if (c == '+')
                d = 62;
            else if (c == '/')
                d = 63;
            else if (c == '=' && i + 4 == len && j >= 2 && (j == 3 || s[i + 3] == '='))
                d = 0, pad++;
            else
                return false;
            if (pad && c != '=')
                return false;
            v = v << 6 | d;
        }
        r->bbuf[o++] = (uint8_t)(v >> 16);
        if (pad < 2)
            r->bbuf[o++] = (uint8_t)(v >> 8);
        if (pad < 1)
            r->bbuf[o++] = (uint8_t)v;
    }
    *out_len = o;
    return true;
}

/* One tensor element from JSON into little-endian bytes at @p p. */
static bool tensor_elem(kiln_dtype dt, json_t *v, uint8_t *p)
{
    size_t esz = kiln_dtype_size(dt);
    double f;
    switch (dt) {
    case KILN_DT_FLOAT32: {
        if (!json_is_number(v))
            return false;
        float x = (float)json_number_value(v);
        uint32_t u;
        memcpy(&u, &x, sizeof(u));
        kiln__store_le(p, 4, u);
        return true;
    }
    case KILN_DT_FLOAT64: {
        if (!json_is_number(v))
            return false;
        f = json_number_value(v);
        uint64_t u;
        memcpy(&u, &f, sizeof(u));
        kiln__store_le(p, 8, u);
        return true;
    }
    case KILN_DT_FLOAT16:
    case KILN_DT_BFLOAT16:
        if (!json_is_number(v))
            return false;
        f = json_number_value(v);
        kiln__store_le(p, 2, dt == KILN_DT_FLOAT16 ? kiln__small_float_encode(f, 10, 5)
                                                  : kiln__small_float_encode(f, 7, 8));
        return true;
    case KILN_DT_BOOL:
        if (json_is_boolean(v)) {
            p[0] = json_is_true(v);
            return true;
        }
        if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            p[0] = (uint8_t)json_integer_value(v);
            return true;
        }
        return false;
    default: break;
    }
    if (!json_is_integer(v))
        return false;
    long long i = json_integer_value(v);
    bool ok;
    switch (dt) {
    case KILN_DT_INT8: ok = i >= INT8_MIN && i <= INT8_MAX; break;
    case KILN_DT_INT16: ok = i >= INT16_MIN && i <= INT16_MAX; break;
    case KILN_DT_INT32: ok = i >= INT32_MIN && i <= INT32_MAX; break;
    case KILN_DT_INT64: ok = true; break;
    case KILN_DT_UINT8: ok = i >= 0 && i <= UINT8_MAX; break;
    case KILN_DT_UINT16: ok = i >= 0 && i <= UINT16_MAX; break;
    case KILN_DT_UINT32: ok = i >= 0 && i <= (long long)UINT32_MAX; break;
    case KILN_DT_UINT64: ok = i >= 0; break;
    default: ok = false; break;
    }
    if (ok)
        kiln__store_le(p, esz, (uint64_t)i);
    return ok;
}

static kiln_status set_tensor(rjs *r, const char *path, kiln_attrs *a, const char *key,
                              json_t *v)
{
    if (!json_is_object(v))
        return rerr(r, KILN_ERR_INVALID, path, "tensor value must be an object");
    json_t *jdt = NULL, *jshape = NULL, *jdata = NULL, *jb64 = NULL, *x;
    const char *k;
    char p[KPATH];
    json_object_foreach(v, k, x) {
        if (strcmp(k, "dtype") == 0)
            jdt = x;
        else if (strcmp(k, "shape") == 0)
            jshape = x;
        else if (strcmp(k, "data") == 0)
            jdata = x;
        else if (strcmp(k, "data_b64") == 0)
            jb64 = x;
        else if (!is_xkey(k)) {
            path_key(p, path, k);
            return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", k);
        }
    }
    kiln_dtype dt = KILN_DT_FLOAT32;
    if (jdt && (!json_is_string(jdt) || !kiln_dtype_parse(json_string_value(jdt), &dt)))
        return rerr(r, KILN_ERR_INVALID, path, "bad tensor dtype %s",
                    json_is_string(jdt) ? json_string_value(jdt) : "(not a string)");
    if (!json_is_array(jshape))
        return rerr(r, KILN_ERR_INVALID, path, "tensor needs a \"shape\" list");
    uint32_t rank;
    kiln_status st = int_list(r, path, jshape, &rank);
    if (st != KILN_OK)
        return st;
    uint64_t numel = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (r->ibuf[i] < 0 || (r->ibuf[i] && numel > (UINT64_C(1) << 40) / (uint64_t)r->ibuf[i]))
            return rerr(r, KILN_ERR_INVALID, path, "bad tensor dim %lld",
                        (long long)r->ibuf[i]);
        numel *= (uint64_t)r->ibuf[i];
    }
    if (!jdata == !jb64)
        return rerr(r, KILN_ERR_INVALID, path, "tensor needs exactly one of data, data_b64");
    size_t esz = kiln_dtype_size(dt), nbytes;
    if (jb64) {
        const char *s = json_string_value(jb64);
        if (!s || !b64_decode(r, s, json_string_length(jb64), &nbytes))
            return rerr(r, KILN_ERR_INVALID, path, "data_b64 is not valid base64");
        if (esz && nbytes != numel * esz)
            return rerr(r, KILN_ERR_INVALID, path,
                        "data_b64 holds %zu bytes, shape and dtype need %llu", nbytes,
                        (unsigned long long)(numel * esz));
    } else {
        if (!esz)
            return rerr(r, KILN_ERR_INVALID, path, "%s tensors need data_b64",
                        kiln_dtype_name(dt));
        if (!json_is_array(jdata) || json_array_size(jdata) != numel)
            return rerr(r, KILN_ERR_INVALID, path, "data must be a list of %llu elements",
                        (unsigned long long)numel);
        nbytes = numel * esz;
        if (!SCRATCH(r, bbuf, bcap, (uint32_t)nbytes + 1))
            return nomem(r);
        for (size_t i = 0; i < numel; i++)
            if (!tensor_elem(dt, json_array_get(jdata, i), r->bbuf + i * esz))
                return rerr(r, KILN_ERR_INVALID, path, "data[%zu] is not a valid %s", i,
                            kiln_dtype_name(dt));
    }
    /* r->ibuf still holds the dims. */
    kiln_tensor_value tv = {dt, rank, r->ibuf, r->bbuf, nbytes};
    if (kiln_attrs_set_tensor(a, key, &tv) != KILN_OK)
        return nomem(r);
    return KILN_OK;
}

static kiln_status set_explicit(rjs *r, const char *path, kiln_attrs *a, const char *key,
                                json_t *obj)
{
    json_t *jt = NULL, *v = NULL, *x;
    const char *k;
    char p[KPATH];
    json_object_foreach(obj, k, x) {
        if (strcmp(k, "type") == 0)
            jt = x;
        else if (strcmp(k, "value") == 0)
            v = x;
        else if (!is_xkey(k)) {
            path_key(p, path, k);
            return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\" (an object attribute value "
                        "is {\"type\": T, \"value\": V})", k);
        }
    }
    const char *t = json_string_value(jt);
    if (!t || !v)
        return rerr(r, KILN_ERR_INVALID, path, "an object attribute value needs \"type\" and "
                    "\"value\"");
    kiln_status st = KILN_ERR_NOMEM;
    bool bad = false;
    if (strcmp(t, "bool") == 0) {
        bad = !json_is_boolean(v);
        if (!bad)
            st = kiln_attrs_set_bool(a, key, json_is_true(v));
    } else if (strcmp(t, "int") == 0) {
        bad = !json_is_integer(v);
        if (!bad)
            st = kiln_attrs_set_int(a, key, json_integer_value(v));
    } else if (strcmp(t, "float") == 0) {
        double f = 0;
        bad = !get_float(v, &f);
        if (!bad)
            st = kiln_attrs_set_float(a, key, f);
    } else if (strcmp(t, "string") == 0 || strcmp(t, "graph") == 0) {
        bad = !json_is_string(v);
        if (!bad)
            st = kiln_attrs_set_string(a, key, json_string_value(v));
    } else if (strcmp(t, "dtype") == 0) {
        kiln_dtype dt;
        if (!json_is_string(v) || !kiln_dtype_parse(json_string_value(v), &dt))
            return rerr(r, KILN_ERR_INVALID, path, "bad dtype %s",
                        json_is_string(v) ? json_string_value(v) : "(not a string)");
        st = kiln_attrs_set_dtype(a, key, dt);
    } else if (strcmp(t, "tensor") == 0) {
        return set_tensor(r, path, a, key, v);
    } else {
        kiln_attr_type lt = KILN_ATTR_NONE;
        for (int i = KILN_ATTR_LIST_INT; i <= KILN_ATTR_LIST_LIST_INT; i++)
            if (strcmp(t, kiln__json_attr_type_name((kiln_attr_type)i)) == 0)
                lt = (kiln_attr_type)i;
        if (lt == KILN_ATTR_NONE)
            return rerr(r, KILN_ERR_INVALID, path, "unknown attribute type \"%s\"", t);
        if (!json_is_array(v))
            return rerr(r, KILN_ERR_INVALID, path, "a %s value must be a list", t);
        return set_list(r, path, a, key, lt, v);
    }
    if (bad)
        return rerr(r, KILN_ERR_INVALID, path, "value does not match type \"%s\"", t);
    return st == KILN_OK ? KILN_OK : nomem(r);
}

static kiln_status set_attr(rjs *r, const char *path, kiln_attrs *a, const char *key, json_t *v)
{
    kiln_status st;
    switch (json_typeof(v)) {
    case JSON_TRUE:
    case JSON_FALSE: st = kiln_attrs_set_bool(a, key, json_is_true(v)); break;
    case JSON_INTEGER: st = kiln_attrs_set_int(a, key, json_integer_value(v)); break;
    case JSON_REAL: st = kiln_attrs_set_float(a, key, json_real_value(v)); break;
    case JSON_STRING: st = kiln_attrs_set_string(a, key, json_string_value(v)); break;
    case JSON_OBJECT: return set_explicit(r, path, a, key, v);
    case JSON_ARRAY: {
        /* Infer the list type from the elements (GRAPH_FORMAT.md table). */
        size_t n = json_array_size(v), ints = 0, reals = 0, strs = 0, bools = 0, lists = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            ints += json_is_integer(e);
            reals += json_is_real(e);
            strs += json_is_string(e);
            bools += json_is_boolean(e);
            lists += json_is_array(e);
        }
        kiln_attr_type t = n == 0 || ints == n ? KILN_ATTR_LIST_INT
                           : ints + reals == n ? KILN_ATTR_LIST_FLOAT
                           : strs == n         ? KILN_ATTR_LIST_STRING
                           : bools == n        ? KILN_ATTR_LIST_BOOL
                           : lists == n        ? KILN_ATTR_LIST_LIST_INT
                                               : KILN_ATTR_NONE;
        if (t == KILN_ATTR_NONE)
            return rerr(r, KILN_ERR_INVALID, path, "list elements have mixed or unsupported "
                        "types");
        return set_list(r, path, a, key, t, v);
    }
    default: return rerr(r, KILN_ERR_INVALID, path, "null is not an attribute value");
    }
    return st == KILN_OK ? KILN_OK : nomem(r);
}

static kiln_status parse_attrs(rjs *r, const char *path, json_t *obj, kiln_attrs *a)
{
    if (!json_is_object(obj))
        return rerr(r, KILN_ERR_INVALID, path, "attrs must be an object");
    if (!a)
        return nomem(r);
    const char *k;
    json_t *v;
    char p[KPATH];
    json_object_foreach(obj, k, v) {
        path_key(p, path, k);
        if (!k[0])
            return rerr(r, KILN_ERR_INVALID, p, "empty attribute name");
        kiln_status st = set_attr(r, p, a, k, v);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* ---- tensor descriptors ------------------------------------------------- */

static kiln_status parse_desc(rjs *r, const char *path, kiln_graph *g, json_t *j,
                              kiln_tensor_desc *d)
{
    if (!d)
        return nomem(r);
    if (!json_is_object(j))
        return rerr(r, KILN_ERR_INVALID, path, "tensor descriptor must be an object");
    const char *k;
    json_t *v;
    char p[KPATH];
    json_object_foreach(j, k, v) {
        path_key(p, path, k);
        if (strcmp(k, "dtype") == 0) {
            kiln_dtype dt;
            if (!json_is_string(v) || !kiln_dtype_parse(json_string_value(v), &dt))
                return rerr(r, KILN_ERR_INVALID, p, "bad dtype %s%s%s",
                            json_is_string(v) ? "\"" : "",
                            json_is_string(v) ? json_string_value(v) : "(not a string)",
                            json_is_string(v) ? "\"" : "");
            kiln_desc_set_dtype(d, dt);
        } else if (strcmp(k, "shape") == 0) {
            uint32_t rank;
            if (!json_is_array(v) || json_array_size(v) > INT32_MAX)
                return rerr(r, KILN_ERR_INVALID, p, "shape must be a list of integers");
            kiln_status st = int_list(r, p, v, &rank);
            if (st != KILN_OK)
                return st;
            for (uint32_t i = 0; i < rank; i++)
                if (r->ibuf[i] < -1)
                    return rerr(r, KILN_ERR_INVALID, p, "dim %u is %lld (use -1 for unknown)",
                                i, (long long)r->ibuf[i]);
            if (kiln_desc_set_shape(g, d, (int32_t)rank, r->ibuf) != KILN_OK)
                return nomem(r);
        } else if (strcmp(k, "format") == 0 || strcmp(k, "memory_type") == 0) {
            if (!json_is_string(v))
                return rerr(r, KILN_ERR_INVALID, p, "%s must be a string", k);
            if (k[0] == 'f')
                kiln_desc_set_format(g, d, json_string_value(v));
            else
                kiln_desc_set_memory_type(g, d, json_string_value(v));
        } else if (strcmp(k, "ref_input") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX)
                return rerr(r, KILN_ERR_INVALID, p, "ref_input must be an input index");
            kiln_desc_set_ref_input(d, (int32_t)json_integer_value(v));
        } else if (strcmp(k, "offset") == 0 || strcmp(k, "size") == 0) {
            if (!json_is_integer(v))
                return rerr(r, KILN_ERR_INVALID, p, "%s must be an integer", k);
            if (k[0] == 'o')
                kiln_desc_set_offset(g, d, json_integer_value(v));
            else
                kiln_desc_set_size(g, d, json_integer_value(v));
        } else if (strcmp(k, "attrs") == 0) {
            kiln_status st = parse_attrs(r, p, v, kiln_desc_attrs_mut(g, d));
            if (st != KILN_OK)
                return st;
        } else if (!is_xkey(k)) {
            return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", k);
        }
    }
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

static kiln_status parse_subgraph(rjs *r, const char *path, kiln_graph *g, kiln_node_id n,
                                  const char *role, json_t *j)
{
    if (!json_is_object(j))
        return rerr(r, KILN_ERR_INVALID, path, "subgraph must be an object");
    json_t *name = NULL, *nodes = NULL, *attrs = NULL, *v;
    const char *k;
    char p[KPATH];
    json_object_foreach(j, k, v) {
        if (strcmp(k, "name") == 0)
            name = v;
        else if (strcmp(k, "nodes") == 0)
            nodes = v;
        else if (strcmp(k, "attrs") == 0)
            attrs = v;
        else if (!is_xkey(k)) {
            path_key(p, path, k);
            return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", k);
        }
    }
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
        path_key(p, path, "attrs");
        if ((st = parse_attrs(r, p, attrs, kiln_graph_attrs(sg))) != KILN_OK)
            return st;
    }
    rgraph srg = {.g = sg, .path = path};
    for (size_t i = 0; i < json_array_size(nodes) && st == KILN_OK; i++)
        st = add_node(r, &srg, json_array_get(nodes, i), i);
    if (st == KILN_OK)
        st = finish_graph(r, &srg);
    rgraph_free(&srg);
    return st;
}

/* Record input @p s ("name", "name:k") of the node being added. */
static kiln_status pend_input(rjs *r, rgraph *rg, const char *path, json_t *v)
{
    pend_in pi = {0, 0, 0};
    if (!json_is_null(v)) {
        const char *s = json_string_value(v);
        if (!s || !s[0])
            return rerr(r, KILN_ERR_INVALID, path, "an input is \"producer:k\", \"producer\" "
                        "or null");
        size_t len = strlen(s), colon = len;
        while (colon > 0 && s[colon - 1] >= '0' && s[colon - 1] <= '9')
            colon--;
        unsigned long long k = 0;
        if (colon > 1 && colon < len && s[colon - 1] == ':' && len - colon <= 10)
            k = strtoull(s + colon, NULL, 10);
        if (colon > 1 && colon < len && s[colon - 1] == ':' && len - colon <= 10 &&
            k <= UINT32_MAX) {
            if (!SCRATCH(r, cbuf, ccap, (uint32_t)colon))
                return nomem(r);
            memcpy(r->cbuf, s, colon - 1);
            r->cbuf[colon - 1] = 0;
            pi = (pend_in){kiln_intern(rg->g, r->cbuf), (uint32_t)k, 2};
        } else {
            pi = (pend_in){kiln_intern(rg->g, s), 0, 1};
        }
        if (!pi.prod)
            return nomem(r);
    }
    if (!KILN_GROW(rg->ins, rg->ins_cap, rg->nins + 1))
        return nomem(r);
    rg->ins[rg->nins++] = pi;
    return KILN_OK;
}

static kiln_status add_node(rjs *r, rgraph *rg, json_t *jn, size_t idx)
{
    kiln_graph *g = rg->g;
    char path[KPATH], p[KPATH];
    path_idx(path, rg->path, "nodes", idx);
    if (!json_is_object(jn))
        return rerr(r, KILN_ERR_INVALID, path, "node must be an object");
    json_t *name = NULL, *type = NULL, *inputs = NULL, *ctrl = NULL, *idescs = NULL;
    json_t *outputs = NULL, *attrs = NULL, *subs = NULL, *engine = NULL, *stream = NULL;
    json_t *id = NULL, *v;
    const char *k;
    json_object_foreach(jn, k, v) {
        json_t **slot = strcmp(k, "name") == 0             ? &name
                        : strcmp(k, "type") == 0           ? &type
                        : strcmp(k, "inputs") == 0         ? &inputs
                        : strcmp(k, "control_inputs") == 0 ? &ctrl
                        : strcmp(k, "input_descs") == 0    ? &idescs
                        : strcmp(k, "outputs") == 0        ? &outputs
                        : strcmp(k, "attrs") == 0          ? &attrs
                        : strcmp(k, "subgraphs") == 0      ? &subs
                        : strcmp(k, "engine") == 0         ? &engine
                        : strcmp(k, "stream_id") == 0      ? &stream
                        : strcmp(k, "id") == 0             ? &id
                                                           : NULL;
        if (slot) {
            *slot = v;
        } else if (!is_xkey(k)) {
            path_key(p, path, k);
            return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", k);
        }
    }
    const char *sname = json_string_value(name), *stype = json_string_value(type);
    if (!sname || !sname[0])
        return rerr(r, KILN_ERR_INVALID, path, "node needs a non-empty string \"name\"");
    if (!stype || !stype[0])
        return rerr(r, KILN_ERR_INVALID, path, "node \"%s\" needs a non-empty string \"type\"",
                    sname);
    static const char *const list_keys[] = {"inputs", "control_inputs", "input_descs",
                                            "outputs"};
    json_t *lists[] = {inputs, ctrl, idescs, outputs};
    for (int i = 0; i < 4; i++) {
        if (lists[i] && !json_is_array(lists[i])) {
            path_key(p, path, list_keys[i]);
            return rerr(r, KILN_ERR_INVALID, p, "must be a list");
        }
    }
    uint32_t nin = (uint32_t)json_array_size(inputs), nout = (uint32_t)json_array_size(outputs);
    if (idescs && json_array_size(idescs) != nin) {
        path_key(p, path, "input_descs");
        return rerr(r, KILN_ERR_INVALID, p, "node \"%s\" has %u inputs but %zu input_descs",
                    sname, nin, json_array_size(idescs));
    }
    kiln_node_id n = kiln_graph_add_node(g, sname, stype, nin, nout);
    if (!n) {
        if (kiln_graph_find_node(g, sname)) {
            path_key(p, path, "name");
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
        path_idx(p, path, "inputs", i);
        if ((st = pend_input(r, rg, p, json_array_get(inputs, i))) != KILN_OK)
            return st;
    }
    for (size_t i = 0; i < json_array_size(ctrl); i++) {
        const char *c = json_string_value(json_array_get(ctrl, i));
        path_idx(p, path, "control_inputs", i);
        if (!c || !c[0])
            return rerr(r, KILN_ERR_INVALID, p, "a control input is a node name");
        if (!KILN_GROW(rg->ctl, rg->ctl_cap, rg->nctl + 1))
            return nomem(r);
        if (!(rg->ctl[rg->nctl++] = kiln_intern(g, c)))
            return nomem(r);
    }
    for (uint32_t i = 0; i < nout; i++) {
        path_idx(p, path, "outputs", i);
        st = parse_desc(r, p, g, json_array_get(outputs, i), kiln_node_output_desc(g, n, i));
        if (st != KILN_OK)
            return st;
    }
    for (uint32_t i = 0; idescs && i < nin; i++) {
        path_idx(p, path, "input_descs", i);
        st = parse_desc(r, p, g, json_array_get(idescs, i), kiln_node_input_desc_mut(g, n, i));
        if (st != KILN_OK)
            return st;
    }
    if (attrs) {
        path_key(p, path, "attrs");
        if ((st = parse_attrs(r, p, attrs, kiln_node_attrs_mut(g, n))) != KILN_OK)
            return st;
    }
    if (engine || stream || id) {
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        if (!a)
            return nomem(r);
        if (engine && !json_is_string(engine))
            return path_key(p, path, "engine"),
                   rerr(r, KILN_ERR_INVALID, p, "engine must be a string");
        if ((stream && !json_is_integer(stream)) || (id && !json_is_integer(id)))
            return path_key(p, path, stream && !json_is_integer(stream) ? "stream_id" : "id"),
                   rerr(r, KILN_ERR_INVALID, p, "must be an integer");
        if ((engine && kiln_attrs_set_string(a, KILN_ATTR_ENGINE, json_string_value(engine))) ||
            (stream &&
             kiln_attrs_set_int(a, KILN_ATTR_STREAM_ID, json_integer_value(stream))) ||
            (id && kiln_attrs_set_int(a, KILN_ATTR_TOPO_ID, json_integer_value(id))))
            return nomem(r);
    }
    if (subs) {
        path_key(p, path, "subgraphs");
        if (!json_is_object(subs))
            return rerr(r, KILN_ERR_INVALID, p, "subgraphs must be an object (role -> graph)");
        json_object_foreach(subs, k, v) {
            char sp[KPATH];
            path_key(sp, p, k);
            if ((st = parse_subgraph(r, sp, g, n, k, v)) != KILN_OK)
                return st;
        }
    }
    return kiln_graph_oom(g) ? nomem(r) : KILN_OK;
}

/* Pass 2: connect data and control edges of every node of @p rg. */
static kiln_status finish_graph(rjs *r, rgraph *rg)
{
    kiln_graph *g = rg->g;
    char p[KPATH];
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        const pend_node *pn = &rg->nodes[n];
        uint32_t nin = kiln_node_input_count(g, n);
        for (uint32_t i = 0; i < nin; i++) {
            const pend_in *pi = &rg->ins[pn->in_off + i];
            if (!pi->form)
                continue;
            const char *pname = kiln_sym_str(g, pi->prod);
            kiln_node_id src = kiln_graph_find_node(g, pname);
            uint32_t k = pi->k;
            if (!src && pi->form == 2) {
                /* "a:1" may be the whole name of a node (output 0). */
                char tail[16];
                size_t plen = strlen(pname);
                int tl = snprintf(tail, sizeof(tail), ":%u", k);
                if (!SCRATCH(r, cbuf, ccap, (uint32_t)(plen + (size_t)tl + 1)))
                    return nomem(r);
                memcpy(r->cbuf, kiln_sym_str(g, pi->prod), plen);
                memcpy(r->cbuf + plen, tail, (size_t)tl + 1);
                src = kiln_graph_find_node(g, r->cbuf);
                k = 0;
                pname = kiln_sym_str(g, pi->prod);
            }
            snprintf(p, sizeof(p), "%s.nodes[%u].inputs[%u]", rg->path, n - 1, i);
            if (!src)
                return rerr(r, KILN_ERR_NOT_FOUND, p,
                            "node \"%s\": input %u names missing producer \"%s\"",
                            kiln_node_name_str(g, n), i, pname);
            if (k >= kiln_node_output_count(g, src))
                return rerr(r, KILN_ERR_INVALID, p,
                            "node \"%s\": input %u reads output %u of \"%s\", which has %u "
                            "outputs (output index out of range)",
                            kiln_node_name_str(g, n), i, k, kiln_node_name_str(g, src),
                            kiln_node_output_count(g, src));
            if (kiln_edge_add(g, src, k, n, i) != KILN_OK)
                return rerr(r, KILN_ERR_INTERNAL, p, "cannot connect input %u", i);
        }
        for (uint32_t i = 0; i < pn->nctl; i++) {
            const char *cname = kiln_sym_str(g, rg->ctl[pn->ctl_off + i]);
            kiln_node_id src = kiln_graph_find_node(g, cname);
            snprintf(p, sizeof(p), "%s.nodes[%u].control_inputs[%u]", rg->path, n - 1, i);
            if (!src)
                return rerr(r, KILN_ERR_NOT_FOUND, p, "node \"%s\": no control input node "
                            "named \"%s\"", kiln_node_name_str(g, n), cname);
            if (src == n)
                return rerr(r, KILN_ERR_INVALID, p, "node \"%s\": control input on itself",
                            kiln_node_name_str(g, n));
            if (kiln_ctrl_add(g, src, n) != KILN_OK)
                return nomem(r);
        }
    }
    return kiln_graph_oom(g) ? nomem(r) : KILN_OK;
}

/* ---- the document -------------------------------------------------------- */

static kiln_status read_nodes(rjs *r, rgraph *rg)
{
    if (!eat(r, '['))
        return syntax_at(r, r->pos, "\"nodes\" must be a list");
    if (eat(r, ']'))
        return KILN_OK;
    for (size_t idx = 0;; idx++) {
        json_t *jn;
        kiln_status st = parse_value(r, &jn);
        if (st != KILN_OK)
            return st;
        st = add_node(r, rg, jn, idx);
        json_decref(jn);
        if (st != KILN_OK)
            return st;
        if (eat(r, ']'))
            return KILN_OK;
        if (!eat(r, ','))
            return syntax_at(r, r->pos, "expected ',' or ']' in \"nodes\"");
    }
}

static kiln_status read_doc(rjs *r)
{
    rgraph rg = {.g = r->root, .path = "$"};
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
            char p[KPATH];
            path_key(p, "$", k);
            unsigned bit = strcmp(k, "kiln_graph") == 0 ? 1
                           : strcmp(k, "name") == 0     ? 2
                           : strcmp(k, "attrs") == 0    ? 4
                           : strcmp(k, "nodes") == 0    ? 8
                                                        : 0;
            if (bit & seen)
                st = rerr(r, KILN_ERR_INVALID, p, "duplicate key");
            else if (!bit && !is_xkey(k))
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
                st = parse_attrs(r, p, v, kiln_graph_attrs(r->root));
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

kiln_status kiln_graph_read_json_string(kiln_ctx *ctx, const char *text, size_t len,
                                        const char *source_name, kiln_graph **out,
                                        kiln_error *err)
{
    *out = NULL;
    rjs r = {.src = source_name ? source_name : "<string>", .text = text, .len = len, .err = err};
    kiln_status st;
    r.root = kiln_graph_create(ctx, "");
    if (!r.root) {
        st = nomem(&r);
        goto fail;
    }
    /* Reserve for the node count, estimated from the "name" keys (O(len)). */
    uint32_t names = 0;
    for (const char *s = text, *end = text + len;
         (s = memmem(s, (size_t)(end - s), "\"name\"", 6)) != NULL; s += 6)
        names++;
    if (names > 1)
        kiln_graph_reserve(r.root, names, 0, 0);
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
    kiln__free(r.ibuf);
    kiln__free(r.fbuf);
    kiln__free(r.bbuf);
    kiln__free(r.sbuf);
    kiln__free(r.cbuf);
    return st;
}

kiln_status kiln_graph_read_json_file(kiln_ctx *ctx, const char *path, kiln_graph **out,
                                      kiln_error *err)
{
    char *text;
    size_t len;
    *out = NULL;
    kiln_status st = kiln_file_read_all(path, &text, &len, err);
    if (st != KILN_OK)
        return st;
    st = kiln_graph_read_json_string(ctx, text, len, path, out, err);
    kiln__free(text);
    return st;
}
