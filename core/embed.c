/*
 * embed.c - the embedding API (plugin-api/kiln/kiln_embed.h): sessions and
 * models over the kernel's context, manifest loader, stage driver, graph I/O
 * and the runtime components.  The kiln command line (cli/) is built on this
 * file alone: format lookup, model import and export, paused builds and
 * running have one implementation, here.
 *
 * Design
 *   A session is a context plus the resolved pipeline of its manifest; the
 *   overrides edit that pipeline in place, in the order the caller applies
 *   them (as the command line does: manifest, --option, --passes, selectors,
 *   --pass-opt, instrumentation), and are recorded, so that a paused build
 *   can write them into its state and a resumed one replay them.  A model
 *   is a root graph with what running it needs: its inputs (root Data nodes
 *   by `index`, named by `_onnx_name` or node name) and output names, both
 *   taken at import, before passes rename or renumber anything; the stage
 *   run of its last compile; and, once run, the runtime instance and the
 *   loaded graph, kept for the next run.  File formats are "json" and "dot"
 *   (kiln's own) or a frontend plugin, by extension or name.
 */
#include "cache.h"
#include "ctx.h"
#include "crash.h"
#include "fileio.h"
#include "graph_dot.h"
#include "graph_int.h"
#include "graph_json.h"
#include "manifest.h"
#include "memgraph.h"
#include "options.h"
#include "plugin.h"
#include "runprof.h"
#include "stage.h"
#include "verify.h"
#include <kiln/kiln_embed.h>
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

#define RUNTIME_OPTION "kiln.runtime"

/* A growable list of owned strings. */
typedef struct strv {
    char **v;
    bool *flag; /* per entry (selectors: enable) */
    uint32_t n, cap;
} strv;

static kiln_status strv_add(strv *l, const char *s, bool flag, kiln_error *err)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 8;
        char **v = kiln__realloc(l->v, sizeof(char *) * cap);
        if (v)
            l->v = v;
        bool *f = v ? kiln__realloc(l->flag, sizeof(bool) * cap) : NULL;
        if (!f)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        l->flag = f;
        l->cap = cap;
    }
    if (!(l->v[l->n] = kiln__strdup(s)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    l->flag[l->n++] = flag;
    return KILN_OK;
}

static void strv_clear(strv *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        kiln__free(l->v[i]);
    kiln__free(l->v);
    kiln__free(l->flag);
    memset(l, 0, sizeof(*l));
}

struct kiln_session {
    kiln_ctx *ctx;
    kiln_pipeline p;
    bool have_pipeline;
    bool touched; /* anything loaded or set (kiln_session_resume wants a fresh one) */
    FILE *log;
    /* the overrides, recorded for a paused state */
    strv options;   /* "KEY=VALUE" */
    strv selectors; /* flag: enable */
    strv pass_opts; /* "PASS.KEY=VALUE" */
    char *passes;
    bool has_bisect;
    int64_t bisect_limit;
    /* the model cache's probe before import (kiln_session_cache_probe) */
    char cache_alias[KILN_SHA256_HEX_LEN + 1]; /* the input key, "" = none */
    char *cache_alias_dir;
    char *cache_input; /* the model file the input key hashed, and its digest */
    char cache_input_sha[KILN_SHA256_HEX_LEN + 1];
    kiln_cache_report probe_rep;
    char probe_key[KILN_CACHE_KEY_MAX + 1]; /* the automatic key or a GE key */
    char *probe_entry;
};

typedef struct model_input {
    char *name;         /* user-facing name */
    kiln_node_id node;  /* Data node (refreshed after compile) */
    bool set;
    kiln_tensor t;      /* data borrowed, dims owned */
} model_input;

struct kiln_model {
    kiln_session *s;
    kiln_graph *g;
    uint32_t nin, nout;
    model_input *in;
    char **out_names;
    kiln_status io_status; /* describing the inputs and outputs at import */
    kiln_error io_err;
    kiln_stage_run run;
    bool compiled;
    uint64_t verified; /* graph_stamp + 1 of the last successful verification, 0 = none */
    /* what the last compile was asked (for a paused state) */
    char *tuner, *build_mode, *build_step;
    /* resumed from a paused state: where the next compile starts */
    bool resumed;
    char *resumed_step;
    kiln_stage_id resume_first;
    int64_t resume_bisect;
    /* runtime state */
    strv rt_opts; /* "KEY=VALUE" for the runtime instance */
    const kiln_component *rt;
    void *rt_inst, *loaded;
    kiln_options *rt_options;
    kiln_tensor *out; /* nout tensors of the last run */
    bool have_out;
    bool profiling;   /* kiln_model_set_profiling: the runtime's `profile` option */
    /* the model cache (kiln_model_cache_lookup): the key's lock is held from
     * the lookup until the store or the model's destruction */
    kiln_cache *cache;
    kiln_cache_report cache_rep; /* status, key, entry, ms for --report */
    char cache_key[KILN_CACHE_KEY_MAX + 1];
    char *cache_entry, *cache_format;
    char stored_sha[KILN_SHA256_HEX_LEN + 1]; /* the entry kiln_model_cache_store wrote */
    int64_t stored_size;
};

/* ---- versions and errors ------------------------------------------------ */

const char *kiln_version(void)
{
    return KILN_VERSION_STRING;
}

void kiln_abi_version(uint32_t *major, uint32_t *minor)
{
    if (major)
        *major = KILN_ABI_MAJOR;
    if (minor)
        *minor = KILN_ABI_MINOR;
}

kiln_error *kiln_error_create(void)
{
    kiln_error *e = kiln__malloc(sizeof(*e));
    if (e)
        kiln_error_clear(e);
    return e;
}

void kiln_error_destroy(kiln_error *err)
{
    kiln__free(err);
}

/* ---- sessions ----------------------------------------------------------- */

kiln_session *kiln_session_create(void)
{
    kiln_session *s = kiln__calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (!(s->ctx = kiln_ctx_create())) {
        kiln__free(s);
        return NULL;
    }
    s->log = stderr;
    kiln_pipeline_clear(&s->p);
    s->p.instr.log = s->log;
    s->bisect_limit = -1;
    return s;
}

static void clear_overrides(kiln_session *s)
{
    strv_clear(&s->selectors);
    strv_clear(&s->pass_opts);
    kiln__free(s->passes);
    s->passes = NULL;
    s->has_bisect = false;
    s->bisect_limit = -1;
}

void kiln_session_destroy(kiln_session *s)
{
    if (s) {
        kiln__free(s->cache_alias_dir);
        kiln__free(s->cache_input);
        kiln__free(s->probe_entry);
    }
    if (!s)
        return;
    clear_overrides(s);
    strv_clear(&s->options);
    kiln_pipeline_clear(&s->p);
    kiln_ctx_destroy(s->ctx);
    kiln__free(s);
}

const char *kiln_default_manifest(void)
{
    static char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/../share/kiln/manifests/default.json", kiln_exe_dir());
    return path;
}

/*
 * The session options kiln itself reads (kiln_model_run, the CPU engine's
 * InferShapes).  An entry ending in '.' is a prefix that needs a suffix (the
 * input's name).  Keys outside the "kiln." namespace belong to plugins.
 */
static const char *const kiln_option_keys[] = {
    "kiln.runtime",         "kiln.input_shape.",   "kiln.input_value.",
    "kiln.threads",         "kiln.engine_priority", "kiln.partition_mode",
    "kiln.memory_planner",  "kiln.memory_svg",     "kiln.report_buffers",
    "kiln.max_streams",     "kiln.cache_dir",      "kiln.allocator",
    "kiln.lower_control_flow", "kiln.composite_engines"};

bool kiln_option_key_known(const char *key, const char **hint)
{
    enum { N = sizeof(kiln_option_keys) / sizeof(kiln_option_keys[0]) };
    const char *dummy;
    if (!hint)
        hint = &dummy;
    *hint = NULL;
    if (!key || strncmp(key, "kiln.", 5) != 0)
        return true;
    for (size_t i = 0; i < N; i++) {
        size_t n = strlen(kiln_option_keys[i]);
        if (kiln_option_keys[i][n - 1] == '.' ? strncmp(key, kiln_option_keys[i], n) == 0 && key[n]
                                              : strcmp(key, kiln_option_keys[i]) == 0)
            return true;
    }
    /* Candidates: each key, a prefix completed with the suffix of @p key after
     * its second dot ("kiln.input_shapes.x" -> "kiln.input_shape.x"). */
    static _Thread_local char full[N][256];
    const char *cands[N];
    const char *rest = strchr(key + 5, '.');
    for (size_t i = 0; i < N; i++) {
        size_t n = strlen(kiln_option_keys[i]);
        snprintf(full[i], sizeof(full[i]), "%s%s", kiln_option_keys[i],
                 kiln_option_keys[i][n - 1] == '.' ? (rest && rest[1] ? rest + 1 : "NAME") : "");
        cands[i] = full[i];
    }
    *hint = kiln__suggest(key, cands, N);
    return false;
}

const char *kiln_suggest(const char *word, const char *const *cands, uint32_t n)
{
    return word && cands ? kiln__suggest(word, cands, n) : NULL;
}

/* An unknown kiln.* key among the session options (the manifest's "options"). */
static kiln_status check_option_keys(kiln_ctx *ctx, const char *manifest, kiln_error *err)
{
    for (uint32_t i = 0; i < ctx->nsession_options; i++) {
        const char *hint, *key = ctx->session_options[i].key;
        if (!kiln_option_key_known(key, &hint))
            return kiln_errorf(
                err, KILN_ERR_PARAM, "%s: unknown option '%s'%s%s%s (" KILN_KNOWN_OPTION_KEYS ")",
                manifest, key, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
    }
    return KILN_OK;
}

kiln_status kiln_session_load_manifest(kiln_session *s, const char *path, kiln_error *err)
{
    if (!s)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_load_manifest: no session");
    const char *m = path ? path : kiln_default_manifest();
    s->touched = true;
    s->p.instr.log = s->log;
    s->p.instr.quiet = s->ctx->verbosity < -1;
    clear_overrides(s);
    kiln_status st = kiln_manifest_load(s->ctx, m, &s->p, err);
    if (st == KILN_OK)
        st = check_option_keys(s->ctx, m, err);
    s->have_pipeline = st == KILN_OK;
    return st;
}

kiln_status kiln_session_load_plugin(kiln_session *s, const char *path, kiln_error *err)
{
    if (!s || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_load_plugin: no %s",
                           s ? "path" : "session");
    s->touched = true;
    kiln_status st = kiln_file_check_input(path, err);
    return st != KILN_OK ? st : kiln_plugin_load(s->ctx, path, NULL, err);
}

kiln_status kiln_session_set_option(kiln_session *s, const char *key, const char *value,
                                    kiln_error *err)
{
    if (!s || !key || !key[0] || !value)
        return kiln_errorf(err, KILN_ERR_PARAM, "session option: a key and a value are needed");
    if (strchr(key, '='))
        return kiln_errorf(err, KILN_ERR_PARAM, "session option %s: a key has no '='", key);
    s->touched = true;
    kiln_status st = kiln_ctx_set_option(s->ctx, key, value);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "session option %s: out of memory", key);
    size_t n = strlen(key) + strlen(value) + 2;
    char *kv = kiln__malloc(n);
    if (!kv)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln__fmt(kv, n, "%s=%s", key, value);
    st = strv_add(&s->options, kv, false, err);
    kiln__free(kv);
    return st;
}

const char *kiln_session_option(const kiln_session *s, const char *key)
{
    return s && key ? kiln_ctx_option(s->ctx, key) : NULL;
}

/* The overrides edit a loaded pipeline. */
static kiln_status need_pipeline(const kiln_session *s, const char *what, kiln_error *err)
{
    if (!s)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: no session", what);
    if (!s->have_pipeline)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: no manifest loaded (call kiln_session_load_manifest first)", what);
    return KILN_OK;
}

kiln_status kiln_session_set_passes(kiln_session *s, const char *text, kiln_error *err)
{
    kiln_status st = need_pipeline(s, "passes", err);
    if (st == KILN_OK)
        st = kiln__pipeline_parse_text(s->ctx, text ? text : "", &s->p, err);
    if (st == KILN_OK) {
        char *copy = kiln__strdup(text ? text : "");
        if (!copy)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln__free(s->passes);
        s->passes = copy;
    }
    return st;
}

kiln_status kiln_session_select_passes(kiln_session *s, const char *pattern, bool enable,
                                       kiln_error *err)
{
    kiln_status st = need_pipeline(s, enable ? "enable passes" : "disable passes", err);
    if (st == KILN_OK && !pattern)
        st = kiln_errorf(err, KILN_ERR_PARAM, "pass selector: no pattern");
    if (st == KILN_OK)
        st = kiln_manifest_apply_selectors(&s->p, &pattern, &enable, 1, err);
    if (st == KILN_OK)
        st = strv_add(&s->selectors, pattern, enable, err);
    return st;
}

kiln_status kiln_session_set_pass_option(kiln_session *s, const char *pass, const char *key,
                                         const char *value, kiln_error *err)
{
    kiln_status st = need_pipeline(s, "pass option", err);
    if (st == KILN_OK && (!pass || !key || !value))
        st = kiln_errorf(err, KILN_ERR_PARAM, "pass option: a pass, a key and a value are needed");
    if (st == KILN_OK)
        st = kiln_manifest_set_pass_option(&s->p, pass, key, value, err);
    if (st == KILN_OK) {
        size_t n = strlen(pass) + strlen(key) + strlen(value) + 3;
        char *rec = kiln__malloc(n);
        if (!rec)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln__fmt(rec, n, "%s.%s=%s", pass, key, value);
        st = strv_add(&s->pass_opts, rec, false, err);
        kiln__free(rec);
    }
    return st;
}

static kiln_status parse_bool(const char *key, const char *v, bool *out, kiln_error *err)
{
    if (v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0))
        *out = true;
    else if (v && (strcmp(v, "false") == 0 || strcmp(v, "0") == 0))
        *out = false;
    else
        return kiln_errorf(err, KILN_ERR_PARAM, "instrumentation %s: expected true or false, got %s",
                           key, v ? v : "NULL");
    return KILN_OK;
}

