/*
 * test_streams.c - StreamAllocator (libkiln_streams.so, GE_SEMANTICS_BUILD.md
 * 3; docs/streams.md).  GE's ST scenarios of 3.3 are built as graphs with
 * partitions recorded through the API (as tests/core/test_partition.c does):
 * each GE subgraph is one partition, "data" the input-nodes partition.  The
 * pass runs through the pass manager with its options and session options,
 * and the streams and events are read back from the node attributes and the
 * kernel's schedule analysis.  Beyond GE's scenarios: graphs without
 * partitions, --max-streams, event reuse on an alternating chain (the
 * minimum is 2, not the 1 that the outstanding-events bound suggests),
 * random graphs whose schedules must pass kiln_schedule_check with every
 * combination of the event options, and bad options.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "options.h"
#include "passctx.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <string.h>

#define MAXP 512

typedef struct tg {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_passmgr *pm;
    kiln_pass_inst pi;
    kiln_error err;
    const char *engines[MAXP];
    const char *labels[MAXP];
    uint32_t nparts;
} tg;

static void tg_init(tg *t)
{
    memset(t, 0, sizeof(*t));
    t->ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->ctx);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(t->ctx, "libkiln_streams.so", &t->err), KILN_OK);
    t->g = kiln_graph_create(t->ctx, "g");
    t->engines[0] = "inputNodesSubGraph";
    t->labels[0] = "";
    t->nparts = 1;
}

static void tg_free(tg *t)
{
    if (t->pm)
        kiln__passmgr_destroy(t->pm);
    if (t->pi.options)
        kiln__options_destroy(t->pi.options);
    kiln_graph_destroy(t->g);
    kiln_ctx_destroy(t->ctx);
}

/* A new partition (GE subgraph) of @p engine with stream label @p label. */
static uint32_t tg_part(tg *t, const char *engine, const char *label)
{
    CU_ASSERT_FATAL(t->nparts < MAXP);
    t->engines[t->nparts] = engine;
    t->labels[t->nparts] = label ? label : "";
    return t->nparts++;
}

/* Node @p name of @p op in partition @p rank (its engine; its label on the node). */
static kiln_node_id tg_node(tg *t, const char *name, const char *op, uint32_t nin, uint32_t nout,
                            uint32_t rank)
{
    kiln_node_id v = kiln_graph_add_node(t->g, name, op, nin, nout);
    CU_ASSERT_FATAL(v != 0);
    kiln_attrs *a = kiln_node_attrs_mut(t->g, v);
    kiln_attrs_set_int(a, "_kiln_partition", rank);
    kiln_attrs_set_string(a, "_kiln_engine", rank ? t->engines[rank] : "ge_local");
    if (t->labels[rank][0])
        kiln_attrs_set_string(a, "_stream_label", t->labels[rank]);
    return v;
}

static void tg_record(tg *t)
{
    kiln_attrs *a = kiln_graph_attrs(t->g);
    int64_t k[MAXP];
    for (uint32_t r = 0; r < t->nparts; r++)
        k[r] = r ? (int64_t)r : -1;
    kiln_attrs_set_int(a, "_kiln_partition_seq", 0);
    kiln_attrs_set_list_int(a, "_kiln_partition_sub_graphs", k, t->nparts);
    kiln_attrs_set_list_string(a, "_kiln_partition_engines", t->engines, t->nparts);
    kiln_attrs_set_list_string(a, "_kiln_partition_stream_labels", t->labels, t->nparts);
}

/* Run StreamAllocator with pass options "k=v,k=v" separated by ';'. */
static kiln_status tg_run(tg *t, const char *opts)
{
    if (t->nparts > 1)
        tg_record(t);
    t->pi.comp = kiln_registry_find(t->ctx, KILN_COMP_PASS, "StreamAllocator");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->pi.comp);
    t->pi.enabled = true;
    t->pi.options = kiln__options_create(t->pi.comp->d.pass.options, t->pi.comp->d.pass.option_count);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->pi.options);
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", opts ? opts : "");
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        CU_ASSERT_PTR_NOT_NULL_FATAL(eq);
        *eq = 0;
        kiln_status s = kiln__options_set_text(t->pi.options, kv, eq + 1, &t->err);
        if (s != KILN_OK)
            return s;
    }
    kiln_error_clear(&t->err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(t->ctx, NULL, &t->pm, &t->err), KILN_OK);
    kiln_status st = kiln__passmgr_run_stage(t->pm, "build", &t->pi, 1, t->g, &t->err);
    if (st != KILN_OK && getenv("KILN_TEST_VERBOSE"))
        fprintf(stderr, "%s\n", kiln_error_message(&t->err));
    return st;
}

