/*
 * plugin.c - libkiln_onnx.so: registers the "onnx" frontend (.onnx files).
 *
 * Import: read the file, measure its message nesting (protobuf-c's unpacker
 * recurses without a limit), decode it with the protobuf-c code generated at
 * build time from Debian's onnx.proto, refuse any message carrying fields that
 * onnx.proto does not define (a newer ONNX or a corrupt file), then build the
 * graph (onnx_import.c).  Export: build a ModelProto (onnx_export.c), pack it
 * and write it to the temporary path the host hands us.
 * Every error names the file; import errors also name the node.
 */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* One base-128 varint; false when truncated or longer than 10 bytes. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        if (shift < 64)
            r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/*
 * False when sub-messages are nested deeper than MAX_NESTING levels in the wire
 * data of a message of type @p d.  protobuf-c's unpacker recurses once per level
 * without a limit: a file of a few hundred KB of nested TypeProtos or graph
 * attributes overflows the stack, so the nesting is measured before unpacking.
 * Malformed framing stops the walk with true: the unpacker meets the same bytes
 * in the same order (fields in file order, depth first) and refuses them before
 * it can go any deeper than this walk went.
 */
static bool nesting_ok(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *d,
                       unsigned depth)
{
    if (depth > MAX_NESTING)
        return false;
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t key, n;
        if (!read_varint(&p, end, &key))
            return true;
        switch (key & 7) {
        case 0:
            if (!read_varint(&p, end, &n))
                return true;
            break;
        case 1:
            if (end - p < 8)
                return true;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return true;
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return true;
            uint64_t tag = key >> 3;
            const ProtobufCFieldDescriptor *f =
                tag && tag <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)tag)
                                         : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !nesting_ok(p, (size_t)n, f->descriptor, depth + 1))
                return false;
            p += n;
            break;
        }
        default: /* groups and invalid wire types: protobuf-c refuses them */
            return true;
        }
    }
    return true;
}

/*
 * The values of pointer-typed (string or message) field @p f of @p m: returns
 * how many there are and points *items at them.  A singular value is copied
 * into *single (it may be NULL); an unset oneof member has no value.
 */
static size_t field_pointers(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                             void **single, void *const **items)
{
    const char *base = (const char *)m;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t which;
        memcpy(&which, base + f->quantifier_offset, sizeof(which));
        if (which != f->id)
            return 0;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t count;
        memcpy(&count, base + f->quantifier_offset, sizeof(count));
        memcpy(items, base + f->offset, sizeof(*items));
        return count;
    }
    memcpy(single, base + f->offset, sizeof(*single));
    *items = single;
    return 1;
}

/* Fail when a string field other than doc_string (never read) is not UTF-8:
 * every string kiln keeps (names, op types, domains, ...) must be. */
static kiln_status check_strings(const ProtobufCMessage *m, const char *path, kiln_error *err)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_STRING || strcmp(f->name, "doc_string") == 0)
            continue;
        void *single;
        void *const *items;
        size_t count = field_pointers(m, f, &single, &items);
        for (size_t k = 0; k < count; k++)
            if (items[k] && !ox_utf8_valid(items[k], strlen(items[k])))
                return kiln_errorf(err, KILN_ERR_PARSE,
                                   "%s.%s at %s is not valid UTF-8 (a corrupt file)", d->name,
                                   f->name, path[0] ? path : "model");
    }
    return KILN_OK;
}

/*
 * Walk every sub-message and fail on the first unknown field or non-UTF-8
 * string.  @p path is the field path so far ("graph.node[3].attribute[0]"),
 * in a caller buffer.
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
    kiln_status sst = check_strings(m, path, err);
    if (sst != KILN_OK)
        return sst;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        void *single;
        void *const *items;
        size_t count = field_pointers(m, f, &single, &items);
        for (size_t k = 0; k < count; k++) {
            if (!items[k]) /* an absent singular sub-message */
                continue;
            int w = f->label == PROTOBUF_C_LABEL_REPEATED
                        ? snprintf(path + len, cap - len, "%s%s[%zu]", len ? "." : "", f->name, k)
                        : snprintf(path + len, cap - len, "%s%s", len ? "." : "", f->name);
            size_t nlen = w < 0 || (size_t)w >= cap - len ? len : len + (size_t)w;
            kiln_status st =
                check_unknown((const ProtobufCMessage *)items[k], path, nlen, cap, depth + 1, err);
            path[len] = 0;
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* ---- the allocator of decoded messages (onnx_internal.h) ------------------ */

