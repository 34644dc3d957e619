/*
 * test_fusion_exec.c - the fusion executor (GE pattern_fusion_pass_unittest.cc
 * and fusion_pass_executor_unittest.cc: M9, M10) and kiln_fusion_run_stage:
 * pattern, decompose and base passes, non-overlapping matches, vetoes,
 * counters, the alphabetical order of a stage, the switches, bad patterns
 * and replacements, matching inside a While body, and a fusion pass listed
 * in a stage of the pass manager.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "passctx.h"
#include "passmgr.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static kiln_ctx *ctx;
static kiln_error err;
static kiln_pass_ctx pc;
static FILE *logf_;
static char trace[512];

/* ---- the test passes ---------------------------------------------------------- */

/* Data -> Relu -> Relu, replaced by a copy of the outer Relu. */
static kiln_status rr_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)e;
    int32_t d = kiln_pattern_node(p, "x", "Data");
    int32_t a = kiln_pattern_node(p, "r1", "Relu"), b = kiln_pattern_node(p, "r2", "Relu");
    if (kiln_pattern_edge(p, d, 0, a, 0) || kiln_pattern_edge(p, a, 0, b, 0))
        return KILN_ERR_INVALID;
    return kiln_pattern_output(p, b, 0);
}

/* One node of op @p op fed by replacement input 0, into a NetOutput. */
static kiln_status one_node(kiln_graph *repl, const char *name, const char *op)
{
    kiln_node_id r = kiln_graph_add_node(repl, name, op, 1, 1);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    if (!r || !out)
        return KILN_ERR_NOMEM;
    kiln_status st = kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, r, 0);
    return st ? st : kiln_edge_add(repl, r, 0, out, 0);
}

static kiln_status rr_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g, (void)m;
    return one_node(repl, "fused_relu", "Relu");
}

static const kiln_fusion_pass_desc relu_relu = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                .name = "ReluReluFusionPass",
                                                .kind = KILN_FUSION_PATTERN,
                                                .stage =
                                                    KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE,
                                                .patterns = rr_patterns,
                                                .replacement = rr_replace};

static bool veto_all(void *inst, const kiln_graph *g, const kiln_match *m)
{
    (void)inst, (void)g, (void)m;
    return false;
}

static const kiln_fusion_pass_desc veto = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                           .name = "VetoPass",
                                           .kind = KILN_FUSION_PATTERN,
                                           .stage = KILN_FUSION_STAGE_BEFORE_INFER_SHAPE,
                                           .patterns = rr_patterns,
                                           .meet_requirements = veto_all,
                                           .replacement = rr_replace};

/* M9: Data -> Abs -> Relu -> Abs fused into one Abs. */
static kiln_status arr_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)e;
    int32_t d = kiln_pattern_node(p, "x", "Data"), a = kiln_pattern_node(p, "abs", "Abs");
    int32_t r = kiln_pattern_node(p, "relu", "Relu"), b = kiln_pattern_node(p, "abs1", "Abs");
    kiln_pattern_edge(p, d, 0, a, 0);
    kiln_pattern_edge(p, a, 0, r, 0);
    kiln_pattern_edge(p, r, 0, b, 0);
    return kiln_pattern_output(p, b, 0);
}

static kiln_status abs_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                               const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g, (void)m;
    return one_node(repl, "fused_abs", "Abs");
}

static const kiln_fusion_pass_desc abs_relu_abs = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                   .name = "AbsReluAbsFusionPass",
                                                   .kind = KILN_FUSION_PATTERN,
                                                   .stage = KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION,
                                                   .patterns = arr_patterns,
                                                   .replacement = abs_replace};

/* M10: TransData -> Relu. */
static kiln_status td_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)e;
    int32_t d = kiln_pattern_node(p, "x", "Data"), t = kiln_pattern_node(p, "td", "TransData");
    kiln_pattern_edge(p, d, 0, t, 0);
    return kiln_pattern_output(p, t, 0);
}

static kiln_status td_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g, (void)m;
    return one_node(repl, "relu_from_transdata", "Relu");
}

