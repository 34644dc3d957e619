/*
 * checker.c - the checker registry and GE's two unconditional tables.
 *
 * Absolutely no conflict (seed 3.3.2, GE_SEMANTICS 3.5): REFERENCE_OUTPUT with
 * anything; {RTS_SPECIAL_TYPE_INPUT, NORMAL_OUTPUT}; {USER_MEMORY_OUTPUT,
 * USER_MEMORY_OUTPUT}; {USER_MEMORY_INPUT, USER_MEMORY_OUTPUT}.
 * Absolutely conflict: the ten pairs listed in always[] below.  Every other
 * pair is conditional: the registered checker decides, and a pair without a
 * checker is no conflict.
 */
#include "checker.h"
#include "plugin.h"
#include <stdarg.h>

#define AA(x) KILN_AA_##x

static const uint8_t never[][2] = {
    {AA(RTS_SPECIAL_TYPE_INPUT), AA(NORMAL_OUTPUT)},
    {AA(USER_MEMORY_OUTPUT), AA(USER_MEMORY_OUTPUT)},
    {AA(USER_MEMORY_INPUT), AA(USER_MEMORY_OUTPUT)},
};

static const uint8_t always[][2] = {
    {AA(USER_MEMORY_INPUT), AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)},
    {AA(USER_MEMORY_INPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
    {AA(USER_MEMORY_OUTPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
    {AA(USER_MEMORY_OUTPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
    {AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_OUTPUT)},
    {AA(USER_MEMORY_OUTPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
    {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
    {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(CONTINUOUS_INPUT)},
    {AA(CONTINUOUS_INPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
    {AA(CONTINUOUS_OUTPUT), AA(NOPADDING_CONTINUOUS_INPUT)},
};

struct kiln_checker_table *kiln__checker_table_create(void)
{
    struct kiln_checker_table *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    for (unsigned i = 0; i < KILN_AA_COUNT; i++) {
        t->cell[i][AA(REFERENCE_OUTPUT)].cls = KILN_CONFLICT_NEVER;
        t->cell[AA(REFERENCE_OUTPUT)][i].cls = KILN_CONFLICT_NEVER;
    }
    for (unsigned i = 0; i < KILN_ARRAY_LEN(never); i++) {
        t->cell[never[i][0]][never[i][1]].cls = KILN_CONFLICT_NEVER;
        t->cell[never[i][1]][never[i][0]].cls = KILN_CONFLICT_NEVER;
    }
    for (unsigned i = 0; i < KILN_ARRAY_LEN(always); i++) {
        t->cell[always[i][0]][always[i][1]].cls = KILN_CONFLICT_ALWAYS;
        t->cell[always[i][1]][always[i][0]].cls = KILN_CONFLICT_ALWAYS;
    }
    return t;
}

void kiln__checker_table_destroy(struct kiln_checker_table *t)
{
    kiln__free(t);
}

kiln_status kiln__checker_register(kiln_ctx *ctx, const kiln_component *comp, kiln_error *err)
{
    struct kiln_checker_table *t = ctx->checkers;
    const kiln_checker_desc *d = &comp->d.checker;
    if (d->pair_count == 0 || !d->pairs)
        return kiln_errorf(err, KILN_ERR_INVALID, "checker %s declares no attribute pair",
                           d->name);
    for (uint32_t i = 0; i < d->pair_count; i++) {
        unsigned a = d->pairs[i].a, b = d->pairs[i].b;
        if (a >= KILN_AA_COUNT || b >= KILN_AA_COUNT)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "checker %s: attribute pair (%u, %u) out of range", d->name, a, b);
        if (t->cell[a][b].cls != KILN_CONFLICT_CONDITIONAL)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "checker %s: pair (%s, %s) is decided by the unconditional table",
                               d->name, kiln_anchor_attr_name(a), kiln_anchor_attr_name(b));
        const kiln_component *prev = t->cell[a][b].checker;
        if (prev && prev != comp)
            return kiln_errorf(err, KILN_ERR_DUPLICATE,
                               "checker %s: pair (%s, %s) already has checker %s", d->name,
                               kiln_anchor_attr_name(a), kiln_anchor_attr_name(b), prev->name);
    }
    for (uint32_t i = 0; i < d->pair_count; i++) {
        unsigned a = d->pairs[i].a, b = d->pairs[i].b;
        t->cell[a][b].checker = comp;
        t->cell[b][a].checker = comp;
    }
    return KILN_OK;
}

void kiln__checker_unregister(kiln_ctx *ctx, const kiln_component *comp)
{
    for (unsigned a = 0; a < KILN_AA_COUNT; a++)
        for (unsigned b = 0; b < KILN_AA_COUNT; b++)
            if (ctx->checkers->cell[a][b].checker == comp)
                ctx->checkers->cell[a][b].checker = NULL;
}

kiln_conflict_class kiln_checker_class(const kiln_ctx *ctx, kiln_anchor_attr a, kiln_anchor_attr b)
{
    if ((unsigned)a >= KILN_AA_COUNT || (unsigned)b >= KILN_AA_COUNT)
        return KILN_CONFLICT_NEVER;
    return ctx->checkers->cell[a][b].cls;
}

const kiln_component *kiln_checker_lookup(const kiln_ctx *ctx, kiln_anchor_attr a,
                                          kiln_anchor_attr b)
{
    if ((unsigned)a >= KILN_AA_COUNT || (unsigned)b >= KILN_AA_COUNT)
        return NULL;
    return ctx->checkers->cell[a][b].checker;
}

const char *kiln_anchor_attr_name(kiln_anchor_attr a)
{
    switch (a) {
#define X(name, v)       \
    case KILN_AA_##name: \
        return #name;
        KILN_ANCHOR_ATTR_MAP(X)
#undef X
    case KILN_AA_COUNT:
        break;
    }
    return "RESERVED";
}

kiln_status kiln_checker_isolate(kiln_checker_result *r, const kiln_mem_anchor *anchor)
{
    if (!r || !anchor)
        return KILN_ERR_INVALID;
    for (uint32_t i = 0; i < r->count; i++) {
        const kiln_mem_anchor *x = &r->anchors[i];
        if (x->graph == anchor->graph && x->node == anchor->node && x->index == anchor->index &&
            x->is_output == anchor->is_output)
            return KILN_OK;
    }
    if (!KILN_GROW(r->anchors, r->cap, r->count + 1))
        return KILN_ERR_NOMEM;
    r->anchors[r->count++] = *anchor;
    return KILN_OK;
}

void kiln_checker_reason(kiln_checker_result *r, const char *fmt, ...)
{
    if (!r)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
}

void kiln__checker_result_reset(kiln_checker_result *r)
{
    r->count = 0;
    r->reason[0] = 0;
}

void kiln__checker_result_free(kiln_checker_result *r)
{
    kiln__free(r->anchors);
    memset(r, 0, sizeof(*r));
}
