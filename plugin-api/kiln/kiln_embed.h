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

/* kiln_error_create, _destroy, _clear and _format: kiln_status.h. */

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
/**
 * Load now every plugin the manifest deferred (engine and runtime plugins load
 * on first need: docs/manifest.md, "Deferred loading"), so that a check sees
 * every load error.  The first failure is returned as
 * "<manifest>: $.plugins[N].path: <reason>".
 */
KILN_API kiln_status kiln_session_load_deferred(kiln_session *s, kiln_error *err);
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
 * bisect_limit (an integer, -1 = off), stats ("true"/"false": per-pass
 * statistics into the report).
 */
KILN_API kiln_status kiln_session_set_instrumentation(kiln_session *s, const char *key,
                                                      const char *value, kiln_error *err);
/** -2 errors only, -1 quiet (warnings still shown), 0 normal (default), 1+
 * verbose; warnings and timings go to @p log. */
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
 * Import the model at @p path ("-": standard input).  @p format: "json"
 * (kiln's graph JSON), a frontend's extension ("onnx" or ".onnx") or name, or
 * NULL to choose by the file's extension (.json, else a frontend that lists
 * it); see kiln_session_formats.  Graph JSON is checked as it is read; a
 * frontend's graph is verified by kiln_model_verify, kiln_model_write and the
 * pipeline's verify_each.
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
    /* appended in 0.2 (read when struct_size covers them) */
    const char *build_mode; /* "normal" or "tuning", recorded in a paused state; NULL = normal */
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
 * whole write succeeded; inside an output set, at its commit).  @p format:
 * "json", "dot", a frontend's extension or name ("onnx"), or NULL to choose by
 * extension ("-", standard output, and other streams: JSON).  The graph is
 * verified first (once per change of the graph).
 */
KILN_API kiln_status kiln_model_write(kiln_model *m, const char *path, const char *format,
                                      kiln_error *err);
/** The graph JSON document as a string; free it with kiln_free.  NULL on failure. */
KILN_API char *kiln_model_to_json(const kiln_model *m, kiln_error *err);
/** Write the JSON report of the last compile (passes, times, node deltas). */
KILN_API kiln_status kiln_model_write_report(const kiln_model *m, const char *path,
                                             kiln_error *err);
/**
 * Draw the memory plan of the last compile (what MemoryAssigner wrote on the
 * graph) as SVG into @p path, atomically (inside an output set: at its
 * commit).  `kiln compile --memory-svg` (session option kiln.memory_svg).
 * Errors: KILN_ERR_INVALID when the graph has no memory plan; I/O errors.
 */
KILN_API kiln_status kiln_model_write_memory_svg(const kiln_model *m, const char *path,
                                                 kiln_error *err);

/* ---- the model cache (docs/model_cache.md) ------------------------------- */
/*
 * Two modes, chosen by session options: kiln's automatic key
 * (`kiln.cache_dir`, the command line's --cache-dir: a SHA-256 over the
 * canonical graph with its weights, the resolved pipeline with every option,
 * the output format and every plugin's name, version and file digest), or
 * GE's key-and-directory cache (`ge.graph_compiler_cache_dir` and
 * `ge.graph_key`, the user's key).  With neither, the cache is disabled.
 */

/**
 * Before kiln_model_compile: look the compile of @p m to @p path (in
 * @p format, NULL = by extension, as kiln_model_write) up in the cache.  On a
 * hit (*hit true) the cached model, its SHA-256 checked, has been written to
 * @p path atomically (inside an output set: at the commit), and compiling is
 * unnecessary.  On a miss the key's lock stays held (a concurrent compile of
 * the same key waits) until kiln_model_cache_store or kiln_model_destroy.
 * A corrupt entry is a warning on the session's log and a miss.  A paused or
 * resumed build (@p opts->stop_step, kiln_session_resume) is never cached.
 * Errors (the report's status "error"): a bad GE key or cache.conf, a cache
 * directory that is missing or not one, both modes at once, a lock or I/O
 * failure, an output format nobody writes.
 */
KILN_API kiln_status kiln_model_cache_lookup(kiln_model *m, const kiln_compile_options *opts,
                                             const char *path, const char *format, bool *hit,
                                             kiln_error *err);
/**
 * After a miss and a complete compile: write the model (in the format of the
 * lookup) into the cache as a new entry, atomically, record its SHA-256 in
 * the index, and release the lock.  Call it outside an output set.  A no-op
 * when the lookup hit, the cache is disabled, or the compile paused.
 */
