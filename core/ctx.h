/*
 * ctx.h - the kiln context: owns the intern table, the component registry,
 * loaded plugins, the checker tables and session options.  No mutable globals
 * in core: everything hangs off a kiln_ctx.  Registries are filled while
 * plugins load and are read without locks afterwards.  Only core/ includes
 * this header.
 */
#ifndef KILN_CORE_CTX_H
#define KILN_CORE_CTX_H

#include "base.h"
#include "intern.h"

struct kiln_registry; /* plugin.c */
struct kiln_checker_table; /* checker.c */
struct kiln_engine_index;  /* engine.c */

typedef struct kiln_kv {
    char *key;
    char *value;
} kiln_kv;

struct kiln_ctx {
    kiln_strtab strings; /* watches the analyses' attribute keys (KILN_WATCH_*) */
    struct kiln_registry *registry;
    struct kiln_checker_table *checkers;
    struct kiln_engine_index *engines; /* op symbol -> engines listing it (engine.c) */
    kiln_kv *session_options; /* --option KEY=VALUE and manifest "options" */
    uint32_t nsession_options, session_options_cap;
    int verbosity; /* -2 errors only (-q), -1 no info (-q of kiln lint: its warnings
                      are its findings), 0 normal, 1+ verbose */
};

/** Create a context (empty registry).  NULL on OOM. */
KILN_API kiln_ctx *kiln_ctx_create(void);
/** Destroy: finalises and unloads plugins.  Graphs must be destroyed first. */
KILN_API void kiln_ctx_destroy(kiln_ctx *ctx);
/** Set a session option (copied); replaces an existing key. */
KILN_API kiln_status kiln_ctx_set_option(kiln_ctx *ctx, const char *key, const char *value);
/** Session option value or NULL. */
KILN_API const char *kiln_ctx_option(const kiln_ctx *ctx, const char *key);

#endif
