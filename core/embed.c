/*
 * embed.c - the embedding API (plugin-api/kiln/kiln_embed.h): sessions and
 * models over the kernel's context, manifest loader, stage driver, graph I/O
 * and the runtime components.
 *
 * Design
 *   A session is a context plus the resolved pipeline of its manifest; the
 *   overrides edit that pipeline in place, in the order the caller applies
 *   them (as the command line does: manifest, --option, --passes, selectors,
 *   --pass-opt, instrumentation).  A model is a root graph with what running
 *   it needs: its inputs (root Data nodes by `index`, named by `_onnx_name`
 *   or node name) and output names, both taken at import, before passes
 *   rename or renumber anything; the stage run of its last compile; and,
 *   once run, the runtime instance and the loaded graph, kept for the next
 *   run.  File formats are "json" and "dot" (kiln's own) or a frontend
 *   plugin, by name or by the extension it declares.
 */
#include "ctx.h"
#include "crash.h"
#include "fileio.h"
#include "graph_dot.h"
#include "graph_int.h"
#include "graph_json.h"
#include "manifest.h"
#include "plugin.h"
#include "stage.h"
#include "verify.h"
#include <kiln/kiln_embed.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

#define RUNTIME_OPTION "kiln.runtime"

struct kiln_session {
    kiln_ctx *ctx;
    kiln_pipeline p;
    bool have_pipeline;
    FILE *log;
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
    kiln_stage_run run;
    bool compiled;
    /* runtime state */
    const kiln_component *rt;
    void *rt_inst, *loaded;
    kiln_tensor *out; /* nout tensors of the last run */
    bool have_out;
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
    return s;
}

void kiln_session_destroy(kiln_session *s)
{
    if (!s)
        return;
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

kiln_status kiln_session_load_manifest(kiln_session *s, const char *path, kiln_error *err)
{
    if (!s)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_load_manifest: no session");
    s->p.instr.log = s->log;
    kiln_status st = kiln_manifest_load(s->ctx, path ? path : kiln_default_manifest(), &s->p, err);
    s->have_pipeline = st == KILN_OK;
    return st;
}

kiln_status kiln_session_load_plugin(kiln_session *s, const char *path, kiln_error *err)
{
    if (!s || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_session_load_plugin: no %s",
                           s ? "path" : "session");
    return kiln_plugin_load(s->ctx, path, NULL, err);
}

kiln_status kiln_session_set_option(kiln_session *s, const char *key, const char *value,
                                    kiln_error *err)
{
    if (!s || !key || !key[0] || !value)
        return kiln_errorf(err, KILN_ERR_PARAM, "session option: a key and a value are needed");
    kiln_status st = kiln_ctx_set_option(s->ctx, key, value);
    return st == KILN_OK ? st : kiln_errorf(err, st, "session option %s: out of memory", key);
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
    if (st == KILN_OK && (st = kiln__pipeline_parse_text(s->ctx, text ? text : "", &s->p, err)))
        kiln_error_push(err, "passes \"%s\"", text ? text : "");
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
    return st;
}

kiln_status kiln_session_set_pass_option(kiln_session *s, const char *pass, const char *key,
                                         const char *value, kiln_error *err)
{
    kiln_status st = need_pipeline(s, "pass option", err);
    if (st == KILN_OK && (!pass || !key || !value))
        st = kiln_errorf(err, KILN_ERR_PARAM, "pass option: a pass, a key and a value are needed");
    if (st == KILN_OK && (st = kiln_manifest_set_pass_option(&s->p, pass, key, value, err)))
        kiln_error_push(err, "pass option %s.%s=%s", pass, key, value);
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
        return KILN_OK;
    }
    return kiln_errorf(err, KILN_ERR_PARAM,
                       "unknown instrumentation setting '%s' (verify_each, time_passes, "
                       "print_after, dump_dir, bisect_limit)",
                       key);
}

