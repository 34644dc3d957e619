/*
 * onnx_attr.c - value-level conversions between ONNX and kiln: data types,
 * TensorProto <-> tensor attribute values (raw_data and every typed repeated
 * field; external data and segments are refused with a clear error), node
 * attributes, and TypeProto <-> tensor descriptors (symbolic dims become -1
 * plus the desc attribute _onnx_dim_params, docs/onnx.md).
 *
 * Tensor data is little-endian in both ONNX raw_data and kiln, so raw_data is
 * used in place without a copy (kiln_attrs_set_tensor copies it once).
 */
#include "onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---------------------------------------------------------------- */

typedef struct dt_pair {
    int32_t onnx;
    kiln_dtype kiln;
    const char *name;
} dt_pair;

static const dt_pair dtypes[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, KILN_DT_FLOAT32, "FLOAT"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, KILN_DT_UINT8, "UINT8"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, KILN_DT_INT8, "INT8"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, KILN_DT_UINT16, "UINT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, KILN_DT_INT16, "INT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, KILN_DT_INT32, "INT32"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, KILN_DT_INT64, "INT64"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__STRING, KILN_DT_STRING, "STRING"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, KILN_DT_BOOL, "BOOL"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, KILN_DT_FLOAT16, "FLOAT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, KILN_DT_FLOAT64, "DOUBLE"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, KILN_DT_UINT32, "UINT32"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, KILN_DT_UINT64, "UINT64"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, KILN_DT_BFLOAT16, "BFLOAT16"},
};

bool ox_dtype_from_onnx(int32_t onnx, kiln_dtype *out)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].onnx == onnx) {
            *out = dtypes[i].kiln;
            return true;
        }
    return false;
}

int32_t ox_dtype_to_onnx(kiln_dtype dt)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].kiln == dt)
            return dtypes[i].onnx;
    return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
}

const char *ox_onnx_dtype_name(int32_t onnx)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].onnx == onnx)
            return dtypes[i].name;
    switch (onnx) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64: return "COMPLEX64";
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128: return "COMPLEX128";
    case ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED: return "UNDEFINED";
    default: return "unknown";
    }
}

/* ---- tensors ----------------------------------------------------------------- */

/* Narrow int32_data (the storage of every type of 16 bits or fewer) to @p esize. */
static void narrow_int32(const int32_t *src, size_t n, size_t esize, unsigned char *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)src[i];
        if (esize == 1)
            dst[i] = (unsigned char)v;
        else {
            uint16_t h = (uint16_t)v;
            memcpy(dst + 2 * i, &h, 2);
        }
    }
}

kiln_status ox_tensor_decode(const Onnx__TensorProto *t, const char *what,
                             kiln_tensor_value *out, void **owned, kiln_error *err)
{
    *owned = NULL;
    memset(out, 0, sizeof(*out));
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = "?";
        for (size_t i = 0; i < t->n_external_data; i++)
            if (strcmp(OX_STR(t->external_data[i]->key), "location") == 0)
                loc = OX_STR(t->external_data[i]->value);
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: tensor data is stored externally (location '%s'); kiln reads "
                           "only self-contained .onnx files",
                           what, loc);
    }
    if (t->segment)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: segmented tensors are not supported",
                           what);
    int32_t odt = t->has_data_type ? t->data_type : 0;
    kiln_dtype dt;
    if (!ox_dtype_from_onnx(odt, &dt))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: tensor data type %s (%d) is not supported",
                           what, ox_onnx_dtype_name(odt), (int)odt);
    if (dt == KILN_DT_STRING)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: string tensors are not supported", what);
    if (t->n_dims > 64)
        return kiln_errorf(err, KILN_ERR_LIMIT, "%s: rank %zu exceeds 64", what, t->n_dims);
    size_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: negative dim %lld", what,
                               (long long)t->dims[i]);
        if (t->dims[i] != 0 && numel > SIZE_MAX / 16 / (uint64_t)t->dims[i])
            return kiln_errorf(err, KILN_ERR_LIMIT, "%s: element count overflows", what);
        numel *= (size_t)t->dims[i];
    }
    size_t esize = kiln_dtype_size(dt);
    size_t nbytes = numel * esize;
    out->dtype = dt;
    out->rank = (uint32_t)t->n_dims;
    out->dims = t->dims;
    out->nbytes = nbytes;
    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "%s: raw_data holds %zu bytes but %zu %s elements need %zu", what,
                               t->raw_data.len, numel, kiln_dtype_name(dt), nbytes);
        out->data = t->raw_data.data;
        return KILN_OK;
    }
    size_t have = 0;
    const void *src = NULL;
    switch (odt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: have = t->n_float_data; src = t->float_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: have = t->n_int64_data; src = t->int64_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: have = t->n_double_data; src = t->double_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: have = t->n_uint64_data; src = t->uint64_data; break;
    default: have = t->n_int32_data; src = t->int32_data; break;
    }
    if (have != numel)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: %zu %s elements expected, the file holds %zu",
                           what, numel, kiln_dtype_name(dt), have);
    if (numel == 0)
        return KILN_OK;
    unsigned char *buf = malloc(nbytes);
    if (!buf)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    switch (odt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        memcpy(buf, src, nbytes);
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        for (size_t i = 0; i < numel; i++) {
            uint32_t v = (uint32_t)t->uint64_data[i];
            memcpy(buf + 4 * i, &v, 4);
        }
        break;
    default:
        narrow_int32(t->int32_data, numel, esize, buf);
        break;
    }
    *owned = buf;
    out->data = buf;
    return KILN_OK;
}

