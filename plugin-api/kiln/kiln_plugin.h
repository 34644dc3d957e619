/*
 * kiln_plugin.h - the plugin entry point, the registrar and the host table.
 *
 * A plugin is a .so exporting exactly one symbol, kiln_plugin_entry, which
 * returns a kiln_plugin_desc.  The host checks, in order:
 *   1. dlopen(RTLD_NOW | RTLD_LOCAL) succeeds;
 *   2. kiln_plugin_entry exists;
 *   3. desc->struct_size covers at least the ABI 1.0 descriptor;
 *   4. desc->abi_major == KILN_ABI_MAJOR (abi_minor may be lower or higher:
 *      the host reads only the fields both know);
 *   5. init(host, registrar, err) returns KILN_OK; on failure everything the
 *      plugin registered is rolled back;
 *   6. every registered component has a valid struct_size, required callbacks
 *      and a name no other plugin registered.
 *
 * The plugin reaches the host only through the kiln_host_api table passed to
 * init, so it links against nothing and RTLD_LOCAL works.  Plugin sources write
 * the ordinary kiln_* names: compiled with KILN_PLUGIN defined, kiln_ext.h
 * maps each onto the table.  Use KILN_PLUGIN_DEFINE once per plugin.
 */
#ifndef KILN_PLUGIN_H
#define KILN_PLUGIN_H

#include "kiln_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_MAJOR 1 /* hard break: must match exactly */
#define KILN_ABI_MINOR 0 /* additive */

typedef struct kiln_registrar kiln_registrar;
typedef struct kiln_host_api kiln_host_api;

/** The plugin descriptor.  APPEND ONLY. */
typedef struct kiln_plugin_desc {
    uint32_t struct_size; /* sizeof(kiln_plugin_desc) as the plugin saw it */
    uint16_t abi_major;
    uint16_t abi_minor;
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
KILN_API kiln_status kiln_register_fusion_pass(kiln_registrar *r, const kiln_fusion_pass_desc *d);
KILN_API kiln_status kiln_register_engine(kiln_registrar *r, const kiln_engine_desc *d);
KILN_API kiln_status kiln_register_checker(kiln_registrar *r, const kiln_checker_desc *d);
KILN_API kiln_status kiln_register_mem_planner(kiln_registrar *r,
                                               const kiln_mem_planner_desc *d);
KILN_API kiln_status kiln_register_allocator(kiln_registrar *r, const kiln_allocator_desc *d);
KILN_API kiln_status kiln_register_frontend(kiln_registrar *r, const kiln_frontend_desc *d);
KILN_API kiln_status kiln_register_tuner(kiln_registrar *r, const kiln_tuner_desc *d);
KILN_API kiln_status kiln_register_instrument(kiln_registrar *r, const kiln_instrument_desc *d);

/** Host-side allocation a plugin may hand to the host (and vice versa). */
KILN_API void *kiln_alloc(size_t size);
KILN_API void kiln_free(void *ptr);

#include "kiln_host_funcs.h"

/*
 * The host table.  WARNING: APPEND ONLY.  Never reorder, remove or change the
 * type of an entry: plugins compiled against older headers index it by offset.
 * New functions go at the end of KILN_HOST_FUNCS (kiln_host_funcs.h) and raise
 * KILN_ABI_MINOR.  A plugin calling a function newer than the host it runs in
 * must check KILN_HOST_HAS first.
 */
struct kiln_host_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
#define KILN__HOST_MEMBER(ret, name, params) ret(*name) params;
    KILN_HOST_FUNCS(KILN__HOST_MEMBER)
#undef KILN__HOST_MEMBER
};

#define KILN_HOST_HAS(h, fn) \
    ((h)->struct_size >= KILN_SIZE_THROUGH(kiln_host_api, fn) && (h)->fn != NULL)

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
