/*
 * plugin.c - plugin loading and the component registry.
 *
 * Design
 *   A plugin exports one symbol, kiln_plugin_entry.  Loading checks, in order:
 *   the file opens (dlopen RTLD_NOW|RTLD_LOCAL: unresolved symbols fail here,
 *   not mid-pass), the entry exists, the descriptor is at least the ABI 1.0
 *   size, the major version matches and the minor the plugin requires is not
 *   newer than the host's (GStreamer's rule; an older minor is accepted: the
 *   host copies min(struct_size, sizeof) bytes and zero-fills the rest), the
 *   plugin name is not taken, init succeeds, and every component it registered
 *   is valid and uniquely named.  Any failure rolls back all components the
 *   plugin registered, so a failing plugin registers nothing.
 *
 *   Registered descriptors are copied the same way (struct_size prefix), so a
 *   plugin built against an older minor keeps working.  Handles are never
 *   dlclose'd before the context dies: callbacks point into them.
 */
#include "plugin.h"
#include <pthread.h>
#include "checker.h"
#include "crash.h"
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

struct kiln_registry *kiln__registry_create(void)
{
    return kiln__calloc(1, sizeof(struct kiln_registry));
}

void kiln__registry_destroy(struct kiln_registry *r)
{
    if (!r)
        return;
    for (uint32_t i = r->nplugins; i-- > 0;) {
        kiln_plugin_rec *p = r->plugins[i];
        if (p->desc.fini) {
            kiln_activity act = {.plugin = p->desc.name,
                                 .file = p->path,
                                 .stage = "plugin unload",
                                 .doing = "running its fini function"};
            kiln_activity *prev = kiln__activity_enter(&act);
            p->desc.fini();
            kiln__activity_leave(prev);
        }
    }
    for (uint32_t i = r->ncomps; i-- > 0;) {
        kiln_component *c = r->comps[i];
        if (c->kind == KILN_COMP_ENGINE && c->inst_state == 1 && c->d.engine.destroy) {
            kiln_activity act = {.plugin = kiln__comp_plugin(c),
                                 .component = c->name,
                                 .stage = "engine destroy",
                                 .doing = "destroying an engine"};
            kiln_activity *prev = kiln__activity_enter(&act);
            c->d.engine.destroy(c->inst);
            kiln__activity_leave(prev);
        }
    }
    for (uint32_t i = 0; i < r->ncomps; i++)
        kiln__free(r->comps[i]);
    for (uint32_t i = 0; i < r->nplugins; i++) {
        kiln_plugin_rec *p = r->plugins[i];
        if (p->handle && !getenv("KILN_NO_DLCLOSE")) {
            /* dlclose runs the plugin's destructors */
            kiln_activity act = {.plugin = p->desc.name,
                                 .file = p->path,
                                 .stage = "plugin unload",
                                 .doing = "running its destructors (dlclose)"};
            kiln_activity *prev = kiln__activity_enter(&act);
            dlclose(p->handle);
            kiln__activity_leave(prev);
        }
        kiln__free(p->path);
        kiln__free(p);
    }
    kiln__free(r->comps);
    kiln__free(r->op_by_sym);
    kiln__free(r->plugins);
    kiln__free(r);
}

const char *kiln_component_kind_name(kiln_component_kind k)
{
    switch (k) {
    case KILN_COMP_PASS: return "pass";
    case KILN_COMP_FUSION: return "fusion-pass";
    case KILN_COMP_ENGINE: return "engine";
    case KILN_COMP_CHECKER: return "checker";
    case KILN_COMP_MEM_PLANNER: return "memory-planner";
    case KILN_COMP_ALLOCATOR: return "allocator";
    case KILN_COMP_FRONTEND: return "frontend";
    case KILN_COMP_TUNER: return "tuner";
    case KILN_COMP_INSTRUMENT: return "instrument";
    case KILN_COMP_RUNTIME: return "runtime";
    case KILN_COMP_OP: return "op";
    }
    return "unknown";
}

const kiln_component *kiln_registry_find(const kiln_ctx *ctx, kiln_component_kind kind,
                                         const char *name)
{
    const struct kiln_registry *r = ctx->registry;
    for (uint32_t i = 0; i < r->ncomps; i++) {
        const kiln_component *c = r->comps[i];
        /* kind 0: any component but an op (ops have a namespace of their own) */
        if ((kind == 0 ? c->kind != KILN_COMP_OP : c->kind == kind) &&
            strcmp(c->name, name) == 0)
            return c;
    }
    return NULL;
}

