/*
 * cache_key.c - the automatic model-cache key (cache.h, docs/model_cache.md):
 * one SHA-256 over everything that decides what `kiln compile` writes, so
 * that a hit can never return a model built differently.
 *
 * The hashed text is line-oriented and versioned ("kiln-cache-key 1"); each
 * part is prefixed by its name, and variable-length parts by their length,
 * so no two different inputs produce the same text.  The graph goes last, as
 * the graph JSON writer writes it (the canonical form: the reader's node ids
 * and the input file's formatting do not reach it), streamed into the digest
 * through a FILE cookie.
 */
#include "cache.h"
#include "ctx.h"
#include "graph_json.h"
#include "options.h"
#include "pipeline.h"
#include "plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdlib.h>

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

#define KEY_FORMAT_VERSION 1

static ssize_t hash_write(void *cookie, const char *buf, size_t size)
{
    sha256_update(cookie, size, (const uint8_t *)buf);
    return (ssize_t)size;
}

/* "name <len>:value\n" (NULL is "name -\n"). */
static void put(FILE *f, const char *name, const char *v)
{
    if (v)
        fprintf(f, "%s %zu:%s\n", name, strlen(v), v);
    else
        fprintf(f, "%s -\n", name);
}

static void put_list(FILE *f, const char *name, char *const *v, uint32_t n)
{
    fprintf(f, "%s %u\n", name, n);
    for (uint32_t i = 0; i < n; i++)
        put(f, "  item", v[i]);
}

/* Every pass of every stage, enabled or not, with every option (defaults too). */
static void put_pipeline(FILE *f, const kiln_pipeline *p)
{
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        const kiln_stage *st = &p->stages[s];
        fprintf(f, "stage %s %u\n", kiln_stage_name((kiln_stage_id)s), st->npasses);
        for (uint32_t i = 0; i < st->npasses; i++) {
            const kiln_pass_inst *pi = &st->passes[i];
            put(f, "  pass", pi->comp->name);
            fprintf(f, "  enabled %d required %d\n", pi->enabled, pi->required);
            for (uint32_t k = 0; k < kiln__options_count(pi->options); k++) {
                put(f, "    key", kiln__options_key(pi->options, k));
                put(f, "    value", kiln__options_value_text(pi->options, k));
            }
        }
    }
    put_list(f, "tuners", p->tuners, p->ntuners);
    put_list(f, "breakpoints", p->breakpoints, p->nbreakpoints);
    put(f, "memory_planner", p->memory_planner);
    put(f, "allocator", p->allocator);
    put_list(f, "engines", p->engines, p->nengines);
    fprintf(f, "bisect_limit %lld\n", (long long)p->instr.bisect_limit);
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const kiln_kv *)a)->key, ((const kiln_kv *)b)->key);
}

static bool cache_option(const char *key)
{
    return strcmp(key, KILN_CACHE_DIR_OPTION) == 0 || strcmp(key, KILN_CACHE_GE_DIR_OPTION) == 0 ||
           strcmp(key, KILN_CACHE_GE_KEY_OPTION) == 0;
}

/* The session options, sorted by key, without the cache's own. */
static kiln_status put_options(FILE *f, const kiln_ctx *ctx, kiln_error *err)
{
    uint32_t n = ctx->nsession_options;
    kiln_kv *v = kiln__calloc(n + 1u, sizeof(*v));
    if (!v)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (n) { /* memcpy/qsort of NULL, 0 are undefined */
        memcpy(v, ctx->session_options, sizeof(*v) * n);
        qsort(v, n, sizeof(*v), cmp_kv);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (cache_option(v[i].key))
            continue;
        put(f, "option", v[i].key);
        put(f, "  value", v[i].value);
    }
    kiln__free(v);
    return KILN_OK;
}

static kiln_status put_file(FILE *f, const char *what, const char *path, const char *memo,
                           kiln_error *err)
{
    char hex[KILN_SHA256_HEX_LEN + 1];
    kiln_status st = kiln__sha256_file_memo(memo, path, hex, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "model cache key: %s", what);
    fprintf(f, "%s-sha256 %s\n", what, hex);
    return KILN_OK;
}