/* Replace an owned string setting (NULL = none). */
static kiln_status set_str(char **slot, const char *v, kiln_error *err)
{
    char *copy = NULL;
    if (v && !(copy = kiln__strdup(v)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln__free(*slot);
    *slot = copy;
    return KILN_OK;
}

kiln_status kiln_session_set_instrumentation(kiln_session *s, const char *key, const char *value,
                                             kiln_error *err)
{
    kiln_status st = need_pipeline(s, "instrumentation", err);
    if (st != KILN_OK)
        return st;
    kiln_instrumentation *in = &s->p.instr;
    if (!key)
        return kiln_errorf(err, KILN_ERR_PARAM, "instrumentation: no key");
    if (strcmp(key, "verify_each") == 0)
        return parse_bool(key, value, &in->verify_each, err);
    if (strcmp(key, "time_passes") == 0)
        return parse_bool(key, value, &in->time_passes, err);
    if (strcmp(key, "stats") == 0)
        return parse_bool(key, value, &in->stats, err);
    if (strcmp(key, "print_after") == 0)
        return set_str(&in->print_after, value, err);
    if (strcmp(key, "dump_dir") == 0)
        return set_str(&in->dump_dir, value, err);
    if (strcmp(key, "bisect_limit") == 0) {
        char *end = NULL;
        errno = 0;
        long long v = value ? strtoll(value, &end, 10) : 0;
        if (!value || !value[0] || *end || errno || v < -1)
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "instrumentation bisect_limit: expected an integer >= -1, got %s",
                               value ? value : "NULL");
        in->bisect_limit = v;
        s->has_bisect = true;
        s->bisect_limit = v;
        return KILN_OK;
    }
    return kiln_errorf(err, KILN_ERR_PARAM,
                       "unknown instrumentation setting '%s' (verify_each, time_passes, stats, "
                       "print_after, dump_dir, bisect_limit)",
                       key);
}

void kiln_session_set_verbosity(kiln_session *s, int verbosity)
{
    if (s) {
        s->ctx->verbosity = verbosity;
        s->p.instr.quiet = verbosity < -1;
    }
}

void kiln_session_set_log(kiln_session *s, FILE *log)
{
    if (s) {
        s->log = log ? log : stderr;
        s->p.instr.log = s->log;
    }
}

void kiln_session_print_pipeline(const kiln_session *s, FILE *f, bool textual)
{
    if (!s || !f)
        return;
    if (textual)
        kiln__pipeline_print_text(&s->p, f);
    else
        kiln__pipeline_print(&s->p, f);
}

/*
 * Listing plugins or components describes every plugin the manifest names, so
 * it first loads the deferred ones (docs/manifest.md, "Deferred loading").
 * A failure is reported on stderr once; the listing shows what loaded.
 */
static void load_all_deferred(const kiln_session *s)
{
    if (!s || !s->ctx->registry->npending)
        return;
    kiln_error e;
    kiln_error_clear(&e);
    if (kiln__registry_need(s->ctx, 0, &e) != KILN_OK) {
        char msg[KILN_ERROR_TEXT_SIZE];
        kiln_error_format(&e, msg, sizeof(msg));
        fprintf(stderr, "kiln: error: %s\n", msg);
    }
}

kiln_status kiln_session_load_deferred(kiln_session *s, kiln_error *err)
{
    if (!s)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_load_deferred: no session");
    return kiln__registry_need(s->ctx, 0, err);
}

uint32_t kiln_session_plugin_count(const kiln_session *s)
{
    load_all_deferred(s);
    return s ? kiln_registry_plugin_count(s->ctx) : 0;
}

bool kiln_session_plugin(const kiln_session *s, uint32_t i, kiln_plugin_info *out)
{
    const kiln_plugin_rec *p = s ? kiln_registry_plugin_at(s->ctx, i) : NULL;
    if (!p || !out || out->struct_size < KILN_SIZE_THROUGH(kiln_plugin_info, abi_minor))
        return false;
    out->name = p->desc.name;
    out->version = p->desc.version;
    out->license = p->desc.license;
    out->description = p->desc.description;
    out->build_info = p->desc.build_info;
    out->file = p->path;
    out->abi_major = p->desc.abi_major;
    out->abi_minor = p->desc.abi_minor;
    return true;
}

uint32_t kiln_session_component_count(const kiln_session *s)
{
    load_all_deferred(s);
    return s ? kiln_registry_count(s->ctx) : 0;
}

bool kiln_session_component(const kiln_session *s, uint32_t i, kiln_component_info *out)
{
    const kiln_component *c = s ? kiln_registry_at(s->ctx, i) : NULL;
    if (!c || !out || out->struct_size < KILN_SIZE_THROUGH(kiln_component_info, desc))
        return false;
    out->kind = kiln_component_kind_name(c->kind);
    out->name = c->name;
    out->plugin = -1;
    for (uint32_t k = 0; k < kiln_registry_plugin_count(s->ctx); k++)
        if (kiln_registry_plugin_at(s->ctx, k) == c->plugin)
            out->plugin = (int32_t)k;
    out->desc = &c->d;
    return true;
}

bool kiln_session_has_component(const kiln_session *s, const char *kind, const char *name)
{
    if (s && kind && name &&
        (strcmp(kind, kiln_component_kind_name(KILN_COMP_ENGINE)) == 0 ||
         strcmp(kind, kiln_component_kind_name(KILN_COMP_RUNTIME)) == 0))
        load_all_deferred(s); /* only these kinds are ever deferred */
    for (uint32_t i = 0; s && kind && name && i < kiln_registry_count(s->ctx); i++) {
        const kiln_component *c = kiln_registry_at(s->ctx, i);
        if (strcmp(c->name, name) == 0 && strcmp(kiln_component_kind_name(c->kind), kind) == 0)
            return true;
    }
    return false;
}

bool kiln_build_step_valid(const char *step)
{
    kiln_stage_id stage;
    bool after;
    return step && kiln_build_step_lookup(step, &stage, &after);
}

/* ---- formats ------------------------------------------------------------ */

static const char *ext_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

/*
 * The frontend with the wanted hook whose extension list holds @p ext (".onnx")
 * or, when @p by_name, whose name is @p ext without its dot.  NULL when none.
 */
static const kiln_component *frontend_for(kiln_ctx *ctx, const char *ext, bool want_import,
                                          bool by_name)
{
    size_t n = strlen(ext);
    if (n == 0)
        return NULL;
    for (int pass = 0; pass < (by_name ? 2 : 1); pass++)
        for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
            const kiln_component *c = kiln_registry_at(ctx, i);
            if (c->kind != KILN_COMP_FRONTEND)
                continue;
            if (want_import ? !c->d.frontend.import_file : !c->d.frontend.export_file)
                continue;
            if (pass == 1) {
                if (strcmp(c->name, ext + 1) == 0)
                    return c;
                continue;
            }
            if (!c->d.frontend.extensions)
                continue;
            for (const char *p = c->d.frontend.extensions; (p = strstr(p, ext)); p += n)
                if ((p == c->d.frontend.extensions || p[-1] == ',') && (p[n] == ',' || !p[n]))
                    return c;
        }
    return NULL;
}

/* "json, dot, onnx": the formats kiln can read (@p import) or write now. */
static void known_formats(kiln_ctx *ctx, bool import, char *buf, size_t size)
{
    size_t used = (size_t)kiln__fmt(buf, size, import ? "json" : "json, dot");
    for (uint32_t i = 0; i < kiln_registry_count(ctx) && used < size; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_FRONTEND || !c->d.frontend.extensions ||
            !(import ? c->d.frontend.import_file : c->d.frontend.export_file))
            continue;
        for (const char *p = c->d.frontend.extensions; *p && used < size;) {
            size_t len = strcspn(p, ",");
            const char *e = p[0] == '.' ? p + 1 : p;
            int w = (int)(len - (size_t)(e - p));
            if (w > 0)
                used += (size_t)kiln__fmt(buf + used, size - used, ", %.*s", w, e);
            p += len + (p[len] == ',');
        }
    }
}

void kiln_session_formats(const kiln_session *s, bool import, char *buf, size_t size)
{
    if (s && buf && size)
        known_formats(s->ctx, import, buf, size);
}

enum fmt_kind { FMT_JSON, FMT_DOT, FMT_PLUGIN };

