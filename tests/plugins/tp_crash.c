/* tp_crash.c - a node pass that crashes on the node named "boom". */
#include <kiln/kiln.h>
#include <string.h>

/* A real wild store; UBSan's null check is off here so the sanitizer build
 * reaches the SIGSEGV that crash attribution must report. */
__attribute__((no_sanitize_undefined)) static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    (void)ctx;
    if (strcmp(kiln_node_name_str(g, n), "boom") == 0) {
        /* the pointer itself is volatile: the optimiser cannot see the null
         * and drop the store (or the function) as undefined behaviour */
        volatile int *volatile p = 0;
        *p = 42;
    }
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_pass_desc d = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_NODE, .name = "CrashPass",
                                     .run_node = run};
    return kiln_register_pass(r, &d);
}

KILN_PLUGIN_DEFINE("kiln.test.crash", "1.0.0", "MIT", "crashes", init, NULL)