/* kiln itself: its version and the file of the library this code is in. */
static kiln_status put_kiln(FILE *f, const char *memo, kiln_error *err)
{
    put(f, "kiln", KILN_VERSION_STRING);
    Dl_info info;
    if (dladdr((void *)put_kiln, &info) && info.dli_fname && info.dli_fname[0])
        return put_file(f, "libkiln", info.dli_fname, memo, err);
    fputs("libkiln-sha256 -\n", f);
    return KILN_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The plugins: every plugin file of the session, loaded or still deferred,
 * by content (its SHA-256 also fixes the name and version it registers),
 * sorted, so the key does not depend on which deferred plugins happen to be
 * loaded yet; plugins built into the host by name and version.
 */
static kiln_status put_plugins(FILE *f, const kiln_ctx *ctx, const char *memo, kiln_error *err)
{
    const struct kiln_registry *r = ctx->registry;
    uint32_t np = kiln_registry_plugin_count(ctx), n = 0;
    char **lines = kiln__calloc((size_t)np + r->ndeferred + 1u, sizeof(char *));
    if (!lines)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; st == KILN_OK && i < np + r->ndeferred; i++) {
        const kiln_plugin_rec *pl = i < np ? kiln_registry_plugin_at(ctx, i) : NULL;
        const kiln_deferred_plugin *d = i < np ? NULL : &r->deferred[i - np];
        if (d && d->state == 1)
            continue; /* loaded: listed among the plugins */
        const char *file = pl ? pl->path : d->file;
        char line[2 * KILN_SHA256_HEX_LEN + 600];
        if (file) {
            char hex[KILN_SHA256_HEX_LEN + 1];
            if ((st = kiln__sha256_file_memo(memo, file, hex, err)) != KILN_OK) {
                kiln_error_push(err, "model cache key: plugin file");
                break;
            }
            kiln__fmt(line, sizeof(line), "plugin-file-sha256 %s", hex);
        } else {
            kiln__fmt(line, sizeof(line), "plugin-builtin %zu:%s %zu:%s",
                      strlen(pl->desc.name ? pl->desc.name : ""),
                      pl->desc.name ? pl->desc.name : "",
                      strlen(pl->desc.version ? pl->desc.version : ""),
                      pl->desc.version ? pl->desc.version : "");
        }
        if (!(lines[n] = kiln__strdup(line))) {
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
            break;
        }
        n++;
    }
    if (st == KILN_OK) {
        qsort(lines, n, sizeof(*lines), cmp_str);
        fprintf(f, "plugins %u\n", n);
        for (uint32_t i = 0; i < n; i++)
            fprintf(f, "%s\n", lines[i]);
    }
    for (uint32_t i = 0; i < n; i++)
        kiln__free(lines[i]);
    kiln__free(lines);
    return st;
}

/* The input key's stand-in for the graph: the model file and what shapes its import. */
static kiln_status put_input(FILE *f, const kiln_cache_key_inputs *in, kiln_error *err)
{
    if (!in || !in->input_path || !in->input_sha256)
        return kiln_errorf(err, KILN_ERR_INVALID, "model cache key: no graph and no input");
    char real[PATH_MAX];
    put(f, "input", realpath(in->input_path, real) ? real : in->input_path);
    put(f, "input_format", in->input_format);
    fprintf(f, "extra %u\n", in->nextra);
    for (uint32_t i = 0; i < in->nextra; i++)
        put(f, "  item", in->extra[i]);
    put(f, "input-sha256", in->input_sha256);
    (void)err;
    return KILN_OK;
}

kiln_status kiln__cache_key(const kiln_ctx *ctx, const kiln_pipeline *p, const kiln_graph *g,
                            const kiln_cache_key_inputs *in, char hex[KILN_SHA256_HEX_LEN + 1],
                            kiln_error *err)
{
    hex[0] = 0;
    struct sha256_ctx md;
    sha256_init(&md);
    FILE *f = fopencookie(&md, "w", (cookie_io_functions_t){.write = hash_write});
    if (!f)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    fprintf(f, "kiln-cache-key %d\n", KEY_FORMAT_VERSION);
    put(f, "format", in ? in->format : NULL);
    put(f, "tuner", in ? in->tuner : NULL);
    put(f, "build_mode", in && in->build_mode ? in->build_mode : "normal");
    const char *memo = in ? in->memo_dir : NULL;
    kiln_status st = put_kiln(f, memo, err);
    if (st == KILN_OK) {
        put_pipeline(f, p);
        st = put_options(f, ctx, err);
    }
    if (st == KILN_OK)
        st = put_plugins(f, ctx, memo, err);
    if (st == KILN_OK && g) {
        fputs("graph\n", f);
        st = kiln_graph_write_json(g, f, err);
    } else if (st == KILN_OK) {
        st = put_input(f, in, err);
    }
    if (fclose(f) != 0 && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "model cache key: hashing failed");
    unsigned char d[SHA256_DIGEST_SIZE];
    unsigned dlen = SHA256_DIGEST_SIZE;
    sha256_digest(&md, dlen, d);
    if (st != KILN_OK)
        return st;
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < dlen; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * dlen] = 0;
    return KILN_OK;
}
