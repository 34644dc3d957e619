/*
 * alloc_stack.c - kiln_alloc_stack_* (kiln_alloc_api.h): a runtime allocator
 * component's instance behind a handle.  The handle keeps the component and
 * its instance; every call goes straight to the component's hook (the
 * component serialises calls itself).  Creation validates the config and the
 * options and names the allocator in every error.
 */
#include "base.h"
#include "ctx.h"
#include "graph_int.h"
#include "crash.h"
#include "options.h"
#include "plugin.h"
#include <stdlib.h>
#include <string.h>

struct kiln_alloc_stack {
    const kiln_component *c;
    void *inst;
    kiln_options *opts;
};

/* Set "KEY=VALUE" options @p opts on @p o; errors name the allocator. */
static kiln_status set_opts(kiln_options *o, const char *name, const char *const *opts,
                            uint32_t nopts, kiln_error *err)
{
    for (uint32_t i = 0; i < nopts; i++) {
        const char *eq = opts[i] ? strchr(opts[i], '=') : NULL;
        char key[256];
        if (!eq || eq == opts[i] || (size_t)(eq - opts[i]) >= sizeof(key))
            return kiln_errorf(err, KILN_ERR_PARAM, "allocator %s: option '%s' is not KEY=VALUE",
                               name, opts[i] ? opts[i] : "");
        memcpy(key, opts[i], (size_t)(eq - opts[i]));
        key[eq - opts[i]] = 0;
        kiln_status st = kiln__options_set_text(o, key, eq + 1, err);
        if (st != KILN_OK)
            return kiln_error_push(err, "allocator %s", name);
    }
    return KILN_OK;
}

kiln_status kiln_alloc_stack_create(kiln_graph *g, const char *name, const char *const *opts,
                                    uint32_t nopts, const kiln_alloc_config *cfg,
                                    kiln_alloc_stack **out, kiln_error *err)
{
    if (!g || !name || !cfg || !out || (nopts && !opts))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_alloc_stack_create: NULL argument");
    *out = NULL;
    if (cfg->struct_size < KILN_SIZE_THROUGH(kiln_alloc_config, flags))
        return kiln_errorf(err, KILN_ERR_INVALID, "allocator %s: config struct_size %u too small",
                           name, cfg->struct_size);
    if (cfg->stream_count == 0 || cfg->stream_count > 64)
        return kiln_errorf(err, KILN_ERR_INVALID, "allocator %s: %u streams (1..64 supported)",
                           name, cfg->stream_count);
    if (cfg->event_count && !cfg->events)
        return kiln_errorf(err, KILN_ERR_INVALID, "allocator %s: %u events without their list",
                           name, cfg->event_count);
    for (uint32_t i = 0; i < cfg->event_count; i++)
        if (cfg->events[2 * i] >= cfg->stream_count || cfg->events[2 * i + 1] >= cfg->stream_count)
            return kiln_errorf(err, KILN_ERR_INVALID, "allocator %s: event %u (%u -> %u) names a "
                               "stream out of range (%u streams)", name, i, cfg->events[2 * i],
                               cfg->events[2 * i + 1], cfg->stream_count);
    const kiln_component *c = NULL;
    kiln_status st = kiln__registry_find_loading(g->ctx, KILN_COMP_ALLOCATOR, name, &c, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "allocator %s", name);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "no loaded plugin provides allocator %s "
                           "(kiln plugins lists the allocators)", name);
    kiln_alloc_stack *a = calloc(1, sizeof(*a));
    if (!a)
        return kiln_errorf(err, KILN_ERR_NOMEM, "allocator %s: out of memory", name);
    a->c = c;
    a->opts = kiln__options_create(c->d.allocator.options, c->d.allocator.option_count);
    if (!a->opts) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "allocator %s: out of memory", name);
        goto fail;
    }
    if ((st = set_opts(a->opts, c->name, opts, nopts, err)) != KILN_OK)
        goto fail;
    if (c->d.allocator.create) {
        kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "allocator", g, 0);
        kiln_activity *prev = kiln__activity_enter(&act);
        st = c->d.allocator.create(a->opts, cfg, err, &a->inst);
        kiln__activity_leave(prev);
        if (st != KILN_OK) {
            kiln_error_push(err, "allocator %s", c->name);
            goto fail;
        }
    }
    *out = a;
    return KILN_OK;