/*
 * The format of @p path: @p format when given ("json", "dot", an extension a
 * frontend declares, with or without the dot, or a frontend's name), else the
 * path's extension; a stream without one is JSON.
 */
static kiln_status pick_format(kiln_ctx *ctx, const char *path, const char *format, bool import,
                               enum fmt_kind *kind, const kiln_component **fe, kiln_error *err)
{
    char ext[64], known[512];
    *fe = NULL;
    struct stat sb;
    if (!format && !ext_of(path)[0] &&
        (strcmp(path, "-") == 0 ||
         (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))))
        format = "json"; /* a stream (-, /dev/stdout, a FIFO): JSON unless the format says */
    if (format) {
        if (strlen(format) + 2 > sizeof(ext))
            format = "?";
        kiln__fmt(ext, sizeof(ext), "%s%s", format[0] == '.' ? "" : ".", format);
    } else {
        kiln__fmt(ext, sizeof(ext), "%s", ext_of(path));
    }
    if (strcmp(ext, ".json") == 0) {
        *kind = FMT_JSON;
        return KILN_OK;
    }
    if (!import && strcmp(ext, ".dot") == 0) {
        *kind = FMT_DOT;
        return KILN_OK;
    }
    *kind = FMT_PLUGIN;
    if ((*fe = frontend_for(ctx, ext, import, format != NULL)) != NULL)
        return KILN_OK;
    known_formats(ctx, import, known, sizeof(known));
    const char *shown = strcmp(path, "-") ? path : import ? "standard input" : "standard output";
    if (format)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no loaded plugin %s '%s' (%s; formats known: %s)", shown,
                           import ? "imports" : "writes", ext + 1,
                           import ? "--input-format" : "--format", known);
    if (!ext[0])
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no extension to tell the format by (formats known: %s); name the "
                           "file with one or give %s",
                           shown, known, import ? "--input-format" : "--format");
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                       import ? "%s: no loaded plugin imports '%s' files (kiln reads .json "
                                "itself; list a frontend plugin in the manifest; formats "
                                "known: %s)"
                              : "%s: no loaded plugin writes '%s' files (kiln writes .json and "
                                ".dot itself; formats known: %s)",
                       shown, ext, known);
}

/* ---- models ------------------------------------------------------------- */

/* Op types compare as symbols of the graph's context; 0 = no node has it. */
static bool is_op(const kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}

/* The user-facing name of output @p o of @p n: its `_onnx_name`, else the node name. */
static char *value_name(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const char *s;
    char buf[512];
    if (o < kiln_node_output_count(g, n) &&
        kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)), "_onnx_name", &s))
        return kiln__strdup(s);
    if (o == 0)
        return kiln__strdup(kiln_node_name_str(g, n));
    kiln__fmt(buf, sizeof(buf), "%s:%u", kiln_node_name_str(g, n), o);
    return kiln__strdup(buf);
}

/* Root Data nodes by `index` into @p nodes (nin entries); indices must be 0..n-1. */
static kiln_status find_data(kiln_graph *g, kiln_node_id *nodes, uint32_t nin, kiln_error *err)
{
    memset(nodes, 0, sizeof(*nodes) * nin);
    const kiln_sym data = kiln_sym_lookup(g, "Data");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int64_t idx;
        if (!is_op(g, n, data))
            continue;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx) || idx < 0 ||
            idx >= (int64_t)nin || nodes[idx])
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "Data node %s: attribute 'index' must be unique and in 0..%u",
                               kiln_node_name_str(g, n), nin ? nin - 1 : 0);
        nodes[idx] = n;
    }
    return KILN_OK;
}

static uint32_t count_data(const kiln_graph *g)
{
    uint32_t n = 0;
    const kiln_sym data = kiln_sym_lookup(g, "Data");
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v))
        n += is_op(g, v, data);
    return n;
}

