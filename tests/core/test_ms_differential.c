/*
 * test_ms_differential.c - differential test of the multi-stream runtime
 * against the sequential one on random graphs (issue 11 item 4).
 *
 * A seeded generator builds kiln JSON graphs: one to three float32 [4,8]
 * inputs, random constants, chains and fan-outs of element-wise ops (Add, Sub,
 * Mul, Relu, Sigmoid, LeakyRelu, Neg), MatMul with constant [8,8] weights (another
 * engine, so the partitioner and the stream allocator see parallel branches
 * of different engines), Concat of two tensors folded back by a [16,8]
 * MatMul (a continuous input group), If nodes (nested up to two levels, their
 * branches element-wise chains), GE While loops (cond and body, swaps through
 * the loop's buffers), variables written in place by Assign chains (reference
 * ops: one memory symbol written twice, the read ordered before the write by
 * a control edge), outputs picked among the nodes (an input or a constant
 * passed straight through included).  Each graph is compiled with the default
 * manifest twice, once per runtime, and run on the same inputs; the outputs
 * must be byte-identical (the same kernels run on the same data, whatever the
 * stream order or the memory plan).  The sequential reference runs the
 * subgraphs unplanned (MemoryAssigner subgraphs=false) and If/Case as
 * compiled (kiln.lower_control_flow=false); the multistream side runs them
 * planned and lowered to GE's runtime form, so both are checked too.
 *
 * Every 4th graph without variables runs twice on the multistream runtime
 * with profiling on
 * (kiln_model_set_profiling), and its profile must match the schedule: every
 * task once per run on its stream, a flow per event and run from an earlier
 * task of another stream (and under ThreadSanitizer the recording is checked
 * for races).
 *
 * Dynamic memory: the same generator, compiled without MemoryAssigner (no
 * buffer is in a plan) for the multistream runtime with the session option
 * kiln.allocator, three_layer and caching in turn; each graph runs three
 * times (blocks recycled by one run serve the next) and every run's outputs
 * must equal the sequential runtime's.
 *
 * Graph count: KILN_DIFF_GRAPHS (default 1000; 150 in sanitizer builds; the
 * dynamic-memory case takes a third of it), seed KILN_DIFF_SEED (default 1).
 * A failure prints the seed and the graph.
 */
#include "kiln_test.h"
#include "kiln/kiln_embed.h"

#include <math.h>
#include <stdlib.h>

/* ---- a small PRNG (splitmix64) ---------------------------------------------- */

static uint64_t rng;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t pick(uint32_t n)
{
    return (uint32_t)(next_u64() % n);
}
static float unit(void)
{
    return (float)((double)(next_u64() >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

/* ---- the JSON text ---------------------------------------------------------- */

static void put_const(kiln_test_text *t, const char *name, int rows, int cols)
{
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"Const\",\"outputs\":[{\"dtype\":\"float32\","
           "\"shape\":[%d,%d]}],\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":"
           "\"float32\",\"shape\":[%d,%d],\"data\":[",
        name, rows, cols, rows, cols);
    for (int i = 0; i < rows * cols; i++)
        kiln_test_put(t, "%s%.3f", i ? "," : "", unit() * 0.5);
    kiln_test_put(t, "]}}}}");
}

/* One float32 output whose shape InferShapes fills in. */
#define OUT1 ",\"outputs\":[{\"dtype\":\"float32\"}]"

/* If nodes generated; multistream-side graphs whose subgraphs MemoryAssigner planned */
static uint32_t if_nodes, while_nodes, planned_sub_graphs;
/* If nodes the runtimes lowered at load (multistream side, sequential side) */
static uint32_t lowered_ms, lowered_seq;

static const char *const unary[] = {"Relu", "Sigmoid", "LeakyRelu", "Neg"};
static const char *const binary[] = {"Add", "Sub", "Mul"};

static void gen_if(kiln_test_text *t, const char *nm, const char *a, const char *b,
                   uint32_t depth);

/*
 * One If branch: Data nodes bx0, bx1 (the If's inputs 1 and 2, [4,8]), a
 * chain of element-wise ops over them (sometimes a nested If), and @p nout
 * outputs picked among its tensors, a Data passed straight through included
 * (then the If's output is a view of its input).  Names are prefixed with
 * @p pre (unique in the graph).
 */
static void gen_branch(kiln_test_text *t, const char *role, const char *pre, uint32_t nout,
                       uint32_t depth)
{
    char names[16][48];
    uint32_t n = 0;
    kiln_test_put(t, "\"%s\":{\"name\":\"%s_%s\",\"nodes\":[", role, pre, role);
    for (uint32_t i = 0; i < 2; i++) {
        snprintf(names[n], sizeof(names[n]), "%s_bx%u", pre, i);
        kiln_test_put(t, "%s\n{\"name\":\"%s\",\"type\":\"Data\",\"attrs\":{"
                      "\"_parent_node_index\":%u},\"outputs\":[{\"dtype\":\"float32\","
                      "\"shape\":[4,8]}]}", i ? "," : "", names[n], i + 1);
        n++;
    }
    uint32_t nops = pick(5);
    for (uint32_t i = 0; i < nops; i++) {
        uint32_t a = pick(3) ? n - 1 : pick(n), b = pick(n);
        snprintf(names[n], sizeof(names[n]), "%s_o%u", pre, i);
        if (depth < 2 && pick(5) == 0) {
            gen_if(t, names[n], names[a], names[b], depth + 1);
        } else if (pick(2)) {
            kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\","
                          "\"%s:0\"]" OUT1 "}", names[n], binary[pick(3)], names[a], names[b]);
        } else {
            kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\"]"
                          OUT1 "}", names[n], unary[pick(4)], names[a]);
        }
        n++;
    }
    kiln_test_put(t, ",\n{\"name\":\"%s_%s_out\",\"type\":\"NetOutput\",\"inputs\":[", pre,
                  role);
    for (uint32_t i = 0; i < nout; i++)
        kiln_test_put(t, "%s\"%s:0\"", i ? "," : "", names[i == 0 ? n - 1 : pick(n)]);
    kiln_test_put(t, "]}]}");
}

