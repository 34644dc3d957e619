/*
 * graph_json_attr.c - attribute values of the graph JSON format (the
 * "Attribute values" table of docs/graph_format.md), for graph_json_read.c.
 *
 * Implicit forms: bool, int, float (a JSON number with '.' or exponent),
 * string, and lists whose element kinds decide the type (all integers ->
 * list_int, numbers with any float -> list_float, strings, bools, lists of
 * integer lists -> list_list_int; an empty list is list_int).  Explicit form
 * {"type": T, "value": V} for any type plus dtype, tensor and graph (stored as
 * a string).  Floats in the explicit form may be "nan", "inf", "-inf".
 * Tensors: {"dtype", "shape", "data" | "data_b64"}; data elements are
 * converted to the dtype (float16/bfloat16 rounded to nearest even, integer
 * ranges checked), data_b64 is strict standard base64 of little-endian bytes
 * whose length must match shape x dtype size.
 *
 * Complexity: linear in the JSON value; scratch buffers are reused across
 * calls (kiln__jattr) so reading a million small lists allocates rarely.
 */
#include "graph_json.h"

#include <jansson.h>
#include <stdarg.h>

kiln_status kiln__json_err(kiln_error *err, kiln_status code, const char *path, const char *fmt,
                           ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kiln_errorf(err, code, "%s: %s", path, msg);
}

/* The JSON path of the value being parsed: @p path, or when it is NULL the
 * attribute's path r->pbase + "." + r->pkey, built here (only error messages
 * need it, so kiln__json_parse_attrs does not build it per attribute). */
static const char *P(kiln__jattr *r, const char *path)
{
    if (path)
        return path;
    kiln__json_path_key(r->pbuf, r->pbase, r->pkey);
    return r->pbuf;
}

#define rerr(r, code, path, ...) kiln__json_err((r)->err, (code), P((r), (path)), __VA_ARGS__)

static kiln_status nomem(kiln__jattr *r)
{
    return kiln_errorf(r->err, KILN_ERR_NOMEM, "out of memory reading graph JSON");
}

void kiln__json_scratch_free(kiln__jattr *r)
{
    kiln__free(r->ibuf);
    kiln__free(r->fbuf);
    kiln__free(r->bbuf);
    kiln__free(r->sbuf);
    r->ibuf = NULL;
    r->fbuf = NULL;
    r->bbuf = NULL;
    r->sbuf = NULL;
    r->icap = r->fcap = r->bcap = r->scap = 0;
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

kiln_status kiln__json_int_list(kiln__jattr *r, const char *path, json_t *arr, uint32_t *n)
{
    *n = (uint32_t)json_array_size(arr);
    if (!KILN_JSON_SCRATCH(r, ibuf, icap, *n + 1))
        return nomem(r);
    for (uint32_t i = 0; i < *n; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_integer(e))
            return rerr(r, KILN_ERR_INVALID, path, "element %u is not an integer", i);
        r->ibuf[i] = json_integer_value(e);
    }
    return KILN_OK;
}

