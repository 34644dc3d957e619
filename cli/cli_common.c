/*
 * cli_common.c - the session, model loading, output writing and pipeline
 * set-up shared by the verbs.  Formats are chosen by extension: .json (kiln
 * graph JSON), .dot (Graphviz, output only); anything else goes to a frontend
 * plugin that declares the extension, and a clear error when none does.
 */
#include "cli.h"
#include "graph_json.h"
#include "graph_dot.h"
#include "fileio.h"
#include <unistd.h>

int kiln_cli_fail(const kiln_error *err)
{
    static char buf[KILN_ERROR_TEXT_SIZE];
    kiln_error_format(err, buf, sizeof(buf));
    fprintf(stderr, "kiln: %s\n", buf);
    return 1;
}

int kiln_cli_need(const kiln_cli *c, uint32_t n, const char *what)
{
    if (c->npositional != n) {
        fprintf(stderr, "kiln %s: expected %s\n", c->verb, what);
        return 2;
    }
    return 0;
}

int kiln_cli_model_only(const kiln_cli *c, const char *why)
{
    if (kiln_cli_need(c, 1, "one MODEL argument"))
        return 2;
    if (c->output || c->passes || c->resume || c->build_step || c->build_mode) {
        fprintf(stderr, "kiln %s: -o, --passes, --resume and build steps do not apply (%s)\n",
                c->verb, why);
        return 2;
    }
    return 0;
}

bool kiln_cli_session_ctx(kiln_cli_session *s)
{
    memset(s, 0, sizeof(*s));
    kiln_error_clear(&s->err);
    s->ctx = kiln_ctx_create();
    if (!s->ctx)
        fprintf(stderr, "kiln: out of memory\n");
    return s->ctx != NULL;
}

bool kiln_cli_session_begin(kiln_cli *c, kiln_cli_session *s)
{
    if (!kiln_cli_session_ctx(s))
        return false;
    if (kiln_cli_pipeline(c, s->ctx, &s->p, &s->err) != KILN_OK) {
        kiln_cli_fail(&s->err);
        return false;
    }
    return true;
}

void kiln_cli_session_end(kiln_cli_session *s)
{
    kiln_stage_run_fini(&s->run);
    kiln_pipeline_clear(&s->p);
    if (s->g)
        kiln_graph_destroy(s->g);
    kiln_ctx_destroy(s->ctx);
}

const char *kiln_cli_default_manifest(char *buf, size_t size)
{
    snprintf(buf, size, "%s/../share/kiln/manifests/default.json", kiln_exe_dir());
    return buf;
}

static const char *ext_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

/* The frontend whose extension list contains @p ext and has the wanted hook. */
static const kiln_component *frontend_for(kiln_ctx *ctx, const char *ext, bool want_import)
{
    size_t n = strlen(ext);
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_FRONTEND || !c->d.frontend.extensions)
            continue;
        if (want_import ? !c->d.frontend.import_file : !c->d.frontend.export_file)
            continue;
        for (const char *p = c->d.frontend.extensions; (p = strstr(p, ext)); p += n)
            if ((p == c->d.frontend.extensions || p[-1] == ',') && (p[n] == ',' || !p[n]))
                return c;
    }
    return NULL;
}

kiln_status kiln_cli_load_model(kiln_ctx *ctx, const char *path, kiln_graph **out, kiln_error *err)
{
    const char *ext = ext_of(path);
    if (strcmp(ext, ".json") == 0)
        return kiln_graph_read_json_file(ctx, path, out, err);
    const kiln_component *fe = frontend_for(ctx, ext, true);
    if (!fe)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no loaded plugin imports '%s' files (kiln reads .json itself; "
                           "list a frontend plugin in the manifest)",
                           path, ext[0] ? ext : "extension-less");
    if (access(path, R_OK) != 0)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "cannot read %s", path);
    const char *base = strrchr(path, '/');
    kiln_graph *g = kiln_graph_create(ctx, base ? base + 1 : path);
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
        kiln_error_push(err, "frontend %s", fe->name);
        return st;
    }
    *out = g;
    return KILN_OK;
}