/* An If node @p nm on (@p a, @p b): condition mean(a) > 0, one output. */
static void gen_if(kiln_test_text *t, const char *nm, const char *a, const char *b,
                   uint32_t depth)
{
    kiln_test_put(t, ",\n{\"name\":\"%s_mean\",\"type\":\"ReduceMean\",\"inputs\":[\"%s:0\"],"
                  "\"attrs\":{\"keepdims\":0}" OUT1 "}", nm, a);
    kiln_test_put(t, ",\n{\"name\":\"%s_zero\",\"type\":\"Const\",\"outputs\":[{\"dtype\":"
                  "\"float32\",\"shape\":[]}],\"attrs\":{\"value\":{\"type\":\"tensor\","
                  "\"value\":{\"dtype\":\"float32\",\"shape\":[],\"data\":[0]}}}}", nm);
    kiln_test_put(t, ",\n{\"name\":\"%s_cond\",\"type\":\"Greater\",\"inputs\":[\"%s_mean:0\","
                  "\"%s_zero:0\"],\"outputs\":[{\"dtype\":\"bool\"}]}", nm, nm, nm);
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"If\",\"inputs\":[\"%s_cond:0\",\"%s:0\","
                  "\"%s:0\"]" OUT1 ",\"subgraphs\":{", nm, nm, a, b);
    char pre[64];
    snprintf(pre, sizeof(pre), "%s_t", nm);
    gen_branch(t, "then_branch", pre, 1, depth);
    kiln_test_put(t, ",");
    snprintf(pre, sizeof(pre), "%s_e", nm);
    gen_branch(t, "else_branch", pre, 1, depth);
    kiln_test_put(t, "}}");
}

#define F48 "{\"dtype\":\"float32\",\"shape\":[4,8]}"
#define I64 "{\"dtype\":\"int64\",\"shape\":[]}"

/*
 * A GE While @p nm_loop over (i, x, y) from (0, @p a, @p b): cond i < 1..4;
 * the body adds 1 to i and runs a chain of element-wise ops over x and y;
 * its new x is the chain's end, its new y the chain's other end or x itself
 * (a swap through the loop's buffers).  @p nm = loop:1 + loop:2.
 */
