/*
 * json_dump.h - a jansson tree written as text, in jansson's own pretty
 * format, without jansson's per-token callbacks and printf calls.
 *
 * The output of kiln__json_dump with inline_scalars off is byte for byte what
 * json_dumps(j, JSON_INDENT(step) | JSON_REAL_PRECISION(prec) |
 * JSON_ENCODE_ANY) writes; with inline_scalars on, arrays whose elements are
 * all scalars are written on one line ("[1, 3, 224]") as the graph JSON
 * writer wants them.  Linear in the size of the text.  Only core/ includes
 * this header.
 */
#ifndef KILN_CORE_JSON_DUMP_H
#define KILN_CORE_JSON_DUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct kiln_jbuf {
    char *buf;
    size_t len, cap;
    bool oom;
    FILE *f;      /* when set, the text is written out in blocks as it grows */
    bool io_fail; /* a write to f (or fd) failed */
    size_t block; /* bytes per block written out; 0 = 64 KiB */
    bool direct;  /* blocks go to fd with write(2), past f's buffer (f flushed) */
    int fd;
} kiln_jbuf;

typedef struct kiln_json_fmt {
    int step;           /* spaces per level (1..31) */
    int base;           /* spaces after every newline before the level's own */
    int prec;           /* %.*g digits of reals; 0 = 17 (jansson's default) */
    bool inline_scalars; /* scalar-only arrays on one line */
} kiln_json_fmt;

/** Append the text of @p j to @p b; false on OOM (b->oom) or a failed write. */
bool kiln__json_dump(kiln_jbuf *b, const json_t *j, const kiln_json_fmt *fmt);
/** Append raw bytes. */
bool kiln__jbuf_put(kiln_jbuf *b, const char *p, size_t n);
/** Room for @p n more bytes at the end of @p b (flushing first when a file is
 * attached); the caller writes up to n bytes there and adds them to b->len.
 * NULL on OOM or a failed write. */
char *kiln__jbuf_reserve(kiln_jbuf *b, size_t n);
/** The scalar forms kiln__json_dump writes: an integer; a real as "%.*g" with
 * @p prec digits (0 = 17) in jansson's spelling; @p n bytes of a string quoted
 * and escaped as jansson escapes them (", \, \b \f \n \r \t, other bytes
 * below 0x20 as \u00XX, everything else as is; no UTF-8 check). */
bool kiln__jbuf_int(kiln_jbuf *b, long long v);
bool kiln__jbuf_real(kiln_jbuf *b, double v, int prec);
bool kiln__jbuf_string(kiln_jbuf *b, const char *s, size_t n);
/** Write what is buffered to b->f (no-op without a file); false on failure. */
bool kiln__jbuf_flush(kiln_jbuf *b);
void kiln__jbuf_free(kiln_jbuf *b);
/** @p j written to @p f in jansson's JSON_INDENT(step) format, then a newline. */
bool kiln__json_dumpf(FILE *f, const json_t *j, int step);

#endif