kiln_status ox_tensor_encode(ox_arena *a, const kiln_tensor_value *v, Onnx__TensorProto *t,
                             kiln_error *err)
{
    int32_t odt = ox_dtype_to_onnx(v->dtype);
    if (odt == ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED || v->dtype == KILN_DT_STRING)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s tensors cannot be written to ONNX",
                           kiln_dtype_name(v->dtype));
    t->has_data_type = 1;
    t->data_type = odt;
    t->n_dims = v->rank;
    if (v->rank) {
        t->dims = ox_arena_alloc(a, v->rank * sizeof(int64_t));
        if (!t->dims)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(t->dims, v->dims, v->rank * sizeof(int64_t));
    }
    t->has_raw_data = 1;
    t->raw_data.len = v->nbytes;
    t->raw_data.data = (uint8_t *)(uintptr_t)v->data; /* only read by the packer */
    return KILN_OK;
}

/* ---- node attributes ------------------------------------------------------- */

Onnx__AttributeProto__AttributeType ox_attr_type(const Onnx__AttributeProto *ap)
{
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return ap->type;
    /* IR version 1 files may leave the type out: infer it from the value. */
    if (ap->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (ap->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (ap->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (ap->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (ap->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (ap->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (ap->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (ap->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

/* A NUL-terminated copy of an ONNX bytes value; NULL (error set) on NUL/OOM. */
static char *bytes_to_cstr(const ProtobufCBinaryData *b, const char *node, const char *attr,
                           kiln_error *err)
{
    if (b->len && memchr(b->data, 0, b->len)) {
        kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                    "node '%s': attribute '%s': strings with NUL bytes are not supported", node,
                    attr);
        return NULL;
    }
    if (b->len && !ox_utf8_valid((const char *)b->data, b->len)) {
        kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                    "node '%s': attribute '%s': string is not valid UTF-8 (kiln strings are "
                    "UTF-8)",
                    node, attr);
        return NULL;
    }
    char *s = malloc(b->len + 1);
    if (!s) {
        kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (b->len)
        memcpy(s, b->data, b->len);
    s[b->len] = 0;
    return s;
}

static kiln_status set_strings(kiln_attrs *attrs, const Onnx__AttributeProto *ap,
                               const char *node, kiln_error *err)
{
    char **v = calloc(ap->n_strings ? ap->n_strings : 1, sizeof(*v));
    if (!v)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    size_t i = 0;
    for (; i < ap->n_strings; i++)
        if (!(v[i] = bytes_to_cstr(&ap->strings[i], node, ap->name, err))) {
            st = kiln_error_code(err);
            break;
        }
    if (st == KILN_OK)
        st = kiln_attrs_set_list_string(attrs, ap->name, (const char *const *)v,
                                        (uint32_t)ap->n_strings);
    for (size_t k = 0; k < i; k++)
        free(v[k]);
    free(v);
    return st;
}

kiln_status ox_attr_import(kiln_attrs *attrs, const Onnx__AttributeProto *ap, const char *node,
                           kiln_error *err)
{
    const char *name = OX_STR(ap->name);
    if (!name[0])
        return kiln_errorf(err, KILN_ERR_PARSE, "node '%s': attribute without a name", node);
    if (ap->ref_attr_name && ap->ref_attr_name[0])
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s': attribute '%s' refers to function attribute '%s' "
                           "(functions are not supported)",
                           node, name, ap->ref_attr_name);
    kiln_status st = KILN_OK;
    switch (ox_attr_type(ap)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        st = kiln_attrs_set_float(attrs, name, (double)ap->f);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        st = kiln_attrs_set_int(attrs, name, ap->i);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        char *s = bytes_to_cstr(&ap->s, node, name, err);
        if (!s)
            return kiln_error_code(err);
        st = kiln_attrs_set_string(attrs, name, s);
        free(s);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t)
            return kiln_errorf(err, KILN_ERR_PARSE, "node '%s': tensor attribute '%s' has no "
                               "tensor", node, name);
        char what[512];
        snprintf(what, sizeof(what), "node '%s': attribute '%s'", node, name);
        kiln_tensor_value v;
        void *owned = NULL;
        if ((st = ox_tensor_decode(ap->t, what, &v, &owned, err)) != KILN_OK)
            return st;
        st = kiln_attrs_set_tensor(attrs, name, &v);
        free(owned);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
        double *d = malloc((ap->n_floats ? ap->n_floats : 1) * sizeof(double));
        if (!d)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < ap->n_floats; i++)
            d[i] = (double)ap->floats[i];
        st = kiln_attrs_set_list_float(attrs, name, d, (uint32_t)ap->n_floats);
        free(d);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        st = kiln_attrs_set_list_int(attrs, name, ap->ints, (uint32_t)ap->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        return set_strings(attrs, ap, node, err);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s': graph attribute '%s' is supported only on If and Loop",
                           node, name);
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s': attribute '%s' has unsupported type %d (tensors lists, "
                           "sparse tensors and type protos are not supported)",
                           node, name, (int)ox_attr_type(ap));
    }
    if (st != KILN_OK)
        return kiln_errorf(err, st, "node '%s': cannot set attribute '%s'", node, name);
    return KILN_OK;
}

/* One kiln attribute -> AttributeProto; false (error set) when not representable. */
static kiln_status attr_export(ox_arena *a, const kiln_attrs *attrs, const char *key,
                               kiln_attr_type type, const char *node, Onnx__AttributeProto *ap,
                               kiln_error *err)
{
    ap->name = (char *)(uintptr_t)key;
    ap->has_type = 1;
    switch (type) {
    case KILN_ATTR_BOOL: {
        bool b = false;
        kiln_attrs_get_bool(attrs, key, &b);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = b;
        return KILN_OK;
    }
    case KILN_ATTR_INT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        kiln_attrs_get_int(attrs, key, &ap->i);
        return KILN_OK;
    case KILN_ATTR_DTYPE: {
        kiln_dtype dt = KILN_DT_FLOAT32;
        kiln_attrs_get_dtype(attrs, key, &dt);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = ox_dtype_to_onnx(dt);
        return KILN_OK;
    }
    case KILN_ATTR_FLOAT: {
        double d = 0;
        kiln_attrs_get_float(attrs, key, &d);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        ap->has_f = 1;
        ap->f = (float)d;
        return KILN_OK;
    }
    case KILN_ATTR_STRING: {
        const char *s = "";
        kiln_attrs_get_string(attrs, key, &s);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        ap->has_s = 1;
        ap->s.len = strlen(s);
        ap->s.data = (uint8_t *)(uintptr_t)s;
        return KILN_OK;
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_int(attrs, key, &v, &n);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        ap->n_ints = n;
        ap->ints = (int64_t *)(uintptr_t)v;
        return KILN_OK;
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_bool(attrs, key, &v, &n);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        ap->n_ints = n;
        if (n && !(ap->ints = ox_arena_alloc(a, n * sizeof(int64_t))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < n; i++)
            ap->ints[i] = v[i] != 0;
        return KILN_OK;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_float(attrs, key, &v, &n);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        ap->n_floats = n;
        if (n && !(ap->floats = ox_arena_alloc(a, n * sizeof(float))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < n; i++)
            ap->floats[i] = (float)v[i];
        return KILN_OK;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *v = NULL;
        uint32_t n = 0;
        kiln_attrs_get_list_string(attrs, key, &v, &n);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        ap->n_strings = n;
        if (n && !(ap->strings = ox_arena_alloc(a, n * sizeof(ProtobufCBinaryData))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < n; i++) {
            ap->strings[i].len = strlen(v[i]);
            ap->strings[i].data = (uint8_t *)(uintptr_t)v[i];
        }
        return KILN_OK;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value v;
        kiln_attrs_get_tensor(attrs, key, &v);
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        ap->t = ox_arena_alloc(a, sizeof(*ap->t));
        if (!ap->t)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        onnx__tensor_proto__init(ap->t);
        kiln_status st = ox_tensor_encode(a, &v, ap->t, err);
        if (st != KILN_OK)
            kiln_error_push(err, "node '%s': attribute '%s'", node, key);
        return st;
    }
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s': attribute '%s' (type %d) has no ONNX equivalent", node, key,
                           (int)type);
    }
}

kiln_status ox_attrs_export(ox_arena *a, const kiln_attrs *attrs, const char *skip,
                            const char *node, Onnx__AttributeProto ***out, size_t *n,
                            kiln_error *err)
{
    uint32_t count = kiln_attrs_count(attrs);
    *out = NULL;
    *n = 0;
    if (!count)
        return KILN_OK;
    Onnx__AttributeProto **list = ox_arena_alloc(a, count * sizeof(*list));
    if (!list)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (uint32_t i = 0; i < count; i++) {
        kiln_attr_type type;
        const char *key = kiln_attrs_key_at(attrs, i, &type);
        if (key[0] == '_' || (skip && strcmp(key, skip) == 0))
            continue;
        Onnx__AttributeProto *ap = ox_arena_alloc(a, sizeof(*ap));
        if (!ap)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        onnx__attribute_proto__init(ap);
        kiln_status st = attr_export(a, attrs, key, type, node, ap, err);
        if (st != KILN_OK)
            return st;
        list[k++] = ap;
    }
    *out = list;
    *n = k;
    return KILN_OK;
}

/* ---- value types <-> descriptors -------------------------------------------- */

kiln_status ox_type_apply(kiln_graph *g, kiln_tensor_desc *d, const Onnx__TypeProto *tp,
                          const char *value, kiln_error *err)
{
    if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
        return KILN_OK;
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "value '%s': only tensor types are supported (sequence, map, optional "
                           "and sparse types are not)",
                           value);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt)
        return KILN_OK;
    if (tt->has_elem_type && tt->elem_type != 0) {
        kiln_dtype dt;
        if (!ox_dtype_from_onnx(tt->elem_type, &dt))
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "value '%s': element type %s (%d) is not supported", value,
                               ox_onnx_dtype_name(tt->elem_type), (int)tt->elem_type);
        kiln_desc_set_dtype(g, d, dt);
    }
    if (!tt->shape)
        return KILN_OK;
    size_t rank = tt->shape->n_dim;
    if (rank > 64)
        return kiln_errorf(err, KILN_ERR_LIMIT, "value '%s': rank %zu exceeds 64", value, rank);
    int64_t dims[64];
    const char *params[64];
    bool symbolic = false;
    for (size_t i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        dims[i] = -1;
        params[i] = "";
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dim->dim_value >= 0) {
            dims[i] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dim->dim_param && dim->dim_param[0]) {
            params[i] = dim->dim_param;
            symbolic = true;
        }
    }
    kiln_status st = kiln_desc_set_shape(g, d, (int32_t)rank, dims);
    if (st == KILN_OK && symbolic)
        st = kiln_attrs_set_list_string(kiln_desc_attrs_mut(g, d), OX_ATTR_DIM_PARAMS, params,
                                        (uint32_t)rank);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "value '%s': cannot set its shape", value);
    return KILN_OK;
}

bool ox_desc_informative(const kiln_tensor_desc *d)
{
    return kiln_desc_rank(d) >= 0 || kiln_desc_dtype(d) != KILN_DT_FLOAT32;
}

Onnx__TypeProto *ox_type_make(ox_arena *a, const kiln_tensor_desc *d)
{
    Onnx__TypeProto *tp = ox_arena_alloc(a, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = ox_arena_alloc(a, sizeof(*tt));
    if (!tp || !tt)
        return NULL;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = ox_dtype_to_onnx(kiln_desc_dtype(d));
    int32_t rank = kiln_desc_rank(d);
    if (rank < 0)
        return tp;
    const int64_t *dims = kiln_desc_dims(d);
    const char *const *params = NULL;
    uint32_t nparams = 0;
    kiln_attrs_get_list_string(kiln_desc_attrs(d), OX_ATTR_DIM_PARAMS, &params, &nparams);
    Onnx__TensorShapeProto *sh = ox_arena_alloc(a, sizeof(*sh));
    if (!sh)
        return NULL;
    onnx__tensor_shape_proto__init(sh);
    tt->shape = sh;
    sh->n_dim = (size_t)rank;
    if (rank && !(sh->dim = ox_arena_alloc(a, (size_t)rank * sizeof(*sh->dim))))
        return NULL;
    for (int32_t i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *dim = ox_arena_alloc(a, sizeof(*dim));
        if (!dim)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (dims[i] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = dims[i];
        } else if ((uint32_t)i < nparams && params[i][0]) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = (char *)(uintptr_t)params[i];
        }
        sh->dim[i] = dim;
    }
    return tp;
}