KILN_API kiln_status kiln_model_cache_store(kiln_model *m, kiln_error *err);
/**
 * After kiln_model_cache_store wrote an entry: write it to @p path (a copy,
 * its SHA-256 checked; atomic, inside an output set at the commit): the bytes
 * kiln_model_write would write in the lookup's format, without serializing
 * the model again.  KILN_ERR_NOT_FOUND when no entry was stored (a hit, debug
 * mode, the cache disabled): then call kiln_model_write.
 */
KILN_API kiln_status kiln_model_cache_write(kiln_model *m, const char *path, kiln_error *err);
/**
 * Before importing @p model (a file; "-" is never probed): with the automatic
 * key, look the compile up by its *input key* (the model file's content and
 * real path, @p input_format, @p extra such as --input-shape arguments, and
 * everything else of the automatic key but the graph); with GE's key, by that
 * key.  A hit writes @p path like kiln_model_cache_lookup and makes the import
 * unnecessary; a miss (also: a paused build, a first compile) changes nothing
 * and the caller imports and calls kiln_model_cache_lookup, which records the
 * input key for the next probe.  Errors: an unreadable model or plugin file,
 * I/O, a bad GE key or cache.conf.
 */
KILN_API kiln_status kiln_session_cache_probe(kiln_session *s, const char *model,
                                              const char *input_format,
                                              const char *const *extra, uint32_t nextra,
                                              const kiln_compile_options *opts, const char *path,
                                              const char *format, bool *hit, kiln_error *err);
/** kiln_model_cache_status for the last kiln_session_cache_probe ("hit" or "disabled"). */
KILN_API const char *kiln_session_cache_status(const kiln_session *s, const char **key,
                                               const char **entry, double *ms);
/** After a probe hit: the report of a compile that ran no pass (graph named after
 *  @p model's file name, no nodes), with its model_cache key. */
KILN_API kiln_status kiln_session_write_cache_report(kiln_session *s, const char *model,
                                                     const char *path, kiln_error *err);
/** "hit", "miss", "disabled" or "error" for the last lookup; @p key, @p entry
 *  (the entry file used or written) and @p ms (time in the cache) optional. */
KILN_API const char *kiln_model_cache_status(const kiln_model *m, const char **key,
                                             const char **entry, double *ms);

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

/* ---- additions of 0.2: what the kiln command line is built on ------------ */
/*
 * Thread rules as above: a session, its models and the output set are used
 * from one thread at a time.  The output set and the signal clean-up are
 * process-wide (one output set at a time).
 */

/**
 * Whether @p key is a session option kiln can read: keys outside the "kiln."
 * namespace belong to plugins and are always accepted; a "kiln." key must be
 * one of KILN_KNOWN_OPTION_KEYS.  When it is not, *hint (optional) gets the
 * closest known key or NULL (a static buffer of the calling thread).
 * kiln_session_load_manifest refuses a manifest whose "options" hold an
 * unknown kiln.* key.
 */
KILN_API bool kiln_option_key_known(const char *key, const char **hint);
#define KILN_KNOWN_OPTION_KEYS                                                                     \
    "kiln reads kiln.runtime, kiln.input_shape.NAME, kiln.input_value.NAME, kiln.threads, "       \
    "kiln.engine_priority, kiln.partition_mode, kiln.memory_planner, kiln.memory_svg, "          \
    "kiln.report_buffers, kiln.max_streams, kiln.cache_dir and kiln.allocator"

/** The entry of @p cands closest to @p word (edit distance), NULL when none is close. */
KILN_API const char *kiln_suggest(const char *word, const char *const *cands, uint32_t n);

/** Whether a loaded component of kind @p kind ("pass", "runtime", ...) is called @p name. */
KILN_API bool kiln_session_has_component(const kiln_session *s, const char *kind, const char *name);

/** Whether @p step names a build step (before_ub_match, after_ub_match, after_build). */
KILN_API bool kiln_build_step_valid(const char *step);

/**
 * The formats the session can read (@p import) or write, "json, dot, onnx",
 * into @p buf.  A format is "json", "dot" (write only), or a file extension a
 * loaded frontend declares, or that frontend's name.  Every import and write
 * call of this header chooses the format the same way: by @p format when
 * given (with or without the leading dot), else by the path's extension; a
 * path without one that is a stream ("-", a FIFO, /dev/stdout) is JSON.
 */
KILN_API void kiln_session_formats(const kiln_session *s, bool import, char *buf, size_t size);

