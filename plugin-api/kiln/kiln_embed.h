/*
 * kiln_embed.h - kiln as a library: load a manifest and its plugins, import a
 * model, compile it, write it out and run it, in-process.
 *
 * For programs that link libkiln (`pkg-config --cflags --libs kiln`, or CMake
 * `find_package(kiln)` and `target_link_libraries(app kiln::kiln)`); see
 * docs/embedding.md.  Plugins never include it: they reach the host only
 * through the table of kiln.h.
 *
 *   kiln_error *err = kiln_error_create();
 *   kiln_session *s = kiln_session_create();
 *   kiln_session_load_manifest(s, NULL, err);          // NULL: the default manifest
 *   kiln_model *m;
 *   kiln_model_import(s, "model.onnx", NULL, &m, err); // format from the extension
 *   kiln_model_set_input(m, "x", &x, err);             // shapes flow into compilation
 *   kiln_model_compile(m, NULL, err);                  // the manifest's stages
 *   kiln_model_run(m, err);
 *   const kiln_tensor *y = kiln_model_output(m, 0);
 *   kiln_model_destroy(m);
 *   kiln_session_destroy(s);
 *   kiln_error_destroy(err);
 *
 * Every fallible call returns a kiln_status and records the reason in the
 * caller's kiln_error (kiln_error_format gives "frame: frame: message").
 * Handles are opaque; a session and its models are used from one thread at a
 * time.  Models must be destroyed before their session.
 */
#ifndef KILN_EMBED_H
#define KILN_EMBED_H

#ifdef KILN_PLUGIN
#error "kiln_embed.h is for programs that link libkiln; plugins use kiln.h only"
#endif

#include "kiln.h"
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ---------------------------------------------------------- */

/** kiln's release ("0.1.0"). */
KILN_API const char *kiln_version(void);
/** The plugin ABI this libkiln implements (plugins of another major, or of a
 * newer minor, are refused). */
KILN_API void kiln_abi_version(uint32_t *major, uint32_t *minor);

/**
 * Optional: install kiln's SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT handlers,
 * which print the plugin, pass, stage, graph and node that were running
 * before the process dies.  Programs with their own handlers leave this out.
 */
KILN_API void kiln_crash_handlers_install(void);

/* ---- errors ------------------------------------------------------------ */

/** A new, empty error object; NULL on OOM.  Destroy with kiln_error_destroy. */
KILN_API kiln_error *kiln_error_create(void);
KILN_API void kiln_error_destroy(kiln_error *err);
/** Reset to "no error" (reuse one object for several calls). */
KILN_API void kiln_error_clear(kiln_error *err);
/** "frame: frame: message", outermost frame first, into @p buf (truncated to @p size). */
KILN_API void kiln_error_format(const kiln_error *err, char *buf, size_t size);

/* ---- sessions: context, plugins, pipeline ------------------------------ */

typedef struct kiln_session kiln_session;

/** A session with no plugins and no pipeline yet; NULL on OOM. */
KILN_API kiln_session *kiln_session_create(void);
/** Finalise and unload its plugins.  Destroy the session's models first. */
KILN_API void kiln_session_destroy(kiln_session *s);

/** Path of the default manifest installed beside libkiln
 * (<prefix>/share/kiln/manifests/default.json). */
KILN_API const char *kiln_default_manifest(void);

/**
 * Load manifest @p path (NULL = kiln_default_manifest()): its plugins, session
 * options and pipeline (docs/manifest.md).  Replaces the session's pipeline;
 * plugins already loaded stay.  Overrides (below) apply to the pipeline
 * loaded here, so load the manifest first.
 */
KILN_API kiln_status kiln_session_load_manifest(kiln_session *s, const char *path,
                                                kiln_error *err);
/** Load one more plugin file (an out-of-tree .so) into the session. */
KILN_API kiln_status kiln_session_load_plugin(kiln_session *s, const char *path,
                                              kiln_error *err);
/** Set a session option (what `--option KEY=VALUE` sets; replaces the manifest's). */
KILN_API kiln_status kiln_session_set_option(kiln_session *s, const char *key,
                                             const char *value, kiln_error *err);
/** A session option's value, or NULL. */
KILN_API const char *kiln_session_option(const kiln_session *s, const char *key);
/** Replace the pipeline's stages by textual pipeline @p text (`--passes`). */
KILN_API kiln_status kiln_session_set_passes(kiln_session *s, const char *text,
                                             kiln_error *err);
