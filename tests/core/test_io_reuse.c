/*
 * test_io_reuse.c - the model I/O reuse check (plugins/runtime/common/io_reuse.c,
 * GE ParseOutputReuseInputMemIndexes and ModelV2Executor::CheckIoReuseAddrs):
 * RT26 (same address, different address, index out of range) and RT27 (the
 * parse cases), the early successes, and the pairs read from a graph.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "graph_json.h"
#include "io_reuse.h"

#include <string.h>

static kiln_io_pair pairs[16];

static size_t parse(const char *s) { return kiln_io_reuse_parse(s, pairs, 16); }

/* RT27 */
static void test_parse(void)
{
    CU_ASSERT_EQUAL(parse("0,0"), 1);
    CU_ASSERT_EQUAL(pairs[0].input, 0);
    CU_ASSERT_EQUAL(pairs[0].output, 0);
    CU_ASSERT_EQUAL(parse("0,1|2,3|10,20"), 3);
    CU_ASSERT(pairs[0].input == 0 && pairs[0].output == 1);
    CU_ASSERT(pairs[2].input == 10 && pairs[2].output == 20);
    CU_ASSERT_EQUAL(parse(""), 0);
    CU_ASSERT_EQUAL(parse(NULL), 0);
    CU_ASSERT_EQUAL(parse("1,1||2,2|"), 2);
    CU_ASSERT(pairs[0].input == 1 && pairs[1].input == 2);
    CU_ASSERT_EQUAL(parse("1,1|-1,0|2,2|0,-5"), 2);
    CU_ASSERT(pairs[0].input == 1 && pairs[1].input == 2);
    CU_ASSERT_EQUAL(parse("1,1|invalid|3,3"), 2);
    CU_ASSERT(pairs[0].input == 1 && pairs[1].input == 3);
    /* std::stoul: blanks and a trailing rest are accepted, no digits is skipped */
    CU_ASSERT_EQUAL(parse(" 4, 5x|a,1|1,|,1"), 1);
    CU_ASSERT(pairs[0].input == 4 && pairs[0].output == 5);
    CU_ASSERT_EQUAL(parse("99999999999999999999999,1"), 0); /* out_of_range: skipped */
    /* the count without room to write */
    CU_ASSERT_EQUAL(kiln_io_reuse_parse("0,0|1,1", NULL, 0), 2);
}

/* RT26 and the early successes */
static void test_check(void)
{
    kiln_error err;
    memset(&err, 0, sizeof(err));
    void *in[1] = {(void *)0x1000}, *same[1] = {(void *)0x1000}, *other[1] = {(void *)0x2000};
    kiln_io_pair p00 = {0, 0}, p05 = {0, 5}, p10 = {1, 0};
    const void *const *ci = (const void *const *)in;
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p00, 1, ci, 1, (const void *const *)same, 1, &err),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p00, 1, ci, 1, (const void *const *)other, 1, &err),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "'0,0'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), KILN_IO_REUSE_OPTION));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p05, 1, ci, 1, (const void *const *)same, 1, &err),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "output index 5 out of range"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p10, 1, ci, 1, (const void *const *)same, 1, &err),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "input index 1 out of range"));
    kiln_error_clear(&err);
    /* no pairs, null arrays, zero counts: success without looking */
    CU_ASSERT_EQUAL(kiln_io_reuse_check(NULL, 0, ci, 1, (const void *const *)other, 1, &err),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p05, 1, NULL, 1, (const void *const *)other, 1, &err),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p05, 1, ci, 1, NULL, 1, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p05, 1, ci, 0, (const void *const *)other, 1, &err),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln_io_reuse_check(&p05, 1, ci, 1, (const void *const *)other, 0, &err),
                    KILN_OK);
    kiln_error_clear(&err);
}

static kiln_graph *graph(const char *attrs)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"kiln_graph\": 1, \"name\": \"m\", \"attrs\": {%s}, \"nodes\": ["
             "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": "
             "[{\"shape\": [1]}]},"
             "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"x:0\"]}]}",
             attrs);
    kiln_graph *g = NULL;
    kiln_error err;
    memset(&err, 0, sizeof(err));
    CU_ASSERT_EQUAL_FATAL(
        kiln_graph_read_json_string(kiln_test_ctx(), json, strlen(json), "t", &g, &err), KILN_OK);
    return g;
}

static void test_from_graph(void)
{
    kiln_error err;
    memset(&err, 0, sizeof(err));
    kiln_io_pair *p = NULL;
    size_t n = 9;
    /* GE's string form ("in,out") */
    kiln_graph *g = graph("\"output_reuse_input_mem_indexes\": \"0,1|2,3\"");
    CU_ASSERT_EQUAL(kiln_io_reuse_from_graph(g, false, &p, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(p[0].input == 0 && p[0].output == 1 && p[1].input == 2 && p[1].output == 3);
    free(p);
    kiln_graph_destroy(g);
    /* the build's list: flat pairs (output, input) */
    g = graph("\"output_reuse_input_mem_indexes\": [1, 0, 3, 2]");
    CU_ASSERT_EQUAL(kiln_io_reuse_from_graph(g, false, &p, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(p[0].input == 0 && p[0].output == 1 && p[1].input == 2 && p[1].output == 3);
    free(p);
    /* declared only: the build's list is not read */
    CU_ASSERT_EQUAL(kiln_io_reuse_from_graph(g, true, &p, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(p);
    g = (kiln_graph_destroy(g), graph("\"output_reuse_input_mem_indexes\": [1, 0, 3]"));
    CU_ASSERT_EQUAL(kiln_io_reuse_from_graph(g, false, &p, &n, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(p);
    kiln_error_clear(&err);
    kiln_graph_destroy(g);
    g = graph("\"other\": 1");
    CU_ASSERT_EQUAL(kiln_io_reuse_from_graph(g, false, &p, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(p);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"RT27 ParseOutputReuseInputMemIndexes", test_parse},
        {"RT26 CheckIoReuseAddrs", test_check},
        {"pairs from the model", test_from_graph},
        {NULL, NULL},
    };
    return kiln_test_run("io_reuse", cases);
}
