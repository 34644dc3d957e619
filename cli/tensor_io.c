/*
 * tensor_io.c - reading input tensors and writing output tensors for
 * `kiln run` (tensor_io.h, docs/run.md).
 *
 * .npy: the magic, the version (1.0 with a 16-bit header length, 2.0/3.0 with
 * a 32-bit one), then the header dict is scanned for 'descr', 'fortran_order'
 * and 'shape'; the data must be exactly numel x itemsize bytes.  Raw: the
 * sidecar FILE.json (jansson) gives `dims` and `dtype` (GRAPH_FORMAT names);
 * `byte_length` and `endianness` are checked when present, and the file must
 * hold exactly numel x dtype size bytes.  Outputs are written through
 * kiln_output_write, so a reader never sees half a file.
 */
#include "tensor_io.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#define MAX_RANK 32

void kiln_cli_dims_str(uint32_t rank, const int64_t *dims, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

void kiln_cli_tensor_free(kiln_tensor *t)
{
    if (!t)
        return;
    kiln_free((void *)(uintptr_t)t->dims);
    kiln_free(t->data);
    memset(t, 0, sizeof(*t));
}

/* Fill @p out from dims/dtype and @p len bytes at @p data (copied). */
static kiln_status make_tensor(const char *path, kiln_dtype dt, uint32_t rank, const int64_t *dims,
                               const void *data, size_t len, kiln_tensor *out, kiln_error *err)
{
    uint64_t numel = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] && numel > (UINT64_MAX >> 8) / (uint64_t)dims[i]))
            return kiln_errorf(err, KILN_ERR_INVALID, "%s: bad dim %lld", path, (long long)dims[i]);
        numel *= (uint64_t)dims[i];
    }
    size_t esz = kiln_dtype_size(dt);
    if (esz == 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: dtype %s is not supported", path,
                           kiln_dtype_name(dt));
    if (numel * esz != len) {
        char shape[256];
        kiln_cli_dims_str(rank, dims, shape, sizeof(shape));
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: holds %zu bytes of data, but %s %s needs %llu", path, len,
                           kiln_dtype_name(dt), shape, (unsigned long long)(numel * esz));
    }
    int64_t *d = kiln_alloc(sizeof(int64_t) * (rank ? rank : 1));
    void *buf = kiln_alloc(len ? len : 1);
    if (!d || !buf) {
        kiln_free(d);
        kiln_free(buf);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory reading %s", path);
    }
    if (rank)
        memcpy(d, dims, sizeof(int64_t) * rank);
    if (len)
        memcpy(buf, data, len);
    out->dtype = dt;
    out->rank = rank;
    out->dims = d;
    out->data = buf;
    out->nbytes = len;
    return KILN_OK;
}

/* numpy descr -> dtype; only little-endian or byte-sized types. */
static bool npy_dtype(const char *descr, kiln_dtype *dt)
{
    static const struct {
        const char *descr;
        kiln_dtype dt;
    } map[] = {{"<f4", KILN_DT_FLOAT32}, {"<f8", KILN_DT_FLOAT64}, {"<f2", KILN_DT_FLOAT16},
               {"<i4", KILN_DT_INT32},   {"<i8", KILN_DT_INT64},   {"<i2", KILN_DT_INT16},
               {"|i1", KILN_DT_INT8},    {"|u1", KILN_DT_UINT8},   {"<u2", KILN_DT_UINT16},
               {"<u4", KILN_DT_UINT32},  {"<u8", KILN_DT_UINT64},  {"|b1", KILN_DT_BOOL}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(descr, map[i].descr) == 0) {
            *dt = map[i].dt;
            return true;
        }
    return false;
}