/** Enable or disable the passes whose names match regex @p pattern
 * (`--enable-pass` / `--disable-pass`). */
KILN_API kiln_status kiln_session_select_passes(kiln_session *s, const char *pattern,
                                                bool enable, kiln_error *err);
/** Set option @p key of pass @p pass to @p value (`--pass-opt PASS.KEY=VALUE`). */
KILN_API kiln_status kiln_session_set_pass_option(kiln_session *s, const char *pass,
                                                  const char *key, const char *value,
                                                  kiln_error *err);
/**
 * Set an instrumentation setting of the pipeline, by the key the manifest's
 * "instrumentation" object uses: verify_each and time_passes ("true"/"false"),
 * print_after (a regex, or NULL for none), dump_dir (a directory, or NULL),
 * bisect_limit (an integer, -1 = off).
 */
KILN_API kiln_status kiln_session_set_instrumentation(kiln_session *s, const char *key,
                                                      const char *value, kiln_error *err);
/** -1 quiet, 0 normal (default), 1+ verbose; warnings and timings go to @p log. */
KILN_API void kiln_session_set_verbosity(kiln_session *s, int verbosity);
/** Where warnings, --time-passes tables and print-after dumps go (default stderr). */
KILN_API void kiln_session_set_log(kiln_session *s, FILE *log);
/** Print the resolved pipeline: as `kiln manifest check` does, or (@p textual)
 * in the textual pipeline syntax. */
KILN_API void kiln_session_print_pipeline(const kiln_session *s, FILE *f, bool textual);

/** A loaded plugin. */
typedef struct kiln_plugin_info {
    uint32_t struct_size; /* set by the caller to sizeof(kiln_plugin_info) */
    const char *name, *version, *license, *description, *build_info;
    const char *file;     /* NULL for components registered in-process */
    uint32_t abi_major, abi_minor;
} kiln_plugin_info;

/** A registered component. */
typedef struct kiln_component_info {
    uint32_t struct_size; /* set by the caller to sizeof(kiln_component_info) */
    const char *kind;     /* "pass", "engine", "checker", "frontend", "tuner", "instrument",
                             "runtime" */
    const char *name;
    int32_t plugin;       /* index for kiln_session_plugin, -1 = none */
    /* The descriptor as registered (borrowed, valid while the session lives):
     * a kiln_pass_desc, kiln_engine_desc, kiln_checker_desc, kiln_frontend_desc,
     * kiln_tuner_desc, kiln_instrument_desc or kiln_runtime_desc by kind. */
    const void *desc;
} kiln_component_info;

KILN_API uint32_t kiln_session_plugin_count(const kiln_session *s);
/** Fill @p out for plugin @p i; false when out of range. */
KILN_API bool kiln_session_plugin(const kiln_session *s, uint32_t i, kiln_plugin_info *out);
KILN_API uint32_t kiln_session_component_count(const kiln_session *s);
/** Fill @p out for component @p i (registration order); false when out of range. */
KILN_API bool kiln_session_component(const kiln_session *s, uint32_t i,
                                     kiln_component_info *out);

/* ---- models ------------------------------------------------------------ */

typedef struct kiln_model kiln_model;

/**
 * Import the model at @p path.  @p format: "json" (kiln's graph JSON), or the
 * name of a frontend plugin ("onnx"), or NULL to choose by the file's
 * extension (.json, else a frontend that lists it).  The graph is verified.
 */
KILN_API kiln_status kiln_model_import(kiln_session *s, const char *path, const char *format,
                                       kiln_model **out, kiln_error *err);
/** Import graph JSON from memory (@p len bytes, need not be NUL-terminated). */
KILN_API kiln_status kiln_model_import_json(kiln_session *s, const char *text, size_t len,
                                            kiln_model **out, kiln_error *err);
KILN_API void kiln_model_destroy(kiln_model *m);
/** The model's root graph, for reading or editing with kiln_graph.h. */
KILN_API kiln_graph *kiln_model_graph(kiln_model *m);

/** What kiln_model_compile may do besides running every stage. */
typedef struct kiln_compile_options {
    uint32_t struct_size; /* sizeof(kiln_compile_options) */
    const char *stop_step; /* build step to stop at (before_ub_match, after_ub_match,
                              after_build), NULL = run to the end */
    const char *tuner;     /* extra tuner component to fire at the build steps, or NULL */
} kiln_compile_options;

