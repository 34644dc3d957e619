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

static void free_component(kiln_component *c);

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
        free_component(r->comps[i]);
    for (uint32_t i = 0; i < r->nplugins; i++) {
        kiln_plugin_rec *p = r->plugins[i];
        if (p->handle && !getenv("KILN_NO_DLCLOSE")) { /* the CLI sets it: exit unmaps */
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
    for (uint32_t i = 0; i < r->ndeferred; i++) {
        kiln_deferred_plugin *d = &r->deferred[i];
        for (uint32_t k = 0; k < d->nnames; k++)
            kiln__free(d->names[k]);
        kiln__free(d->names);
        kiln__free(d->kinds);
        kiln__free(d->kinds2);
        kiln__free((void *)d->keys);
        kiln__free(d->file);
        kiln__free(d->manifest);
        kiln__free(d->jpath);
        kiln__free(d->fail_msg);
    }
    kiln__free(r->deferred);
    kiln__free(r->comps);
    kiln__free(r->find_idx);
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

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Put component @p i in the find index (grown at half full: rebuilt). */
static void find_index_add(struct kiln_registry *r, uint32_t i);

static void find_index_rebuild(struct kiln_registry *r, uint32_t cap)
{
    uint32_t *t = kiln__calloc(cap, sizeof(uint32_t));
    kiln__free(r->find_idx);
    r->find_idx = t;
    r->find_cap = t ? cap : 0;
    r->find_n = 0;
    for (uint32_t i = 0; t && i < r->ncomps; i++)
        find_index_add(r, i);
}

static void find_index_add(struct kiln_registry *r, uint32_t i)
{
    const char *name = r->comps[i]->name;
    if (!name)
        return;
    if (2 * (r->find_n + 1) > r->find_cap) {
        find_index_rebuild(r, r->find_cap ? 2 * r->find_cap : 256);
        return; /* the rebuild put every component up to ncomps, @p i among them */
    }
    uint32_t m = r->find_cap - 1;
    for (uint32_t h = name_hash(name) & m;; h = (h + 1) & m)
        if (!r->find_idx[h]) {
            r->find_idx[h] = i + 1;
            r->find_n++;
            return;
        }
}


/* kind 0: any component but an op (ops have a namespace of their own) */
static bool comp_is(const kiln_component *c, kiln_component_kind kind, const char *name)
{
    return (kind == 0 ? c->kind != KILN_COMP_OP : c->kind == kind) && c->name &&
           strcmp(c->name, name) == 0;
}

const kiln_component *kiln_registry_find(const kiln_ctx *ctx, kiln_component_kind kind,
                                         const char *name)
{
    const struct kiln_registry *r = ctx->registry;
    if (!r->find_idx) { /* no index (out of memory): the scan */
        for (uint32_t i = 0; i < r->ncomps; i++)
            if (comp_is(r->comps[i], kind, name))
                return r->comps[i];
        return NULL;
    }
    uint32_t m = r->find_cap - 1;
    for (uint32_t h = name_hash(name) & m; r->find_idx[h]; h = (h + 1) & m)
        if (comp_is(r->comps[r->find_idx[h] - 1], kind, name))
            return r->comps[r->find_idx[h] - 1];
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

/* Free a component and what the host copied for it (an engine's op table). */
static void free_component(kiln_component *c)
{
    if (c->kind == KILN_COMP_ENGINE)
        kiln__free((void *)(uintptr_t)c->d.engine.ops);
    kiln__free(c);
}

static int cmp_op_info_name(const void *a, const void *b)
{
    return strcmp(((const kiln_op_info *)a)->op_type, ((const kiln_op_info *)b)->op_type);
}

/*
 * Validate an engine's op table and replace c->d.engine.ops by a host-owned
 * copy in the host's layout (entries are read with the stride of their own
 * struct_size, so a table built against newer headers is read correctly).
 * Refused, naming the plugin and the engine: ops NULL with op_count > 0, an
 * entry whose struct_size is below the ABI 1.0 size or differs from entry
 * 0's, a NULL or empty op type, a dtype mask with bits past the last dtype,
 * an op type listed twice.  O(n log n) in the table size.
 */
static kiln_status adopt_engine_table(kiln_component *c, const void *raw_ops,
                                      const kiln_plugin_rec *pl, kiln_error *err)
{
    char file[512]; /* "<file> (plugin <name>)" */
    snprintf(file, sizeof(file), "%s (plugin %s)", plugin_file(pl),
             pl && pl->desc.name ? pl->desc.name : "?");
    kiln_engine_desc *e = &c->d.engine;
    const char *raw = raw_ops;
    uint32_t n = e->op_count;
    if (n == 0)
        return KILN_OK;
    if (!raw)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: engine %s: op_count is %u but ops is NULL",
                           file, c->name, n);
    uint32_t stride = ((const kiln_op_info *)(const void *)raw)->struct_size;
    const size_t min = KILN_SIZE_THROUGH(kiln_op_info, flags);
    kiln_op_info *copy = kiln__calloc(n, sizeof(kiln_op_info));
    if (!copy)
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: engine %s: out of memory", file, c->name);
    const uint32_t all_dtypes = (1u << KILN_DT_COUNT) - 1u;
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < n && st == KILN_OK; i++) {
        const kiln_op_info *oi = (const kiln_op_info *)(const void *)(raw + (size_t)i * stride);
        if (oi->struct_size < min)
            st = kiln_errorf(err, KILN_ERR_VERSION,
                             "%s: engine %s: op table entry %u has struct_size %u, smaller than "
                             "the ABI 1.0 minimum %zu", file, c->name, i, oi->struct_size, min);
        else if (oi->struct_size != stride)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "%s: engine %s: op table entry %u has struct_size %u, entry 0 has %u",
                             file, c->name, i, oi->struct_size, stride);
        else if (!oi->op_type || !oi->op_type[0])
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "%s: engine %s: op table entry %u has no op type", file, c->name, i);
        else if (oi->dtype_mask & ~all_dtypes)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "%s: engine %s: op %s has dtype mask 0x%x with bits past the last "
                             "dtype (valid bits 0x%x)", file, c->name, oi->op_type,
                             oi->dtype_mask, all_dtypes);
        else {
            memcpy(&copy[i], oi, stride < sizeof(kiln_op_info) ? stride : sizeof(kiln_op_info));
            copy[i].struct_size = sizeof(kiln_op_info);
        }
    }
    if (st == KILN_OK) {
        kiln_op_info *sorted = kiln__malloc((size_t)n * sizeof(kiln_op_info));
        if (!sorted) {
            st = kiln_errorf(err, KILN_ERR_NOMEM, "%s: engine %s: out of memory", file, c->name);
        } else {
            memcpy(sorted, copy, (size_t)n * sizeof(kiln_op_info));
            qsort(sorted, n, sizeof(kiln_op_info), cmp_op_info_name);
            for (uint32_t i = 1; i < n && st == KILN_OK; i++)
                if (strcmp(sorted[i - 1].op_type, sorted[i].op_type) == 0)
                    st = kiln_errorf(err, KILN_ERR_DUPLICATE,
                                     "%s: engine %s: op %s is listed twice in its op table",
                                     file, c->name, sorted[i].op_type);
            kiln__free(sorted);
        }
    }
    if (st != KILN_OK) {
        kiln__free(copy);
        return st;
    }
    e->ops = copy;
    return KILN_OK;
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
    /* An engine's op table is the plugin's until adopt_engine_table copies it. */
    const void *raw_ops = NULL;
    if (kind == KILN_COMP_ENGINE) {
        raw_ops = c->d.engine.ops;
        c->d.engine.ops = NULL;
    }
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
        find_index_add(r, r->ncomps - 1);
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
        if (c->d.fusion.kind == KILN_FUSION_PATTERN &&
            (!c->d.fusion.patterns || !c->d.fusion.replacement))
            missing = "patterns and replacement (pattern fusion)";
        else if (c->d.fusion.kind == KILN_FUSION_DECOMPOSE &&
                 (!c->d.fusion.decompose_ops || !c->d.fusion.replacement))
            missing = "decompose_ops and replacement (decompose pass)";
        else if (c->d.fusion.kind == KILN_FUSION_BASE && !c->d.fusion.run)
            missing = "run (fusion base pass)";
        else if (c->d.fusion.kind < KILN_FUSION_PATTERN || c->d.fusion.kind > KILN_FUSION_BASE)
            missing = "a valid kind (pattern, decompose or base)";
        else if (c->d.fusion.stage != KILN_FUSION_STAGE_BEFORE_INFER_SHAPE &&
                 c->d.fusion.stage != KILN_FUSION_STAGE_AFTER_INFER_SHAPE &&
                 c->d.fusion.stage != KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION &&
                 c->d.fusion.stage != KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE &&
                 c->d.fusion.stage != KILN_FUSION_STAGE_BUILTIN)
            missing = "a valid stage (GE kBeforeInferShape, kAfterInferShape, "
                      "kAfterBuiltinFusionPass, kAfterOriginGraphOptimize, or builtin)";
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
        if ((st = adopt_engine_table(c, raw_ops, reg->plugin, err)) != KILN_OK)
            goto fail;
        break;
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
    find_index_add(r, r->ncomps - 1);
    if (kind == KILN_COMP_ENGINE)
        kiln__engine_index_invalidate(reg->ctx);
    return KILN_OK;