uint32_t kiln_registry_count(const kiln_ctx *ctx)
{
    return ctx->registry->ncomps;
}
const kiln_component *kiln_registry_at(const kiln_ctx *ctx, uint32_t i)
{
    return i < ctx->registry->ncomps ? ctx->registry->comps[i] : NULL;
}
uint32_t kiln_registry_plugin_count(const kiln_ctx *ctx)
{
    return ctx->registry->nplugins;
}
const kiln_plugin_rec *kiln_registry_plugin_at(const kiln_ctx *ctx, uint32_t i)
{
    return i < ctx->registry->nplugins ? ctx->registry->plugins[i] : NULL;
}

/* ---- registration ------------------------------------------------------- */

static const char *plugin_file(const kiln_plugin_rec *p)
{
    return p && p->path ? p->path : "<built-in>";
}

/*
 * Copy a struct_size-prefixed descriptor: min(declared, ours) bytes, rest
 * zero.  Rejects a size smaller than the mandatory prefix @p min.
 */
static kiln_status add_component(kiln_registrar *reg, kiln_component_kind kind, const void *desc,
                                 size_t ours, size_t min, const char *what)
{
    if (!reg || !desc)
        return KILN_ERR_INVALID;
    kiln_error *err = reg->err;
    uint32_t declared = *(const uint32_t *)desc;
    if (declared < min) {
        reg->first_failure = KILN_ERR_VERSION;
        return kiln_errorf(err, KILN_ERR_VERSION,
                           "%s: %s descriptor struct_size %u is smaller than the ABI %s "
                           "minimum %zu",
                           plugin_file(reg->plugin), what, declared,
                           kind == KILN_COMP_OP ? "1.1" : "1.0", min);
    }
    kiln_component *c = kiln__calloc(1, sizeof(*c));
    if (!c)
        return KILN_ERR_NOMEM;
    memcpy(&c->d, desc, declared < ours ? declared : ours);
    *(uint32_t *)&c->d = (uint32_t)ours;
    c->kind = kind;
    c->plugin = reg->plugin;
    /* The name is the third field of pass descriptors, the second of the rest. */
    switch (kind) {
    case KILN_COMP_PASS: c->name = c->d.pass.name; break;
    case KILN_COMP_FUSION: c->name = c->d.fusion.name; break;
    case KILN_COMP_ENGINE: c->name = c->d.engine.name; break;
    case KILN_COMP_CHECKER: c->name = c->d.checker.name; break;
    case KILN_COMP_MEM_PLANNER: c->name = c->d.planner.name; break;
    case KILN_COMP_ALLOCATOR: c->name = c->d.allocator.name; break;
    case KILN_COMP_FRONTEND: c->name = c->d.frontend.name; break;
    case KILN_COMP_TUNER: c->name = c->d.tuner.name; break;
    case KILN_COMP_INSTRUMENT: c->name = c->d.instrument.name; break;
    case KILN_COMP_RUNTIME: c->name = c->d.runtime.name; break;
    case KILN_COMP_OP: c->name = c->d.op.type; break;
    }
    kiln_status st = KILN_OK;
    if (kind == KILN_COMP_OP) { /* ops have a namespace and rules of their own */
        struct kiln_registry *r = reg->ctx->registry;
        if (!KILN_GROW(r->comps, r->comps_cap, r->ncomps + 1)) {
            st = kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", plugin_file(reg->plugin));
            goto fail;
        }
        if ((st = kiln__op_register(reg, c, err)) != KILN_OK)
            goto fail;
        r->comps[r->ncomps++] = c;
        return KILN_OK;
    }
    if (!c->name || !c->name[0]) {
        st = kiln_errorf(err, KILN_ERR_INVALID, "%s: %s component without a name",
                         plugin_file(reg->plugin), what);
        goto fail;
    }
    /* Required callbacks per kind. */
    const char *missing = NULL;
    switch (kind) {
    case KILN_COMP_PASS:
        if (c->d.pass.kind == KILN_PASS_KIND_GRAPH && !c->d.pass.run_graph)
            missing = "run_graph";
        else if (c->d.pass.kind == KILN_PASS_KIND_NODE && !c->d.pass.run_node)
            missing = "run_node";
        else if (c->d.pass.kind != KILN_PASS_KIND_GRAPH && c->d.pass.kind != KILN_PASS_KIND_NODE)
            missing = "a valid kind (graph or node)";
        else if ((c->d.pass.flags & KILN_PASS_AFTER_GRAPH) && !c->d.pass.on_finish_graph)
            missing = "on_finish_graph";
        break;
    case KILN_COMP_FUSION:
        if (!c->d.fusion.patterns || !c->d.fusion.replace)
            missing = "patterns/replace";
        break;
    case KILN_COMP_CHECKER:
        if (!c->d.checker.check)
            missing = "check";
        break;
    case KILN_COMP_MEM_PLANNER:
        if (!c->d.planner.plan)
            missing = "plan";
        break;
    case KILN_COMP_ALLOCATOR:
        if (!c->d.allocator.alloc || !c->d.allocator.free)
            missing = "alloc/free";
        break;
    case KILN_COMP_FRONTEND:
        if (!c->d.frontend.import_file && !c->d.frontend.export_file)
            missing = "import_file or export_file";
        break;
    case KILN_COMP_TUNER:
        if (!c->d.tuner.on_build_step)
            missing = "on_build_step";
        break;
    case KILN_COMP_RUNTIME:
        if (!c->d.runtime.load || !c->d.runtime.run)
            missing = "load/run";
        break;
    case KILN_COMP_ENGINE:
    case KILN_COMP_INSTRUMENT:
    case KILN_COMP_OP:
        break;
    }
    if (missing) {
        st = kiln_errorf(err, KILN_ERR_INVALID, "%s: %s %s has no %s", plugin_file(reg->plugin),
                         what, c->name, missing);
        goto fail;
    }
    const kiln_component *dup = kiln_registry_find(reg->ctx, 0, c->name); /* ops aside */
    if (dup) {
        st = kiln_errorf(err, KILN_ERR_DUPLICATE, "%s: component %s is already registered by %s",
                         plugin_file(reg->plugin), c->name, plugin_file(dup->plugin));
        goto fail;
    }
    struct kiln_registry *r = reg->ctx->registry;
    if (!KILN_GROW(r->comps, r->comps_cap, r->ncomps + 1)) {
        st = KILN_ERR_NOMEM;
        goto fail;
    }
    if (kind == KILN_COMP_CHECKER && (st = kiln__checker_register(reg->ctx, c, err)) != KILN_OK)
        goto fail;
    r->comps[r->ncomps++] = c;
    return KILN_OK;
fail:
    kiln__free(c);
    if (!reg->first_failure)
        reg->first_failure = st;
    return st;
}