static const kiln_fusion_pass_desc transdata_to_relu = {
    .struct_size = sizeof(kiln_fusion_pass_desc),
    .name = "TransDataToReluPass",
    .kind = KILN_FUSION_PATTERN,
    .stage = KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE,
    .patterns = td_patterns,
    .replacement = td_replace};

/* A replacement with a NetOutput of two inputs for a one-output boundary. */
static kiln_status bad_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                               const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g, (void)m;
    kiln_node_id r = kiln_graph_add_node(repl, "r", "Relu", 1, 1);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 2, 0);
    kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, r, 0);
    kiln_edge_add(repl, r, 0, out, 0);
    kiln_edge_add(repl, r, 0, out, 1);
    return KILN_OK;
}

static const kiln_fusion_pass_desc bad_arity = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                .name = "BadArityPass",
                                                .kind = KILN_FUSION_PATTERN,
                                                .stage = KILN_FUSION_STAGE_AFTER_INFER_SHAPE,
                                                .patterns = rr_patterns,
                                                .replacement = bad_replace};

static kiln_status noout_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)e;
    int32_t d = kiln_pattern_node(p, "x", "Data"), r = kiln_pattern_node(p, "r", "Relu");
    return kiln_pattern_edge(p, d, 0, r, 0);
}

static const kiln_fusion_pass_desc no_output = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                .name = "NoOutputPass",
                                                .kind = KILN_FUSION_PATTERN,
                                                .stage = KILN_FUSION_STAGE_AFTER_INFER_SHAPE,
                                                .patterns = noout_patterns,
                                                .replacement = rr_replace};

/* DECOMPOSE: Square(x) -> Mul(x, x). */
static kiln_status sq_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g;
    if (kiln_match_input_count(m) != 1 || kiln_match_output_count(m) != 1 ||
        kiln_match_node_count(m) != 1)
        return KILN_ERR_INVALID;
    kiln_node_id x = kiln_fusion_replacement_input(repl, 0);
    kiln_node_id mul = kiln_graph_add_node(repl, "sq_mul", "Mul", 2, 1);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    if (!mul || !out || kiln_edge_add(repl, x, 0, mul, 0) || kiln_edge_add(repl, x, 0, mul, 1))
        return KILN_ERR_NOMEM;
    return kiln_edge_add(repl, mul, 0, out, 0);
}

static const char *const square_ops[] = {"Square", NULL};
static const kiln_fusion_pass_desc decompose_square = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                       .name = "SquareDecomposePass",
                                                       .kind = KILN_FUSION_DECOMPOSE,
                                                       .stage = KILN_FUSION_STAGE_BUILTIN,
                                                       .decompose_ops = square_ops,
                                                       .replacement = sq_replace};

/* BASE passes record their name and mark every graph they see. */
static kiln_pass_result base_run(void *inst, kiln_pass_ctx *c, kiln_graph *g)
{
    (void)inst;
    size_t len = strlen(trace);
    snprintf(trace + len, sizeof(trace) - len, "%s@%s ", kiln__passctx_pass_name(c),
             kiln_graph_name(g));
    kiln_attrs_set_bool(kiln_graph_attrs(g), kiln__passctx_pass_name(c), true);
    return KILN_PASS_CHANGED;
}

#define BASE(nm)                                                                                   \
    {                                                                                              \
        .struct_size = sizeof(kiln_fusion_pass_desc), .name = nm, .kind = KILN_FUSION_BASE,        \
        .stage = KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION, .run = base_run                           \
    }
static const kiln_fusion_pass_desc base_b = BASE("BOrderPass");
static const kiln_fusion_pass_desc base_c = BASE("COrderPass");
static const kiln_fusion_pass_desc base_a = BASE("AOrderPass");

/* A base pass that turns every Neg into a Relu, between two Relu-Relu pattern
 * passes (the executor runs a stage's passes in name order). */