fail:
    free_component(c);
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
REGISTER(kiln_register_fusion_pass, kiln_fusion_pass_desc, KILN_COMP_FUSION, run,
         "fusion pass")
REGISTER(kiln_register_engine, kiln_engine_desc, KILN_COMP_ENGINE, kernel_destroy, "engine")
REGISTER(kiln_register_checker, kiln_checker_desc, KILN_COMP_CHECKER, check, "checker")
REGISTER(kiln_register_mem_planner, kiln_mem_planner_desc, KILN_COMP_MEM_PLANNER, plan,
         "memory planner")
REGISTER(kiln_register_allocator, kiln_allocator_desc, KILN_COMP_ALLOCATOR, free,
         "allocator")
REGISTER(kiln_register_frontend, kiln_frontend_desc, KILN_COMP_FRONTEND, export_file,
         "frontend")
REGISTER(kiln_register_tuner, kiln_tuner_desc, KILN_COMP_TUNER, on_build_step, "tuner")
REGISTER(kiln_register_instrument, kiln_instrument_desc, KILN_COMP_INSTRUMENT,
         after_pass_failed, "instrument")
REGISTER(kiln_register_runtime, kiln_runtime_desc, KILN_COMP_RUNTIME, unload, "runtime")
REGISTER(kiln_register_op, kiln_op_def, KILN_COMP_OP, fold, "op")