static void gen_while(kiln_test_text *t, const char *nm, const char *a, const char *b)
{
    kiln_test_put(t, ",\n{\"name\":\"%s_i0\",\"type\":\"Const\",\"outputs\":[" I64 "],"
                  "\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"int64\","
                  "\"shape\":[],\"data\":[0]}}}}", nm);
    kiln_test_put(t, ",\n{\"name\":\"%s_loop\",\"type\":\"While\",\"inputs\":[\"%s_i0:0\","
                  "\"%s:0\",\"%s:0\"],\"outputs\":[" I64 "," F48 "," F48 "],\"subgraphs\":{",
                  nm, nm, a, b);
    kiln_test_put(t, "\"cond\":{\"name\":\"%s_cond\",\"nodes\":["
                  "{\"name\":\"%s_ci\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":0},"
                  "\"outputs\":[" I64 "]},"
                  "{\"name\":\"%s_lim\",\"type\":\"Const\",\"outputs\":[" I64 "],\"attrs\":{"
                  "\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"int64\",\"shape\":[],"
                  "\"data\":[%u]}}}},"
                  "{\"name\":\"%s_lt\",\"type\":\"Less\",\"inputs\":[\"%s_ci:0\",\"%s_lim:0\"],"
                  "\"outputs\":[{\"dtype\":\"bool\",\"shape\":[]}]},"
                  "{\"name\":\"%s_co\",\"type\":\"NetOutput\",\"inputs\":[\"%s_lt:0\"]}]},",
                  nm, nm, nm, 1 + pick(4), nm, nm, nm, nm, nm);
    kiln_test_put(t, "\"body\":{\"name\":\"%s_body\",\"nodes\":["
                  "{\"name\":\"%s_bi\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":0},"
                  "\"outputs\":[" I64 "]},"
                  "{\"name\":\"%s_bx\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":1},"
                  "\"outputs\":[" F48 "]},"
                  "{\"name\":\"%s_by\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":2},"
                  "\"outputs\":[" F48 "]},"
                  "{\"name\":\"%s_one\",\"type\":\"Const\",\"outputs\":[" I64 "],\"attrs\":{"
                  "\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"int64\",\"shape\":[],"
                  "\"data\":[1]}}}},"
                  "{\"name\":\"%s_inc\",\"type\":\"Add\",\"inputs\":[\"%s_bi:0\",\"%s_one:0\"],"
                  "\"outputs\":[" I64 "]}",
                  nm, nm, nm, nm, nm, nm, nm, nm);
    char names[8][48];
    uint32_t n = 0;
    snprintf(names[n++], sizeof(names[0]), "%s_bx", nm);
    snprintf(names[n++], sizeof(names[0]), "%s_by", nm);
    uint32_t nops = 1 + pick(3);
    for (uint32_t i = 0; i < nops; i++) {
        uint32_t x = pick(2) ? n - 1 : pick(n), y = pick(n);
        snprintf(names[n], sizeof(names[0]), "%s_b%u", nm, i);
        if (pick(2))
            kiln_test_put(t, ",{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\",\"%s:0\"]"
                          OUT1 "}", names[n], binary[pick(3)], names[x], names[y]);
        else
            kiln_test_put(t, ",{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\"]" OUT1 "}",
                          names[n], unary[pick(4)], names[x]);
        n++;
    }
    /* new y: the old x (a swap) or another tensor of the body */
    const char *ny = pick(3) ? names[0] : names[pick(n)];
    kiln_test_put(t, ",{\"name\":\"%s_bo\",\"type\":\"NetOutput\",\"inputs\":[\"%s_inc:0\","
                  "\"%s:0\",\"%s:0\"]}]}}}", nm, nm, names[n - 1], ny);
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"Add\",\"inputs\":[\"%s_loop:1\","
                  "\"%s_loop:2\"]" OUT1 "}", nm, nm, nm);
}

/* Variables and Assign in the graphs (off where a graph runs several times:
 * a variable keeps what Assign wrote from run to run); whether the last
 * graph made has one */
static bool gen_vars, graph_has_vars;
static uint32_t var_nodes;

/*
 * A variable (random [4,8] start value) written in place: r = v + @p b read
 * first, then Assign(v, @p a) after r (a control edge), and sometimes a
 * second Assign through the first one's output (an in-place chain over one
 * memory); @p nm = the last write + r.  The Assigns' outputs are references
 * to v (InferShapes sets ref_input 0): one memory symbol, written in place.
 */
static void gen_assign(kiln_test_text *t, const char *nm, const char *a, const char *b)
{
    char v[24], last[24];
    snprintf(v, sizeof(v), "%s_v", nm);
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"Variable\",\"outputs\":[" F48 "],"
                  "\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"float32\","
                  "\"shape\":[4,8],\"data\":[", v);
    for (int i = 0; i < 32; i++)
        kiln_test_put(t, "%s%.3f", i ? "," : "", unit() * 0.5);
    kiln_test_put(t, "]}}}}");
    kiln_test_put(t, ",\n{\"name\":\"%s_r\",\"type\":\"Add\",\"inputs\":[\"%s:0\",\"%s:0\"]"
                  OUT1 "}", nm, v, b);
    /* the read before the write, as a TensorFlow graph orders it (a control
     * edge): without it the plan checker refuses the build (the Assign would
     * overwrite what r still reads, docs/memory_planning.md) */
    kiln_test_put(t, ",\n{\"name\":\"%s_as\",\"type\":\"Assign\",\"inputs\":[\"%s:0\","
                  "\"%s:0\"],\"control_inputs\":[\"%s_r\"],\"outputs\":[" F48 "]}",
                  nm, v, a, nm);
    snprintf(last, sizeof(last), "%s_as", nm);
    if (pick(2)) {
        kiln_test_put(t, ",\n{\"name\":\"%s_as2\",\"type\":\"Assign\",\"inputs\":[\"%s:0\","
                      "\"%s_r:0\"],\"outputs\":[" F48 "]}", nm, last, nm);
        snprintf(last, sizeof(last), "%s_as2", nm);
    }
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"Add\",\"inputs\":[\"%s:0\",\"%s_r:0\"]"
                  OUT1 "}", nm, last, nm);
}

