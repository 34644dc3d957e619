/*
 * cache.h - the compiled-model cache (docs/model_cache.md): GE's
 * key-and-directory cache (ModelCache, GE_SEMANTICS_BUILD.md §5) and the
 * automatic key kiln computes from everything that decides a build.
 *
 * A cache object is one key in one directory.  Opening it validates the
 * options, reads `<dir>/cache.conf`, takes an exclusive flock on
 * `<dir>/<key>.lock` (held until kiln__cache_close, so concurrent compiles
 * of one key run one after the other) and fixes the candidate entries once:
 * the `<key>.idx` entries of this key whose file has the wanted extension,
 * else `<key>.<ext>` alone.  Loading copies the first sound candidate to an
 * output path; saving writes a new entry (temporary + fsync + rename) and
 * appends it to the index.
 *
 * Entries are kiln's output files (graph JSON, .kmodel, .dot, ...), so an
 * entry's extension is its output format's; GE's `.om` is never used.
 * The index keeps GE's format (4-space indented JSON, entries appended)
 * and adds "kiln_sha256" and "kiln_size" to each entry: a candidate whose
 * file no longer has them is corrupt, is skipped with a warning naming the
 * file, and is replaced by the next save.
 *
 * Only core/ and tests include this header.
 */
#ifndef KILN_CORE_CACHE_H
#define KILN_CORE_CACHE_H

#include "base.h"
#include "digest.h"

/* GE's option names and the pattern of a user key. */
#define KILN_CACHE_GE_DIR_OPTION "ge.graph_compiler_cache_dir"
#define KILN_CACHE_GE_KEY_OPTION "ge.graph_key"
#define KILN_CACHE_DIR_OPTION "kiln.cache_dir" /* the automatic key (--cache-dir) */
#define KILN_CACHE_KEY_MAX 128

typedef struct kiln_cache kiln_cache;

typedef enum kiln_cache_mode {
    KILN_CACHE_GE,   /* the user's key (ge.graph_key): any model saved under it is a hit */
    KILN_CACHE_AUTO, /* a SHA-256 key (kiln__cache_key): one entry, <key>.<ext> */
} kiln_cache_mode;

/** Whether @p key matches ^[A-Za-z0-9_\-]{1,128}$ (GE's graph_key rule). */
bool kiln__cache_key_valid(const char *key);

/**
 * Open the cache for @p key under @p dir, entries with extension @p ext
 * ("json", "kmodel").  GE's Init: a NULL or empty @p dir or @p key disables
 * the cache (KILN_OK, *out NULL).  Otherwise:
 *   - @p dir must be an existing directory (KILN_ERR_PARAM naming it; GE's
 *     E13026), except that in KILN_CACHE_AUTO mode a missing last component
 *     is created;
 *   - @p key must match the pattern (KILN_ERR_PARAM; there is no fallback);
 *   - `<dir>/cache.conf`, when present, must be a JSON object whose
 *     "cache_manual_check" and "cache_debug_mode" are booleans when present
 *     (KILN_ERR_PARSE naming the file and the key); debug mode disables
 *     saving, manual check is read and otherwise unused (as in GE);
 *   - `<dir>/<key>.lock` is opened and locked exclusively (blocking);
 *     failures are KILN_ERR_IO naming the file;
 *   - the candidates are fixed: see the file comment.  An unreadable or
 *     malformed index is a warning on @p log (NULL: stderr) and no candidate.
 * The name a save will use is fixed here too: `<key>_<YYYYmmddHHMMSS>.<ext>`
 * (local time; KILN_CACHE_GE) or `<key>.<ext>` (KILN_CACHE_AUTO).
 * Time O(index size).  Close with kiln__cache_close.
 */
kiln_status kiln__cache_open(kiln_cache_mode mode, const char *dir, const char *key,
                             const char *ext, FILE *log, kiln_cache **out, kiln_error *err);

/** Release the lock and free @p c (NULL-safe). */
void kiln__cache_close(kiln_cache *c);

/** Number of candidate entries fixed at open. */
uint32_t kiln__cache_candidate_count(const kiln_cache *c);
/** Whether `<dir>/cache.conf` set cache_debug_mode / cache_manual_check. */
bool kiln__cache_debug_mode(const kiln_cache *c);
bool kiln__cache_manual_check(const kiln_cache *c);
/** The directory, with a trailing '/' (as GE adds it). */
const char *kiln__cache_dir(const kiln_cache *c);
/** The entry the last load used, else the name the next save writes. */
const char *kiln__cache_entry(const kiln_cache *c);