static int64_t iattr(kiln_graph *g, const char *node, const char *key)
{
    kiln_node_id v = kiln_graph_find_node(g, node);
    CU_ASSERT_FATAL(v != 0);
    int64_t x = -99;
    CU_ASSERT_FATAL(kiln_attrs_get_int(kiln_node_attrs(g, v), key, &x));
    return x;
}

static int64_t stream_of(tg *t, const char *node)
{
    return iattr(t->g, node, "_kiln_stream_id");
}

static int64_t root_int(tg *t, const char *key)
{
    int64_t x = -99;
    CU_ASSERT(kiln_attrs_get_int(kiln_graph_attrs(t->g), key, &x));
    return x;
}

static uint32_t list_len(tg *t, const char *node, const char *key)
{
    const int64_t *v = NULL;
    uint32_t n = 0;
    kiln_node_id id = kiln_graph_find_node(t->g, node);
    if (!kiln_attrs_get_list_int(kiln_node_attrs(t->g, id), key, &v, &n))
        return 0;
    return n;
}

/* GE's LSU subgraph: one Relu with @p nout outputs in a new partition. */
static kiln_node_id lsu(tg *t, const char *name, const char *engine, const char *label,
                        uint32_t nout)
{
    return tg_node(t, name, "Relu", 1, nout, tg_part(t, engine, label));
}

static kiln_node_id data(tg *t)
{
    return tg_node(t, "data", "Data", 0, 1, 0);
}

static void edge(tg *t, kiln_node_id a, uint32_t so, kiln_node_id b)
{
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t->g, a, so, b, 0), KILN_OK);
}

/* data -> chain of LSU subgraphs named g1..gN. */
static void chain(tg *t, uint32_t n, const char *const *engines, const char *const *labels)
{
    kiln_node_id prev = data(t);
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "g%u", i + 1);
        kiln_node_id v = lsu(t, name, engines[i], labels ? labels[i] : NULL, 1);
        edge(t, prev, 0, v);
        prev = v;
    }
}

/* ---- ST scenarios ---------------------------------------------------------- */

static void test_st1_single_subgraph(void)
{
    tg t;
    tg_init(&t);
    kiln_node_id d = data(&t), g1 = lsu(&t, "g1", "engine1", NULL, 1);
    edge(&t, d, 0, g1);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "data"), -1);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 1);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 0);
    tg_free(&t);
}

static void test_st2_single_stream(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine2", "engine3"};
    chain(&t, 3, e, NULL);
    kiln_ctx_set_option(t.ctx, "ge.enableSingleStream", "true");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 0);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 0);
    tg_free(&t);
}

static void test_st3_single_stream_conflicts(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1"};
    chain(&t, 1, e, NULL);
    kiln_ctx_set_option(t.ctx, "ge.enableSingleStream", "true");
    kiln_ctx_set_option(t.ctx, "ge.autoMultistreamParallelMode", "LoadBalance:8");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err),
                                  "Cannot configure both parameters ge.autoMultistreamParallelMode "
                                  "and ge.enableSingleStream simultaneously."));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "E10056"));
    tg_free(&t);
}

/* The graph attribute form of E10056 and the stream-label conflict E10055. */
static void test_single_stream_errors(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1"};
    chain(&t, 1, e, NULL);
    kiln_attrs_set_string(kiln_graph_attrs(t.g), "ge.autoMultistreamParallelMode", "x");
    kiln_ctx_set_option(t.ctx, "ge.enableSingleStream", "true");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "E10056"));
    tg_free(&t);

    tg_init(&t);
    const char *l[] = {"label1"};
    chain(&t, 1, e, l);
    kiln_ctx_set_option(t.ctx, "ge.enableSingleStream", "true");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "E10055"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "label1"));
    tg_free(&t);
}

static void test_st5_same_engine(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine1", "engine1", "engine1"};
    chain(&t, 4, e, NULL);
    CU_ASSERT_EQUAL(tg_run(&t, "max_parallel=engine1:100"), KILN_OK);
    for (int i = 1; i <= 4; i++) {
        char n[8];
        snprintf(n, sizeof(n), "g%d", i);
        CU_ASSERT_EQUAL(stream_of(&t, n), 0);
    }
    tg_free(&t);
}

static void test_st6_vector_engine(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"aicore", "aicore", "VectorEngine", "VectorEngine"};
    chain(&t, 4, e, NULL);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g4"), 0);
    /* one event from g2 to g3 */
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "g2", "_send_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "g3", "_recv_event_ids"), 1);
    tg_free(&t);
}

static void test_st7_diff_engine(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine2", "engine3"};
    chain(&t, 3, e, NULL);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 2);
    tg_free(&t);
}