#define REGISTER(fn, T, KIND, last, what)                                                  \
    kiln_status fn(kiln_registrar *r, const T *d)                                          \
    {                                                                                      \
        return add_component(r, KIND, d, sizeof(T), KILN_SIZE_THROUGH(T, last), what);     \
    }

REGISTER(kiln_register_pass, kiln_pass_desc, KILN_COMP_PASS, on_finish_graph, "pass")
REGISTER(kiln_register_fusion_pass, kiln_fusion_pass_desc, KILN_COMP_FUSION, replace,
         "fusion pass")
REGISTER(kiln_register_engine, kiln_engine_desc, KILN_COMP_ENGINE, kernel_destroy, "engine")
REGISTER(kiln_register_checker, kiln_checker_desc, KILN_COMP_CHECKER, check, "checker")
REGISTER(kiln_register_mem_planner, kiln_mem_planner_desc, KILN_COMP_MEM_PLANNER, plan,
         "memory planner")
REGISTER(kiln_register_allocator, kiln_allocator_desc, KILN_COMP_ALLOCATOR, recycle,
         "allocator")
REGISTER(kiln_register_frontend, kiln_frontend_desc, KILN_COMP_FRONTEND, export_file,
         "frontend")
REGISTER(kiln_register_tuner, kiln_tuner_desc, KILN_COMP_TUNER, on_build_step, "tuner")
REGISTER(kiln_register_instrument, kiln_instrument_desc, KILN_COMP_INSTRUMENT,
         after_pass_failed, "instrument")
REGISTER(kiln_register_runtime, kiln_runtime_desc, KILN_COMP_RUNTIME, unload, "runtime")
REGISTER(kiln_register_op, kiln_op_def, KILN_COMP_OP, fold, "op")

/* Remove every component registered after index @p from. */
static void rollback(kiln_ctx *ctx, uint32_t from)
{
    struct kiln_registry *r = ctx->registry;
    while (r->ncomps > from) {
        kiln_component *c = r->comps[--r->ncomps];
        if (c->kind == KILN_COMP_CHECKER)
            kiln__checker_unregister(ctx, c);
        if (c->kind == KILN_COMP_OP)
            kiln__op_unregister(ctx, c);
        kiln__free(c);
    }
}

