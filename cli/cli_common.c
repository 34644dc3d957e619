/*
 * cli_common.c - the session, model loading, output writing and pipeline
 * set-up shared by the verbs.  Formats are chosen by extension, or by
 * --format / --input-format: .json (kiln graph JSON), .dot (Graphviz, output
 * only); anything else goes to a frontend plugin that declares the extension,
 * and a clear error listing the known formats when none does.  "-" is
 * standard input (JSON or ONNX, told by content) and standard output.
 * Outputs never replace an input (kiln_cli_check_files) and are written
 * through fileio's mkstemp temporaries.
 */
#include "cli.h"
#include "graph_json.h"
#include "graph_dot.h"
#include "fileio.h"
#include "tensor_io.h"
#include "verify.h"
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
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
    if (n == 0)
        return NULL;
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

enum fmt_kind { FMT_JSON, FMT_DOT, FMT_PLUGIN };

/*
 * The format of @p path: @p format when given ("json", "dot", or an extension
 * a frontend declares, with or without the dot), else the path's extension.
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
        format = "json"; /* a stream (-, /dev/stdout, a FIFO): JSON unless --format says */
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
    if ((*fe = frontend_for(ctx, ext, import)) != NULL)
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
        kiln_error_push(err, "frontend %s", fe->name);
        return st;
    }
    *out = g;
    return KILN_OK;
}

/*
 * MODEL "-": read standard input whole; JSON when it starts with '{' (after
 * blanks), else a plugin format: the one named by --input-format, or ONNX when
 * the bytes look like a protobuf message (first field: a varint or a
 * length-delimited field, numbers 1-20).  Plugins import from a path, so their
 * bytes go through a registered temporary in $TMPDIR.
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
        if (len && field >= 1 && field <= 20 && (wire == 0 || wire == 2))
            fe = frontend_for(ctx, ".onnx", true);
        kind = FMT_PLUGIN;
        if (!fe)
            st = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                             "standard input: neither kiln graph JSON nor ONNX%s (%zu bytes); "
                             "give --input-format",
                             len && field >= 1 && field <= 20 && (wire == 0 || wire == 2)
                                 ? " with an ONNX frontend loaded"
                                 : "",
                             len);
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

kiln_status kiln_cli_load_model(kiln_ctx *ctx, const char *path, const char *format,
                                kiln_graph **out, kiln_error *err)
{
    if (strcmp(path, "-") == 0)
        return load_stdin(ctx, format, out, err);
    kiln_status st = kiln_file_check_input(path, err);
    if (st != KILN_OK)
        return st;
    enum fmt_kind kind;
    const kiln_component *fe;
    if ((st = pick_format(ctx, path, format, true, &kind, &fe, err)) != KILN_OK)
        return st;
    if (kind == FMT_JSON)
        return kiln_graph_read_json_file(ctx, path, out, err);
    if (access(path, R_OK) != 0)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "cannot read %s: %s", path, strerror(errno));
    const char *base = strrchr(path, '/');
    return import_with(ctx, fe, path, base ? base + 1 : path, out, err);
}

kiln_status kiln_cli_verify_final(const kiln_graph *g, kiln_error *err)
{
    kiln_status st = kiln_graph_verify(g, err);
    if (st != KILN_OK)
        kiln_error_push(err, "the result fails verification, nothing written (--verify-each "
                             "names the pass that broke it)");
    return st;
}

kiln_status kiln_cli_write_output(kiln_ctx *ctx, kiln_graph *g, const char *path,
                                  const char *format, kiln_error *err)
{
    enum fmt_kind kind;
    const kiln_component *fe;
    kiln_status st = pick_format(ctx, path, format, false, &kind, &fe, err);
    if (st != KILN_OK)
        return st;
    if (kind == FMT_JSON)
        return kiln_graph_write_json_file(g, path, err);
    if (kind == FMT_DOT)
        return kiln_graph_write_dot_file(g, path, err);
    /* Exporters take a path: hand them a fresh mkstemp temporary beside the
     * destination (never a predictable name), committed on success. */
    kiln_tmpfile *t;
    if ((st = kiln_file_tmp_create(path, &t, NULL, err)) != KILN_OK)
        return st;
    st = fe->d.frontend.export_file(g, kiln_file_tmp_path(t), err);
    if (st == KILN_OK)
        return kiln_file_tmp_commit(t, path, err); /* fsync + rename (unlinks on failure) */
    kiln_file_tmp_discard(t);
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