/* A random graph; *nin receives its input count. */
static char *gen_graph(uint32_t id, uint32_t *nin)
{
    kiln_test_text t = {NULL, 0, 0};
    char names[64][16];
    uint32_t n = 0;
    graph_has_vars = false;
    *nin = 1 + pick(3);
    kiln_test_put(&t, "{\"kiln_graph\":1,\"name\":\"rand%u\",\"nodes\":[", id);
    for (uint32_t i = 0; i < *nin; i++) {
        snprintf(names[n], sizeof(names[n]), "in%u", i);
        kiln_test_put(&t, "%s\n{\"name\":\"%s\",\"type\":\"Data\",\"attrs\":{\"index\":%u},\"outputs\":[{"
                "\"dtype\":\"float32\",\"shape\":[4,8]}]}", i ? "," : "", names[n], i);
        n++;
    }
    uint32_t nconst = pick(2);
    for (uint32_t i = 0; i < nconst; i++) {
        snprintf(names[n], sizeof(names[n]), "k%u", i);
        put_const(&t, names[n], 4, 8);
        n++;
    }
    uint32_t nops = 4 + pick(20), w = 0;
    for (uint32_t i = 0; i < nops && n < 60; i++) {
        /* prefer recent tensors (chains), sometimes any (fan-out) */
        uint32_t a = pick(4) ? n - 1 - pick(n < 3 ? n : 3) : pick(n);
        uint32_t b = pick(n);
        char nm[16];
        snprintf(nm, sizeof(nm), "n%u", i);
        uint32_t kind = pick(gen_vars ? 14 : 13);
        if (kind == 13) { /* a variable written in place */
            gen_assign(&t, nm, names[a], names[b]);
            var_nodes++;
            graph_has_vars = true;
        } else if (kind == 12) { /* a loop: its cond and body get plans of their own */
            gen_while(&t, nm, names[a], names[b]);
            while_nodes++;
        } else if (kind >= 10) { /* control flow: its branches get plans of their own */
            gen_if(&t, nm, names[a], names[b], 0);
            if_nodes++;
        } else if (kind < 4) {
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\",\"%s:0\"]" OUT1 "}", nm,
                binary[pick(3)], names[a], names[b]);
        } else if (kind < 7) {
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\"]" OUT1 "}", nm,
                unary[pick(4)], names[a]);
        } else if (kind < 9) {
            char wn[16];
            snprintf(wn, sizeof(wn), "w%u", w++);
            put_const(&t, wn, 8, 8);
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"MatMul\",\"inputs\":[\"%s:0\",\"%s:0\"]" OUT1
                "}", nm, names[a], wn);
        } else {
            char wn[16], cn[20];
            snprintf(wn, sizeof(wn), "w%u", w++);
            snprintf(cn, sizeof(cn), "%s_cat", nm);
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"Concat\",\"inputs\":[\"%s:0\",\"%s:0\"],"
                    "\"attrs\":{\"axis\":1}" OUT1 "}", cn, names[a], names[b]);
            put_const(&t, wn, 16, 8);
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"MatMul\",\"inputs\":[\"%s:0\",\"%s:0\"]" OUT1
                "}", nm, cn, wn);
        }
        snprintf(names[n], sizeof(names[n]), "%s", nm);
        n++;
    }
    /* outputs: the last node, plus up to two others (any tensor, inputs included) */
    uint32_t nout = 1 + pick(3);
    kiln_test_put(&t, ",\n{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"%s:0\"", names[n - 1]);
    for (uint32_t i = 1; i < nout; i++)
        kiln_test_put(&t, ",\"%s:0\"", names[pick(n)]);
    kiln_test_put(&t, "]}\n]}\n");
    return t.s;
}

/* ---- compile and run on one runtime ------------------------------------------------- */

typedef struct result {
    uint32_t n;
    kiln_tensor t[8];
} result;

static void result_free(result *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        free((void *)(uintptr_t)r->t[i].dims);
        free(r->t[i].data);
    }
    r->n = 0;
}

/* Graphs whose compiled root ran on several streams / used events (multistream side). */
static uint32_t multi_stream_graphs, event_graphs;
/* Multistream runs profiled (every 4th graph: twice, kiln_model_set_profiling) and
 * profiles that did not match the schedule. */
static uint32_t profiled_graphs, profile_mismatches, ms_calls;

/*
 * The profile of two runs of @p m must hold every task of the schedule @p sch
 * twice, each on its stream, and one flow per event and run, from a task of
 * one stream to a later task of another.  Prints what differs.
 */
