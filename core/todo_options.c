/* TEMPORARY placeholders until options.c lands (owner: manifest work). Delete when done. */
#include "base.h"
bool kiln_options_get_bool(const kiln_options *o, const char *key, bool *out) { (void)o; (void)key; (void)out; return false; }
bool kiln_options_get_int(const kiln_options *o, const char *key, int64_t *out) { (void)o; (void)key; (void)out; return false; }
bool kiln_options_get_float(const kiln_options *o, const char *key, double *out) { (void)o; (void)key; (void)out; return false; }
bool kiln_options_get_string(const kiln_options *o, const char *key, const char **out) { (void)o; (void)key; (void)out; return false; }