static kiln_status register_plugin(kiln_ctx *ctx, const kiln_plugin_desc *raw, const char *path,
                                   void *handle, kiln_plugin_rec **out, kiln_error *err)
{
    const char *file = path ? path : "<built-in>";
    if (!raw)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: kiln_plugin_entry returned NULL", file);
    if (raw->struct_size < KILN_PLUGIN_DESC_MIN_SIZE)
        return kiln_errorf(err, KILN_ERR_VERSION,
                           "%s: descriptor struct_size %u is smaller than the ABI 1.0 minimum %zu",
                           file, raw->struct_size, (size_t)KILN_PLUGIN_DESC_MIN_SIZE);
    if (raw->abi_major != KILN_ABI_MAJOR)
        return kiln_errorf(err, KILN_ERR_VERSION, "%s: ABI %u.%u but host is %u.%u", file,
                           raw->abi_major, raw->abi_minor, KILN_ABI_MAJOR, KILN_ABI_MINOR);
    if (raw->abi_minor > KILN_ABI_MINOR)
        return kiln_errorf(err, KILN_ERR_VERSION,
                           "%s: plugin %s requires kiln ABI %u.%u but this host provides %u.%u "
                           "(built against newer kiln headers: rebuild it against this kiln, or "
                           "lower its KILN_ABI_MINOR_REQUIRED and guard newer calls with "
                           "KILN_HOST_HAS)",
                           file, raw->name && raw->name[0] ? raw->name : "(unnamed)",
                           raw->abi_major, raw->abi_minor, KILN_ABI_MAJOR, KILN_ABI_MINOR);
    kiln_plugin_rec *p = kiln__calloc(1, sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", file);
    size_t n = raw->struct_size < sizeof(p->desc) ? raw->struct_size : sizeof(p->desc);
    memcpy(&p->desc, raw, n);
    p->desc.struct_size = sizeof(p->desc);
    kiln_status st;
    if (!p->desc.name || !p->desc.name[0] || !p->desc.init) {
        st = kiln_errorf(err, KILN_ERR_INVALID, "%s: descriptor has no %s", file,
                         p->desc.name && p->desc.name[0] ? "init function" : "name");
        goto fail_free;
    }
    struct kiln_registry *r = ctx->registry;
    for (uint32_t i = 0; i < r->nplugins; i++) {
        if (strcmp(r->plugins[i]->desc.name, p->desc.name) == 0) {
            st = kiln_errorf(err, KILN_ERR_DUPLICATE, "%s: plugin %s already loaded from %s",
                             file, p->desc.name, plugin_file(r->plugins[i]));
            goto fail_free;
        }
    }
    if (!KILN_GROW(r->plugins, r->plugins_cap, r->nplugins + 1) ||
        (path && !(p->path = kiln__strdup(path)))) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", file);
        goto fail_free;
    }
    p->handle = handle;
    p->first_component = r->ncomps;
    kiln_error init_err;
    kiln_error_clear(&init_err);
    kiln_registrar reg = {ctx, p, &init_err, KILN_OK};
    kiln_activity act = {.plugin = p->desc.name,
                         .file = path,
                         .stage = "plugin load",
                         .doing = "running its init function"};
    kiln_activity *saved = kiln__activity_enter(&act);
    st = p->desc.init(&kiln__host_api, &reg, &init_err);
    kiln__activity_leave(saved);
    if (st == KILN_OK && reg.first_failure != KILN_OK)
        st = reg.first_failure; /* a register_* failed but init ignored it */
    if (st != KILN_OK) {
        rollback(ctx, p->first_component);
        if (init_err.code == KILN_ERR_DUPLICATE || init_err.code == KILN_ERR_VERSION ||
            (reg.first_failure != KILN_OK && init_err.code == reg.first_failure))
            st = kiln_errorf(err, init_err.code, "%s", init_err.msg);
        else
            st = kiln_errorf(err, KILN_ERR_PLUGIN_INIT, "%s: init failed: %s", file,
                             init_err.msg[0] ? init_err.msg : kiln_status_str(st));
        goto fail_free;
    }
    r->plugins[r->nplugins++] = p;
    if (out)
        *out = p;
    return KILN_OK;
fail_free:
    kiln__free(p->path);
    kiln__free(p);
    return st;
}

kiln_status kiln_plugin_register_static(kiln_ctx *ctx, const kiln_plugin_desc *desc,
                                        kiln_plugin_rec **out, kiln_error *err)
{
    return register_plugin(ctx, desc, NULL, NULL, out, err);
}

