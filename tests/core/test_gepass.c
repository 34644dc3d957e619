/*
 * test_gepass.c - GEPass traversal: every P-series scenario of GE_SEMANTICS
 * §9.1 (ports of GE's base_pass_unittest.cc), plus the limits, deferred
 * nodes, nesting depth and the pass-context functions.
 *
 * The recording pass ("UtestTestPass") logs each visited node name and fires
 * rules keyed by the visited node's name, like GE's UtestTestPass: re-pass,
 * immediate, global immediate, delete (isolate with {0} + report deleted),
 * suspend and resume.  A rule fires once unless the recorder is in dead-loop
 * mode; delete rules fire on every visit (as in GE).
 */
#include "kiln_test.h"
#include "gepass.h"
#include "graph_int.h"
#include "verify.h"
#include <stdio.h>
#include <string.h>

enum { R_REPASS, R_IMM, R_GLOBAL, R_DEL, R_SUSPEND, R_RESUME, R_ISO_DEL, R_REMOVE };

typedef struct rule {
    const char *at, *target;
    int kind;
    bool done;
    kiln_graph *in; /* graph of the target; NULL = the visited node's (root for R_GLOBAL) */
} rule;

typedef struct recorder {
    char visits[1100][24];
    int nvisits;
    rule rules[16];
    int nrules;
    bool dead_loop;
    const char *leak_resume[4];
    int nleak;
    kiln_graph *last_graph;
    int start_calls;
    int after_sub_visits; /* visits with kiln_pass_after_subgraph() true */
    int mode;             /* M_* below */
    int count;            /* counting passes */
    int finish_calls;     /* on_finish_graph calls */
    kiln_status last_st;  /* status of the last R_ISO_DEL / R_REMOVE */
    bool propagate;       /* return last_st from run_node when it is not KILN_OK */
} recorder;

enum {
    M_NONE,
    M_REPASS_SELF,
    M_IMM_SELF,
    M_FAIL,
    M_AFTER_REPASS_RULES,
    M_AFTER_FIRST_NODE,
    M_AFTER_DELETE_W1
};

static void add_rule(recorder *r, const char *at, int kind, const char *target)
{
    r->rules[r->nrules++] = (rule){at, target, kind, false, NULL};
}

static void add_rule_in(recorder *r, const char *at, int kind, kiln_graph *in, const char *target)
{
    r->rules[r->nrules++] = (rule){at, target, kind, false, in};
}

static kiln_status rec_run(void *inst, kiln_pass_ctx *pc, kiln_graph *g, kiln_node_id n)
{
    recorder *r = inst;
    const char *name = kiln_node_name_str(g, n);
    if (r->nvisits < 1100)
        snprintf(r->visits[r->nvisits++], 24, "%s", name);
    r->last_graph = g;
    if (kiln_pass_after_subgraph(pc))
        r->after_sub_visits++;
    if (r->mode == M_REPASS_SELF)
        kiln_pass_repass(pc, g, n);
    if (r->mode == M_IMM_SELF)
        kiln_pass_repass_immediate(pc, g, n);
    if (r->mode == M_FAIL) {
        kiln_errorf(kiln_pass_error(pc), KILN_ERR_PASS, "test failure on %s", name);
        return KILN_ERR_PASS;
    }
    for (int i = 0; i < r->nrules; i++) {
        rule *u = &r->rules[i];
        if (strcmp(u->at, name) != 0 || (u->done && u->kind != R_DEL))
            continue;
        kiln_graph *tg = u->in ? u->in : u->kind == R_GLOBAL ? kiln_graph_root(g) : g;
        kiln_node_id t = kiln_graph_find_node(tg, u->target);
        if (!r->dead_loop)
            u->done = true;
        if (!t)
            continue;
        switch (u->kind) {
        case R_REPASS:
            kiln_pass_repass(pc, tg, t);
            break;
        case R_IMM:
            kiln_pass_repass_immediate(pc, tg, t);
            break;
        case R_GLOBAL:
            kiln_pass_repass_global_immediate(pc, tg, t);
            break;
        case R_SUSPEND:
            kiln_pass_suspend(pc, tg, t);
            break;
        case R_RESUME:
            kiln_pass_resume(pc, tg, t);
            break;
        case R_DEL: {
            int32_t map[1] = {0};
            CU_ASSERT_EQUAL(kiln_graph_isolate_node(tg, t, map, 1), KILN_OK);
            kiln_pass_node_deleted(pc, tg, t);
            break;
        }
        case R_ISO_DEL:
            r->last_st = kiln_pass_isolate_and_delete(pc, tg, t, NULL, 0, false);
            break;
        case R_REMOVE:
            r->last_st = kiln_graph_remove_node(tg, t);
            if (r->last_st == KILN_OK)
                kiln_pass_node_deleted(pc, tg, t);
            break;
        }
    }
    if (r->propagate && r->last_st != KILN_OK)
        return r->last_st;
    return KILN_OK;
}

static void rec_start(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)pc;
    (void)g;
    ((recorder *)inst)->start_calls++;
}

static void rec_leaked(void *inst, kiln_pass_ctx *pc)
{
    recorder *r = inst;
    for (int i = 0; i < r->nleak && r->last_graph; i++) {
        kiln_node_id n = kiln_graph_find_node(r->last_graph, r->leak_resume[i]);
        if (n)
            kiln_pass_resume(pc, r->last_graph, n);
    }
}

static kiln_status noop_run(void *inst, kiln_pass_ctx *pc, kiln_graph *g, kiln_node_id n)
{
    (void)pc, (void)g, (void)n;
    if (inst)
        ((recorder *)inst)->count++;
    return KILN_OK;
}

static kiln_status after_finish(void *inst, kiln_pass_ctx *pc, kiln_graph *root)
{
    recorder *r = inst;
    if (r->mode == M_AFTER_FIRST_NODE) {
        kiln_pass_repass(pc, root, kiln_graph_next_node(root, 0));
    } else if (r->mode == M_AFTER_REPASS_RULES) {
        /* GE UtestTestPass::OnFinishGraph: rules keyed by any node of any graph. */
        for (int i = 0; i < r->nrules; i++) {
            rule *u = &r->rules[i];
            if (u->done)
                continue;
            kiln_graph *g = root;
            kiln_node_id at = kiln_graph_find_node(root, u->at);
            for (uint32_t s = 0; !at && s < kiln_graph_all_subgraph_count(root); s++) {
                g = kiln_graph_all_subgraph(root, s);
                at = kiln_graph_find_node(g, u->at);
            }
            kiln_node_id t = at ? kiln_graph_find_node(g, u->target) : 0;
            if (t) {
                kiln_pass_repass(pc, g, t);
                u->done = true;
            }
        }
    } else if (r->mode == M_AFTER_DELETE_W1) {
        kiln_graph *sub = kiln_graph_find_subgraph(root, "while_sub");
        kiln_node_id add = sub ? kiln_graph_find_node(sub, "add") : 0;
        if (add) {
            CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(pc, sub, add, NULL, 0, false), KILN_OK);
            kiln_pass_repass(pc, sub, add);
        }
        kiln_node_id w = kiln_graph_find_node(root, "while");
        if (w) {
            CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(pc, root, w, NULL, 0, false), KILN_OK);
            kiln_pass_repass(pc, root, w);
        }
    }
    r->finish_calls++;
    return KILN_OK;
}

