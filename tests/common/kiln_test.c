/*
 * kiln_test.c - CUnit driver shared by every suite.
 */
#include "kiln_test.h"

int kiln_test_run(const char *suite, const kiln_test_case *cases)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite(suite, NULL, NULL);
    if (!s) {
        CU_cleanup_registry();
        return 2;
    }
    for (const kiln_test_case *c = cases; c->name; c++)
        if (!CU_add_test(s, c->name, c->fn)) {
            CU_cleanup_registry();
            return 2;
        }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failed || run == 0) ? 1 : 0;
}

const char *kiln_test_env(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && v[0] ? v : fallback;
}