/* Position just after the value separator of key @p key in the header dict. */
static const char *npy_key(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof(pat), "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) {
        snprintf(pat, sizeof(pat), "\"%s\"", key);
        p = strstr(hdr, pat);
    }
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static kiln_status npy_parse(const char *path, const char *buf, size_t len, kiln_tensor *out,
                             kiln_error *err)
{
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: not a .npy file (bad magic)", path);
    const unsigned char *u = (const unsigned char *)buf;
    size_t start, hlen;
    if (u[6] == 1) {
        hlen = (size_t)u[8] | (size_t)u[9] << 8;
        start = 10;
    } else if ((u[6] == 2 || u[6] == 3) && len >= 12) {
        hlen = (size_t)u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
        start = 12;
    } else {
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: unsupported .npy version %u.%u", path, u[6],
                           u[7]);
    }
    if (hlen > len - start || hlen >= 65536)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: truncated .npy header", path);
    char hdr[65536];
    memcpy(hdr, buf + start, hlen);
    hdr[hlen] = 0;
    const char *p = npy_key(hdr, "descr");
    char descr[16] = "";
    if (p && (*p == '\'' || *p == '"')) {
        const char *q = strchr(p + 1, *p);
        if (q && (size_t)(q - p - 1) < sizeof(descr)) {
            memcpy(descr, p + 1, (size_t)(q - p - 1));
            descr[q - p - 1] = 0;
        }
    }
    kiln_dtype dt;
    if (!descr[0])
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: .npy header has no readable 'descr'", path);
    if (!npy_dtype(descr, &dt))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: .npy dtype '%s' is not supported (little-endian <f4 <f8 <i4 "
                           "<i8 |b1 |u1 and friends)",
                           path, descr);
    p = npy_key(hdr, "fortran_order");
    if (!p || (strncmp(p, "False", 5) != 0 && strncmp(p, "True", 4) != 0))
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: .npy header has no 'fortran_order'", path);
    if (strncmp(p, "True", 4) == 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: Fortran-order .npy arrays are not supported (save C order)", path);
    p = npy_key(hdr, "shape");
    if (!p || *p != '(')
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: .npy header has no 'shape' tuple", path);
    int64_t dims[MAX_RANK];
    uint32_t rank = 0;
    for (p++;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || rank == MAX_RANK)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: bad .npy shape", path);
        dims[rank++] = v;
        p = end;
        while (*p == 'L' || *p == ' ')
            p++;
        if (*p != ',' && *p != ')')
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: bad .npy shape", path);
    }
    return make_tensor(path, dt, rank, dims, buf + start + hlen, len - start - hlen, out, err);
}

/* The raw-file form: FILE plus FILE.json. */
static kiln_status raw_read(const char *path, const char *buf, size_t len, kiln_tensor *out,
                            kiln_error *err)
{
    char side[4096];
    if ((size_t)snprintf(side, sizeof(side), "%s.json", path) >= sizeof(side))
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: path too long", path);
    if (access(side, F_OK) != 0)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "%s: missing sidecar %s (a raw input needs one giving 'dims' and "
                           "'dtype'; or pass a .npy file)",
                           path, side);
    json_error_t je;
    json_t *root = json_load_file(side, 0, &je);
    if (!root)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s:%d:%d: %s", side, je.line, je.column, je.text);
    kiln_status st = KILN_OK;
    json_t *jd = json_object_get(root, "dims"), *jt = json_object_get(root, "dtype");
    json_t *jb = json_object_get(root, "byte_length"), *je2 = json_object_get(root, "endianness");
    int64_t dims[MAX_RANK];
    uint32_t rank = 0;
    kiln_dtype dt;
    if (!json_is_array(jd) || json_array_size(jd) > MAX_RANK) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: 'dims' must be an array of integers", side);
        goto done;
    }
    for (size_t i = 0; i < json_array_size(jd); i++) {
        json_t *v = json_array_get(jd, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            st = kiln_errorf(err, KILN_ERR_PARSE, "%s: 'dims'[%zu] must be an integer >= 0", side,
                             i);
            goto done;
        }
        dims[rank++] = json_integer_value(v);
    }
    if (!json_is_string(jt) || !kiln_dtype_parse(json_string_value(jt), &dt)) {
        st = kiln_errorf(err, KILN_ERR_PARSE,
                         "%s: 'dtype' must be a dtype name (float32, "
                         "int64, ...), got %s",
                         side, json_is_string(jt) ? json_string_value(jt) : "no string");
        goto done;
    }
    if (je2 && (!json_is_string(je2) || strcmp(json_string_value(je2), "little") != 0)) {
        st = kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: only little-endian data is supported",
                         side);
        goto done;
    }
    if (jb && (!json_is_integer(jb) || (size_t)json_integer_value(jb) != len)) {
        st = kiln_errorf(err, KILN_ERR_INVALID,
                         "%s: holds %zu bytes but %s says byte_length "
                         "%lld",
                         path, len, side, (long long)json_integer_value(jb));
        goto done;
    }
    st = make_tensor(path, dt, rank, dims, buf, len, out, err);