fail:
    kiln__options_destroy(a->opts);
    free(a);
    return st;
}

void kiln_alloc_stack_destroy(kiln_alloc_stack *a)
{
    if (!a)
        return;
    if (a->c->d.allocator.destroy)
        a->c->d.allocator.destroy(a->inst);
    kiln__options_destroy(a->opts);
    free(a);
}

void *kiln_alloc_stack_alloc(kiln_alloc_stack *a, size_t size, uint32_t stream)
{
    return a ? a->c->d.allocator.alloc(a->inst, size, stream) : NULL;
}

void kiln_alloc_stack_free(kiln_alloc_stack *a, void *ptr, uint32_t stream)
{
    if (a && ptr)
        a->c->d.allocator.free(a->inst, ptr, stream);
}

kiln_status kiln_alloc_stack_access(kiln_alloc_stack *a, void *ptr, uint32_t src, uint32_t dst,
                                    kiln_error *err)
{
    if (!a || !ptr)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_alloc_stack_access: NULL argument");
    if (!a->c->d.allocator.access)
        return KILN_OK; /* a stream-blind allocator: nothing to mark */
    kiln_status st = a->c->d.allocator.access(a->inst, ptr, src, dst, err);
    return st == KILN_OK ? st : kiln_error_push(err, "allocator %s", a->c->name);
}

bool kiln_alloc_stack_tracks_streams(const kiln_alloc_stack *a)
{
    return a && a->c->d.allocator.access;
}

static kiln_status events(kiln_alloc_stack *a, bool send, uint32_t stream, const uint32_t *ids,
                          uint32_t n, kiln_error *err)
{
    if (!a || (n && !ids))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_alloc_stack_%s_events: NULL argument",
                           send ? "send" : "wait");
    kiln_status (*fn)(void *, uint32_t, const uint32_t *, uint32_t, kiln_error *) =
        send ? a->c->d.allocator.send_events : a->c->d.allocator.wait_events;
    if (!fn)
        return KILN_OK;
    kiln_status st = fn(a->inst, stream, ids, n, err);
    return st == KILN_OK ? st : kiln_error_push(err, "allocator %s", a->c->name);
}

kiln_status kiln_alloc_stack_send_events(kiln_alloc_stack *a, uint32_t stream, const uint32_t *ids,
                                         uint32_t n, kiln_error *err)
{
    return events(a, true, stream, ids, n, err);
}

kiln_status kiln_alloc_stack_wait_events(kiln_alloc_stack *a, uint32_t stream, const uint32_t *ids,
                                         uint32_t n, kiln_error *err)
{
    return events(a, false, stream, ids, n, err);
}

void kiln_alloc_stack_last_wait(kiln_alloc_stack *a)
{
    if (a && a->c->d.allocator.last_wait)
        a->c->d.allocator.last_wait(a->inst);
}

void kiln_alloc_stack_stats(kiln_alloc_stack *a, kiln_alloc_stats *out)
{
    if (!out || out->struct_size < sizeof(uint32_t))
        return;
    uint32_t size = out->struct_size;
    memset(out, 0, size < sizeof(*out) ? size : sizeof(*out));
    out->struct_size = size;
    if (!a || !a->c->d.allocator.stats)
        return;
    kiln_alloc_stats full;
    memset(&full, 0, sizeof(full));
    full.struct_size = sizeof(full);
    a->c->d.allocator.stats(a->inst, &full);
    memcpy((char *)out + sizeof(uint32_t), (char *)&full + sizeof(uint32_t),
           (size < sizeof(full) ? size : sizeof(full)) - sizeof(uint32_t));
}
