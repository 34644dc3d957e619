/*
 * manifest_pipeline.c - the pipeline model's helpers shared by the JSON
 * manifest loader (manifest.c) and the textual pipeline: stage names, pass
 * instances, name suggestions, PCRE2 selectors, --pass-opt, the textual form
 * (parse and print, which round-trip) and the human-readable print used by
 * `kiln manifest check`.
 *
 * Textual form (MLIR-like; docs/manifest.md has the full grammar):
 *
 *   prepare(PruneGraphPass,IdentityRemovePass{max=3}),build(-LintPass,X!)
 *   PruneGraphPass,IdentityRemovePass{max=3}     (bare list: optimize_original)
 *
 * "-" before a name marks the instance disabled, "!" after it required.
 * Stages always run in their fixed order, whatever order the text lists them
 * in; the printer emits the canonical order and omits empty stages.
 */
#include "manifest.h"
#include <ctype.h>
#include <pcre2.h>
#include <stdarg.h>

/* ---- stages ------------------------------------------------------------- */

static const char *const stage_names[KILN_STAGE_COUNT] = {
#define X(id, name) name,
    KILN_STAGE_MAP(X)
#undef X
};

const char *kiln_stage_name(kiln_stage_id s)
{
    return (unsigned)s < KILN_STAGE_COUNT ? stage_names[s] : "unknown";
}

kiln_stage_id kiln_stage_lookup(const char *name)
{
    for (int i = 0; i < KILN_STAGE_COUNT; i++)
        if (name && strcmp(stage_names[i], name) == 0)
            return (kiln_stage_id)i;
    return KILN_STAGE_COUNT;
}

/* ---- pass instances and the pipeline ------------------------------------- */

void kiln__pass_inst_clear(kiln_pass_inst *pi)
{
    kiln__options_destroy(pi->options);
    kiln__free(pi->disabled_by);
    memset(pi, 0, sizeof(*pi));
}

static void free_strv(char **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        kiln__free(v[i]);
    kiln__free(v);
}

void kiln_pipeline_clear(kiln_pipeline *p)
{
    if (!p)
        return;
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        for (uint32_t i = 0; i < p->stages[s].npasses; i++)
            kiln__pass_inst_clear(&p->stages[s].passes[i]);
        kiln__free(p->stages[s].passes);
    }
    free_strv(p->tuners, p->ntuners);
    free_strv(p->breakpoints, p->nbreakpoints);
    free_strv(p->engines, p->nengines);
    free_strv(p->manifests, p->nmanifests);
    kiln__free(p->memory_planner);
    kiln__free(p->allocator);
    kiln__free(p->instr.print_after);
    kiln__free(p->instr.dump_dir);
    FILE *log = p->instr.log; /* not owned: survives a clear */
    bool quiet = p->instr.quiet;
    memset(p, 0, sizeof(*p));
    p->instr.log = log;
    p->instr.quiet = quiet;
    p->instr.bisect_limit = -1;
}

/* Schema and flags of a pass or fusion component. */
static void comp_schema(const kiln_component *c, const kiln_option_def **defs, uint32_t *n,
                        uint32_t *flags)
{
    if (c->kind == KILN_COMP_FUSION) {
        *defs = c->d.fusion.options;
        *n = c->d.fusion.option_count;
        *flags = c->d.fusion.flags;
    } else {
        *defs = c->d.pass.options;
        *n = c->d.pass.option_count;
        *flags = c->d.pass.flags;
    }
}

/* Case-insensitive Levenshtein distance, names capped at 127 characters. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127)
        return (size_t)-1;
    size_t row[128];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The largest edit distance still worth suggesting for @p name. */
static size_t suggest_limit(const char *name)
{
    size_t limit = strlen(name) / 3;
    return limit < 1 ? 1 : limit > 5 ? 5 : limit;
}