/* The same file: same device and inode when both exist (regular files only:
 * /dev/null twice, or a terminal as /dev/stdin and /dev/stdout, is fine);
 * when neither exists, the same name in the same (canonical) directory. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea || eb)
        return ea && eb && S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
    const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
    kiln__fmt(da, sizeof(da), "%.*s", ba ? (int)(ba - a) + 1 : 1, ba ? a : ".");
    kiln__fmt(db, sizeof(db), "%.*s", bb ? (int)(bb - b) + 1 : 1, bb ? b : ".");
    if (!realpath(da, ra) || !realpath(db, rb))
        return false;
    return strcmp(ra, rb) == 0 && strcmp(ba ? ba + 1 : a, bb ? bb + 1 : b) == 0;
}

int kiln_cli_check_files(const kiln_cli *c, const kiln_cli_file *in, uint32_t nin,
                         const kiln_cli_file *out, uint32_t nout)
{
    kiln_error err;
    kiln_error_clear(&err);
    for (uint32_t i = 0; i < nin; i++)
        if (in[i].path && !in[i].own_check && kiln_file_check_input(in[i].path, &err) != KILN_OK) {
            kiln_error_push(&err, "%s", in[i].what);
            return kiln_cli_fail(&err);
        }
    for (uint32_t o = 0; o < nout; o++) {
        const char *p = out[o].path;
        if (!p)
            continue;
        for (uint32_t k = 0; k < o; k++)
            if (out[k].path && (strcmp(p, "-") == 0 || strcmp(out[k].path, "-") == 0
                                    ? strcmp(p, out[k].path) == 0
                                    : same_file(p, out[k].path))) {
                fprintf(stderr, "kiln %s: %s %s and %s %s are the same file\n", c->verb,
                        out[k].what, out[k].path, out[o].what, p);
                return 2;
            }
        if (strcmp(p, "-") == 0)
            continue;
        for (uint32_t i = 0; i < nin; i++)
            if (in[i].path && strcmp(in[i].path, "-") != 0 && same_file(p, in[i].path)) {
                fprintf(stderr, "kiln %s: %s %s is %s (%s); refusing to overwrite an input\n",
                        c->verb, out[o].what, p, in[i].what, in[i].path);
                return 2;
            }
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "kiln %s: %s %s is a directory; give a file name\n", c->verb,
                    out[o].what, p);
            return 2;
        }
        char dir[PATH_MAX];
        const char *slash = strrchr(p, '/');
        kiln__fmt(dir, sizeof(dir), "%.*s", slash ? (int)(slash - p) + 1 : 1, slash ? p : ".");
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "kiln %s: %s %s: directory %s does not exist\n", c->verb, out[o].what,
                    p, dir);
            return 1;
        }
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
    /* -q: errors only; for kiln lint, whose warnings are its findings, -q
     * drops everything but those (docs/outputs.md). */
    ctx->verbosity = c->verbosity < 0 && strcmp(c->verb, "lint") != 0 ? -2 : c->verbosity;
    p->instr.log = stderr;
    p->instr.quiet = ctx->verbosity < -1;
    kiln_status st = kiln_manifest_load(ctx, m, p, err);
    if (st != KILN_OK || (st = check_option_keys(ctx, m, err)) != KILN_OK)
        return st;
    /* --plugin FILE: components beside the manifest's, for --passes, kiln
     * plugins and the runtime (a path as given: relative to the directory kiln
     * runs in) */
    for (uint32_t i = 0; i < c->nplugins; i++)
        if ((st = kiln_file_check_input(c->plugins[i], err)) != KILN_OK ||
            (st = kiln_plugin_load(ctx, c->plugins[i], NULL, err)) != KILN_OK) {
            kiln_error_push(err, "--plugin %s", c->plugins[i]);
            return st;
        }
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
    if (c->stats)
        p->instr.stats = true;
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
