/*
 * test_mem_assign.c - MemoryAssigner (libkiln_mem_assign.so) and the plan
 * checker (kiln_memory_plan_verify), docs/memory_planning.md "MemoryAssigner".
 *
 * The pass runs with the test planner TestFirstFit (tests/plugins/tp_planner.c,
 * never shipped).  The MA scenarios of GE_SEMANTICS_BUILD.md 4.2 that are
 * about the assigner's semantics are ported as relations: Reuse(a, b) = the
 * two outputs' ranges overlap (they share memory), Disjoint(a, b) = they do
 * not; GE's exact totals belong to GE's planners.  Then: continuous groups
 * (padded, no padding, nested), the ref variable, zero copy, dynamic sizes,
 * workspaces (tp_engine), fixed addresses, every checker rule on corrupted
 * plans, planner errors, and random graphs (symbols, continuous groups,
 * several streams with events) checked by the checker and by an independent
 * O(n^2) happens-before check in this file.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "passmgr.h"
#include "plugin.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fx {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_passmgr *pm;
    kiln_pass_inst pi;
    kiln_error err;
} fx;

static void load_test_plugin(kiln_ctx *ctx, const char *file, kiln_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"),
             file);
    kiln_status st = kiln_plugin_load(ctx, path, NULL, err);
    if (st != KILN_OK)
        fprintf(stderr, "\nload %s: %s\n", path, kiln_error_message(err));
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
}

static void fx_init(fx *f, const char *planner)
{
    memset(f, 0, sizeof(*f));
    f->ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->ctx);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, "libkiln_mem_assign.so", &f->err),
                          KILN_OK);
    load_test_plugin(f->ctx, "libtp_planner.so", &f->err);
    load_test_plugin(f->ctx, "libtp_engine.so", &f->err);
    if (planner)
        CU_ASSERT_EQUAL_FATAL(kiln_ctx_set_option(f->ctx, "kiln.memory_planner", planner),
                              KILN_OK);
    f->g = kiln_graph_create(f->ctx, "ma");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->g);
}

static void fx_fini(fx *f)
{
    if (f->pm)
        kiln__passmgr_destroy(f->pm);
    if (f->pi.options)
        kiln__options_destroy(f->pi.options);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

/* Run MemoryAssigner once; @p key / @p value: one pass option, or NULL. */
static kiln_status run_ma(fx *f, const char *key, const char *value)
{
    if (f->pm)
        kiln__passmgr_destroy(f->pm);
    f->pm = NULL;
    if (f->pi.options) /* the previous run's pass options */
        kiln__options_destroy(f->pi.options);
    memset(&f->pi, 0, sizeof(f->pi));
    f->pi.comp = kiln_registry_find(f->ctx, KILN_COMP_PASS, "MemoryAssigner");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->pi.comp);
    f->pi.enabled = true;
    if (key) {
        f->pi.options = kiln__options_create(f->pi.comp->d.pass.options,
                                             f->pi.comp->d.pass.option_count);
        CU_ASSERT_EQUAL_FATAL(kiln__options_set_text(f->pi.options, key, value, &f->err),
                              KILN_OK);
    }
    kiln_error_clear(&f->err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(f->ctx, NULL, &f->pm, &f->err), KILN_OK);
    kiln_status st = kiln__passmgr_run_stage(f->pm, "build", &f->pi, 1, f->g, &f->err);
    if (st != KILN_OK && getenv("KILN_TEST_VERBOSE"))
        fprintf(stderr, "\nMemoryAssigner: %s\n", kiln_error_message(&f->err));
    return st;
}

/* Node @p name of op @p op, outputs of @p bytes each (float32 1-D), on @p stream (-1: none). */
static kiln_node_id op(fx *f, const char *name, const char *type, uint32_t nin, uint32_t nout,
                       int64_t bytes, int stream)
{
    kiln_node_id n = kiln_graph_add_node(f->g, name, type, nin, nout);
    CU_ASSERT_FATAL(n != 0);
    int64_t dims[1] = {bytes / 4};
    for (uint32_t o = 0; o < nout; o++)
        kiln_desc_set_shape(f->g, kiln_node_output_desc(f->g, n, o), bytes < 0 ? -1 : 1,
                            bytes < 0 ? NULL : dims);
    if (stream >= 0)
        kiln_attrs_set_int(kiln_node_attrs_mut(f->g, n), "_kiln_stream_id", stream);
    return n;
}

static void edge(fx *f, kiln_node_id a, uint32_t ao, kiln_node_id b, uint32_t bi)
{
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(f->g, a, ao, b, bi), KILN_OK);
}

/* An event from @p a to @p b (and the control edge that orders them). */
static void event(fx *f, kiln_node_id a, kiln_node_id b, int64_t id)
{
    const int64_t *old = NULL;
    uint32_t n = 0;
    int64_t v[16];
    kiln_attrs *aa = kiln_node_attrs_mut(f->g, a);
    kiln_attrs_get_list_int(aa, "_send_event_ids", &old, &n);
    if (n)
        memcpy(v, old, n * sizeof(int64_t));
    v[n] = id;
    kiln_attrs_set_list_int(aa, "_send_event_ids", v, n + 1);
    kiln_attrs *ba = kiln_node_attrs_mut(f->g, b);
    old = NULL;
    n = 0;
    kiln_attrs_get_list_int(ba, "_recv_event_ids", &old, &n);
    if (n)
        memcpy(v, old, n * sizeof(int64_t));
    v[n] = id;
    kiln_attrs_set_list_int(ba, "_recv_event_ids", v, n + 1);
}

