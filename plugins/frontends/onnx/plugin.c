/*
 * plugin.c - libkiln_onnx.so: registers the "onnx" frontend (.onnx files).
 *
 * Import: read the file, decode it with the protobuf-c code generated at build
 * time from Debian's onnx.proto, refuse any message carrying fields that
 * onnx.proto does not define (a newer ONNX or a corrupt file), then build the
 * graph (onnx_import.c).  Export: build a ModelProto (onnx_export.c), pack it
 * and write it to the temporary path the host hands us.
 * Every error names the file; import errors also name the node.
 */
#include "onnx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest model accepted: protobuf messages are limited to 2 GiB. */
#define MAX_MODEL_BYTES ((size_t)INT32_MAX)
/* Deepest message nesting accepted (a graph in a graph costs about 4 levels). */
#define MAX_NESTING 300

static kiln_status read_file(const char *path, uint8_t **buf, size_t *len, kiln_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open: %s", strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n, f);
        if (n < cap)
            break;
        if (cap >= MAX_MODEL_BYTES) {
            free(p);
            fclose(f);
            return kiln_errorf(err, KILN_ERR_LIMIT, "file larger than 2 GiB (protobuf limit)");
        }
        uint8_t *q = realloc(p, cap * 2);
        if (!q) {
            free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    bool failed = p && ferror(f);
    fclose(f);
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (failed) {
        free(p);
        return kiln_errorf(err, KILN_ERR_IO, "read error");
    }
    *buf = p;
    *len = n;
    return KILN_OK;
}

/*
 * Walk every sub-message and fail on the first unknown field.  @p path is the
 * field path so far ("graph.node[3].attribute[0]"), in a caller buffer.
 */
static kiln_status check_unknown(const ProtobufCMessage *m, char *path, size_t len, size_t cap,
                                 unsigned depth, kiln_error *err)
{
    if (depth > MAX_NESTING)
        return kiln_errorf(err, KILN_ERR_LIMIT, "messages nested deeper than %d levels at %s",
                           MAX_NESTING, path);
    if (m->n_unknown_fields) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[0];
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "unknown field %u (wire type %d) in %s at %s: not an ONNX model this "
                           "kiln understands (ONNX IR newer than onnx.proto 1.12, or corrupt)",
                           u->tag, (int)u->wire_type, m->descriptor->name, len ? path : "model");
    }
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;
            memcpy(&which, base + f->quantifier_offset, sizeof(which));
            if (which != f->id)
                continue;
        }
        size_t count = 1;
        const ProtobufCMessage *const *items;
        const ProtobufCMessage *single;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            memcpy(&count, base + f->quantifier_offset, sizeof(count));
            memcpy(&items, base + f->offset, sizeof(items));
        } else {
            memcpy(&single, base + f->offset, sizeof(single));
            items = &single;
            if (!single)
                continue;
        }
        for (size_t k = 0; k < count; k++) {
            int w = f->label == PROTOBUF_C_LABEL_REPEATED
                        ? snprintf(path + len, cap - len, "%s%s[%zu]", len ? "." : "", f->name, k)
                        : snprintf(path + len, cap - len, "%s%s", len ? "." : "", f->name);
            size_t nlen = w < 0 || (size_t)w >= cap - len ? len : len + (size_t)w;
            kiln_status st = check_unknown(items[k], path, nlen, cap, depth + 1, err);
            path[len] = 0;
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

static kiln_status onnx_import_file(kiln_graph *g, const char *path, kiln_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    kiln_status st = read_file(path, &buf, &len, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "%s", path);
    Onnx__ModelProto *m = NULL;
    if (len == 0) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "empty file, not an ONNX model");
    } else if (!(m = onnx__model_proto__unpack(NULL, len, buf))) {
        st = kiln_errorf(err, KILN_ERR_PARSE,
                         "not a valid ONNX model: protobuf decoding failed (truncated or "
                         "corrupt file, %zu bytes)",
                         len);
    } else {
        char fpath[1024] = "";
        st = check_unknown(&m->base, fpath, 0, sizeof(fpath), 0, err);
        if (st == KILN_OK && !m->graph)
            st = kiln_errorf(err, KILN_ERR_PARSE, "not an ONNX model: no graph");
        if (st == KILN_OK)
            st = ox_import_model(g, m, err);
        onnx__model_proto__free_unpacked(m, NULL);
    }
    free(buf);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", path);
    return st;
}

static kiln_status onnx_export_file(kiln_graph *g, const char *path, kiln_error *err)
{
    ox_arena arena = {0};
    Onnx__ModelProto *m = NULL;
    kiln_status st = ox_export_model(g, &arena, &m, err);
    uint8_t *buf = NULL;
    if (st == KILN_OK) {
        size_t size = onnx__model_proto__get_packed_size(m);
        if (size > MAX_MODEL_BYTES)
            st = kiln_errorf(err, KILN_ERR_LIMIT, "model of %zu bytes exceeds protobuf's 2 GiB",
                             size);
        else if (!(buf = malloc(size ? size : 1)))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        else {
            size_t n = onnx__model_proto__pack(m, buf);
            FILE *f = fopen(path, "wb");
            if (!f) {
                st = kiln_errorf(err, KILN_ERR_IO, "cannot create: %s", strerror(errno));
            } else {
                bool ok = fwrite(buf, 1, n, f) == n;
                ok &= fclose(f) == 0;
                if (!ok)
                    st = kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
            }
        }
    }
    free(buf);
    ox_arena_free(&arena);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", path);
    return st;
}

static const kiln_frontend_desc onnx_frontend = {
    .struct_size = sizeof(kiln_frontend_desc),
    .name = "onnx",
    .summary = "ONNX models (.onnx): import and export, protobuf-c on Debian's onnx.proto",
    .flags = 0,
    .extensions = ".onnx",
    .import_file = onnx_import_file,
    .export_file = onnx_export_file,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_frontend(r, &onnx_frontend);
}

KILN_PLUGIN_DEFINE("kiln.onnx", "0.1.0", "Apache-2.0",
                   "ONNX importer and exporter (frontend onnx)", init, NULL)