static const kiln_pass_desc descs[] = {
    {.struct_size = sizeof(kiln_pass_desc),
     .kind = KILN_PASS_KIND_NODE,
     .name = "UtestTestPass",
     .run_node = rec_run,
     .on_start_graph = rec_start,
     .on_suspend_nodes_leaked = rec_leaked},
    {.struct_size = sizeof(kiln_pass_desc),
     .kind = KILN_PASS_KIND_NODE,
     .name = "AfterPass",
     .flags = KILN_PASS_AFTER_GRAPH,
     .run_node = noop_run,
     .on_finish_graph = after_finish},
    {.struct_size = sizeof(kiln_pass_desc),
     .kind = KILN_PASS_KIND_NODE,
     .name = "OptimizeStage1::RemoveSameConstPass",
     .run_node = noop_run},
    {.struct_size = sizeof(kiln_pass_desc),
     .kind = KILN_PASS_KIND_NODE,
     .name = "RemoveSameConstPass",
     .run_node = noop_run},
};

static kiln_status reg_init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err)
{
    (void)host, (void)err;
    for (size_t i = 0; i < KILN_ARRAY_LEN(descs); i++)
        if (kiln_register_pass(reg, &descs[i]) != KILN_OK)
            return KILN_ERR_PLUGIN_INIT;
    return KILN_OK;
}

static const kiln_plugin_desc plugin = {.struct_size = sizeof(kiln_plugin_desc),
                                        .abi_major = KILN_ABI_MAJOR,
                                        .abi_minor = KILN_ABI_MINOR,
                                        .name = "kiln.test.gepass",
                                        .version = "1",
                                        .init = reg_init};

/* ---- fixture -------------------------------------------------------------- */

static kiln_ctx *ctx;
static kiln_error err;
static kiln_pass_ctx pc;
static FILE *logf_;

static void setup(void)
{
    ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &plugin, NULL, &err), KILN_OK);
    logf_ = tmpfile();
    kiln__passctx_init(&pc, ctx, logf_, &err);
}

static void teardown(kiln_graph *g)
{
    if (g)
        kiln_graph_destroy(g);
    kiln__passctx_fini(&pc);
    kiln_ctx_destroy(ctx);
    if (logf_)
        fclose(logf_);
    logf_ = NULL;
}

static kiln_gepass_item item(const char *name, void *inst)
{
    kiln_gepass_item it = {kiln_registry_find(ctx, KILN_COMP_PASS, name), inst, NULL};
    CU_ASSERT_PTR_NOT_NULL(it.comp);
    return it;
}

/* Run the recorder alone (plus an optional after pass) over g. */
static kiln_status run1(kiln_graph *g, recorder *r, recorder *after)
{
    kiln_gepass_item items[2] = {item("UtestTestPass", r), {0}};
    uint32_t n = 1;
    if (after)
        items[n++] = item("AfterPass", after);
    kiln_error_clear(&err);
    return kiln__gepass_run(&pc, g, items, n, &err);
}

static kiln_graph *build_g1(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "g1");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1),
                 a = kiln_test_node(g, "add1", "Add", 2, 1);
    kiln_node_id c = kiln_test_node(g, "const1", "Constant", 0, 1),
                 r = kiln_test_node(g, "reshape1", "Reshape", 1, 1);
    kiln_test_edge(g, d, 0, a, 0);
    kiln_test_edge(g, c, 0, a, 1);
    kiln_test_edge(g, a, 0, r, 0);
    return g;
}

static kiln_graph *build_g2(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "g2");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1),
                 c1 = kiln_test_node(g, "const1", "Constant", 0, 1);
    kiln_node_id c2 = kiln_test_node(g, "const2", "Constant", 0, 1),
                 a = kiln_test_node(g, "add1", "Add", 2, 1);
    kiln_node_id sh = kiln_test_node(g, "shape1", "Shape", 1, 1),
                 r = kiln_test_node(g, "reshape1", "Reshape", 1, 1);
    kiln_node_id an = kiln_test_node(g, "addn1", "AddN", 1, 1),
                 s = kiln_test_node(g, "sum1", "Sum", 2, 1);
    kiln_test_edge(g, d, 0, a, 0);
    kiln_test_edge(g, c1, 0, a, 1);
    kiln_test_edge(g, c2, 0, sh, 0);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, sh, a), KILN_OK);
    kiln_test_edge(g, a, 0, r, 0);
    kiln_test_edge(g, sh, 0, an, 0);
    kiln_test_edge(g, r, 0, s, 0);
    kiln_test_edge(g, an, 0, s, 1);
    return g;
}

static kiln_graph *build_g3(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "g3");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1),
                 m = kiln_test_node(g, "merge1", "Merge", 2, 1);
    kiln_node_id nx = kiln_test_node(g, "next1", "NextIteration", 1, 1);
    kiln_test_edge(g, d, 0, m, 0);
    kiln_test_edge(g, m, 0, nx, 0);
    kiln_test_edge(g, nx, 0, m, 1);
    kiln_ctrl_add(g, m, nx);
    kiln_ctrl_add(g, nx, m);
    return g;
}

static kiln_graph *build_g4(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "g4");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1),
                 c = kiln_test_node(g, "cast1", "Cast", 1, 1);
    kiln_node_id s1 = kiln_test_node(g, "shape1", "Shape", 1, 1),
                 t = kiln_test_node(g, "transdata1", "TransData", 1, 1);
    kiln_node_id s2 = kiln_test_node(g, "shape2", "Shape", 1, 1);
    kiln_test_edge(g, d, 0, c, 0);
    kiln_test_edge(g, d, 0, t, 0);
    kiln_test_edge(g, c, 0, s1, 0);
    kiln_test_edge(g, t, 0, s2, 0);
    return g;
}