static void test_st8_engine_attach(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine2", "engine3", "engine4"};
    chain(&t, 4, e, NULL);
    CU_ASSERT_EQUAL(tg_run(&t, "attach=ge_local,engine2,engine3"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g4"), 1);
    tg_free(&t);
}

static void test_st10_stream_label(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine2", "engine3", "engine4", "engine5"};
    const char *l[] = {"label1", "label2", "label1", "label2", "label2"};
    chain(&t, 5, e, l);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    int64_t want[] = {0, 1, 0, 1, 1};
    for (int i = 0; i < 5; i++) {
        char n[8];
        snprintf(n, sizeof(n), "g%d", i + 1);
        CU_ASSERT_EQUAL(stream_of(&t, n), want[i]);
    }
    tg_free(&t);
}

static void test_st11_label_not_reusable(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine1", "engine1", "engine1"};
    const char *l[] = {"label1", "label1", NULL, NULL};
    chain(&t, 4, e, l);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    int64_t want[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof(n), "g%d", i + 1);
        CU_ASSERT_EQUAL(stream_of(&t, n), want[i]);
    }
    tg_free(&t);
}

/* g1 with @p n outputs fanning out to LSU subgraphs g2.. of @p engines. */
static void fan_out(tg *t, uint32_t n, const char *e1, const char *const *engines)
{
    kiln_node_id d = data(t), g1 = lsu(t, "g1", e1, NULL, n);
    edge(t, d, 0, g1);
    for (uint32_t i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof(name), "g%u", i + 2);
        edge(t, g1, i, lsu(t, name, engines[i], NULL, 1));
    }
}

static void test_st13_multi_out_new_stream(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine1", "engine1"};
    fan_out(&t, 3, "engine1", e);
    CU_ASSERT_EQUAL(tg_run(&t, "max_parallel=engine1:100"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 2);
    CU_ASSERT_EQUAL(stream_of(&t, "g4"), 3);
    /* g1 signals each of the three streams once */
    CU_ASSERT_EQUAL(list_len(&t, "g1", "_send_event_ids"), 3);
    tg_free(&t);
}

static void test_st14_parallel_one(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine2", "engine1", "engine2"};
    fan_out(&t, 4, "engine1", e);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    int64_t want[] = {0, 0, 1, 0, 1};
    for (int i = 0; i < 5; i++) {
        char n[8];
        snprintf(n, sizeof(n), "g%d", i + 1);
        CU_ASSERT_EQUAL(stream_of(&t, n), want[i]);
    }
    tg_free(&t);
}

static void test_st16_independent_switch_label(void)
{
    tg t;
    tg_init(&t);
    kiln_node_id s1 = lsu(&t, "sub1", "engine0", NULL, 4);
    kiln_node_id s2 = lsu(&t, "sub2", "engine1", "label1", 1);
    kiln_node_id s3 = lsu(&t, "sub3", "engine2", "label1", 1);
    kiln_node_id s4 = lsu(&t, "sub4", "engine1", "label2", 1);
    kiln_node_id s5 = lsu(&t, "sub5", "engine2", "label2", 1);
    edge(&t, s1, 0, s2);
    edge(&t, s1, 1, s3);
    edge(&t, s1, 2, s4);
    edge(&t, s1, 3, s5);
    CU_ASSERT_EQUAL(tg_run(&t, "independent=engine2;max_parallel=engine1:100,engine2:100"),
                    KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "sub1"), 4);
    CU_ASSERT_EQUAL(stream_of(&t, "sub2"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "sub3"), 2);
    CU_ASSERT_EQUAL(stream_of(&t, "sub4"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "sub5"), 3);
    tg_free(&t);
}

/* ST20: a skipped-engine node takes the one stream of its neighbours. */
static void build_st20(tg *t)
{
    kiln_node_id d = data(t);
    kiln_node_id r1 = lsu(t, "relu1", "engine1", "label", 1);
    kiln_node_id c2 = tg_node(t, "const2", "Const", 0, 1, tg_part(t, "ge_local", NULL));
    kiln_node_id r3 = tg_node(t, "relu3", "Relu", 1, 1, tg_part(t, "engine1", "label"));
    edge(t, d, 0, r1);
    CU_ASSERT_EQUAL_FATAL(kiln_ctrl_add(t->g, r1, c2), KILN_OK);
    edge(t, c2, 0, r3);
}

