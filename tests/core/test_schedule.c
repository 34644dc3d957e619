/*
 * test_schedule.c - the build schedule analysis (kiln_schedule_*) and the
 * kernel's memory-plan functions (kiln_mem_problem_load, kiln_mem_plan_check,
 * kiln_mem_plan_run with a planner component).
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"
#include "kiln/kiln_embed.h"

static kiln_node_id add(kiln_graph *g, const char *name, uint32_t nin, int stream)
{
    kiln_node_id n = kiln_graph_add_node(g, name, "Relu", nin, 1);
    if (stream >= 0)
        kiln_attrs_set_int(kiln_node_attrs_mut(g, n), "_kiln_stream_id", stream);
    return n;
}

static void set_events(kiln_graph *g, kiln_node_id n, const char *key, int64_t id)
{
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, n), key, &id, 1);
}

/*
 * data -> a:0 -> b:0 -> d:0
 *         a:0 -> c:1 -> d:0     (event 0: a -> c, event 1: c -> d)
 */
static kiln_graph *two_streams(kiln_ctx *ctx, kiln_node_id id[5], bool events)
{
    kiln_graph *g = kiln_graph_create(ctx, "two");
    id[0] = kiln_graph_add_node(g, "data", "Data", 0, 1);
    id[1] = add(g, "a", 1, 0);
    id[2] = add(g, "b", 1, 0);
    id[3] = add(g, "c", 1, 1);
    id[4] = add(g, "d", 2, 0);
    kiln_edge_add(g, id[0], 0, id[1], 0);
    kiln_edge_add(g, id[1], 0, id[2], 0);
    kiln_edge_add(g, id[1], 0, id[3], 0);
    kiln_edge_add(g, id[2], 0, id[4], 0);
    kiln_edge_add(g, id[3], 0, id[4], 1);
    if (events) {
        set_events(g, id[1], "_send_event_ids", 0);
        set_events(g, id[3], "_recv_event_ids", 0);
        set_events(g, id[3], "_send_event_ids", 1);
        set_events(g, id[4], "_recv_event_ids", 1);
    }
    return g;
}