static kiln_graph *build_w1(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "w1");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1),
                 c = kiln_test_node(g, "const_op", "Constant", 0, 1);
    kiln_node_id c1 = kiln_test_node(g, "cast1", "Cast", 1, 1),
                 c2 = kiln_test_node(g, "cast2", "Cast", 1, 1);
    kiln_node_id w = kiln_test_node(g, "while", "While", 2, 2);
    kiln_test_edge(g, d, 0, w, 0);
    kiln_test_edge(g, c, 0, w, 1);
    kiln_test_edge(g, w, 0, c1, 0);
    kiln_test_edge(g, w, 1, c2, 0);
    kiln_graph *sub = kiln_node_add_subgraph(g, w, "body", "while_sub");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sub);
    kiln_node_id d1 = kiln_test_node(sub, "data_1", "Data", 0, 1),
                 d2 = kiln_test_node(sub, "data_2", "Data", 0, 1);
    kiln_node_id add = kiln_test_node(sub, "add", "Add", 2, 1);
    kiln_test_edge(sub, d1, 0, add, 0);
    kiln_test_edge(sub, d2, 0, add, 1);
    return g;
}

/* GE CheckIterOrder: the visit sequence splits into groups whose sets equal the layers.
 * Layers are space-separated name lists. */
static void check_layers(const recorder *r, const char *const *layers, int nlayers)
{
    char seen[32][24];
    int nseen = 0, li = 0;
    for (int v = 0; v < r->nvisits; v++) {
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup = dup || strcmp(seen[k], r->visits[v]) == 0;
        if (!dup && nseen < 32)
            snprintf(seen[nseen++], 24, "%s", r->visits[v]);
        CU_ASSERT_TRUE(li < nlayers);
        if (li >= nlayers)
            return;
        /* compare sets */
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", layers[li]);
        int nwant = 0;
        bool all = true;
        char *toks[32];
        int ntok = 0;
        for (char *tok = strtok(buf, " "); tok && ntok < 32; tok = strtok(NULL, " ")) {
            bool again = false;
            for (int k = 0; k < ntok; k++)
                again = again || strcmp(toks[k], tok) == 0;
            if (again)
                continue; /* layers are sets */
            toks[ntok++] = tok;
            nwant++;
            bool found = false;
            for (int k = 0; k < nseen; k++)
                found = found || strcmp(seen[k], tok) == 0;
            all = all && found;
        }
        if (all && nwant == nseen) {
            li++;
            nseen = 0;
        }
    }
    CU_ASSERT_EQUAL(li, nlayers);
}

#define LAYERS(r, ...)                                                                             \
    do {                                                                                           \
        static const char *const L_[] = {__VA_ARGS__};                                             \
        check_layers((r), L_, (int)KILN_ARRAY_LEN(L_));                                            \
    } while (0)

/* ---- P1-P4: plain walks and re-pass -------------------------------------- */

static void test_gepass_p1_data_graph(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 4);
    LAYERS(&r, "data1 const1", "add1", "reshape1");
    CU_ASSERT_EQUAL(r.start_calls, 1);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    teardown(g);
}

static void test_gepass_p2_graph_with_control_link(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 8);
    CU_ASSERT_STRING_EQUAL(r.visits[3], "shape1");
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1 reshape1", "sum1");
    teardown(g);
}

static void test_gepass_p3_re_pass_before(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    add_rule(&r, "add1", R_REPASS, "data1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(r.nvisits, 5);
    CU_ASSERT_STRING_EQUAL(r.visits[2], "add1");
    CU_ASSERT_STRING_EQUAL(r.visits[3], "reshape1");
    CU_ASSERT_STRING_EQUAL(r.visits[4], "data1");
    teardown(g);
}

static void test_gepass_p4_re_pass_before_multi_times(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    add_rule(&r, "add1", R_REPASS, "data1");
    add_rule(&r, "add1", R_REPASS, "const1");
    add_rule(&r, "reshape1", R_REPASS, "data1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(r.nvisits, 6);
    CU_ASSERT_STRING_EQUAL(r.visits[2], "add1");
    CU_ASSERT_STRING_EQUAL(r.visits[3], "reshape1");
    teardown(g);
}

/* GE re_pass_after / re_pass_and_del: requests for queued nodes are absorbed. */
static void test_gepass_re_pass_after_and_del(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "add1", R_REPASS, "sum1");
    add_rule(&r, "shape1", R_REPASS, "sum1");
    add_rule(&r, "shape1", R_REPASS, "add1");
    add_rule(&r, "data1", R_REPASS, "add1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 8);
    kiln_graph_destroy(g);
    g = build_g2();
    recorder r2 = {0};
    add_rule(&r2, "add1", R_REPASS, "sum1");
    add_rule(&r2, "reshape1", R_DEL, "sum1");
    CU_ASSERT_EQUAL(run1(g, &r2, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r2.nvisits, 7);
    teardown(g);
}

/* ---- P6-P10: deletion --------------------------------------------------- */

static void del_case(const char *const *rules, int nrules, int want)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    for (int i = 0; i < nrules; i++)
        add_rule(&r, rules[2 * i], R_DEL, rules[2 * i + 1]);
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, want);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    teardown(g);
}

static void test_gepass_p6_del_after(void)
{
    static const char *const rules[] = {"add1", "sum1"};
    del_case(rules, 1, 7);
}

static void test_gepass_p7_del_after_multiple(void)
{
    static const char *const rules[] = {"add1", "sum1", "add1", "reshape1"};
    del_case(rules, 2, 6);
}

static void test_gepass_p9_del_self_and_after(void)
{
    static const char *const rules[] = {"shape1", "add1", "shape1", "addn1"};
    del_case(rules, 2, 6);
}

static void test_gepass_p10_del_before(void)
{
    static const char *const rules[] = {"reshape1", "add1", "sum1", "addn1"};
    del_case(rules, 2, 8);
}

/* GE del_after_break_link: deletes plus re-pass requests of the cut nodes. */
static void test_gepass_del_after_break_link(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "shape1", R_DEL, "add1");
    add_rule(&r, "shape1", R_DEL, "addn1");
    add_rule(&r, "shape1", R_REPASS, "shape1");
    add_rule(&r, "shape1", R_REPASS, "reshape1");
    add_rule(&r, "shape1", R_REPASS, "sum1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 7);
    teardown(g);
}

/* ---- P12: While loop ----------------------------------------------------- */

static void test_gepass_p12_while_loop(void)
{
    setup();
    kiln_graph *g = build_g3();
    recorder r = {0};
    r.dead_loop = true;
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 3); /* NextIteration counts as ready: merge1 is reached */
    recorder r2 = {0};
    r2.dead_loop = true;
    add_rule(&r2, "merge1", R_REPASS, "next1");
    add_rule(&r2, "next1", R_REPASS, "merge1");
    CU_ASSERT_EQUAL(run1(g, &r2, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r2.nvisits, 30); /* stopped by the 10 x 3 limit */
    teardown(g);
}

/* ---- P13, P15: immediate re-pass ------------------------------------------ */

static void test_gepass_p13_re_pass_pre_node_immediately(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_IMM, "add1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 9);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 add1 sum1");
    teardown(g);
}