static void test_st20_reassign_stream(void)
{
    tg t;
    tg_init(&t);
    build_st20(&t);
    CU_ASSERT_EQUAL(tg_run(&t, "attach=;untasked_on_stream=true"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "relu1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "const2"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "relu3"), 0);
    tg_free(&t);
    /* kiln's default: a Const runs no task, so it has no stream */
    tg_init(&t);
    build_st20(&t);
    CU_ASSERT_EQUAL(tg_run(&t, "attach="), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "relu1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "const2"), -1);
    CU_ASSERT_EQUAL(stream_of(&t, "relu3"), 0);
    tg_free(&t);
}

/* ST21's graph: Data -> relu1 (aicore) -> allreduce (hccl, fusion @p fusion when
 * > 0) -> relu2 -> relu3 (aicore) -> NetOutput. */
static void build_st21(tg *t, int64_t fusion)
{
    kiln_node_id d = data(t);
    uint32_t p1 = tg_part(t, "aicore", NULL), p2 = tg_part(t, "hccl", NULL),
             p3 = tg_part(t, "aicore", NULL), p4 = tg_part(t, "ge_local", NULL);
    kiln_node_id r1 = tg_node(t, "relu1", "Relu", 1, 1, p1);
    kiln_node_id h = tg_node(t, "allreduce", "HcomAllReduce", 1, 1, p2);
    kiln_node_id r2 = tg_node(t, "relu2", "Relu", 1, 1, p3);
    kiln_node_id r3 = tg_node(t, "relu3", "Relu", 1, 1, p3);
    kiln_node_id o = tg_node(t, "output", "NetOutput", 1, 0, p4);
    if (fusion > 0)
        kiln_attrs_set_int(kiln_node_attrs_mut(t->g, h), "fusion", fusion);
    edge(t, d, 0, r1);
    edge(t, r1, 0, h);
    edge(t, h, 0, r2);
    edge(t, r2, 0, r3);
    edge(t, r3, 0, o);
}

/* ST21: OptimizeIneffectiveMultiStream moves the all-reduce between two nodes of stream 0. */
static void test_st21_aicore_hccl_serial(void)
{
    tg t;
    tg_init(&t);
    build_st21(&t, 0);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "relu1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "allreduce"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "relu2"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "relu3"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "output"), -1);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 1);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 0);
    tg_free(&t);
}

/* GE UpdateForParallelGroupPass: within a stream, each `_parallel_group` name
 * gets a stream of its own; a user stream label keeps its node; group "-1"
 * (HCCL) takes its single data input's stream. */
static void test_parallel_group(void)
{
    tg t;
    tg_init(&t);
    kiln_node_id d = data(&t);
    uint32_t p1 = tg_part(&t, "engine1", NULL), p2 = tg_part(&t, "hccl", NULL);
    kiln_node_id a = tg_node(&t, "a", "Relu", 1, 4, p1);
    kiln_node_id b = tg_node(&t, "b", "Relu", 1, 1, p1);
    kiln_node_id c = tg_node(&t, "c", "Relu", 1, 1, p1);
    kiln_node_id e = tg_node(&t, "e", "Relu", 1, 1, p1);
    kiln_node_id u = tg_node(&t, "u", "Relu", 1, 1, p1);
    kiln_node_id h1 = tg_node(&t, "h1", "HcomAllReduce", 1, 1, p2);
    kiln_node_id h2 = tg_node(&t, "h2", "HcomAllReduce", 2, 1, p2);
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, b), "_parallel_group", "g1");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, c), "_parallel_group", "g1");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, e), "_parallel_group", "g2");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, u), "_parallel_group", "g1");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, u), "_user_stream_label", "mine");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, h1), "_parallel_group", "-1");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, h2), "_parallel_group", "-1");
    edge(&t, d, 0, a);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, a, 0, b, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, a, 1, c, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, a, 2, e, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, a, 3, u, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, b, 0, h1, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, c, 0, h2, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, e, 0, h2, 1), KILN_OK);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    int64_t sa = stream_of(&t, "a"), sb = stream_of(&t, "b"), se = stream_of(&t, "e");
    CU_ASSERT_EQUAL(sa, 0);
    CU_ASSERT_EQUAL(stream_of(&t, "u"), sa);       /* user label: not grouped */
    CU_ASSERT_NOT_EQUAL(sb, sa);                    /* g1 */
    CU_ASSERT_EQUAL(stream_of(&t, "c"), sb);       /* g1 again: the same stream */
    CU_ASSERT_NOT_EQUAL(se, sa);                    /* g2: another */
    CU_ASSERT_NOT_EQUAL(se, sb);
    CU_ASSERT_EQUAL(stream_of(&t, "h1"), sb);      /* "-1", one input: its stream */
    int64_t sh2 = stream_of(&t, "h2");             /* "-1", two inputs: a group stream */
    CU_ASSERT(sh2 >= 0 && sh2 != sa && sh2 != sb && sh2 != se);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 4);
    CU_ASSERT_EQUAL(list_len(&t, "b", "_recv_event_ids"), 1); /* a -> b crosses streams */
    tg_free(&t);
}

