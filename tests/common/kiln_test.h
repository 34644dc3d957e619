/*
 * kiln_test.h - small helpers shared by the CUnit suites.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <CUnit/Basic.h>
#include <stdlib.h>

/* Run one suite of tests {name, fn} and return the process exit status. */
typedef struct kiln_test_case {
    const char *name;
    void (*fn)(void);
} kiln_test_case;

int kiln_test_run(const char *suite, const kiln_test_case *cases);

/* Environment directory or a default (tests run from the build dir). */
const char *kiln_test_env(const char *name, const char *fallback);

#endif