done:
    json_decref(root);
    return st;
}

kiln_status kiln_cli_tensor_read(const char *path, kiln_tensor *out, kiln_error *err)
{
    memset(out, 0, sizeof(*out));
    char *buf = NULL;
    size_t len = 0;
    kiln_status st = kiln_input_read(path, &buf, &len, err);
    if (st != KILN_OK)
        return st;
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".npy") == 0)
        st = npy_parse(path, buf, len, out, err);
    else
        st = raw_read(path, buf, len, out, err);
    kiln_free(buf);
    return st;
}

/* ---- writing ---------------------------------------------------------- */

typedef struct out_ud {
    const kiln_tensor *t;
    json_t *side;
} out_ud;

static kiln_status write_bin(FILE *f, void *ud, kiln_error *err)
{
    const kiln_tensor *t = ((out_ud *)ud)->t;
    if (t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes)
        return kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
    return KILN_OK;
}

static kiln_status write_side(FILE *f, void *ud, kiln_error *err)
{
    if (json_dumpf(((out_ud *)ud)->side, f, JSON_INDENT(1)) != 0 || fputc('\n', f) == EOF)
        return kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
    return KILN_OK;
}

static void out_paths(const char *dir, uint32_t index, char *bin, char *side, size_t size)
{
    snprintf(bin, size, "%s/output.%u.bin", dir, index);
    snprintf(side, size, "%s/output.%u.bin.json", dir, index);
}

kiln_status kiln_cli_tensor_write(const char *dir, uint32_t index, const char *name,
                                  const kiln_tensor *t, kiln_error *err)
{
    char bin[4096], side[4096], file[64];
    out_paths(dir, index, bin, side, sizeof(bin));
    snprintf(file, sizeof(file), "output.%u.bin", index);
    json_t *dims = json_array();
    for (uint32_t i = 0; dims && i < t->rank; i++)
        json_array_append_new(dims, json_integer(t->dims[i]));
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o, s:s, s:I, s:s, s:s}", "name", name, "role",
                          "output", "index", (json_int_t)index, "dtype", kiln_dtype_name(t->dtype),
                          "dims", dims, "file", file, "byte_length", (json_int_t)t->nbytes,
                          "endianness", "little", "layout", "row-major");
    if (!o)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    out_ud ud = {t, o};
    /* Both go into the caller's output set (kiln run holds one): a failure
     * here makes the caller abandon the set, so no half pair is committed. */
    kiln_status st = kiln_output_write(bin, write_bin, &ud, err);
    if (st == KILN_OK)
        st = kiln_output_write(side, write_side, &ud, err);
    json_decref(o);
    if (st != KILN_OK)
        kiln_error_push(err, "output %u", index);
    return st;
}

/* ---- .npy output ------------------------------------------------------- */

typedef struct npy_ud {
    const kiln_tensor *t;
    const char *hdr;
    size_t hlen;
} npy_ud;

static kiln_status write_npy(FILE *f, void *ud, kiln_error *err)
{
    const npy_ud *u = ud;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(u->hlen & 0xff),
                             (unsigned char)(u->hlen >> 8)};
    if (fwrite(pre, 1, sizeof(pre), f) != sizeof(pre) || fwrite(u->hdr, 1, u->hlen, f) != u->hlen ||
        (u->t->nbytes && fwrite(u->t->data, 1, u->t->nbytes, f) != u->t->nbytes))
        return kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
    return KILN_OK;
}

/* "DIR/output.<index>.npy" into @p buf. */
static void npy_path(const char *dir, uint32_t index, char *buf, size_t size)
{
    snprintf(buf, size, "%s/output.%u.npy", dir, index);
}