/* Inputs and output names of a freshly imported graph. */
static kiln_status describe_io(kiln_model *m, kiln_error *err)
{
    kiln_graph *g = m->g;
    m->nin = count_data(g);
    kiln_node_id *nodes = kiln__calloc(m->nin + 1u, sizeof(*nodes));
    if (!nodes || !(m->in = kiln__calloc(m->nin + 1u, sizeof(*m->in)))) {
        kiln__free(nodes);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    kiln_status st = find_data(g, nodes, m->nin, err);
    for (uint32_t i = 0; st == KILN_OK && i < m->nin; i++) {
        m->in[i].node = nodes[i];
        if (!(m->in[i].name = value_name(g, nodes[i], 0)))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    kiln__free(nodes);
    if (st != KILN_OK)
        return st;
    kiln_node_id no = 0;
    const kiln_sym netoutput = kiln_sym_lookup(g, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (is_op(g, n, netoutput))
            no = n;
    m->nout = no ? kiln_node_input_count(g, no) : 0;
    if (!(m->out_names = kiln__calloc(m->nout + 1u, sizeof(char *))))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j < m->nout; j++) {
        const char *name = NULL;
        kiln_anchor a = kiln_node_input_peer(g, no, j);
        if (kiln_node_input_has_desc(g, no, j))
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_input_desc(g, no, j)), "_onnx_name",
                                  &name);
        m->out_names[j] = name ? kiln__strdup(name)
                               : a.node ? value_name(g, a.node, a.index) : kiln__strdup("");
        if (!m->out_names[j])
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

/* A model over @p g (taken).  Its inputs and outputs are described now; a
 * graph whose Data nodes cannot be (no unique `index`) still compiles and
 * writes: kiln_model_io_status keeps the reason for the calls that need them. */
static kiln_status adopt(kiln_session *s, kiln_graph *g, kiln_model **out, kiln_error *err)
{
    kiln_model *m = kiln__calloc(1, sizeof(*m));
    if (!m) {
        kiln_graph_destroy(g);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    m->s = s;
    m->g = g;
    kiln_error_clear(&m->io_err);
    m->io_status = describe_io(m, &m->io_err);
    if (m->io_status == KILN_ERR_NOMEM) {
        kiln_model_destroy(m);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    if (m->io_status != KILN_OK)
        m->nin = m->nout = 0;
    *out = m;
    return KILN_OK;
}

/* Import @p path (a file) with frontend @p fe into a new graph named @p name. */
static kiln_status import_with(kiln_ctx *ctx, const kiln_component *fe, const char *path,
                               const char *name, kiln_graph **out, kiln_error *err)
{
    kiln_graph *g = kiln_graph_create(ctx, name);
    if (!g)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_activity act = {.plugin = kiln__comp_plugin(fe),
                         .component = fe->name,
                         .stage = "import",
                         .doing = "importing"};
    kiln_activity *prev = kiln__activity_enter(&act);
    kiln_status st = fe->d.frontend.import_file(g, path, err);
    kiln__activity_leave(prev);
    if (st != KILN_OK) {
        kiln_graph_destroy(g);
        return kiln_error_push(err, "frontend %s", fe->name);
    }
    *out = g;
    return KILN_OK;
}

/*
 * "-": read standard input whole; JSON when it starts with '{' (after blanks),
 * else a plugin format: the one named by @p format, or ONNX when the bytes
 * look like a protobuf message (first field: a varint or a length-delimited
 * field, numbers 1-20).  Plugins import from a path, so their bytes go
 * through a registered temporary in $TMPDIR.
 */
static kiln_status load_stdin(kiln_ctx *ctx, const char *format, kiln_graph **out, kiln_error *err)
{
    char *buf;
    size_t len;
    kiln_status st = kiln_file_read_all("-", &buf, &len, err);
    if (st != KILN_OK)
        return st;
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
        i++;
    const kiln_component *fe = NULL;
    enum fmt_kind kind = FMT_JSON;
    if (format) {
        st = pick_format(ctx, "-", format, true, &kind, &fe, err);
    } else if (i < len && buf[i] == '{') {
        kind = FMT_JSON;
    } else {
        unsigned char b = len ? (unsigned char)buf[0] : 0;
        unsigned field = b >> 3, wire = b & 7;
        bool pb = len && field >= 1 && field <= 20 && (wire == 0 || wire == 2);
        if (pb)
            fe = frontend_for(ctx, ".onnx", true, false);
        kind = FMT_PLUGIN;
        if (!fe)
            st = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                             "standard input: neither kiln graph JSON nor ONNX%s (%zu bytes); "
                             "give --input-format",
                             pb ? " with an ONNX frontend loaded" : "", len);
    }
    if (st == KILN_OK && kind == FMT_JSON) {
        st = kiln_graph_read_json_string(ctx, buf, len, "<stdin>", out, err);
    } else if (st == KILN_OK) {
        char spool[4096];
        const char *dir = getenv("TMPDIR");
        kiln__fmt(spool, sizeof(spool), "%s/kiln-stdin", dir && dir[0] ? dir : "/tmp");
        kiln_tmpfile *t = NULL;
        int fd = -1;
        if ((st = kiln_file_tmp_create(spool, &t, &fd, err)) == KILN_OK) {
            FILE *f = fdopen(fd, "wb");
            bool ok = f && fwrite(buf, 1, len, f) == len;
            ok &= f && fclose(f) == 0;
            if (!f)
                close(fd);
            if (!ok)
                st = kiln_errorf(err, KILN_ERR_IO, "cannot spool standard input to %s: %s",
                                 kiln_file_tmp_path(t), strerror(errno));
            else
                st = import_with(ctx, fe, kiln_file_tmp_path(t), "stdin", out, err);
            kiln_file_tmp_discard(t);
        }
    }
    kiln__free(buf);
    return st;
}

kiln_status kiln_model_import(kiln_session *s, const char *path, const char *format,
                              kiln_model **out, kiln_error *err)
{
    if (!s || !path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_import: no %s",
                           !s ? "session" : !path ? "path" : "output handle");
    *out = NULL;
    kiln_graph *g = NULL;
    kiln_status st;
    if (strcmp(path, "-") == 0) {
        if ((st = load_stdin(s->ctx, format, &g, err)) != KILN_OK)
            return st;
        return adopt(s, g, out, err);
    }
    if ((st = kiln_file_check_input(path, err)) != KILN_OK)
        return st;
    enum fmt_kind kind;
    const kiln_component *fe;
    if ((st = pick_format(s->ctx, path, format, true, &kind, &fe, err)) != KILN_OK)
        return st;
    if (kind == FMT_JSON) {
        if ((st = kiln_graph_read_json_file(s->ctx, path, &g, err)) != KILN_OK)
            return st;
        return adopt(s, g, out, err);
    }
    if (access(path, R_OK) != 0)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "cannot read %s: %s", path, strerror(errno));
    const char *base = strrchr(path, '/');
    if ((st = import_with(s->ctx, fe, path, base ? base + 1 : path, &g, err)) != KILN_OK)
        return st;
    return adopt(s, g, out, err);
}

kiln_status kiln_model_import_json(kiln_session *s, const char *text, size_t len,
                                   kiln_model **out, kiln_error *err)
{
    if (!s || !text || !out)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_import_json: no %s",
                           !s ? "session" : !text ? "text" : "output handle");
    *out = NULL;
    kiln_graph *g = NULL;
    kiln_status st = kiln_graph_read_json_string(s->ctx, text, len, "<memory>", &g, err);
    return st != KILN_OK ? st : adopt(s, g, out, err);
}

static void release_outputs(kiln_model *m)
{
    for (uint32_t j = 0; m->out && j < m->nout; j++) {
        kiln_free((void *)(uintptr_t)m->out[j].dims);
        kiln_free(m->out[j].data);
        memset(&m->out[j], 0, sizeof(m->out[j]));
    }
    m->have_out = false;
}

/* Unload the graph from the runtime and destroy the runtime instance. */
static void release_runtime(kiln_model *m)
{
    release_outputs(m);
    kiln_activity act = {.plugin = m->rt ? kiln__comp_plugin(m->rt) : NULL,
                         .component = m->rt ? m->rt->name : NULL,
                         .stage = "runtime unload",
                         .doing = "unloading the model"};
    kiln_activity *prev = kiln__activity_enter(&act);
    if (m->loaded && m->rt && m->rt->d.runtime.unload)
        m->rt->d.runtime.unload(m->rt_inst, m->loaded);
    if (m->rt_inst && m->rt && m->rt->d.runtime.destroy)
        m->rt->d.runtime.destroy(m->rt_inst);
    kiln__activity_leave(prev);
    kiln__options_destroy(m->rt_options);
    m->rt_options = NULL;
    m->loaded = m->rt_inst = NULL;
    m->rt = NULL;
}

void kiln_model_destroy(kiln_model *m)
{
    if (!m)
        return;
    release_runtime(m);
    kiln__free(m->out);
    for (uint32_t i = 0; m->in && i < m->nin; i++) {
        kiln__free(m->in[i].name);
        kiln__free((void *)(uintptr_t)m->in[i].t.dims);
    }
    for (uint32_t j = 0; m->out_names && j < m->nout; j++)
        kiln__free(m->out_names[j]);
    kiln__free(m->in);
    kiln__free(m->out_names);
    kiln__free(m->tuner);
    kiln__free(m->build_mode);
    kiln__free(m->build_step);
    kiln__free(m->resumed_step);
    strv_clear(&m->rt_opts);
    kiln_stage_run_fini(&m->run);
    kiln__cache_close(m->cache);
    kiln__free(m->cache_entry);
    kiln__free(m->cache_format);
    if (m->g)
        kiln_graph_destroy(m->g);
    kiln__free(m);
}

kiln_graph *kiln_model_graph(kiln_model *m)
{
    return m ? m->g : NULL;
}

kiln_status kiln_model_io_status(const kiln_model *m, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_io_status: no model");
    if (m->io_status != KILN_OK && err)
        *err = m->io_err;
    return m->io_status;
}

const char *kiln_model_input_node(const kiln_model *m, uint32_t i)
{
    return m && i < m->nin ? kiln_node_name_str(m->g, m->in[i].node) : NULL;
}

/* Replace an owned copy (NULL = none); false on OOM. */
static bool keep_str(char **slot, const char *v)
{
    char *copy = v ? kiln__strdup(v) : NULL;
    if (v && !copy)
        return false;
    kiln__free(*slot);
    *slot = copy;
    return true;
}

/*
 * Keep the model's output names on the graph a frontend flagged
 * KILN_FRONTEND_IO_NAMES writes: a pass that replaces the producer of a
 * NetOutput input (a partitioner's PartitionedCall, an isolating Identity)
 * changes the name derived from the graph.  Where it differs from the one
 * described at import, it is pinned as `_onnx_name` on the NetOutput's input
 * descriptor.  O(nodes + outputs).
 */
static kiln_status pin_output_names(kiln_model *m, kiln_error *err)
{
    kiln_graph *g = m->g;
    kiln_node_id no = 0;
    const kiln_sym netoutput = kiln_sym_lookup(g, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (is_op(g, n, netoutput))
            no = n;
    if (!no || kiln_node_input_count(g, no) != m->nout)
        return KILN_OK;
    for (uint32_t j = 0; j < m->nout; j++) {
        const char *name = NULL;
        if (kiln_node_input_has_desc(g, no, j))
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_input_desc(g, no, j)), "_onnx_name",
                                  &name);
        if (name && strcmp(name, m->out_names[j]) == 0)
            continue;
        kiln_anchor a = kiln_node_input_peer(g, no, j);
        char *now = name ? NULL : a.node ? value_name(g, a.node, a.index) : NULL;
        bool same = now && strcmp(now, m->out_names[j]) == 0;
        kiln__free(now);
        if (same || !m->out_names[j][0])
            continue;
        kiln_tensor_desc *d = kiln_node_input_desc_mut(g, no, j);
        kiln_attrs *at = d ? kiln_desc_attrs_mut(g, d) : NULL;
        if (!at || kiln_attrs_set_string(at, "_onnx_name", m->out_names[j]) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

kiln_status kiln_model_compile(kiln_model *m, const kiln_compile_options *opts, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_compile: no model");
    kiln_status st = need_pipeline(m->s, "compile", err);
    if (st != KILN_OK)
        return st;
    if (opts && opts->struct_size < KILN_SIZE_THROUGH(kiln_compile_options, tuner))
        return kiln_errorf(err, KILN_ERR_VERSION, "compile options: struct_size %u is too small",
                           opts->struct_size);
    const char *stop = opts ? opts->stop_step : NULL;
    const char *tuner = opts && opts->tuner ? opts->tuner : m->resumed ? m->tuner : NULL;
    const char *mode =
        opts && opts->struct_size >= KILN_SIZE_THROUGH(kiln_compile_options, build_mode) &&
                opts->build_mode
            ? opts->build_mode
        : m->resumed ? m->build_mode
                     : NULL;
    if (stop && !kiln_build_step_valid(stop))
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "unknown build step '%s' (before_ub_match, after_ub_match, after_build)",
                           stop);
    if (stop && !kiln_model_step_reachable(m, stop))
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "build step %s is not after %s, where the build paused", stop,
                           m->resumed_step);
    if (!keep_str(&m->tuner, tuner) || !keep_str(&m->build_mode, mode) ||
        !keep_str(&m->build_step, stop))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    /* A built model (a .kmodel the loader marked) is executable as it is:
     * its passes ran when it was built (docs/model_format.md).  It is verified
     * here, as verify_each would verify a graph on its way through the stages. */
    bool built = false;
    if (kiln_attrs_get_bool(kiln_graph_attrs(m->g), "_kiln_built_model", &built) && built) {
        if (stop)
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "the model is already built (a model file): it has no build "
                               "step %s to stop at",
                               stop);
        if ((st = kiln_model_verify(m, err)) != KILN_OK)
            return kiln_error_push(err, "the built model's graph is invalid");
        m->compiled = true;
        return KILN_OK;
    }
    release_runtime(m); /* the graph changes: a loaded copy would be stale */
    kiln_stage_run_fini(&m->run);
    memset(&m->run, 0, sizeof(m->run));
    m->run.stop_step = m->build_step;
    m->run.tuner = m->tuner;
    if (m->resumed) {
        m->run.first = m->resume_first;
        m->run.bisect_count = m->resume_bisect;
    }
    m->compiled = false;
    m->verified = 0;
    /* Deferred engine plugins load here, before any stage runs: placement,
     * folding and kernel lookups need every engine, and no plugin loads once
     * parallel stages may run (docs/threads.md). */
    if ((st = kiln__registry_need(m->s->ctx, KILN_COMP_ENGINE, err)) != KILN_OK)
        return st;
    st = kiln_stage_run_pipeline(m->s->ctx, &m->s->p, m->g, &m->run, err);
    m->resumed = false; /* the next compile starts from the first stage */
    if (st != KILN_OK)
        return st;
    if (m->io_status != KILN_OK) {
        m->compiled = true;
        return KILN_OK;
    }
    /* The passes may have renumbered nodes: find the Data nodes again. */
    uint32_t nin = count_data(m->g);
    if (nin != m->nin)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "the pipeline changed the number of model inputs (%u -> %u)", m->nin,
                           nin);
    kiln_node_id *nodes = kiln__calloc(nin + 1u, sizeof(*nodes));
    if (!nodes)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if ((st = find_data(m->g, nodes, nin, err)) == KILN_OK)
        for (uint32_t i = 0; i < nin; i++)
            m->in[i].node = nodes[i];
    kiln__free(nodes);
    m->compiled = st == KILN_OK;
    return st;
}

const char *kiln_model_paused_step(const kiln_model *m)
{
    return m ? m->run.paused_step : NULL;
}

const char *kiln_model_resumed_step(const kiln_model *m)
{
    return m && m->resumed ? m->resumed_step : NULL;
}

bool kiln_model_step_reachable(const kiln_model *m, const char *step)
{
    if (!m || !kiln_build_step_valid(step))
        return false;
    return !m->resumed || kiln_build_step_reachable(step, m->resume_first);
}

/* A stamp of the graph's edits: the mutation counters of the root and every
 * subgraph (each only grows), with the number of subgraphs. */
static uint64_t graph_stamp(const kiln_graph *g)
{
    uint32_t n = kiln_graph_all_subgraph_count(g);
    uint64_t stamp = kiln_graph_mutation(g) * 1000003u + n;
    for (uint32_t i = 0; i < n; i++)
        stamp = stamp * 31u + kiln_graph_mutation(kiln_graph_all_subgraph(g, i));
    return stamp;
}

kiln_status kiln_model_verify(const kiln_model *m, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_verify: no model");
    uint64_t stamp = graph_stamp(m->g);
    if (m->verified && m->verified == stamp + 1)
        return KILN_OK;
    kiln_status st = kiln_graph_verify(m->g, err);
    if (st == KILN_OK)
        ((kiln_model *)m)->verified = stamp + 1; /* a cache: the model is logically unchanged */
    return st;
}

kiln_status kiln_model_write(kiln_model *m, const char *path, const char *format,
                             kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write: no %s",
                           m ? "path" : "model");
    kiln_status st = kiln_model_verify(m, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "not writing %s", path);
    enum fmt_kind kind;
    const kiln_component *fe;
    if ((st = pick_format(m->s->ctx, path, format, false, &kind, &fe, err)) != KILN_OK)
        return st;
    if (kind == FMT_JSON)
        return kiln_graph_write_json_file(m->g, path, err);
    if (kind == FMT_DOT)
        return kiln_graph_write_dot_file(m->g, path, err);
    if ((fe->d.frontend.flags & KILN_FRONTEND_IO_NAMES) && m->io_status == KILN_OK &&
        (st = pin_output_names(m, err)) != KILN_OK)
        return st;
    /* Exporters take a path: hand them a fresh mkstemp temporary beside the
     * destination (never a predictable name), committed on success. */
    kiln_tmpfile *t;
    if ((st = kiln_file_tmp_create(path, &t, NULL, err)) != KILN_OK)
        return st;
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(fe), fe->name, "export", m->g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = fe->d.frontend.export_file(m->g, kiln_file_tmp_path(t), err);
    kiln__activity_leave(prev);
    if (st == KILN_OK)
        return kiln_file_tmp_commit(t, path, err); /* fsync + rename (unlinks on failure) */
    kiln_file_tmp_discard(t);
    return kiln_error_push(err, "frontend %s", fe->name);
}

