/*
 * tp_engine_fake.c - test engines for placement and partitioning
 * (tests/e2e/partition.sh), with op tables that make engines interleave, in
 * the image of GE's partition unit tests (FakeOpNpu on the AI core engine,
 * FakeOpRts on the RTS engine):
 *   aicore  priority 20  FakeOpNpu (any dtype), FakeOpBoth (float32 only)
 *   rts     priority 10  FakeOpRts, FakeOpBoth (any dtype)
 *   vector  priority 30  FakeOpBoth (format NC1HWC0 only), FakeOpVec whose
 *                        supports() declines a node with attribute
 *                        tp_decline = true
 * Compile-time only: no kernels.
 */
#include <kiln/kiln.h>

#define F32 (1u << KILN_DT_FLOAT32)

static const kiln_op_info aicore_ops[] = {
    {sizeof(kiln_op_info), "FakeOpNpu", 0, NULL, 0},
    {sizeof(kiln_op_info), "FakeOpBoth", F32, NULL, 0},
};
static const kiln_op_info rts_ops[] = {
    {sizeof(kiln_op_info), "FakeOpRts", 0, NULL, 0},
    {sizeof(kiln_op_info), "FakeOpBoth", 0, NULL, 0},
};
static const kiln_op_info vector_ops[] = {
    {sizeof(kiln_op_info), "FakeOpBoth", 0, "NC1HWC0", 0},
    {sizeof(kiln_op_info), "FakeOpVec", 0, NULL, 0},
};

static bool vector_supports(void *inst, const kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    bool decline = false;
    return !(kiln_attrs_get_bool(kiln_node_attrs(g, n), "tp_decline", &decline) && decline);
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    const kiln_engine_desc aicore = {.struct_size = sizeof(kiln_engine_desc),
                                     .name = "aicore",
                                     .summary = "test engine (FakeOpNpu)",
                                     .priority = 20,
                                     .op_count = 2,
                                     .ops = aicore_ops};
    const kiln_engine_desc rts = {.struct_size = sizeof(kiln_engine_desc),
                                  .name = "rts",
                                  .summary = "test engine (FakeOpRts)",
                                  .priority = 10,
                                  .op_count = 2,
                                  .ops = rts_ops};
    const kiln_engine_desc vector = {.struct_size = sizeof(kiln_engine_desc),
                                     .name = "vector",
                                     .summary = "test engine (FakeOpVec, supports())",
                                     .priority = 30,
                                     .op_count = 2,
                                     .ops = vector_ops,
                                     .supports = vector_supports};
    kiln_status st = kiln_register_engine(r, &aicore);
    if (st == KILN_OK)
        st = kiln_register_engine(r, &rts);
    if (st == KILN_OK)
        st = kiln_register_engine(r, &vector);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.test.engine_fake", "0.1.0", "Apache-2.0",
                   "test engines aicore, rts and vector (partitioning tests)", init, NULL)