const char *kiln__suggest(const char *name, const char *const *cands, uint32_t n)
{
    const char *best = NULL;
    size_t best_d = suggest_limit(name) + 1;
    for (uint32_t i = 0; i < n; i++) {
        size_t d = cands[i] ? edit_distance(name, cands[i]) : (size_t)-1;
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    return best;
}

const char *kiln__registry_suggest(const kiln_ctx *ctx, kiln_component_kind k1,
                                   kiln_component_kind k2, const char *name)
{
    const char *best = NULL;
    size_t best_d = suggest_limit(name) + 1;
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != k1 && c->kind != k2)
            continue;
        size_t d = edit_distance(name, c->name);
        if (d < best_d) {
            best_d = d;
            best = c->name;
        }
    }
    return best;
}

kiln_status kiln__pipeline_append(kiln_ctx *ctx, kiln_stage *st, const char *name,
                                  kiln_pass_inst **out, kiln_error *err)
{
    const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_PASS, name);
    if (!c)
        c = kiln_registry_find(ctx, KILN_COMP_FUSION, name);
    if (!c) {
        const kiln_component *other = kiln_registry_find(ctx, 0, name);
        if (other)
            return kiln_errorf(err, KILN_ERR_INVALID, "%s is a %s, not a pass", name,
                               kiln_component_kind_name(other->kind));
        const char *hint = kiln__registry_suggest(ctx, KILN_COMP_PASS, KILN_COMP_FUSION, name);
        if (hint)
            return kiln_errorf(err, KILN_ERR_NOT_FOUND, "unknown pass %s (did you mean %s?)",
                               name, hint);
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "unknown pass %s (no loaded plugin registers it)", name);
    }
    const kiln_option_def *defs;
    uint32_t ndefs, flags;
    comp_schema(c, &defs, &ndefs, &flags);
    kiln_options *o = kiln__options_create(defs, ndefs);
    if (!o || !KILN_GROW(st->passes, st->cap, st->npasses + 1)) {
        kiln__options_destroy(o);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory adding pass %s", name);
    }
    kiln_pass_inst *pi = &st->passes[st->npasses++];
    memset(pi, 0, sizeof(*pi));
    pi->comp = c;
    pi->options = o;
    pi->enabled = true;
    pi->required = (flags & KILN_PASS_REQUIRED) != 0;
    if (out)
        *out = pi;
    return KILN_OK;
}

void kiln__pipeline_warn(const kiln_pipeline *p, const char *fmt, ...)
{
    FILE *f = p && p->instr.log ? p->instr.log : stderr;
    if (p && p->instr.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln: warning: ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    va_end(ap);
}

/* ---- selectors ------------------------------------------------------------ */

kiln_status kiln__pipeline_select(kiln_pipeline *p, const char *pattern, bool enable,
                                  const char *origin, kiln_error *err)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &off,
                                   NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return kiln_errorf(err, KILN_ERR_PARSE, "bad regex \"%s\" at offset %zu: %s", pattern,
                           (size_t)off, (const char *)msg);
    }
    kiln_status st = KILN_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    char *why = NULL;
    if (!md) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory matching \"%s\"", pattern);
        goto done;
    }
    /* Two rounds: refuse a required pass before changing anything. */
    uint32_t matched = 0;
    for (int round = 0; round < 2; round++) {
        for (int s = 0; s < KILN_STAGE_COUNT; s++) {
            for (uint32_t i = 0; i < p->stages[s].npasses; i++) {
                kiln_pass_inst *pi = &p->stages[s].passes[i];
                const char *name = pi->comp->name;
                int rc = pcre2_match(re, (PCRE2_SPTR)name, strlen(name), 0, 0, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH)
                    continue;
                if (rc < 0) {
                    PCRE2_UCHAR msg[160];
                    pcre2_get_error_message(rc, msg, sizeof(msg));
                    st = kiln_errorf(err, KILN_ERR_LIMIT, "regex \"%s\" on %s: %s", pattern,
                                     name, (const char *)msg);
                    goto done;
                }
                if (round == 0) {
                    matched++;
                    if (!enable && pi->required) {
                        st = kiln_errorf(err, KILN_ERR_INVALID,
                                         "selector \"%s\" would disable required pass %s "
                                         "(stage %s)",
                                         pattern, name, kiln_stage_name((kiln_stage_id)s));
                        goto done;
                    }
                    continue;
                }
                kiln__free(pi->disabled_by);
                pi->disabled_by = NULL;
                pi->enabled = enable;
                if (!enable) {
                    size_t n = strlen(origin) + strlen(pattern) + 4;
                    if (!(why = kiln__malloc(n))) {
                        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
                        goto done;
                    }
                    snprintf(why, n, "%s \"%s\"", origin, pattern);
                    pi->disabled_by = why;
                    why = NULL;
                }
            }
        }
        if (matched == 0) {
            kiln__pipeline_warn(p, "%s: selector \"%s\" matches no pass", origin, pattern);
            break;
        }
    }
