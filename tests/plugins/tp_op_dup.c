/* tp_op_dup.c - registers op type Add, which libkiln_onnx_ops.so registers:
 * refused, naming both plugins. */
#include <kiln/kiln.h>

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_op_def add = {.struct_size = sizeof(kiln_op_def), .type = "Add",
                                    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
                                    .max_outputs = 1};
    return kiln_register_op(r, &add);
}

KILN_PLUGIN_DEFINE("com.acme.dup_add", "1.0.0", "MIT", "a second Add", init, NULL)
