/*
 * attr_key.c - hashing and comparing attribute sets (sorted by key, so two
 * sets are equal when they match position by position) and descriptors.
 * Floats compare by bit pattern: two NaN attributes with the same bits are
 * equal, 0.0 and -0.0 are not (they may fold differently).
 */
#include "attr_key.h"

#include <string.h>

uint64_t ak_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    size_t i = 0;
    /* eight bytes a step (a multiply and a shift per word): byte-wise FNV-1a
     * spent ~25 ms on the 10 MB of weights of one OCR model */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h ^= w;
        h *= 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ull;
    }
    return h;
}

/*
 * Tensor bytes: all of a small tensor; of a large one its size, its first and
 * last KiB and 512 words spread over the rest.  The hash only picks the
 * candidates ak_attrs_equal compares in full, so a sample is enough, and
 * hashing every byte of every weight was most of ConstantFuseSamePass on a
 * model of 10 MB of weights.
 */
static uint64_t tensor_hash(uint64_t h, const void *p, size_t n)
{
    enum { EDGE = 1024, PROBES = 512, SMALL = 2 * EDGE + PROBES * 8 };
    if (n <= SMALL)
        return ak_bytes(h, p, n);
    const unsigned char *c = p;
    h = ak_bytes(h, &n, sizeof(n));
    h = ak_bytes(h, c, EDGE);
    h = ak_bytes(h, c + n - EDGE, EDGE);
    size_t span = n - 2 * EDGE - 8, step = span / PROBES;
    for (size_t k = 0; k < PROBES; k++)
        h = ak_bytes(h, c + EDGE + k * step, 8);
    return h;
}

static uint64_t str_hash(uint64_t h, const char *s)
{
    return s ? ak_bytes(h, s, strlen(s) + 1) : ak_bytes(h, "", 1);
}

static uint64_t value_hash(uint64_t h, const kiln_attrs *a, const char *key, kiln_attr_type t)
{
    switch (t) {
    case KILN_ATTR_BOOL: {
        bool v = false;
        kiln_attrs_get_bool(a, key, &v);
        return ak_bytes(h, &v, sizeof(v));
    }
    case KILN_ATTR_INT: {
        int64_t v = 0;
        kiln_attrs_get_int(a, key, &v);
        return ak_bytes(h, &v, sizeof(v));
    }
    case KILN_ATTR_FLOAT: {
        double v = 0;
        kiln_attrs_get_float(a, key, &v);
        return ak_bytes(h, &v, sizeof(v));
    }
    case KILN_ATTR_STRING: {
        const char *v = NULL;
        kiln_attrs_get_string(a, key, &v);
        return str_hash(h, v);
    }
    case KILN_ATTR_DTYPE: {
        kiln_dtype v = 0;
        kiln_attrs_get_dtype(a, key, &v);
        return ak_bytes(h, &v, sizeof(v));
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_int(a, key, &v, &n);
        h = ak_bytes(h, &n, sizeof(n));
        return n ? ak_bytes(h, v, n * sizeof(*v)) : h;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_float(a, key, &v, &n);
        h = ak_bytes(h, &n, sizeof(n));
        return n ? ak_bytes(h, v, n * sizeof(*v)) : h;
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_bool(a, key, &v, &n);
        h = ak_bytes(h, &n, sizeof(n));
        return n ? ak_bytes(h, v, n) : h;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_string(a, key, &v, &n);
        h = ak_bytes(h, &n, sizeof(n));
        for (uint32_t i = 0; i < n; i++)
            h = str_hash(h, v[i]);
        return h;
    }
    case KILN_ATTR_LIST_LIST_INT: {
        uint32_t n = 0;
        kiln_attrs_get_list_list_int(a, key, &n);
        h = ak_bytes(h, &n, sizeof(n));
        for (uint32_t i = 0; i < n; i++) {
            const int64_t *v = NULL;
            uint32_t m = 0;
            kiln_attrs_get_list_list_int_at(a, key, i, &v, &m);
            h = ak_bytes(h, &m, sizeof(m));
            if (m)
                h = ak_bytes(h, v, m * sizeof(*v));
        }
        return h;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value v;
        if (!kiln_attrs_get_tensor(a, key, &v))
            return h;
        h = ak_bytes(h, &v.dtype, sizeof(v.dtype));
        h = ak_bytes(h, &v.rank, sizeof(v.rank));
        if (v.rank)
            h = ak_bytes(h, v.dims, v.rank * sizeof(*v.dims));
        return v.nbytes ? tensor_hash(h, v.data, v.nbytes) : h;
    }
    default:
        return h;
    }
}

uint64_t ak_attrs_hash(uint64_t h, const kiln_attrs *a)
{
    uint32_t n = kiln_attrs_count(a);
    h = ak_bytes(h, &n, sizeof(n));
    for (uint32_t i = 0; i < n; i++) {
        kiln_attr_type t = KILN_ATTR_NONE;
        const char *k = kiln_attrs_key_at(a, i, &t);
        h = str_hash(h, k);
        h = ak_bytes(h, &t, sizeof(t));
        h = value_hash(h, a, k, t);
    }
    return h;
}

static bool list_eq(const void *a, uint32_t na, const void *b, uint32_t nb, size_t es)
{
    return na == nb && (na == 0 || memcmp(a, b, na * es) == 0);
}