kiln_status kiln_cli_tensor_write_npy(const char *dir, uint32_t index, const kiln_tensor *t,
                                      kiln_error *err)
{
    static const char *const descr[KILN_DT_COUNT] = {
        [KILN_DT_FLOAT32] = "<f4", [KILN_DT_FLOAT16] = "<f2", [KILN_DT_FLOAT64] = "<f8",
        [KILN_DT_INT8] = "|i1",    [KILN_DT_INT16] = "<i2",   [KILN_DT_INT32] = "<i4",
        [KILN_DT_INT64] = "<i8",   [KILN_DT_UINT8] = "|u1",   [KILN_DT_UINT16] = "<u2",
        [KILN_DT_UINT32] = "<u4",  [KILN_DT_UINT64] = "<u8",  [KILN_DT_BOOL] = "|b1"};
    char path[4096], hdr[1024];
    npy_path(dir, index, path, sizeof(path));
    if ((unsigned)t->dtype >= KILN_DT_COUNT || !descr[t->dtype])
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "output %u: numpy has no dtype for %s (use --output-format raw)", index,
                           kiln_dtype_name(t->dtype));
    /* NPY format 1.0: the header dict, padded with spaces and ended by '\n' so
     * that the data starts at a multiple of 64 bytes. */
    size_t n = (size_t)snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, "
                                                  "'shape': (", descr[t->dtype]);
    for (uint32_t i = 0; i < t->rank && n < sizeof(hdr); i++)
        n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "%lld,%s", (long long)t->dims[i],
                              i + 1 < t->rank ? " " : "");
    if (n < sizeof(hdr) && t->rank > 1)
        n--; /* "(2, 3)" but "(4,)" */
    if (n < sizeof(hdr))
        n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "), }");
    size_t total = 10 + n + 1, pad = (64 - total % 64) % 64;
    if (n + pad + 1 >= sizeof(hdr))
        return kiln_errorf(err, KILN_ERR_LIMIT, "output %u: .npy header too long", index);
    memset(hdr + n, ' ', pad);
    hdr[n + pad] = '\n';
    npy_ud ud = {t, hdr, n + pad + 1};
    kiln_status st = kiln_output_write(path, write_npy, &ud, err);
    if (st != KILN_OK)
        kiln_error_push(err, "output %u", index);
    return st;
}

/* ---- statistics ------------------------------------------------------- */

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double elem(const kiln_tensor *t, size_t i)
{
    const unsigned char *p = (const unsigned char *)t->data + i * kiln_dtype_size(t->dtype);
    union {
        float f;
        double d;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } v;
    memcpy(&v, p, kiln_dtype_size(t->dtype));
    switch (t->dtype) {
    case KILN_DT_FLOAT32:
        return v.f;
    case KILN_DT_FLOAT64:
        return v.d;
    case KILN_DT_FLOAT16:
        return half_to_double(v.u16);
    case KILN_DT_BFLOAT16: {
        uint32_t b = (uint32_t)v.u16 << 16;
        float f;
        memcpy(&f, &b, sizeof(f));
        return f;
    }
    case KILN_DT_INT8:
        return v.i8;
    case KILN_DT_INT16:
        return v.i16;
    case KILN_DT_INT32:
        return v.i32;
    case KILN_DT_INT64:
        return (double)v.i64;
    case KILN_DT_UINT8:
    case KILN_DT_BOOL:
        return v.u8;
    case KILN_DT_UINT16:
        return v.u16;
    case KILN_DT_UINT32:
        return v.u32;
    case KILN_DT_UINT64:
        return (double)v.u64;
    default:
        return NAN;
    }
}

void kiln_cli_tensor_stats(const kiln_tensor *t, double *min, double *max, double *mean)
{
    size_t esz = kiln_dtype_size(t->dtype);
    size_t n = esz ? t->nbytes / esz : 0;
    *min = *max = *mean = NAN;
    if (!n || !t->data)
        return;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = elem(t, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
    }
    *min = lo;
    *max = hi;
    *mean = sum / (double)n;
}
