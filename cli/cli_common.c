/*
 * cli_common.c - the session, file checks and pipeline set-up shared by the
 * verbs, on the embedding API (kiln_embed.h): formats, model import and
 * output writing are the library's (kiln_model_import, kiln_model_write:
 * by extension or --format / --input-format; "-" is standard input and
 * output).  Outputs never replace an input (kiln_cli_check_files) and are
 * committed together (kiln_output_set_*).
 */
#include "cli.h"
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

int kiln_cli_fail(const kiln_error *err)
{
    static char buf[16384];
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

bool kiln_cli_session_ctx(const kiln_cli *c, kiln_cli_session *s)
{
    memset(s, 0, sizeof(*s));
    s->err = kiln_error_create();
    s->s = s->err ? kiln_session_create() : NULL;
    if (!s->s) {
        fprintf(stderr, "kiln: out of memory\n");
        return false;
    }
    /* -q: errors only; for kiln lint, whose warnings are its findings, -q
     * drops everything but those (docs/outputs.md). */
    kiln_session_set_verbosity(
        s->s, c->verbosity < 0 && strcmp(c->verb, "lint") != 0 ? -2 : c->verbosity);
    return true;
}

bool kiln_cli_session_begin(kiln_cli *c, kiln_cli_session *s)
{
    if (!kiln_cli_session_ctx(c, s))
        return false;
    if (kiln_cli_pipeline(c, s->s, s->err) != KILN_OK) {
        kiln_cli_fail(s->err);
        return false;
    }
    return true;
}

void kiln_cli_session_end(kiln_cli_session *s)
{
    kiln_model_destroy(s->m);
    kiln_session_destroy(s->s);
    kiln_error_destroy(s->err);
    memset(s, 0, sizeof(*s));
}

kiln_status kiln_cli_verify_final(const kiln_model *m, kiln_error *err)
{
    kiln_status st = kiln_model_verify(m, err);
    if (st != KILN_OK)
        kiln_error_push(err, "the result fails verification, nothing written (--verify-each "
                             "names the pass that broke it)");
    return st;
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
    snprintf(da, sizeof(da), "%.*s", ba ? (int)(ba - a) + 1 : 1, ba ? a : ".");
    snprintf(db, sizeof(db), "%.*s", bb ? (int)(bb - b) + 1 : 1, bb ? b : ".");
    if (!realpath(da, ra) || !realpath(db, rb))
        return false;
    return strcmp(ra, rb) == 0 && strcmp(ba ? ba + 1 : a, bb ? bb + 1 : b) == 0;
}

int kiln_cli_check_files(const kiln_cli *c, const kiln_cli_file *in, uint32_t nin,
                         const kiln_cli_file *out, uint32_t nout)
{
    for (uint32_t i = 0; i < nin; i++)
        if (in[i].path && !in[i].own_check) {
            kiln_error *err = kiln_error_create();
            if (!err || kiln_input_check(in[i].path, err) != KILN_OK) {
                int rc = 1;
                if (err) {
                    kiln_error_push(err, "%s", in[i].what);
                    rc = kiln_cli_fail(err);
                } else {
                    fprintf(stderr, "kiln: out of memory\n");
                }
                kiln_error_destroy(err);
                return rc;
            }
            kiln_error_destroy(err);
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
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - p) + 1 : 1, slash ? p : ".");
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

kiln_status kiln_cli_apply_input_shapes(kiln_cli *c, kiln_model *m, kiln_error *err)
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
        kiln_status st = kiln_model_set_input_shape(m, name, rank, dims, err);
        if (st != KILN_OK)
            return kiln_error_push(err, "--input-shape %s", arg);
    }
    return KILN_OK;
}

kiln_status kiln_cli_diagnostics(kiln_cli *c, kiln_session *s, kiln_error *err)
{
    kiln_status st = KILN_OK;
    if (c->verify_each)
        st = kiln_session_set_instrumentation(s, "verify_each", "true", err);
    if (st == KILN_OK && c->time_passes)
        st = kiln_session_set_instrumentation(s, "time_passes", "true", err);
    if (st == KILN_OK && c->stats)
        st = kiln_session_set_instrumentation(s, "stats", "true", err);
    if (st == KILN_OK && c->has_bisect) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)c->bisect_limit);
        st = kiln_session_set_instrumentation(s, "bisect_limit", v, err);
    }
    if (st == KILN_OK && c->print_after)
        st = kiln_session_set_instrumentation(s, "print_after", c->print_after, err);
    if (st == KILN_OK && c->dump_dir)
        st = kiln_session_set_instrumentation(s, "dump_dir", c->dump_dir, err);
    return st;
}

kiln_status kiln_cli_pipeline(kiln_cli *c, kiln_session *s, kiln_error *err)
{
    kiln_status st = kiln_session_load_manifest(s, c->manifest, err);
    if (st != KILN_OK)
        return st;
    /* --plugin FILE: components beside the manifest's, for --passes, kiln
     * plugins and the runtime (a path as given: relative to the directory kiln
     * runs in) */
    for (uint32_t i = 0; i < c->nplugins; i++)
        if ((st = kiln_session_load_plugin(s, c->plugins[i], err)) != KILN_OK) {
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
        if ((st = kiln_session_set_option(s, key, eq + 1, err)) != KILN_OK)
            return st;
    }
    /* `kiln run` on the default runtime (the manifest's first, multistream):
     * one stream unless the user asks for more.  The streams of an engine
     * split are worth their events only with cores to spare for each: on the
     * real models one stream on the planned memory is the fastest (docs/run.md). */
    if (strcmp(c->verb, "run") == 0 && !kiln_session_option(s, "kiln.max_streams") &&
        !kiln_session_option(s, "kiln.runtime") &&
        (st = kiln_session_set_option(s, "kiln.max_streams", "1", err)) != KILN_OK)
        return st;
    if (c->passes && (st = kiln_session_set_passes(s, c->passes, err)) != KILN_OK) {
        kiln_error_push(err, "--passes");
        return st;
    }
    for (uint32_t i = 0; i < c->nselectors; i++)
        if ((st = kiln_session_select_passes(s, c->selectors[i], c->selector_enable[i], err)) !=
            KILN_OK)
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
        if ((st = kiln_session_set_pass_option(s, buf, dot + 1, eq + 1, err)) != KILN_OK) {
            kiln_error_push(err, "--pass-opt %s", c->pass_opts[i]);
            return st;
        }
    }
    return kiln_cli_diagnostics(c, s, err);
}