static void check_profile(kiln_model *m, const kiln_schedule *sch)
{
    kiln_run_profile p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    kiln_error *err = kiln_error_create();
    bool ok = kiln_model_profile(m, &p, err) == KILN_OK;
    kiln_error_destroy(err);
    uint32_t tasks = 0, nev = 0;
    for (uint32_t k = 0; k < kiln_schedule_stream_count(sch); k++) {
        uint32_t cnt = 0;
        kiln_schedule_stream_steps(sch, k, &cnt);
        tasks += cnt;
    }
    kiln_schedule_events(sch, &nev);
    /* an If's branch steps are recorded inside its task (depth 1 and more) */
    uint32_t top = 0;
    for (uint32_t i = 0; ok && i < p.task_count; i++)
        top += p.tasks[i].depth == 0;
    ok = ok && p.run_count == 2 && top == 2 * tasks && p.flow_count == 2 * nev &&
         p.stream_count == kiln_schedule_stream_count(sch);
    for (uint32_t i = 0; ok && i < p.task_count; i++)
        ok = p.tasks[i].end_ns >= p.tasks[i].start_ns &&
             (p.tasks[i].depth > 0 ||
              kiln_schedule_stream(sch, p.tasks[i].node) == (int32_t)p.tasks[i].stream);
    for (uint32_t i = 0; ok && i < p.flow_count; i++) {
        const kiln_prof_task *a = &p.tasks[p.flows[i].send], *b = &p.tasks[p.flows[i].recv];
        ok = a->stream != b->stream && a->run == b->run && a->end_ns <= b->start_ns;
    }
    if (!ok) {
        fprintf(stderr, "profile: %u runs, %u top-level tasks (want %u), %u flows (want %u), "
                "%u streams\n", p.run_count, top, 2 * tasks, p.flow_count, 2 * nev,
                p.stream_count);
        profile_mismatches++;
    }
    profiled_graphs++;
}

static kiln_status run_on_n(kiln_session *s, const char *json, const float *in, uint32_t nin,
                            result *r, uint32_t nrun, kiln_error *err);

static kiln_status run_on(kiln_session *s, const char *json, const float *in, uint32_t nin,
                          result *r, kiln_error *err)
{
    return run_on_n(s, json, in, nin, r, 1, err);
}

/* Outputs of run @p nrun (earlier runs' outputs must equal it: else ERR_INTERNAL). */
static kiln_status run_on_n(kiln_session *s, const char *json, const float *in, uint32_t nin,
                            result *r, uint32_t nrun, kiln_error *err)
{
    kiln_model *m = NULL;
    kiln_status st = kiln_model_import_json(s, json, strlen(json), &m, err);
    static const int64_t dims[2] = {4, 8};
    for (uint32_t i = 0; st == KILN_OK && i < nin; i++) {
        kiln_tensor x = {KILN_DT_FLOAT32, 2, dims, (void *)(uintptr_t)(in + 32 * i),
                         32 * sizeof(float)};
        st = kiln_model_set_input_at(m, i, &x, err);
    }
    bool ms = strcmp(kiln_session_option(s, "kiln.runtime"), "multistream") == 0;
    /* profiling runs the graph twice: not where a variable changes between runs */
    bool prof = ms && nrun == 1 && ms_calls++ % 4 == 0 && !graph_has_vars;
    if (st == KILN_OK)
        st = kiln_model_compile(m, NULL, err);
    if (st == KILN_OK && prof)
        st = kiln_model_set_profiling(m, true, err);
    if (st == KILN_OK)
        st = kiln_model_run(m, err);
    if (st == KILN_OK && prof)
        st = kiln_model_run(m, err);
    for (uint32_t k = 1; st == KILN_OK && k < nrun; k++) {
        /* the first output's bytes must not change from run to run */
        const kiln_tensor *o = kiln_model_output(m, 0);
        void *before = o ? malloc(o->nbytes + 1) : NULL;
        size_t nb = o ? o->nbytes : 0;
        if (before)
            memcpy(before, o->data, nb);
        st = kiln_model_run(m, err);
        o = kiln_model_output(m, 0);
        if (st == KILN_OK && before && (!o || o->nbytes != nb || memcmp(before, o->data, nb)))
            st = kiln_errorf(err, KILN_ERR_INTERNAL, "run %u's output 0 differs from run %u's",
                             k + 1, k);
        free(before);
    }
    /* the runtime lowered every If at load (GE's runtime form, seq_lower.c)? */
    kiln_graph *mg = st == KILN_OK ? kiln_model_graph(m) : NULL;
    for (uint32_t i = 0; mg && i <= kiln_graph_all_subgraph_count(mg); i++) {
        kiln_graph *sg = i ? kiln_graph_all_subgraph(mg, i - 1) : mg;
        for (kiln_node_id v = sg ? kiln_graph_next_node(sg, 0) : 0; v; v = kiln_graph_next_node(sg, v)) {
            bool low = false;
            if (strcmp(kiln_node_op_str(sg, v), "If") != 0)
                continue;
            if (kiln_attrs_get_bool(kiln_node_attrs(sg, v), "_bg_lowered", &low) && low)
                *(ms ? &lowered_ms : &lowered_seq) += 1;
        }
    }
    int64_t nsub = 0;
    if (st == KILN_OK && ms &&
        kiln_attrs_get_int(kiln_graph_attrs(kiln_model_graph(m)), "_kiln_memory_subgraphs",
                           &nsub) &&
        nsub > 0)
        planned_sub_graphs++;
    const kiln_schedule *sch = NULL;
    if (st == KILN_OK && ms && kiln_schedule_get(kiln_model_graph(m), &sch, NULL) == KILN_OK) {
        uint32_t nev = 0;
        kiln_schedule_events(sch, &nev);
        multi_stream_graphs += kiln_schedule_stream_count(sch) > 1;
        event_graphs += nev > 0;
        if (prof)
            check_profile(m, sch);
    }
    r->n = 0;
    for (uint32_t j = 0; st == KILN_OK && j < kiln_model_output_count(m) && j < 8; j++) {
        const kiln_tensor *o = kiln_model_output(m, j);
        kiln_tensor *c = &r->t[r->n++];
        *c = *o;
        int64_t *d = malloc(sizeof(int64_t) * (o->rank + 1));
        memcpy(d, o->dims, sizeof(int64_t) * o->rank);
        c->dims = d;
        c->data = malloc(o->nbytes + 1);
        memcpy(c->data, o->data, o->nbytes);
    }
    kiln_model_destroy(m);
    return st;
}

