/*
 * test_kmodel.c - libkiln_kmodel.so (docs/model_format.md, docs/build.md):
 * MergeWeights (deduplication, 64-byte alignment, subgraph constants),
 * TaskGenerator (kinds, no task for Data/Const/NetOutput and stream -1,
 * event record/wait tasks in the per-stream sequences, the same file for
 * --threads 1 and 2 and on the pool; stale task attributes removed, an
 * engine's argument blob and failure), the writer/loader round trip (every attribute type,
 * descriptors, control edges, subgraphs; a model file runs without compiling
 * and gives the outputs of the graph it came from), and the loader's checks
 * (bad magic, newer version, truncation at many points, a flipped byte in
 * each section, overlapping sections): a clear error naming the file and
 * the section, never a graph.
 */
#include "kiln_test.h"
#include <kiln/kiln_embed.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char msg[4096];
static char dir[] = "/tmp/kiln-kmodel-XXXXXX";

static const char *emsg(kiln_error *err)
{
    kiln_error_format(err, msg, sizeof(msg));
    return msg;
}

#define EXPECT_OK(call)                                                                        \
    do {                                                                                       \
        kiln_status st_ = (call);                                                              \
        if (st_ != KILN_OK)                                                                    \
            fprintf(stderr, "\n%s:%d: %s: %s\n", __FILE__, __LINE__, #call, emsg(err));      \
        CU_ASSERT_EQUAL_FATAL(st_, KILN_OK);                                                   \
    } while (0)

static kiln_session *session(kiln_error *err, const char *threads)
{
    kiln_session *s = kiln_session_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    if (threads)
        EXPECT_OK(kiln_session_set_option(s, "kiln.threads", threads, err));
    return s;
}

/* A model of JSON @p text compiled with passes @p passes (NULL: the whole pipeline). */
static kiln_model *compiled(kiln_session *s, const char *text, const char *passes, kiln_error *err)
{
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import_json(s, text, strlen(text), &m, err));
    if (passes)
        EXPECT_OK(kiln_session_set_passes(s, passes, err));
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    return m;
}

static kiln_node_id node(kiln_graph *g, const char *name)
{
    kiln_node_id n = kiln_graph_find_node(g, name);
    CU_ASSERT_FATAL(n != 0);
    return n;
}

static int64_t iattr(kiln_graph *g, kiln_node_id n, const char *key)
{
    int64_t v = -12345;
    const kiln_attrs *a = n ? kiln_node_attrs(g, n) : kiln_graph_attrs(g);
    kiln_attrs_get_int(a, key, &v);
    return v;
}

#define CONST(name, dt, shape, data)                                                            \
    "{\"name\": \"" name "\", \"type\": \"Const\", \"outputs\": [{\"dtype\": \"" dt               \
    "\", \"shape\": " shape "}], \"attrs\": {\"value\": {\"type\": \"tensor\", \"value\": "      \
    "{\"dtype\": \"" dt "\", \"shape\": " shape ", \"data\": " data "}}}}"