char *kiln_model_to_json(const kiln_model *m, kiln_error *err)
{
    if (!m) {
        kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_to_json: no model");
        return NULL;
    }
    /* kiln_free releases what kiln__malloc returned: both are the host allocator. */
    return kiln_graph_to_json_string(m->g, err);
}

kiln_status kiln_model_write_report(const kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write_report: no %s",
                           m ? "path" : "model");
    kiln_stage_run run = m->run;
    run.cache = &m->cache_rep;
    json_t *rj = NULL;
    kiln_run_profile prof;
    memset(&prof, 0, sizeof(prof));
    prof.struct_size = sizeof(prof);
    kiln_error *quiet = kiln_error_create();
    if (m->have_out && quiet && kiln_model_profile(m, &prof, quiet) == KILN_OK)
        rj = kiln__run_report(&prof, m->rt->name);
    if (quiet)
        kiln_error_destroy(quiet);
    run.run_json = rj;
    kiln_status st = kiln_stage_write_report(&run, m->g, path, err);
    json_decref(rj);
    return st;
}

/* ---- the model cache (docs/model_cache.md) -------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * The output format's name (in the key) and the entry files' extension:
 * "json"/"json", "dot"/"dot", a frontend's name and first extension.  A kind
 * without a frontend (a format kiln writes itself) is named by @p format or
 * the path's extension.
 */
static kiln_status cache_format(kiln_ctx *ctx, const char *path, const char *format, char *name,
                                char *ext, size_t size, kiln_error *err)
{
    enum fmt_kind kind;
    const kiln_component *fe;
    kiln_status st = pick_format(ctx, path, format, false, &kind, &fe, err);
    if (st != KILN_OK)
        return st;
    const char *n = kind == FMT_JSON ? "json"
                    : kind == FMT_DOT ? "dot"
                    : fe             ? fe->name
                    : format         ? format
                                     : ext_of(path);
    n += n[0] == '.';
    kiln__fmt(name, size, "%s", n[0] ? n : "unknown");
    const char *e = fe && fe->d.frontend.extensions ? fe->d.frontend.extensions : name;
    e += e[0] == '.';
    kiln__fmt(ext, size, "%.*s", (int)strcspn(e, ","), e);
    for (char *c = ext; *c; c++)
        if (*c == '/')
            *c = '_';
    return KILN_OK;
}

/* The probe's input key now names this model's automatic key: the next
 * probe of the same input finds it without importing.  Best effort: a
 * failure is a warning (the cache still works, only slower). */
static void write_alias(kiln_model *m, kiln_error *err)
{
    kiln_session *s = m->s;
    (void)err;
    if (!s->cache_alias[0] || !s->cache_alias_dir || !m->cache_rep.key ||
        strlen(m->cache_rep.key) != KILN_SHA256_HEX_LEN || !s->cache_input)
        return;
    kiln_error e;
    kiln_error_clear(&e);
    /* The model file must still be what the input key hashed: one that
     * changed while it was imported gets no alias (its graph is another's). */
    char now[KILN_SHA256_HEX_LEN + 1];
    if (kiln__sha256_file_memo(s->cache_alias_dir, s->cache_input, now, &e) != KILN_OK ||
        strcmp(now, s->cache_input_sha) != 0) {
        s->cache_alias[0] = 0;
        return;
    }
    if (kiln__cache_alias_write(s->cache_alias_dir, s->cache_alias, m->cache_rep.key, &e) !=
        KILN_OK) {
        char buf[600];
        kiln_error_format(&e, buf, sizeof(buf));
        fprintf(s->log ? s->log : stderr, "kiln: warning: model cache: %s\n", buf);
    }
    s->cache_alias[0] = 0;
}

static kiln_status cache_fail(kiln_model *m, double t0, kiln_status st, kiln_error *err)
{
    m->cache_rep.status = "error";
    m->cache_rep.ms = now_ms() - t0;
    kiln_error_push(err, "model cache");
    return st;
}

kiln_status kiln_model_cache_lookup(kiln_model *m, const kiln_compile_options *opts,
                                    const char *path, const char *format, bool *hit,
                                    kiln_error *err)
{
    bool dummy;
    hit = hit ? hit : &dummy;
    *hit = false;
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_cache_lookup: no %s",
                           m ? "path" : "model");
    double t0 = now_ms();
    kiln__cache_close(m->cache);
    m->cache = NULL;
    memset(&m->cache_rep, 0, sizeof(m->cache_rep));
    m->cache_rep.status = "disabled";
    kiln_ctx *ctx = m->s->ctx;
    const char *auto_dir = kiln_ctx_option(ctx, KILN_CACHE_DIR_OPTION);
    const char *ge_dir = kiln_ctx_option(ctx, KILN_CACHE_GE_DIR_OPTION);
    const char *ge_key = kiln_ctx_option(ctx, KILN_CACHE_GE_KEY_OPTION);
    bool ge = ge_dir && ge_dir[0] && ge_key && ge_key[0];
    bool paused = (opts && opts->stop_step) || m->resumed;
    if ((!ge && !(auto_dir && auto_dir[0])) || paused)
        return KILN_OK; /* disabled; a paused build writes a state, not a model */
    if (ge && auto_dir && auto_dir[0])
        return cache_fail(m, t0,
                          kiln_errorf(err, KILN_ERR_PARAM,
                                      KILN_CACHE_DIR_OPTION " (--cache-dir) and " KILN_CACHE_GE_KEY_OPTION
                                      " exclude each other: give the automatic key or GE's"),
                          err);
    char fname[128], ext[128];
    kiln_status st = cache_format(m->s->ctx, path, format, fname, ext, sizeof(fname), err);
    if (st != KILN_OK)
        return cache_fail(m, t0, st, err);
    if (ge) {
        kiln__fmt(m->cache_key, sizeof(m->cache_key), "%s", ge_key);
    } else {
        const kiln_cache_key_inputs in = {
            .format = fname,
            .tuner = opts ? opts->tuner : NULL,
            .build_mode =
                opts && opts->struct_size >= KILN_SIZE_THROUGH(kiln_compile_options, build_mode)
                    ? opts->build_mode
                    : NULL,
            .memo_dir = auto_dir};
        char hex[KILN_SHA256_HEX_LEN + 1];
        if ((st = kiln__cache_key(ctx, &m->s->p, m->g, &in, hex, err)) != KILN_OK)
            return cache_fail(m, t0, st, err);
        kiln__fmt(m->cache_key, sizeof(m->cache_key), "%s", hex);
    }
    m->cache_rep.key = m->cache_key;
    kiln__free(m->cache_format);
    if (!(m->cache_format = kiln__strdup(fname)))
        return cache_fail(m, t0, kiln_errorf(err, KILN_ERR_NOMEM, "out of memory"), err);
    st = kiln__cache_open(ge ? KILN_CACHE_GE : KILN_CACHE_AUTO, ge ? ge_dir : auto_dir,
                          m->cache_key, ext, m->s->log, &m->cache, err);
    if (st == KILN_OK)
        st = kiln__cache_load(m->cache, path, hit, err);
    if (st != KILN_OK)
        return cache_fail(m, t0, st, err);
    kiln__free(m->cache_entry);
    m->cache_entry = kiln__strdup(kiln__cache_entry(m->cache));
    m->cache_rep.entry = m->cache_entry;
    m->cache_rep.status = *hit ? "hit" : "miss";
    m->cache_rep.ms = now_ms() - t0;
    if (*hit) { /* nothing to store: let other compiles of this key go on */
        kiln__cache_close(m->cache);
        m->cache = NULL;
        write_alias(m, err);
    }
    return KILN_OK;
}

typedef struct produce_ud {
    kiln_model *m;
    const char *format;
} produce_ud;

static kiln_status produce_entry(const char *path, void *ud, kiln_error *err)
{
    const produce_ud *p = ud;
    return kiln_model_write(p->m, path, p->format, err);
}

kiln_status kiln_model_cache_store(kiln_model *m, kiln_error *err)
{
    if (!m || !m->cache)
        return KILN_OK;
    if (!m->compiled || m->run.paused_step) {
        kiln__cache_close(m->cache);
        m->cache = NULL;
        return KILN_OK;
    }
    double t0 = now_ms();
    produce_ud ud = {m, m->cache_format};
    kiln_status st = kiln__cache_save(m->cache, produce_entry, &ud, err);
    m->stored_sha[0] = 0;
    if (st == KILN_OK) {
        char *e = kiln__strdup(kiln__cache_entry(m->cache));
        kiln__free(m->cache_entry);
        m->cache_entry = e;
        m->cache_rep.entry = e;
        const char *sha = kiln__cache_saved_sha256(m->cache);
        if (sha && e) {
            memcpy(m->stored_sha, sha, KILN_SHA256_HEX_LEN + 1);
            m->stored_size = kiln__cache_saved_size(m->cache);
        }
    }
    kiln__cache_close(m->cache); /* releases the key's lock */
    m->cache = NULL;
    if (st == KILN_OK)
        write_alias(m, err);
    m->cache_rep.ms += now_ms() - t0;
    if (st != KILN_OK)
        kiln_error_push(err, "model cache");
    return st;
}

/*
 * The probe's lookup of @p key: a hit is recorded in s->probe_rep.  Warnings
 * about unsound candidates are left to kiln_model_cache_lookup, which looks
 * again after a miss (so they are printed once).
 */
static kiln_status probe_open(kiln_session *s, kiln_cache_mode mode, const char *dir,
                              const char *key, const char *ext, const char *path, double t0,
                              bool *hit, kiln_error *err)
{
    char *sink_buf = NULL;
    size_t sink_len = 0;
    FILE *sink = open_memstream(&sink_buf, &sink_len);
    kiln_cache *c = NULL;
    kiln_status st = kiln__cache_open(mode, dir, key, ext, sink ? sink : s->log, &c, err);
    if (st == KILN_OK)
        st = kiln__cache_load(c, path, hit, err);
    if (st == KILN_OK && *hit) {
        kiln__free(s->probe_entry);
        s->probe_entry = kiln__strdup(kiln__cache_entry(c));
        if (key != s->probe_key)
            kiln__fmt(s->probe_key, sizeof(s->probe_key), "%s", key);
        s->probe_rep = (kiln_cache_report){"hit", s->probe_key, s->probe_entry, now_ms() - t0};
    }
    kiln__cache_close(c);
    if (sink)
        fclose(sink);
    free(sink_buf);
    if (st != KILN_OK)
        return kiln_error_push(err, "model cache");
    return KILN_OK;
}