/* Graph count and seed (KILN_DIFF_GRAPHS, KILN_DIFF_SEED). */
static uint32_t graph_count(void)
{
    const char *e = getenv("KILN_DIFF_GRAPHS");
    return e ? (uint32_t)atoi(e) : (getenv("KILN_TEST_SANITIZE") ? 150 : 1000);
}

static uint64_t graph_seed(void)
{
    const char *e = getenv("KILN_DIFF_SEED");
    return e ? strtoull(e, NULL, 10) : 1;
}

/*
 * @p count random graphs (generator seeded with @p seed * @p mult + g) through
 * the sequential runtime and through ms[g % nms], @p nrun runs there; every
 * output must be byte-identical.  @p what names the multistream sessions in a
 * failure (ms_name[g % nms]).  Returns the outputs compared.
 */
static uint32_t compare_graphs(kiln_session *seq, kiln_session *const *ms,
                               const char *const *ms_name, uint32_t nms, uint32_t count,
                               uint64_t seed, uint64_t mult, uint32_t nrun)
{
    kiln_error *err = kiln_error_create();
    uint32_t failures = 0, outputs = 0;
    for (uint32_t g = 0; g < count && failures < 3; g++) {
        rng = seed * mult + g;
        uint32_t nin = 0;
        char *json = gen_graph(g, &nin);
        float in[96];
        for (int i = 0; i < 96; i++)
            in[i] = unit() * 2.0f;
        result a, b;
        kiln_error_clear(err);
        kiln_status sa = run_on(seq, json, in, nin, &a, err);
        char msg[2048] = "";
        if (sa != KILN_OK)
            kiln_error_format(err, msg, sizeof(msg));
        kiln_error_clear(err);
        kiln_status sb =
            sa == KILN_OK ? run_on_n(ms[g % nms], json, in, nin, &b, nrun, err) : KILN_OK;
        if (sa == KILN_OK && sb != KILN_OK)
            kiln_error_format(err, msg, sizeof(msg));
        bool same = sa == KILN_OK && sb == KILN_OK && a.n == b.n;
        for (uint32_t j = 0; same && j < a.n; j++)
            same = a.t[j].nbytes == b.t[j].nbytes &&
                   memcmp(a.t[j].data, b.t[j].data, a.t[j].nbytes) == 0;
        if (!same) {
            failures++;
            fprintf(stderr, "\ngraph %u (seed %llu, %s): sequential %s, multistream %s%s%s\n%s\n",
                    g, (unsigned long long)seed, ms_name[g % nms], kiln_status_name(sa),
                    kiln_status_name(sb), msg[0] ? ": " : "", msg, json);
            CU_FAIL("multistream differs from sequential");
        } else {
            outputs += a.n;
        }
        if (sa == KILN_OK)
            result_free(&a);
        if (sa == KILN_OK && sb == KILN_OK)
            result_free(&b);
        free(json);
    }
    kiln_error_destroy(err);
    return outputs;
}

static void test_random_graphs(void)
{
    setenv("KILN_PLUGIN_PATH", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"), 1);
    uint32_t count = graph_count();
    kiln_session *seq = kiln_test_session("sequential"), *ms = kiln_test_session("multistream");
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ms);
    /* the reference runs the If branches unplanned, a buffer per output: a
     * subgraph plan that shares memory wrongly shows as a difference */
    kiln_error *err = kiln_error_create();
    CU_ASSERT_EQUAL_FATAL(kiln_session_set_pass_option(seq, "MemoryAssigner", "subgraphs",
                                                       "false", err),
                          KILN_OK);
    /* ... and runs If as compiled, not lowered to GE's runtime form */
    CU_ASSERT_EQUAL_FATAL(kiln_session_set_option(seq, "kiln.lower_control_flow", "false", err),
                          KILN_OK);
    kiln_error_destroy(err);
    static const char *const name[1] = {"the memory plan"};
    gen_vars = true;
    uint32_t outputs = compare_graphs(seq, &ms, name, 1, count, graph_seed(), 1000003u, 1);
    gen_vars = false;
    fprintf(stderr, "\n  %u random graphs, %u outputs compared; %u ran on several streams, %u "
            "with events; %u If nodes, %u While nodes, %u graphs with planned subgraphs\n",
            count, outputs, multi_stream_graphs, event_graphs, if_nodes, while_nodes,
            planned_sub_graphs);
    CU_ASSERT(while_nodes > count / 10);
    fprintf(stderr, "  %u variables written by Assign (in-place chains through a reference)\n",
            var_nodes);
    CU_ASSERT(var_nodes > count / 10);
    CU_ASSERT(planned_sub_graphs > count / 4);
    fprintf(stderr, "  If nodes lowered at load: %u on the multistream side, %u on the "
            "sequential reference\n", lowered_ms, lowered_seq);
    CU_ASSERT(lowered_ms >= if_nodes / 2);
    CU_ASSERT_EQUAL(lowered_seq, 0);
    /* the comparison means something only if the streams and events are there */
    CU_ASSERT(multi_stream_graphs > count / 4);
    CU_ASSERT(event_graphs > count / 4);
    fprintf(stderr, "ms_differential: %u multistream runs profiled, %u profiles off the "
            "schedule\n", profiled_graphs, profile_mismatches);
    CU_ASSERT(profiled_graphs >= count / 20); /* not the graphs with variables */
    CU_ASSERT_EQUAL(profile_mismatches, 0);
    kiln_session_destroy(seq);
    kiln_session_destroy(ms);
}

