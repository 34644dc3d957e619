/*
 * verbs.c - compile, opt, lint, plugins, manifest check, convert, run.
 *
 * Every verb works in a session (kiln_cli_session, cli_common.c), set up by
 * kiln_cli_session_begin and released by kiln_cli_session_end whatever
 * happened.
 */
#include "cli.h"
#include <kiln/kiln_pass.h>
#include <kiln/kiln_component.h>

/* Usage checks of the build options; 0 when fine, else the exit status. */
static int check_build_options(kiln_cli *c)
{
    if (c->build_step && (!c->build_mode || strcmp(c->build_mode, "tuning") != 0)) {
        fprintf(stderr, "kiln: --build-step needs --build-mode tuning\n");
        return 2;
    }
    if (c->build_mode && strcmp(c->build_mode, "tuning") != 0 &&
        strcmp(c->build_mode, "normal") != 0) {
        fprintf(stderr, "kiln: unknown --build-mode '%s' (normal, tuning)\n", c->build_mode);
        return 2;
    }
    if ((c->build_step || c->resume) && c->nplugins) {
        fprintf(stderr, "kiln: --plugin cannot be used with a paused build (the paused state "
                        "records the manifest's plugins only); list the plugin in a manifest\n");
        return 2;
    }
    if (c->build_step && c->format && strcmp(c->format, "json") != 0) {
        fprintf(stderr, "kiln: a paused state is JSON; --format %s does not apply\n", c->format);
        return 2;
    }
    if (c->build_step && !kiln_build_step_valid(c->build_step)) {
        fprintf(stderr,
                "kiln: unknown --build-step '%s' (before_ub_match, after_ub_match, "
                "after_build)\n",
                c->build_step);
        return 2;
    }
    return 0;
}

/*
 * Options next to --resume.  The paused state fixes everything that decides
 * the result -- manifest, pass selection, pass and session options, --passes,
 * --tuner, --bisect-limit -- so those are refused (docs/tuning.md).  Allowed:
 * -o, --report, -v, -q, -j, the diagnostics (--verify-each, --time-passes,
 * --print-after, --dump-dir) and --build-mode tuning --build-step STEP to
 * pause again at a later step.  0 when fine, else the exit status.
 */
static int check_resume_options(const kiln_cli *c)
{
    if (c->npositional) {
        fprintf(stderr, "kiln compile --resume STATE takes no MODEL\n");
        return 2;
    }
    const char *bad = c->manifest       ? "-m"
                      : c->nselectors   ? (c->selector_enable[0] ? "--enable-pass" : "--disable-pass")
                      : c->npass_opts   ? "--pass-opt"
                      : c->nsession     ? "--option"
                      : c->tuner        ? "--tuner"
                      : c->has_bisect   ? "--bisect-limit"
                      : c->passes       ? "--passes"
                      : c->ninput_shapes ? "--input-shape"
                                        : NULL;
    if (bad) {
        fprintf(stderr,
                "kiln compile --resume: %s would change the result; a resumed build keeps the "
                "paused build's manifest, pass selection, options and tuner (docs/tuning.md)\n",
                bad);
        return 2;
    }
    return 0;
}

/* -v: the model cache's verdict on stderr. */
static void cache_verbose(const kiln_cli *c, const kiln_model *m)
{
    const char *key, *entry;
    double ms;
    const char *status = kiln_model_cache_status(m, &key, &entry, &ms);
    if (c->verbosity < 1 || strcmp(status, "disabled") == 0)
        return;
    fprintf(stderr, "kiln: model cache %s: key %s, entry %s (%.1f ms)\n", status,
            key ? key : "-", entry ? entry : "-", ms);
}

/* After a miss: -o is the entry just stored, copied rather than serialized
 * again; false (the error forgotten) when there is none, so -o is written as
 * usual. */