kiln_status kiln_session_cache_probe(kiln_session *s, const char *model, const char *input_format,
                                     const char *const *extra, uint32_t nextra,
                                     const kiln_compile_options *opts, const char *path,
                                     const char *format, bool *hit, kiln_error *err)
{
    bool dummy;
    hit = hit ? hit : &dummy;
    *hit = false;
    if (!s || !model || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_cache_probe: no %s",
                           !s ? "session" : model ? "path" : "model");
    double t0 = now_ms();
    memset(&s->probe_rep, 0, sizeof(s->probe_rep));
    s->cache_alias[0] = 0;
    kiln_ctx *ctx = s->ctx;
    const char *dir = kiln_ctx_option(ctx, KILN_CACHE_DIR_OPTION);
    const char *ge_dir = kiln_ctx_option(ctx, KILN_CACHE_GE_DIR_OPTION);
    const char *ge_key = kiln_ctx_option(ctx, KILN_CACHE_GE_KEY_OPTION);
    bool ge = ge_dir && ge_dir[0] && ge_key && ge_key[0];
    if ((!ge && (!dir || !dir[0])) || (ge && dir && dir[0]) || (opts && opts->stop_step) ||
        strcmp(model, "-") == 0 || !s->have_pipeline)
        return KILN_OK; /* nothing to probe: kiln_model_cache_lookup decides */
    kiln_error e;
    kiln_error_clear(&e);
    char fname[128], ext[128];
    if (cache_format(ctx, path, format, fname, ext, sizeof(fname), &e) != KILN_OK)
        return KILN_OK; /* the lookup after import reports it */
    if (ge) /* GE's key needs no graph: the lookup can be done before import */
        return probe_open(s, KILN_CACHE_GE, ge_dir, ge_key, ext, path, t0, hit, err);
    kiln__free(s->cache_input);
    if (!(s->cache_input = kiln__strdup(model)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = kiln__sha256_file_memo(dir, model, s->cache_input_sha, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "model cache");
    const kiln_cache_key_inputs in = {
        .format = fname,
        .tuner = opts ? opts->tuner : NULL,
        .build_mode = opts && opts->struct_size >= KILN_SIZE_THROUGH(kiln_compile_options, build_mode)
                          ? opts->build_mode
                          : NULL,
        .input_path = model,
        .input_sha256 = s->cache_input_sha,
        .input_format = input_format,
        .extra = extra,
        .nextra = nextra,
        .memo_dir = dir};
    st = kiln__cache_key(ctx, &s->p, NULL, &in, s->cache_alias, err);
    if (st != KILN_OK) {
        s->cache_alias[0] = 0;
        return kiln_error_push(err, "model cache");
    }
    kiln__free(s->cache_alias_dir);
    if (!(s->cache_alias_dir = kiln__strdup(dir)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (!kiln__cache_alias_read(dir, s->cache_alias, s->probe_key))
        return KILN_OK; /* not seen: import, and the lookup computes the key */
    return probe_open(s, KILN_CACHE_AUTO, dir, s->probe_key, ext, path, t0, hit, err);
}

const char *kiln_session_cache_status(const kiln_session *s, const char **key, const char **entry,
                                      double *ms)
{
    const kiln_cache_report *r = s ? &s->probe_rep : NULL;
    if (key)
        *key = r ? r->key : NULL;
    if (entry)
        *entry = r ? r->entry : NULL;
    if (ms)
        *ms = r ? r->ms : 0.0;
    return r && r->status ? r->status : "disabled";
}

kiln_status kiln_session_write_cache_report(kiln_session *s, const char *model, const char *path,
                                            kiln_error *err)
{
    if (!s || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_write_cache_report: no %s",
                           s ? "path" : "session");
    const char *base = model ? strrchr(model, '/') : NULL;
    kiln_graph *g = kiln_graph_create(s->ctx, base ? base + 1 : model ? model : "model");
    if (!g)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_stage_run run;
    memset(&run, 0, sizeof(run));
    run.cache = &s->probe_rep;
    kiln_status st = kiln_stage_write_report(&run, g, path, err);
    kiln_graph_destroy(g);
    return st;
}

kiln_status kiln_model_cache_write(kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_cache_write: no %s",
                           m ? "path" : "model");
    if (!m->stored_sha[0] || !m->cache_entry)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "kiln_model_cache_write: nothing stored");
    return kiln__cache_copy_checked(m->cache_entry, m->stored_sha, m->stored_size, path, err);
}

const char *kiln_model_cache_status(const kiln_model *m, const char **key, const char **entry,
                                    double *ms)
{
    const kiln_cache_report *r = m ? &m->cache_rep : NULL;
    if (key)
        *key = r ? r->key : NULL;
    if (entry)
        *entry = r ? r->entry : NULL;
    if (ms)
        *ms = r ? r->ms : 0.0;
    return r && r->status ? r->status : "disabled";
}

kiln_status kiln_model_write_memory_svg(const kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write_memory_svg: no %s",
                           m ? "path" : "model");
    return kiln__memgraph_svg(m->g, path, err);
}

/* ---- paused builds ------------------------------------------------------ */

kiln_status kiln_model_write_paused(kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write_paused: no %s",
                           m ? "path" : "model");
    if (!m->run.paused_step)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_model_write_paused: the last compile did not pause at a build "
                           "step");
    kiln_session *s = m->s;
    const kiln_build_inputs bin = {.selectors = (const char *const *)s->selectors.v,
                                   .selector_enable = s->selectors.flag,
                                   .nselectors = s->selectors.n,
                                   .pass_opts = (const char *const *)s->pass_opts.v,
                                   .npass_opts = s->pass_opts.n,
                                   .options = (const char *const *)s->options.v,
                                   .noptions = s->options.n,
                                   .passes = s->passes,
                                   .tuner = m->tuner,
                                   .build_mode = m->build_mode,
                                   .build_step = m->build_step,
                                   .has_bisect = s->has_bisect,
                                   .bisect_limit = s->bisect_limit};
    return kiln_paused_state_write(path, s->ctx, &s->p, &bin, &m->run, m->g, err);
}

/* Apply the recorded overrides of @p ps to @p s, as the paused build did. */
static kiln_status replay(kiln_session *s, const kiln_paused_state *ps, kiln_error *err)
{
    kiln_status st = kiln_session_load_manifest(s, ps->manifest, err);
    const kiln_build_inputs *in = &ps->in;
    for (uint32_t i = 0; st == KILN_OK && i < in->noptions; i++) {
        const char *eq = strchr(in->options[i], '=');
        char key[512];
        if (!eq || eq == in->options[i] || (size_t)(eq - in->options[i]) >= sizeof(key))
            return kiln_errorf(err, KILN_ERR_PARAM, "option '%s' is not KEY=VALUE", in->options[i]);
        kiln__fmt(key, sizeof(key), "%.*s", (int)(eq - in->options[i]), in->options[i]);
        st = kiln_session_set_option(s, key, eq + 1, err);
    }
    if (st == KILN_OK && in->passes && (st = kiln_session_set_passes(s, in->passes, err)))
        kiln_error_push(err, "passes");
    for (uint32_t i = 0; st == KILN_OK && i < in->nselectors; i++)
        st = kiln_session_select_passes(s, in->selectors[i], in->selector_enable[i], err);
    for (uint32_t i = 0; st == KILN_OK && i < in->npass_opts; i++) {
        char buf[1024];
        kiln__fmt(buf, sizeof(buf), "%s", in->pass_opts[i]);
        char *dot = strchr(buf, '.'), *eq = strchr(buf, '=');
        if (!dot || !eq || eq < dot)
            return kiln_errorf(err, KILN_ERR_PARAM, "pass option '%s' is not PASS.KEY=VALUE",
                               in->pass_opts[i]);
        *dot = *eq = 0;
        if ((st = kiln_session_set_pass_option(s, buf, dot + 1, eq + 1, err)) != KILN_OK)
            kiln_error_push(err, "pass option %s", in->pass_opts[i]);
    }
    if (st == KILN_OK && in->has_bisect) {
        char v[32];
        kiln__fmt(v, sizeof(v), "%lld", (long long)in->bisect_limit);
        st = kiln_session_set_instrumentation(s, "bisect_limit", v, err);
    }
    return st;
}

kiln_status kiln_session_resume(kiln_session *s, const char *path, kiln_model **out,
                                kiln_error *err)
{
    if (!s || !path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_resume: no %s",
                           !s      ? "session"
                           : !path ? "path"
                                   : "output handle");
    *out = NULL;
    if (s->touched)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "kiln_session_resume: the session must be fresh (the paused state "
                           "fixes the manifest, plugins and options)");
    kiln_paused_state ps;
    memset(&ps, 0, sizeof(ps));
    /* Refuses other format versions and changed manifest or plugin files
     * before anything is loaded; then the paused build's overrides are replayed. */
    kiln_status st = kiln_paused_state_read(s->ctx, path, &ps, err);
    if (st == KILN_OK)
        st = replay(s, &ps, err);
    /* the paused build had its engines loaded (compile loads them first):
     * load them now too, so the plugin lists compare in the same order */
    if (st == KILN_OK)
        st = kiln__registry_need(s->ctx, KILN_COMP_ENGINE, err);
    if (st == KILN_OK)
        st = kiln_paused_state_check(&ps, s->ctx, &s->p, err);
    kiln_model *m = NULL;
    if (st == KILN_OK) {
        st = adopt(s, ps.graph, &m, err);
        ps.graph = NULL;
    }
    if (st == KILN_OK) {
        m->resumed = true;
        m->resume_first = ps.next;
        m->resume_bisect = ps.bisect_count;
        if (!keep_str(&m->resumed_step, ps.step) || !keep_str(&m->tuner, ps.in.tuner) ||
            !keep_str(&m->build_mode, ps.in.build_mode))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    kiln_paused_state_fini(&ps);
    if (st != KILN_OK) {
        kiln_model_destroy(m);
        return st;
    }
    *out = m;
    return KILN_OK;
}

/* ---- running ------------------------------------------------------------ */

uint32_t kiln_model_input_count(const kiln_model *m)
{
    return m ? m->nin : 0;
}

const char *kiln_model_input_name(const kiln_model *m, uint32_t i)
{
    return m && i < m->nin ? m->in[i].name : NULL;
}

int32_t kiln_model_input_index(const kiln_model *m, const char *name)
{
    for (uint32_t i = 0; m && name && i < m->nin; i++)
        if (strcmp(m->in[i].name, name) == 0 ||
            strcmp(kiln_node_name_str(m->g, m->in[i].node), name) == 0)
            return (int32_t)i;
    return -1;
}

kiln_status kiln_model_input_desc(const kiln_model *m, uint32_t i, kiln_dtype *dtype,
                                  int32_t *rank, const int64_t **dims)
{
    if (!m || i >= m->nin)
        return KILN_ERR_NOT_FOUND;
    kiln_tensor_desc *d = kiln_node_output_desc(m->g, m->in[i].node, 0);
    if (!d)
        return KILN_ERR_NOT_FOUND;
    if (dtype)
        *dtype = kiln_desc_dtype(d);
    if (rank)
        *rank = kiln_desc_rank(d);
    if (dims)
        *dims = kiln_desc_dims(d);
    return KILN_OK;
}

/* "float32 [1,3,?]" */
static void desc_str(kiln_dtype dt, int32_t rank, const int64_t *dims, char *buf, size_t size)
{
    size_t n = (size_t)kiln__fmt(buf, size, "%s [", kiln_dtype_name(dt));
    if (rank < 0)
        n += (size_t)kiln__fmt(buf + (n < size ? n : size), n < size ? size - n : 0, "?");
    for (int32_t k = 0; k < rank && n < size; k++) {
        if (dims[k] < 0)
            n += (size_t)kiln__fmt(buf + n, size - n, "%s?", k ? "," : "");
        else
            n += (size_t)kiln__fmt(buf + n, size - n, "%s%lld", k ? "," : "", (long long)dims[k]);
    }
    if (n < size)
        kiln__fmt(buf + n, size - n, "]");
}