void kiln_session_set_verbosity(kiln_session *s, int verbosity)
{
    if (s)
        s->ctx->verbosity = verbosity;
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

uint32_t kiln_session_plugin_count(const kiln_session *s)
{
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

/* ---- formats ------------------------------------------------------------ */

static const char *ext_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

/* Does comma-separated list @p list contain @p item exactly? */
static bool list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    if (!n)
        return false;
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, item, n) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/*
 * The frontend for @p format (a frontend name) or, when NULL, for the
 * extension of @p path, with the wanted hook.  NULL when none.
 */
static const kiln_component *frontend_for(kiln_ctx *ctx, const char *format, const char *path,
                                          bool want_import)
{
    const char *ext = ext_of(path);
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_FRONTEND)
            continue;
        if (want_import ? !c->d.frontend.import_file : !c->d.frontend.export_file)
            continue;
        if (format ? strcmp(c->name, format) == 0
                   : c->d.frontend.extensions && list_has(c->d.frontend.extensions, ext))
            return c;
    }
    return NULL;
}

/* "json" / "dot" by @p format or extension; NULL otherwise. */
static const char *own_format(const char *format, const char *path)
{
    const char *f = format ? format : ext_of(path)[0] ? ext_of(path) + 1 : "";
    return strcmp(f, "json") == 0 ? "json" : strcmp(f, "dot") == 0 ? "dot" : NULL;
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

static kiln_status adopt(kiln_session *s, kiln_graph *g, kiln_model **out, kiln_error *err)
{
    kiln_model *m = kiln__calloc(1, sizeof(*m));
    if (!m) {
        kiln_graph_destroy(g);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    m->s = s;
    m->g = g;
    kiln_status st = describe_io(m, err);
    if (st != KILN_OK) {
        kiln_model_destroy(m);
        return st;
    }
    *out = m;
    return KILN_OK;
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
    const char *own = own_format(format, path);
    if (own && strcmp(own, "json") == 0) {
        if ((st = kiln_graph_read_json_file(s->ctx, path, &g, err)) != KILN_OK)
            return st;
        return adopt(s, g, out, err);
    }
    const kiln_component *fe = own ? NULL : frontend_for(s->ctx, format, path, true);
    if (!fe) {
        if (format)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "%s: no loaded plugin imports format '%s' (kiln reads json "
                               "itself; list a frontend plugin in the manifest)",
                               path, format);
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no loaded plugin imports '%s' files (kiln reads .json itself; "
                           "list a frontend plugin in the manifest)",
                           path, ext_of(path)[0] ? ext_of(path) : "extension-less");
    }
    if (access(path, R_OK) != 0)
        return kiln_errorf(err, errno == ENOENT ? KILN_ERR_NOT_FOUND : KILN_ERR_IO,
                           "cannot read %s: %s", path, strerror(errno));
    const char *base = strrchr(path, '/');
    if (!(g = kiln_graph_create(s->ctx, base ? base + 1 : path)))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(fe), fe->name, "import", g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = fe->d.frontend.import_file(g, path, err);
    kiln__activity_leave(prev);
    if (st == KILN_OK && (st = kiln_graph_verify(g, err)) != KILN_OK)
        kiln_error_push(err, "file %s", path);
    if (st != KILN_OK) {
        kiln_graph_destroy(g);
        return kiln_error_push(err, "frontend %s", fe->name);
    }
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
    if (m->loaded && m->rt && m->rt->d.runtime.unload)
        m->rt->d.runtime.unload(m->rt_inst, m->loaded);
    if (m->rt_inst && m->rt && m->rt->d.runtime.destroy)
        m->rt->d.runtime.destroy(m->rt_inst);
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
    kiln_stage_run_fini(&m->run);
    if (m->g)
        kiln_graph_destroy(m->g);
    kiln__free(m);
}

kiln_graph *kiln_model_graph(kiln_model *m)
{
    return m ? m->g : NULL;
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
    kiln_stage_id stage;
    bool after;
    if (opts && opts->stop_step && !kiln_build_step_lookup(opts->stop_step, &stage, &after))
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "unknown build step '%s' (before_ub_match, after_ub_match, after_build)",
                           opts->stop_step);
    release_runtime(m); /* the graph changes: a loaded copy would be stale */
    kiln_stage_run_fini(&m->run);
    memset(&m->run, 0, sizeof(m->run));
    m->run.stop_step = opts ? opts->stop_step : NULL;
    m->run.tuner = opts ? opts->tuner : NULL;
    m->compiled = false;
    st = kiln_stage_run_pipeline(m->s->ctx, &m->s->p, m->g, &m->run, err);
    if (st != KILN_OK)
        return st;
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

kiln_status kiln_model_verify(const kiln_model *m, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_verify: no model");
    return kiln_graph_verify(m->g, err);
}

kiln_status kiln_model_write(kiln_model *m, const char *path, const char *format,
                             kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write: no %s",
                           m ? "path" : "model");
    kiln_status st = kiln_graph_verify(m->g, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "not writing %s", path);
    const char *own = own_format(format, path);
    if (own && strcmp(own, "json") == 0)
        return kiln_graph_write_json_file(m->g, path, err);
    if (own)
        return kiln_graph_write_dot_file(m->g, path, err);
    kiln_ctx *ctx = m->s->ctx;
    const kiln_component *fe = frontend_for(ctx, format, path, false);
    if (!fe)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no loaded plugin writes %s%s%s (kiln writes json and dot itself)",
                           path, format ? "format '" : "'",
                           format ? format : ext_of(path)[0] ? ext_of(path) : "extension-less",
                           format ? "'" : "' files");
    /* The exporter writes a fresh temporary beside the target (mkstemp: never
     * a name someone else prepared); it is fsynced and renamed into place. */
    char tmp[PATH_MAX + 32];
    if ((size_t)kiln__fmt(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= sizeof(tmp))
        return kiln_errorf(err, KILN_ERR_IO, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot create a temporary file beside %s: %s", path,
                           strerror(errno));
    close(fd);
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(fe), fe->name, "export", m->g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = fe->d.frontend.export_file(m->g, tmp, err);
    kiln__activity_leave(prev);
    if (st == KILN_OK)
        return kiln_file_commit(tmp, path, err);
    unlink(tmp);
    kiln_error_push(err, "file %s", path);
    return kiln_error_push(err, "frontend %s", fe->name);
}

