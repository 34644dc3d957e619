/*
 * options.c - typed option sets: one per pass (or tuner, ...) instance.
 *
 * A set is built from a component's declared schema (kiln_option_def[]): one
 * slot per declared option, holding the value as canonical text plus the
 * parsed value.  Declared defaults fill the slots at creation; values given
 * later (manifest JSON, --passes text, --pass-opt) replace them after being
 * checked against the declaration:
 *
 *   bool    "true" / "false" / "1" / "0"          canonical: true, false
 *   int     strtoll, base 10, the whole string     canonical: %lld
 *   float   strtod, the whole string, finite       canonical: shortest %g that
 *                                                   reads back exactly
 *   string  anything
 *
 * INT and FLOAT options are range checked against [min, max] when min < max.
 *
 * The schema is copied element by element with its own struct_size as the
 * stride, zero-extending older (shorter) declarations, so a plugin built
 * against a different minor ABI keeps working (the descriptor rule of
 * PLUGIN_ABI.md).  Sets are small (a handful of options), so lookups are
 * linear.  The public getters kiln_options_get_* live here too.
 */
#include "options.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>

typedef struct opt_slot {
    kiln_option_def def; /* zero-extended copy of the declaration */
    char *text;          /* canonical value text; NULL = unset (no default) */
    bool is_explicit;    /* set by the user, not the declared default */
    union {
        bool b;
        int64_t i;
        double f;
    } v;
} opt_slot;

struct kiln_options {
    opt_slot *slots; /* one per declared option, in declaration order */
    uint32_t slot_count;
};

const char *kiln__option_type_name(kiln_option_type t)
{
    switch (t) {
    case KILN_OPT_BOOL: return "bool";
    case KILN_OPT_INT: return "int";
    case KILN_OPT_FLOAT: return "float";
    case KILN_OPT_STRING: return "string";
    }
    return "unknown";
}

/* ---- parsing one value ---------------------------------------------------- */

/*
 * Parse @p text for @p def into @p slot's value and a canonical text in
 * @p buf.  Returns KILN_ERR_INVALID with a message naming the option and the
 * expected type, or KILN_OK.
 */
static kiln_status parse_value(const kiln_option_def *def, const char *text, opt_slot *slot,
                               char *buf, size_t bufsz, kiln_error *err)
{
    const char *type = kiln__option_type_name(def->type);
    bool range = def->min < def->max;
    char *end = NULL;
    switch (def->type) {
    case KILN_OPT_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
            slot->v.b = true;
        else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0)
            slot->v.b = false;
        else
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "option '%s' expects bool (true/false/1/0), got '%s'", def->name,
                               text);
        snprintf(buf, bufsz, "%s", slot->v.b ? "true" : "false");
        return KILN_OK;
    case KILN_OPT_INT: {
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (!text[0] || isspace((unsigned char)text[0]) || *end || errno == ERANGE)
            return kiln_errorf(err, KILN_ERR_INVALID, "option '%s' expects %s, got '%s'",
                               def->name, type, text);
        if (range && ((double)x < def->min || (double)x > def->max))
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "option '%s' = %lld is out of range [%.17g, %.17g]", def->name, x,
                               def->min, def->max);
        slot->v.i = (int64_t)x;
        snprintf(buf, bufsz, "%lld", x);
        return KILN_OK;
    }
    case KILN_OPT_FLOAT: {
        errno = 0;
        double x = strtod(text, &end);
        if (!text[0] || isspace((unsigned char)text[0]) || *end || errno == ERANGE ||
            !isfinite(x))
            return kiln_errorf(err, KILN_ERR_INVALID, "option '%s' expects %s, got '%s'",
                               def->name, type, text);
        if (range && (x < def->min || x > def->max))
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "option '%s' = %.17g is out of range [%.17g, %.17g]", def->name,
                               x, def->min, def->max);
        slot->v.f = x;
        /* Shortest of %.15g / %.17g that reads back as the same double. */
        snprintf(buf, bufsz, "%.15g", x);
        if (strtod(buf, NULL) != x)
            snprintf(buf, bufsz, "%.17g", x);
        return KILN_OK;
    }
    case KILN_OPT_STRING:
        return KILN_OK; /* the text itself is canonical */
    }
    return kiln_errorf(err, KILN_ERR_INVALID, "option '%s' has an unknown declared type %d",
                       def->name, (int)def->type);
}

/* Store @p text (validated) into @p s; on failure @p s is unchanged. */
static kiln_status slot_set(opt_slot *s, const char *text, bool is_explicit, kiln_error *err)
{
    opt_slot tmp = *s;
    char buf[64];
    kiln_status st = parse_value(&s->def, text, &tmp, buf, sizeof(buf), err);
    if (st != KILN_OK)
        return st;
    char *copy = kiln__strdup(s->def.type == KILN_OPT_STRING ? text : buf);
    if (!copy)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory setting option '%s'",
                           s->def.name);
    kiln__free(s->text);
    *s = tmp;
    s->text = copy;
    s->is_explicit = is_explicit;
    return KILN_OK;
}

/* ---- creation -------------------------------------------------------------- */

