/* tp_op_bad.c - a malformed op def, chosen by $TP_OP_BAD: "null" (no type),
 * "arity" (min above max), "size" (struct_size too small).  Each is refused
 * naming the plugin. */
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    const char *how = getenv("TP_OP_BAD");
    kiln_op_def d = {.struct_size = sizeof(kiln_op_def), .type = "AcmeBad", .min_inputs = 1,
                     .max_inputs = 1, .min_outputs = 1, .max_outputs = 1};
    if (how && strcmp(how, "null") == 0)
        d.type = NULL;
    else if (how && strcmp(how, "arity") == 0)
        d.min_outputs = 2;
    else if (how && strcmp(how, "size") == 0)
        d.struct_size = 12;
    return kiln_register_op(r, &d);
}

KILN_PLUGIN_DEFINE("com.acme.bad_op", "1.0.0", "MIT", "a malformed op def", init, NULL)
