/*
 * plugin.h - the component registry and the plugin loader.
 *
 * A registry holds loaded plugins and the components they registered.  The
 * loader validates a plugin in GE/SQLite style and each failure has its own
 * exact message naming the file (see plugin.c).  A plugin that fails
 * registers nothing: its components are rolled back.  Handles are dlclose'd
 * only at context destruction, because registered callbacks point into them.
 * Only core/ includes this header.
 */
#ifndef KILN_CORE_PLUGIN_H
#define KILN_CORE_PLUGIN_H

#include "ctx.h"

typedef enum kiln_component_kind {
    KILN_COMP_PASS = 1, /* graph or node pass: see desc.pass.kind */
    KILN_COMP_FUSION = 2,
    KILN_COMP_ENGINE = 3,
    KILN_COMP_CHECKER = 4,
    KILN_COMP_MEM_PLANNER = 5,
    KILN_COMP_ALLOCATOR = 6,
    KILN_COMP_FRONTEND = 7,
    KILN_COMP_TUNER = 8,
    KILN_COMP_INSTRUMENT = 9,
    KILN_COMP_RUNTIME = 10,
    KILN_COMP_OP = 11 /* an op type (kiln_op.h, opreg.c) */
} kiln_component_kind;

typedef struct kiln_plugin_rec {
    char *path;      /* as resolved */
    void *handle;    /* dlopen handle; NULL for built-in */
    kiln_plugin_desc desc; /* copied, zero-extended */
    uint32_t first_component;
} kiln_plugin_rec;

typedef struct kiln_component {
    kiln_component_kind kind;
    const char *name;
    kiln_plugin_rec *plugin;
    void *inst;     /* engines: the shared instance, created on first use */
    int inst_state; /* 0 = not created, 1 = created, 2 = create failed */
    union {
        kiln_pass_desc pass;
        kiln_fusion_pass_desc fusion;
        kiln_engine_desc engine;
        kiln_checker_desc checker;
        kiln_mem_planner_desc planner;
        kiln_allocator_desc allocator;
        kiln_frontend_desc frontend;
        kiln_tuner_desc tuner;
        kiln_instrument_desc instrument;
        kiln_runtime_desc runtime;
        kiln_op_def op;
    } d;
} kiln_component;

/** Name of the plugin that registered @p c; NULL for a component registered
 * by kiln itself or an embedder (crash reports print "<built-in>"). */
static inline const char *kiln__comp_plugin(const kiln_component *c)
{
    return c && c->plugin ? c->plugin->desc.name : NULL;
}

/*
 * A manifest plugin entry whose loading is deferred until a component of a
 * kind it declares is first needed (manifest.c decides which entries defer,
 * kiln__registry_need loads them).  The file was resolved when the manifest
 * loaded; errors name the manifest and the entry's JSON path.
 */
typedef struct kiln_deferred_plugin {
    char *file;     /* resolved plugin file */
    char *manifest; /* the manifest listing it */
    char *jpath;    /* "$.plugins[N]" */
    char **names;   /* `provides`: declared component names ... */
    kiln_component_kind *kinds, *kinds2; /* ... and the kinds each may have */
    const char **keys; /* ... and the `provides` key each came from */
    uint32_t nnames;
    uint32_t kind_mask; /* bit k: declares a component of kind k */
    int state;          /* 0 pending, 1 loaded, 2 load failed */
    kiln_status fail_code; /* state 2: the failure, reported again by every */
    char *fail_msg;        /* later kiln__registry_need of its kinds */
} kiln_deferred_plugin;

struct kiln_registry {
    kiln_deferred_plugin *deferred;
    uint32_t ndeferred, deferred_cap, npending, nfailed;
    kiln_plugin_rec **plugins;
    uint32_t nplugins, plugins_cap;
    kiln_component **comps;
    uint32_t ncomps, comps_cap;
    /* kiln_registry_find's index: open addressing by name hash, each slot a
     * component index + 1 (0: empty), filled in registration order so the
     * first match along a probe is the earliest registered; rebuilt on a
     * rollback */
    uint32_t *find_idx;
    uint32_t find_cap, find_n;
    /* the op registry (opreg.c): op-type symbol -> its KILN_COMP_OP component */
    const kiln_component **op_by_sym;
    uint32_t op_cap;
    /* the manifest entry's "config" for the next plugin that loads (manifest.c
     * sets it around kiln_plugin_load; register_plugin hands it to the
     * registrar and clears it) */
    const char *next_config, *next_config_file, *next_config_jpath;
};

struct kiln_registrar {
    kiln_ctx *ctx;
    kiln_plugin_rec *plugin;
    kiln_error *err;
    kiln_status first_failure; /* a register_* call that failed */
    /* kiln_plugin_config: the manifest entry's "config" as JSON text, the
     * manifest file and the JSON path; NULL when the entry has none */
    const char *config, *config_file, *config_jpath;
};

struct kiln_registry *kiln__registry_create(void);
void kiln__registry_destroy(struct kiln_registry *r);