static void test_gepass_re_pass_cur_node_immediately(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_IMM, "reshape1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 9);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1", "reshape1 sum1");
    teardown(g);
}

static void test_gepass_p15_re_pass_next_node_immediately(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_IMM, "sum1");
    add_rule(&r, "add1", R_IMM, "sum1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 8);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 sum1");
    teardown(g);
}

/* ---- P16-P25: suspend / resume -------------------------------------------- */

static void test_gepass_p16_b_suspend_a_then_c_resume_a(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_SUSPEND, "add1");
    add_rule(&r, "sum1", R_RESUME, "add1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 9);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 sum1", "add1");
    teardown(g);
}

static void test_gepass_b_suspend_a_then_b_resume_a(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_SUSPEND, "add1");
    add_rule(&r, "reshape1", R_RESUME, "add1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 9);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 sum1 add1");
    teardown(g);
}

static void test_gepass_p18_resume_node_not_suspended(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_RESUME, "sum1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 8);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 sum1");
    teardown(g);
}

static void test_gepass_p19_suspend_nobody_resumes(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_SUSPEND, "add1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "leaked"));
    teardown(g);
}

static void test_gepass_p20_suspend_resume_on_leaked(void)
{
    setup();
    kiln_graph *g = build_g2();
    recorder r = {0};
    add_rule(&r, "reshape1", R_SUSPEND, "add1");
    r.leak_resume[r.nleak++] = "add1";
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    LAYERS(&r, "data1 const1 const2", "shape1", "add1 addn1", "reshape1 sum1", "add1");
    teardown(g);
}

static void test_gepass_cast1_suspend_shape2_resume(void)
{
    setup();
    kiln_graph *g = build_g4();
    recorder r = {0};
    add_rule(&r, "cast1", R_SUSPEND, "cast1");
    add_rule(&r, "shape2", R_RESUME, "cast1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 6);
    LAYERS(&r, "data1", "cast1 transdata1", "shape2", "cast1 shape1");
    teardown(g);
}

static void test_gepass_p22_cast1_suspend_then_resume_self(void)
{
    setup();
    kiln_graph *g = build_g4();
    recorder r = {0};
    add_rule(&r, "cast1", R_SUSPEND, "cast1");
    add_rule(&r, "cast1", R_RESUME, "cast1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 6);
    LAYERS(&r, "data1", "cast1 transdata1 cast1 shape1 shape2");
    kiln_graph_destroy(g);
    g = build_g4();
    recorder r2 = {0};
    add_rule(&r2, "cast1", R_SUSPEND, "cast1");
    r2.leak_resume[r2.nleak++] = "cast1";
    CU_ASSERT_EQUAL(run1(g, &r2, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r2.nvisits, 6);
    LAYERS(&r2, "data1", "cast1 transdata1 shape2", "cast1 shape1");
    teardown(g);
}

static void test_gepass_p24_data1_suspend_cast1_resume_on_leaked(void)
{
    setup();
    kiln_graph *g = build_g4();
    recorder r = {0};
    add_rule(&r, "data1", R_SUSPEND, "cast1");
    r.leak_resume[r.nleak++] = "cast1";
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 5);
    LAYERS(&r, "data1", "transdata1 shape2", "cast1 shape1");
    teardown(g);
}

static void test_gepass_p25_data1_suspend_cast1_nobody_resumes(void)
{
    setup();
    kiln_graph *g = build_g4();
    recorder r = {0};
    add_rule(&r, "data1", R_SUSPEND, "cast1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_ERR_INTERNAL);
    CU_ASSERT_EQUAL(r.nvisits, 3);
    teardown(g);
}

/* ---- P27-P32: limits and after-graph passes -------------------------------- */

static void test_gepass_p27_repass_more_than_limit_stops(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {.mode = M_REPASS_SELF};
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 40);
    /* the limit is a warning on the log, not an error */
    CU_ASSERT_EQUAL(kiln_error_code(&err), KILN_OK);
    char buf[512] = {0};
    rewind(logf_);
    size_t n = fread(buf, 1, sizeof(buf) - 1, logf_);
    buf[n] = 0;
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "warning: GEPass"));
    teardown(g);
}

static void test_gepass_p28_repass_immediate_more_than_limit(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {.mode = M_IMM_SELF};
    recorder after = {.mode = M_AFTER_FIRST_NODE};
    CU_ASSERT_EQUAL(run1(g, &r, &after), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 40);
    teardown(g);
}

static void test_gepass_p29_after_graph_optimized(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    recorder after = {.mode = M_AFTER_REPASS_RULES};
    add_rule(&after, "add1", R_REPASS, "const1");
    CU_ASSERT_EQUAL(run1(g, &r, &after), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 5);
    LAYERS(&r, "data1 const1 add1 reshape1", "const1");
    CU_ASSERT_EQUAL(after.finish_calls, 2); /* the queue drained twice with nothing suspended */
    teardown(g);
}

static void test_gepass_p30_after_repass_exceeds_limit(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    recorder after = {.mode = M_AFTER_FIRST_NODE};
    CU_ASSERT_EQUAL(run1(g, &r, &after), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 40);
    teardown(g);
}

/* GE add_pass_after_graph_optimized_with_V2_graph: a re-pass inside the While
 * body maps to the While node, which re-walks its subgraph. */
static void test_gepass_after_graph_maps_to_root_ancestor(void)
{
    setup();
    kiln_graph *g = build_w1();
    recorder r = {0};
    recorder after = {.mode = M_AFTER_REPASS_RULES};
    add_rule(&after, "add", R_REPASS, "data_1");
    CU_ASSERT_EQUAL(run1(g, &r, &after), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 14);
    LAYERS(&r, "data1 const_op while", "data_1 data_2 add", "while cast1 cast2", "while",
           "data_1 data_2 add", "while");
    /* owner visited twice per walk: 2nd visit flagged after-subgraph */
    CU_ASSERT_EQUAL(r.after_sub_visits, 2);
    teardown(g);
}

