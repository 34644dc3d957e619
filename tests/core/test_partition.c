/*
 * test_partition.c - the kernel side of partitioning: kiln_engine_count /
 * kiln_engine_at / kiln_engine_check (each reason an engine declines a node
 * for), and the partition accessors over the recorded attributes, including
 * a malformed record.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

static bool decline_named_no(void *inst, const kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    return strcmp(kiln_node_name_str(g, n), "no") != 0;
}

static const kiln_op_info ops[] = {
    {sizeof(kiln_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0},
    {sizeof(kiln_op_info), "Conv", 0, "NCHW, NC1HWC0", 0},
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_engine_desc a = {.struct_size = sizeof(kiln_engine_desc), .name = "ea",
                                       .priority = 3, .op_count = 2, .ops = ops,
                                       .supports = decline_named_no};
    static const kiln_engine_desc b = {.struct_size = sizeof(kiln_engine_desc), .name = "eb",
                                       .priority = 7, .op_count = 0, .ops = NULL};
    kiln_status st = kiln_register_engine(r, &a);
    return st ? st : kiln_register_engine(r, &b);
}

static void test_engine_queries(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc pd = {sizeof(pd), KILN_ABI_MAJOR, KILN_ABI_MINOR, "engines", "1", "MIT",
                           "t", "t", init, NULL, {0}};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &pd, NULL, &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    CU_ASSERT_EQUAL(kiln_engine_count(g), 2);
    int32_t pri = 0;
    CU_ASSERT_STRING_EQUAL(kiln_engine_at(g, 0, &pri), "ea");
    CU_ASSERT_EQUAL(pri, 3);
    CU_ASSERT_STRING_EQUAL(kiln_engine_at(g, 1, NULL), "eb");
    CU_ASSERT_PTR_NULL(kiln_engine_at(g, 2, NULL));
    kiln_node_id relu = kiln_graph_add_node(g, "relu", "Relu", 1, 1);
    kiln_node_id i8 = kiln_graph_add_node(g, "i8", "Relu", 1, 1);
    kiln_node_id no = kiln_graph_add_node(g, "no", "Relu", 1, 1);
    kiln_node_id conv = kiln_graph_add_node(g, "conv", "Conv", 2, 1);
    kiln_node_id nhwc = kiln_graph_add_node(g, "nhwc", "Conv", 2, 1);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, i8, 0), KILN_DT_INT8);
    kiln_desc_set_format(g, kiln_node_output_desc(g, conv, 0), "NC1HWC0");
    kiln_desc_set_format(g, kiln_node_output_desc(g, nhwc, 0), "NHWC");
    char why[256];
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", relu, why, sizeof(why)), KILN_OK);
    CU_ASSERT_STRING_EQUAL(why, "");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", i8, why, sizeof(why)), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(why, "dtype int8 of output 0 is not in its Relu entry");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", no, why, sizeof(why)), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(why, "supports() said no");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", conv, why, sizeof(why)), KILN_OK);
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", nhwc, why, sizeof(why)), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(why, "format NHWC of output 0 is not in its Conv entry (NCHW, NC1HWC0)");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "eb", relu, why, sizeof(why)), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(why, "no op entry for Relu");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "gpu", relu, why, sizeof(why)), KILN_ERR_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(why, "no loaded plugin provides engine 'gpu'");
    CU_ASSERT_EQUAL(kiln_engine_check(g, "ea", 999, NULL, 0), KILN_ERR_INVALID);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_partition_accessors(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id a = kiln_graph_add_node(g, "a", "Relu", 0, 1);
    kiln_node_id b = kiln_graph_add_node(g, "b", "Relu", 1, 1);
    /* not partitioned */
    CU_ASSERT_EQUAL(kiln_graph_partition_count(g), 0);
    CU_ASSERT_PTR_NULL(kiln_graph_partition_name(g, 0));
    CU_ASSERT_EQUAL(kiln_node_partition(g, a), -1);
    const int64_t subs[] = {-1, 4};
    const char *engines[] = {"inputNodesSubGraph", "cpu"};
    const char *labels[] = {"", "s1"};
    kiln_attrs *ga = kiln_graph_attrs(g);
    kiln_attrs_set_int(ga, KILN_PART_SEQ, 3);
    kiln_attrs_set_list_int(ga, KILN_PART_SUBGRAPHS, subs, 2);
    kiln_attrs_set_list_string(ga, KILN_PART_ENGINES, engines, 2);
    kiln_attrs_set_list_string(ga, KILN_PART_LABELS, labels, 2);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), KILN_PART_NODE, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, b), KILN_PART_NODE, 1);
    CU_ASSERT_EQUAL(kiln_graph_partition_count(g), 2);
    CU_ASSERT_STRING_EQUAL(kiln_graph_partition_name(g, 0), "partition3_rank0_inputNodesSubGraph");
    CU_ASSERT_STRING_EQUAL(kiln_graph_partition_name(g, 1), "partition3_rank1_new_sub_graph4");
    CU_ASSERT_PTR_NULL(kiln_graph_partition_name(g, 2));
    CU_ASSERT_STRING_EQUAL(kiln_graph_partition_engine(g, 1), "cpu");
    CU_ASSERT_STRING_EQUAL(kiln_graph_partition_stream_label(g, 1), "s1");
    CU_ASSERT_PTR_NULL(kiln_graph_partition_engine(g, 2));
    CU_ASSERT_EQUAL(kiln_node_partition(g, a), 0);
    CU_ASSERT_EQUAL(kiln_node_partition(g, b), 1);
    /* a rank out of range, or a record of another type, reads as "none" */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, b), KILN_PART_NODE, 2);
    CU_ASSERT_EQUAL(kiln_node_partition(g, b), -1);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, b), KILN_PART_NODE, "1");
    CU_ASSERT_EQUAL(kiln_node_partition(g, b), -1);
    CU_ASSERT_EQUAL(kiln_node_partition(g, 0), -1);
    CU_ASSERT_EQUAL(kiln_graph_partition_count(NULL), 0);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_engine_queries", test_engine_queries},
        {"test_partition_accessors", test_partition_accessors},
        {NULL, NULL},
    };
    return kiln_test_run("partition", cases);
}