static const char weights_json[] =
    "{\"kiln_graph\": 1, \"name\": \"w\", \"nodes\": ["
    "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": [{\"shape\": [4]}]},"
    CONST("c1", "float32", "[4]", "[1, 2, 3, 4]") ","
    CONST("c2", "float32", "[4]", "[1, 2, 3, 4]") ","
    CONST("c3", "float32", "[3]", "[1, 2, 3]") ","
    CONST("c4", "float32", "[4]", "[1, 2, 3, 5]") ","
    CONST("c5", "float32", "[4]", "[1, 2, 3, 4]") ","
    "{\"name\": \"a1\", \"type\": \"Add\", \"inputs\": [\"x\", \"c1\"], \"outputs\": [{\"shape\": [4]}]},"
    "{\"name\": \"a2\", \"type\": \"Add\", \"inputs\": [\"a1\", \"c2\"], \"outputs\": [{\"shape\": [4]}]},"
    "{\"name\": \"a4\", \"type\": \"Add\", \"inputs\": [\"a2\", \"c4\"], \"outputs\": [{\"shape\": [4]}]},"
    "{\"name\": \"a5\", \"type\": \"Add\", \"inputs\": [\"a4\", \"c5\"], \"outputs\": [{\"shape\": [4]}]},"
    "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"a5\", \"c3\"]}]}";

/* MergeWeights: c1, c2 and c5 share one entry, c3 and c4 get their own, each 64-aligned. */
static void test_merge_weights_dedup_alignment(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, NULL);
    kiln_model *m = compiled(s, weights_json, "MergeWeights", err);
    kiln_graph *g = kiln_model_graph(m);
    int64_t o1 = iattr(g, node(g, "c1"), "_kiln_weight_offset");
    int64_t o2 = iattr(g, node(g, "c2"), "_kiln_weight_offset");
    int64_t o3 = iattr(g, node(g, "c3"), "_kiln_weight_offset");
    int64_t o4 = iattr(g, node(g, "c4"), "_kiln_weight_offset");
    int64_t o5 = iattr(g, node(g, "c5"), "_kiln_weight_offset");
    CU_ASSERT_EQUAL(o1, 0);
    CU_ASSERT_EQUAL(o2, o1);
    CU_ASSERT_EQUAL(o5, o1);
    CU_ASSERT_EQUAL(o3, 64);
    CU_ASSERT_EQUAL(o4, 128); /* same size as c1, other bytes: not merged */
    CU_ASSERT_EQUAL(iattr(g, node(g, "c3"), "_kiln_weight_size"), 12);
    CU_ASSERT_EQUAL(iattr(g, node(g, "c4"), "_kiln_weight_size"), 16);
    CU_ASSERT_EQUAL(iattr(g, 0, "_kiln_weight_size"), 192);
    CU_ASSERT_EQUAL(iattr(g, 0, "_kiln_weight_constants"), 5);
    CU_ASSERT_EQUAL(iattr(g, 0, "_kiln_weight_deduplicated"), 2);
    CU_ASSERT_EQUAL(iattr(g, node(g, "a1"), "_kiln_weight_offset"), -12345);
    kiln_model_destroy(m);

    /* Subgraph constants go into the same blob (the While condition's limit 10). */
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/json/good/while_if.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    EXPECT_OK(kiln_model_import(s, path, NULL, &m, err));
    EXPECT_OK(kiln_session_set_passes(s, "MergeWeights", err));
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    g = kiln_model_graph(m);
    uint32_t consts = 0;
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(g); i++) {
        kiln_graph *sg = kiln_graph_all_subgraph(g, i);
        for (kiln_node_id n = kiln_graph_next_node(sg, 0); n; n = kiln_graph_next_node(sg, n))
            if (strcmp(kiln_node_op_str(sg, n), "Const") == 0) {
                int64_t off = iattr(sg, n, "_kiln_weight_offset");
                kiln_tensor_value v;
                if (!kiln_attrs_get_tensor(kiln_node_attrs(sg, n), "value", &v)) {
                    CU_ASSERT_EQUAL(off, -12345); /* no value, no entry */
                    continue;
                }
                CU_ASSERT(off >= 0 && off % 64 == 0);
                consts++;
            }
    }
    CU_ASSERT(consts >= 1);
    CU_ASSERT(iattr(g, 0, "_kiln_weight_constants") >= (int64_t)consts);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

static const char tasks_json[] =
    "{\"kiln_graph\": 1, \"name\": \"t\", \"nodes\": ["
    "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0, \"_kiln_stream_id\": -1,"
    " \"_kiln_task_kind\": 1, \"_kiln_kernel\": \"stale\"},"
    " \"outputs\": [{\"shape\": [4]}]},"
    CONST("c", "float32", "[4]", "[1, 2, 3, 4]") ","
    "{\"name\": \"r\", \"type\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 0, \"attrs\": {\"_send_event_ids\": [0]}},"
    "{\"name\": \"n\", \"type\": \"Neg\", \"inputs\": [\"x\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 1},"
    "{\"name\": \"a\", \"type\": \"Add\", \"inputs\": [\"n\", \"r\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 1, \"attrs\": {\"_recv_event_ids\": [0]}},"
    "{\"name\": \"m\", \"type\": \"Mul\", \"inputs\": [\"a\", \"c\"], \"outputs\": [{\"shape\": [4]}],"
    " \"attrs\": {\"_kiln_stream_id\": -1, \"_kiln_task_kind\": 1}},"
    "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"a\", \"m\"]}]}";

static kiln_model *load_back(kiln_session *s, kiln_model *m, const char *file, kiln_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    EXPECT_OK(kiln_model_write(m, path, NULL, err));
    kiln_model *back = NULL;
    EXPECT_OK(kiln_model_import(s, path, NULL, &back, err));
    return back;
}

/* TaskGenerator: kinds and kernels; no task for Data/Const/NetOutput or stream -1;
 * stream 0 = r + record, stream 1 = n, wait, a. */
static void test_task_generator_kinds_events(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, NULL);
    kiln_model *m = compiled(s, tasks_json, "InferShapes,EnginePlacer,TaskGenerator", err);
    kiln_graph *g = kiln_model_graph(m);
    const char *k = NULL;
    CU_ASSERT_EQUAL(iattr(g, node(g, "r"), "_kiln_task_kind"), KILN_TASK_KERNEL);
    CU_ASSERT(kiln_attrs_get_string(kiln_node_attrs(g, node(g, "r")), "_kiln_kernel", &k) &&
              strstr(k, "Relu") != NULL);
    CU_ASSERT_EQUAL(iattr(g, node(g, "a"), "_kiln_task_kind"), KILN_TASK_KERNEL);
    CU_ASSERT_EQUAL(iattr(g, node(g, "n"), "_kiln_task_kind"), KILN_TASK_KERNEL);
    CU_ASSERT_EQUAL(iattr(g, node(g, "x"), "_kiln_task_kind"), -12345);
    CU_ASSERT_EQUAL(iattr(g, node(g, "c"), "_kiln_task_kind"), -12345);
    CU_ASSERT_EQUAL(iattr(g, node(g, "out"), "_kiln_task_kind"), -12345);
    CU_ASSERT_EQUAL(iattr(g, node(g, "m"), "_kiln_task_kind"), -12345); /* stream -1 */
    /* a stale task of a node without one is cleared (x and m had one in the JSON) */
    CU_ASSERT(!kiln_attrs_has(kiln_node_attrs(g, node(g, "x")), "_kiln_kernel"));

    kiln_model *back = load_back(s, m, "t.kmodel", err);
    kiln_graph *b = kiln_model_graph(back);
    const int64_t *tasks;
    uint32_t nt = 0;
    CU_ASSERT_FATAL(kiln_attrs_get_list_int(kiln_graph_attrs(b), "_kiln_kmodel_stream_tasks",
                                            &tasks, &nt));
    CU_ASSERT_EQUAL_FATAL(nt, 2);
    CU_ASSERT_EQUAL(tasks[0], 2); /* r, record 0 */
    CU_ASSERT_EQUAL(tasks[1], 3); /* n, wait 0, a */
    CU_ASSERT_EQUAL(iattr(b, 0, "_kiln_kmodel_streams"), 2);
    CU_ASSERT_EQUAL(iattr(b, 0, "_kiln_kmodel_events"), 1);
    CU_ASSERT_EQUAL(iattr(b, 0, "_kiln_kmodel_event_tasks"), 2);
    /* the task attributes came back with the graph */
    CU_ASSERT_EQUAL(iattr(b, node(b, "a"), "_kiln_task_kind"), KILN_TASK_KERNEL);
    kiln_model_destroy(back);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* TaskGenerator with tests/plugins/tp_engine.c: an argument blob, stale task
 * attributes, a node no engine claims, an engine's failure. */
static const char tp_tasks_json[] =
    "{\"kiln_graph\": 1, \"name\": \"t\", \"nodes\": ["
    "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 0},"
    "{\"name\": \"r\", \"type\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 0, \"engine\": \"tp_first\", \"attrs\": {\"_kiln_task_event_id\": 5,"
    " \"_kiln_task_target_stream_id\": 2, \"_send_event_ids\": [0], \"tp_bad\": %d}},"
    "{\"name\": \"n\", \"type\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 1, \"engine\": \"tp_second\", \"attrs\": {\"_kiln_task_args\": {\"type\":"
    " \"tensor\", \"value\": {\"dtype\": \"uint8\", \"shape\": [1], \"data\": [7]}},"
    " \"_recv_event_ids\": [0]}},"
    "{\"name\": \"u\", \"type\": \"MysteryOp\", \"inputs\": [\"r\"], \"outputs\": [{\"shape\": [4]}],"
    " \"stream_id\": 0, \"attrs\": {\"_kiln_kernel\": \"stale\"}},"
    "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"u\", \"n\"]}]}";

/* Tasks of tp_tasks_json (tp_bad of r = @p bad) by "TaskGenerator@p opt",
 * written as JSON to @p path; the compile's status, its error in @p text. */
static kiln_status tp_tasks(const char *opt, int bad, const char *path, char *text, size_t size)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, "2");
    char tp[4096], json[2048], passes[128];
    snprintf(tp, sizeof(tp), "%s/libtp_engine.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    EXPECT_OK(kiln_session_load_plugin(s, tp, err));
    snprintf(json, sizeof(json), tp_tasks_json, bad);
    snprintf(passes, sizeof(passes), "TaskGenerator%s", opt);
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import_json(s, json, strlen(json), &m, err));
    EXPECT_OK(kiln_session_set_passes(s, passes, err));
    kiln_status st = kiln_model_compile(m, NULL, err);
    text[0] = 0;
    if (st != KILN_OK)
        kiln_error_format(err, text, size);
    else
        EXPECT_OK(kiln_model_write(m, path, NULL, err));
    if (st == KILN_OK && !bad) {
        kiln_graph *g = kiln_model_graph(m);
        kiln_tensor_value v;
        const kiln_attrs *r = kiln_node_attrs(g, node(g, "r"));
        CU_ASSERT(kiln_attrs_get_tensor(r, "_kiln_task_args", &v) && v.nbytes == 4);
        CU_ASSERT(!kiln_attrs_has(r, "_kiln_task_event_id")); /* stale, not an event task */
        CU_ASSERT(!kiln_attrs_has(r, "_kiln_task_target_stream_id"));
        const kiln_attrs *n = kiln_node_attrs(g, node(g, "n"));
        CU_ASSERT(!kiln_attrs_has(n, "_kiln_task_args")); /* tp_second writes none */
        CU_ASSERT_EQUAL(iattr(g, node(g, "n"), "_kiln_task_kind"), KILN_TASK_KERNEL);
        /* no engine claims u: a runtime task, its stale kernel removed */
        const kiln_attrs *u = kiln_node_attrs(g, node(g, "u"));
        CU_ASSERT(!kiln_attrs_has(u, "_kiln_task_kind") && !kiln_attrs_has(u, "_kiln_kernel"));
        CU_ASSERT(!kiln_attrs_has(kiln_node_attrs(g, node(g, "x")), "_kiln_task_kind"));
    }
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
    return st;
}