/* GE AllReduceParallelPass (ge.hcomParallel=1): the successors of an
 * all-reduce with fusion > 0 move to a new stream; without the option ST21's
 * serial placement stands. */
static void test_all_reduce_parallel(void)
{
    for (int on = 0; on < 2; on++) {
        tg t;
        tg_init(&t);
        build_st21(&t, 1);
        if (on)
            kiln_ctx_set_option(t.ctx, "ge.hcomParallel", "1");
        CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
        CU_ASSERT_EQUAL(stream_of(&t, "relu1"), 0);
        if (!on) {
            CU_ASSERT_EQUAL(stream_of(&t, "allreduce"), 0);
            CU_ASSERT_EQUAL(stream_of(&t, "relu2"), 0);
            CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 1);
        } else {
            int64_t s2 = stream_of(&t, "relu2");
            CU_ASSERT_NOT_EQUAL(s2, 0);
            CU_ASSERT_EQUAL(stream_of(&t, "relu3"), s2);
            CU_ASSERT_NOT_EQUAL(stream_of(&t, "allreduce"), s2);
            CU_ASSERT(root_int(&t, "_kiln_stream_num") >= 2);
        }
        tg_free(&t);
    }
}

/* ST23: stream0 [N0], stream1 [N1, N2]; N0 -> N1 and N0 -> N2: the first event is kept. */
static void test_st23_optimize_by_send_events(void)
{
    const char *opts[] = {"reduce_events=false;reuse_events=false", NULL};
    for (int k = 0; k < 2; k++) {
        tg t;
        tg_init(&t);
        uint32_t a = tg_part(&t, "engine1", "a"), b = tg_part(&t, "engine1", "b");
        kiln_node_id n0 = tg_node(&t, "N0", "Relu", 0, 2, a);
        kiln_node_id n1 = tg_node(&t, "N1", "Relu", 1, 1, b);
        kiln_node_id n2 = tg_node(&t, "N2", "Relu", 1, 1, b);
        edge(&t, n0, 0, n1);
        edge(&t, n0, 1, n2);
        CU_ASSERT_EQUAL(tg_run(&t, opts[k]), KILN_OK);
        CU_ASSERT_EQUAL(stream_of(&t, "N0"), 0);
        CU_ASSERT_EQUAL(stream_of(&t, "N1"), 1);
        CU_ASSERT_EQUAL(stream_of(&t, "N2"), 1);
        CU_ASSERT_EQUAL(list_len(&t, "N0", "_send_event_ids"), 1);
        CU_ASSERT_EQUAL(list_len(&t, "N1", "_recv_event_ids"), 1);
        CU_ASSERT_EQUAL(list_len(&t, "N2", "_recv_event_ids"), 0);
        CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 1);
        tg_free(&t);
    }
}

/* ST24: stream0 [N0, N1], stream1 [N2]; N0 -> N2 and N1 -> N2: the later is kept. */
static void test_st24_optimize_by_recv_events(void)
{
    tg t;
    tg_init(&t);
    uint32_t a = tg_part(&t, "engine1", "a"), b = tg_part(&t, "engine1", "b");
    kiln_node_id n0 = tg_node(&t, "N0", "Relu", 0, 1, a);
    kiln_node_id n1 = tg_node(&t, "N1", "Relu", 0, 1, a);
    kiln_node_id n2 = tg_node(&t, "N2", "Add", 2, 1, b);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, n0, 0, n2, 0), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(t.g, n1, 0, n2, 1), KILN_OK);
    CU_ASSERT_EQUAL(tg_run(&t, "reduce_events=false;reuse_events=false"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "N0"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "N1"), 0);
    CU_ASSERT_EQUAL(list_len(&t, "N2", "_recv_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "N0", "_send_event_ids"), 0);
    CU_ASSERT_EQUAL(list_len(&t, "N1", "_send_event_ids"), 1);
    tg_free(&t);
}

/* ST26: 345 nodes of 3 tasks on one stream, max_task 1024: split at node 332. */
static void split_chain(tg *t, uint32_t label_from)
{
    uint32_t p = tg_part(t, "engine1", NULL);
    kiln_node_id prev = 0;
    for (uint32_t i = 0; i < 345; i++) {
        char name[16];
        snprintf(name, sizeof(name), "A%u", i);
        kiln_node_id v = tg_node(t, name, "Relu", 1, 1, p);
        kiln_attrs_set_int(kiln_node_attrs_mut(t->g, v), "_kiln_task_num", 3);
        if (i >= label_from)
            kiln_attrs_set_string(kiln_node_attrs_mut(t->g, v), "_continuous_stream_label",
                                  "label0");
        if (prev)
            edge(t, prev, 0, v);
        prev = v;
    }
}

static void test_st26_split_streams_continuous_label(void)
{
    tg t;
    tg_init(&t);
    split_chain(&t, 336);
    CU_ASSERT_EQUAL(tg_run(&t, "max_task=1024"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "A0"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "A331"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "A332"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "A344"), 1);
    CU_ASSERT_EQUAL(iattr(t.g, "A344", "_logic_stream_id"), 0);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 2);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "A331", "_send_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "A332", "_recv_event_ids"), 1);
    tg_free(&t);
    /* the labelled run 328.. straddles the split point: it moves whole */
    tg_init(&t);
    split_chain(&t, 328);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "A327"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "A328"), 1);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 2);
    tg_free(&t);
    /* single-stream mode: GE's huge stream of 8192 tasks holds all 345 */
    tg_init(&t);
    split_chain(&t, 336);
    kiln_ctx_set_option(t.ctx, "ge.enableSingleStream", "true");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 1);
    tg_free(&t);
    /* a small budget: many parts, each joined to the next */
    tg_init(&t);
    split_chain(&t, 1000);
    CU_ASSERT_EQUAL(tg_run(&t, "max_task=57"), KILN_OK); /* 10 nodes per part */
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 35);
    CU_ASSERT_EQUAL(stream_of(&t, "A9"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "A10"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "A344"), 34);
    CU_ASSERT_EQUAL(iattr(t.g, "A344", "_logic_stream_id"), 0);
    /* 34 events, each wait before the next record: one id serves them all */
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 1);
    tg_free(&t);
}