/* Every allocation starts with a 16-byte header (malloc's alignment kept)
 * whose first word says which kind it is. */
enum { PB_HDR = 16 };
static const uint64_t PB_SMALL = 0x6b696c6e2d706231ull, PB_BLOCK = 0x6b696c6e2d626c6bull;

static void *pb_alloc(void *ud, size_t size)
{
    (void)ud;
    if (size > SIZE_MAX - PB_HDR)
        return NULL;
    bool big = size >= OX_BLOCK_MIN;
    unsigned char *p = big ? kiln_tensor_block_new(size + PB_HDR) : malloc(size + PB_HDR);
    if (!p)
        return NULL;
    memcpy(p, big ? &PB_BLOCK : &PB_SMALL, sizeof(uint64_t));
    return p + PB_HDR;
}

static void pb_free(void *ud, void *ptr)
{
    (void)ud;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - PB_HDR;
    uint64_t tag;
    memcpy(&tag, p, sizeof(tag));
    if (tag == PB_BLOCK)
        kiln_tensor_block_release(p);
    else
        free(p);
}

ProtobufCAllocator ox_pb_allocator = {pb_alloc, pb_free, NULL};

void *ox_pb_block(const void *data)
{
    unsigned char *p = (unsigned char *)(uintptr_t)data - PB_HDR;
    uint64_t tag;
    memcpy(&tag, p, sizeof(tag));
    return tag == PB_BLOCK ? p : NULL;
}

/*
 * A regular file is mapped read-only instead of read: protobuf decoding reads
 * the page cache directly, so a model's weights are not copied (and faulted
 * in) once more before the decoder copies them.  *mapped says which.
 */
static kiln_status map_file(const char *path, uint8_t **buf, size_t *len, bool *mapped,
                            kiln_error *err)
{
    *mapped = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        if ((uint64_t)sb.st_size > MAX_MODEL_BYTES) {
            close(fd);
            return kiln_errorf(err, KILN_ERR_LIMIT, "file larger than 2 GiB (protobuf limit)");
        }
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        close(fd);
        if (p != MAP_FAILED) {
            *buf = p;
            *len = (size_t)sb.st_size;
            *mapped = true;
            return KILN_OK;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    return read_file(path, buf, len, err); /* pipes, empty files, a failed map */
}

static kiln_status onnx_import_file(kiln_graph *g, const char *path, kiln_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    bool mapped = false;
    kiln_status st = map_file(path, &buf, &len, &mapped, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "%s", path);
    Onnx__ModelProto *m = NULL;
    if (len == 0) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "empty file, not an ONNX model");
    } else if (!nesting_ok(buf, len, &onnx__model_proto__descriptor, 0)) {
        st = kiln_errorf(err, KILN_ERR_LIMIT,
                         "not an ONNX model kiln accepts: messages nested deeper than %d levels "
                         "(corrupt file?)",
                         MAX_NESTING);
    } else if (!(m = onnx__model_proto__unpack(&ox_pb_allocator, len, buf))) {
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
            st = ox_import_model(g, m, true, err);
        onnx__model_proto__free_unpacked(m, &ox_pb_allocator);
    }
    if (mapped)
        munmap(buf, len);
    else
        free(buf);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", path);
    return st;
}

/*
 * Export @p g to @p path.  @p path is the host's temporary file, renamed into
 * place afterwards, so only the errors about that file itself name it: a graph
 * ONNX cannot express is reported by node, and the host names the output.
 */
static kiln_status onnx_export_file(kiln_graph *g, const char *path, kiln_error *err)
{
    ox_arena arena = {0};
    Onnx__ModelProto *m = NULL;
    kiln_status st = ox_export_model(g, &arena, &m, err);
    uint8_t *buf = NULL;
    bool io = false;
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
            io = true;
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
    if (st != KILN_OK && io)
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

KILN_PLUGIN_DEFINE("kiln.onnx", "0.1.0", "Apache-2.0", "ONNX importer and exporter (frontend onnx)",
                   init, NULL)