const char *kiln_plugin_config(const kiln_registrar *r, const char **manifest, const char **jpath)
{
    if (manifest)
        *manifest = r && r->config ? r->config_file : NULL;
    if (jpath)
        *jpath = r && r->config ? r->config_jpath : NULL;
    return r ? r->config : NULL;
}

bool kiln_registrar_op_known(const kiln_registrar *r, const char *type)
{
    if (!r || !type || !type[0])
        return false;
    const struct kiln_registry *reg = r->ctx->registry;
    kiln_sym s = kiln__intern_find(&r->ctx->strings, type, strlen(type));
    if (s && kiln__op_component(r->ctx, s))
        return true;
    for (uint32_t i = 0; i < reg->ncomps; i++) {
        const kiln_component *c = reg->comps[i];
        if (c->kind != KILN_COMP_ENGINE)
            continue;
        for (uint32_t k = 0; k < c->d.engine.op_count; k++)
            if (c->d.engine.ops[k].op_type && strcmp(c->d.engine.ops[k].op_type, type) == 0)
                return true;
    }
    return false;
}

/* Remove every component registered after index @p from. */
static void rollback(kiln_ctx *ctx, uint32_t from)
{
    struct kiln_registry *r = ctx->registry;
    while (r->ncomps > from) {
        kiln_component *c = r->comps[--r->ncomps];
        if (c->kind == KILN_COMP_CHECKER)
            kiln__checker_unregister(ctx, c);
        if (c->kind == KILN_COMP_ENGINE)
            kiln__engine_index_invalidate(ctx);
        if (c->kind == KILN_COMP_OP)
            kiln__op_unregister(ctx, c);
        free_component(c);
    }
    find_index_rebuild(r, r->find_cap ? r->find_cap : 256);
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
    kiln_registrar reg = {ctx,           p,   &init_err, KILN_OK, r->next_config,
                          r->next_config_file, r->next_config_jpath};
    r->next_config = r->next_config_file = r->next_config_jpath = NULL;
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
    /* KILN_DEBUG_PLUGIN_LOADS=1: one stderr line per file opened (tests and
     * docs/manifest.md use it to see which plugins a command loads). */
    const char *dbg = getenv("KILN_DEBUG_PLUGIN_LOADS");
    if (dbg && dbg[0] && strcmp(dbg, "0") != 0)
        fprintf(stderr, "kiln: debug: dlopen %s\n", real);
    kiln_activity act = {
        .file = real, .stage = "plugin load", .doing = "running its constructors (dlopen)"};
    kiln_activity *prev = kiln__activity_enter(&act);
    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    kiln__activity_leave(prev);
    if (!h) {
        kiln_status e = kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", path, dlerror());
        dlerror(); /* glibc frees the message (kept in thread-local state) on the next call */
        return e;
    }
    kiln_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, KILN_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        dlerror(); /* the lookup's message: set, then freed */
        dlerror();
    }
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