char *kiln_model_to_json(const kiln_model *m, kiln_error *err)
{
    if (!m) {
        kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_to_json: no model");
        return NULL;
    }
    char *text = kiln_graph_to_json_string(m->g, err);
    if (!text)
        return NULL;
    /* kiln_free releases what kiln__malloc returned: both are the host allocator. */
    return text;
}

kiln_status kiln_model_write_report(const kiln_model *m, const char *path, kiln_error *err)
{
    if (!m || !path)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_model_write_report: no %s",
                           m ? "path" : "model");
    return kiln_stage_write_report(&m->run, m->g, path, err);
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

/* The runtime named by the session option, else the first one loaded. */
static kiln_status pick_runtime(kiln_model *m, kiln_error *err)
{
    kiln_ctx *ctx = m->s->ctx;
    const char *want = kiln_ctx_option(ctx, RUNTIME_OPTION);
    if (want && want[0]) {
        if (!(m->rt = kiln_registry_find(ctx, KILN_COMP_RUNTIME, want)))
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "option %s names runtime '%s', which no loaded plugin provides",
                               RUNTIME_OPTION, want);
        return KILN_OK;
    }
    for (uint32_t i = 0; i < kiln_registry_count(ctx) && !m->rt; i++)
        if (kiln_registry_at(ctx, i)->kind == KILN_COMP_RUNTIME)
            m->rt = kiln_registry_at(ctx, i);
    if (!m->rt)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "no loaded plugin provides a runtime component (running needs one, "
                           "e.g. libkiln_runtime_seq.so, and an engine with kernels, e.g. "
                           "libkiln_cpu.so); add them to the manifest");
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
    return KILN_OK;
}

/* Pick the runtime, create its instance and load the graph (once). */
static kiln_status load_runtime(kiln_model *m, kiln_error *err)
{
    if (m->loaded)
        return KILN_OK;
    kiln_status st = m->rt ? KILN_OK : pick_runtime(m, err);
    if (st != KILN_OK)
        return st;
    const kiln_runtime_desc *rd = &m->rt->d.runtime;
    const char *plugin = kiln__comp_plugin(m->rt);
    kiln_activity act = KILN_ACTIVITY(plugin, m->rt->name, "runtime create", m->g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    if (!m->rt_inst && rd->create)
        st = rd->create(NULL, err, &m->rt_inst);
    act.stage = "runtime load";
    if (st == KILN_OK)
        st = rd->load(m->rt_inst, m->g, &m->loaded, err);
    kiln__activity_leave(prev);
    if (st != KILN_OK)
        kiln_error_push(err, "runtime %s (plugin %s)", m->rt->name, plugin ? plugin : "<built-in>");
    return st;
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
