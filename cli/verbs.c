/*
 * verbs.c - compile, opt, plugins, manifest check, convert, lint, run.
 */
#include "cli.h"
#include "graph_json.h"

static int need(kiln_cli *c, uint32_t n, const char *what)
{
    if (c->npositional != n) {
        fprintf(stderr, "kiln %s: expected %s\n", c->verb, what);
        return 2;
    }
    return 0;
}

/* compile and opt: the pipeline over a model, output by extension. */
static int build(kiln_cli *c, bool only_passes)
{
    kiln_error err;
    kiln_error_clear(&err);
    if (!c->output) {
        fprintf(stderr, "kiln %s: -o OUT is required\n", c->verb);
        return 2;
    }
    if (only_passes && !c->passes) {
        fprintf(stderr, "kiln opt: --passes LIST is required\n");
        return 2;
    }
    if (!c->resume && need(c, 1, "one MODEL argument"))
        return 2;
    if (c->resume && c->npositional) {
        fprintf(stderr, "kiln compile --resume STATE takes no MODEL\n");
        return 2;
    }
    if (c->build_step && (!c->build_mode || strcmp(c->build_mode, "tuning") != 0)) {
        fprintf(stderr, "kiln: --build-step needs --build-mode tuning\n");
        return 2;
    }
    if (c->build_mode && strcmp(c->build_mode, "tuning") != 0 &&
        strcmp(c->build_mode, "normal") != 0) {
        fprintf(stderr, "kiln: unknown --build-mode '%s' (normal, tuning)\n", c->build_mode);
        return 2;
    }
    kiln_stage_id dummy;
    bool after;
    if (c->build_step && !kiln_build_step_lookup(c->build_step, &dummy, &after)) {
        fprintf(stderr, "kiln: unknown --build-step '%s' (before_ub_match, after_ub_match, "
                        "after_build)\n", c->build_step);
        return 2;
    }
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx) {
        fprintf(stderr, "kiln: out of memory\n");
        return 1;
    }
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    kiln_graph *g = NULL;
    kiln_stage_run run;
    memset(&run, 0, sizeof(run));
    char *state_manifest = NULL;
    int rc = 1;
    kiln_status st;
    if (c->resume) {
        kiln_ctx *tmp = ctx;
        kiln_graph *sg = NULL;
        if ((st = kiln_paused_state_read(tmp, c->resume, &sg, &run.first, &state_manifest,
                                         &err)) != KILN_OK)
            goto done;
        g = sg;
        if (!c->manifest && state_manifest && state_manifest[0])
            c->manifest = state_manifest;
    }
    if ((st = kiln_cli_pipeline(c, ctx, &p, &err)) != KILN_OK)
        goto done;
    if (!g && (st = kiln_cli_load_model(ctx, c->positional[0], &g, &err)) != KILN_OK)
        goto done;
    run.stop_step = c->build_step;
    run.tuner = c->tuner;
    st = kiln_stage_run_pipeline(ctx, &p, g, &run, &err);
    if (st == KILN_PAUSED) {
        char def[4096];
        const char *m = c->manifest ? c->manifest : kiln_cli_default_manifest(def, sizeof(def));
        char abs[4096];
        if (!realpath(m, abs))
            snprintf(abs, sizeof(abs), "%s", m);
        if ((st = kiln_paused_state_write(c->output, g, run.paused_step, run.next, abs, ctx,
                                          &err)) != KILN_OK)
            goto done;
        if (c->verbosity >= 0)
            fprintf(stderr, "kiln: paused at build step %s; state written to %s\n",
                    run.paused_step, c->output);
    } else if (st != KILN_OK) {
        goto done;
    } else if ((st = kiln_cli_write_output(ctx, g, c->output, &err)) != KILN_OK) {
        goto done;
    }
    if (c->report && (st = kiln_stage_write_report(&run, g, c->report, &err)) != KILN_OK)
        goto done;
    rc = 0;
done:
    if (rc)
        kiln_cli_fail(&err);
    kiln_stage_run_fini(&run);
    kiln_pipeline_clear(&p);
    if (g)
        kiln_graph_destroy(g);
    kiln__free(state_manifest);
    kiln_ctx_destroy(ctx);
    return rc;
}