/**
 * Run the session's pipeline over the model (every stage; @p opts may be
 * NULL).  Returns KILN_PAUSED when it stopped at opts->stop_step (or a
 * manifest breakpoint); kiln_model_paused_step says which.
 */
KILN_API kiln_status kiln_model_compile(kiln_model *m, const kiln_compile_options *opts,
                                        kiln_error *err);
/** The build step the last compile stopped at, NULL when it ran to the end. */
KILN_API const char *kiln_model_paused_step(const kiln_model *m);
/** Check every structural invariant of the graph (docs/GRAPH_FORMAT rules). */
KILN_API kiln_status kiln_model_verify(const kiln_model *m, kiln_error *err);
/**
 * Write the model to @p path, atomically (the file is replaced only when the
 * whole write succeeded).  @p format: "json", "dot", a frontend name ("onnx"),
 * or NULL to choose by extension.  The graph is verified first.
 */
KILN_API kiln_status kiln_model_write(kiln_model *m, const char *path, const char *format,
                                      kiln_error *err);
/** The graph JSON document as a string; free it with kiln_free.  NULL on failure. */
KILN_API char *kiln_model_to_json(const kiln_model *m, kiln_error *err);
/** Write the JSON report of the last compile (passes, times, node deltas). */
KILN_API kiln_status kiln_model_write_report(const kiln_model *m, const char *path,
                                             kiln_error *err);

/* ---- running ----------------------------------------------------------- */
/*
 * Inputs are the root graph's Data nodes in `index` order, named by their
 * ONNX value name when imported from ONNX, else by node name (either is
 * accepted); outputs are the root NetOutput's inputs in order, named as at
 * import.  Set the inputs before compiling and their shapes make every shape
 * static; after compiling, an input must have the compiled dtype and shape.
 */

KILN_API uint32_t kiln_model_input_count(const kiln_model *m);
/** Name of input @p i, NULL when out of range. */
KILN_API const char *kiln_model_input_name(const kiln_model *m, uint32_t i);
/** Index of the input called @p name, -1 when none. */
KILN_API int32_t kiln_model_input_index(const kiln_model *m, const char *name);
/** Declared dtype and shape of input @p i (rank -1 = unknown; dims -1 = dynamic). */
KILN_API kiln_status kiln_model_input_desc(const kiln_model *m, uint32_t i, kiln_dtype *dtype,
                                           int32_t *rank, const int64_t **dims);
/**
 * Bind input @p name (or kiln_model_set_input_at: index @p i) to @p t.  The
 * dtype and every fixed dim must match what the model declares.  @p t's
 * dims are copied; its data is borrowed and must stay valid until the last
 * kiln_model_run that uses it returns.
 */
KILN_API kiln_status kiln_model_set_input(kiln_model *m, const char *name, const kiln_tensor *t,
                                          kiln_error *err);
KILN_API kiln_status kiln_model_set_input_at(kiln_model *m, uint32_t i, const kiln_tensor *t,
                                             kiln_error *err);
/**
 * Load the compiled model into its runtime (the one named by session option
 * `kiln.runtime`, else the first runtime loaded) without running it; the
 * first kiln_model_run does this itself.  Separates load time from run time.
 */
KILN_API kiln_status kiln_model_prepare(kiln_model *m, kiln_error *err);
/**
 * Execute the compiled model once on the runtime named by session option
 * `kiln.runtime`, else the first runtime loaded (the graph is loaded into the
 * runtime on the first run and kept).  Every input must be set.  The outputs
 * of the previous run are released.
 */
KILN_API kiln_status kiln_model_run(kiln_model *m, kiln_error *err);
KILN_API uint32_t kiln_model_output_count(const kiln_model *m);
KILN_API const char *kiln_model_output_name(const kiln_model *m, uint32_t j);
/** Index of the output called @p name, -1 when none. */
KILN_API int32_t kiln_model_output_index(const kiln_model *m, const char *name);
/** Output @p j of the last run (borrowed until the next run or destroy), NULL
 * when out of range or not run yet. */
KILN_API const kiln_tensor *kiln_model_output(const kiln_model *m, uint32_t j);

#ifdef __cplusplus
}
#endif

#endif /* KILN_EMBED_H */
