/*
 * io_reuse.c - GE's model I/O reuse check (io_reuse.h).
 */
#include "io_reuse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* std::stoul on [s, e): blanks, an optional '+', then at least one digit; the
 * rest of the half is ignored.  False when there is no number or it overflows. */
static bool parse_index(const char *s, const char *e, size_t *out)
{
    char buf[64];
    size_t len = (size_t)(e - s);
    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    const char *p = buf;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE || v > SIZE_MAX)
        return false;
    *out = (size_t)v;
    return true;
}

size_t kiln_io_reuse_parse(const char *s, kiln_io_pair *out, size_t cap)
{
    size_t n = 0;
    if (!s)
        return 0;
    for (const char *seg = s; *seg;) {
        const char *bar = strchr(seg, '|');
        const char *end = bar ? bar : seg + strlen(seg);
        const char *comma = memchr(seg, ',', (size_t)(end - seg));
        size_t in, o;
        if (end > seg && comma && !memchr(seg, '-', (size_t)(end - seg)) &&
            parse_index(seg, comma, &in) && parse_index(comma + 1, end, &o)) {
            if (out && n < cap)
                out[n] = (kiln_io_pair){in, o};
            n++;
        }
        seg = bar ? bar + 1 : end;
    }
    return n;
}

kiln_status kiln_io_reuse_from_graph(kiln_graph *root, bool declared_only, kiln_io_pair **pairs,
                                     size_t *n, kiln_error *err)
{
    *pairs = NULL;
    *n = 0;
    const kiln_attrs *a = kiln_graph_attrs(root);
    const char *str = NULL;
    if (kiln_attrs_get_string(a, KILN_IO_REUSE_ATTR, &str)) {
        size_t k = kiln_io_reuse_parse(str, NULL, 0);
        if (!k)
            return KILN_OK;
        *pairs = malloc(k * sizeof(**pairs));
        if (!*pairs)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        *n = kiln_io_reuse_parse(str, *pairs, k);
        return KILN_OK;
    }
    const int64_t *v = NULL;
    uint32_t len = 0;
    if (declared_only || !kiln_attrs_get_list_int(a, KILN_IO_REUSE_ATTR, &v, &len) || !len)
        return KILN_OK;
    if (len % 2)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "graph %s: attribute %s has %u entries; it "
                           "holds pairs (output, input)",
                           kiln_graph_name(root), KILN_IO_REUSE_ATTR, len);
    *pairs = malloc(len / 2 * sizeof(**pairs));
    if (!*pairs)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < len; i += 2) {
        if (v[i] < 0 || v[i + 1] < 0) {
            free(*pairs);
            *pairs = NULL;
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "graph %s: attribute %s: pair %u "
                               "(output %lld, input %lld) has a negative index",
                               kiln_graph_name(root), KILN_IO_REUSE_ATTR, i / 2, (long long)v[i],
                               (long long)v[i + 1]);
        }
        (*pairs)[i / 2] = (kiln_io_pair){(size_t)v[i + 1], (size_t)v[i]};
    }
    *n = len / 2;
    return KILN_OK;
}

kiln_status kiln_io_reuse_check(const kiln_io_pair *pairs, size_t npairs, const void *const *inputs,
                                size_t nin, const void *const *outputs, size_t nout,
                                kiln_error *err)
{
    if (!npairs || !pairs || !inputs || !outputs || !nin || !nout)
        return KILN_OK;
    for (size_t k = 0; k < npairs; k++) {
        size_t i = pairs[k].input, o = pairs[k].output;
        if (i >= nin)
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "io reuse check: pair '%zu,%zu' of %s: input "
                               "index %zu out of range, the model has %zu inputs",
                               i, o, KILN_IO_REUSE_OPTION, i, nin);
        if (o >= nout)
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "io reuse check: pair '%zu,%zu' of %s: output "
                               "index %zu out of range, the model has %zu outputs",
                               i, o, KILN_IO_REUSE_OPTION, o, nout);
        if (inputs[i] != outputs[o])
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "io reuse check: output %zu address (%p) "
                               "must be input %zu address (%p): %s contains '%zu,%zu' (output "
                               "%zu reuses input %zu's memory)",
                               o, outputs[o], i, inputs[i], KILN_IO_REUSE_OPTION, i, o, o, i);
    }
    return KILN_OK;
}