/* ---- deferred plugins ------------------------------------------------------ */

kiln_status kiln__registry_defer(kiln_ctx *ctx, const kiln_deferred_plugin *src, kiln_error *err)
{
    struct kiln_registry *r = ctx->registry;
    if (!KILN_GROW(r->deferred, r->deferred_cap, r->ndeferred + 1))
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", src->file);
    kiln_deferred_plugin *d = &r->deferred[r->ndeferred];
    memset(d, 0, sizeof(*d));
    uint32_t n = src->nnames;
    d->file = kiln__strdup(src->file);
    d->manifest = kiln__strdup(src->manifest);
    d->jpath = kiln__strdup(src->jpath);
    d->names = kiln__calloc(n ? n : 1, sizeof(char *));
    d->kinds = kiln__calloc(n ? n : 1, sizeof(kiln_component_kind));
    d->kinds2 = kiln__calloc(n ? n : 1, sizeof(kiln_component_kind));
    d->keys = kiln__calloc(n ? n : 1, sizeof(char *));
    bool ok = d->file && d->manifest && d->jpath && d->names && d->kinds && d->kinds2 && d->keys;
    for (uint32_t i = 0; ok && i < n; i++) {
        ok = (d->names[i] = kiln__strdup(src->names[i])) != NULL;
        d->kinds[i] = src->kinds[i];
        d->kinds2[i] = src->kinds2[i];
        d->keys[i] = src->keys[i];
        d->nnames = i + 1;
    }
    d->kind_mask = src->kind_mask;
    r->ndeferred++; /* freed with the registry even when incomplete */
    if (!ok) {
        d->state = 2;
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", src->file);
    }
    r->npending++;
    return KILN_OK;
}

/* Fail "<manifest>: <jpath>.<what>: msg" for deferred plugin @p d. */
static kiln_status deferred_fail(const kiln_deferred_plugin *d, const char *what, kiln_status st,
                                 const char *msg, kiln_error *err)
{
    kiln_errorf(err, st, "%s", msg);
    kiln_error_push(err, "%s%s", d->jpath, what);
    return kiln_error_push(err, "%s", d->manifest);
}

/* The plugin registered exactly what its entry's `provides` declares (the
 * check manifest.c makes of an eagerly loaded plugin, with its messages). */
