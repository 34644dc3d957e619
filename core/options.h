/*
 * options.h - typed option sets (per pass instance / per component), built
 * from JSON objects or "k=v" text and validated against a component's
 * kiln_option_def schema: unknown keys, wrong types and out-of-range values
 * are errors; declared defaults fill missing keys.  Only core/ includes this.
 */
#ifndef KILN_CORE_OPTIONS_H
#define KILN_CORE_OPTIONS_H

#include "base.h"

/** Empty option set with the schema's defaults applied. NULL on OOM. */
kiln_options *kiln__options_create(const kiln_option_def *schema, uint32_t n);
void kiln__options_destroy(kiln_options *o);
/**
 * Set @p key from text @p value, validated against the schema
 * (ERR_NOT_FOUND unknown key, ERR_INVALID wrong type / range).
 * Messages name the option and the expected type.
 */
kiln_status kiln__options_set_text(kiln_options *o, const char *key, const char *value,
                                   kiln_error *err);
/** Number of set options and the i-th as "key=value" text (for printing). */
uint32_t kiln__options_count(const kiln_options *o);
const char *kiln__options_key(const kiln_options *o, uint32_t i);
const char *kiln__options_value_text(const kiln_options *o, uint32_t i);
/** True when the i-th option was set explicitly (not just its declared default). */
bool kiln__options_is_set(const kiln_options *o, uint32_t i);
/**
 * The declared option @p key (a zero-extended copy of the plugin's
 * kiln_option_def, valid while @p o lives) or NULL when the schema has none.
 */
const kiln_option_def *kiln__options_lookup(const kiln_options *o, const char *key);
/** Number of declared options and the i-th declaration (for messages). */
uint32_t kiln__options_schema_count(const kiln_options *o);
const kiln_option_def *kiln__options_schema_at(const kiln_options *o, uint32_t i);
/** "bool", "int", "float", "string". */
const char *kiln__option_type_name(kiln_option_type t);

#endif
