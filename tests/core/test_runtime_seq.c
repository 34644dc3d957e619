/*
 * test_runtime_seq.c - the sequential runtime plugin through its component
 * (plugins/runtime/sequential): what a caller of kiln_runtime_desc relies on.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"
#include <string.h>

/* A load that fails (no engine has a kernel for the op) leaves *model NULL and
 * keeps nothing: the caller has nothing to unload (the sanitizer build's leak
 * check sees anything kept). */
static void test_failed_load_keeps_nothing(void)
{
    kiln_ctx *ctx = kiln_test_ctx();
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_runtime_seq.so", &err), KILN_OK);
    const kiln_component *rt = kiln_registry_find(ctx, KILN_COMP_RUNTIME, "sequential");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    kiln_graph *g = kiln_test_graph("no_kernel");
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id f = kiln_test_node(g, "frob", "Frobnicate", 1, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    int64_t dims[1] = {4};
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, x, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, x, 0), 1, dims);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, f, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, f, 0), 1, dims);
    kiln_test_edge(g, x, 0, f, 0);
    kiln_test_edge(g, f, 0, out, 0);
    void *inst = NULL, *model = (void *)&err; /* must be overwritten */
    if (rt->d.runtime.create)
        CU_ASSERT_EQUAL_FATAL(rt->d.runtime.create(NULL, &err, &inst), KILN_OK);
    CU_ASSERT_NOT_EQUAL(rt->d.runtime.load(inst, g, &model, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(model);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "frob"));
    if (rt->d.runtime.destroy)
        rt->d.runtime.destroy(inst);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"failed load keeps nothing", test_failed_load_keeps_nothing},
        {NULL, NULL},
    };
    return kiln_test_run("runtime_seq", cases);
}
