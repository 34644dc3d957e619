/*
 * kiln_plugin.h - the plugin entry point, the registrar and the host table.
 *
 * A plugin is a .so exporting exactly one symbol, kiln_plugin_entry, which
 * returns a kiln_plugin_desc.  The host checks, in order:
 *   1. dlopen(RTLD_NOW | RTLD_LOCAL) succeeds;
 *   2. kiln_plugin_entry exists;
 *   3. desc->struct_size covers at least the ABI 1.0 descriptor;
 *   4. desc->abi_major == KILN_ABI_MAJOR and desc->abi_minor <= the host's
 *      KILN_ABI_MINOR (GStreamer's rule: a plugin may be older than the host,
 *      never newer; descriptors are copied by struct_size, so a plugin built
 *      against an older minor keeps working);
 *   5. init(host, registrar, err) returns KILN_OK; on failure everything the
 *      plugin registered is rolled back;
 *   6. every registered component has a valid struct_size, required callbacks
 *      and a name no other plugin registered.
 *
 * The plugin reaches the host only through the kiln_host_api table passed to
 * init, so it links against nothing and RTLD_LOCAL works.  Plugin sources write
 * the ordinary kiln_* names: compiled with KILN_PLUGIN defined, kiln_ext.h
 * maps each onto the table.  Use KILN_PLUGIN_DEFINE once per plugin.
 *
 * Versioning (docs/sdk.md):
 *   KILN_ABI_MAJOR  changes only with a break; a plugin of another major is refused.
 *   KILN_ABI_MINOR  grows when the host table or a descriptor grows (append only).
 *   desc->abi_minor is the minor the plugin REQUIRES: by default the minor of the
 *   headers it was built with (KILN_ABI_MINOR_REQUIRED).  A plugin that wants to
 *   run on older hosts defines KILN_ABI_MINOR_REQUIRED to the oldest minor it
 *   supports before including kiln.h, and guards every call to a newer host
 *   function with KILN_HOST_HAS:
 *
 *       #define KILN_ABI_MINOR_REQUIRED 0
 *       #include <kiln/kiln.h>
 *       ...
 *       if (KILN_HOST_HAS(kiln__host, kiln_some_newer_call))
 *           kiln_some_newer_call(...);
 *       else
 *           ... fallback ...
 */
#ifndef KILN_PLUGIN_H
#define KILN_PLUGIN_H

#include "kiln_runtime.h"
#include "kiln_op.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_MAJOR 1 /* hard break: must match exactly */
#define KILN_ABI_MINOR 11 /* additive */

/* The host minor this plugin needs (see above); never above KILN_ABI_MINOR. */
#ifndef KILN_ABI_MINOR_REQUIRED
#define KILN_ABI_MINOR_REQUIRED KILN_ABI_MINOR
#endif
#if KILN_ABI_MINOR_REQUIRED > KILN_ABI_MINOR
#error "KILN_ABI_MINOR_REQUIRED is newer than these kiln headers"
#endif

typedef struct kiln_registrar kiln_registrar;
typedef struct kiln_host_api kiln_host_api;

/** The plugin descriptor.  APPEND ONLY. */
typedef struct kiln_plugin_desc {
    uint32_t struct_size; /* sizeof(kiln_plugin_desc) as the plugin saw it */
    uint16_t abi_major;
    uint16_t abi_minor; /* the host minor the plugin requires (KILN_ABI_MINOR_REQUIRED) */
    const char *name; /* unique plugin name, e.g. "kiln.prune" or "com.acme.fusion" */
    const char *version;
    const char *license;
    const char *description;
    const char *build_info; /* compiler and flags; shown in errors */
    /** Register components.  Must not start threads or touch devices. */
    kiln_status (*init)(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err);
    /** Optional: called at context destruction; no calls into the .so after it. */
    void (*fini)(void);
    void *reserved[4];
} kiln_plugin_desc;

/** Smallest descriptor the host accepts (ABI 1.0 up to fini). */
#define KILN_PLUGIN_DESC_MIN_SIZE KILN_SIZE_THROUGH(kiln_plugin_desc, fini)

/* Registration.  The host copies the descriptor; strings and option tables it
 * points to must stay valid while the plugin is loaded (static storage). */