static kiln_pass_result retype_run(void *inst, kiln_pass_ctx *c, kiln_graph *g)
{
    (void)inst, (void)c;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v))
        if (strcmp(kiln_node_op_str(g, v), "Neg") == 0 && kiln_node_set_op(g, v, "Relu") != KILN_OK)
            return KILN_PASS_FAILED;
    return KILN_PASS_CHANGED;
}
static const kiln_fusion_pass_desc retype_base = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                  .name = "MRetypeBasePass",
                                                  .kind = KILN_FUSION_BASE,
                                                  .stage = KILN_FUSION_STAGE_BUILTIN,
                                                  .run = retype_run};
#define RELU_RELU(nm)                                                                              \
    {                                                                                              \
        .struct_size = sizeof(kiln_fusion_pass_desc), .name = nm, .kind = KILN_FUSION_PATTERN,     \
        .stage = KILN_FUSION_STAGE_BUILTIN, .patterns = rr_patterns, .replacement = rr_replace     \
    }
static const kiln_fusion_pass_desc relu_relu_a = RELU_RELU("AReluReluPass");
static const kiln_fusion_pass_desc relu_relu_z = RELU_RELU("ZReluReluPass");

/* ---- fixture ------------------------------------------------------------------ */

static const kiln_fusion_pass_desc *to_register[8];
static uint32_t nreg;

static kiln_status reg_init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *e)
{
    (void)host, (void)e;
    for (uint32_t i = 0; i < nreg; i++)
        if (kiln_register_fusion_pass(reg, to_register[i]) != KILN_OK)
            return KILN_ERR_PLUGIN_INIT;
    return KILN_OK;
}

static const kiln_plugin_desc plugin = {.struct_size = sizeof(kiln_plugin_desc),
                                        .abi_major = KILN_ABI_MAJOR,
                                        .abi_minor = KILN_ABI_MINOR,
                                        .name = "kiln.test.fusion",
                                        .version = "1",
                                        .init = reg_init};

/* A context with the fusion passes given (NULL-terminated). */
static void setup(const kiln_fusion_pass_desc *first, ...)
{
    va_list ap;
    va_start(ap, first);
    nreg = 0;
    for (const kiln_fusion_pass_desc *d = first; d; d = va_arg(ap, const kiln_fusion_pass_desc *))
        to_register[nreg++] = d;
    va_end(ap);
    trace[0] = 0;
    ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &plugin, NULL, &err), KILN_OK);
    logf_ = tmpfile();
    kiln__passctx_init(&pc, ctx, logf_, &err);
    pc.stage = "optimize_original";
}

static void teardown(kiln_graph *g)
{
    kiln__passctx_fini(&pc);
    if (g)
        kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    fclose(logf_);
}

static uint32_t count_op(const kiln_graph *g, const char *op)
{
    uint32_t n = 0;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v))
        n += strcmp(kiln_node_op_str(g, v), op) == 0;
    return n;
}

/* x -> op -> op ... (n nodes) -> out */
static kiln_graph *chain(const char *op, uint32_t n)
{
    kiln_graph *g = kiln_graph_create(ctx, "chain");
    kiln_node_id prev = kiln_graph_add_node(g, "x", "Data", 0, 1);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%u", i + 1);
        kiln_node_id v = kiln_graph_add_node(g, name, op, 1, 1);
        CU_ASSERT_EQUAL_FATAL(kiln_edge_add(g, prev, 0, v, 0), KILN_OK);
        prev = v;
    }
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    CU_ASSERT_EQUAL_FATAL(kiln_edge_add(g, prev, 0, o, 0), KILN_OK);
    return g;
}

static void expect_msg(const char *msg)
{
    char buf[1024];
    kiln_error_format(&err, buf, sizeof(buf));
    if (!strstr(buf, msg)) {
        fprintf(stderr, "expected '%s' in '%s'\n", msg, buf);
        CU_FAIL("message");
    }
}

/* Three alternatives over the same Relu candidates: Relu(Erf(x)) (matches nothing
 * here: it only reads every candidate first), Relu(Sigmoid(x)) replaced by x (a
 * pass-through: the Relu's consumers are re-fed from x), Relu(Neg(x)) replaced by
 * an Abs.  On in -> Neg -> Sigmoid -> Relu r1 -> Relu r2 -> out, alternative 1
 * removes Sigmoid and r1, so r2 reads the Neg, and alternative 2 must see that. */