static void set_bool(fx *f, kiln_node_id n, const char *key)
{
    kiln_attrs_set_bool(kiln_node_attrs_mut(f->g, n), key, true);
}

static void reuse_input(fx *f, kiln_node_id n, uint32_t o, int64_t k)
{
    kiln_attrs *a = kiln_desc_attrs_mut(f->g, kiln_node_output_desc(f->g, n, o));
    kiln_attrs_set_bool(a, "reuse_input", true);
    kiln_attrs_set_int(a, "reuse_input_index", k);
}

static int64_t off(fx *f, kiln_node_id n, uint32_t o)
{
    return kiln_desc_offset(kiln_node_output_desc(f->g, n, o));
}

static int64_t sz(fx *f, kiln_node_id n, uint32_t o)
{
    return kiln_desc_size(kiln_node_output_desc(f->g, n, o));
}

/* Reuse: the ranges of the two outputs overlap (both planned). */
static bool shares(fx *f, kiln_node_id a, uint32_t ao, kiln_node_id b, uint32_t bo)
{
    int64_t oa = off(f, a, ao), ob = off(f, b, bo);
    CU_ASSERT_FATAL(oa >= 0 && ob >= 0);
    return oa < ob + sz(f, b, bo) && ob < oa + sz(f, a, ao);
}

static int64_t root_int_at(fx *f, const char *key, uint32_t i)
{
    const int64_t *v = NULL;
    uint32_t n = 0;
    if (!kiln_attrs_get_list_int(kiln_graph_attrs(f->g), key, &v, &n) || i >= n)
        return -1;
    return v[i];
}

static kiln_status verify(fx *f)
{
    kiln_error_clear(&f->err);
    return kiln_memory_plan_verify(f->g, &f->err);
}

/* The error's message or one of its frames contains @p s. */
static bool err_has(fx *f, const char *s)
{
    char buf[KILN_ERROR_TEXT_SIZE];
    kiln_error_format(&f->err, buf, sizeof(buf));
    bool ok = strstr(buf, s) != NULL;
    if (!ok)
        fprintf(stderr, "\nexpected '%s' in: %s\n", s, buf);
    return ok;
}

/* ---- single stream ----------------------------------------------------------- */

