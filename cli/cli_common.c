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
#include "tensor_io.h"
#include <errno.h>
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

/*
 * The session options kiln itself reads (cli/run.c, the CPU engine's
 * InferShapes).  An entry ending in '.' is a prefix that needs a suffix
 * (the input's name).  Keys outside the "kiln." namespace belong to plugins
 * and are not checked.
 */
static const char *const kiln_option_keys[] = {"kiln.runtime", "kiln.input_shape.",
                                               "kiln.input_value."};

bool kiln_cli_option_key_known(const char *key, const char **hint)
{
    enum { N = sizeof(kiln_option_keys) / sizeof(kiln_option_keys[0]) };
    *hint = NULL;
    if (strncmp(key, "kiln.", 5) != 0)
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

/* Exit-1 error for an unknown kiln.* key already set in @p ctx (manifest "options"). */
static kiln_status check_option_keys(kiln_ctx *ctx, const char *manifest, kiln_error *err)
{
    for (uint32_t i = 0; i < ctx->nsession_options; i++) {
        const char *hint, *key = ctx->session_options[i].key;
        if (!kiln_cli_option_key_known(key, &hint))
            return kiln_errorf(
                err, KILN_ERR_PARAM, "%s: unknown option '%s'%s%s%s (" KILN_CLI_KNOWN_KEYS ")",
                manifest, key, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
    }
    return KILN_OK;
}

void kiln_cli_desc_str(const kiln_tensor_desc *d, char *buf, size_t size)
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
kiln_node_id kiln_cli_find_input(kiln_graph *g, const char *name)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const char *s;
        if (strcmp(kiln_node_op_str(g, n), "Data") != 0 || kiln_node_output_count(g, n) == 0)
            continue;
        if (strcmp(kiln_node_name_str(g, n), name) == 0 ||
            (kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, 0)), "_onnx_name",
                                   &s) &&
             strcmp(s, name) == 0))
            return n;
    }
    return 0;
}

kiln_status kiln_cli_parse_dims(const char *s, int64_t *dims, uint32_t max, uint32_t *rank)
{
    *rank = 0;
    if (!*s)
        return KILN_OK; /* a scalar */
    for (const char *p = s;;) {
        char *end;
        if (*p < '0' || *p > '9' || *rank >= max)
            return KILN_ERR_PARAM;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || (*end && *end != 'x'))
            return KILN_ERR_PARAM;
        dims[(*rank)++] = v;
        if (!*end)
            return KILN_OK;
        p = end + 1;
    }
}

kiln_status kiln_cli_apply_input_shapes(kiln_cli *c, kiln_ctx *ctx, kiln_graph *g,
                                        kiln_error *err)
{
    for (uint32_t i = 0; i < c->ninput_shapes; i++) {
        const char *arg = c->input_shapes[i], *eq = strchr(arg, '=');
        char name[512];
        int64_t dims[32];
        uint32_t rank;
        if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(name) ||
            kiln_cli_parse_dims(eq + 1, dims, 32, &rank) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "--input-shape expects NAME=DIMS with DIMS like 1x3x640x640, got "
                               "'%s'",
                               arg);
        memcpy(name, arg, (size_t)(eq - arg));
        name[eq - arg] = 0;
        kiln_node_id n = kiln_cli_find_input(g, name);
        if (!n)
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "--input-shape %s: the model has no input named '%s'", arg, name);
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        int32_t drank = kiln_desc_rank(d);
        const int64_t *dd = kiln_desc_dims(d);
        bool ok = drank < 0 || (uint32_t)drank == rank;
        for (uint32_t k = 0; ok && drank > 0 && k < rank; k++)
            ok = dd[k] < 0 || dd[k] == dims[k];
        if (!ok) {
            char want[512];
            kiln_cli_desc_str(d, want, sizeof(want));
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "--input-shape %s: input %s is declared %s; only its unknown dims "
                               "can be fixed",
                               arg, name, want);
        }
        char key[600], val[512];
        size_t len = 0;
        val[0] = 0;
        for (uint32_t k = 0; k < rank && len < sizeof(val); k++)
            len += (size_t)snprintf(val + len, sizeof(val) - len, "%s%lld", k ? "," : "",
                                    (long long)dims[k]);
        snprintf(key, sizeof(key), "kiln.input_shape.%s", kiln_node_name_str(g, n));
        if (kiln_ctx_set_option(ctx, key, val) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        /* ... and the command line's session options say so, so that a paused
         * state records it like the equivalent --option */
        char *opt = c->input_shape_opts[i];
        if (c->nsession >= KILN_CLI_MAX_LIST ||
            (size_t)snprintf(opt, sizeof(c->input_shape_opts[i]), "%s=%s", key, val) >=
                sizeof(c->input_shape_opts[i]))
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "--input-shape %s: too many options or too long a name", arg);
        c->session[c->nsession++] = opt;
    }
    return KILN_OK;
}

kiln_status kiln_cli_pipeline(kiln_cli *c, kiln_ctx *ctx, kiln_pipeline *p, kiln_error *err)
{
    char def[4096];
    const char *m = c->manifest ? c->manifest : kiln_cli_default_manifest(def, sizeof(def));
    ctx->verbosity = c->verbosity;
    p->instr.log = stderr;
    kiln_status st = kiln_manifest_load(ctx, m, p, err);
    if (st != KILN_OK || (st = check_option_keys(ctx, m, err)) != KILN_OK)
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