static bool value_equal(const kiln_attrs *a, const kiln_attrs *b, const char *key, kiln_attr_type t)
{
    switch (t) {
    case KILN_ATTR_BOOL: {
        bool x = false, y = false;
        kiln_attrs_get_bool(a, key, &x);
        kiln_attrs_get_bool(b, key, &y);
        return x == y;
    }
    case KILN_ATTR_INT: {
        int64_t x = 0, y = 0;
        kiln_attrs_get_int(a, key, &x);
        kiln_attrs_get_int(b, key, &y);
        return x == y;
    }
    case KILN_ATTR_FLOAT: {
        double x = 0, y = 0;
        kiln_attrs_get_float(a, key, &x);
        kiln_attrs_get_float(b, key, &y);
        return memcmp(&x, &y, sizeof(x)) == 0;
    }
    case KILN_ATTR_STRING: {
        const char *x = NULL, *y = NULL;
        kiln_attrs_get_string(a, key, &x);
        kiln_attrs_get_string(b, key, &y);
        return strcmp(x ? x : "", y ? y : "") == 0;
    }
    case KILN_ATTR_DTYPE: {
        kiln_dtype x = 0, y = 0;
        kiln_attrs_get_dtype(a, key, &x);
        kiln_attrs_get_dtype(b, key, &y);
        return x == y;
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *x = NULL, *y = NULL;
        uint32_t nx = 0, ny = 0;
        kiln_attrs_get_list_int(a, key, &x, &nx);
        kiln_attrs_get_list_int(b, key, &y, &ny);
        return list_eq(x, nx, y, ny, sizeof(*x));
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *x = NULL, *y = NULL;
        uint32_t nx = 0, ny = 0;
        kiln_attrs_get_list_float(a, key, &x, &nx);
        kiln_attrs_get_list_float(b, key, &y, &ny);
        return list_eq(x, nx, y, ny, sizeof(*x));
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *x = NULL, *y = NULL;
        uint32_t nx = 0, ny = 0;
        kiln_attrs_get_list_bool(a, key, &x, &nx);
        kiln_attrs_get_list_bool(b, key, &y, &ny);
        return list_eq(x, nx, y, ny, 1);
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *x = NULL, *const *y = NULL;
        uint32_t nx = 0, ny = 0;
        kiln_attrs_get_list_string(a, key, &x, &nx);
        kiln_attrs_get_list_string(b, key, &y, &ny);
        if (nx != ny)
            return false;
        for (uint32_t i = 0; i < nx; i++)
            if (strcmp(x[i] ? x[i] : "", y[i] ? y[i] : "") != 0)
                return false;
        return true;
    }
    case KILN_ATTR_LIST_LIST_INT: {
        uint32_t nx = 0, ny = 0;
        kiln_attrs_get_list_list_int(a, key, &nx);
        kiln_attrs_get_list_list_int(b, key, &ny);
        if (nx != ny)
            return false;
        for (uint32_t i = 0; i < nx; i++) {
            const int64_t *x = NULL, *y = NULL;
            uint32_t mx = 0, my = 0;
            kiln_attrs_get_list_list_int_at(a, key, i, &x, &mx);
            kiln_attrs_get_list_list_int_at(b, key, i, &y, &my);
            if (!list_eq(x, mx, y, my, sizeof(*x)))
                return false;
        }
        return true;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value x, y;
        bool hx = kiln_attrs_get_tensor(a, key, &x), hy = kiln_attrs_get_tensor(b, key, &y);
        if (!hx || !hy)
            return hx == hy;
        return x.dtype == y.dtype && list_eq(x.dims, x.rank, y.dims, y.rank, sizeof(*x.dims)) &&
               x.nbytes == y.nbytes && (x.nbytes == 0 || memcmp(x.data, y.data, x.nbytes) == 0);
    }
    default:
        return true;
    }
}

bool ak_attrs_equal(const kiln_attrs *a, const kiln_attrs *b)
{
    uint32_t n = kiln_attrs_count(a);
    if (n != kiln_attrs_count(b))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        kiln_attr_type ta = KILN_ATTR_NONE, tb = KILN_ATTR_NONE;
        const char *ka = kiln_attrs_key_at(a, i, &ta), *kb = kiln_attrs_key_at(b, i, &tb);
        if (ta != tb || strcmp(ka, kb) != 0 || !value_equal(a, b, ka, ta))
            return false;
    }
    return true;
}

uint64_t ak_desc_hash(uint64_t h, const kiln_tensor_desc *d)
{
    kiln_dtype dt = kiln_desc_dtype(d);
    int32_t r = kiln_desc_rank(d);
    h = ak_bytes(h, &dt, sizeof(dt));
    h = ak_bytes(h, &r, sizeof(r));
    return r > 0 ? ak_bytes(h, kiln_desc_dims(d), (size_t)r * sizeof(int64_t)) : h;
}

bool ak_desc_equal(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    int32_t r = kiln_desc_rank(a);
    return kiln_desc_dtype(a) == kiln_desc_dtype(b) && r == kiln_desc_rank(b) &&
           (r <= 0 ||
            memcmp(kiln_desc_dims(a), kiln_desc_dims(b), (size_t)r * sizeof(int64_t)) == 0);
}