/*
 * Paths.  kiln_model_import and kiln_input_read take "-" for standard input
 * (a model on standard input is JSON when it starts with '{', else ONNX when
 * it looks like protobuf, else @p format decides); kiln_model_write,
 * kiln_model_write_report, kiln_model_write_paused and kiln_output_write take
 * "-" for standard output.
 */

/* ---- paused builds (docs/tuning.md) --------------------------------------- */

/**
 * After kiln_model_compile returned KILN_PAUSED: write the paused state (the
 * graph and everything that decides the result: manifest and plugin files
 * with their digests, pass selection, pass and session options, passes,
 * tuner, bisect limit) to @p path, atomically.
 */
KILN_API kiln_status kiln_model_write_paused(kiln_model *m, const char *path, kiln_error *err);
/**
 * Resume a paused build: @p s must be fresh (no manifest loaded, no override
 * applied).  Reads @p path (refusing other format versions and changed
 * manifest or plugin files before anything is loaded), loads the recorded
 * manifest, replays the recorded overrides, checks the result is the paused
 * build's, and returns the model; kiln_model_compile continues at the next
 * stage (with the recorded tuner and build mode unless the options give
 * others).  Diagnostics (verbosity, log, instrumentation) may be set after.
 */
KILN_API kiln_status kiln_session_resume(kiln_session *s, const char *path, kiln_model **out,
                                         kiln_error *err);
/** The build step a resumed model had paused at; NULL when it was not resumed, or once
 * kiln_model_compile ran it. */
KILN_API const char *kiln_model_resumed_step(const kiln_model *m);
/** Whether the next kiln_model_compile of @p m can still stop at build step @p step. */
KILN_API bool kiln_model_step_reachable(const kiln_model *m, const char *step);

/* ---- inputs and runtime options ------------------------------------------ */

/**
 * Whether the model's inputs and outputs could be described at import (the
 * root Data nodes need unique `index` attributes 0..n-1).  A model without
 * that still compiles and writes; setting inputs and running fail with this
 * error.
 */
KILN_API kiln_status kiln_model_io_status(const kiln_model *m, kiln_error *err);
/** The Data node name of input @p i (the user-facing name may be its ONNX value name);
 * borrowed from the model.  NULL when out of range. */
KILN_API const char *kiln_model_input_node(const kiln_model *m, uint32_t i);
/** Input @p i as the model declares it, "float32 [N,3,?,224]" (a symbolic dim by
 * its name, an unknown one '?', "(unknown rank)"), into @p buf; "" when out of range. */
KILN_API void kiln_model_input_desc_str(const kiln_model *m, uint32_t i, char *buf, size_t size);
/**
 * Fix the shape of input @p name (node name or ONNX value name) without
 * giving data: only the dims the model leaves unknown may differ.  Sets the
 * session option kiln.input_shape.<node> that InferShapes reads (recorded in
 * a paused state as such).  Call before kiln_model_compile.
 */
KILN_API kiln_status kiln_model_set_input_shape(kiln_model *m, const char *name, uint32_t rank,
                                                const int64_t *dims, kiln_error *err);
/**
 * Set option @p key of the runtime instance (its schema: kiln plugins
 * <runtime>), e.g. "max_memory".  Checked and applied when the runtime is
 * loaded (kiln_model_prepare or the first run), which fails when the runtime
 * has no such option; setting one unloads a loaded runtime.
 */
KILN_API kiln_status kiln_model_set_runtime_option(kiln_model *m, const char *key,
                                                   const char *value, kiln_error *err);

/** Name of the runtime component the model is loaded into, NULL when not loaded. */
KILN_API const char *kiln_model_runtime(const kiln_model *m);

/**
 * Profile the runs (kiln run --trace / --report): with @p on, the runtime's
 * bool option `profile` is set when it is loaded (a runtime without one runs
 * unprofiled); a loaded runtime is unloaded so the change applies.  Call
 * before kiln_model_prepare.
 */
KILN_API kiln_status kiln_model_set_profiling(kiln_model *m, bool on, kiln_error *err);
/**
 * The profile of the runs since load (kiln_runtime.h, kiln_run_profile; the
 * caller sets out->struct_size), valid until the next run or destroy.
 * Errors: no run yet; KILN_ERR_UNSUPPORTED when the runtime has no profile
 * callback.
 */
KILN_API kiln_status kiln_model_profile(const kiln_model *m, kiln_run_profile *out,
                                        kiln_error *err);