static void test_gepass_p32_after_pass_deletes_nodes(void)
{
    setup();
    kiln_graph *g = build_w1();
    recorder r = {0};
    recorder after = {.mode = M_AFTER_DELETE_W1};
    CU_ASSERT_EQUAL(run1(g, &r, &after), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 9);
    LAYERS(&r, "data1 const_op while", "data_1 data_2 add while", "cast1 cast2");
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "while"), 0);
    CU_ASSERT_PTR_NULL(kiln_graph_find_subgraph(g, "while_sub"));
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    teardown(g);
}

/* GE add_global_immdiate_repass_node + subgraph hooks. */
static void test_gepass_global_immediate_and_subgraph_hooks(void)
{
    setup();
    kiln_graph *g = build_w1();
    recorder r = {0};
    add_rule(&r, "add", R_GLOBAL, "data1");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.nvisits, 10);
    LAYERS(&r, "data1 const_op while", "data_1 data_2 add", "while data1 cast1 cast2");
    /* on_start_graph: root, subgraph, root again before the owner's 2nd visit */
    CU_ASSERT_EQUAL(r.start_calls, 3);
    CU_ASSERT_EQUAL(r.after_sub_visits, 1);
    teardown(g);
}

/* ---- P33-P35: filter, errors, isolate-and-delete -------------------------- */

static void test_gepass_p33_disable_node_passes(void)
{
    setup();
    kiln_graph *g = build_w1();
    recorder cnt = {0};
    kiln_gepass_item items[2] = {item("OptimizeStage1::RemoveSameConstPass", &cnt),
                                 item("RemoveSameConstPass", &cnt)};
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, "ge.disableOptimizations",
                                        "RemoveSameConstPass, DisableButNotInWhiteList"),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, g, items, 2, &err), KILN_OK);
    CU_ASSERT_EQUAL(cnt.count, 0);
    char buf[512] = {0};
    rewind(logf_);
    buf[fread(buf, 1, sizeof(buf) - 1, logf_)] = 0;
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "DisableButNotInWhiteList"));
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, "ge.disableOptimizations", ""), KILN_OK);
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, g, items, 2, &err), KILN_OK);
    CU_ASSERT_EQUAL(cnt.count, 18); /* 9 visits x 2 passes */
    /* only the suffix after the last ':' counts, and only whitelisted names */
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, "ge.disableOptimizations", "ConstantFoldingPass"),
                    KILN_OK);
    CU_ASSERT_TRUE(kiln__pass_disabled(&pc, "A::B:ConstantFoldingPass"));
    CU_ASSERT_FALSE(kiln__pass_disabled(&pc, "ConstantFoldingPassX"));
    teardown(g);
}

static void test_gepass_p34_errors(void)
{
    setup();
    kiln_graph *g = build_g1();
    recorder r = {0};
    kiln_gepass_item items[2] = {item("UtestTestPass", &r), {NULL, NULL, NULL}};
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, g, items, 0, &err), KILN_ERR_INTERNAL);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, g, items, 2, &err), KILN_ERR_INTERNAL);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, NULL, items, 1, &err), KILN_ERR_INTERNAL);
    recorder f = {.mode = M_FAIL};
    CU_ASSERT_EQUAL(run1(g, &f, NULL), KILN_ERR_PASS);
    CU_ASSERT_EQUAL(f.nvisits, 1);
    char buf[1024];
    kiln_error_format(&err, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "pass UtestTestPass"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "node data1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "test failure on data1"));
    teardown(g);
}

static kiln_graph *build_merge(uint32_t merge_outputs, kiln_node_id *merge)
{
    kiln_graph *g = kiln_graph_create(ctx, "iso");
    *merge = kiln_test_node(g, "Merge", "Merge", 1, merge_outputs);
    kiln_node_id op1 = kiln_test_node(g, "Op1", "Relu", 1, 1),
                 op2 = kiln_test_node(g, "Op2", "Conv2D", 1, 1);
    kiln_node_id op3 = kiln_test_node(g, "Op3", "Conv2D", 1, 1);
    kiln_test_edge(g, op1, 0, *merge, 0);
    kiln_test_edge(g, *merge, 0, op2, 0);
    kiln_test_edge(g, *merge, 0, op3, 0);
    return g;
}

static void test_gepass_p35_isolate_and_delete(void)
{
    setup();
    static const int32_t map[2] = {0, -1};
    kiln_node_id m;
    kiln_graph *g = build_merge(1, &m);
    CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(&pc, g, m, map, 2, false), KILN_ERR_PARAM);
    CU_ASSERT_TRUE(kiln_node_is_live(g, m));
    kiln_graph_destroy(g);
    kiln__passctx_clear_requests(&pc);
    g = build_merge(2, &m);
    CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(&pc, g, m, map, 2, false), KILN_OK);
    CU_ASSERT_FALSE(kiln_node_is_live(g, m));
    kiln_node_id op1 = kiln_graph_find_node(g, "Op1");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "Op2"), 0).node, op1);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "Op3"), 0).node, op1);
    /* re-pass in (Op1), self, out (Op2, Op3); reported deleted */
    CU_ASSERT_EQUAL(pc.req[KILN_REQ_REPASS].count, 4);
    CU_ASSERT_EQUAL(pc.req[KILN_REQ_DELETED].count, 1);
    CU_ASSERT_EQUAL(pc.req[KILN_REQ_DELETED].v[0].n, m);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    /* immediate variant fills the immediate list */
    kiln__passctx_clear_requests(&pc);
    kiln_node_id op2 = kiln_graph_find_node(g, "Op2");
    CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(&pc, g, op2, NULL, 0, true), KILN_OK);
    CU_ASSERT_EQUAL(pc.req[KILN_REQ_IMMEDIATE].count, 2);
    /* no owner graph / dead node */
    CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(&pc, NULL, op1, NULL, 0, false), KILN_ERR_PARAM);
    CU_ASSERT_EQUAL(kiln_pass_isolate_and_delete(&pc, g, m, NULL, 0, false), KILN_ERR_PARAM);
    teardown(g);
}

/* ---- deleting a walked graph's owner, requests across graphs --------------- */