kiln_status kiln_plugin_load(kiln_ctx *ctx, const char *path, kiln_plugin_rec **out,
                             kiln_error *err)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "cannot open %s: %s", path,
                           strerror(errno));
    }
    struct kiln_registry *r = ctx->registry;
    for (uint32_t i = 0; i < r->nplugins; i++) {
        if (r->plugins[i]->path && strcmp(r->plugins[i]->path, real) == 0) {
            if (out)
                *out = r->plugins[i];
            return KILN_OK;
        }
    }
    /* dlopen runs the plugin's constructors (and its libraries'): a crash
     * there, in the entry function, in reading the descriptor it returns or
     * in dlclose's destructors is the plugin's, named by its file. */
    kiln_activity act = {
        .file = real, .stage = "plugin load", .doing = "running its constructors (dlopen)"};
    kiln_activity *prev = kiln__activity_enter(&act);
    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    kiln__activity_leave(prev);
    if (!h)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", path, dlerror());
    kiln_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, KILN_PLUGIN_ENTRY_SYMBOL);
    kiln_status st;
    if (!entry) {
        st = kiln_errorf(err, KILN_ERR_NOT_FOUND, "no entry point %s in %s",
                         KILN_PLUGIN_ENTRY_SYMBOL, path);
    } else {
        act.doing = "calling " KILN_PLUGIN_ENTRY_SYMBOL;
        prev = kiln__activity_enter(&act);
        const kiln_plugin_desc *desc = entry();
        act.doing = "reading the descriptor " KILN_PLUGIN_ENTRY_SYMBOL " returned";
        st = register_plugin(ctx, desc, real, h, out, err);
        kiln__activity_leave(prev);
    }
    if (st != KILN_OK) {
        act.doing = "running its destructors (dlclose)";
        prev = kiln__activity_enter(&act);
        dlclose(h);
        kiln__activity_leave(prev);
    }
    return st;
}

static kiln_status kiln__engine_instance_locked(kiln_component *c, void **inst, kiln_error *err);

/* Serialises the lazy creation of engine instances: tasks of a parallel run
 * may ask for one engine at once (a lock, not state: core keeps no mutable
 * globals).  Held while create runs, so the others wait for that instance. */
static pthread_mutex_t engine_create_lock = PTHREAD_MUTEX_INITIALIZER;

kiln_status kiln__engine_instance(const kiln_component *cc, void **inst, kiln_error *err)
{
    /* The registry owns its components; this is the one place that fills the
     * lazily created instance of a registered engine. */
    kiln_component *c = (kiln_component *)cc;
    pthread_mutex_lock(&engine_create_lock);
    kiln_status st = kiln__engine_instance_locked(c, inst, err);
    pthread_mutex_unlock(&engine_create_lock);
    return st;
}

static kiln_status kiln__engine_instance_locked(kiln_component *c, void **inst, kiln_error *err)
{
    if (c->inst_state == 0) {
        c->inst_state = 1;
        if (c->d.engine.create) {
            kiln_activity act =
                KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "engine create", NULL, 0);
            kiln_activity *prev = kiln__activity_enter(&act);
            kiln_status st = c->d.engine.create(NULL, err, &c->inst);
            kiln__activity_leave(prev);
            if (st != KILN_OK) {
                c->inst_state = 2;
                return kiln_error_push(err, "engine %s: create failed", c->name);
            }
        }
    }
    if (c->inst_state == 2)
        return kiln_errorf(err, KILN_ERR_PLUGIN_INIT, "engine %s could not be created", c->name);
    *inst = c->inst;
    return KILN_OK;
}

/*
 * The directory of the file holding kiln's code: libkiln.so's directory
 * (<prefix>/lib) for an embedding program, the executable's (<prefix>/bin)
 * when the kernel is linked in statically.  Both reach the plugins and
 * manifests as ../lib/kiln/plugins and ../share/kiln/manifests.
 */
const char *kiln_exe_dir(void)
{
    static char dir[PATH_MAX];
    static int done;
    if (!done) {
        Dl_info info;
        dir[0] = 0;
        /* dladdr names the main program by argv[0]: use /proc/self/exe for it */
        bool lib = dladdr((void *)(uintptr_t)&kiln_exe_dir, &info) && info.dli_fname &&
                   info.dli_fname[0] && strcmp(info.dli_fname, program_invocation_name) != 0 &&
                   realpath(info.dli_fname, dir);
        if (!lib) {
            ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
            dir[n > 0 ? n : 0] = 0;
        }
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        done = 1;
    }
    return dir;
}