done:
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return st;
}

kiln_status kiln_manifest_apply_selectors(kiln_pipeline *p, const char *const *selectors,
                                          const bool *enable, uint32_t n, kiln_error *err)
{
    for (uint32_t i = 0; i < n; i++) {
        const char *flag = enable[i] ? "--enable-pass" : "--disable-pass";
        kiln_status st = kiln__pipeline_select(p, selectors[i], enable[i], flag, err);
        if (st != KILN_OK)
            return kiln_error_push(err, "%s %s", flag, selectors[i]);
    }
    return KILN_OK;
}

kiln_status kiln_manifest_set_pass_option(kiln_pipeline *p, const char *pass, const char *key,
                                          const char *value, kiln_error *err)
{
    uint32_t found = 0;
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        for (uint32_t i = 0; i < p->stages[s].npasses; i++) {
            kiln_pass_inst *pi = &p->stages[s].passes[i];
            if (strcmp(pi->comp->name, pass) != 0)
                continue;
            found++;
            kiln_status st = kiln__options_set_text(pi->options, key, value, err);
            if (st != KILN_OK)
                return kiln_error_push(err, "pass %s", pass);
        }
    }
    if (!found)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "no pass %s in the pipeline", pass);
    return KILN_OK;
}

/* ---- textual form: parse ---------------------------------------------------- */

typedef struct text_parser {
    kiln_ctx *ctx;
    const char *s;
    size_t i;
    kiln_error *err;
} text_parser;

static void skip_ws(text_parser *tp)
{
    while (isspace((unsigned char)tp->s[tp->i]))
        tp->i++;
}

static bool accept(text_parser *tp, char c)
{
    skip_ws(tp);
    if (tp->s[tp->i] != c)
        return false;
    tp->i++;
    return true;
}

static kiln_status syntax(text_parser *tp, const char *what)
{
    char c = tp->s[tp->i];
    kiln_errorf(tp->err, KILN_ERR_PARSE, "expected %s, found %s%c%s", what, c ? "'" : "",
                c ? c : 'e', c ? "'" : "nd of text");
    return kiln_error_push(tp->err, "pipeline text, column %zu", tp->i + 1);
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("_.:/-", c));
}

/* Read a name (pass, stage or option key) into @p buf. */
static kiln_status read_name(text_parser *tp, char *buf, size_t size, const char *what)
{
    skip_ws(tp);
    size_t n = 0;
    if (tp->s[tp->i] == '-' || !name_char(tp->s[tp->i]))
        return syntax(tp, what);
    while (name_char(tp->s[tp->i])) {
        if (n + 1 >= size) {
            kiln_errorf(tp->err, KILN_ERR_LIMIT, "%s longer than %zu characters", what, size - 1);
            return kiln_error_push(tp->err, "pipeline text, column %zu", tp->i + 1);
        }
        buf[n++] = tp->s[tp->i++];
    }
    buf[n] = 0;
    return KILN_OK;
}