/**
 * Write the runs' profile as a Chrome trace-event file (JSON array, Perfetto
 * and chrome://tracing read it; docs/outputs.md): one row (tid) per stream,
 * one complete event ("ph":"X") per task with the node, op and engine, one
 * flow ("ph":"s"/"f") per event wait.  Atomic (inside an output set: at the
 * commit).  Errors: as kiln_model_profile; profiling was off; I/O.
 */
KILN_API kiln_status kiln_model_write_trace(const kiln_model *m, const char *path,
                                            kiln_error *err);

/* ---- files and the output set --------------------------------------------- */

/** Writes the whole content to @p f; returns KILN_OK or fills @p err. */
typedef kiln_status (*kiln_output_write_fn)(FILE *f, void *ud, kiln_error *err);
/**
 * Atomically replace (or create) @p path with what @p fn writes: a mkstemp
 * temporary beside it, fsynced and renamed over it; on any failure @p path
 * is untouched and no temporary is left.  Inside an output set the rename
 * waits for kiln_output_set_commit.
 */
KILN_API kiln_status kiln_output_write(const char *path, kiln_output_write_fn fn, void *ud,
                                       kiln_error *err);
/**
 * Start an output set: every write of this header (models, reports, paused
 * states, kiln_output_write) is held back until kiln_output_set_commit
 * replaces all the destinations, or kiln_output_set_abort removes them all.
 * Not nested; process-wide.
 */
KILN_API void kiln_output_set_begin(void);
/** Commit the output set; on failure the error says which destinations were
 * replaced and which were not written. */
KILN_API kiln_status kiln_output_set_commit(kiln_error *err);
/** Abandon the output set (no-op outside one). */
KILN_API void kiln_output_set_abort(void);
/**
 * Optional: install handlers for the terminating signals (SIGINT, SIGTERM,
 * SIGHUP, SIGPIPE, ...) that remove every live temporary, then die of the
 * signal.  Idempotent.
 */
KILN_API void kiln_output_cleanup_on_signals(void);
/** Check that @p path can be read as a file ("-" always can): "<path>: no
 * such file", "<path> is a directory, not a file", ... */
KILN_API kiln_status kiln_input_check(const char *path, kiln_error *err);
/** Read the whole of @p path ("-": standard input), NUL-terminated; free
 * *buf with kiln_free.  @p len (optional) gets the length. */
KILN_API kiln_status kiln_input_read(const char *path, char **buf, size_t *len, kiln_error *err);

/** One line describing an op of the registry (kiln_op.h) for listings:
 * "domain::type flags... inputs a..b outputs c..d", into @p buf; returns buf. */
KILN_API const char *kiln_op_describe(const kiln_op_def *d, char *buf, size_t size);

/** Describe engine @p d for listings (`kiln plugins ENGINE`, docs/engines.md):
 * summary, priority, the hooks it implements and its op table, one line per
 * op with its dtypes and formats, to @p f. */
KILN_API void kiln_engine_describe(FILE *f, const kiln_engine_desc *d);

/**
 * Plan memory problem @p p with memory planner @p planner (NULL = the
 * session's `memory_planner`, else "kiln") of the session's loaded plugins,
 * then check the plan (kiln_mem_plan_run, kiln_mem_plan_check).  @p opts are
 * @p nopts "KEY=VALUE" options of the planner (validated against the options
 * it declares).  *peak receives the arena size; the blocks' offsets are set.
 * Errors: KILN_ERR_NOT_FOUND (no such planner), KILN_ERR_NOT_FOUND /
 * KILN_ERR_INVALID for an unknown or malformed option, the planner's error or
 * the checker's, each with a frame naming the planner.  For `kiln memplan` and
 * benchmarks, which plan problems that come from no graph.
 */
KILN_API kiln_status kiln_session_mem_plan(kiln_session *s, const char *planner,
                                           const char *const *opts, uint32_t nopts,
                                           kiln_mem_problem *p, int64_t *peak, kiln_error *err);

/**
 * A runtime allocator stack of component @p name from the session's loaded
 * plugins (kiln_alloc_api.h, docs/allocators.md): kiln_alloc_stack_create on a
 * graph of the session.  Errors as kiln_alloc_stack_create's.
 */
KILN_API kiln_status kiln_session_alloc_stack_create(kiln_session *s, const char *name,
                                                     const char *const *opts, uint32_t nopts,
                                                     const kiln_alloc_config *cfg,
                                                     kiln_alloc_stack **out, kiln_error *err);

#ifdef __cplusplus
}
#endif

#endif /* KILN_EMBED_H */