kiln_status kiln_model_set_input_at(kiln_model *m, uint32_t i, const kiln_tensor *t,
                                    kiln_error *err)
{
    if (!m || !t)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_set_input: no %s",
                           m ? "tensor" : "model");
    if (m->io_status != KILN_OK)
        return kiln_model_io_status(m, err);
    if (i >= m->nin)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "the model has no input %u (it has %u)", i,
                           m->nin);
    model_input *in = &m->in[i];
    kiln_tensor_desc *d = kiln_node_output_desc(m->g, in->node, 0);
    int32_t rank = kiln_desc_rank(d);
    const int64_t *dims = kiln_desc_dims(d);
    bool ok = kiln_desc_dtype(d) == t->dtype && (rank < 0 || (uint32_t)rank == t->rank) &&
              (t->rank == 0 || t->dims);
    for (int32_t k = 0; ok && rank > 0 && k < rank; k++)
        ok = dims[k] < 0 || dims[k] == t->dims[k];
    /* after compiling the shapes are fixed: the input must match them exactly */
    for (int32_t k = 0; ok && m->compiled && rank > 0 && k < rank; k++)
        ok = dims[k] == t->dims[k];
    if (!ok) {
        char want[256], got[256];
        desc_str(kiln_desc_dtype(d), rank, dims, want, sizeof(want));
        desc_str(t->dtype, t->dims || !t->rank ? (int32_t)t->rank : -1, t->dims, got, sizeof(got));
        return kiln_errorf(err, KILN_ERR_INVALID, "input %s: expected %s, got %s%s", in->name,
                           want, got, m->compiled ? " (the model is compiled for that shape)" : "");
    }
    int64_t *copy = kiln__malloc(sizeof(int64_t) * (t->rank + 1u));
    if (!copy)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (t->rank)
        memcpy(copy, t->dims, sizeof(int64_t) * t->rank);
    if (!m->compiled) {
        kiln_status st = kiln_desc_set_shape(m->g, d, (int32_t)t->rank, t->dims);
        if (st != KILN_OK) {
            kiln__free(copy);
            return kiln_errorf(err, st, "input %s: cannot set its shape", in->name);
        }
    }
    kiln__free((void *)(uintptr_t)in->t.dims);
    in->t = *t;
    in->t.dims = copy;
    in->set = true;
    return KILN_OK;
}

kiln_status kiln_model_set_input(kiln_model *m, const char *name, const kiln_tensor *t,
                                 kiln_error *err)
{
    int32_t i = kiln_model_input_index(m, name);
    if (!m || !name)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_set_input: no %s",
                           m ? "name" : "model");
    if (m->io_status != KILN_OK)
        return kiln_model_io_status(m, err);
    if (i < 0) {
        char list[1024] = "";
        size_t n = 0;
        for (uint32_t k = 0; k < m->nin && n < sizeof(list); k++)
            n += (size_t)kiln__fmt(list + n, sizeof(list) - n, "%s%s", k ? ", " : "",
                                   m->in[k].name);
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "the model has no input named '%s' (inputs: %s)",
                           name, m->nin ? list : "none");
    }
    return kiln_model_set_input_at(m, (uint32_t)i, t, err);
}

/* "float32 [N,3,?,224]": symbolic dims by name (`_onnx_dim_params`), unknown '?'. */
static void desc_str_named(const kiln_tensor_desc *d, char *buf, size_t size)
{
    int32_t rank = kiln_desc_rank(d);
    size_t n = (size_t)snprintf(buf, size, "%s ", kiln_dtype_name(kiln_desc_dtype(d)));
    if (rank < 0) {
        if (n < size)
            snprintf(buf + n, size - n, "(unknown rank)");
        return;
    }
    const int64_t *dims = kiln_desc_dims(d);
    const char *const *params = NULL;
    uint32_t np = 0;
    kiln_attrs_get_list_string(kiln_desc_attrs(d), "_onnx_dim_params", &params, &np);
    if (n < size)
        n += (size_t)snprintf(buf + n, size - n, "[");
    for (int32_t k = 0; k < rank && n < size; k++) {
        if (dims[k] >= 0)
            n += (size_t)snprintf(buf + n, size - n, "%s%lld", k ? "," : "", (long long)dims[k]);
        else
            n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? "," : "",
                                  (uint32_t)k < np && params[k][0] ? params[k] : "?");
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* The root Data node called @p name (node name or its output's `_onnx_name`), or 0. */
static kiln_node_id find_input_node(kiln_graph *g, const char *name)
{
    kiln_sym data = kiln_sym_lookup(g, "Data");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); data && n; n = kiln_graph_next_node(g, n)) {
        const char *s;
        if (!is_op(g, n, data) || kiln_node_output_count(g, n) == 0)
            continue;
        if (strcmp(kiln_node_name_str(g, n), name) == 0 ||
            (kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, 0)), "_onnx_name",
                                   &s) &&
             strcmp(s, name) == 0))
            return n;
    }
    return 0;
}

void kiln_model_input_desc_str(const kiln_model *m, uint32_t i, char *buf, size_t size)
{
    if (!buf || !size)
        return;
    buf[0] = 0;
    if (m && i < m->nin)
        desc_str_named(kiln_node_output_desc(m->g, m->in[i].node, 0), buf, size);
}

kiln_status kiln_model_set_input_shape(kiln_model *m, const char *name, uint32_t rank,
                                       const int64_t *dims, kiln_error *err)
{
    if (!m || !name || (rank && !dims))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_set_input_shape: no %s",
                           !m      ? "model"
                           : !name ? "name"
                                   : "dims");
    kiln_node_id n = find_input_node(m->g, name);
    if (!n)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "the model has no input named '%s'", name);
    const kiln_tensor_desc *d = kiln_node_output_desc(m->g, n, 0);
    int32_t drank = kiln_desc_rank(d);
    const int64_t *dd = kiln_desc_dims(d);
    bool ok = drank < 0 || (uint32_t)drank == rank;
    for (uint32_t k = 0; ok && k < rank; k++)
        ok = dims[k] >= 0 && (drank < 0 || dd[k] < 0 || dd[k] == dims[k]);
    if (!ok) {
        char want[512];
        desc_str_named(d, want, sizeof(want));
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "input %s is declared %s; only its unknown dims can be fixed", name,
                           want);
    }
    char key[600], val[512];
    size_t len = 0;
    val[0] = 0;
    for (uint32_t k = 0; k < rank && len < sizeof(val); k++)
        len += (size_t)snprintf(val + len, sizeof(val) - len, "%s%lld", k ? "," : "",
                                (long long)dims[k]);
    if ((size_t)snprintf(key, sizeof(key), "kiln.input_shape.%s", kiln_node_name_str(m->g, n)) >=
            sizeof(key) ||
        len >= sizeof(val))
        return kiln_errorf(err, KILN_ERR_PARAM, "input %s: too long a name or too many dims", name);
    return kiln_session_set_option(m->s, key, val, err);
}

/* The runtime named by the session option, else the first one loaded. */
static kiln_status pick_runtime(kiln_model *m, const kiln_component *after, kiln_error *err)
{
    kiln_ctx *ctx = m->s->ctx;
    const char *want = kiln_ctx_option(ctx, RUNTIME_OPTION);
    /* runtimes, and the engines whose kernels they call, load before running */
    kiln_status st;
    if ((st = kiln__registry_need(ctx, KILN_COMP_RUNTIME, err)) != KILN_OK ||
        (st = kiln__registry_need(ctx, KILN_COMP_ENGINE, err)) != KILN_OK)
        return st;
    if (want && want[0]) {
        if (!(m->rt = kiln_registry_find(ctx, KILN_COMP_RUNTIME, want))) {
            char list[512] = "";
            size_t n = 0;
            for (uint32_t i = 0; i < kiln_registry_count(ctx) && n < sizeof(list); i++)
                if (kiln_registry_at(ctx, i)->kind == KILN_COMP_RUNTIME)
                    n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", n ? ", " : "",
                                          kiln_registry_at(ctx, i)->name);
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "option %s names runtime '%s', which no loaded plugin provides "
                               "(loaded runtimes: %s)",
                               RUNTIME_OPTION, want, n ? list : "none");
        }
        return KILN_OK;
    }
    /* the first loaded runtime, or the one after @p after (which declined the model) */
    bool past = after == NULL;
    for (uint32_t i = 0; i < kiln_registry_count(ctx) && !m->rt; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind == KILN_COMP_RUNTIME && past)
            m->rt = c;
        past |= c == after;
    }
    if (!m->rt && after)
        return KILN_ERR_NOT_FOUND; /* the caller keeps the decline's message */
    if (!m->rt)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "no loaded plugin provides a runtime component (running needs one, "
                           "e.g. libkiln_runtime_seq.so, and an engine with kernels, e.g. "
                           "libkiln_vector.so); add them to the manifest");
    return KILN_OK;
}

static kiln_status need_compiled(const kiln_model *m, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID, "run: no model");
    if (!m->compiled)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "run: the model is not compiled (kiln_model_compile ran %s)",
                           m->run.paused_step ? "only to a build step" : "not, or failed");
    return kiln_model_io_status(m, err);
}

static kiln_status load_one_runtime(kiln_model *m, kiln_error *err);

/*
 * Pick the runtime, create its instance and load the graph (once).  Without
 * the option kiln.runtime the loaded runtimes are tried in order: one whose
 * load declines the model with KILN_ERR_UNSUPPORTED (the multistream runtime
 * needs static shapes) gives way to the next, which runs it instead.
 */
static kiln_status load_runtime(kiln_model *m, kiln_error *err)
{
    if (m->loaded)
        return KILN_OK;
    const char *want = kiln_ctx_option(m->s->ctx, RUNTIME_OPTION);
    const bool chosen = m->rt || (want && want[0]);
    kiln_status st = m->rt ? KILN_OK : pick_runtime(m, NULL, err);
    while (st == KILN_OK && (st = load_one_runtime(m, err)) == KILN_ERR_UNSUPPORTED && !chosen) {
        const kiln_component *declined = m->rt;
        release_runtime(m);
        if (pick_runtime(m, declined, err) != KILN_OK)
            return KILN_ERR_UNSUPPORTED; /* no other runtime: err says why the last declined */
        kiln_error_clear(err);
        st = KILN_OK;
    }
    return st;
}


/* Session option @p skey as runtime option @p rkey of @p m's runtime, when the
 * runtime declares it and the caller did not set it with
 * kiln_model_set_runtime_option. */
static kiln_status session_runtime_option(kiln_model *m, const char *skey, const char *rkey,
                                          kiln_error *err)
{
    const char *v = kiln_ctx_option(m->s->ctx, skey);
    size_t n = strlen(rkey);
    for (uint32_t i = 0; i < m->rt_opts.n; i++)
        if (strncmp(m->rt_opts.v[i], rkey, n) == 0 && m->rt_opts.v[i][n] == '=')
            return KILN_OK;
    if (!v || !v[0] || !m->rt_options || !kiln__options_lookup(m->rt_options, rkey))
        return KILN_OK;
    return kiln__options_set_text(m->rt_options, rkey, v, err);
}