static void test_schedule_streams(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_node_id n[5];
    kiln_graph *g = two_streams(ctx, n, true);
    const kiln_schedule *s = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_step_count(s), 5);
    CU_ASSERT_EQUAL(kiln_schedule_stream_count(s), 2);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[0]), -1);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[3]), 1);
    uint32_t cnt = 0;
    const uint32_t *st0 = kiln_schedule_stream_steps(s, 0, &cnt);
    CU_ASSERT_EQUAL(cnt, 3);
    CU_ASSERT_EQUAL(kiln_schedule_node(s, st0[0]), n[1]);
    CU_ASSERT_EQUAL(kiln_schedule_node(s, st0[2]), n[4]);
    const kiln_sched_event *ev = kiln_schedule_events(s, &cnt);
    CU_ASSERT_EQUAL_FATAL(cnt, 2);
    CU_ASSERT(ev[0].id == 0 && ev[0].sender == n[1] && ev[0].receiver == n[3]);
    CU_ASSERT(ev[1].id == 1 && ev[1].sender == n[3] && ev[1].receiver == n[4]);
    /* happens-before: stream order, event chains, not the global order alone */
    CU_ASSERT(kiln_schedule_happens_before(s, n[1], n[2]));
    CU_ASSERT(kiln_schedule_happens_before(s, n[1], n[3]));
    CU_ASSERT(kiln_schedule_happens_before(s, n[3], n[4]));
    CU_ASSERT(kiln_schedule_happens_before(s, n[0], n[3])); /* stream-less source */
    CU_ASSERT_FALSE(kiln_schedule_happens_before(s, n[2], n[3])); /* b and c run concurrently */
    CU_ASSERT_FALSE(kiln_schedule_happens_before(s, n[3], n[2]));
    CU_ASSERT_FALSE(kiln_schedule_happens_before(s, n[4], n[1]));
    CU_ASSERT_FALSE(kiln_schedule_happens_before(s, n[1], n[1]));
    CU_ASSERT_EQUAL(kiln_schedule_check(g, s, &err), KILN_OK);
    /* latest step of stream 0 before c: a */
    CU_ASSERT_EQUAL(kiln_schedule_latest_before(s, kiln_schedule_step(s, n[3]), 0),
                    kiln_schedule_step(s, n[1]));
    CU_ASSERT_EQUAL(kiln_schedule_latest_before(s, kiln_schedule_step(s, n[1]), 1), UINT32_MAX);
    /* b's buffer: last read by d (stream 0); release at d's step.  A buffer read
     * last by b (stream 0) is not released before c ends: c may run after b
     * in the global order but is not ordered after b. */
    kiln_node_id use_b = n[2];
    uint32_t rb = kiln_schedule_release_step(s, &use_b, 1);
    CU_ASSERT(rb >= kiln_schedule_step(s, n[3]));
    CU_ASSERT(rb < kiln_schedule_step(s, n[4]));
    kiln_node_id use_d = n[4];
    CU_ASSERT_EQUAL(kiln_schedule_release_step(s, &use_d, 1), kiln_schedule_step(s, n[4]));
    /* cached until an edit; an attribute edit rebuilds */
    const kiln_schedule *s2 = NULL;
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s2, &err), KILN_OK);
    CU_ASSERT_PTR_EQUAL(s, s2);
    /* edits of attributes the schedule does not read keep it (offsets, tasks) */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[2]), "_kiln_task_kind", 1);
    kiln_desc_set_offset(g, kiln_node_output_desc(g, n[2], 0), 512);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s2, &err), KILN_OK);
    CU_ASSERT_PTR_EQUAL(s, s2);
    /* a stream edit rebuilds, through a key in a buffer too */
    char key[32];
    snprintf(key, sizeof key, "_kiln_%s_id", "stream");
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[2]), key, 1);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s2, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s2, n[2]), 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[2]), key, 0);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[2]), 0);
    kiln_attrs_remove(kiln_node_attrs_mut(g, n[4]), "_recv_event_ids");
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_FALSE(kiln_schedule_happens_before(s, n[3], n[4]));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_schedule_check(g, s, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "c:0 -> d:1"));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_schedule_sequential_and_errors(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_node_id n[5];
    kiln_graph *g = two_streams(ctx, n, false);
    for (int i = 1; i < 5; i++)
        kiln_attrs_remove(kiln_node_attrs_mut(g, n[i]), "_kiln_stream_id");
    const kiln_schedule *s = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    /* no streams anywhere: one sequential stream */
    CU_ASSERT_EQUAL(kiln_schedule_stream_count(s), 1);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[0]), 0);
    CU_ASSERT(kiln_schedule_happens_before(s, n[2], n[3]) ||
              kiln_schedule_happens_before(s, n[3], n[2]));
    CU_ASSERT_EQUAL(kiln_schedule_check(g, s, &err), KILN_OK);
    /* an explicit order that contradicts an edge */
    int64_t ids[5] = {0, 1, 4, 3, 2};
    for (int i = 0; i < 5; i++)
        kiln_attrs_set_int(kiln_node_attrs_mut(g, n[i]), "_kiln_id", ids[i]);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "comes after its consumer"));
    /* a valid explicit order is followed */
    int64_t ids2[5] = {0, 1, 3, 2, 4};
    for (int i = 0; i < 5; i++)
        kiln_attrs_set_int(kiln_node_attrs_mut(g, n[i]), "_kiln_id", ids2[i]);
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_node(s, 2), n[3]);
    /* a wait with no earlier record */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[1]), "_kiln_stream_id", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[3]), "_kiln_stream_id", 1);
    set_events(g, n[3], "_recv_event_ids", 7);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "event 7"));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* The keys the schedule reads in one scan per node (schedule.c gather):
 * a key of another type is absent, an out-of-range stream is reported with
 * its value, event lists are found on the nodes that carry them. */