static bool copy_stored_entry(const kiln_cli *c, kiln_model *m, kiln_error *err)
{
    if (strcmp(kiln_model_cache_status(m, NULL, NULL, NULL), "miss") != 0)
        return false;
    if (kiln_model_cache_write(m, c->output, err) == KILN_OK)
        return true;
    kiln_error_clear(err); /* nothing else failed before: the write below reports its own */
    return false;
}

/*
 * compile, opt and lint: the pipeline over a model.  With @p write_output
 * the result goes to -o (by extension) or, when the run paused at a build
 * step, the paused state does; lint writes nothing.
 */
static int build(kiln_cli *c, bool write_output)
{
    if (!c->resume && kiln_cli_need(c, 1, "one MODEL argument"))
        return 2;
    int rc = c->resume ? check_resume_options(c) : 0;
    if (rc || (rc = check_build_options(c)))
        return rc;
    const kiln_cli_file in[] = {{"model", c->resume ? NULL : c->positional[0], false},
                                {"tuning state (--resume)", c->resume, false},
                                {"manifest", c->manifest, false}};
    const kiln_cli_file out[] = {{"-o", write_output ? c->output : NULL, false},
                                 {"--report", c->report, false}};
    if ((rc = kiln_cli_check_files(c, in, 3, out, 2)) != 0)
        return rc;
    kiln_cli_session s;
    rc = 1;
    if (!kiln_cli_session_ctx(c, &s))
        goto done;
    kiln_status st;
    if (c->resume) {
        /* Refuses other format versions and changed manifest or plugin files
         * before anything is loaded; then the paused build's manifest and
         * overrides are replayed and checked (kiln_session_resume). */
        if ((st = kiln_session_resume(s.s, c->resume, &s.m, s.err)) != KILN_OK)
            goto fail;
        if (c->build_step && !kiln_model_step_reachable(s.m, c->build_step)) {
            fprintf(stderr,
                    "kiln compile --resume: build step %s is not after %s, where %s paused\n",
                    c->build_step, kiln_model_resumed_step(s.m), c->resume);
            rc = 2;
            goto done;
        }
        if ((st = kiln_cli_diagnostics(c, s.s, s.err)) != KILN_OK)
            goto fail;
    } else {
        if (kiln_cli_pipeline(c, s.s, s.err) != KILN_OK) {
            if (strcmp(c->verb, "lint") == 0 && kiln_error_code(s.err) == KILN_ERR_NOT_FOUND &&
                !kiln_session_has_component(s.s, "pass", "GraphLint")) {
                fprintf(stderr, "kiln lint: no loaded plugin provides pass GraphLint (W18888 "
                                "read/write lint); add libkiln_graph_lint.so to the manifest\n");
                goto done;
            }
            goto fail;
        }
        /* The model cache's probe by input key: a hit needs no import (docs/model_cache.md). */
        if (write_output && !c->build_step) {
            bool probe_hit = false;
            kiln_compile_options po = {.struct_size = sizeof(po),
                                       .tuner = c->tuner,
                                       .build_mode = c->build_mode};
            kiln_output_set_begin();
            if (kiln_session_cache_probe(s.s, c->positional[0], c->input_format, c->input_shapes,
                                         c->ninput_shapes, &po, c->output, c->format, &probe_hit,
                                         s.err) != KILN_OK)
                goto fail;
            if (probe_hit) {
                const char *key, *entry;
                double ms;
                kiln_session_cache_status(s.s, &key, &entry, &ms);
                if (c->verbosity >= 1)
                    fprintf(stderr, "kiln: model cache hit: key %s, entry %s (%.1f ms)\n", key,
                            entry, ms);
                if (c->report && kiln_session_write_cache_report(s.s, c->positional[0], c->report,
                                                                 s.err) != KILN_OK)
                    goto fail;
                if (kiln_output_set_commit(s.err) != KILN_OK)
                    goto fail;
                rc = 0;
                goto done;
            }
            kiln_output_set_abort(); /* holds nothing */
        }
        if ((st = kiln_model_import(s.s, c->positional[0], c->input_format, &s.m, s.err)) !=
            KILN_OK)
            goto fail;
        /* --input-shape becomes session options (recorded in a paused state as such) */
        if ((st = kiln_cli_apply_input_shapes(c, s.m, s.err)) != KILN_OK)
            goto fail;
    }
    kiln_compile_options co = {.struct_size = sizeof(co),
                               .stop_step = c->build_step,
                               .tuner = c->tuner,
                               .build_mode = c->build_mode};
    /* The model cache (docs/model_cache.md): a hit writes -o from the cache
     * (inside the output set, committed with --report) and nothing compiles. */
    bool hit = false, paused = false;
    if (write_output) {
        kiln_output_set_begin();
        st = kiln_model_cache_lookup(s.m, &co, c->output, c->format, &hit, s.err);
        if (st != KILN_OK)
            goto fail;
        if (!hit)
            kiln_output_set_abort(); /* holds nothing: a failed copy left no file */
        cache_verbose(c, s.m);
        if (hit)
            goto report;
    }
    st = kiln_model_compile(s.m, &co, s.err);
    if (st != KILN_OK && st != KILN_PAUSED)
        goto fail;
    paused = st == KILN_PAUSED;
    /* Whatever the passes did, nothing is written unless the graph is sound;
     * and all outputs (-o, --report) are committed together or not at all. */
    if (kiln_cli_verify_final(s.m, s.err) != KILN_OK)
        goto fail;
    /* a miss: the new entry goes into the cache first (its lock is released) */
    if (kiln_model_cache_store(s.m, s.err) != KILN_OK)
        goto fail;
    kiln_output_set_begin();
    if (paused && write_output) {
        if ((st = kiln_model_write_paused(s.m, c->output, s.err)) != KILN_OK)
            goto fail;
    } else if (write_output && !copy_stored_entry(c, s.m, s.err) &&
               (st = kiln_model_write(s.m, c->output, c->format, s.err)) != KILN_OK) {
        goto fail;
    }
report:
    if (c->report && kiln_model_write_report(s.m, c->report, s.err) != KILN_OK)
        goto fail;
    /* --memory-svg (kiln.memory_svg): the plan's picture, with the other outputs */
    const char *svg = kiln_session_option(s.s, "kiln.memory_svg");
    if (svg && svg[0] && kiln_model_write_memory_svg(s.m, svg, s.err) != KILN_OK)
        goto fail;
    if (kiln_output_set_commit(s.err) != KILN_OK)
        goto fail;
    if (!hit && paused && write_output && c->verbosity >= 0)
        fprintf(stderr, "kiln: paused at build step %s; state written to %s\n",
                kiln_model_paused_step(s.m),
                strcmp(c->output, "-") ? c->output : "standard output");
    rc = 0;
    goto done;
fail:
    kiln_output_set_abort();
    kiln_cli_fail(s.err);
done:
    kiln_cli_session_end(&s);
    return rc;
}