int kiln_cli_compile(kiln_cli *c)
{
    if (c->passes) {
        fprintf(stderr, "kiln compile: --passes belongs to 'kiln opt'\n");
        return 2;
    }
    return build(c, false);
}

int kiln_cli_opt(kiln_cli *c)
{
    if (c->build_step || c->resume) {
        fprintf(stderr, "kiln opt: build steps and --resume belong to 'kiln compile'\n");
        return 2;
    }
    return build(c, true);
}

static void describe(const kiln_component *k, FILE *f)
{
    fprintf(f, "  %-14s %-34s %s\n", kiln_component_kind_name(k->kind), k->name,
            k->kind == KILN_COMP_PASS ? (k->d.pass.kind == KILN_PASS_KIND_NODE ? "(node pass)"
                                                                               : "(graph pass)")
                                      : "");
}

int kiln_cli_plugins(kiln_cli *c)
{
    if (c->npositional > 1) {
        fprintf(stderr, "kiln plugins: at most one NAME\n");
        return 2;
    }
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    int rc = 1;
    if (kiln_cli_pipeline(c, ctx, &p, &err) != KILN_OK) {
        kiln_cli_fail(&err);
        goto done;
    }
    const char *want = c->npositional ? c->positional[0] : NULL;
    bool found = !want;
    for (uint32_t i = 0; i < kiln_registry_plugin_count(ctx); i++) {
        const kiln_plugin_rec *pl = kiln_registry_plugin_at(ctx, i);
        bool match_plugin = want && strcmp(want, pl->desc.name) == 0;
        for (uint32_t j = 0; j < kiln_registry_count(ctx); j++) {
            const kiln_component *k = kiln_registry_at(ctx, j);
            if (k->plugin != pl || !want || match_plugin || strcmp(k->name, want) != 0)
                continue;
            /* describe one component, gst-inspect style */
            found = true;
            printf("Component %s\n  kind      %s\n  plugin    %s %s\n  file      %s\n", k->name,
                   kiln_component_kind_name(k->kind), pl->desc.name,
                   pl->desc.version ? pl->desc.version : "", pl->path ? pl->path : "<built-in>");
            const char *summary = k->kind == KILN_COMP_PASS ? k->d.pass.summary : NULL;
            if (summary)
                printf("  summary   %s\n", summary);
            if (k->kind == KILN_COMP_PASS) {
                printf("  flags    %s%s\n",
                       k->d.pass.flags & KILN_PASS_REQUIRED ? " required" : "",
                       k->d.pass.flags & KILN_PASS_AFTER_GRAPH ? " after-graph" : "");
                for (uint32_t o = 0; o < k->d.pass.option_count; o++) {
                    const kiln_option_def *od = &k->d.pass.options[o];
                    static const char *const tn[] = {"?", "bool", "int", "float", "string"};
                    printf("  option    %s (%s, default %s): %s\n", od->name,
                           tn[od->type <= 4 ? od->type : 0],
                           od->default_value ? od->default_value : "unset",
                           od->help ? od->help : "");
                }
            }
        }
        if (want && !match_plugin)
            continue;
        found = true;
        printf("%s %s — %s\n  file: %s\n", pl->desc.name, pl->desc.version ? pl->desc.version : "",
               pl->desc.description ? pl->desc.description : "",
               pl->path ? pl->path : "<built-in>");
        for (uint32_t j = 0; j < kiln_registry_count(ctx); j++)
            if (kiln_registry_at(ctx, j)->plugin == pl)
                describe(kiln_registry_at(ctx, j), stdout);
    }
    if (!found) {
        fprintf(stderr, "kiln: no plugin or component named '%s'\n", want);
        goto done;
    }
    rc = 0;
done:
    kiln_pipeline_clear(&p);
    kiln_ctx_destroy(ctx);
    return rc;
}

int kiln_cli_manifest(kiln_cli *c)
{
    if (c->npositional != 2 || strcmp(c->positional[0], "check") != 0) {
        fprintf(stderr, "usage: kiln manifest check MANIFEST\n");
        return 2;
    }
    c->manifest = c->positional[1];
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    int rc = 1;
    if (kiln_cli_pipeline(c, ctx, &p, &err) != KILN_OK) {
        kiln_cli_fail(&err);
    } else {
        kiln__pipeline_print(&p, stdout);
        printf("textual form: ");
        kiln__pipeline_print_text(&p, stdout);
        printf("\n");
        rc = 0;
    }
    kiln_pipeline_clear(&p);
    kiln_ctx_destroy(ctx);
    return rc;
}