static kiln_status stale_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)e;
    static const char *const heads[] = {"Erf", "Sigmoid", "Neg"};
    for (int a = 0; a < 3; a++) {
        if (a && kiln_pattern_next(p) != KILN_OK)
            return KILN_ERR_NOMEM;
        int32_t d = kiln_pattern_node(p, "x", "Data"), h = kiln_pattern_node(p, "h", heads[a]);
        int32_t r = kiln_pattern_node(p, "r", "Relu");
        if (kiln_pattern_edge(p, d, 0, h, 0) || kiln_pattern_edge(p, h, 0, r, 0))
            return KILN_ERR_INVALID;
        kiln_status st = kiln_pattern_output(p, r, 0);
        if (st)
            return st;
    }
    return KILN_OK;
}

static kiln_status stale_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                                 const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g;
    if (kiln_match_pattern_index(m) == 2)
        return one_node(repl, "abs", "Abs");
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    return out ? kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, out, 0)
               : KILN_ERR_NOMEM;
}

static const kiln_fusion_pass_desc stale_pass = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                 .name = "StaleRecordPass",
                                                 .kind = KILN_FUSION_PATTERN,
                                                 .stage =
                                                     KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE,
                                                 .patterns = stale_patterns,
                                                 .replacement = stale_replace};

/* ---- tests ---------------------------------------------------------------------- */

/* Relu x4 with Relu-Relu: (n1,n2) and (n3,n4) fuse; the new nodes are not
 * matched again in the same run, so two Relus remain; a second run fuses them. */
static void test_exec_non_overlapping_matches_on_a_chain(void)
{
    setup(&relu_relu, NULL);
    kiln_graph *g = chain("Relu", 4);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 2);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "ReluReluFusionPass", "effected"), 2);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "ReluReluFusionPass", "matched"), 2);
    kiln_test_verify_ok(g);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 1);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_NOT_CHANGED);
    /* other stages do not run it */
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BUILTIN),
                    KILN_PASS_NOT_CHANGED);
    kiln_test_verify_ok(g);
    teardown(g);
}

/* The pattern passes of a stage share an index of the graph's nodes by op; a
 * base pass may change op types, so the passes after it see the new ones. */
static void test_exec_base_pass_retypes_between_pattern_passes(void)
{
    setup(&relu_relu_a, &retype_base, &relu_relu_z, NULL);
    kiln_graph *g = chain("Neg", 4);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BUILTIN), KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "AReluReluPass", "effected"), 0);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "ZReluReluPass", "effected"), 2);
    CU_ASSERT_EQUAL(count_op(g, "Neg"), 0);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 2);
    kiln_test_verify_ok(g);
    teardown(g);
}

/* The matcher keeps what it read of a candidate for the next alternatives; a
 * replacement that re-feeds the candidate must make it read again. */
static void test_exec_rewired_candidate_is_read_again(void)
{
    setup(&stale_pass, NULL);
    kiln_graph *g = kiln_graph_create(ctx, "stale");
    static const char *const ops[] = {"Data", "Neg", "Sigmoid", "Relu", "Relu", "NetOutput"};
    static const char *const names[] = {"in", "neg", "sig", "r1", "r2", "out"};
    kiln_node_id v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = kiln_graph_add_node(g, names[i], ops[i], i ? 1 : 0, i < 5 ? 1 : 0);
        if (i)
            CU_ASSERT_EQUAL_FATAL(kiln_edge_add(g, v[i - 1], 0, v[i], 0), KILN_OK);
    }
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "StaleRecordPass", "effected"), 2);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 0);
    CU_ASSERT_EQUAL(count_op(g, "Abs"), 1);
    kiln_node_id o = kiln_graph_find_node(g, "out");
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, kiln_node_input_peer(g, o, 0).node), "Abs");
    kiln_test_verify_ok(g);
    teardown(g);
}

static void test_exec_meet_requirements_veto_counts_matched(void)
{
    setup(&veto, NULL);
    kiln_graph *g = chain("Relu", 3);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BEFORE_INFER_SHAPE),
                    KILN_PASS_NOT_CHANGED);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 3);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "VetoPass", "matched"), 2);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "VetoPass", "effected"), 0);
    teardown(g);
}