/* data -> a -> b -> c -> d -> out: a and c may share, neighbours never. */
static void test_chain_reuse(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 2048, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 2048, -1), b = op(&f, "b", "Relu", 1, 1, 2048, -1);
    kiln_node_id c = op(&f, "c", "Relu", 1, 1, 2048, -1), d = op(&f, "d", "Relu", 1, 1, 2048, -1);
    kiln_node_id out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, b, 0, c, 0);
    edge(&f, c, 0, d, 0);
    edge(&f, d, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT(shares(&f, a, 0, c, 0));
    CU_ASSERT_FALSE(shares(&f, a, 0, b, 0));
    CU_ASSERT_FALSE(shares(&f, b, 0, c, 0));
    /* zero copy: the model input and output are the user's memory */
    CU_ASSERT_EQUAL(off(&f, data, 0), -1);
    CU_ASSERT_EQUAL(off(&f, d, 0), -1);
    CU_ASSERT_STRING_EQUAL(kiln_desc_memory_type(f.g, kiln_node_output_desc(f.g, a, 0)), "HBM");
    CU_ASSERT_EQUAL(sz(&f, a, 0), 2048);
    CU_ASSERT_EQUAL(root_int_at(&f, "_kiln_memory_sizes", 0), 4096);
    CU_ASSERT_EQUAL(root_int_at(&f, "_kiln_memory_loads", 0), 4096);
    CU_ASSERT_EQUAL(root_int_at(&f, "_kiln_memory_buffers", 0), 3);
    const char *p = NULL;
    CU_ASSERT(kiln_attrs_get_string(kiln_graph_attrs(f.g), "_kiln_memory_planner", &p));
    CU_ASSERT_STRING_EQUAL(p, "TestFirstFit");
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/* ---- streams (MA1, MA2 relations) ---------------------------------------------- */

/*
 * data -> a:0 -> b:0 -> z:0 -> out;  data -> x:1 -> y:1 -> z (input 1).
 * Without an event x may run while a's value is still read: Disjoint(a, x).
 * With an event b -> x (b's read of a is over before x starts): Reuse(a, x).
 */
static void streams_case(bool with_event)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1024, 0), b = op(&f, "b", "Relu", 1, 1, 1024, 0);
    kiln_node_id x = op(&f, "x", "Relu", 1, 1, 1024, 1), y = op(&f, "y", "Relu", 1, 1, 1024, 1);
    kiln_node_id z = op(&f, "z", "Add", 2, 1, 1024, 0), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, data, 0, x, 0);
    edge(&f, x, 0, y, 0);
    edge(&f, b, 0, z, 0);
    edge(&f, y, 0, z, 1);
    edge(&f, z, 0, out, 0);
    event(&f, y, z, 0);
    if (with_event) {
        kiln_ctrl_add(f.g, b, x);
        event(&f, b, x, 1);
    }
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    if (with_event) {
        CU_ASSERT(shares(&f, a, 0, x, 0));
    } else {
        CU_ASSERT_FALSE(shares(&f, a, 0, x, 0));
    }
    CU_ASSERT_FALSE(shares(&f, b, 0, y, 0)); /* both read by z */
    CU_ASSERT_FALSE(shares(&f, a, 0, b, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

static void test_streams_disjoint_without_event(void) { streams_case(false); }
static void test_streams_reuse_after_event(void) { streams_case(true); }

/*
 * MA1 (graph_diff_stream_memory_reuse): A:1, B:0, C:1, D:1, E:1, F:1, 2048 bytes;
 * D has no-padding continuous inputs (C, B) and output 0 reuses input 0;
 * A->B; A->C; B->D(1); C->D(0); D->E; E->F.  Events for A->B and B->D.
 * Expected Reuse(C.o0, F.o0): F starts after D's block is released.
 * MA2: as MA1 with C->E instead of D->E (D on stream 2): B runs concurrently
 * with F, so Disjoint(B.o0, F.o0).
 */
static void ma_case(bool ma2)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id A = op(&f, "A", "Relu", 0, 1, 2048, 1), B = op(&f, "B", "Relu", 1, 1, 2048, 0);
    kiln_node_id C = op(&f, "C", "Relu", 1, 1, 2048, 1);
    kiln_node_id D = op(&f, "D", "ConcatD", 2, 1, 4096, ma2 ? 2 : 1);
    kiln_node_id E = op(&f, "E", "Relu", 1, 1, 2048, 1), F = op(&f, "F", "Relu", 1, 1, 2048, 1);
    kiln_node_id G = op(&f, "G", "Add", 2, 1, 2048, 1);
    set_bool(&f, D, "_no_padding_continuous_input");
    reuse_input(&f, D, 0, 0);
    edge(&f, A, 0, B, 0);
    edge(&f, A, 0, C, 0);
    edge(&f, B, 0, D, 1);
    edge(&f, C, 0, D, 0);
    event(&f, A, B, 0);
    event(&f, B, D, 1);
    if (ma2) {
        edge(&f, C, 0, E, 0);
        event(&f, C, D, 2);
        /* D's result is read by G, after F */
        edge(&f, D, 0, G, 1);
        event(&f, D, G, 3);
    } else {
        edge(&f, D, 0, E, 0);
        edge(&f, A, 0, G, 1);
    }
    edge(&f, E, 0, F, 0);
    edge(&f, F, 0, G, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    /* the continuous inputs are adjacent and the output is the whole block */
    CU_ASSERT_EQUAL(off(&f, B, 0), off(&f, C, 0) + 2048);
    CU_ASSERT_EQUAL(off(&f, D, 0), off(&f, C, 0));
    if (ma2) {
        CU_ASSERT_FALSE(shares(&f, B, 0, F, 0));
    } else {
        CU_ASSERT(shares(&f, C, 0, F, 0));
    }
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/*
 * MA5 (DiffStreamNoPaddingContinuousInputNotReuse): data(2 outs):0, A(2 outs):0,
 * B:0, C:1, D:0 no-padding continuous input (B, C), output 0 reuses input 0;
 * data->A; A->B; B->D(0); C->D(1).  C may run before A (nothing orders them),
 * so D's block may not take A.o1's memory: Disjoint(A.o1, B.o0), Disjoint(A.o1, C.o0).
 * MA6 (...HasEdgeCanReuse): data is E of type "some" and A->C is ordered
 * (control edge and event): A.o1 (and E.o1) are dead when the block starts
 * and may be reused; first fit puts the block on A.o1, so the pair MA5 keeps
 * apart shares (GE's planner happens to pick E.o1: Reuse(E.o1, B.o0)).
 */
static void ma56_case(bool ma6)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id E = op(&f, ma6 ? "E" : "data", ma6 ? "some" : "Data", 0, 2, 2048, ma6 ? 0 : -1);
    kiln_node_id A = op(&f, "A", "some", 1, 2, 2048, 0), B = op(&f, "B", "some", 1, 1, 2048, 0);
    kiln_node_id C = op(&f, "C", "some", 0, 1, 2048, 1), D = op(&f, "D", "ConcatD", 2, 1, 4096, 0);
    set_bool(&f, D, "_no_padding_continuous_input");
    reuse_input(&f, D, 0, 0);
    edge(&f, E, 0, A, 0);
    edge(&f, A, 0, B, 0);
    edge(&f, B, 0, D, 0);
    edge(&f, C, 0, D, 1);
    event(&f, C, D, 0);
    if (ma6) {
        kiln_ctrl_add(f.g, A, C);
        event(&f, A, C, 1);
    }
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(off(&f, C, 0), off(&f, B, 0) + 2048);
    if (ma6) {
        /* the pair MA5 keeps apart may share once A -> C is ordered */
        CU_ASSERT(shares(&f, A, 1, B, 0));
    } else {
        CU_ASSERT_FALSE(shares(&f, A, 1, B, 0));
        CU_ASSERT_FALSE(shares(&f, A, 1, C, 0));
    }
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

static void test_ma5_nopad_continuous_diff_stream_not_reuse(void) { ma56_case(false); }
static void test_ma6_nopad_continuous_with_edge_reuse(void) { ma56_case(true); }

static void test_ma1_diff_stream_reuse(void) { ma_case(false); }
static void test_ma2_diff_stream_continuous_not_reuse(void) { ma_case(true); }

/* ---- continuous groups ------------------------------------------------------------- */

static void continuous_case(const char *flag, int64_t step1, int64_t step2)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1000, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1000, -1), b = op(&f, "b", "Relu", 1, 1, 3000, -1);
    kiln_node_id c = op(&f, "c", "Relu", 1, 1, 100, -1);
    kiln_node_id cat = op(&f, "cat", "Concat", 3, 1, 4100, -1);
    kiln_node_id r = op(&f, "r", "Relu", 1, 1, 4100, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    set_bool(&f, cat, flag);
    edge(&f, data, 0, a, 0);
    edge(&f, data, 0, b, 0);
    edge(&f, data, 0, c, 0);
    edge(&f, a, 0, cat, 0);
    edge(&f, b, 0, cat, 1);
    edge(&f, c, 0, cat, 2);
    edge(&f, cat, 0, r, 0);
    edge(&f, r, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(off(&f, b, 0), off(&f, a, 0) + step1);
    CU_ASSERT_EQUAL(off(&f, c, 0), off(&f, b, 0) + step2);
    CU_ASSERT_EQUAL(off(&f, a, 0) % 512, 0);
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    /* the checker refuses a group moved apart */
    kiln_desc_set_offset(f.g, kiln_node_output_desc(f.g, c, 0), off(&f, c, 0) + 512);
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[continuous]: cat_in_2"));
    fx_fini(&f);
}

static void test_continuous_input_padded(void) { continuous_case("continuous_input", 1024, 3072); }
static void test_continuous_input_nopad(void)
{
    continuous_case("_no_padding_continuous_input", 1000, 3000);
}

/* MA11: concat1(addn1, addn2) and concat2(concat1, addn3), both no-padding with
 * output 0 reusing input 0: one component, addn2 after addn1, addn3 after concat1. */
static void test_nested_continuous(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a1 = op(&f, "addn1", "AddN", 1, 1, 1024, -1), a2 = op(&f, "addn2", "AddN", 1, 1, 1024, -1);
    kiln_node_id a3 = op(&f, "addn3", "AddN", 1, 1, 512, -1);
    kiln_node_id c1 = op(&f, "concat1", "Concat", 2, 1, 2048, -1);
    kiln_node_id c2 = op(&f, "concat2", "Concat", 2, 1, 2560, -1);
    kiln_node_id r = op(&f, "r", "Relu", 1, 1, 2560, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    kiln_node_id r2 = op(&f, "r2", "Relu", 1, 1, 2560, -1);
    for (int i = 0; i < 2; i++) {
        kiln_node_id c = i ? c2 : c1;
        set_bool(&f, c, "_no_padding_continuous_input");
        reuse_input(&f, c, 0, 0);
    }
    edge(&f, data, 0, a1, 0);
    edge(&f, data, 0, a2, 0);
    edge(&f, data, 0, a3, 0);
    edge(&f, a1, 0, c1, 0);
    edge(&f, a2, 0, c1, 1);
    edge(&f, c1, 0, c2, 0);
    edge(&f, a3, 0, c2, 1);
    edge(&f, c2, 0, r, 0);
    edge(&f, r, 0, r2, 0);
    edge(&f, r2, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(off(&f, a2, 0), off(&f, a1, 0) + 1024);
    CU_ASSERT_EQUAL(off(&f, c1, 0), off(&f, a1, 0));
    CU_ASSERT_EQUAL(off(&f, c2, 0), off(&f, a1, 0));
    CU_ASSERT_EQUAL(off(&f, a3, 0), off(&f, c1, 0) + 2048);
    CU_ASSERT_FALSE(shares(&f, r, 0, a1, 0)); /* r reads concat2 = the whole block */
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/* One symbol asked at two places by two groups is a clear error. */
static void test_continuous_conflict(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 512, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 512, -1), b = op(&f, "b", "Relu", 1, 1, 512, -1);
    kiln_node_id c1 = op(&f, "cat1", "Concat", 2, 1, 1024, -1);
    kiln_node_id c2 = op(&f, "cat2", "Concat", 2, 1, 1024, -1);
    kiln_node_id s = op(&f, "s", "Add", 2, 1, 1024, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    set_bool(&f, c1, "continuous_input");
    set_bool(&f, c2, "continuous_input");
    edge(&f, data, 0, a, 0);
    edge(&f, data, 0, b, 0);
    edge(&f, a, 0, c1, 0);
    edge(&f, b, 0, c1, 1);
    edge(&f, b, 0, c2, 0);
    edge(&f, a, 0, c2, 1);
    edge(&f, c1, 0, s, 0);
    edge(&f, c2, 0, s, 1);
    edge(&f, s, 0, out, 0);
    CU_ASSERT_NOT_EQUAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT(err_has(&f, "continuous group of cat2"));
    fx_fini(&f);
}

/* ---- ref variable, zero copy, dynamic, workspaces, fixed address ----------------- */

/* MA13: B's output refs variable A (ref_var_src_var_name): same offset; a
 * variable lives for the whole run, so nothing else shares its memory. */
static void test_ref_var_same_offset(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id A = op(&f, "A", "Variable", 0, 1, 1024, -1);
    kiln_node_id B = op(&f, "B", "Relu", 1, 1, 1024, -1), C = op(&f, "C", "Relu", 1, 1, 1024, -1);
    kiln_node_id D = op(&f, "D", "Relu", 1, 1, 1024, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    kiln_attrs_set_string(kiln_desc_attrs_mut(f.g, kiln_node_output_desc(f.g, B, 0)),
                          "ref_var_src_var_name", "A");
    edge(&f, A, 0, B, 0);
    edge(&f, B, 0, C, 0);
    edge(&f, C, 0, D, 0);
    edge(&f, D, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT(off(&f, A, 0) >= 0);
    CU_ASSERT_EQUAL(off(&f, B, 0), off(&f, A, 0));
    CU_ASSERT_FALSE(shares(&f, A, 0, C, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    kiln_desc_set_offset(f.g, kiln_node_output_desc(f.g, B, 0), off(&f, A, 0) + 4096);
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[same offset]: B_out_0"));
    CU_ASSERT(err_has(&f, "ref_var_src_var_name"));
    fx_fini(&f);
}

/*
 * MA12 (graph_memory_assign_set_input_offset, ..._check_inner_offset): var and
 * const feed assign; assign's input descriptors carry pre-set offsets {100, 0},
 * `_input_mem_type_list` = {HBM, L1}, output 0 refs input 0.  Input 0 is placed
 * at var + 100 with `_inner_offset` 100, input 1 keeps 0 (on chip, no inner
 * offset), output 0 takes input 0's offset and inner offset; the plan checks,
 * and planning again gives the same offsets.
 */
static int64_t in_off(fx *f, kiln_node_id n, uint32_t i)
{
    return kiln_desc_offset(kiln_node_input_desc(f->g, n, i));
}

static void test_ma12_set_input_offset(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id var = op(&f, "var", "Variable", 0, 1, 10000, -1);
    kiln_node_id cst = op(&f, "const", "Relu", 0, 1, 1000, -1);
    kiln_node_id as = op(&f, "assign", "Assign", 2, 1, 10000, -1);
    kiln_node_id use = op(&f, "use", "Relu", 1, 1, 10000, -1);
    kiln_node_id out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, var, 0, as, 0);
    edge(&f, cst, 0, as, 1);
    edge(&f, as, 0, use, 0); /* not straight to the NetOutput: model outputs are user memory */
    edge(&f, use, 0, out, 0);
    kiln_desc_set_ref_input(f.g, kiln_node_output_desc(f.g, as, 0), 0);
    kiln_desc_set_offset(f.g, kiln_node_input_desc_mut(f.g, as, 0), 100);
    kiln_desc_set_offset(f.g, kiln_node_input_desc_mut(f.g, as, 1), 0);
    const char *types[] = {"HBM", "L1"};
    kiln_attrs_set_list_string(kiln_node_attrs_mut(f.g, as), "_input_mem_type_list", types, 2);
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
        int64_t v = off(&f, var, 0), inner = -1;
        CU_ASSERT(v >= 0);
        CU_ASSERT_EQUAL(in_off(&f, as, 0), v + 100);
        CU_ASSERT_EQUAL(in_off(&f, as, 1), 0);
        CU_ASSERT_EQUAL(off(&f, as, 0), v + 100);
        CU_ASSERT(kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(f.g, as, 0)),
                                     "_inner_offset", &inner) && inner == 100);
        inner = -1;
        CU_ASSERT(kiln_attrs_get_int(kiln_desc_attrs(kiln_node_output_desc(f.g, as, 0)),
                                     "_inner_offset", &inner) && inner == 100);
        CU_ASSERT_FALSE(kiln_attrs_has(kiln_desc_attrs(kiln_node_input_desc(f.g, as, 1)),
                                       "_inner_offset"));
        CU_ASSERT_STRING_EQUAL(kiln_desc_memory_type(f.g, kiln_node_input_desc(f.g, as, 1)), "L1");
        CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    }
    /* the checker: an HBM input elsewhere than producer + pre-set is caught */
    kiln_desc_set_offset(f.g, kiln_node_input_desc_mut(f.g, as, 0), off(&f, var, 0) + 200);
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[same offset]: assign_in_0"));
    fx_fini(&f);
}

/* An output of unknown size is not planned and counted as dynamic. */
static void test_dynamic_not_planned(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, -1, -1), b = op(&f, "b", "Relu", 1, 1, 1024, -1);
    kiln_node_id out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, b, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(off(&f, a, 0), -1);
    CU_ASSERT_EQUAL(root_int_at(&f, "_kiln_memory_dynamic", 0), 1);
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/* tp_engine's running parameters: output 0 + 32 bytes, one 64-byte workspace. */
static void test_workspaces(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1024, -1), b = op(&f, "b", "Relu", 1, 1, 1024, -1);
    kiln_node_id c = op(&f, "c", "Relu", 1, 1, 1024, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    kiln_node_id ws[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        kiln_attrs_set_string(kiln_node_attrs_mut(f.g, ws[i]), "_kiln_engine", "tp_first");
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, b, 0, c, 0);
    edge(&f, c, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(sz(&f, a, 0), 1056);
    int64_t wo[3];
    for (int i = 0; i < 3; i++) {
        const int64_t *v = NULL;
        uint32_t n = 0;
        const kiln_attrs *at = kiln_node_attrs(f.g, ws[i]);
        CU_ASSERT_FATAL(kiln_attrs_get_list_int(at, "_kiln_workspace_bytes", &v, &n) && n == 1);
        CU_ASSERT_EQUAL(v[0], 64);
        CU_ASSERT_FATAL(kiln_attrs_get_list_int(at, "_kiln_workspace_offsets", &v, &n) && n == 1);
        wo[i] = v[0];
        CU_ASSERT(wo[i] >= 0);
    }
    /* a's output is dead when c runs: first fit puts c's workspace there */
    CU_ASSERT_EQUAL(wo[2], off(&f, a, 0));
    /* b's workspace and a's output are live together */
    CU_ASSERT(wo[1] >= off(&f, a, 0) + 1056 || wo[1] + 64 <= off(&f, a, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    /* the checker sees a workspace moved onto a live output */
    int64_t bad[1] = {off(&f, a, 0)};
    kiln_attrs_set_list_int(kiln_node_attrs_mut(f.g, b), "_kiln_workspace_offsets", bad, 1);
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[overlap]"));
    CU_ASSERT(err_has(&f, "b_ws_0"));
    fx_fini(&f);
}

/* MarkSameAddrPass's fixed address: the arena's head, never shared. */
static void test_fixed_address(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1024, -1), b = op(&f, "b", "Relu", 1, 1, 1024, -1);
    kiln_node_id c = op(&f, "c", "Relu", 1, 1, 1024, -1), d = op(&f, "d", "Relu", 1, 1, 1024, -1);
    kiln_node_id out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    kiln_attrs_set_string(kiln_node_attrs_mut(f.g, b), "_alloc_fixed_addr", "b_out_0");
    kiln_attrs_set_int(kiln_node_attrs_mut(f.g, b), "_alloc_fixed_addr_index", 0);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, b, 0, c, 0);
    edge(&f, c, 0, d, 0);
    edge(&f, d, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL(off(&f, b, 0), 0);
    CU_ASSERT_FALSE(shares(&f, b, 0, a, 0));
    CU_ASSERT_FALSE(shares(&f, b, 0, c, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/* ---- checker rules on corrupted plans, planner errors ------------------------------- */

static void test_checker_rules(void)
{
    fx f;
    fx_init(&f, "TestFirstFit");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1024, -1), b = op(&f, "b", "Relu", 1, 1, 1024, -1);
    kiln_node_id c = op(&f, "c", "Add", 2, 1, 1024, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, a, 0, c, 0);
    edge(&f, b, 0, c, 1);
    edge(&f, c, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(verify(&f), KILN_OK);
    /* [overlap]: b moved onto a, both live at c */
    int64_t ob = off(&f, b, 0);
    kiln_desc_set_offset(f.g, kiln_node_output_desc(f.g, b, 0), off(&f, a, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[overlap]"));
    CU_ASSERT(err_has(&f, "a_out_0"));
    CU_ASSERT(err_has(&f, "b_out_0"));
    kiln_desc_set_offset(f.g, kiln_node_output_desc(f.g, b, 0), ob);
    /* [same offset]: an input descriptor of its own that disagrees */
    kiln_tensor_desc *in = kiln_node_input_desc_mut(f.g, c, 1);
    kiln_desc_set_offset(f.g, in, ob + 512);
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[same offset]: c_in_1"));
    kiln_desc_set_offset(f.g, in, ob);
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    /* [write]: b writes a in place while c still reads a */
    reuse_input(&f, b, 0, 0);
    kiln_desc_set_offset(f.g, kiln_node_output_desc(f.g, b, 0), off(&f, a, 0));
    kiln_desc_set_offset(f.g, in, off(&f, a, 0));
    CU_ASSERT_EQUAL(verify(&f), KILN_ERR_INVALID);
    CU_ASSERT(err_has(&f, "[write]: b_out_0 writes the memory of a_out_0"));
    CU_ASSERT(err_has(&f, "c_in_0 still reads it"));
    fx_fini(&f);
}

static void test_planner_errors(void)
{
    fx f;
    fx_init(&f, "TestBroken");
    kiln_node_id data = op(&f, "data", "Data", 0, 1, 1024, -1);
    kiln_node_id a = op(&f, "a", "Relu", 1, 1, 1024, -1), b = op(&f, "b", "Relu", 1, 1, 1024, -1);
    kiln_node_id c = op(&f, "c", "Add", 2, 1, 1024, -1), out = op(&f, "out", "NetOutput", 1, 0, 0, -1);
    edge(&f, data, 0, a, 0);
    edge(&f, a, 0, b, 0);
    edge(&f, a, 0, c, 0);
    edge(&f, b, 0, c, 1);
    edge(&f, c, 0, out, 0);
    CU_ASSERT_NOT_EQUAL(run_ma(&f, NULL, NULL), KILN_OK);
    CU_ASSERT(err_has(&f, "TestBroken"));
    CU_ASSERT_NOT_EQUAL(run_ma(&f, "planner", "NoSuchPlanner"), KILN_OK);
    CU_ASSERT(err_has(&f, "NoSuchPlanner"));
    /* the pass option wins over the session's planner */
    CU_ASSERT_EQUAL(run_ma(&f, "planner", "TestFirstFit"), KILN_OK);
    CU_ASSERT_EQUAL(verify(&f), KILN_OK);
    fx_fini(&f);
}

/* ---- random graphs ------------------------------------------------------------------ */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

/* Independent check: any two planned outputs of different symbols whose
 * ranges overlap are ordered: every node touching one happens before the
 * first node of the other.  O(n^2) over outputs. */
static void brute_force_check(fx *f)
{
    const kiln_schedule *s = NULL;
    const kiln_symtab *st = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_FATAL(kiln_schedule_get(f->g, &s, &err) == KILN_OK);
    CU_ASSERT_FATAL(kiln_symtab_get(f->g, &st, &err) == KILN_OK);
    uint32_t nsym = kiln_symtab_count(st);
    int64_t *lo = calloc(nsym, sizeof(int64_t)), *hi = calloc(nsym, sizeof(int64_t));
    for (uint32_t i = 0; i < nsym; i++)
        lo[i] = -1;
    for (kiln_node_id n = kiln_graph_next_node(f->g, 0); n; n = kiln_graph_next_node(f->g, n))
        for (uint32_t o = 0; o < kiln_node_output_count(f->g, n); o++) {
            int64_t of = off(f, n, o);
            uint32_t y = kiln_symtab_symbol(st, f->g, n, o, true);
            if (of < 0)
                continue;
            if (lo[y] < 0 || of < lo[y])
                lo[y] = of;
            if (of + sz(f, n, o) > hi[y])
                hi[y] = of + sz(f, n, o);
        }
    /* producer-first pairs: all users of x happen before some anchor node of y */
    for (uint32_t x = 0; x < nsym; x++)
        for (uint32_t y = 0; y < nsym; y++) {
            if (x == y || lo[x] < 0 || lo[y] < 0 || !(lo[x] < hi[y] && lo[y] < hi[x]))
                continue;
            uint32_t cx = 0, cy = 0;
            const kiln_symtab_anchor *ax = kiln_symtab_anchors(st, x, &cx);
            const kiln_symtab_anchor *ay = kiln_symtab_anchors(st, y, &cy);
            bool x_before_y = true, y_before_x = true;
            for (uint32_t i = 0; i < cx; i++)
                for (uint32_t j = 0; j < cy; j++) {
                    x_before_y &= kiln_schedule_happens_before(s, ax[i].node, ay[j].node);
                    y_before_x &= kiln_schedule_happens_before(s, ay[j].node, ax[i].node);
                }
            if (!x_before_y && !y_before_x) {
                char nx[128], ny[128];
                kiln_symtab_symbol_name(st, x, nx, sizeof nx);
                kiln_symtab_symbol_name(st, y, ny, sizeof ny);
                fprintf(stderr, "\nunordered overlap: %s [%lld,%lld) %s [%lld,%lld)\n", nx,
                        (long long)lo[x], (long long)hi[x], ny, (long long)lo[y],
                        (long long)hi[y]);
                CU_FAIL("overlapping buffers are not ordered by happens-before");
                goto done;
            }
        }
done:
    free(lo);
    free(hi);
}

/*
 * Move one planned buffer onto another whose life it shares (unordered by
 * happens-before): the checker must refuse the plan.  Returns false when the
 * graph has no such pair.
 */
static bool corrupt_and_check(fx *f)
{
    const kiln_schedule *s = NULL;
    const kiln_symtab *st = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_FATAL(kiln_schedule_get(f->g, &s, &err) == KILN_OK);
    CU_ASSERT_FATAL(kiln_symtab_get(f->g, &st, &err) == KILN_OK);
    for (kiln_node_id a = kiln_graph_next_node(f->g, 0); a; a = kiln_graph_next_node(f->g, a))
        for (kiln_node_id b = kiln_graph_next_node(f->g, a); b; b = kiln_graph_next_node(f->g, b)) {
            if (kiln_node_output_count(f->g, a) == 0 || kiln_node_output_count(f->g, b) == 0 ||
                off(f, a, 0) < 0 || off(f, b, 0) < 0 || shares(f, a, 0, b, 0) ||
                kiln_symtab_symbol(st, f->g, a, 0, true) == kiln_symtab_symbol(st, f->g, b, 0, true) ||
                kiln_schedule_happens_before(s, a, b) || kiln_schedule_happens_before(s, b, a))
                continue;
            uint32_t y = kiln_symtab_symbol(st, f->g, b, 0, true), cnt = 0;
            const kiln_symtab_anchor *an = kiln_symtab_anchors(st, y, &cnt);
            int64_t to = off(f, a, 0);
            kiln_node_id *nodes = calloc(cnt + 1, sizeof(kiln_node_id));
            uint32_t nn = 0;
            for (uint32_t i = 0; i < cnt; i++)
                if (an[i].is_output && an[i].graph == 0)
                    nodes[nn++] = an[i].node;
            for (uint32_t i = 0; i < nn; i++)
                kiln_desc_set_offset(f->g, kiln_node_output_desc(f->g, nodes[i], 0), to);
            free(nodes);
            CU_ASSERT_EQUAL(verify(f), KILN_ERR_INVALID);
            return true;
        }
    return false;
}

static void random_graph(fx *f, uint32_t nodes, uint32_t streams)
{
    kiln_node_id *id = calloc(nodes + 2, sizeof(kiln_node_id));
    int32_t *stream = calloc(nodes + 2, sizeof(int32_t));
    uint32_t *consumers = calloc(nodes + 2, sizeof(uint32_t));
    bool *in_group = calloc(nodes + 2, sizeof(bool));
    char name[32];
    id[0] = op(f, "data", "Data", 0, 1, 512 * (1 + rnd(4)), -1);
    stream[0] = -1;
    int64_t ev = 0;
    for (uint32_t i = 1; i <= nodes; i++) {
        uint32_t nin = 1 + rnd(3);
        int64_t bytes = 4 * (1 + rnd(600));
        snprintf(name, sizeof name, "n%u", i);
        stream[i] = (int32_t)rnd(streams);
        id[i] = op(f, name, nin > 1 ? "Add" : "Relu", nin, 1, bytes, stream[i]);
        uint32_t srcs[3];
        for (uint32_t k = 0; k < nin; k++) {
            uint32_t src = rnd(i);
            /* a continuous group needs distinct producers */
            for (uint32_t j = 0; j < k; j++)
                if (srcs[j] == src)
                    src = 0;
            srcs[k] = src;
            edge(f, id[src], 0, id[i], k);
            consumers[src]++;
            if (stream[src] >= 0 && stream[src] != stream[i])
                event(f, id[src], id[i], ev++);
        }
        bool distinct = nin > 1 && srcs[0] && srcs[1] && srcs[0] != srcs[1] &&
                        (nin < 3 || (srcs[2] && srcs[2] != srcs[0] && srcs[2] != srcs[1]));
        /* a producer in one group only (two groups would ask two layouts) */
        for (uint32_t k = 0; distinct && k < nin; k++)
            distinct = !in_group[srcs[k]];
        if (distinct && rnd(4) == 0) {
            set_bool(f, id[i], rnd(2) ? "continuous_input" : "_no_padding_continuous_input");
            for (uint32_t k = 0; k < nin; k++)
                in_group[srcs[k]] = true;
        }
    }
    /* a few in-place outputs where the node is its input's only consumer */
    for (uint32_t i = 1; i < nodes; i++) {
        kiln_anchor p = kiln_node_input_peer(f->g, id[i], 0);
        uint32_t src = 0;
        for (uint32_t j = 1; j <= nodes; j++)
            if (id[j] == p.node)
                src = j;
        bool cont = false;
        kiln_attrs_get_bool(kiln_node_attrs(f->g, id[i]), "continuous_input", &cont);
        if (src && consumers[src] == 1 && !cont && stream[src] == stream[i] &&
            kiln_node_input_count(f->g, id[i]) == 1 && rnd(3) == 0)
            reuse_input(f, id[i], 0, 0);
    }
    kiln_node_id out = op(f, "out", "NetOutput", 1, 0, 0, -1);
    edge(f, id[nodes], 0, out, 0);
    free(id);
    free(stream);
    free(consumers);
    free(in_group);
}

static void random_graphs(const char *planner, uint32_t seeds)
{
    uint32_t corrupted = 0;
    for (uint32_t seed = 1; seed <= seeds; seed++) {
        rng_state = seed;
        fx f;
        fx_init(&f, planner);
        if (strcmp(planner, "kiln") == 0)
            CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f.ctx, "libkiln_memplan.so", &f.err),
                                  KILN_OK);
        random_graph(&f, 20 + rnd(60), 1 + seed % 3);
        kiln_status st = run_ma(&f, NULL, NULL);
        if (st != KILN_OK)
            fprintf(stderr, "\nseed %u: %s\n", seed, kiln_error_message(&f.err));
        CU_ASSERT_EQUAL(st, KILN_OK);
        if (st == KILN_OK) {
            CU_ASSERT_EQUAL(verify(&f), KILN_OK);
            brute_force_check(&f);
            CU_ASSERT(root_int_at(&f, "_kiln_memory_sizes", 0) >=
                      root_int_at(&f, "_kiln_memory_loads", 0));
            corrupted += corrupt_and_check(&f);
        }
        fx_fini(&f);
    }
    CU_ASSERT(corrupted >= seeds / 2); /* most graphs had a pair to corrupt */
}

static void test_random_graphs(void) { random_graphs("TestFirstFit", 40); }
/* The shipped planner (libkiln_memplan.so) on the same graphs. */
static void test_random_graphs_kiln_planner(void) { random_graphs("kiln", 40); }

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_chain_reuse", test_chain_reuse},
        {"test_streams_disjoint_without_event", test_streams_disjoint_without_event},
        {"test_streams_reuse_after_event", test_streams_reuse_after_event},
        {"test_ma1_diff_stream_reuse", test_ma1_diff_stream_reuse},
        {"test_ma2_diff_stream_continuous_not_reuse", test_ma2_diff_stream_continuous_not_reuse},
        {"test_ma5_nopad_continuous_diff_stream_not_reuse",
         test_ma5_nopad_continuous_diff_stream_not_reuse},
        {"test_ma6_nopad_continuous_with_edge_reuse", test_ma6_nopad_continuous_with_edge_reuse},
        {"test_continuous_input_padded", test_continuous_input_padded},
        {"test_continuous_input_nopad", test_continuous_input_nopad},
        {"test_nested_continuous", test_nested_continuous},
        {"test_continuous_conflict", test_continuous_conflict},
        {"test_ref_var_same_offset", test_ref_var_same_offset},
        {"test_ma12_set_input_offset", test_ma12_set_input_offset},
        {"test_dynamic_not_planned", test_dynamic_not_planned},
        {"test_workspaces", test_workspaces},
        {"test_fixed_address", test_fixed_address},
        {"test_checker_rules", test_checker_rules},
        {"test_planner_errors", test_planner_errors},
        {"test_random_graphs", test_random_graphs},
        {"test_random_graphs_kiln_planner", test_random_graphs_kiln_planner},
        {NULL, NULL},
    };
    return kiln_test_run("mem_assign", cases);
}