/**
 * Load the plugin at @p path into @p ctx.  Errors (exact texts):
 *   "cannot open <path>: <dlerror>"                       ERR_NOT_FOUND / ERR_IO
 *   "no entry point kiln_plugin_entry in <path>"          ERR_NOT_FOUND
 *   "<path>: descriptor struct_size N is smaller than the ABI 1.0 minimum M"  ERR_VERSION
 *   "<path>: ABI X.Y but host is A.B"                     ERR_VERSION
 *   "<path>: plugin <name> requires kiln ABI X.Y but this host provides A.B ..."
 *                                                          ERR_VERSION (Y > B)
 *   "<path>: init failed: <msg>"                          ERR_PLUGIN_INIT
 *   "component <name> already registered by <file>"      ERR_DUPLICATE
 *   "<path>: plugin <name> already loaded from <file>"    ERR_DUPLICATE
 * Loading the same resolved path twice is a no-op returning the first record.
 */
KILN_API kiln_status kiln_plugin_load(kiln_ctx *ctx, const char *path, kiln_plugin_rec **out,
                                      kiln_error *err);
/** Register components from an in-process init function (tests, static builds). */
KILN_API kiln_status kiln_plugin_register_static(kiln_ctx *ctx, const kiln_plugin_desc *desc,
                                                 kiln_plugin_rec **out, kiln_error *err);
/**
 * Load every pending deferred plugin that declares a component of @p kind
 * (0 = every pending plugin), in manifest order.  The first failure is
 * returned as "<manifest>: $.plugins[N].path: <load error>" (or a
 * declared-vs-registered mismatch at $.plugins[N].provides); that plugin is
 * not retried, and later calls for its kinds return the same error.  Cheap when nothing is pending.  Not thread-safe: callers run
 * it before any parallel stage (docs/threads.md).
 */
kiln_status kiln__registry_need(kiln_ctx *ctx, kiln_component_kind kind, kiln_error *err);
/** Record a deferred plugin (copies everything).  ERR_NOMEM only. */
kiln_status kiln__registry_defer(kiln_ctx *ctx, const kiln_deferred_plugin *d, kiln_error *err);
/** Find a component by name (and kind; 0 = any kind but KILN_COMP_OP, whose
 * names are op types in a namespace of their own).  NULL if none. */
KILN_API const kiln_component *kiln_registry_find(const kiln_ctx *ctx, kiln_component_kind kind,
                                                  const char *name);
/** kiln_registry_find that first loads the pending deferred plugins that
 * declare @p name (any kind when @p kind is 0).  A load failure is returned
 * in @p err with *out NULL; a name nobody registers is KILN_OK, *out NULL. */
kiln_status kiln__registry_find_loading(kiln_ctx *ctx, kiln_component_kind kind,
                                        const char *name, const kiln_component **out,
                                        kiln_error *err);
KILN_API uint32_t kiln_registry_count(const kiln_ctx *ctx);
KILN_API const kiln_component *kiln_registry_at(const kiln_ctx *ctx, uint32_t i);
KILN_API uint32_t kiln_registry_plugin_count(const kiln_ctx *ctx);
KILN_API const kiln_plugin_rec *kiln_registry_plugin_at(const kiln_ctx *ctx, uint32_t i);
KILN_API const char *kiln_component_kind_name(kiln_component_kind k);

/**
 * The context-wide instance of an engine component: created with the engine's
 * create(NULL options) on first use, destroyed with the context.  *inst is
 * NULL for engines without create.  Thread-safe (creation is serialised by
 * a lock): the partitioner may optimise subgraphs in worker threads.
 */
kiln_status kiln__engine_instance(const kiln_component *c, void **inst, kiln_error *err);

/**
 * Drop the context's op -> engine index (engine.c): called whenever an engine
 * is registered or rolled back; the next placement query rebuilds it.
 */
void kiln__engine_index_invalidate(kiln_ctx *ctx);
/**
 * The first entry of engine @p engine's op table for op symbol @p op, or NULL;
 * *@p comp receives the engine's component (NULL: no loaded plugin provides
 * it).  Through the context's op -> engines index: no table scan, no string
 * compare when @p engine is the component's own name pointer.
 */
const kiln_op_info *kiln__engine_entry(kiln_ctx *ctx, const char *engine, kiln_sym op,
                                      const kiln_component **comp);
/** Free the index (context destruction). */
void kiln__engine_index_destroy(kiln_ctx *ctx);

/* ---- the op registry (opreg.c) ---- */
/** Validate op component @p c (name = type) and enter it in the symbol table. */
kiln_status kiln__op_register(kiln_registrar *reg, kiln_component *c, kiln_error *err);
/** Remove op component @p c from the symbol table (rollback). */
void kiln__op_unregister(kiln_ctx *ctx, const kiln_component *c);
/** The op component of @p type in @p ctx, or NULL. */
const kiln_component *kiln__op_component(const kiln_ctx *ctx, kiln_sym type);

/** The host function table handed to plugins. */
extern const kiln_host_api kiln__host_api;

/** Directory of the running executable (for <exe>/../lib/kiln/plugins). */
KILN_API const char *kiln_exe_dir(void);

#endif