/* w1 plus a second subgraph of the While ("while_cond": c_data -> c_less). */
static kiln_graph *build_w2(void)
{
    kiln_graph *g = build_w1();
    kiln_node_id w = kiln_graph_find_node(g, "while");
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "while_cond");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cond);
    kiln_node_id d = kiln_test_node(cond, "c_data", "Data", 0, 1),
                 l = kiln_test_node(cond, "c_less", "Less", 1, 1);
    kiln_test_edge(cond, d, 0, l, 0);
    return g;
}

static void read_log(char *buf, size_t size)
{
    fflush(logf_);
    rewind(logf_);
    buf[fread(buf, 1, size - 1, logf_)] = 0;
}

/* A pass visiting a node of the While body deletes the While node: the
 * deletion would free the graph being walked, so it is refused and nothing
 * changes; the walk goes on (or fails cleanly when the pass returns the
 * status), and after the walk the deletion works. */
static void test_gepass_delete_owner_of_walked_graph(void)
{
    setup();
    kiln_graph *g = build_w1();
    recorder base = {0};
    CU_ASSERT_EQUAL(run1(g, &base, NULL), KILN_OK);

    recorder r = {0};
    add_rule_in(&r, "add", R_ISO_DEL, g, "while");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK); /* the pass ignores the status */
    CU_ASSERT_EQUAL(r.last_st, KILN_ERR_PARAM);
    CU_ASSERT_EQUAL(r.nvisits, base.nvisits);
    CU_ASSERT_NOT_EQUAL(kiln_graph_find_node(g, "while"), 0);
    CU_ASSERT_PTR_NOT_NULL(kiln_graph_find_subgraph(g, "while_sub"));
    CU_ASSERT_EQUAL(kiln_node_input_count(g, kiln_graph_find_node(g, "while")), 2);
    CU_ASSERT_NOT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "while"), 0).node, 0);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "cast1"), 0).node,
                    kiln_graph_find_node(g, "while"));

    /* the pass returns the status: the walk fails with the reason */
    recorder p = {.propagate = true};
    add_rule_in(&p, "add", R_ISO_DEL, g, "while");
    CU_ASSERT_EQUAL(run1(g, &p, NULL), KILN_ERR_PARAM);
    char buf[2048];
    kiln_error_format(&err, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cannot delete node while of graph w1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "it owns graph while_sub"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "node add"));

    /* kiln_graph_remove_node itself refuses, from the body and from deeper */
    recorder d = {0};
    add_rule_in(&d, "data_2", R_REMOVE, g, "while");
    CU_ASSERT_EQUAL(run1(g, &d, NULL), KILN_OK);
    CU_ASSERT_EQUAL(d.last_st, KILN_ERR_INVALID);
    CU_ASSERT_NOT_EQUAL(kiln_graph_find_node(g, "while"), 0);
    kiln_graph *sub = kiln_graph_find_subgraph(g, "while_sub");
    kiln_node_id inner = kiln_test_node(sub, "call", "PartitionedCall", 0, 0);
    kiln_graph *deep = kiln_node_add_subgraph(sub, inner, "f", "deep");
    CU_ASSERT_PTR_NOT_NULL_FATAL(deep);
    kiln_test_node(deep, "leaf", "Data", 0, 1);
    recorder e = {0};
    add_rule_in(&e, "leaf", R_REMOVE, g, "while"); /* two levels up */
    add_rule_in(&e, "leaf", R_ISO_DEL, sub, "call");
    CU_ASSERT_EQUAL(run1(g, &e, NULL), KILN_OK);
    CU_ASSERT_EQUAL(e.last_st, KILN_ERR_PARAM);
    CU_ASSERT_NOT_EQUAL(kiln_graph_find_node(g, "while"), 0);
    CU_ASSERT_NOT_EQUAL(kiln_graph_find_node(sub, "call"), 0);
    CU_ASSERT_PTR_NOT_NULL(kiln_graph_find_subgraph(g, "deep"));

    /* a pass deleting the While while visiting the While itself (the walk
     * of its body is over) is fine, and so is deleting it after the walk */
    recorder o = {0};
    add_rule_in(&o, "cast1", R_ISO_DEL, g, "while");
    CU_ASSERT_EQUAL(run1(g, &o, NULL), KILN_OK);
    CU_ASSERT_EQUAL(o.last_st, KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "while"), 0);
    CU_ASSERT_PTR_NULL(kiln_graph_find_subgraph(g, "while_sub"));
    CU_ASSERT_PTR_NULL(kiln_graph_find_subgraph(g, "deep"));
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "cast1"), 0).node, 0);
    teardown(g);
}

/* Re-pass, immediate re-pass, suspend and resume naming a node of another
 * graph than the one being walked: the parent graph, a sibling subgraph, an
 * unrelated graph.  The first three kinds change nothing and say so (a
 * warning naming the pass, the request, the node and both graphs); a suspend
 * fails the walk (it would leak in GE). */
static void test_gepass_requests_across_graphs(void)
{
    static const int kinds[] = {R_REPASS, R_IMM, R_RESUME, R_SUSPEND};
    static const char *const kind_names[] = {"re-pass", "immediate re-pass", "resume", "suspend"};
    enum { PARENT, SIBLING, UNRELATED };
    for (int k = 0; k < 4; k++) {
        for (int where = PARENT; where <= UNRELATED; where++) {
            setup();
            kiln_graph *g = build_w2();
            kiln_graph *other = kiln_graph_create(ctx, "other");
            kiln_test_node(other, "x", "Data", 0, 1);
            recorder base = {0};
            CU_ASSERT_EQUAL(run1(g, &base, NULL), KILN_OK);
            recorder r = {0};
            /* c_less is in while_cond, walked after while_sub */
            if (where == PARENT)
                add_rule_in(&r, "c_less", kinds[k], g, "data1");
            else if (where == SIBLING)
                add_rule_in(&r, "c_less", kinds[k], kiln_graph_find_subgraph(g, "while_sub"),
                            "add");
            else
                add_rule_in(&r, "c_less", kinds[k], other, "x");
            const char *tgraph = where == PARENT ? "w1" : where == SIBLING ? "while_sub" : "other";
            const char *tnode = where == PARENT ? "data1" : where == SIBLING ? "add" : "x";
            kiln_status st = run1(g, &r, NULL);
            char log[4096], want[256], buf[2048];
            read_log(log, sizeof(log));
            if (kinds[k] == R_SUSPEND) {
                CU_ASSERT_EQUAL(st, KILN_ERR_PARAM);
                kiln_error_format(&err, buf, sizeof(buf));
                snprintf(want, sizeof(want),
                         "pass UtestTestPass suspended node %s of graph %s while walking graph "
                         "while_cond",
                         tnode, tgraph);
                if (!strstr(buf, want))
                    fprintf(stderr, "\nwant '%s' in '%s'\n", want, buf);
                CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
                CU_ASSERT_PTR_NOT_NULL(strstr(buf, "node c_less"));
            } else {
                CU_ASSERT_EQUAL(st, KILN_OK);
                CU_ASSERT_EQUAL(r.nvisits, base.nvisits);
                for (int v = 0; v < r.nvisits && v < base.nvisits; v++)
                    CU_ASSERT_STRING_EQUAL(r.visits[v], base.visits[v]);
                snprintf(want, sizeof(want),
                         "kiln: warning: UtestTestPass: %s of node %s of graph %s ignored: the "
                         "walk is in graph while_cond",
                         kind_names[k], tnode, tgraph);
                if (!strstr(log, want))
                    fprintf(stderr, "\nwant '%s' in '%s'\n", want, log);
                CU_ASSERT_PTR_NOT_NULL(strstr(log, want));
            }
            kiln_graph_destroy(other);
            teardown(g);
        }
    }
}

