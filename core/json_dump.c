/*
 * json_dump.c - a jansson tree written as text (see json_dump.h).
 *
 * jansson's own dumper calls back once per token and formats every number
 * through snprintf; on a graph of a million nodes, or a report of tens of
 * megabytes, that is most of the time spent writing.  This writer walks the
 * tree once into a growing buffer (flushed to a file in large blocks when one
 * is attached) and formats integers itself.  Reals keep jansson's exact
 * format ("%.*g", then ".0" when the text would read back as an integer, the
 * exponent without '+' or leading zeros) so the two writers agree byte for
 * byte; tests/test_json_dump.c compares them.
 */
#include "json_dump.h"

#include "base.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

enum { FLUSH_AT = 1 << 16 };

static bool grow(kiln_jbuf *b, size_t need)
{
    if (b->oom || b->io_fail)
        return false;
    if ((b->f || b->direct) && b->len && b->len + need > (b->block ? b->block : FLUSH_AT) &&
        !kiln__jbuf_flush(b))
        return false;
    if (b->len + need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need)
        cap *= 2;
    char *nb = kiln__realloc(b->buf, cap);
    if (!nb) {
        b->oom = true;
        return false;
    }
    b->buf = nb;
    b->cap = cap;
    return true;
}

char *kiln__jbuf_reserve(kiln_jbuf *b, size_t n)
{
    return grow(b, n) ? b->buf + b->len : NULL;
}

bool kiln__jbuf_put(kiln_jbuf *b, const char *p, size_t n)
{
    if (!grow(b, n))
        return false;
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    return true;
}

static inline bool putc1(kiln_jbuf *b, char c)
{
    if (b->len >= b->cap && !grow(b, 1))
        return false;
    b->buf[b->len++] = c;
    return true;
}

bool kiln__jbuf_flush(kiln_jbuf *b)
{
    if ((!b->f && !b->direct) || !b->len)
        return !b->io_fail;
    if (b->io_fail)
        return false;
    if (b->direct) {
        for (size_t at = 0; at < b->len;) {
            ssize_t n = write(b->fd, b->buf + at, b->len - at);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                b->io_fail = true;
                return false;
            }
            at += (size_t)n;
        }
    } else if (fwrite(b->buf, 1, b->len, b->f) != b->len) {
        b->io_fail = true;
        return false;
    }
    b->len = 0;
    return true;
}

void kiln__jbuf_free(kiln_jbuf *b)
{
    kiln__free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

/* A newline and @p n spaces. */
static bool newline(kiln_jbuf *b, int n)
{
    if (!grow(b, (size_t)n + 1))
        return false;
    char *p = b->buf + b->len;
    *p++ = '\n';
    memset(p, ' ', (size_t)n);
    b->len += (size_t)n + 1;
    return true;
}

bool kiln__jbuf_int(kiln_jbuf *b, long long v)
{
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    /* magnitude as unsigned: INT64_MIN has no positive counterpart */
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return kiln__jbuf_put(b, p, (size_t)(e - p));
}

bool kiln__jbuf_real(kiln_jbuf *b, double v, int prec)
{
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp - 3, "%.*g", prec ? prec : 17, v);
    if (n < 0 || (size_t)n >= sizeof tmp - 3)
        return false;
    size_t len = (size_t)n;
    if (!memchr(tmp, '.', len) && !memchr(tmp, 'e', len)) {
        memcpy(tmp + len, ".0", 3);
        len += 2;
    }
    char *e = memchr(tmp, 'e', len);
    if (e) {
        /* no '+' in the exponent, no leading zeros after its sign */
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - tmp));
            len -= (size_t)(end - start);
        }
    }
    return kiln__jbuf_put(b, tmp, len);
}

bool kiln__jbuf_string(kiln_jbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!putc1(b, '"'))
        return false;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (!kiln__jbuf_put(b, s + run, i - run))
            return false;
        run = i + 1;
        char esc[6] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            el = 6;
        }
        if (!kiln__jbuf_put(b, esc, el))
            return false;
    }
    return kiln__jbuf_put(b, s + run, n - run) && putc1(b, '"');
}

static bool is_container(const json_t *j)
{
    return json_is_object(j) || json_is_array(j);
}

static bool dump(kiln_jbuf *b, const json_t *j, const kiln_json_fmt *fmt, int depth)
{
    switch (json_typeof(j)) {
    case JSON_NULL: return kiln__jbuf_put(b, "null", 4);
    case JSON_TRUE: return kiln__jbuf_put(b, "true", 4);
    case JSON_FALSE: return kiln__jbuf_put(b, "false", 5);
    case JSON_INTEGER: return kiln__jbuf_int(b, json_integer_value(j));
    case JSON_REAL: return kiln__jbuf_real(b, json_real_value(j), fmt->prec);
    case JSON_STRING: return kiln__jbuf_string(b, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (!n)
            return kiln__jbuf_put(b, "[]", 2);
        bool flat = fmt->inline_scalars;
        for (size_t i = 0; flat && i < n; i++)
            flat = !is_container(json_array_get(j, i));
        if (!putc1(b, '['))
            return false;
        int in = fmt->base + (depth + 1) * fmt->step;
        for (size_t i = 0; i < n; i++) {
            if (flat ? i && !kiln__jbuf_put(b, ", ", 2)
                     : (i && !putc1(b, ',')) || !newline(b, in))
                return false;
            if (!dump(b, json_array_get(j, i), fmt, depth + 1))
                return false;
        }
        return (flat || newline(b, fmt->base + depth * fmt->step)) && putc1(b, ']');
    }
    case JSON_OBJECT: {
        void *it = json_object_iter((json_t *)j);
        if (!it)
            return kiln__jbuf_put(b, "{}", 2);
        if (!putc1(b, '{'))
            return false;
        int in = fmt->base + (depth + 1) * fmt->step;
        for (bool first = true; it; it = json_object_iter_next((json_t *)j, it), first = false) {
            const char *key = json_object_iter_key(it);
            if ((!first && !putc1(b, ',')) || !newline(b, in) ||
                !kiln__jbuf_string(b, key, json_object_iter_key_len(it)) ||
                !kiln__jbuf_put(b, ": ", 2) ||
                !dump(b, json_object_iter_value(it), fmt, depth + 1))
                return false;
        }
        return newline(b, fmt->base + depth * fmt->step) && putc1(b, '}');
    }
    }
    return false;
}

bool kiln__json_dump(kiln_jbuf *b, const json_t *j, const kiln_json_fmt *fmt)
{
    return j && dump(b, j, fmt, 0);
}

bool kiln__json_dumpf(FILE *f, const json_t *j, int step)
{
    kiln_jbuf b = {.f = f};
    kiln_json_fmt fmt = {.step = step};
    bool ok = kiln__json_dump(&b, j, &fmt) && putc1(&b, '\n') && kiln__jbuf_flush(&b);
    kiln__jbuf_free(&b);
    return ok;
}