static void test_schedule_key_types(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_node_id n[5];
    kiln_graph *g = two_streams(ctx, n, true);
    const kiln_schedule *s = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    uint32_t nev = 0;
    kiln_schedule_events(s, &nev);
    CU_ASSERT_EQUAL(nev, 2);
    /* a string stream id is no stream; a string order key is no order key */
    kiln_attrs_set_string(kiln_node_attrs_mut(g, n[2]), "_kiln_stream_id", "0");
    for (int i = 0; i < 5; i++)
        kiln_attrs_set_int(kiln_node_attrs_mut(g, n[i]), "_kiln_id", 10 - i);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, n[0]), "_kiln_id", "x");
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[2]), -1);
    CU_ASSERT_EQUAL(kiln_schedule_stream(s, n[3]), 1);
    CU_ASSERT_EQUAL(kiln_schedule_node(s, 0), n[0]); /* topological, not by the ids */
    /* out of range */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n[4]), "_kiln_stream_id", (int64_t)INT32_MAX + 5);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_schedule_get(g, &s, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "2147483652 out of range"));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* An event id reused: a record again before the previous wait is caught. */
static void test_schedule_event_reuse(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_graph *g = kiln_graph_create(ctx, "reuse");
    /* s0: a, b   s1: x, y;  a -> x (event 0), b -> y (event 0 again) */
    kiln_node_id a = add(g, "a", 0, 0), b = add(g, "b", 0, 0);
    kiln_node_id x = add(g, "x", 1, 1), y = add(g, "y", 1, 1);
    kiln_edge_add(g, a, 0, x, 0);
    kiln_edge_add(g, b, 0, y, 0);
    set_events(g, a, "_send_event_ids", 0);
    set_events(g, x, "_recv_event_ids", 0);
    set_events(g, b, "_send_event_ids", 0);
    set_events(g, y, "_recv_event_ids", 0);
    int64_t order[4] = {0, 2, 1, 3}; /* a, x, b, y */
    kiln_node_id nodes[4] = {a, b, x, y};
    for (int i = 0; i < 4; i++)
        kiln_attrs_set_int(kiln_node_attrs_mut(g, nodes[i]), "_kiln_id", order[i]);
    const kiln_schedule *s = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    uint32_t cnt = 0;
    const kiln_sched_event *ev = kiln_schedule_events(s, &cnt);
    CU_ASSERT_EQUAL_FATAL(cnt, 2);
    CU_ASSERT(ev[0].sender == a && ev[0].receiver == x);
    CU_ASSERT(ev[1].sender == b && ev[1].receiver == y);
    /* b may record again while x has not yet waited: invalid reuse */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_schedule_check(g, s, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "recorded again"));
    /* order b after x (x records event 1, b waits): now valid */
    set_events(g, x, "_send_event_ids", 1);
    set_events(g, b, "_recv_event_ids", 1);
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(g, &s, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_schedule_check(g, s, &err), KILN_OK);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* ---- memory plans ------------------------------------------------------------ */

static kiln_status bump_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    (void)err;
    int64_t off = 0, top = 0;
    for (uint32_t i = 0; i < p->block_count; i++) {
        kiln_mem_block *b = &p->blocks[i];
        if (b->flags & KILN_MEM_BLOCK_FIXED) {
            top = b->offset + b->size > top ? b->offset + b->size : top;
            continue;
        }
        uint32_t a = b->alignment ? b->alignment : p->alignment;
        off = (off + a - 1) / a * a;
        b->offset = off;
        off += b->size;
    }
    *peak = off > top ? off : top;
    return KILN_OK;
}

/* Wrong on purpose: everything at offset 0. */
static kiln_status zero_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    (void)err;
    int64_t mx = 0;
    for (uint32_t i = 0; i < p->block_count; i++) {
        if (p->blocks[i].flags & KILN_MEM_BLOCK_FIXED)
            continue;
        p->blocks[i].offset = 0;
        if (p->blocks[i].size > mx)
            mx = p->blocks[i].size;
    }
    *peak = 8192 > mx ? 8192 : mx;
    return KILN_OK;
}