KILN_API kiln_status kiln_register_pass(kiln_registrar *r, const kiln_pass_desc *d);
/* Fusion passes (kiln_pass.h, docs/fusion.md). */
KILN_API kiln_status kiln_register_fusion_pass(kiln_registrar *r, const kiln_fusion_pass_desc *d);
KILN_API kiln_status kiln_register_engine(kiln_registrar *r, const kiln_engine_desc *d);
KILN_API kiln_status kiln_register_checker(kiln_registrar *r, const kiln_checker_desc *d);
KILN_API kiln_status kiln_register_mem_planner(kiln_registrar *r,
                                               const kiln_mem_planner_desc *d);
KILN_API kiln_status kiln_register_allocator(kiln_registrar *r, const kiln_allocator_desc *d);
KILN_API kiln_status kiln_register_frontend(kiln_registrar *r, const kiln_frontend_desc *d);
KILN_API kiln_status kiln_register_tuner(kiln_registrar *r, const kiln_tuner_desc *d);
KILN_API kiln_status kiln_register_instrument(kiln_registrar *r, const kiln_instrument_desc *d);

/**
 * Inside init: the "config" value of the manifest plugin entry that is loading
 * this plugin (docs/manifest.md), as compact JSON text, or NULL when the entry
 * has none (or the plugin was loaded by --plugin or an embedder).  *manifest
 * and *jpath (optional) receive the manifest file and the JSON path of the
 * value ("$.plugins[3].config"), for error messages.  The strings live until
 * init returns: copy what you keep.
 */
KILN_API const char *kiln_plugin_config(const kiln_registrar *r, const char **manifest,
                                        const char **jpath);
/**
 * Inside init: true when op type @p type is known to the plugins loaded so
 * far: an op-set registered it (kiln_register_op) or an engine lists it in its
 * op table.  A manifest entry with "config" loads after every plugin listed
 * before it, deferred ones included, so those count.
 */
KILN_API bool kiln_registrar_op_known(const kiln_registrar *r, const char *type);

/** Host-side allocation a plugin may hand to the host (and vice versa). */
KILN_API void *kiln_alloc(size_t size);
KILN_API void kiln_free(void *ptr);

#include "kiln_host_funcs.h"

/*
 * The host table.  WARNING: APPEND ONLY.  Never reorder, remove or change the
 * type of an entry: plugins compiled against older headers index it by offset.
 * New functions go at the end of KILN_HOST_FUNCS (kiln_host_funcs.h) and raise
 * KILN_ABI_MINOR; tools/gen_host_funcs.py enforces this against the record
 * plugin-api/host_table.abi.  Members are named without the kiln_ prefix
 * (SQLite's extension table does the same), because in a plugin every kiln_*
 * name is a macro that reads the table.
 */
struct kiln_host_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
#define KILN__HOST_MEMBER(ret, name, member, params) ret(*member) params;
    KILN_HOST_FUNCS(KILN__HOST_MEMBER)
#undef KILN__HOST_MEMBER
};

/**
 * True when host table @p h provides function @p fn (its public name, e.g.
 * kiln_engine_for_node): the table is long enough and the entry is set.  A
 * plugin whose KILN_ABI_MINOR_REQUIRED is below the minor that added @p fn
 * must check this before calling it.  The name is pasted, never expanded, so
 * this works in plugin sources where kiln_* names are macros.
 */
#define KILN_HOST_HAS(h, fn) KILN__HOST_HAS_MEMBER(h, KILN__HOST_MEMBER_##fn)
#define KILN__HOST_HAS_MEMBER(h, m) KILN__HOST_HAS_M(h, m)
#define KILN__HOST_HAS_M(h, m) \
    ((h)->struct_size >= KILN_SIZE_THROUGH(kiln_host_api, m) && (h)->m != NULL)

#if defined(__GNUC__)
#define KILN_PLUGIN_EXPORT __attribute__((visibility("default")))
#define KILN_PLUGIN_HIDDEN __attribute__((visibility("hidden")))
#else
#define KILN_PLUGIN_EXPORT
#define KILN_PLUGIN_HIDDEN
#endif

/** The one exported symbol of a plugin. */
typedef const kiln_plugin_desc *(*kiln_plugin_entry_fn)(void);
#define KILN_PLUGIN_ENTRY_SYMBOL "kiln_plugin_entry"

#ifdef __cplusplus
}
#endif

#ifdef KILN_PLUGIN
#include "kiln_ext.h"
#endif

#endif /* KILN_PLUGIN_H */