/* The dynamic-memory case: no memory plan, the allocator stack serves every buffer. */
static void test_random_graphs_dynamic_memory(void)
{
    setenv("KILN_PLUGIN_PATH", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"), 1);
    uint32_t count = graph_count() / 3;
    kiln_session *seq = kiln_test_session("sequential");
    kiln_session *dyn[2] = {kiln_test_session("multistream"), kiln_test_session("multistream")};
    static const char *const allocators[2] = {"three_layer", "caching"};
    static const char *const names[2] = {"allocator three_layer", "allocator caching"};
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    kiln_error *err = kiln_error_create();
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(dyn[k]);
        CU_ASSERT_EQUAL_FATAL(kiln_session_select_passes(dyn[k], "^MemoryAssigner$", false, err),
                              KILN_OK);
        CU_ASSERT_EQUAL_FATAL(kiln_session_set_option(dyn[k], "kiln.allocator", allocators[k], err),
                              KILN_OK);
    }
    kiln_error_destroy(err);
    uint32_t outputs = compare_graphs(seq, dyn, names, 2, count, graph_seed(), 7000003u, 3);
    fprintf(stderr, "\n  dynamic memory: %u random graphs (three_layer and caching), %u outputs "
            "compared over three runs each\n", count, outputs);
    kiln_session_destroy(seq);
    kiln_session_destroy(dyn[0]);
    kiln_session_destroy(dyn[1]);
}

/*
 * A subgraph plan must keep a tensor alive while a nested If's output is a
 * view of it: the outer branch computes a = Neg(x), an inner If forwards a
 * (both its branches return their input), then b = MatMul(inner, w) and
 * inner + b.  Were a's buffer freed at the inner If, b would be written over
 * it and the sum would read b for inner.  The default pipeline never lets a
 * branch forward its input (SubgraphPass and HandleMemoryLayoutConflict put a
 * copy between), so both are switched off here: the plan must be safe
 * without them.  Sequential unplanned (the reference), sequential planned
 * and multistream planned must agree (checked to fail with the rule for
 * control-flow consumers removed from ma_subgraphs.c).
 */
#define W8 "0.5,-0.25,0.75,0.1,-0.6,0.3,0.2,-0.9,"
#define W64 W8 W8 W8 W8 W8 W8 W8 "0.5,-0.25,0.75,0.1,-0.6,0.3,0.2,-0.9"
#define FWD_BRANCH(role, pre)                                                                    \
    "\"" role "\":{\"name\":\"" pre "\",\"nodes\":["                                            \
    "{\"name\":\"" pre "_d\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":1},"             \
    "\"outputs\":[{\"dtype\":\"float32\",\"shape\":[4,8]}]},"                                  \
    "{\"name\":\"" pre "_o\",\"type\":\"NetOutput\",\"inputs\":[\"" pre "_d:0\"]}]}"
#define DATA2(pre)                                                                                \
    "{\"name\":\"" pre "x\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":1},"              \
    "\"outputs\":[{\"dtype\":\"float32\",\"shape\":[4,8]}]},"                                  \
    "{\"name\":\"" pre "y\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":2},"              \
    "\"outputs\":[{\"dtype\":\"float32\",\"shape\":[4,8]}]},"
#define COND(pre, src)                                                                            \
    "{\"name\":\"" pre "m\",\"type\":\"ReduceMean\",\"inputs\":[\"" src ":0\"],"                  \
    "\"attrs\":{\"keepdims\":0}" OUT1 "},"                                                      \
    "{\"name\":\"" pre "z\",\"type\":\"Const\",\"outputs\":[{\"dtype\":\"float32\",\"shape\":[]}],"  \
    "\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"float32\",\"shape\":[],"     \
    "\"data\":[0]}}}},"                                                                        \
    "{\"name\":\"" pre "c\",\"type\":\"Greater\",\"inputs\":[\"" pre "m:0\",\"" pre "z:0\"],"     \
    "\"outputs\":[{\"dtype\":\"bool\"}]},"
