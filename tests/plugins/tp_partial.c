/* tp_partial.c - registers a pass, then fails: the pass must be rolled back. */
#include <kiln/kiln.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    (void)g;
    return KILN_PASS_NOT_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    static const kiln_pass_desc d = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "PartialPass",
                                     .run_graph = run};
    kiln_status st = kiln_register_pass(r, &d);
    if (st != KILN_OK)
        return st;
    return kiln_errorf(e, KILN_ERR_PLUGIN_INIT, "second half failed");
}

KILN_PLUGIN_DEFINE("kiln.test.partial", "1.0.0", "MIT", "partial failure", init, NULL)