static kiln_status planners_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_mem_planner_desc bump = {.struct_size = sizeof(kiln_mem_planner_desc),
                                               .name = "bump", .plan = bump_plan};
    static const kiln_mem_planner_desc zero = {.struct_size = sizeof(kiln_mem_planner_desc),
                                               .name = "zero", .plan = zero_plan};
    kiln_status st = kiln_register_mem_planner(r, &bump);
    return st ? st : kiln_register_mem_planner(r, &zero);
}

static void test_mem_plan(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc pd = {sizeof(pd), KILN_ABI_MAJOR, KILN_ABI_MINOR, "planners", "1", "MIT",
                           "t", "t", planners_init, NULL, {0}};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &pd, NULL, &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_mem_block b[4] = {
        {.size = 100, .first_use = 0, .last_use = 2, .id = 0},
        {.size = 600, .first_use = 1, .last_use = 3, .id = 1},
        {.size = 50, .first_use = 3, .last_use = 4, .id = 2},
        {.size = 512, .first_use = 0, .last_use = 4, .id = 3, .flags = KILN_MEM_BLOCK_FIXED,
         .offset = 4096},
    };
    kiln_mem_problem p = {.struct_size = sizeof(p), .block_count = 4, .blocks = b,
                          .alignment = 512, .step_count = 5, .memory_type = "HBM"};
    /* LOAD: steps 1..2 hold 512 + 1024 + 512 */
    CU_ASSERT_EQUAL(kiln_mem_problem_load(&p), 2048);
    int64_t peak = 0;
    CU_ASSERT_EQUAL(kiln_mem_plan_run(g, "bump", NULL, &p, &peak, &err), KILN_OK);
    CU_ASSERT_EQUAL(b[3].offset, 4096);
    CU_ASSERT_EQUAL(b[1].offset, 512);
    CU_ASSERT_EQUAL(peak, 4608);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&p, peak, &err), KILN_OK);
    /* a plan that overlaps live blocks is refused, naming the blocks and the planner */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_run(g, "zero", NULL, &p, &peak, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "overlap"));
    char full[512];
    kiln_error_format(&err, full, sizeof(full));
    CU_ASSERT_PTR_NOT_NULL(strstr(full, "memory planner zero"));
    /* overlapping in memory but not in time is fine */
    kiln_mem_block c[2] = {{.size = 10, .first_use = 0, .last_use = 1, .id = 0},
                           {.size = 10, .first_use = 2, .last_use = 3, .id = 1}};
    kiln_mem_problem q = {.struct_size = sizeof(q), .block_count = 2, .blocks = c,
                          .alignment = 1};
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&q, 10, &err), KILN_OK);
    c[1].first_use = 1; /* now they meet at step 1 */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&q, 10, &err), KILN_ERR_INVALID);
    c[1].first_use = 2;
    c[1].offset = 3; /* misaligned for 4 */
    c[1].alignment = 4;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&q, 13, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "alignment"));
    c[1].alignment = 0;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&q, 12, &err), KILN_ERR_INVALID); /* ends past size */
    q.capacity = 12;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&q, 13, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "capacity"));
    /* a planner nobody provides */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_mem_plan_run(g, "nosuch", NULL, &p, &peak, &err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "nosuch"));
    /* the session option names the default */
    kiln_ctx_set_option(ctx, "kiln.memory_planner", "bump");
    CU_ASSERT_EQUAL(kiln_mem_plan_run(g, NULL, NULL, &p, &peak, &err), KILN_OK);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_schedule_streams", test_schedule_streams},
        {"test_schedule_sequential_and_errors", test_schedule_sequential_and_errors},
        {"test_schedule_event_reuse", test_schedule_event_reuse},
        {"test_schedule_key_types", test_schedule_key_types},
        {"test_mem_plan", test_mem_plan},
        {NULL, NULL},
    };
    return kiln_test_run("schedule", cases);
}