#define OUTER_BRANCH(role, pre)                                                                   \
    "\"" role "\":{\"name\":\"" pre "\",\"nodes\":[" DATA2(pre)                                   \
    "{\"name\":\"" pre "a\",\"type\":\"Neg\",\"inputs\":[\"" pre "x:0\"]" OUT1 "},"            \
    COND(pre "i", pre "x")                                                                        \
    "{\"name\":\"" pre "inner\",\"type\":\"If\",\"inputs\":[\"" pre "ic:0\",\"" pre "a:0\"]" OUT1  \
    ",\"subgraphs\":{" FWD_BRANCH("then_branch", pre "ft") "," FWD_BRANCH("else_branch", pre "fe") \
    "}},"                                                                                        \
    "{\"name\":\"" pre "w\",\"type\":\"Const\",\"outputs\":[{\"dtype\":\"float32\",\"shape\":[8,8]}]," \
    "\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":\"float32\",\"shape\":[8,8]," \
    "\"data\":[" W64 "]}}}},"                                                                   \
    "{\"name\":\"" pre "b\",\"type\":\"MatMul\",\"inputs\":[\"" pre "inner:0\",\"" pre "w:0\"]" \
    OUT1 "},"                                                                                   \
    "{\"name\":\"" pre "sum\",\"type\":\"Add\",\"inputs\":[\"" pre "inner:0\",\"" pre "b:0\"]" \
    OUT1 "},"                                                                                   \
    "{\"name\":\"" pre "out\",\"type\":\"NetOutput\",\"inputs\":[\"" pre "sum:0\"]}]}"

static void test_subgraph_plan_forwarding(void)
{
    setenv("KILN_PLUGIN_PATH", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"), 1);
    static const char json[] =
        "{\"kiln_graph\":1,\"name\":\"fwd\",\"nodes\":["
        "{\"name\":\"in0\",\"type\":\"Data\",\"attrs\":{\"index\":0},\"outputs\":[{\"dtype\":"
        "\"float32\",\"shape\":[4,8]}]},"
        "{\"name\":\"in1\",\"type\":\"Data\",\"attrs\":{\"index\":1},\"outputs\":[{\"dtype\":"
        "\"float32\",\"shape\":[4,8]}]}," COND("r", "in0")
        "{\"name\":\"top\",\"type\":\"If\",\"inputs\":[\"rc:0\",\"in0:0\",\"in1:0\"]" OUT1
        ",\"subgraphs\":{" OUTER_BRANCH("then_branch", "T") "," OUTER_BRANCH("else_branch", "E")
        "}},"
        "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"top:0\"]}]}";
    kiln_session *ref = kiln_test_session("sequential"), *seq = kiln_test_session("sequential"),
                 *ms = kiln_test_session("multistream");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ms);
    kiln_error *err = kiln_error_create();
    CU_ASSERT_EQUAL_FATAL(kiln_session_set_pass_option(ref, "MemoryAssigner", "subgraphs",
                                                       "false", err),
                          KILN_OK);
    kiln_session *all[3] = {ref, seq, ms};
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL_FATAL(kiln_session_select_passes(
                                  all[k], "^(SubgraphPass|HandleMemoryLayoutConflict)$", false, err),
                              KILN_OK);
    float in[64];
    for (int sign = 0; sign < 2; sign++) { /* both outer branches */
        rng = 77 + (uint64_t)sign;
        for (int i = 0; i < 64; i++)
            in[i] = unit() + (sign ? -1.5f : 1.5f) * (i < 32);
        result a, b, c;
        uint32_t before = planned_sub_graphs;
        CU_ASSERT_EQUAL_FATAL(run_on(ref, json, in, 2, &a, err), KILN_OK);
        CU_ASSERT_EQUAL_FATAL(run_on(seq, json, in, 2, &b, err), KILN_OK);
        CU_ASSERT_EQUAL_FATAL(run_on(ms, json, in, 2, &c, err), KILN_OK);
        CU_ASSERT_EQUAL(planned_sub_graphs, before + 1); /* the multistream side planned */
        CU_ASSERT_EQUAL_FATAL(a.n, 1);
        CU_ASSERT(b.n == 1 && memcmp(a.t[0].data, b.t[0].data, a.t[0].nbytes) == 0);
        CU_ASSERT(c.n == 1 && memcmp(a.t[0].data, c.t[0].data, a.t[0].nbytes) == 0);
        result_free(&a), result_free(&b), result_free(&c);
    }
    kiln_error_destroy(err);
    kiln_session_destroy(ref);
    kiln_session_destroy(seq);
    kiln_session_destroy(ms);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_random_graphs", test_random_graphs},
        {"test_random_graphs_dynamic_memory", test_random_graphs_dynamic_memory},
        {"test_subgraph_plan_forwarding", test_subgraph_plan_forwarding},
        {NULL, NULL},
    };
    return kiln_test_run("ms_differential", cases);
}