static kiln_status set_list(kiln__jattr *r, const char *path, kiln_attrs *a, const char *key,
                            kiln_attr_type t, json_t *arr)
{
    uint32_t n = (uint32_t)json_array_size(arr);
    kiln_status st = KILN_OK;
    switch (t) {
    case KILN_ATTR_LIST_INT:
        if ((st = kiln__json_int_list(r, path, arr, &n)) == KILN_OK)
            st = kiln_attrs_set_list_int(a, key, r->ibuf, n);
        break;
    case KILN_ATTR_LIST_FLOAT:
        if (!KILN_JSON_SCRATCH(r, fbuf, fcap, n + 1))
            return nomem(r);
        for (uint32_t i = 0; i < n; i++)
            if (!get_float(json_array_get(arr, i), &r->fbuf[i]))
                return rerr(r, KILN_ERR_INVALID, path, "element %u is not a number", i);
        st = kiln_attrs_set_list_float(a, key, r->fbuf, n);
        break;
    case KILN_ATTR_LIST_BOOL:
        if (!KILN_JSON_SCRATCH(r, bbuf, bcap, n + 1))
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
        if (!KILN_JSON_SCRATCH(r, sbuf, scap, n + 1))
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
static bool b64_decode(kiln__jattr *r, const char *s, size_t len, size_t *out_len)
{
    if (len % 4)
        return false;
    if (!KILN_JSON_SCRATCH(r, bbuf, bcap, (uint32_t)(len / 4 * 3 + 1)))
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

static kiln_status set_tensor(kiln__jattr *r, const char *path, kiln_attrs *a, const char *key,
                              json_t *v)
{
    if (!json_is_object(v))
        return rerr(r, KILN_ERR_INVALID, path, "tensor value must be an object");
    static const char *const keys[] = {"dtype", "shape", "data", "data_b64"};
    json_t *vals[4];
    char p[KILN_JSON_PATH_MAX];
    const char *bad = kiln__json_pick(v, keys, vals, 4);
    if (bad) {
        kiln__json_path_key(p, P(r, path), bad);
        return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\"", bad);
    }
    json_t *jdt = vals[0], *jshape = vals[1], *jdata = vals[2], *jb64 = vals[3];
    kiln_dtype dt = KILN_DT_FLOAT32;
    if (jdt && (!json_is_string(jdt) || !kiln_dtype_parse(json_string_value(jdt), &dt)))
        return rerr(r, KILN_ERR_INVALID, path, "bad tensor dtype %s",
                    json_is_string(jdt) ? json_string_value(jdt) : "(not a string)");
    if (!json_is_array(jshape))
        return rerr(r, KILN_ERR_INVALID, path, "tensor needs a \"shape\" list");
    uint32_t rank;
    kiln_status st = kiln__json_int_list(r, path, jshape, &rank);
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
        if (!KILN_JSON_SCRATCH(r, bbuf, bcap, (uint32_t)nbytes + 1))
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

static kiln_status set_explicit(kiln__jattr *r, const char *path, kiln_attrs *a, const char *key,
                                json_t *obj)
{
    static const char *const keys[] = {"type", "value"};
    json_t *vals[2];
    char p[KILN_JSON_PATH_MAX];
    const char *unknown = kiln__json_pick(obj, keys, vals, 2);
    if (unknown) {
        kiln__json_path_key(p, P(r, path), unknown);
        return rerr(r, KILN_ERR_INVALID, p, "unknown key \"%s\" (an object attribute value "
                    "is {\"type\": T, \"value\": V})", unknown);
    }
    json_t *jt = vals[0], *v = vals[1];
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

static kiln_status set_attr(kiln__jattr *r, const char *path, kiln_attrs *a, const char *key, json_t *v)
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
        /* Infer the list type from the elements (docs/graph_format.md table). */
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

kiln_status kiln__json_parse_attrs(kiln__jattr *r, const char *path, json_t *obj, kiln_attrs *a)
{
    if (!json_is_object(obj))
        return rerr(r, KILN_ERR_INVALID, path, "attrs must be an object");
    if (!a)
        return nomem(r);
    const char *k;
    json_t *v;
    r->pbase = path;
    json_object_foreach(obj, k, v) {
        r->pkey = k;
        if (!k[0])
            return rerr(r, KILN_ERR_INVALID, NULL, "empty attribute name");
        kiln_status st = set_attr(r, NULL, a, k, v);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

const char *kiln__json_pick(json_t *obj, const char *const *keys, json_t **vals, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        vals[i] = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        uint32_t i = 0;
        while (i < n && (k[0] != keys[i][0] || strcmp(k, keys[i]) != 0))
            i++;
        if (i < n)
            vals[i] = v;
        else if (!kiln__json_is_xkey(k))
            return k;
    }
    return NULL;
}
