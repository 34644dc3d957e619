/*
 * kiln_test.h - small helpers shared by the CUnit suites.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <CUnit/Basic.h>
#include <kiln/kiln.h>
#include <stdlib.h>

/* One test {name, fn}; a list of them ends with {NULL, NULL}. */
typedef struct kiln_test_case {
    const char *name;
    void (*fn)(void);
} kiln_test_case;

/* One suite {name, cases}; a list of them ends with {NULL, NULL}. */
typedef struct kiln_test_suite {
    const char *name;
    const kiln_test_case *cases;
} kiln_test_suite;

/* Run one suite and return the process exit status: 0 only when at least one
 * test ran and none failed.  Destroys the shared context (kiln_test_ctx). */
int kiln_test_run(const char *suite, const kiln_test_case *cases);

/* kiln_test_run for several suites, in order. */
int kiln_test_run_suites(const kiln_test_suite *suites);

/* Environment directory or a default (tests run from the build dir). */
const char *kiln_test_env(const char *name, const char *fallback);

/* Load $KILN_PLUGIN_DIR/@p file (default lib/kiln/plugins) into @p ctx; on
 * failure the path and the error are printed to stderr. */
kiln_status kiln_test_load_plugin(kiln_ctx *ctx, const char *file, kiln_error *err);

/* ---- sessions and generated JSON (kiln_test_session.c) ---------------------------------- */

typedef struct kiln_session kiln_session;

/* A session on the default manifest (KILN_SOURCE_DIR) with kiln.runtime =
 * @p runtime and its messages off; NULL, with the reason on stderr, on failure. */
kiln_session *kiln_test_session(const char *runtime);

/* A growing text, e.g. a generated graph's JSON; t.s is malloc'ed (free it). */
typedef struct kiln_test_text {
    char *s;
    size_t len, cap;
} kiln_test_text;

/* Append printf-style text (aborts when out of memory). */
void kiln_test_put(kiln_test_text *t, const char *fmt, ...) KILN_PRINTF(2, 3);

/* ---- graph building (fatal on failure) --------------------------------------------- */

/* The suite's shared context, created on first use, destroyed by kiln_test_run. */
kiln_ctx *kiln_test_ctx(void);

/* A new empty graph @p name in kiln_test_ctx(). */
kiln_graph *kiln_test_graph(const char *name);

/* Add a node; a failure ends the test (CU_ASSERT_FATAL). */
kiln_node_id kiln_test_node(kiln_graph *g, const char *name, const char *op, uint32_t nin,
                            uint32_t nout);

/* Add the data edge src:so -> dst:di; a failure ends the test. */
void kiln_test_edge(kiln_graph *g, kiln_node_id src, uint32_t so, kiln_node_id dst, uint32_t di);

/* Assert that @p g (and its subgraphs) pass the verifier; the message goes to stderr. */
void kiln_test_verify_ok(const kiln_graph *g);

#endif