kiln_status kiln_cli_write_output(kiln_ctx *ctx, kiln_graph *g, const char *path, kiln_error *err)
{
    const char *ext = ext_of(path);
    if (strcmp(ext, ".json") == 0)
        return kiln_graph_write_json_file(g, path, err);
    if (strcmp(ext, ".dot") == 0)
        return kiln_graph_write_dot_file(g, path, err);
    const kiln_component *fe = frontend_for(ctx, ext, false);
    if (!fe)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: no loaded plugin writes '%s' files (kiln writes .json and .dot "
                           "itself)",
                           path, ext[0] ? ext : "extension-less");
    /* Exporters write a temporary file that is renamed into place on success. */
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.kiln-tmp-%ld", path, (long)getpid());
    kiln_status st = fe->d.frontend.export_file(g, tmp, err);
    if (st == KILN_OK)
        return kiln_file_commit(tmp, path, err); /* fsync + rename (unlinks on failure) */
    unlink(tmp);
    return kiln_error_push(err, "frontend %s", fe->name);
}

kiln_status kiln_cli_pipeline(kiln_cli *c, kiln_ctx *ctx, kiln_pipeline *p, kiln_error *err)
{
    char def[4096];
    const char *m = c->manifest ? c->manifest : kiln_cli_default_manifest(def, sizeof(def));
    ctx->verbosity = c->verbosity;
    p->instr.log = stderr;
    kiln_status st = kiln_manifest_load(ctx, m, p, err);
    if (st != KILN_OK)
        return st;
    for (uint32_t i = 0; i < c->nsession; i++) {
        char key[512];
        const char *eq = strchr(c->session[i], '=');
        if (!eq || eq == c->session[i] || (size_t)(eq - c->session[i]) >= sizeof(key))
            return kiln_errorf(err, KILN_ERR_PARAM, "--option expects KEY=VALUE, got '%s'",
                               c->session[i]);
        memcpy(key, c->session[i], (size_t)(eq - c->session[i]));
        key[eq - c->session[i]] = 0;
        if ((st = kiln_ctx_set_option(ctx, key, eq + 1)) != KILN_OK)
            return kiln_errorf(err, st, "out of memory");
    }
    if (c->passes && (st = kiln__pipeline_parse_text(ctx, c->passes, p, err)) != KILN_OK) {
        kiln_error_push(err, "--passes");
        return st;
    }
    if (c->nselectors && (st = kiln_manifest_apply_selectors(p, c->selectors, c->selector_enable,
                                                             c->nselectors, err)) != KILN_OK)
        return st;
    for (uint32_t i = 0; i < c->npass_opts; i++) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s", c->pass_opts[i]);
        char *dot = strchr(buf, '.'), *eq = strchr(buf, '=');
        if (!dot || !eq || eq < dot)
            return kiln_errorf(err, KILN_ERR_PARAM, "--pass-opt expects PASS.KEY=VALUE, got '%s'",
                               c->pass_opts[i]);
        *dot = 0;
        *eq = 0;
        if ((st = kiln_manifest_set_pass_option(p, buf, dot + 1, eq + 1, err)) != KILN_OK) {
            kiln_error_push(err, "--pass-opt %s", c->pass_opts[i]);
            return st;
        }
    }
    if (c->verify_each)
        p->instr.verify_each = true;
    if (c->time_passes)
        p->instr.time_passes = true;
    if (c->has_bisect)
        p->instr.bisect_limit = c->bisect_limit;
    if (c->print_after) {
        kiln__free(p->instr.print_after);
        p->instr.print_after = kiln__strdup(c->print_after);
    }
    if (c->dump_dir) {
        kiln__free(p->instr.dump_dir);
        p->instr.dump_dir = kiln__strdup(c->dump_dir);
    }
    return KILN_OK;
}