/* ---- kiln additions ------------------------------------------------------------ */

/*
 * Alternating labelled streams: 9 events, 2 ids.  Two consecutive events are
 * incomparable (the receiver of one is the sender of the next), so 2 is the
 * minimum, though at most 1 event is outstanding at any step.
 */
static void test_event_reuse_alternating(void)
{
    tg t;
    tg_init(&t);
    const char *e[10], *l[10];
    for (int i = 0; i < 10; i++) {
        e[i] = i % 2 ? "engine2" : "engine1";
        l[i] = i % 2 ? "b" : "a";
    }
    chain(&t, 10, e, l);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 2);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 2);
    const kiln_schedule *s = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(t.g, &s, &t.err), KILN_OK);
    uint32_t n = 0;
    kiln_schedule_events(s, &n);
    CU_ASSERT_EQUAL(n, 9);
    CU_ASSERT_EQUAL(kiln_schedule_check(t.g, s, &t.err), KILN_OK);
    tg_free(&t);
    /* without reuse: one id per event */
    tg_init(&t);
    chain(&t, 10, e, l);
    CU_ASSERT_EQUAL(tg_run(&t, "reuse_events=false"), KILN_OK);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_event_num"), 9);
    tg_free(&t);
}

/* A graph without partitions: one subgraph per node, engines from _kiln_engine. */
static void test_no_partitions(void)
{
    tg t;
    tg_init(&t);
    kiln_node_id d = kiln_graph_add_node(t.g, "d", "Data", 0, 1);
    kiln_node_id a = kiln_graph_add_node(t.g, "a", "Relu", 1, 2);
    kiln_node_id b = kiln_graph_add_node(t.g, "b", "Relu", 1, 1);
    kiln_node_id c = kiln_graph_add_node(t.g, "c", "Relu", 1, 1);
    kiln_node_id j = kiln_graph_add_node(t.g, "j", "Add", 2, 1);
    kiln_node_id o = kiln_graph_add_node(t.g, "out", "NetOutput", 1, 0);
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, b), "_kiln_engine", "vec");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, a), "_kiln_engine", "cube");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, c), "_kiln_engine", "cube");
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, j), "_kiln_engine", "cube");
    kiln_edge_add(t.g, d, 0, a, 0);
    kiln_edge_add(t.g, a, 0, b, 0);
    kiln_edge_add(t.g, a, 1, c, 0);
    kiln_edge_add(t.g, b, 0, j, 0);
    kiln_edge_add(t.g, c, 0, j, 1);
    kiln_edge_add(t.g, j, 0, o, 0);
    CU_ASSERT_EQUAL(tg_run(&t, "max_parallel=cube:4"), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "d"), -1);
    CU_ASSERT_EQUAL(stream_of(&t, "out"), -1);
    /* c reuses a's stream (a's other successor is of another engine), j reuses c's */
    CU_ASSERT_NOT_EQUAL(stream_of(&t, "b"), stream_of(&t, "a"));
    CU_ASSERT_EQUAL(stream_of(&t, "c"), stream_of(&t, "a"));
    CU_ASSERT_EQUAL(stream_of(&t, "j"), stream_of(&t, "a"));
    CU_ASSERT_EQUAL(list_len(&t, "a", "_send_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "b", "_recv_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "b", "_send_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "j", "_recv_event_ids"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "c", "_recv_event_ids"), 0);
    tg_free(&t);
}

/* A node inserted after partitioning (no _kiln_partition) still runs on a stream. */
static void test_unpartitioned_node(void)
{
    tg t;
    tg_init(&t);
    kiln_node_id d = data(&t), g1 = lsu(&t, "g1", "engine1", NULL, 1);
    kiln_node_id g2 = lsu(&t, "g2", "engine2", NULL, 1);
    kiln_node_id copy = kiln_graph_add_node(t.g, "copy", "Identity", 1, 1);
    kiln_attrs_set_string(kiln_node_attrs_mut(t.g, copy), "_kiln_engine", "engine2");
    edge(&t, d, 0, g1);
    edge(&t, g1, 0, copy);
    edge(&t, copy, 0, g2);
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_OK);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "copy"), 1);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 1);
    CU_ASSERT_EQUAL(list_len(&t, "copy", "_recv_event_ids"), 1);
    tg_free(&t);
}

