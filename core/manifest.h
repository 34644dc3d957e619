/*
 * manifest.h - pipeline manifests (JSON, format version 1) and the textual
 * pipeline: two spellings of one kiln_pipeline.  docs/manifest.md is the
 * user-facing reference; this header is the API the CLI and the stage driver
 * use.  Only core/ (and the CLI and tests, through the static core archive)
 * include this header.
 *
 * Ownership: a kiln_pipeline filled by these functions owns its pass
 * instances, option sets and strings; free them with kiln_pipeline_clear.
 * Plugins a manifest loads belong to the kiln_ctx and stay loaded even when a
 * later step of the load fails.
 *
 * Errors: the first error wins (kiln_error); frames name the manifest file
 * (outermost) and the JSON path ("$.stages.prepare[1].options.max"), so the
 * CLI prints "kiln: a.json: $.stages.prepare[1].options.max: option 'max'
 * expects int, got string".
 *
 * Warnings (a selector matching nothing, an optional plugin that failed to
 * load) are written as "kiln: warning: ..." lines to p->instr.log, or to
 * stderr when that is NULL.  Tests point instr.log at a memory stream.
 */
#ifndef KILN_CORE_MANIFEST_H
#define KILN_CORE_MANIFEST_H

#include "options.h"
#include "pipeline.h"

#define KILN_MANIFEST_VERSION 1 /* the "kiln_manifest" value this kiln reads */
#define KILN_MANIFEST_MAX_DEPTH 16 /* longest "extends" chain */

/**
 * Load the manifest at @p path (and the chain of manifests it extends) into
 * @p ctx and @p out: loads its plugins, checks what each plugin provides,
 * sets the session options, resolves the stages' passes and their typed
 * options, applies the enable/disable selectors and fills tuners,
 * breakpoints, engines, the memory planner, the allocator and the
 * instrumentation settings.
 *
 * @p out must be zero-initialised (or cleared) by the caller; its instr.log
 * is kept and receives the warnings.  On failure @p out is cleared (instr.log
 * kept) and @p err says which file and JSON path is at fault.
 */
kiln_status kiln_manifest_load(kiln_ctx *ctx, const char *path, kiln_pipeline *out,
                               kiln_error *err);

/**
 * Apply --enable-pass / --disable-pass selectors in order (PCRE2 patterns,
 * unanchored search over pass names, last match wins).  @p enable[i] says
 * whether selector i enables or disables.  Disabling a required pass is an
 * error (KILN_ERR_INVALID); a bad pattern is KILN_ERR_PARSE; a selector that
 * matches no pass is a warning.  Selectors before a failing one stay applied.
 */
kiln_status kiln_manifest_apply_selectors(kiln_pipeline *p, const char *const *selectors,
                                          const bool *enable, uint32_t n, kiln_error *err);

/**
 * --pass-opt PASS.KEY=VALUE: set option @p key of every instance of @p pass
 * (all stages) from text, validated against the pass's schema.  Errors:
 * KILN_ERR_NOT_FOUND (no such pass in the pipeline, or no such option),
 * KILN_ERR_INVALID (wrong type, out of range).
 */
kiln_status kiln_manifest_set_pass_option(kiln_pipeline *p, const char *pass, const char *key,
                                          const char *value, kiln_error *err);

/**
 * Parse a textual pipeline into @p out's stages (replacing all of them; the
 * other fields of @p out are untouched).  Grammar (docs/manifest.md):
 *
 *   pipeline := stage ("," stage)* | pass ("," pass)*      (bare list: optimize_original)
 *   stage    := STAGE "(" [pass ("," pass)*] ")"
 *   pass     := ["-"] NAME ["!"] ["{" [opt ("," opt)*] "}"]      "-" disabled, "!" required
 *   opt      := KEY "=" (BARE | '"' chars with \" \\ '"')
 *
 * Pass names are resolved in @p ctx's registry (graph, node or fusion
 * passes); options are validated against each pass's schema.  On failure
 * @p out is unchanged and the message gives the column.
 */
kiln_status kiln__pipeline_parse_text(kiln_ctx *ctx, const char *text, kiln_pipeline *out,
                                      kiln_error *err);

/**
 * Print @p p's stages in the textual form, canonical stage order, empty
 * stages omitted, explicitly set options only.  parse_text(print_text(p))
 * yields a pipeline kiln__pipeline_equal to p.
 */
void kiln__pipeline_print_text(const kiln_pipeline *p, FILE *f);

/** Human-readable resolved pipeline (kiln manifest check). */
void kiln__pipeline_print(const kiln_pipeline *p, FILE *f);

/**
 * Same stages, same passes (component), same enabled/required state and the
 * same option values (defaults included).  Tuners and the rest are not
 * compared: the textual form does not spell them.
 */
bool kiln__pipeline_equal(const kiln_pipeline *a, const kiln_pipeline *b);

/* ---- shared by manifest.c and manifest_pipeline.c ----------------------- */

/**
 * Append an instance of pass (or fusion pass) @p name to @p st with default
 * options.  KILN_ERR_NOT_FOUND with a "did you mean" hint for unknown names.
 */
kiln_status kiln__pipeline_append(kiln_ctx *ctx, kiln_stage *st, const char *name,
                                  kiln_pass_inst **out, kiln_error *err);

/**
 * Apply one selector.  @p origin says where it came from ("--disable-pass",
 * "a.json: $.disable[0]"); it is recorded in disabled_by and used in messages.
 * A selector that matches nothing is warned about on @p p's log.
 */
kiln_status kiln__pipeline_select(kiln_pipeline *p, const char *pattern, bool enable,
                                  const char *origin, kiln_error *err);

/** Write "kiln: warning: <msg>\n" to p->instr.log (stderr if NULL). */
void kiln__pipeline_warn(const kiln_pipeline *p, const char *fmt, ...) KILN_PRINTF(2, 3);

/**
 * The registered name of kind @p k1 or @p k2 (0 = unused) closest to
 * @p name by edit distance, or NULL when none is close enough to suggest.
 */
const char *kiln__registry_suggest(const kiln_ctx *ctx, kiln_component_kind k1,
                                   kiln_component_kind k2, const char *name);

/**
 * The string of @p cands (@p n of them, NULL entries skipped) closest to
 * @p name by case-insensitive edit distance, or NULL when none is close
 * enough to suggest (the same threshold as kiln__registry_suggest).
 */
const char *kiln__suggest(const char *name, const char *const *cands, uint32_t n);

/** Free a pass instance's contents (not the struct). */
void kiln__pass_inst_clear(kiln_pass_inst *pi);

#endif /* KILN_CORE_MANIFEST_H */