static kiln_status load_one_runtime(kiln_model *m, kiln_error *err)
{
    kiln_status st = KILN_OK;
    const kiln_runtime_desc *rd = &m->rt->d.runtime;
    const char *plugin = kiln__comp_plugin(m->rt);
    /* the instance's options: its schema's defaults, then what the caller set */
    if (!m->rt_options && rd->option_count &&
        !(m->rt_options = kiln__options_create(rd->options, rd->option_count)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->rt_opts.n; i++) {
        char key[256];
        const char *kv = m->rt_opts.v[i], *eq = strchr(kv, '=');
        kiln__fmt(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
        if (!m->rt_options || !kiln__options_lookup(m->rt_options, key))
            st = kiln_errorf(err, KILN_ERR_UNSUPPORTED, "runtime %s (plugin %s) has no %s option",
                             m->rt->name, plugin ? plugin : "<built-in>", key);
        else
            st = kiln__options_set_text(m->rt_options, key, eq + 1, err);
        if (st != KILN_OK)
            return st;
    }
    if (m->profiling && m->rt_options && kiln__options_lookup(m->rt_options, "profile") &&
        (st = kiln__options_set_text(m->rt_options, "profile", "true", err)) != KILN_OK)
        return st;
    /* session options a runtime may take (kiln.allocator, the manifest's
     * "allocator"; kiln.lower_control_flow), unless the caller set the runtime
     * option itself */
    if ((st = session_runtime_option(m, "kiln.allocator", "allocator", err)) != KILN_OK ||
        (st = session_runtime_option(m, "kiln.lower_control_flow", "lower_control_flow", err)) !=
            KILN_OK)
        return st;
    kiln_activity act = KILN_ACTIVITY(plugin, m->rt->name, "runtime create", m->g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    if (!m->rt_inst && rd->create)
        st = rd->create(m->rt_options, err, &m->rt_inst);
    act.stage = "runtime load";
    if (st == KILN_OK)
        st = rd->load(m->rt_inst, m->g, &m->loaded, err);
    kiln__activity_leave(prev);
    if (st != KILN_OK)
        kiln_error_push(err, "runtime %s (plugin %s)", m->rt->name, plugin ? plugin : "<built-in>");
    return st;
}

kiln_status kiln_model_set_runtime_option(kiln_model *m, const char *key, const char *value,
                                          kiln_error *err)
{
    if (!m || !key || !key[0] || !value || strchr(key, '=') || strlen(key) >= 256)
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "runtime option: a model, a key (no '=') and a value are needed");
    size_t n = strlen(key) + strlen(value) + 2;
    char *kv = kiln__malloc(n);
    if (!kv)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln__fmt(kv, n, "%s=%s", key, value);
    kiln_status st = strv_add(&m->rt_opts, kv, false, err);
    kiln__free(kv);
    release_runtime(m); /* a loaded instance was created with the old options */
    return st;
}

const char *kiln_model_runtime(const kiln_model *m)
{
    return m && m->loaded && m->rt ? m->rt->name : NULL;
}

kiln_status kiln_model_set_profiling(kiln_model *m, bool on, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_PARAM, "kiln_model_set_profiling: no model");
    if (m->profiling != on)
        release_runtime(m); /* a loaded instance was created without the option */
    m->profiling = on;
    return KILN_OK;
}

kiln_status kiln_model_profile(const kiln_model *m, kiln_run_profile *out, kiln_error *err)
{
    if (!m || !out || out->struct_size < sizeof(kiln_run_profile))
        return kiln_errorf(err, KILN_ERR_PARAM, "kiln_model_profile: no model or profile struct");
    if (!m->loaded || !m->rt)
        return kiln_errorf(err, KILN_ERR_INVALID, "profile: the model has not run");
    const kiln_runtime_desc *rd = &m->rt->d.runtime;
    if (rd->struct_size < offsetof(kiln_runtime_desc, reserved) || !rd->profile)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "runtime %s (plugin %s) cannot profile a "
                           "run (it has no profile callback)", m->rt->name,
                           kiln__comp_plugin(m->rt) ? kiln__comp_plugin(m->rt) : "<built-in>");
    uint32_t size = out->struct_size;
    memset(out, 0, sizeof(*out));
    out->struct_size = size;
    kiln_status st = rd->profile(m->rt_inst, m->loaded, out, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "runtime %s", m->rt->name);
    return KILN_OK;
}

kiln_status kiln_model_write_trace(const kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_PARAM, "kiln_model_write_trace: no model or path");
    if (!m->profiling)
        return kiln_errorf(err, KILN_ERR_INVALID, "trace %s: profiling was off for the run "
                           "(kiln_model_set_profiling)", path);
    kiln_run_profile prof;
    memset(&prof, 0, sizeof(prof));
    prof.struct_size = sizeof(prof);
    kiln_status st = kiln_model_profile(m, &prof, err);
    if (st == KILN_OK && prof.task_count == 0 &&
        (!m->rt_options || !kiln__options_lookup(m->rt_options, "profile")))
        st = kiln_errorf(err, KILN_ERR_UNSUPPORTED, "runtime %s has no 'profile' option, so it "
                         "recorded no task", m->rt->name);
    if (st == KILN_OK)
        st = kiln__trace_write(&prof, m->rt->name, path, err);
    return st != KILN_OK ? kiln_error_push(err, "--trace %s", path) : KILN_OK;
}

kiln_status kiln_model_prepare(kiln_model *m, kiln_error *err)
{
    kiln_status st = need_compiled(m, err);
    return st != KILN_OK ? st : load_runtime(m, err);
}

kiln_status kiln_model_run(kiln_model *m, kiln_error *err)
{
    kiln_status st = need_compiled(m, err);
    if (st != KILN_OK)
        return st;
    for (uint32_t i = 0; i < m->nin; i++)
        if (!m->in[i].set) {
            char want[256];
            kiln_tensor_desc *d = kiln_node_output_desc(m->g, m->in[i].node, 0);
            desc_str(kiln_desc_dtype(d), kiln_desc_rank(d), kiln_desc_dims(d), want, sizeof(want));
            return kiln_errorf(err, KILN_ERR_INVALID, "run: missing input %s (index %u, %s)",
                               m->in[i].name, i, want);
        }
    release_outputs(m);
    if ((st = load_runtime(m, err)) != KILN_OK)
        return st;
    if (!m->out && !(m->out = kiln__calloc(m->nout + 1u, sizeof(kiln_tensor))))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_tensor *in = kiln__calloc(m->nin + 1u, sizeof(kiln_tensor));
    if (!in)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->nin; i++)
        in[i] = m->in[i].t;
    const char *plugin = kiln__comp_plugin(m->rt);
    kiln_activity act = KILN_ACTIVITY(plugin, m->rt->name, "runtime run", m->g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = m->rt->d.runtime.run(m->rt_inst, m->loaded, in, m->nin, m->out, m->nout, err);
    kiln__activity_leave(prev);
    kiln__free(in);
    if (st != KILN_OK) {
        release_outputs(m);
        return kiln_error_push(err, "runtime %s (plugin %s)", m->rt->name,
                               plugin ? plugin : "<built-in>");
    }
    m->have_out = true;
    return KILN_OK;
}

uint32_t kiln_model_output_count(const kiln_model *m)
{
    return m ? m->nout : 0;
}

const char *kiln_model_output_name(const kiln_model *m, uint32_t j)
{
    return m && j < m->nout ? m->out_names[j] : NULL;
}

int32_t kiln_model_output_index(const kiln_model *m, const char *name)
{
    for (uint32_t j = 0; m && name && j < m->nout; j++)
        if (strcmp(m->out_names[j], name) == 0)
            return (int32_t)j;
    return -1;
}

const kiln_tensor *kiln_model_output(const kiln_model *m, uint32_t j)
{
    return m && m->have_out && j < m->nout ? &m->out[j] : NULL;
}

/* ---- files and the output set ------------------------------------------- */

kiln_status kiln_output_write(const char *path, kiln_output_write_fn fn, void *ud, kiln_error *err)
{
    if (!path || !fn)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_output_write: no %s",
                           path ? "write function" : "path");
    return kiln_file_write_atomic(path, fn, ud, err);
}

void kiln_output_set_begin(void) { kiln_file_defer_begin(); }

kiln_status kiln_output_set_commit(kiln_error *err) { return kiln_file_defer_commit(err); }

void kiln_output_set_abort(void) { kiln_file_defer_abort(); }

void kiln_output_cleanup_on_signals(void) { kiln_file_cleanup_on_signals(); }

kiln_status kiln_input_check(const char *path, kiln_error *err)
{
    if (!path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_input_check: no path");
    return kiln_file_check_input(path, err);
}

kiln_status kiln_input_read(const char *path, char **buf, size_t *len, kiln_error *err)
{
    if (!path || !buf)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_input_read: no %s",
                           path ? "buffer" : "path");
    return kiln_file_read_all(path, buf, len, err);
}

/* ---- memory planning of a bare problem (kiln memplan, benchmarks) ---------- */

kiln_status kiln_session_mem_plan(kiln_session *s, const char *planner, const char *const *opts,
                                  uint32_t nopts, kiln_mem_problem *p, int64_t *peak,
                                  kiln_error *err)
{
    if (!s || !p || !peak)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_mem_plan: NULL argument");
    if (!planner)
        planner = kiln_ctx_option(s->ctx, "kiln.memory_planner");
    if (!planner || !planner[0])
        planner = "kiln";
    const kiln_component *c = NULL;
    kiln_status st = kiln__registry_find_loading(s->ctx, KILN_COMP_MEM_PLANNER, planner, &c, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "memory planner %s", planner);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "no loaded plugin provides memory planner "
                           "%s (kiln plugins lists the planners)", planner);
    kiln_options *o = kiln__options_create(c->d.planner.options, c->d.planner.option_count);
    kiln_graph *g = kiln_graph_create(s->ctx, "memplan");
    if (!o || !g) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < nopts; i++) {
        const char *eq = opts[i] ? strchr(opts[i], '=') : NULL;
        char key[256];
        if (!eq || (size_t)(eq - opts[i]) >= sizeof(key) || eq == opts[i]) {
            st = kiln_errorf(err, KILN_ERR_PARAM, "memory planner %s: option '%s' is not "
                             "KEY=VALUE", planner, opts[i] ? opts[i] : "");
            goto out;
        }
        memcpy(key, opts[i], (size_t)(eq - opts[i]));
        key[eq - opts[i]] = 0;
        if ((st = kiln__options_set_text(o, key, eq + 1, err)) != KILN_OK) {
            kiln_error_push(err, "memory planner %s", planner);
            goto out;
        }
    }
    st = kiln_mem_plan_run(g, planner, o, p, peak, err);
out:
    kiln__options_destroy(o);
    if (g)
        kiln_graph_destroy(g);
    return st;
}

/* ---- runtime allocator stacks (kiln_alloc_api.h) ----------------------------- */

kiln_status kiln_session_alloc_stack_create(kiln_session *s, const char *name,
                                            const char *const *opts, uint32_t nopts,
                                            const kiln_alloc_config *cfg,
                                            kiln_alloc_stack **out, kiln_error *err)
{
    if (!s)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_alloc_stack_create: NULL session");
    kiln_graph *g = kiln_graph_create(s->ctx, "alloc");
    if (!g)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = kiln_alloc_stack_create(g, name, opts, nopts, cfg, out, err);
    kiln_graph_destroy(g);
    return st;
}