/* M9: data->abs->relu->abs1->out with a control chain abs => relu1 => abs1:
 * fusing abs, relu, abs1 would make a cycle through relu1. */
static void test_exec_m9_cycle_is_avoided(void)
{
    setup(&abs_relu_abs, NULL);
    kiln_graph *g = kiln_graph_create(ctx, "m9");
    kiln_node_id d = kiln_graph_add_node(g, "data", "Data", 0, 1);
    kiln_node_id a = kiln_graph_add_node(g, "abs", "Abs", 1, 1);
    kiln_node_id r = kiln_graph_add_node(g, "relu", "Relu", 1, 1);
    kiln_node_id b = kiln_graph_add_node(g, "abs1", "Abs", 1, 1);
    kiln_node_id r1 = kiln_graph_add_node(g, "relu1", "Relu", 1, 1);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 2, 0);
    kiln_edge_add(g, d, 0, a, 0);
    kiln_edge_add(g, a, 0, r, 0);
    kiln_edge_add(g, r, 0, b, 0);
    kiln_edge_add(g, d, 0, r1, 0);
    kiln_edge_add(g, b, 0, o, 0);
    kiln_edge_add(g, r1, 0, o, 1);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, a, r1), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, r1, b), KILN_OK);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION),
                    KILN_PASS_NOT_CHANGED);
    CU_ASSERT_EQUAL(kiln_error_code(&err), KILN_OK);
    CU_ASSERT_EQUAL(count_op(g, "Abs"), 2);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "AbsReluAbsFusionPass", "matched"), 1);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "AbsReluAbsFusionPass", "effected"), 0);
    /* without the control chain the same match is applied */
    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, r1, b), KILN_OK);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION),
                    KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(count_op(g, "Abs"), 1);
    kiln_test_verify_ok(g);
    teardown(g);
}

static char switch_file[256];

static void write_switch_file(const char *json)
{
    snprintf(switch_file, sizeof(switch_file), "/tmp/kiln_fusion_switch_%d.json", (int)getpid());
    FILE *f = fopen(switch_file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(json, f);
    fclose(f);
}

/* Run TransDataToReluPass on data->transdata->out; true when it changed. */
static bool m10_run(const char *opt, const char *file_json)
{
    setup(&transdata_to_relu, NULL);
    if (opt)
        CU_ASSERT_EQUAL_FATAL(kiln_ctx_set_option(ctx, "ge.optimizationSwitch", opt), KILN_OK);
    if (file_json) {
        write_switch_file(file_json);
        CU_ASSERT_EQUAL_FATAL(kiln_ctx_set_option(ctx, "ge.fusionSwitchFile", switch_file),
                              KILN_OK);
    }
    kiln_graph *g = chain("TransData", 1);
    kiln_pass_result r =
        kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE);
    CU_ASSERT_NOT_EQUAL(r, KILN_PASS_FAILED);
    bool changed = r == KILN_PASS_CHANGED;
    CU_ASSERT_EQUAL(count_op(g, "Relu"), changed ? 1u : 0u);
    teardown(g);
    if (file_json)
        unlink(switch_file);
    return changed;
}

static void test_exec_m10_switches(void)
{
    CU_ASSERT_TRUE(m10_run(NULL, NULL)); /* default on */
    CU_ASSERT_FALSE(m10_run("TransDataToReluPass:off", NULL));
    CU_ASSERT_TRUE(m10_run("Other:off; TransDataToReluPass:on", NULL));
    CU_ASSERT_FALSE(
        m10_run(NULL, "{\"Switch\":{\"GraphFusion\":{\"TransDataToReluPass\":\"off\"}}}"));
    CU_ASSERT_FALSE(m10_run(NULL, "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"off\"}}}"));
    CU_ASSERT_TRUE(m10_run(NULL, "{\"Switch\":{\"GraphFusion\":{\"TransDataToReluPass\":\"on\","
                                 "\"ALL\":\"off\"}}}"));
    CU_ASSERT_TRUE(m10_run(NULL, "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\"}}}"));
    /* the option beats the file */
    CU_ASSERT_TRUE(
        m10_run("TransDataToReluPass:on", "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"off\"}}}"));
}

