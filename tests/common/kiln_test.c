/*
 * kiln_test.c - CUnit driver and graph helpers shared by every suite.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"
#include "verify.h"
#include <stdio.h>

static kiln_ctx *shared_ctx;

int kiln_test_run_suites(const kiln_test_suite *suites)
{
    int rc = 2;
    if (CU_initialize_registry() != CUE_SUCCESS)
        goto out;
    for (const kiln_test_suite *s = suites; s->name; s++) {
        CU_pSuite cs = CU_add_suite(s->name, NULL, NULL);
        if (!cs)
            goto cleanup;
        for (const kiln_test_case *c = s->cases; c->name; c++)
            if (!CU_add_test(cs, c->name, c->fn))
                goto cleanup;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    rc = (failed || run == 0) ? 1 : 0;
cleanup:
    CU_cleanup_registry();
out:
    kiln_ctx_destroy(shared_ctx);
    shared_ctx = NULL;
    return rc;
}

int kiln_test_run(const char *suite, const kiln_test_case *cases)
{
    const kiln_test_suite suites[] = {{suite, cases}, {NULL, NULL}};
    return kiln_test_run_suites(suites);
}

const char *kiln_test_env(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && v[0] ? v : fallback;
}

kiln_status kiln_test_load_plugin(kiln_ctx *ctx, const char *file, kiln_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"),
             file);
    kiln_status st = kiln_plugin_load(ctx, path, NULL, err);
    if (st != KILN_OK)
        fprintf(stderr, "\nload %s: %s\n", path, kiln_error_message(err));
    return st;
}

kiln_ctx *kiln_test_ctx(void)
{
    if (!shared_ctx)
        shared_ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(shared_ctx);
    return shared_ctx;
}

kiln_graph *kiln_test_graph(const char *name)
{
    kiln_graph *g = kiln_graph_create(kiln_test_ctx(), name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    return g;
}

kiln_node_id kiln_test_node(kiln_graph *g, const char *name, const char *op, uint32_t nin,
                            uint32_t nout)
{
    kiln_node_id id = kiln_graph_add_node(g, name, op, nin, nout);
    CU_ASSERT_FATAL(id != 0);
    return id;
}

void kiln_test_edge(kiln_graph *g, kiln_node_id src, uint32_t so, kiln_node_id dst, uint32_t di)
{
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(g, src, so, dst, di), KILN_OK);
}

void kiln_test_verify_ok(const kiln_graph *g)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_graph_verify(g, &err);
    if (st != KILN_OK)
        fprintf(stderr, "\nverify: %s\n", kiln_error_message(&err));
    CU_ASSERT_EQUAL(st, KILN_OK);
}