/* A global immediate re-pass names a root graph node; a subgraph node is
 * refused with a warning.  Deletions may name a node of any graph: deleting a
 * parent graph node from a subgraph visit marks it deleted in the parent's
 * walk, which then skips it. */
static void test_gepass_global_and_delete_across_graphs(void)
{
    setup();
    kiln_graph *g = build_w2();
    recorder r = {0};
    add_rule_in(&r, "c_less", R_GLOBAL, kiln_graph_find_subgraph(g, "while_sub"), "add");
    add_rule_in(&r, "add", R_ISO_DEL, g, "cast2");
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL(r.last_st, KILN_OK);
    char log[4096];
    read_log(log, sizeof(log));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "global immediate re-pass of node add of graph "
                                       "while_sub ignored: it takes nodes of the root graph w1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "deleting node cast2 of graph w1 while walking graph "
                                       "while_sub: its neighbours are not re-passed"));
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "cast2"), 0);
    for (int v = 0; v < r.nvisits; v++)
        CU_ASSERT_STRING_NOT_EQUAL(r.visits[v], "cast2");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, kiln_graph_find_node(g, "cast1"), 0).node,
                    kiln_graph_find_node(g, "while"));
    teardown(g);
}

/* ---- limits, deferred nodes, scale ---------------------------------------- */