int kiln_cli_compile(kiln_cli *c)
{
    if (c->passes) {
        fprintf(stderr, "kiln compile: --passes belongs to 'kiln opt'\n");
        return 2;
    }
    if (!c->output) {
        fprintf(stderr, "kiln compile: -o OUT is required\n");
        return 2;
    }
    return build(c, true);
}

int kiln_cli_opt(kiln_cli *c)
{
    if (c->build_step || c->resume) {
        fprintf(stderr, "kiln opt: build steps and --resume belong to 'kiln compile'\n");
        return 2;
    }
    if (!c->output) {
        fprintf(stderr, "kiln opt: -o OUT is required\n");
        return 2;
    }
    if (!c->passes) {
        fprintf(stderr, "kiln opt: --passes LIST is required\n");
        return 2;
    }
    return build(c, true);
}

/*
 * kiln lint MODEL [-m MANIFEST]: run the GraphLint pass alone (the text
 * pipeline "GraphLint" over the manifest's plugins); its W18888 warnings go
 * to stderr.  Exit 0 whatever it finds; 1 for bad input (unreadable model,
 * manifest, or no plugin providing GraphLint); 2 for usage errors.
 */
int kiln_cli_lint(kiln_cli *c)
{
    if (kiln_cli_model_only(c, "lint writes nothing and runs only GraphLint"))
        return 2;
    c->passes = "GraphLint";
    return build(c, false);
}