/* An option value: "quoted with \" and \\" or bare up to ',' / '}' (trimmed). */
static kiln_status read_value(text_parser *tp, char *buf, size_t size)
{
    skip_ws(tp);
    size_t n = 0;
    if (tp->s[tp->i] == '"') {
        tp->i++;
        while (tp->s[tp->i] && tp->s[tp->i] != '"') {
            if (tp->s[tp->i] == '\\' && tp->s[tp->i + 1])
                tp->i++;
            if (n + 1 < size)
                buf[n++] = tp->s[tp->i];
            tp->i++;
        }
        if (tp->s[tp->i] != '"')
            return syntax(tp, "a closing '\"'");
        tp->i++;
    } else {
        while (tp->s[tp->i] && tp->s[tp->i] != ',' && tp->s[tp->i] != '}') {
            if (n + 1 < size)
                buf[n++] = tp->s[tp->i];
            tp->i++;
        }
        while (n > 0 && isspace((unsigned char)buf[n - 1]))
            n--;
    }
    buf[n] = 0;
    return KILN_OK;
}

/* One pass entry (after an optional '-' that the caller consumed). */
static kiln_status parse_pass(text_parser *tp, kiln_stage *st, const char *name, bool disabled,
                              size_t col)
{
    kiln_pass_inst *pi;
    kiln_status rc = kiln__pipeline_append(tp->ctx, st, name, &pi, tp->err);
    if (rc != KILN_OK)
        return kiln_error_push(tp->err, "pipeline text, column %zu", col);
    if (accept(tp, '!'))
        pi->required = true;
    if (accept(tp, '{') && !accept(tp, '}')) {
        do {
            char key[128], value[1024];
            size_t kcol = (skip_ws(tp), tp->i + 1);
            if ((rc = read_name(tp, key, sizeof(key), "an option name")) != KILN_OK)
                return rc;
            if (!accept(tp, '='))
                return syntax(tp, "'='");
            if ((rc = read_value(tp, value, sizeof(value))) != KILN_OK)
                return rc;
            if ((rc = kiln__options_set_text(pi->options, key, value, tp->err)) != KILN_OK) {
                kiln_error_push(tp->err, "pass %s", name);
                return kiln_error_push(tp->err, "pipeline text, column %zu", kcol);
            }
        } while (accept(tp, ','));
        if (!accept(tp, '}'))
            return syntax(tp, "',' or '}'");
    }
    if (disabled) {
        if (pi->required) {
            kiln_errorf(tp->err, KILN_ERR_INVALID, "cannot disable required pass %s", name);
            return kiln_error_push(tp->err, "pipeline text, column %zu", col);
        }
        pi->enabled = false;
        if (!(pi->disabled_by = kiln__strdup("pipeline text \"-\"")))
            return kiln_errorf(tp->err, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

kiln_status kiln__pipeline_parse_text(kiln_ctx *ctx, const char *text, kiln_pipeline *out,
                                      kiln_error *err)
{
    text_parser tp = {ctx, text ? text : "", 0, err};
    kiln_pipeline tmp;
    memset(&tmp, 0, sizeof(tmp));
    bool seen[KILN_STAGE_COUNT] = {false};
    enum { UNKNOWN, STAGES, BARE } mode = UNKNOWN;
    kiln_status rc = KILN_OK;
    skip_ws(&tp);
    while (tp.s[tp.i]) {
        char name[128];
        size_t col = tp.i + 1;
        bool disabled = accept(&tp, '-');
        if ((rc = read_name(&tp, name, sizeof(name), "a pass or stage name")) != KILN_OK)
            goto fail;
        if (!disabled && accept(&tp, '(')) {
            kiln_stage_id sid = kiln_stage_lookup(name);
            if (mode == BARE || sid == KILN_STAGE_COUNT || seen[sid]) {
                if (mode == BARE)
                    rc = kiln_errorf(err, KILN_ERR_PARSE, "stage %s( in a bare pass list", name);
                else if (sid == KILN_STAGE_COUNT)
                    rc = kiln_errorf(err, KILN_ERR_PARSE, "unknown stage %s (stages: %s)", name,
                                     KILN_STAGE_LIST);
                else
                    rc = kiln_errorf(err, KILN_ERR_PARSE, "stage %s given twice", name);
                kiln_error_push(err, "pipeline text, column %zu", col);
                goto fail;
            }
            mode = STAGES;
            seen[sid] = true;
            if (!accept(&tp, ')')) {
                do {
                    char pname[128];
                    size_t pcol = (skip_ws(&tp), tp.i + 1);
                    bool off = accept(&tp, '-');
                    if ((rc = read_name(&tp, pname, sizeof(pname), "a pass name")) != KILN_OK ||
                        (rc = parse_pass(&tp, &tmp.stages[sid], pname, off, pcol)) != KILN_OK)
                        goto fail;
                } while (accept(&tp, ','));
                if (!accept(&tp, ')')) {
                    rc = syntax(&tp, "',' or ')'");
                    goto fail;
                }
            }
        } else {
            if (mode == STAGES) {
                rc = kiln_errorf(err, KILN_ERR_PARSE,
                                 "pass %s outside a stage (write stage(pass,...))", name);
                kiln_error_push(err, "pipeline text, column %zu", col);
                goto fail;
            }
            mode = BARE;
            rc = parse_pass(&tp, &tmp.stages[KILN_STAGE_OPTIMIZE_ORIGINAL], name, disabled, col);
            if (rc != KILN_OK)
                goto fail;
        }
        skip_ws(&tp);
        if (!tp.s[tp.i])
            break;
        if (!accept(&tp, ',')) {
            rc = syntax(&tp, "','");
            goto fail;
        }
        skip_ws(&tp);
        if (!tp.s[tp.i]) { /* trailing comma */
            rc = syntax(&tp, "a pass or stage name");
            goto fail;
        }
    }
    /* Success: move the parsed stages into out. */
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        for (uint32_t i = 0; i < out->stages[s].npasses; i++)
            kiln__pass_inst_clear(&out->stages[s].passes[i]);
        kiln__free(out->stages[s].passes);
        out->stages[s] = tmp.stages[s];
    }
    return KILN_OK;
fail:
    kiln_pipeline_clear(&tmp);
    return rc;
}

/* ---- textual form: print ------------------------------------------------------ */

static void print_value(FILE *f, const char *v)
{
    bool quote = !v[0] || isspace((unsigned char)v[0]);
    for (const char *c = v; *c && !quote; c++)
        quote = strchr(",{}()=\"\\", *c) != NULL || isspace((unsigned char)*c);
    if (!quote) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (const char *c = v; *c; c++) {
        if (*c == '"' || *c == '\\')
            fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

static void print_inst_text(const kiln_pass_inst *pi, FILE *f)
{
    const kiln_option_def *defs;
    uint32_t ndefs, flags;
    comp_schema(pi->comp, &defs, &ndefs, &flags);
    fprintf(f, "%s%s%s", pi->enabled ? "" : "-", pi->comp->name,
            pi->required && !(flags & KILN_PASS_REQUIRED) ? "!" : "");
    uint32_t printed = 0;
    for (uint32_t k = 0; k < kiln__options_count(pi->options); k++) {
        if (!kiln__options_is_set(pi->options, k))
            continue;
        fputs(printed++ ? "," : "{", f);
        fprintf(f, "%s=", kiln__options_key(pi->options, k));
        print_value(f, kiln__options_value_text(pi->options, k));
    }
    if (printed)
        fputc('}', f);
}

void kiln__pipeline_print_text(const kiln_pipeline *p, FILE *f)
{
    bool first = true;
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        const kiln_stage *st = &p->stages[s];
        if (!st->npasses)
            continue;
        fprintf(f, "%s%s(", first ? "" : ",", kiln_stage_name((kiln_stage_id)s));
        first = false;
        for (uint32_t i = 0; i < st->npasses; i++) {
            if (i)
                fputc(',', f);
            print_inst_text(&st->passes[i], f);
        }
        fputc(')', f);
    }
}

/* ---- human-readable print -------------------------------------------------------- */

static const char *pass_kind(const kiln_component *c)
{
    if (c->kind == KILN_COMP_FUSION)
        return "fusion pass";
    return c->d.pass.kind == KILN_PASS_KIND_NODE ? "node pass" : "graph pass";
}

static void print_list(FILE *f, const char *label, char *const *v, uint32_t n)
{
    fprintf(f, "%s:", label);
    if (!n)
        fputs(" (none)", f);
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s %s", i ? "," : "", v[i]);
    fputc('\n', f);
}

void kiln__pipeline_print(const kiln_pipeline *p, FILE *f)
{
    uint32_t total = 0, off = 0;
    for (int s = 0; s < KILN_STAGE_COUNT; s++)
        for (uint32_t i = 0; i < p->stages[s].npasses; i++, total++)
            off += !p->stages[s].passes[i].enabled;
    fprintf(f, "pipeline: %u passes (%u disabled) in %d stages\n", total, off, KILN_STAGE_COUNT);
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        const kiln_stage *st = &p->stages[s];
        fprintf(f, "stage %d %s:%s\n", s + 1, kiln_stage_name((kiln_stage_id)s),
                st->npasses ? "" : " (no passes)");
        for (uint32_t i = 0; i < st->npasses; i++) {
            const kiln_pass_inst *pi = &st->passes[i];
            const kiln_plugin_rec *rec = pi->comp->plugin;
            fprintf(f, "  %2u. %-32s %-11s %s%s  [%s]\n", i + 1, pi->comp->name,
                    pass_kind(pi->comp), pi->enabled ? "enabled" : "DISABLED",
                    pi->required ? ", required" : "",
                    rec && rec->path ? rec->path
                                     : rec ? rec->desc.name : "<built-in>");
            for (uint32_t k = 0; k < kiln__options_count(pi->options); k++)
                fprintf(f, "        %s = %s%s\n", kiln__options_key(pi->options, k),
                        kiln__options_value_text(pi->options, k),
                        kiln__options_is_set(pi->options, k) ? "" : "  (default)");
            if (!pi->enabled && pi->disabled_by)
                fprintf(f, "        disabled by %s\n", pi->disabled_by);
        }
    }
    print_list(f, "tuners", p->tuners, p->ntuners);
    print_list(f, "breakpoints", p->breakpoints, p->nbreakpoints);
    fprintf(f, "memory planner: %s\n", p->memory_planner ? p->memory_planner : "(default: kiln)");
    fprintf(f, "allocator: %s\n", p->allocator ? p->allocator : "(none: unplanned buffers are "
                                                                   "allocated at load)");
    print_list(f, "engines", p->engines, p->nengines);
    const kiln_instrumentation *in = &p->instr;
    fprintf(f,
            "instrumentation: verify_each=%s time_passes=%s print_after=%s dump_dir=%s "
            "bisect_limit=%lld\n",
            in->verify_each ? "true" : "false", in->time_passes ? "true" : "false",
            in->print_after ? in->print_after : "(none)", in->dump_dir ? in->dump_dir : "(none)",
            (long long)in->bisect_limit);
}

/* ---- equality ----------------------------------------------------------------------- */

static bool options_equal(const kiln_options *a, const kiln_options *b)
{
    uint32_t n = kiln__options_count(a);
    if (n != kiln__options_count(b))
        return false;
    for (uint32_t k = 0; k < n; k++)
        if (strcmp(kiln__options_key(a, k), kiln__options_key(b, k)) != 0 ||
            strcmp(kiln__options_value_text(a, k), kiln__options_value_text(b, k)) != 0)
            return false;
    return true;
}

bool kiln__pipeline_equal(const kiln_pipeline *a, const kiln_pipeline *b)
{
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        const kiln_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->npasses != y->npasses)
            return false;
        for (uint32_t i = 0; i < x->npasses; i++) {
            const kiln_pass_inst *p = &x->passes[i], *q = &y->passes[i];
            if (p->comp != q->comp || p->enabled != q->enabled || p->required != q->required ||
                !options_equal(p->options, q->options))
                return false;
        }
    }
    return true;
}