static uint32_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* A random DAG of @p n nodes; one partition per node or per run of nodes. */
static void random_graph(tg *t, uint64_t seed, uint32_t n)
{
    static const char *eng[] = {"aicore", "vector", "hostcpu", "ge_local"};
    static const char *lab[] = {"", "", "", "", "", "l1", "l2"};
    uint64_t s = seed;
    kiln_node_id ids[256];
    uint32_t part = 0;
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%u", i);
        uint32_t e = rnd(&s) % 4;
        if (i < 3) {
            ids[i] = tg_node(t, name, i == 0 ? "Data" : "Const", 0, 4, 0);
            continue;
        }
        if (part == 0 || rnd(&s) % 3 == 0)
            part = tg_part(t, eng[e], lab[rnd(&s) % 7]);
        const char *op = strcmp(t->engines[part], "ge_local") == 0 && rnd(&s) % 2 ? "NoOp" : "Op";
        ids[i] = tg_node(t, name, op, 3, 4, part);
        uint32_t nin = 1 + rnd(&s) % 3;
        for (uint32_t k = 0; k < nin; k++) {
            uint32_t src = i - 1 - rnd(&s) % (i < 8 ? i : 8);
            if (k == 0)
                src = i - 1; /* keep the partition's nodes in a chain */
            kiln_edge_add(t->g, ids[src], rnd(&s) % 4, ids[i], k);
        }
        if (rnd(&s) % 4 == 0) {
            uint32_t src = rnd(&s) % i;
            kiln_ctrl_add(t->g, ids[src], ids[i]);
        }
    }
}

static void test_random_graphs_schedule_check(void)
{
    static const char *opts[] = {
        NULL,
        "reduce_events=false;reuse_events=false;ge_event_opt=false",
        "ge_event_opt=false",
        "max_parallel=aicore:3,vector:2,hostcpu:2;max_task=40",
        "independent=hostcpu;max_parallel=aicore:8;reuse_events=false",
    };
    int64_t events = 0, streams = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        for (uint32_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
            tg t;
            tg_init(&t);
            random_graph(&t, seed, 20 + (uint32_t)(seed * 5 % 150));
            if (seed % 7 == 0)
                kiln_ctx_set_option(t.ctx, "kiln.max_streams", "2");
            kiln_status st = tg_run(&t, opts[k]);
            if (st != KILN_OK)
                fprintf(stderr, "seed %llu opts %s: %s\n", (unsigned long long)seed,
                        opts[k] ? opts[k] : "", kiln_error_message(&t.err));
            CU_ASSERT_EQUAL(st, KILN_OK);
            /* the pass checked its schedule; check it again from outside */
            const kiln_schedule *s = NULL;
            CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(t.g, &s, &t.err), KILN_OK);
            CU_ASSERT_EQUAL(kiln_schedule_check(t.g, s, &t.err), KILN_OK);
            CU_ASSERT_EQUAL(kiln_schedule_stream_count(s), (uint32_t)root_int(&t, "_kiln_stream_num"));
            uint32_t ne = 0;
            kiln_schedule_events(s, &ne);
            events += ne;
            streams += kiln_schedule_stream_count(s);
            /* split parts come on top of the cap (docs/streams.md) */
            if (seed % 7 == 0 && !strstr(opts[k] ? opts[k] : "", "max_task"))
                CU_ASSERT(root_int(&t, "_kiln_stream_num") <= 2);
            tg_free(&t);
        }
    /* the graphs do exercise several streams and many events */
    CU_ASSERT(streams > 3 * 200);
    CU_ASSERT(events > 10 * 200);
    if (getenv("KILN_TEST_VERBOSE"))
        fprintf(stderr, "random graphs: %lld streams, %lld events\n", (long long)streams,
                (long long)events);
}