static void test_exec_bad_switches_are_errors(void)
{
    setup(&transdata_to_relu, NULL);
    kiln_graph *g = chain("TransData", 1);
    kiln_ctx_set_option(ctx, "ge.fusionSwitchFile", "/nonexistent/switch.json");
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_FAILED);
    expect_msg("ge.fusionSwitchFile /nonexistent/switch.json");
    write_switch_file("{\"Switch\": {\"GraphFusion\": {\"ALL\": true}}}");
    kiln_ctx_set_option(ctx, "ge.fusionSwitchFile", switch_file);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_FAILED);
    expect_msg("Switch.GraphFusion.ALL must be \"on\" or \"off\"");
    write_switch_file("{\"Switch\": ");
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_FAILED);
    expect_msg(switch_file);
    unlink(switch_file);
    kiln_ctx_set_option(ctx, "ge.fusionSwitchFile", "");
    kiln_ctx_set_option(ctx, "ge.optimizationSwitch", "TransDataToReluPass=off");
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_FAILED);
    expect_msg("option ge.optimizationSwitch: bad entry 'TransDataToReluPass=off'");
    CU_ASSERT_EQUAL(count_op(g, "TransData"), 1);
    teardown(g);
}

static void test_exec_decompose_pass(void)
{
    setup(&decompose_square, NULL);
    kiln_graph *g = chain("Square", 2);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BUILTIN), KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(count_op(g, "Square"), 0);
    CU_ASSERT_EQUAL(count_op(g, "Mul"), 2);
    CU_ASSERT_EQUAL(kiln__passctx_stat(&pc, NULL, "SquareDecomposePass", "effected"), 2);
    kiln_test_verify_ok(g);
    /* the second Mul reads the first one twice */
    kiln_node_id out = kiln_graph_find_node(g, "out");
    kiln_node_id m2 = kiln_node_input_peer(g, out, 0).node;
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, m2), "Mul");
    kiln_node_id m1 = kiln_node_input_peer(g, m2, 0).node;
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, m1), "Mul");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, m2, 1).node, m1);
    teardown(g);
}

/* A stage runs its passes in alphabetical order of name, each on the root
 * and then on every subgraph. */
static void test_exec_base_passes_alphabetical_root_then_subgraphs(void)
{
    setup(&base_b, &base_c, &base_a, &relu_relu, NULL);
    kiln_graph *g = kiln_graph_create(ctx, "root");
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_node_id w = kiln_graph_add_node(g, "w", "PartitionedCall", 1, 1);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, x, 0, w, 0);
    kiln_edge_add(g, w, 0, o, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(kiln_node_add_subgraph(g, w, "f", "sub"));
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION),
                    KILN_PASS_CHANGED);
    CU_ASSERT_STRING_EQUAL(trace, "AOrderPass@root AOrderPass@sub BOrderPass@root BOrderPass@sub "
                                  "COrderPass@root COrderPass@sub ");
    /* switched off by name */
    trace[0] = 0;
    kiln_ctx_set_option(ctx, "ge.optimizationSwitch", "BOrderPass:off");
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION),
                    KILN_PASS_CHANGED);
    CU_ASSERT_STRING_EQUAL(trace, "AOrderPass@root AOrderPass@sub COrderPass@root COrderPass@sub ");
    teardown(g);
}

static void test_exec_bad_arity_and_no_output_are_errors(void)
{
    setup(&bad_arity, NULL);
    kiln_graph *g = chain("Relu", 2);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_INFER_SHAPE),
                    KILN_PASS_FAILED);
    expect_msg("fusion pass BadArityPass: the replacement of the match at 'n1' on graph chain "
               "breaks the boundary's arity: a NetOutput with 2 inputs for 1 boundary outputs");
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 2); /* unchanged */
    teardown(g);

    setup(&no_output, NULL);
    g = chain("Relu", 2);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_INFER_SHAPE),
                    KILN_PASS_FAILED);
    expect_msg("pattern 0 of NoOutputPass has no output");
    teardown(g);
}