static kiln_status deferred_check(kiln_ctx *ctx, const kiln_deferred_plugin *d,
                                  const kiln_plugin_rec *rec, kiln_error *err)
{
    char msg[KILN_MSG_SIZE];
    for (uint32_t i = 0; i < d->nnames; i++) {
        const kiln_component *c = kiln_registry_find(ctx, 0, d->names[i]);
        if (!c || c->plugin != rec) {
            snprintf(msg, sizeof(msg),
                     "declared-vs-registered mismatch: plugin %s declares %s but does not "
                     "register it%s%s",
                     rec->desc.name, d->names[i], c ? "; it is registered by " : "",
                     c ? (c->plugin && c->plugin->path ? c->plugin->path : "a built-in plugin")
                       : "");
            return deferred_fail(d, ".provides", KILN_ERR_INVALID, msg, err);
        }
        if (c->kind != d->kinds[i] && c->kind != d->kinds2[i]) {
            snprintf(msg, sizeof(msg),
                     "declared-vs-registered mismatch: plugin %s registers %s as a %s, not "
                     "under \"%s\"",
                     rec->desc.name, d->names[i], kiln_component_kind_name(c->kind), d->keys[i]);
            return deferred_fail(d, ".provides", KILN_ERR_INVALID, msg, err);
        }
    }
    const struct kiln_registry *r = ctx->registry;
    for (uint32_t i = rec->first_component; i < r->ncomps; i++) {
        const kiln_component *c = r->comps[i];
        if (c->plugin != rec || c->kind == KILN_COMP_OP)
            continue; /* op types are not declared in `provides` */
        bool found = false;
        for (uint32_t k = 0; k < d->nnames && !found; k++)
            found = strcmp(d->names[k], c->name) == 0;
        if (!found) {
            snprintf(msg, sizeof(msg),
                     "declared-vs-registered mismatch: plugin %s registers %s %s, which "
                     "\"provides\" does not declare",
                     rec->desc.name, kiln_component_kind_name(c->kind), c->name);
            return deferred_fail(d, ".provides", KILN_ERR_INVALID, msg, err);
        }
    }
    return KILN_OK;
}

static kiln_status load_deferred_now(kiln_ctx *ctx, kiln_deferred_plugin *d, kiln_error *err)
{
    kiln_error sub;
    kiln_error_clear(&sub);
    kiln_plugin_rec *rec = NULL;
    kiln_status st = kiln_plugin_load(ctx, d->file, &rec, &sub);
    if (st != KILN_OK)
        return deferred_fail(d, ".path", st, sub.msg, err);
    return deferred_check(ctx, d, rec, err);
}

/* Load @p d once; a failure is kept and returned again by later calls. */
static kiln_status load_deferred(kiln_ctx *ctx, kiln_deferred_plugin *d, kiln_error *err)
{
    if (d->state == 2)
        return kiln_errorf(err, d->fail_code, "%s", d->fail_msg ? d->fail_msg : "out of memory");
    if (d->state == 1)
        return KILN_OK;
    struct kiln_registry *r = ctx->registry;
    r->npending--;
    kiln_error mine;
    kiln_error_clear(&mine);
    kiln_status st = load_deferred_now(ctx, d, &mine);
    if (st == KILN_OK) {
        d->state = 1;
        return KILN_OK;
    }
    d->state = 2; /* not retried */
    r->nfailed++;
    d->fail_code = st;
    char msg[KILN_ERROR_TEXT_SIZE];
    kiln_error_format(&mine, msg, sizeof(msg));
    d->fail_msg = kiln__strdup(msg);
    return kiln_errorf(err, st, "%s", msg);
}

kiln_status kiln__registry_need(kiln_ctx *ctx, kiln_component_kind kind, kiln_error *err)
{
    struct kiln_registry *r = ctx->registry;
    for (uint32_t i = 0; (r->npending || r->nfailed) && i < r->ndeferred; i++) {
        kiln_deferred_plugin *d = &r->deferred[i];
        if (d->state != 1 && (kind == 0 || (d->kind_mask & (1u << kind)))) {
            kiln_status st = load_deferred(ctx, d, err);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

kiln_status kiln__registry_find_loading(kiln_ctx *ctx, kiln_component_kind kind,
                                        const char *name, const kiln_component **out,
                                        kiln_error *err)
{
    struct kiln_registry *r = ctx->registry;
    *out = NULL;
    for (uint32_t i = 0; (r->npending || r->nfailed) && i < r->ndeferred; i++) {
        kiln_deferred_plugin *d = &r->deferred[i];
        for (uint32_t k = 0; d->state != 1 && k < d->nnames; k++) {
            if (strcmp(d->names[k], name) != 0 ||
                (kind && d->kinds[k] != kind && d->kinds2[k] != kind))
                continue;
            kiln_status st = load_deferred(ctx, d, err);
            if (st != KILN_OK)
                return st;
        }
    }
    *out = kiln_registry_find(ctx, kind, name);
    return KILN_OK;
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