/**
 * GE's TryLoadModelFromCache: copy the first sound candidate to @p out_path
 * (kiln_file_write_atomic: inside an output set, at its commit).  A
 * candidate is sound when its file exists and, when the index recorded them,
 * has the recorded size and SHA-256 (checked while copying; a mismatch
 * removes the partial output).  KILN_CACHE_AUTO candidates must have them.
 * Unsound candidates are warnings on the log.  *hit says whether one was
 * copied; KILN_OK either way unless @p out_path cannot be written.
 * Time O(size of the entries tried).
 */
kiln_status kiln__cache_load(kiln_cache *c, const char *out_path, bool *hit, kiln_error *err);

/** Writes the content of an entry to the file at @p path (which exists, empty). */
typedef kiln_status (*kiln_cache_produce_fn)(const char *path, void *ud, kiln_error *err);

/**
 * GE's TryCacheModel: unless debug mode is on, have @p produce write the
 * entry into a temporary beside it, hash it, fsync and rename it to
 * kiln__cache_entry, then record it in `<key>.idx` (KILN_CACHE_GE: appended
 * to the entries there; KILN_CACHE_AUTO: the only entry), written the same
 * way.  Neither file is ever seen half-written.  Errors: @p produce's, or
 * KILN_ERR_IO naming the file.  Time O(entry size + index size).
 */
kiln_status kiln__cache_save(kiln_cache *c, kiln_cache_produce_fn produce, void *ud,
                             kiln_error *err);

/** After a successful save: the entry's SHA-256 (hex) and size; NULL / -1 before. */
const char *kiln__cache_saved_sha256(const kiln_cache *c);
int64_t kiln__cache_saved_size(const kiln_cache *c);

/**
 * Copy @p src to @p out (kiln_file_write_atomic), checking on the way that it
 * has @p size bytes and SHA-256 @p sha (hex).  A mismatch is KILN_ERR_PARSE
 * naming @p src and leaves @p out untouched.  O(size).
 */
kiln_status kiln__cache_copy_checked(const char *src, const char *sha, int64_t size,
                                     const char *out, kiln_error *err);

/**
 * The input-key alias: `<dir>/<alias>.alias` holds the automatic key its
 * input was last compiled under.  kiln__cache_alias_read fills @p key (hex)
 * and returns true when the file exists and holds a well-formed key;
 * kiln__cache_alias_write replaces it atomically.  The directory must exist.
 */
bool kiln__cache_alias_read(const char *dir, const char *alias, char key[KILN_SHA256_HEX_LEN + 1]);
kiln_status kiln__cache_alias_write(const char *dir, const char *alias, const char *key,
                                    kiln_error *err);

/* ---- the automatic key (cache_key.c) ---------------------------------------------- */

struct kiln_ctx;
struct kiln_pipeline;
struct kiln_graph;

/** What besides the context, pipeline and graph decides a build. */
typedef struct kiln_cache_key_inputs {
    const char *format;     /* the output format's name ("json", "kmodel", a frontend's) */
    const char *tuner;      /* extra tuner (--tuner) or NULL */
    const char *build_mode; /* NULL = normal */
    /* the input key (graph NULL): the model file before import */
    const char *input_path;   /* named by its real path */
    const char *input_sha256; /* its content's SHA-256 (hex; kiln__sha256_file) */
    const char *input_format; /* --input-format or NULL */
    const char *const *extra; /* what else shapes the imported graph (--input-shape) */
    uint32_t nextra;
    /* the cache directory whose digest memo (digest.h) may answer for the
     * files hashed (libkiln, the plugins); NULL = hash every file */
    const char *memo_dir;
} kiln_cache_key_inputs;

/**
 * The automatic cache key: SHA-256, as lowercase hex, over a versioned text
 * naming kiln's version and libkiln's file digest; @p in; the resolved
 * pipeline (every pass, enabled or not, with every option, defaults
 * included), tuners, breakpoints, memory planner, allocator, engines and
 * bisect limit; the session options but the cache's own, sorted by key;
 * the SHA-256 of every plugin file, loaded or deferred, sorted (built-in
 * plugins: name and version); and @p g with its subgraphs and weights as the
 * graph JSON writer writes it (streamed into the hash, never held in
 * memory).  With @p g NULL it is the *input key* instead: the graph is
 * replaced by the real path and SHA-256 of in->input_path, in->input_format
 * and in->extra, so a compile can be found before its model is imported
 * (`<dir>/<input key>.alias` names the automatic key; see
 * docs/model_cache.md).  Time O(graph or input size + plugin file sizes).
 * Errors: KILN_ERR_IO naming an unreadable plugin file, KILN_ERR_NOMEM.
 */
kiln_status kiln__cache_key(const struct kiln_ctx *ctx, const struct kiln_pipeline *p,
                            const struct kiln_graph *g, const kiln_cache_key_inputs *in,
                            char hex[KILN_SHA256_HEX_LEN + 1], kiln_error *err);

#endif /* KILN_CORE_CACHE_H */