static void test_gepass_depth_limit(void)
{
    setup();
    kiln_graph *root = kiln_graph_create(ctx, "deep"), *g = root;
    char name[32];
    for (int d = 1; d <= 25; d++) {
        snprintf(name, sizeof(name), "call%d", d);
        kiln_node_id n = kiln_test_node(g, name, "PartitionedCall", 0, 0);
        if (d == 25)
            break;
        snprintf(name, sizeof(name), "sub%d", d);
        g = kiln_node_add_subgraph(g, n, "f", name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    }
    recorder r = {0};
    CU_ASSERT_EQUAL(run1(root, &r, NULL), KILN_OK); /* graphs at depths 1..25 */
    CU_ASSERT_EQUAL(r.nvisits, 25 + 24);            /* every owner twice, call25 once */
    kiln_node_id n = kiln_graph_find_node(g, "call25");
    CU_ASSERT_PTR_NOT_NULL_FATAL(kiln_node_add_subgraph(g, n, "f", "sub25")); /* depth 26 */
    recorder r2 = {0};
    CU_ASSERT_EQUAL(run1(root, &r2, NULL), KILN_ERR_PARAM);
    teardown(root);
}

static void test_gepass_deferred_many_inputs(void)
{
    setup();
    kiln_graph *g = kiln_graph_create(ctx, "wide");
    kiln_node_id cat = kiln_test_node(g, "concat", "ConcatV2", 1001, 1);
    char name[32];
    for (uint32_t i = 0; i < 1001; i++) {
        snprintf(name, sizeof(name), "d%u", i);
        kiln_test_edge(g, kiln_test_node(g, name, "Data", 0, 1), 0, cat, i);
    }
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, cat, 0, out, 0);
    recorder r = {0};
    CU_ASSERT_EQUAL(run1(g, &r, NULL), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(r.nvisits, 1003);
    CU_ASSERT_STRING_EQUAL(r.visits[1001], "concat");
    CU_ASSERT_STRING_EQUAL(r.visits[1002], "out");
    teardown(g);
}

static kiln_status count_run(void *inst, kiln_pass_ctx *p, kiln_graph *g, kiln_node_id n)
{
    (void)p, (void)g, (void)n;
    ((recorder *)inst)->count++;
    return KILN_OK;
}

static void test_gepass_large_chain_sweep(void)
{
    setup();
    const uint32_t count = 200000;
    kiln_graph *g = kiln_graph_create(ctx, "chain");
    kiln_graph_reserve(g, count + 1, count, count);
    char name[32];
    kiln_node_id prev = 0;
    for (uint32_t i = 0; i < count; i++) {
        snprintf(name, sizeof(name), "n%u", i);
        kiln_node_id n = kiln_graph_add_node(g, name, "Relu", 1, 1);
        if (prev)
            kiln_edge_add(g, prev, 0, n, 0);
        prev = n;
    }
    static kiln_component comp;
    comp.kind = KILN_COMP_PASS;
    comp.name = "Counter";
    comp.d.pass = (kiln_pass_desc){.struct_size = sizeof(kiln_pass_desc),
                                   .kind = KILN_PASS_KIND_NODE,
                                   .name = "Counter",
                                   .run_node = count_run};
    recorder r = {0};
    kiln_pass_perf perf = {0};
    kiln_gepass_item it = {&comp, &r, &perf};
    CU_ASSERT_EQUAL(kiln__gepass_run(&pc, g, &it, 1, &err), KILN_OK);
    CU_ASSERT_EQUAL(r.count, (int)count);
    CU_ASSERT_EQUAL(perf.calls, count);
    teardown(g);
}

/* ---- pass context --------------------------------------------------------- */

static void test_gepass_passctx_stats_explain_diag(void)
{
    setup();
    kiln_graph *g = build_g1();
    pc.stage = "prepare";
    pc.comp = kiln_registry_find(ctx, KILN_COMP_PASS, "UtestTestPass");
    kiln_pass_stat_add(&pc, "folded", 2);
    kiln_pass_stat_add(&pc, "folded", 3);
    kiln_pass_stat_add(&pc, "other", 1);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, "prepare", "UtestTestPass", "folded"), 5);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "UtestTestPass", "other"), 1);
    uint32_t n = 0;
    kiln__passctx_stats(&pc, &n);
    CU_ASSERT_EQUAL(n, 2);
    kiln_pass_explain(&pc, g, kiln_graph_find_node(g, "add1"), "inserted because %d", 42);
    const kiln_explanation *e = kiln__passctx_explanations(&pc, &n);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(e[0].pass, "UtestTestPass");
    CU_ASSERT_STRING_EQUAL(e[0].node, "add1");
    CU_ASSERT_STRING_EQUAL(e[0].text, "inserted because 42");
    CU_ASSERT_STRING_EQUAL(e[0].stage, "prepare");
    CU_ASSERT_PTR_EQUAL(kiln_pass_error(&pc), &err);
    CU_ASSERT_PTR_NULL(kiln_pass_session_option(&pc, "ge.exec.atomicCleanPolicy"));
    kiln_ctx_set_option(ctx, "ge.exec.atomicCleanPolicy", "1");
    CU_ASSERT_STRING_EQUAL(kiln_pass_session_option(&pc, "ge.exec.atomicCleanPolicy"), "1");
    ctx->verbosity = 0;
    kiln_diag(&pc, KILN_SEV_DEBUG, "hidden %d", 1);
    kiln_diag(&pc, KILN_SEV_WARNING, "shown %d", 2);
    ctx->verbosity = 1;
    kiln_diag(&pc, KILN_SEV_DEBUG, "verbose %d", 3);
    char buf[512] = {0};
    rewind(logf_);
    buf[fread(buf, 1, sizeof(buf) - 1, logf_)] = 0;
    CU_ASSERT_PTR_NULL(strstr(buf, "hidden"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "kiln: warning: UtestTestPass: shown 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "kiln: debug: UtestTestPass: verbose 3\n"));
    /* requests for no node are ignored */
    kiln__passctx_clear_requests(&pc);
    kiln_pass_repass(&pc, NULL, 1);
    kiln_pass_repass(&pc, g, 0);
    kiln_pass_repass(&pc, g, 999);
    CU_ASSERT_EQUAL(pc.req[KILN_REQ_REPASS].count, 0);
    teardown(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_gepass_p1_data_graph", test_gepass_p1_data_graph},
        {"test_gepass_p2_graph_with_control_link", test_gepass_p2_graph_with_control_link},
        {"test_gepass_p3_re_pass_before", test_gepass_p3_re_pass_before},
        {"test_gepass_p4_re_pass_before_multi_times", test_gepass_p4_re_pass_before_multi_times},
        {"test_gepass_re_pass_after_and_del", test_gepass_re_pass_after_and_del},
        {"test_gepass_p6_del_after", test_gepass_p6_del_after},
        {"test_gepass_p7_del_after_multiple", test_gepass_p7_del_after_multiple},
        {"test_gepass_p9_del_self_and_after", test_gepass_p9_del_self_and_after},
        {"test_gepass_p10_del_before", test_gepass_p10_del_before},
        {"test_gepass_del_after_break_link", test_gepass_del_after_break_link},
        {"test_gepass_p12_while_loop", test_gepass_p12_while_loop},
        {"test_gepass_p13_re_pass_pre_node_immediately",
         test_gepass_p13_re_pass_pre_node_immediately},
        {"test_gepass_re_pass_cur_node_immediately", test_gepass_re_pass_cur_node_immediately},
        {"test_gepass_p15_re_pass_next_node_immediately",
         test_gepass_p15_re_pass_next_node_immediately},
        {"test_gepass_p16_b_suspend_a_then_c_resume_a",
         test_gepass_p16_b_suspend_a_then_c_resume_a},
        {"test_gepass_b_suspend_a_then_b_resume_a", test_gepass_b_suspend_a_then_b_resume_a},
        {"test_gepass_p18_resume_node_not_suspended", test_gepass_p18_resume_node_not_suspended},
        {"test_gepass_p19_suspend_nobody_resumes", test_gepass_p19_suspend_nobody_resumes},
        {"test_gepass_p20_suspend_resume_on_leaked", test_gepass_p20_suspend_resume_on_leaked},
        {"test_gepass_cast1_suspend_shape2_resume", test_gepass_cast1_suspend_shape2_resume},
        {"test_gepass_p22_cast1_suspend_then_resume_self",
         test_gepass_p22_cast1_suspend_then_resume_self},
        {"test_gepass_p24_data1_suspend_cast1_resume_on_leaked",
         test_gepass_p24_data1_suspend_cast1_resume_on_leaked},
        {"test_gepass_p25_data1_suspend_cast1_nobody_resumes",
         test_gepass_p25_data1_suspend_cast1_nobody_resumes},
        {"test_gepass_p27_repass_more_than_limit_stops",
         test_gepass_p27_repass_more_than_limit_stops},
        {"test_gepass_p28_repass_immediate_more_than_limit",
         test_gepass_p28_repass_immediate_more_than_limit},
        {"test_gepass_p29_after_graph_optimized", test_gepass_p29_after_graph_optimized},
        {"test_gepass_p30_after_repass_exceeds_limit", test_gepass_p30_after_repass_exceeds_limit},
        {"test_gepass_after_graph_maps_to_root_ancestor",
         test_gepass_after_graph_maps_to_root_ancestor},
        {"test_gepass_p32_after_pass_deletes_nodes", test_gepass_p32_after_pass_deletes_nodes},
        {"test_gepass_global_immediate_and_subgraph_hooks",
         test_gepass_global_immediate_and_subgraph_hooks},
        {"test_gepass_p33_disable_node_passes", test_gepass_p33_disable_node_passes},
        {"test_gepass_p34_errors", test_gepass_p34_errors},
        {"test_gepass_p35_isolate_and_delete", test_gepass_p35_isolate_and_delete},
        {"test_gepass_delete_owner_of_walked_graph", test_gepass_delete_owner_of_walked_graph},
        {"test_gepass_requests_across_graphs", test_gepass_requests_across_graphs},
        {"test_gepass_global_and_delete_across_graphs",
         test_gepass_global_and_delete_across_graphs},
        {"test_gepass_depth_limit", test_gepass_depth_limit},
        {"test_gepass_deferred_many_inputs", test_gepass_deferred_many_inputs},
        {"test_gepass_large_chain_sweep", test_gepass_large_chain_sweep},
        {"test_gepass_passctx_stats_explain_diag", test_gepass_passctx_stats_explain_diag},
        {NULL, NULL}};
    return kiln_test_run("gepass", cases);
}