int kiln_cli_convert(kiln_cli *c)
{
    if (need(c, 2, "IN and OUT"))
        return 2;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    kiln_graph *g = NULL;
    int rc = 1;
    /* Plugins of the manifest provide the non-JSON formats. */
    if (kiln_cli_pipeline(c, ctx, &p, &err) == KILN_OK &&
        kiln_cli_load_model(ctx, c->positional[0], &g, &err) == KILN_OK &&
        kiln_cli_write_output(ctx, g, c->positional[1], &err) == KILN_OK)
        rc = 0;
    if (rc)
        kiln_cli_fail(&err);
    if (g)
        kiln_graph_destroy(g);
    kiln_pipeline_clear(&p);
    kiln_ctx_destroy(ctx);
    return rc;
}

/* A verb served by a component: say which is missing and exit 1. */
static int needs_component(kiln_cli *c, kiln_component_kind kind, const char *name,
                           const char *what)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    int rc = 1;
    if (kiln_cli_pipeline(c, ctx, &p, &err) != KILN_OK) {
        kiln_cli_fail(&err);
    } else if (!kiln_registry_find(ctx, kind, name)) {
        fprintf(stderr, "kiln %s: no loaded plugin provides %s %s (%s); add one to the "
                        "manifest\n", c->verb, kiln_component_kind_name(kind), name, what);
    } else {
        fprintf(stderr, "kiln %s: %s %s is loaded but this kiln cannot drive it yet\n", c->verb,
                kiln_component_kind_name(kind), name);
    }
    kiln_pipeline_clear(&p);
    kiln_ctx_destroy(ctx);
    return rc;
}

/*
 * kiln lint MODEL [-m MANIFEST]: run the GraphLint pass alone (the text
 * pipeline "GraphLint" over the manifest's plugins); its W18888 warnings go
 * to stderr.  Exit 0 whatever it finds; 1 for bad input (unreadable model,
 * manifest, or no plugin providing GraphLint); 2 for usage errors.
 */
int kiln_cli_lint(kiln_cli *c)
{
    if (need(c, 1, "one MODEL argument"))
        return 2;
    if (c->output || c->passes || c->resume || c->build_step || c->build_mode) {
        fprintf(stderr, "kiln lint: -o, --passes, --resume and build steps do not apply (lint "
                        "writes nothing and runs only GraphLint)\n");
        return 2;
    }
    c->passes = "GraphLint";
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx) {
        fprintf(stderr, "kiln: out of memory\n");
        return 1;
    }
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    kiln_stage_run run;
    memset(&run, 0, sizeof(run));
    kiln_graph *g = NULL;
    int rc = 1;
    if (kiln_cli_pipeline(c, ctx, &p, &err) != KILN_OK) {
        if (kiln_error_code(&err) == KILN_ERR_NOT_FOUND &&
            !kiln_registry_find(ctx, KILN_COMP_PASS, "GraphLint"))
            fprintf(stderr, "kiln lint: no loaded plugin provides pass GraphLint (W18888 "
                            "read/write lint); add libkiln_graph_lint.so to the manifest\n");
        else
            kiln_cli_fail(&err);
        goto done;
    }
    if (kiln_cli_load_model(ctx, c->positional[0], &g, &err) != KILN_OK ||
        kiln_stage_run_pipeline(ctx, &p, g, &run, &err) != KILN_OK ||
        (c->report && kiln_stage_write_report(&run, g, c->report, &err) != KILN_OK)) {
        kiln_cli_fail(&err);
        goto done;
    }
    rc = 0;
done:
    kiln_stage_run_fini(&run);
    kiln_pipeline_clear(&p);
    if (g)
        kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    return rc;
}

int kiln_cli_run(kiln_cli *c)
{
    if (need(c, 1, "one MODEL argument"))
        return 2;
    return needs_component(c, KILN_COMP_ALLOCATOR, "RuntimeAllocator",
                           "a runtime and CPU engine to execute the model");
}
