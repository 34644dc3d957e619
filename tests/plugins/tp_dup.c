/* tp_dup.c - registers a component whose name tp_good already registered. */
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
    (void)e;
    static const kiln_pass_desc a = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "DupFirstPass",
                                     .run_graph = run};
    static const kiln_pass_desc b = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "TestGraphPass",
                                     .run_graph = run};
    kiln_status st = kiln_register_pass(r, &a);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &b);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.test.dup", "1.0.0", "MIT", "duplicate component", init, NULL)