/* The pattern is found inside a While body (a subgraph of the root). */
static void test_exec_matches_inside_while_body(void)
{
    setup(&relu_relu, NULL);
    kiln_graph *g = kiln_graph_create(ctx, "root");
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_node_id w = kiln_graph_add_node(g, "while", "While", 1, 1);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, x, 0, w, 0);
    kiln_edge_add(g, w, 0, o, 0);
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "cond");
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "body");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cond);
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    kiln_node_id ca = kiln_graph_add_node(cond, "arg", "Data", 0, 1);
    kiln_node_id cr = kiln_graph_add_node(cond, "c", "Relu", 1, 1);
    kiln_node_id co = kiln_graph_add_node(cond, "out", "NetOutput", 1, 0);
    kiln_edge_add(cond, ca, 0, cr, 0);
    kiln_edge_add(cond, cr, 0, co, 0);
    kiln_node_id a = kiln_graph_add_node(body, "arg", "Data", 0, 1);
    kiln_node_id r1 = kiln_graph_add_node(body, "r1", "Relu", 1, 1);
    kiln_node_id r2 = kiln_graph_add_node(body, "r2", "Relu", 1, 1);
    kiln_node_id bo = kiln_graph_add_node(body, "out", "NetOutput", 1, 0);
    kiln_edge_add(body, a, 0, r1, 0);
    kiln_edge_add(body, r1, 0, r2, 0);
    kiln_edge_add(body, r2, 0, bo, 0);
    CU_ASSERT_EQUAL(kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE),
                    KILN_PASS_CHANGED);
    CU_ASSERT_EQUAL(count_op(body, "Relu"), 1);
    CU_ASSERT_EQUAL(count_op(cond, "Relu"), 1);
    teardown(g);
}

/* A fusion pass listed in a stage runs through the pass manager's runner. */
static void test_exec_listed_in_pass_manager_stage(void)
{
    setup(&relu_relu, NULL);
    kiln_graph *g = chain("Relu", 2);
    kiln_pass_inst pi = {0};
    pi.comp = kiln_registry_find(ctx, KILN_COMP_FUSION, "ReluReluFusionPass");
    pi.enabled = true;
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi.comp);
    kiln_passmgr *pm;
    kiln_instrumentation instr = {.bisect_limit = -1, .log = logf_};
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(ctx, &instr, &pm, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__passmgr_run_stage(pm, "optimize_original", &pi, 1, g, &err), KILN_OK);
    CU_ASSERT_EQUAL(count_op(g, "Relu"), 1);
    CU_ASSERT_EQUAL(kiln__passctx_stat(kiln__passmgr_ctx(pm), "optimize_original",
                                       "ReluReluFusionPass", "effected"),
                    1);
    kiln__passmgr_destroy(pm);
    teardown(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_exec_non_overlapping_matches_on_a_chain",
         test_exec_non_overlapping_matches_on_a_chain},
        {"test_exec_meet_requirements_veto_counts_matched",
         test_exec_meet_requirements_veto_counts_matched},
        {"test_exec_rewired_candidate_is_read_again", test_exec_rewired_candidate_is_read_again},
        {"test_exec_base_pass_retypes_between_pattern_passes",
         test_exec_base_pass_retypes_between_pattern_passes},
        {"test_exec_m9_cycle_is_avoided", test_exec_m9_cycle_is_avoided},
        {"test_exec_m10_switches", test_exec_m10_switches},
        {"test_exec_bad_switches_are_errors", test_exec_bad_switches_are_errors},
        {"test_exec_decompose_pass", test_exec_decompose_pass},
        {"test_exec_base_passes_alphabetical_root_then_subgraphs",
         test_exec_base_passes_alphabetical_root_then_subgraphs},
        {"test_exec_bad_arity_and_no_output_are_errors",
         test_exec_bad_arity_and_no_output_are_errors},
        {"test_exec_matches_inside_while_body", test_exec_matches_inside_while_body},
        {"test_exec_listed_in_pass_manager_stage", test_exec_listed_in_pass_manager_stage},
        {NULL, NULL}};
    return kiln_test_run("fusion_exec", cases);
}