static void describe(const kiln_component_info *k, FILE *f)
{
    const kiln_pass_desc *pd = k->desc;
    fprintf(f, "  %-14s %-34s %s\n", k->kind, k->name,
            strcmp(k->kind, "pass") == 0
                ? (pd->kind == KILN_PASS_KIND_NODE ? "(node pass)" : "(graph pass)")
                : "");
}

/* Describe one component in full, gst-inspect style. */
static void inspect(const kiln_component_info *k, const kiln_plugin_info *pl)
{
    printf("Component %s\n  kind      %s\n  plugin    %s %s\n  file      %s\n", k->name, k->kind,
           pl->name, pl->version ? pl->version : "", pl->file ? pl->file : "<built-in>");
    if (strcmp(k->kind, "engine") == 0)
        kiln_engine_describe(stdout, k->desc);
    if (strcmp(k->kind, "op") == 0) { /* domain, arity, flags, inference/folding */
        const kiln_op_def *od = k->desc;
        char b[256];
        printf("  op        %s\n", kiln_op_describe(od, b, sizeof(b)));
        if (od->summary)
            printf("  summary   %s\n", od->summary);
    }
    if (strcmp(k->kind, "fusion-pass") == 0) { /* kind, GE stage, summary */
        const kiln_fusion_pass_desc *fd = k->desc;
        static const char *const kinds[] = {"?", "pattern", "decompose", "base"};
        const char *stage = fd->stage == KILN_FUSION_STAGE_BEFORE_INFER_SHAPE ? "before_infer_shape"
                            : fd->stage == KILN_FUSION_STAGE_AFTER_INFER_SHAPE ? "after_infer_shape"
                            : fd->stage == KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION
                                ? "after_builtin_fusion"
                            : fd->stage == KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE
                                ? "after_origin_graph_optimize"
                            : fd->stage == KILN_FUSION_STAGE_BUILTIN ? "builtin"
                                                                      : "?";
        printf("  fusion    %s, stage %s\n", kinds[fd->kind <= 3 ? fd->kind : 0], stage);
        if (fd->summary)
            printf("  summary   %s\n", fd->summary);
    }
    if (strcmp(k->kind, "pass") == 0) {
        const kiln_pass_desc *pd = k->desc;
        if (pd->summary)
            printf("  summary   %s\n", pd->summary);
        printf("  flags    %s%s\n", pd->flags & KILN_PASS_REQUIRED ? " required" : "",
               pd->flags & KILN_PASS_AFTER_GRAPH ? " after-graph" : "");
        for (uint32_t o = 0; o < pd->option_count; o++) {
            const kiln_option_def *od = &pd->options[o];
            static const char *const tn[] = {"?", "bool", "int", "float", "string"};
            printf("  option    %s (%s, default %s): %s\n", od->name,
                   tn[od->type <= 4 ? od->type : 0],
                   od->default_value ? od->default_value : "unset", od->help ? od->help : "");
        }
    }
}