/* The exact event removal never keeps more events than GE's rules alone. */
static void test_reduce_events_never_worse(void)
{
    for (uint64_t seed = 100; seed < 130; seed++) {
        int64_t n[2];
        for (int k = 0; k < 2; k++) {
            tg t;
            tg_init(&t);
            random_graph(&t, seed, 120);
            CU_ASSERT_EQUAL(tg_run(&t, k ? "reuse_events=false;max_parallel=aicore:4,vector:4"
                                         : "reuse_events=false;reduce_events=false;"
                                           "max_parallel=aicore:4,vector:4"),
                            KILN_OK);
            n[k] = root_int(&t, "_kiln_event_num");
            tg_free(&t);
        }
        CU_ASSERT(n[1] <= n[0]);
    }
}

static void test_max_streams(void)
{
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1", "engine1", "engine1"};
    fan_out(&t, 3, "engine1", e);
    kiln_ctx_set_option(t.ctx, "kiln.max_streams", "2");
    CU_ASSERT_EQUAL(tg_run(&t, "max_parallel=engine1:100"), KILN_OK);
    CU_ASSERT_EQUAL(root_int(&t, "_kiln_stream_num"), 2);
    CU_ASSERT_EQUAL(stream_of(&t, "g1"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g2"), 1);
    /* g3 and g4 share an edge with stream 0 (g1), none with stream 1 */
    CU_ASSERT_EQUAL(stream_of(&t, "g3"), 0);
    CU_ASSERT_EQUAL(stream_of(&t, "g4"), 0);
    CU_ASSERT_EQUAL(list_len(&t, "g1", "_send_event_ids"), 1);
    tg_free(&t);
    tg_init(&t);
    fan_out(&t, 3, "engine1", e);
    kiln_ctx_set_option(t.ctx, "kiln.max_streams", "zero");
    CU_ASSERT_EQUAL(tg_run(&t, NULL), KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "kiln.max_streams"));
    tg_free(&t);
}

static void test_bad_options(void)
{
    const char *bad[] = {"max_parallel=engine1", "max_parallel=engine1:0", "max_parallel=:3",
                         "max_parallel=a:1,b:x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tg t;
        tg_init(&t);
        const char *e[] = {"engine1"};
        chain(&t, 1, e, NULL);
        CU_ASSERT_NOT_EQUAL(tg_run(&t, bad[i]), KILN_OK);
        CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "max_parallel"));
        tg_free(&t);
    }
    tg t;
    tg_init(&t);
    const char *e[] = {"engine1"};
    chain(&t, 1, e, NULL);
    CU_ASSERT_NOT_EQUAL(tg_run(&t, "max_task=10"), KILN_OK); /* below the 27 reserved */
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&t.err), "27 reserved"));
    tg_free(&t);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"ST1 single subgraph", test_st1_single_subgraph},
        {"ST2 single stream", test_st2_single_stream},
        {"ST3 single stream vs auto multi-stream (E10056)", test_st3_single_stream_conflicts},
        {"single stream: graph attribute, stream label (E10055)", test_single_stream_errors},
        {"ST5 same engine", test_st5_same_engine},
        {"ST6 VectorEngine sorts before aicore", test_st6_vector_engine},
        {"ST7 different engines", test_st7_diff_engine},
        {"ST8 engine attach", test_st8_engine_attach},
        {"ST10 stream label", test_st10_stream_label},
        {"ST11 labelled subgraph not reusable", test_st11_label_not_reusable},
        {"ST13 multi-out new streams", test_st13_multi_out_new_stream},
        {"ST14 max_parallel 1", test_st14_parallel_one},
        {"ST16 independent engine with labels", test_st16_independent_switch_label},
        {"ST20 skipped engine reassigned", test_st20_reassign_stream},
        {"ST21 ineffective stream merged", test_st21_aicore_hccl_serial},
        {"UpdateForParallelGroup", test_parallel_group},
        {"AllReduceParallel (ge.hcomParallel)", test_all_reduce_parallel},
        {"ST23 OptimizeBySendEvents", test_st23_optimize_by_send_events},
        {"ST24 OptimizeByRecvEvents", test_st24_optimize_by_recv_events},
        {"ST26 SplitStreams with continuous label", test_st26_split_streams_continuous_label},
        {"event reuse on an alternating chain", test_event_reuse_alternating},
        {"graph without partitions", test_no_partitions},
        {"node added after partitioning", test_unpartitioned_node},
        {"random graphs pass kiln_schedule_check", test_random_graphs_schedule_check},
        {"exact event removal never keeps more", test_reduce_events_never_worse},
        {"max streams", test_max_streams},
        {"bad options", test_bad_options},
        {NULL, NULL}};
    return kiln_test_run("streams", cases);
}