kiln_options *kiln__options_create(const kiln_option_def *schema, uint32_t n)
{
    kiln_options *o = kiln__calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    if (!schema || n == 0)
        return o;
    o->slots = kiln__calloc(n, sizeof(*o->slots));
    if (!o->slots)
        goto fail;
    /* The plugin's array stride is its struct_size (older/newer minors). */
    size_t declared = schema[0].struct_size;
    size_t stride = declared >= KILN_SIZE_THROUGH(kiln_option_def, name) ? declared
                                                                            : sizeof(*schema);
    size_t copy = stride < sizeof(*schema) ? stride : sizeof(*schema);
    for (uint32_t i = 0; i < n; i++) {
        opt_slot *s = &o->slots[o->slot_count];
        memcpy(&s->def, (const char *)schema + (size_t)i * stride, copy);
        s->def.struct_size = sizeof(s->def);
        if (!s->def.name || !s->def.name[0] || kiln__options_lookup(o, s->def.name))
            continue; /* unnamed or duplicate declaration: ignored */
        o->slot_count++;
        /* A default that does not parse is a plugin bug; the option stays unset. */
        if (s->def.default_value) {
            kiln_error scratch;
            kiln_error_clear(&scratch);
            if (slot_set(s, s->def.default_value, false, &scratch) == KILN_ERR_NOMEM)
                goto fail;
        }
    }
    return o;
fail:
    kiln__options_destroy(o);
    return NULL;
}

void kiln__options_destroy(kiln_options *o)
{
    if (!o)
        return;
    for (uint32_t i = 0; i < o->slot_count; i++)
        kiln__free(o->slots[i].text);
    kiln__free(o->slots);
    kiln__free(o);
}

static opt_slot *find_slot(const kiln_options *o, const char *key)
{
    if (!o || !key)
        return NULL;
    for (uint32_t i = 0; i < o->slot_count; i++)
        if (strcmp(o->slots[i].def.name, key) == 0)
            return &o->slots[i];
    return NULL;
}

const kiln_option_def *kiln__options_lookup(const kiln_options *o, const char *key)
{
    opt_slot *s = find_slot(o, key);
    return s ? &s->def : NULL;
}

uint32_t kiln__options_schema_count(const kiln_options *o)
{
    return o ? o->slot_count : 0;
}

const kiln_option_def *kiln__options_schema_at(const kiln_options *o, uint32_t i)
{
    return o && i < o->slot_count ? &o->slots[i].def : NULL;
}

kiln_status kiln__options_set_text(kiln_options *o, const char *key, const char *value,
                                   kiln_error *err)
{
    opt_slot *s = find_slot(o, key);
    if (!s) {
        char names[256];
        size_t len = 0;
        names[0] = 0;
        for (uint32_t i = 0; o && i < o->slot_count && len < sizeof(names); i++) {
            int k = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                             o->slots[i].def.name);
            if (k > 0)
                len += (size_t)k;
        }
        if (!names[0])
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "unknown option '%s' (no options are declared)", key);
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "unknown option '%s' (declared: %s)", key,
                           names);
    }
    if (!value)
        return kiln_errorf(err, KILN_ERR_INVALID, "option '%s' needs a value", key);
    return slot_set(s, value, true, err);
}

/* ---- enumeration (set options only, declaration order) -------------------- */

static const opt_slot *nth_set(const kiln_options *o, uint32_t i)
{
    for (uint32_t k = 0; o && k < o->slot_count; k++)
        if (o->slots[k].text && i-- == 0)
            return &o->slots[k];
    return NULL;
}

uint32_t kiln__options_count(const kiln_options *o)
{
    uint32_t n = 0;
    for (uint32_t k = 0; o && k < o->slot_count; k++)
        n += o->slots[k].text != NULL;
    return n;
}

const char *kiln__options_key(const kiln_options *o, uint32_t i)
{
    const opt_slot *s = nth_set(o, i);
    return s ? s->def.name : NULL;
}

const char *kiln__options_value_text(const kiln_options *o, uint32_t i)
{
    const opt_slot *s = nth_set(o, i);
    return s ? s->text : NULL;
}

bool kiln__options_is_set(const kiln_options *o, uint32_t i)
{
    const opt_slot *s = nth_set(o, i);
    return s && s->is_explicit;
}

/* ---- public getters ---------------------------------------------------------- */

bool kiln_options_get_bool(const kiln_options *o, const char *key, bool *out)
{
    const opt_slot *s = find_slot(o, key);
    if (!s || !s->text || s->def.type != KILN_OPT_BOOL)
        return false;
    if (out)
        *out = s->v.b;
    return true;
}

bool kiln_options_get_int(const kiln_options *o, const char *key, int64_t *out)
{
    const opt_slot *s = find_slot(o, key);
    if (!s || !s->text || s->def.type != KILN_OPT_INT)
        return false;
    if (out)
        *out = s->v.i;
    return true;
}

/* An INT option reads as a float too (exact up to 2^53). */
bool kiln_options_get_float(const kiln_options *o, const char *key, double *out)
{
    const opt_slot *s = find_slot(o, key);
    if (!s || !s->text || (s->def.type != KILN_OPT_FLOAT && s->def.type != KILN_OPT_INT))
        return false;
    if (out)
        *out = s->def.type == KILN_OPT_FLOAT ? s->v.f : (double)s->v.i;
    return true;
}

/* Any option reads as its canonical text; the pointer lives as long as the set. */
bool kiln_options_get_string(const kiln_options *o, const char *key, const char **out)
{
    const opt_slot *s = find_slot(o, key);
    if (!s || !s->text)
        return false;
    if (out)
        *out = s->text;
    return true;
}