static void *slurp(const char *path, size_t *len);

/* On the calling thread and on the pool (parallel_min=1): the same graph,
 * and the same error for an engine's bad task. */
static void test_task_generator_pool_and_errors(void)
{
    char p1[4200], p2[4200], e1[2048], e2[2048];
    snprintf(p1, sizeof(p1), "%s/tp_serial.json", dir);
    snprintf(p2, sizeof(p2), "%s/tp_pool.json", dir);
    CU_ASSERT_EQUAL_FATAL(tp_tasks("", 0, p1, e1, sizeof(e1)), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(tp_tasks("{parallel_min=1}", 0, p2, e2, sizeof(e2)), KILN_OK);
    size_t n1 = 0, n2 = 0;
    void *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(n1 == n2 && n1 > 0 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    CU_ASSERT_EQUAL(tp_tasks("", 2, p1, e1, sizeof(e1)), KILN_ERR_INTERNAL);
    CU_ASSERT_EQUAL(tp_tasks("{parallel_min=1}", 2, p2, e2, sizeof(e2)), KILN_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e1, "engine tp_first: generate_task of node r (Relu): "
                                      "task kind 1000 is not a kiln_task_kind"));
    CU_ASSERT_STRING_EQUAL(e1, e2);
}

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    *len = p ? fread(p, 1, (size_t)n, f) : 0;
    fclose(f);
    return p;
}

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* The whole pipeline with kiln.threads 1 and 2 writes the same bytes. */
static void test_task_generator_deterministic_threads(void)
{
    kiln_error *err = kiln_error_create();
    char src[4096], p1[4200], p2[4200];
    snprintf(src, sizeof(src), "%s/tests/data/run/if.json", kiln_test_env("KILN_SOURCE_DIR", ".."));
    const char *threads[2] = {"1", "2"};
    char *paths[2] = {p1, p2};
    for (int i = 0; i < 2; i++) {
        kiln_session *s = session(err, threads[i]);
        kiln_model *m = NULL;
        EXPECT_OK(kiln_model_import(s, src, NULL, &m, err));
        EXPECT_OK(kiln_model_compile(m, NULL, err));
        snprintf(paths[i], 4200, "%s/threads%s.kmodel", dir, threads[i]);
        EXPECT_OK(kiln_model_write(m, paths[i], NULL, err));
        kiln_model_destroy(m);
        kiln_session_destroy(s);
    }
    size_t n1 = 0, n2 = 0;
    void *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(n1 == n2 && n1 > 4096 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    kiln_error_destroy(err);
}

static const char attrs_json[] =
    "{\"kiln_graph\": 1, \"name\": \"attrs\", \"attrs\": {\"g_i\": 3, \"g_s\": \"x\"}, \"nodes\": ["
    "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": [{\"shape\": [2, 2],"
    " \"format\": \"NCHW\", \"size\": 512, \"offset\": 1024, \"memory_type\": \"HBM\","
    " \"attrs\": {\"_onnx_name\": \"input\"}}]},"
    CONST("c", "int64", "[2]", "[7, -9]") ","
    "{\"name\": \"n\", \"type\": \"Foo\", \"inputs\": [\"x\", null, \"c\"], \"control_inputs\": [\"c\"],"
    " \"input_descs\": [{\"dtype\": \"float16\", \"shape\": [-1, 2]}, {\"shape\": [1]}, {\"dtype\": \"int64\"}],"
    " \"outputs\": [{\"shape\": [2, 2], \"ref_input\": 0}, {\"dtype\": \"bool\"}],"
    " \"engine\": \"vector\", \"stream_id\": 0, \"id\": 2,"
    " \"attrs\": {\"b\": true, \"i\": -5, \"f\": 2.5, \"s\": \"str\", \"li\": [1, -2, 3],"
    " \"lf\": [0.5, -1.25], \"ls\": [\"a\", \"b\"], \"lb\": [true, false, true], \"lli\": [[1, 2], [], [3]],"
    " \"d\": {\"type\": \"dtype\", \"value\": \"int8\"}, \"ef\": {\"type\": \"list_float\", \"value\": []},"
    " \"t\": {\"type\": \"tensor\", \"value\": {\"dtype\": \"int32\", \"shape\": [3], \"data\": [1, 2, 3]}},"
    " \"nan\": {\"type\": \"float\", \"value\": \"nan\"}}},"
    "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"n:0\", \"n:1\"]}]}";

/* Graph JSON of @p m without the loader's info attributes and the root's name. */
static json_t *graph_doc(kiln_model *m, kiln_error *err)
{
    char *text = kiln_model_to_json(m, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    json_t *d = json_loads(text, 0, NULL);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    json_object_del(d, "name");
    json_t *attrs = json_object_get(d, "attrs");
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(attrs, tmp, key, v)
    {
        if (strncmp(key, "_kiln_kmodel_", 13) == 0 || strcmp(key, "_kiln_built_model") == 0)
            json_object_del(attrs, key);
    }
    return d;
}

static void round_trip(kiln_session *s, kiln_model *m, const char *file, kiln_error *err)
{
    kiln_model *back = load_back(s, m, file, err);
    json_t *a = graph_doc(m, err), *b = graph_doc(back, err);
    if (!json_equal(a, b)) {
        char *x = json_dumps(a, JSON_SORT_KEYS | JSON_INDENT(1)),
             *y = json_dumps(b, JSON_SORT_KEYS | JSON_INDENT(1));
        fprintf(stderr, "\nround trip of %s differs:\n--- written\n%s\n--- read\n%s\n", file, x, y);
        free(x);
        free(y);
        CU_FAIL("round trip");
    }
    bool built = false;
    CU_ASSERT(kiln_attrs_get_bool(kiln_graph_attrs(kiln_model_graph(back)), "_kiln_built_model",
                                  &built) &&
              built);
    json_decref(a);
    json_decref(b);
    kiln_model_destroy(back);
}

/* Every attribute type, descriptors, control edges and subgraphs survive a round trip. */
static void test_kmodel_round_trip(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, NULL);
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import_json(s, attrs_json, strlen(attrs_json), &m, err));
    round_trip(s, m, "attrs.kmodel", err);
    kiln_model_destroy(m);
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/json/good/while_if.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    EXPECT_OK(kiln_model_import(s, path, NULL, &m, err));
    round_trip(s, m, "while_if.kmodel", err);
    kiln_model_destroy(m);
    /* a built model: weights and tasks on the graph */
    m = compiled(s, weights_json, NULL, err);
    round_trip(s, m, "built.kmodel", err);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

static float X4[4] = {-1, 2, -3, 4};
static uint8_t TRUE1 = 1;

static void run_if(kiln_model *m, kiln_error *err, float out0[4], float out1[4])
{
    int64_t d4 = 4;
    kiln_tensor c = {KILN_DT_BOOL, 0, NULL, &TRUE1, 1}, x = {KILN_DT_FLOAT32, 1, &d4, X4, 16};
    EXPECT_OK(kiln_model_set_input_at(m, 0, &c, err));
    EXPECT_OK(kiln_model_set_input_at(m, 1, &x, err));
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_OK(kiln_model_run(m, err));
    CU_ASSERT_EQUAL_FATAL(kiln_model_output_count(m), 2);
    CU_ASSERT_EQUAL_FATAL(kiln_model_output(m, 0)->nbytes, 16);
    memcpy(out0, kiln_model_output(m, 0)->data, 16);
    memcpy(out1, kiln_model_output(m, 1)->data, 16);
}

/* A model file runs without compiling and gives the outputs of its graph (If subgraphs). */
static void test_kmodel_runs_like_graph(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, NULL);
    char src[4096];
    snprintf(src, sizeof(src), "%s/tests/data/run/if.json", kiln_test_env("KILN_SOURCE_DIR", ".."));
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import(s, src, NULL, &m, err));
    float a0[4], a1[4], b0[4], b1[4];
    run_if(m, err, a0, a1);
    kiln_model *back = load_back(s, m, "if.kmodel", err);
    CU_ASSERT(iattr(kiln_model_graph(back), 0, "_kiln_kmodel_models") ==
              1 + kiln_graph_all_subgraph_count(kiln_model_graph(m)));
    CU_ASSERT(kiln_graph_all_subgraph_count(kiln_model_graph(m)) >= 2); /* then, else */
    /* subgraph nodes have tasks too: the then branch's Relu */
    kiln_graph *g = kiln_model_graph(back);
    int relu_tasks = 0;
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(g); i++) {
        kiln_graph *sg = kiln_graph_all_subgraph(g, i);
        for (kiln_node_id n = kiln_graph_next_node(sg, 0); n; n = kiln_graph_next_node(sg, n))
            relu_tasks += strcmp(kiln_node_op_str(sg, n), "Relu") == 0 &&
                          iattr(sg, n, "_kiln_task_kind") == KILN_TASK_KERNEL;
    }
    CU_ASSERT_EQUAL(relu_tasks, 1);
    const int64_t *root_tasks;
    uint32_t ns = 0;
    int64_t root_sum = 0;
    CU_ASSERT(kiln_attrs_get_list_int(kiln_graph_attrs(g), "_kiln_kmodel_stream_tasks",
                                      &root_tasks, &ns));
    for (uint32_t i = 0; i < ns; i++)
        root_sum += root_tasks[i];
    CU_ASSERT(iattr(g, 0, "_kiln_kmodel_tasks") > root_sum); /* the subgraph models' tasks */
    run_if(back, err, b0, b1);
    CU_ASSERT(memcmp(a0, b0, 16) == 0 && memcmp(a1, b1, 16) == 0);
    CU_ASSERT(b0[0] == 0 && b0[1] == 2 && b1[0] == 0 && b1[3] == 5);
    kiln_model_destroy(back);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* Import @p bytes and expect a failure whose message holds @p want and the file name. */
static void expect_bad(kiln_session *s, const void *bytes, size_t n, const char *want,
                       kiln_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/bad.kmodel", dir);
    spit(path, bytes, n);
    kiln_model *m = NULL;
    kiln_error_clear(err);
    kiln_status st = kiln_model_import(s, path, NULL, &m, err);
    CU_ASSERT(st != KILN_OK && m == NULL);
    emsg(err);
    if (!strstr(msg, want) || !strstr(msg, "bad.kmodel")) {
        fprintf(stderr, "\nwant '%s' and the file name, got '%s'\n", want, msg);
        CU_FAIL("message");
    }
    kiln_model_destroy(m);
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The loader refuses damaged files, naming the file and the section. */
static void test_kmodel_corrupt_files(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = session(err, NULL);
    kiln_model *m = compiled(s, weights_json, NULL, err);
    kiln_model *back = load_back(s, m, "good.kmodel", err);
    kiln_model_destroy(back);
    kiln_model_destroy(m);
    char path[4200];
    snprintf(path, sizeof(path), "%s/good.kmodel", dir);
    size_t n = 0;
    uint8_t *good = slurp(path, &n), *b = malloc(n);
    CU_ASSERT_FATAL(good && b && n > 4096);

    expect_bad(s, good, 0, "truncated", err);
    memcpy(b, good, n);
    b[0] ^= 1;
    expect_bad(s, b, n, "bad magic", err);
    memcpy(b, good, n);
    b[8] = 2; /* major 2 */
    expect_bad(s, b, n, "newer than this kiln reads", err);
    /* a newer minor version is read (fields are only ever added) */
    memcpy(b, good, n);
    b[10] = 9;
    char mpath[4200];
    snprintf(mpath, sizeof(mpath), "%s/minor.kmodel", dir);
    spit(mpath, b, n);
    kiln_model *mm = NULL;
    kiln_error_clear(err);
    CU_ASSERT_EQUAL(kiln_model_import(s, mpath, NULL, &mm, err), KILN_OK);
    const char *fmt = NULL;
    CU_ASSERT(mm && kiln_attrs_get_string(kiln_graph_attrs(kiln_model_graph(mm)),
                                          "_kiln_kmodel_format", &fmt) &&
              strcmp(fmt, "1.9") == 0);
    kiln_model_destroy(mm);
    /* truncated anywhere: header, table, each section, the last byte */
    const size_t cuts[] = {1, 10, 63, 64, 100, 255, 256, 300, 2000, 4096, n - 100, n - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
        if (cuts[i] < n)
            expect_bad(s, good, cuts[i], "truncated", err);
    /* a flipped byte in each section: its hash */
    static const char *const names[] = {"META", "GRAPH", "WEIGHTS"};
    for (int k = 0; k < 3; k++) {
        const uint8_t *e = good + 64 + 64 * k;
        uint64_t off = le64(e + 8), size = le64(e + 16);
        CU_ASSERT_FATAL(size > 0 && off + size <= n);
        memcpy(b, good, n);
        b[off + size / 2] ^= 0x40;
        char want[64];
        snprintf(want, sizeof(want), "section %s: SHA-256 mismatch", names[k]);
        expect_bad(s, b, n, want, err);
        /* a section past the end of the file */
        memcpy(b, good, n);
        uint64_t big = n;
        for (int i = 0; i < 8; i++)
            b[64 + 64 * k + 8 + i] = (uint8_t)(big >> (8 * i));
        snprintf(want, sizeof(want), "section %s: bytes", names[k]);
        expect_bad(s, b, n, want, err);
    }
    /* GRAPH moved onto META: overlap */
    memcpy(b, good, n);
    memcpy(b + 64 + 64 + 8, good + 64 + 8, 8);
    expect_bad(s, b, n, "overlaps section META", err);
    /* trailing garbage */
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, good, n);
    longer[n] = 0;
    expect_bad(s, longer, n + 1, "trailing bytes", err);
    free(longer);
    free(good);
    free(b);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

static int setup_dir(void)
{
    return mkdtemp(dir) ? 0 : -1;
}

int main(void)
{
    if (setup_dir() != 0)
        return 1;
    static const kiln_test_case cases[] = {
        {"merge_weights_dedup_alignment", test_merge_weights_dedup_alignment},
        {"task_generator_kinds_events", test_task_generator_kinds_events},
        {"task_generator_deterministic_threads", test_task_generator_deterministic_threads},
        {"task_generator_pool_and_errors", test_task_generator_pool_and_errors},
        {"kmodel_round_trip", test_kmodel_round_trip},
        {"kmodel_runs_like_graph", test_kmodel_runs_like_graph},
        {"kmodel_corrupt_files", test_kmodel_corrupt_files},
        {NULL, NULL},
    };
    int rc = kiln_test_run("kmodel", cases);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    return rc;
}