int kiln_cli_plugins(kiln_cli *c)
{
    if (c->npositional > 1) {
        fprintf(stderr, "kiln plugins: at most one NAME\n");
        return 2;
    }
    kiln_cli_session s;
    int rc = 1;
    if (!kiln_cli_session_begin(c, &s))
        goto done;
    /* every plugin the manifest names, deferred ones included; one that fails
     * to load is reported (after the listing of what loaded) and fails the verb */
    bool load_failed = kiln_session_load_deferred(s.s, s.err) != KILN_OK;
    const char *want = c->npositional ? c->positional[0] : NULL;
    bool found = !want;
    uint32_t ncomp = kiln_session_component_count(s.s);
    for (uint32_t i = 0; i < kiln_session_plugin_count(s.s); i++) {
        kiln_plugin_info pl = {.struct_size = sizeof(pl)};
        if (!kiln_session_plugin(s.s, i, &pl))
            continue;
        bool match_plugin = want && strcmp(want, pl.name) == 0;
        for (uint32_t j = 0; j < ncomp; j++) {
            kiln_component_info k = {.struct_size = sizeof(k)};
            if (!kiln_session_component(s.s, j, &k) || k.plugin != (int32_t)i || !want ||
                match_plugin || strcmp(k.name, want) != 0)
                continue;
            found = true;
            inspect(&k, &pl);
        }
        if (want && !match_plugin)
            continue;
        found = true;
        printf("%s %s — %s\n  file: %s\n", pl.name, pl.version ? pl.version : "",
               pl.description ? pl.description : "", pl.file ? pl.file : "<built-in>");
        for (uint32_t j = 0; j < ncomp; j++) {
            kiln_component_info k = {.struct_size = sizeof(k)};
            if (kiln_session_component(s.s, j, &k) && k.plugin == (int32_t)i)
                describe(&k, stdout);
        }
    }
    if (!found) {
        fprintf(stderr, "kiln: no plugin or component named '%s'\n", want);
        goto done;
    }
    if (load_failed) {
        kiln_cli_fail(s.err);
        goto done;
    }
    rc = 0;
done:
    kiln_cli_session_end(&s);
    return rc;
}

int kiln_cli_manifest(kiln_cli *c)
{
    if (c->npositional != 2 || strcmp(c->positional[0], "check") != 0) {
        fprintf(stderr, "usage: kiln manifest check MANIFEST\n");
        return 2;
    }
    c->manifest = c->positional[1];
    kiln_cli_session s;
    int rc = 1;
    /* a check loads the deferred plugins too: a broken engine plugin fails it */
    if (kiln_cli_session_begin(c, &s)) {
        if (kiln_session_load_deferred(s.s, s.err) == KILN_OK) {
            kiln_session_print_pipeline(s.s, stdout, false);
            printf("textual form: ");
            kiln_session_print_pipeline(s.s, stdout, true);
            printf("\n");
            rc = 0;
        } else {
            kiln_cli_fail(s.err);
        }
    }
    kiln_cli_session_end(&s);
    return rc;
}

int kiln_cli_convert(kiln_cli *c)
{
    if (kiln_cli_need(c, 2, "IN and OUT"))
        return 2;
    const kiln_cli_file in[] = {{"IN", c->positional[0], false}, {"manifest", c->manifest, false}};
    const kiln_cli_file out[] = {{"OUT", c->positional[1], false}};
    int rc = kiln_cli_check_files(c, in, 2, out, 1);
    if (rc)
        return rc;
    kiln_cli_session s;
    rc = 1;
    /* The manifest's frontend plugins provide the non-JSON formats. */
    if (kiln_cli_session_begin(c, &s)) {
        kiln_output_set_begin();
        if (kiln_model_import(s.s, c->positional[0], c->input_format, &s.m, s.err) == KILN_OK &&
            kiln_cli_verify_final(s.m, s.err) == KILN_OK &&
            kiln_model_write(s.m, c->positional[1], c->format, s.err) == KILN_OK &&
            kiln_output_set_commit(s.err) == KILN_OK) {
            rc = 0;
        } else {
            kiln_output_set_abort();
            kiln_cli_fail(s.err);
        }
    }
    kiln_cli_session_end(&s);
    return rc;
}
