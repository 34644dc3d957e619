/*
 * test_graph_json.c - the graph JSON reader/writer (GRAPH_FORMAT.md) and the
 * atomic file output it uses.
 *
 * Suite graph_json: byte-identical write -> read -> write round trips of the
 * files in tests/data/json/good and of graphs built through the API (every
 * attribute type, tensors inline and base64, float16, non-finite floats,
 * subgraphs, control edges, input_descs, desc attrs, engine/stream_id/id);
 * value checks after reading; the table-driven bad-input cases in
 * tests/data/json/bad (expected message fragment in "x-expect-error"); a
 * large graph for speed.  Suite fileio: atomic writes leave no partial or
 * temporary files behind.
 */
#include "kiln_test.h"
#include "ctx.h"
#include "fileio.h"
#include "graph_int.h"
#include "graph_json.h"
#include "graph_json_ref.h"
#include "verify.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static kiln_ctx *ctx;

static char *data_path(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), "%s/tests/data/json/%s", kiln_test_env("KILN_SOURCE_DIR", ".."),
             rel);
    return buf;
}

static void expect_ok(kiln_status st, const kiln_error *err)
{
    if (st != KILN_OK) {
        char buf[1024];
        kiln_error_format(err, buf, sizeof(buf));
        fprintf(stderr, "\nunexpected error: %s\n", buf);
    }
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
}

/* write -> read -> write must give identical bytes; returns the first text. */
static char *roundtrip(const kiln_graph *g)
{
    kiln_error err = {0};
    char *s1 = kiln_graph_to_json_string(g, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s1);
    kiln_graph *g2 = NULL;
    expect_ok(kiln_graph_read_json_string(ctx, s1, strlen(s1), "s1", &g2, &err), &err);
    char *s2 = kiln_graph_to_json_string(g2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s2);
    if (strcmp(s1, s2) != 0)
        fprintf(stderr, "\n--- first ---\n%s\n--- second ---\n%s\n", s1, s2);
    CU_ASSERT_STRING_EQUAL(s1, s2);
    expect_ok(kiln_graph_verify(g2, &err), &err);
    kiln_graph_destroy(g2);
    kiln__free(s2);
    return s1;
}

static kiln_graph *read_file(const char *rel)
{
    kiln_error err = {0};
    kiln_graph *g = NULL;
    expect_ok(kiln_graph_read_json_file(ctx, data_path(rel), &g, &err), &err);
    return g;
}

/* Call @p fn(rel, file name) for every *.json file of tests/data/json/@p sub
 * (rel is "sub/name"); returns how many there were. */
static int each_json_file(const char *sub, void (*fn)(const char *rel, const char *name))
{
    DIR *d = opendir(data_path(sub));
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char rel[300];
        snprintf(rel, sizeof(rel), "%s/%s", sub, e->d_name);
        fn(rel, e->d_name);
        count++;
    }
    closedir(d);
    return count;
}

/* ---- good files ---------------------------------------------------------- */

static void roundtrip_good_file(const char *rel, const char *name)
{
    (void)name;
    kiln_graph *g = read_file(rel);
    kiln__free(roundtrip(g));
    kiln_graph_destroy(g);
}

static void test_graph_json_roundtrip_good_files(void)
{
    CU_ASSERT(each_json_file("good", roundtrip_good_file) >= 3);
}

static void test_graph_json_reads_example(void)
{
    kiln_graph *g = read_file("good/const_to_assign.json");
    CU_ASSERT_STRING_EQUAL(kiln_graph_name(g), "const_to_assign");
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 5);
    kiln_node_id c = kiln_graph_find_node(g, "c"), assign = kiln_graph_find_node(g, "assign");
    kiln_node_id out = kiln_graph_find_node(g, "out");
    CU_ASSERT_EQUAL(c, 1); /* ids follow document order */
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, assign, 0).node, c);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, c, 0), 2);
    CU_ASSERT_EQUAL(kiln_node_output_count(g, out), 0);
    CU_ASSERT_EQUAL(kiln_desc_ref_input(kiln_node_output_desc(g, assign, 0)), 0);
    CU_ASSERT_EQUAL(kiln_desc_rank(kiln_node_output_desc(g, c, 0)), 4 - 3);
    kiln_tensor_value t;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g, c), "value", &t));
    CU_ASSERT_EQUAL(t.dtype, KILN_DT_FLOAT32);
    CU_ASSERT_EQUAL(t.nbytes, 16);
    float want[4] = {1, 2, 3, 4};
    CU_ASSERT(memcmp(t.data, want, 16) == 0);
    int64_t idx;
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, kiln_graph_find_node(g, "x")), "index", &idx));
    CU_ASSERT_EQUAL(idx, 0);
    kiln_graph_destroy(g);
}

static void test_graph_json_reads_subgraphs_and_keys(void)
{
    kiln_graph *g = read_file("good/while_if.json");
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(g), 4);
    kiln_node_id loop = kiln_graph_find_node(g, "loop");
    const char *role;
    kiln_graph *cond = kiln_node_subgraph(g, loop, 0, &role);
    CU_ASSERT_STRING_EQUAL(role, "cond");
    CU_ASSERT_STRING_EQUAL(kiln_graph_name(cond), "loop_cond");
    kiln_graph *body = kiln_node_subgraph(g, loop, 1, &role);
    CU_ASSERT_STRING_EQUAL(role, "body");
    CU_ASSERT_EQUAL(kiln_graph_depth(body), 2);
    kiln_node_id pick = kiln_graph_find_node(body, "pick");
    CU_ASSERT_EQUAL(kiln_node_subgraph_count(body, pick), 2);
    CU_ASSERT_EQUAL(kiln_graph_depth(kiln_node_subgraph(body, pick, 0, NULL)), 3);
    const char *s;
    CU_ASSERT(kiln_attrs_get_string(kiln_graph_attrs(body), "note", &s));
    /* "i" alone means output 0; control edges; engine/stream_id/id as attrs. */
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, loop, 0).node, kiln_graph_find_node(g, "i"));
    CU_ASSERT(kiln_ctrl_exists(g, kiln_graph_find_node(g, "init"), kiln_graph_find_node(g, "out")));
    CU_ASSERT_EQUAL(kiln_node_ctrl_in_count(g, kiln_graph_find_node(g, "init")), 2);
    int64_t v;
    CU_ASSERT(kiln_attrs_get_string(kiln_node_attrs(g, loop), KILN_ATTR_ENGINE, &s));
    CU_ASSERT_STRING_EQUAL(s, "rts");
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, loop), KILN_ATTR_STREAM_ID, &v) && v == 1);
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, loop), KILN_ATTR_TOPO_ID, &v) && v == 3);
    /* Scalar vs unknown rank; format. */
    CU_ASSERT_EQUAL(kiln_desc_rank(kiln_node_output_desc(g, loop, 0)), 0);
    CU_ASSERT_STRING_EQUAL(kiln_desc_format(g, kiln_node_output_desc(g, loop, 1)), "NCHW");
    CU_ASSERT_EQUAL(kiln_desc_dims(kiln_node_output_desc(g, loop, 1))[1], -1);
    char *text = kiln_graph_to_json_string(g, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"engine\": \"rts\""));
    CU_ASSERT_PTR_NULL(strstr(text, KILN_ATTR_ENGINE));
    kiln__free(text);
    kiln_graph_destroy(g);
}

static void test_graph_json_reads_attr_forms(void)
{
    kiln_graph *g = read_file("good/attrs_all.json");
    kiln_node_id n = kiln_graph_find_node(g, "n");
    const kiln_attrs *a = kiln_node_attrs(g, n);
    double f;
    CU_ASSERT(kiln_attrs_get_float(a, "f", &f) && f == 0.1);
    CU_ASSERT(kiln_attrs_get_float(a, "fint", &f) && f == 3.0);
    CU_ASSERT(kiln_attrs_get_float(a, "nan", &f) && isnan(f));
    CU_ASSERT_EQUAL(kiln_attrs_type(a, "e_lb"), KILN_ATTR_LIST_BOOL);
    CU_ASSERT_EQUAL(kiln_attrs_type(a, "lfint"), KILN_ATTR_LIST_FLOAT);
    CU_ASSERT_EQUAL(kiln_attrs_type(a, "lli"), KILN_ATTR_LIST_LIST_INT);
    CU_ASSERT_EQUAL(kiln_attrs_type(a, "g"), KILN_ATTR_STRING);
    kiln_dtype dt;
    CU_ASSERT(kiln_attrs_get_dtype(a, "dt", &dt) && dt == KILN_DT_BFLOAT16);
    kiln_tensor_value t, tb;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "t_i64", &t) &&
                    kiln_attrs_get_tensor(a, "t_i64b", &tb));
    CU_ASSERT(t.nbytes == 24 && tb.nbytes == 24 && memcmp(t.data, tb.data, 24) == 0);
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "t_f16", &t));
    const uint8_t *h = t.data;
    CU_ASSERT_EQUAL(h[0] | h[1] << 8, 0x2e66); /* 0.1 in float16 */
    CU_ASSERT_EQUAL(h[4] | h[5] << 8, 0x7bff); /* 65504 */
    CU_ASSERT_EQUAL(h[6] | h[7] << 8, 0x0001); /* 6e-8 -> smallest subnormal */
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "t_u8", &t));
    CU_ASSERT(t.rank == 0 && t.nbytes == 1 && ((const uint8_t *)t.data)[0] == 255);
    /* data_b64 Const of 100 floats; input descs; desc ext fields. */
    kiln_node_id k = kiln_graph_find_node(g, "k");
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g, k), "value", &t));
    CU_ASSERT(t.nbytes == 400 && ((const float *)t.data)[99] == 49.5f);
    CU_ASSERT(kiln_node_input_has_desc(g, n, 1));
    CU_ASSERT_EQUAL(kiln_desc_dtype(kiln_node_input_desc(g, n, 0)), KILN_DT_FLOAT16);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, n, 1).node, 0);
    kiln_tensor_desc *d = kiln_node_output_desc(g, kiln_graph_find_node(g, "d"), 0);
    CU_ASSERT_EQUAL(kiln_desc_rank(d), -1);
    CU_ASSERT_EQUAL(kiln_desc_offset(d), 512);
    CU_ASSERT_EQUAL(kiln_desc_size(d), 64);
    CU_ASSERT_STRING_EQUAL(kiln_desc_memory_type(g, d), "HBM");
    bool b;
    CU_ASSERT(kiln_attrs_get_bool(kiln_desc_attrs(d), "reuse_input", &b) && b);
    kiln_graph_destroy(g);
}

/* ---- graphs built through the API --------------------------------------- */

static kiln_graph *build_api_graph(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "api");
    kiln_node_id d = kiln_graph_add_node(g, "in:put", "Data", 0, 1);
    kiln_node_id c = kiln_graph_add_node(g, "k", "Const", 0, 1);
    kiln_node_id w = kiln_graph_add_node(g, "w", "While", 2, 2);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 2, 0);
    CU_ASSERT_FATAL(d && c && w && o);
    kiln_edge_add(g, d, 0, w, 0);
    kiln_edge_add(g, c, 0, w, 1);
    kiln_edge_add(g, w, 1, o, 0);
    kiln_edge_add(g, w, 0, o, 1);
    kiln_ctrl_add(g, c, d);
    kiln_attrs *a = kiln_node_attrs_mut(g, c);
    float big[300];
    for (int i = 0; i < 300; i++)
        big[i] = (float)i / 3.0f;
    int64_t dims[2] = {3, 100};
    kiln_tensor_value tv = {KILN_DT_FLOAT32, 2, dims, big, sizeof(big)};
    kiln_attrs_set_tensor(a, "value", &tv);
    float small[3] = {0.1f, 1.0f / 3.0f, -2.5f};
    int64_t d3 = 3;
    kiln_tensor_value ts = {KILN_DT_FLOAT32, 1, &d3, small, sizeof(small)};
    kiln_attrs_set_tensor(a, "small", &ts);
    float weird[2] = {NAN, 1.0f};
    int64_t d2 = 2;
    kiln_tensor_value tw = {KILN_DT_FLOAT32, 1, &d2, weird, sizeof(weird)};
    kiln_attrs_set_tensor(a, "weird", &tw);
    uint64_t u[1] = {UINT64_MAX};
    int64_t d1 = 1;
    kiln_tensor_value tu = {KILN_DT_UINT64, 1, &d1, u, sizeof(u)};
    kiln_attrs_set_tensor(a, "u64", &tu);
    kiln_attrs_set_float(a, "third", 1.0 / 3.0);
    kiln_attrs_set_float(a, "inf", INFINITY);
    double lf[3] = {1.0, 2.0, -0.0};
    kiln_attrs_set_list_float(a, "lf_integral", lf, 3);
    kiln_attrs_set_list_int(a, "empty", NULL, 0);
    const char *ls[2] = {"x", "y\n\"z\""};
    kiln_attrs_set_list_string(a, "strs", ls, 2);
    kiln_attrs_set_dtype(a, "dst_type", KILN_DT_INT8);
    kiln_attrs_set_int(a, KILN_ATTR_ENGINE, 5); /* wrong type: stays an attribute */
    kiln_attrs_set_string(kiln_node_attrs_mut(g, w), KILN_ATTR_ENGINE, "cpu");
    kiln_attrs_set_int(kiln_node_attrs_mut(g, d), "index", 0);
    kiln_tensor_desc *od = kiln_node_output_desc(g, w, 1);
    int64_t shp[3] = {-1, 7, 0};
    kiln_desc_set_shape(g, od, 3, shp);
    kiln_desc_set_format(g, od, "NHWC");
    kiln_desc_set_dtype(g, od, KILN_DT_BFLOAT16);
    kiln_desc_set_offset(g, od, 0);
    kiln_attrs_set_list_int(kiln_desc_attrs_mut(g, od), "_output_memory_type", &d3, 1);
    kiln_tensor_desc *id = kiln_node_input_desc_mut(g, o, 1);
    kiln_desc_set_shape(g, id, 0, NULL);
    /* While cond/body, with a nested PartitionedCall in the body. */
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "w_cond");
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "w_body");
    CU_ASSERT_FATAL(cond && body);
    kiln_node_id cd = kiln_graph_add_node(cond, "cd", "Data", 0, 1);
    kiln_node_id co = kiln_graph_add_node(cond, "co", "NetOutput", 1, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(cond, cd), "_parent_node_index", 0);
    kiln_edge_add(cond, cd, 0, co, 0);
    kiln_node_id b0 = kiln_graph_add_node(body, "b0", "Data", 0, 1);
    kiln_node_id b1 = kiln_graph_add_node(body, "b1", "Data", 0, 1);
    kiln_node_id pc = kiln_graph_add_node(body, "pc", "PartitionedCall", 1, 1);
    kiln_node_id bo = kiln_graph_add_node(body, "bo", "NetOutput", 2, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(body, b0), "_parent_node_index", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(body, b1), "_parent_node_index", 1);
    kiln_edge_add(body, b0, 0, bo, 1);
    kiln_edge_add(body, b1, 0, pc, 0);
    kiln_edge_add(body, pc, 0, bo, 0);
    kiln_attrs_set_int(kiln_desc_attrs_mut(body, kiln_node_input_desc_mut(body, bo, 0)),
                       "_parent_node_index", 1);
    kiln_attrs_set_int(kiln_desc_attrs_mut(body, kiln_node_input_desc_mut(body, bo, 1)),
                       "_parent_node_index", 0);
    kiln_graph *f = kiln_node_add_subgraph(body, pc, "f", "pc_f");
    kiln_node_id fd = kiln_graph_add_node(f, "fd", "Data", 0, 1);
    kiln_node_id fo = kiln_graph_add_node(f, "fo", "NetOutput", 1, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(f, fd), "_parent_node_index", 0);
    kiln_edge_add(f, fd, 0, fo, 0);
    kiln_attrs_set_bool(kiln_graph_attrs(g), "_single_op_scene", true);
    kiln_error err = {0};
    expect_ok(kiln_graph_verify(g, &err), &err);
    return g;
}

/* data_b64 text is written straight to the file behind a placeholder: many
 * tensors in one node, in graph and descriptor attributes and in a subgraph,
 * keep their bytes, and strings that look like a placeholder stay strings. */
static void test_graph_json_b64_many_and_lookalikes(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "b64");
    kiln_node_id c = kiln_graph_add_node(g, "c", "Const", 0, 1);
    kiln_node_id w = kiln_graph_add_node(g, "w", "While", 1, 1);
    CU_ASSERT_FATAL(c && w && kiln_edge_add(g, c, 0, w, 0) == KILN_OK);
    enum { N = 257 };
    static float v[12][N];
    for (int t = 0; t < 12; t++)
        for (int i = 0; i < N; i++)
            v[t][i] = (float)(t * 1000 + i) / 7.0f;
    int64_t dims = N;
    char key[16];
    kiln_attrs *a = kiln_node_attrs_mut(g, c);
    for (int t = 0; t < 10; t++) {
        kiln_tensor_value tv = {KILN_DT_FLOAT32, 1, &dims, v[t], sizeof(v[t])};
        snprintf(key, sizeof(key), "t%d", t);
        CU_ASSERT_FATAL(kiln_attrs_set_tensor(a, key, &tv) == KILN_OK);
    }
    CU_ASSERT(kiln_attrs_set_string(a, "look", "kiln-b64-0000000000000000-0") == KILN_OK);
    CU_ASSERT(kiln_attrs_set_string(a, "look2", "\"kiln-b64-") == KILN_OK);
    kiln_tensor_value tg = {KILN_DT_FLOAT32, 1, &dims, v[10], sizeof(v[10])};
    CU_ASSERT(kiln_attrs_set_tensor(kiln_graph_attrs(g), "gt", &tg) == KILN_OK);
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "w_body");
    CU_ASSERT_FATAL(body != NULL);
    kiln_node_id bc = kiln_graph_add_node(body, "bc", "Const", 0, 1);
    kiln_node_id bo = kiln_graph_add_node(body, "bo", "NetOutput", 1, 0);
    CU_ASSERT_FATAL(bc && bo && kiln_edge_add(body, bc, 0, bo, 0) == KILN_OK);
    kiln_tensor_value tb = {KILN_DT_FLOAT32, 1, &dims, v[11], sizeof(v[11])};
    CU_ASSERT(kiln_attrs_set_tensor(kiln_node_attrs_mut(body, bc), "value", &tb) == KILN_OK);

    char *s = roundtrip(g);
    kiln_error err = {0};
    kiln_graph *g2 = NULL;
    expect_ok(kiln_graph_read_json_string(ctx, s, strlen(s), "b64", &g2, &err), &err);
    int seen = 0; /* only the two look-alike strings: no placeholder left */
    for (const char *p = strstr(s, "kiln-b64-"); p; p = strstr(p + 1, "kiln-b64-"))
        seen++;
    CU_ASSERT_EQUAL(seen, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"data_b64\": \""));
    const kiln_attrs *a2 = kiln_node_attrs(g2, kiln_graph_find_node(g2, "c"));
    kiln_tensor_value t;
    for (int k = 0; k < 10; k++) {
        snprintf(key, sizeof(key), "t%d", k);
        CU_ASSERT_FATAL(kiln_attrs_get_tensor(a2, key, &t));
        CU_ASSERT(t.nbytes == sizeof(v[k]) && memcmp(t.data, v[k], sizeof(v[k])) == 0);
    }
    const char *str;
    CU_ASSERT(kiln_attrs_get_string(a2, "look", &str) &&
              strcmp(str, "kiln-b64-0000000000000000-0") == 0);
    CU_ASSERT(kiln_attrs_get_string(a2, "look2", &str) && strcmp(str, "\"kiln-b64-") == 0);
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_graph_attrs(g2), "gt", &t));
    CU_ASSERT(memcmp(t.data, v[10], sizeof(v[10])) == 0);
    kiln_graph *b2 = kiln_graph_find_subgraph(g2, "w_body");
    CU_ASSERT_FATAL(b2 != NULL);
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(b2, kiln_graph_find_node(b2, "bc")),
                                          "value", &t));
    CU_ASSERT(memcmp(t.data, v[11], sizeof(v[11])) == 0);
    kiln__free(s);
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g);
}

static void test_graph_json_roundtrip_api_graph(void)
{
    kiln_graph *g = build_api_graph();
    char *s = roundtrip(g);
    /* Shortest float forms; explicit forms where the implicit one would not re-read. */
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"third\": 0.3333333333333333,\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"type\": \"list_int\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"value\": \"inf\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"data_b64\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"inputs\": [\"in:put:0\"")); /* scalar arrays inline */
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"engine\": \"cpu\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"_kiln_engine\": 5"));

    /* Values survive exactly. */
    kiln_error err = {0};
    kiln_graph *g2 = NULL;
    expect_ok(kiln_graph_read_json_string(ctx, s, strlen(s), "api", &g2, &err), &err);
    const kiln_attrs *a = kiln_node_attrs(g2, kiln_graph_find_node(g2, "k"));
    kiln_tensor_value t;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "value", &t));
    CU_ASSERT(t.rank == 2 && t.dims[1] == 100 && t.nbytes == 1200);
    CU_ASSERT(((const float *)t.data)[299] == 299.0f / 3.0f);
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "small", &t));
    CU_ASSERT(((const float *)t.data)[1] == 1.0f / 3.0f);
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "weird", &t));
    CU_ASSERT(isnan(((const float *)t.data)[0]));
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(a, "u64", &t));
    CU_ASSERT(((const uint64_t *)t.data)[0] == UINT64_MAX);
    const char *const *strs;
    uint32_t n;
    CU_ASSERT(kiln_attrs_get_list_string(a, "strs", &strs, &n) && n == 2);
    CU_ASSERT_STRING_EQUAL(strs[1], "y\n\"z\"");
    const double *lf;
    CU_ASSERT(kiln_attrs_get_list_float(a, "lf_integral", &lf, &n) && n == 3 && signbit(lf[2]));
    kiln_graph *body = kiln_graph_find_subgraph(g2, "w_body");
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    CU_ASSERT_EQUAL(kiln_graph_depth(kiln_graph_find_subgraph(g2, "pc_f")), 3);
    kiln_node_id o = kiln_graph_find_node(g2, "out");
    CU_ASSERT(kiln_node_input_has_desc(g2, o, 0) && kiln_node_input_has_desc(g2, o, 1));
    CU_ASSERT_EQUAL(kiln_desc_rank(kiln_node_input_desc(g2, o, 1)), 0);
    CU_ASSERT_EQUAL(kiln_desc_offset(kiln_node_output_desc(g2, kiln_graph_find_node(g2, "w"), 1)),
                    0);
    CU_ASSERT(
        kiln_ctrl_exists(g2, kiln_graph_find_node(g2, "k"), kiln_graph_find_node(g2, "in:put")));
    kiln_graph_destroy(g2);
    kiln__free(s);
    kiln_graph_destroy(g);
}

static void test_graph_json_float_digits(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "f");
    kiln_node_id a = kiln_graph_add_node(g, "a", "T", 0, 0);
    kiln_node_id b = kiln_graph_add_node(g, "b", "T", 0, 0);
    kiln_attrs_set_float(kiln_node_attrs_mut(g, a), "x", 0.1);
    kiln_attrs_set_float(kiln_node_attrs_mut(g, a), "y", 1e-7);
    kiln_attrs_set_float(kiln_node_attrs_mut(g, b), "z", 2.0);
    char *s = roundtrip(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"x\": 0.1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"y\": 1e-07") || strstr(s, "\"y\": 1e-7"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"z\": 2.0"));
    kiln__free(s);
    kiln_graph_destroy(g);
}

static void test_graph_json_empty_graph(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "empty");
    char *s = roundtrip(g);
    CU_ASSERT_STRING_EQUAL(s,
                           "{\n  \"kiln_graph\": 1,\n  \"name\": \"empty\",\n  \"nodes\": []\n}\n");
    kiln__free(s);
    kiln_graph_destroy(g);
}

static void test_graph_json_colon_names(void)
{
    const char *text = "{\"kiln_graph\": 1, \"name\": \"c\", \"nodes\": ["
                       "{\"name\": \"a:1\", \"type\": \"Data\", \"outputs\": [{}]},"
                       "{\"name\": \"b\", \"type\": \"Add\", \"inputs\": [\"a:1\", \"a:1:0\"],"
                       " \"outputs\": [{}]}]}";
    kiln_error err = {0};
    kiln_graph *g = NULL;
    expect_ok(kiln_graph_read_json_string(ctx, text, strlen(text), NULL, &g, &err), &err);
    kiln_node_id b = kiln_graph_find_node(g, "b");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, b, 0).node, 1);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, b, 1).node, 1);
    kiln__free(roundtrip(g));
    kiln_graph_destroy(g);
}

/* ---- the direct writer against the tree writer it replaced --------------- */

/* The writer emits text straight from the IR; tests/common/graph_json_ref.c
 * is the jansson-tree writer it replaced.  Both must give the same bytes. */
static void same_as_tree_writer(const kiln_graph *g)
{
    kiln_error err = {0};
    char *got = kiln_graph_to_json_string(g, &err);
    char *want = kiln_test_graph_json_ref(g, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    if (strcmp(got, want) != 0) {
        size_t i = 0;
        while (got[i] && got[i] == want[i])
            i++;
        size_t from = i > 200 ? i - 200 : 0;
        fprintf(stderr,
                "\nwriters differ at byte %zu:\n--- tree ---\n%.400s\n--- direct ---\n%.400s\n", i,
                want + from, got + from);
    }
    CU_ASSERT_STRING_EQUAL(got, want);
    kiln__free(got);
    kiln__free(want);
}

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (uint32_t)((rng_state >> 33) % n) : 0;
}

/* Strings with everything the escaper and the UTF-8 check see: quotes,
 * backslashes, control characters, DEL, 2-, 3- and 4-byte UTF-8. */
static const char *rnd_string(char *buf, size_t size)
{
    static const char *const bits[] = {"a",
                                       "Z",
                                       "0",
                                       "_",
                                       "/",
                                       ":",
                                       " ",
                                       "\"",
                                       "\\",
                                       "\n",
                                       "\t",
                                       "\r",
                                       "\b",
                                       "\f",
                                       "\x01",
                                       "\x1f",
                                       "\x7f",
                                       "\xc3\xa9",
                                       "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80",
                                       "kiln-b64-",
                                       "{}[],"};
    size_t len = 0, parts = rnd(6);
    buf[0] = 0;
    for (size_t i = 0; i < parts; i++) {
        const char *b = bits[rnd(sizeof bits / sizeof bits[0])];
        size_t bl = strlen(b);
        if (len + bl + 1 >= size)
            break;
        memcpy(buf + len, b, bl + 1);
        len += bl;
    }
    return buf;
}

static double rnd_double(void)
{
    static const double special[] = {0.0,     -0.0, 0.1,           1.0 / 3.0,
                                     2.0,     -2.5, 1e300,         -1e-300,
                                     5e-324,  1e16, 123456789.125, 3.4028234663852886e38,
                                     65504.0, 1e-7};
    switch (rnd(5)) {
    case 0:
        return NAN;
    case 1:
        return rnd(2) ? INFINITY : -INFINITY;
    case 2: {
        uint64_t b = (uint64_t)rnd(1u << 31) << 33 ^ (uint64_t)rnd(1u << 31) << 2 ^ rnd(4);
        double d;
        memcpy(&d, &b, sizeof d);
        return isfinite(d) ? d : 1.5;
    }
    default:
        return special[rnd(sizeof special / sizeof special[0])];
    }
}

static void rnd_tensor(kiln_attrs *a, const char *key)
{
    kiln_dtype dt = (kiln_dtype)rnd(KILN_DT_COUNT);
    uint32_t rank = rnd(4);
    int64_t dims[3] = {1, 1, 1};
    for (uint32_t i = 0; i < rank; i++)
        dims[i] = rnd(6) == 0 ? 0 : 1 + rnd(i == 0 && rnd(4) == 0 ? 100 : 5);
    int64_t numel = 1;
    for (uint32_t i = 0; i < rank; i++)
        numel *= dims[i];
    size_t esz = kiln_dtype_size(dt), nbytes = esz ? (size_t)numel * esz : rnd(10);
    uint8_t *data = kiln__malloc(nbytes + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < nbytes; i++)
        data[i] = (uint8_t)rnd(256);
    /* mostly finite, in-range values, so most small tensors stay inline */
    for (int64_t k = 0; rnd(4) && k < numel; k++) {
        uint8_t *p = data + k * esz;
        if (dt == KILN_DT_FLOAT32) {
            float f = (float)(rnd(3) ? (double)rnd(1000) / 7.0 : rnd_double());
            memcpy(p, &f, 4);
        } else if (dt == KILN_DT_FLOAT64) {
            double d = rnd(3) ? (double)rnd(1000) / 7.0 : rnd_double();
            memcpy(p, &d, 8);
        } else if (dt == KILN_DT_FLOAT16 || dt == KILN_DT_BFLOAT16) {
            uint32_t h = dt == KILN_DT_FLOAT16 ? kiln__small_float_encode(rnd(1000) / 7.0, 10, 5)
                                               : kiln__small_float_encode(rnd(1000) / 7.0, 7, 8);
            kiln__store_le(p, 2, h);
        } else if (dt == KILN_DT_BOOL) {
            p[0] = (uint8_t)rnd(rnd(8) ? 2 : 256);
        } else if (dt == KILN_DT_UINT64 && rnd(2)) {
            memset(p, 0, 8);
        }
    }
    kiln_tensor_value tv = {dt, rank, dims, data, nbytes};
    CU_ASSERT(kiln_attrs_set_tensor(a, key, &tv) == KILN_OK);
    kiln__free(data);
}

static void rnd_attrs(kiln_attrs *a, bool node)
{
    char key[64], s[64];
    uint32_t n = rnd(8);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%u", rnd(4) ? "k" : rnd_string(s, 40), i);
        kiln_attr_type t = (kiln_attr_type)(1 + rnd(KILN_ATTR_TENSOR));
        int64_t il[5] = {0, -1, INT64_MAX, INT64_MIN, 42};
        double fl[5];
        uint8_t bl[4] = {1, 0, 1, 1};
        char sb[3][64];
        const char *sl[3] = {rnd_string(sb[0], 40), rnd_string(sb[1], 40), rnd_string(sb[2], 40)};
        uint32_t len = rnd(5);
        for (uint32_t k = 0; k < 5; k++)
            fl[k] = rnd(3) ? (double)rnd(100) / 8.0 : rnd_double();
        switch (t) {
        case KILN_ATTR_BOOL:
            kiln_attrs_set_bool(a, key, rnd(2));
            break;
        case KILN_ATTR_INT:
            kiln_attrs_set_int(a, key, il[rnd(5)] ^ (int64_t)rnd(3));
            break;
        case KILN_ATTR_FLOAT:
            kiln_attrs_set_float(a, key, fl[0]);
            break;
        case KILN_ATTR_STRING:
            kiln_attrs_set_string(a, key, rnd_string(s, 60));
            break;
        case KILN_ATTR_LIST_INT:
            kiln_attrs_set_list_int(a, key, il, len);
            break;
        case KILN_ATTR_LIST_FLOAT:
            kiln_attrs_set_list_float(a, key, fl, len);
            break;
        case KILN_ATTR_LIST_STRING:
            kiln_attrs_set_list_string(a, key, sl, len > 3 ? 3 : len);
            break;
        case KILN_ATTR_LIST_BOOL:
            kiln_attrs_set_list_bool(a, key, bl, len > 4 ? 4 : len);
            break;
        case KILN_ATTR_LIST_LIST_INT: {
            const int64_t *lists[3] = {il, il + 1, il + 3};
            uint32_t lens[3] = {rnd(3), 0, rnd(3)};
            kiln_attrs_set_list_list_int(a, key, lists, lens, len > 3 ? 3 : len);
            break;
        }
        case KILN_ATTR_DTYPE:
            kiln_attrs_set_dtype(a, key, (kiln_dtype)rnd(KILN_DT_COUNT));
            break;
        default:
            rnd_tensor(a, key);
            break;
        }
    }
    if (node && rnd(3) == 0)
        kiln_attrs_set_string(a, KILN_ATTR_ENGINE, rnd(2) ? "cpu" : rnd_string(s, 30));
    if (node && rnd(3) == 0)
        kiln_attrs_set_int(a, KILN_ATTR_STREAM_ID, (int64_t)rnd(5) - 1);
    if (node && rnd(3) == 0)
        kiln_attrs_set_int(a, KILN_ATTR_TOPO_ID, rnd(100));
    if (node && rnd(6) == 0) /* reserved names with other types stay attributes */
        kiln_attrs_set_float(a, KILN_ATTR_TOPO_ID, 1.5);
}

static void rnd_desc(kiln_graph *g, kiln_tensor_desc *d)
{
    char s[64];
    if (!d)
        return;
    kiln_desc_set_dtype(g, d, (kiln_dtype)rnd(KILN_DT_COUNT));
    if (rnd(4)) {
        int64_t dims[4] = {-1, 1 + rnd(9), 0, 224};
        kiln_desc_set_shape(g, d, (int32_t)rnd(5), dims);
    }
    if (rnd(4) == 0)
        kiln_desc_set_format(g, d, rnd(2) ? "NCHW" : rnd_string(s, 30));
    if (rnd(4) == 0)
        kiln_desc_set_offset(g, d, rnd(3) ? rnd(4096) : 0);
    if (rnd(4) == 0)
        kiln_desc_set_size(g, d, rnd(4096));
    if (rnd(4) == 0)
        kiln_desc_set_memory_type(g, d, rnd(2) ? "HBM" : "P2P");
    if (rnd(3) == 0)
        rnd_attrs(kiln_desc_attrs_mut(g, d), false);
}

static uint32_t sub_serial;

static void rnd_nodes(kiln_graph *g, uint32_t count, int depth)
{
    char name[80], s[64];
    kiln_node_id ids[16];
    for (uint32_t i = 0; i < count; i++) {
        snprintf(name, sizeof name, "n%u%s", i, rnd(4) ? "" : rnd_string(s, 40));
        uint32_t nin = i ? rnd(4) : 0, nout = rnd(4);
        char op[64];
        snprintf(op, sizeof op, "T%s", rnd(3) ? "" : rnd_string(s, 30));
        kiln_node_id n = kiln_graph_add_node(g, name, op, nin, nout);
        CU_ASSERT_FATAL(n != 0);
        ids[i] = n;
        for (uint32_t k = 0; k < nin; k++) {
            kiln_node_id src = ids[rnd(i)];
            uint32_t nsrc = kiln_node_output_count(g, src);
            if (nsrc && rnd(5))
                kiln_edge_add(g, src, rnd(nsrc), n, k);
            if (rnd(5) == 0)
                rnd_desc(g, kiln_node_input_desc_mut(g, n, k));
        }
        for (uint32_t k = 0; i && k < rnd(3); k++)
            kiln_ctrl_add(g, ids[rnd(i)], n);
        for (uint32_t k = 0; k < nout; k++)
            rnd_desc(g, kiln_node_output_desc(g, n, k));
        if (rnd(2))
            rnd_attrs(kiln_node_attrs_mut(g, n), true);
        for (uint32_t k = 0; depth < 2 && rnd(6) == 0 && k < 2; k++) {
            char sname[64];
            snprintf(sname, sizeof sname, "sub%u", sub_serial++);
            kiln_graph *sg =
                kiln_node_add_subgraph(g, n, k ? "else_branch" : rnd_string(s, 20), sname);
            if (!sg)
                continue;
            if (rnd(2))
                rnd_attrs(kiln_graph_attrs(sg), false);
            rnd_nodes(sg, rnd(4), depth + 1);
        }
    }
}

static void test_graph_json_direct_writer_random(void)
{
    rng_state = 20261203;
    for (int round = 0; round < 400; round++) {
        char s[64];
        kiln_graph *g = kiln_graph_create(ctx, round % 7 ? "rand" : rnd_string(s, 40));
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        if (rnd(3) == 0)
            rnd_attrs(kiln_graph_attrs(g), false);
        rnd_nodes(g, rnd(12), 0);
        same_as_tree_writer(g);
        kiln_graph_destroy(g);
    }
}

/* The writer caches the quoted text of symbols (keys, op types, string
 * values, formats) by symbol in a table of a few thousand entries: many
 * distinct symbols (entries replaced), long ones (not cached), ones that need
 * escaping (not cached) and repeated ones must all give the tree writer's
 * bytes. */
static void test_graph_json_direct_writer_symbol_cache(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "symcache");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    char name[64], key[128], val[128];
    for (uint32_t i = 0; i < 6000; i++) {
        snprintf(name, sizeof name, "n%u", i);
        snprintf(val, sizeof val, "Op%u", i % 5000);
        kiln_node_id n = kiln_graph_add_node(g, name, val, 0, 1);
        CU_ASSERT_FATAL(n != 0);
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        snprintf(key, sizeof key, "key_%u", i % 4500);
        kiln_attrs_set_int(a, key, i);
        snprintf(key, sizeof key, "a_long_attribute_key_that_does_not_fit_a_cache_entry_%u", i % 7);
        snprintf(val, sizeof val, "v%u", i % 3000);
        kiln_attrs_set_string(a, key, val);
        snprintf(key, sizeof key, "esc\"%u\\", i % 3);
        snprintf(val, sizeof val, "tab\t%u", i % 4);
        kiln_attrs_set_string(a, key, val);
        if (i % 2)
            kiln_attrs_set_string(a, KILN_ATTR_ENGINE, i % 4 == 1 ? "cpu" : "ai\"core");
        if (i % 3 == 0)
            kiln_attrs_set_int(a, KILN_ATTR_STREAM_ID, i % 5);
        kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        snprintf(val, sizeof val, "F%u", i % 2500);
        kiln_desc_set_format(g, d, val);
    }
    same_as_tree_writer(g);
    kiln_graph_destroy(g);
}

static void same_as_tree_writer_file(const char *rel, const char *name)
{
    (void)name;
    kiln_graph *g = read_file(rel);
    same_as_tree_writer(g);
    kiln_graph_destroy(g);
}

/* Fixed graphs: the good files, the API graph (every attribute type, inline
 * and base64 tensors, float16, non-finite floats, subgraphs, control edges,
 * input descriptors), an empty graph and one with empty subgraphs. */
static void test_graph_json_direct_writer_fixed(void)
{
    CU_ASSERT(each_json_file("good", same_as_tree_writer_file) >= 3);
    kiln_graph *g = build_api_graph();
    same_as_tree_writer(g);
    kiln_graph_destroy(g);
    g = kiln_graph_create(ctx, "empty");
    same_as_tree_writer(g);
    kiln_attrs_set_list_string(kiln_graph_attrs(g), "none", NULL, 0);
    same_as_tree_writer(g);
    kiln_node_id n = kiln_graph_add_node(g, "if", "If", 0, 0);
    CU_ASSERT_FATAL(kiln_node_add_subgraph(g, n, "then_branch", "t") &&
                    kiln_node_add_subgraph(g, n, "else_branch", "e"));
    same_as_tree_writer(g);
    kiln_graph_destroy(g);
}

/* Strings that are not UTF-8 (as jansson's check sees them) are an error,
 * wherever they are: a name, a value, a key. */
static void test_graph_json_writer_rejects_bad_utf8(void)
{
    static const char *const bad[] = {
        "\xff", "a\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80\xaf", "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int where = 0; where < 3; where++) {
            kiln_graph *g = kiln_graph_create(ctx, "u");
            kiln_node_id n = kiln_graph_add_node(g, where == 0 ? bad[i] : "n", "Op", 0, 1);
            CU_ASSERT_FATAL(n != 0);
            if (where == 1)
                kiln_attrs_set_string(kiln_node_attrs_mut(g, n), "s", bad[i]);
            if (where == 2)
                kiln_attrs_set_int(kiln_desc_attrs_mut(g, kiln_node_output_desc(g, n, 0)), bad[i],
                                   1);
            kiln_error err = {0};
            char *s = kiln_graph_to_json_string(g, &err);
            CU_ASSERT_PTR_NULL(s);
            CU_ASSERT_EQUAL(kiln_error_code(&err), KILN_ERR_INVALID);
            CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "not UTF-8"));
            kiln__free(s);
            kiln_graph_destroy(g);
        }
    }
    /* the same bytes as valid sequences pass */
    kiln_graph *g = kiln_graph_create(ctx, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf");
    kiln_error err = {0};
    char *s = kiln_graph_to_json_string(g, &err);
    CU_ASSERT_PTR_NOT_NULL(s);
    kiln__free(s);
    kiln_graph_destroy(g);
}

/* A write error (a full device) is reported as one. */
static void test_graph_json_writer_io_error(void)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        return; /* no /dev/full here */
    kiln_graph *g = kiln_graph_create(ctx, "full");
    static char big[300000];
    memset(big, 'x', sizeof big - 1);
    kiln_node_id n = kiln_graph_add_node(g, "n", "Op", 0, 0);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, n), "s", big);
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_graph_write_json(g, f, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "cannot write graph JSON"));
    fclose(f);
    kiln_graph_destroy(g);
}

/* ---- bad inputs (table-driven over tests/data/json/bad) ------------------ */

/* The "x-expect-error" string, found textually (works for broken JSON). */
static bool expected_fragment(const char *path, char *out, size_t size)
{
    char *text;
    size_t len;
    if (kiln_file_read_all(path, &text, &len, NULL) != KILN_OK)
        return false;
    const char *p = strstr(text, "\"x-expect-error\": \"");
    bool ok = false;
    if (p) {
        p += strlen("\"x-expect-error\": \"");
        size_t o = 0;
        for (; *p && *p != '"' && o + 1 < size; p++)
            out[o++] = (*p == '\\' && p[1]) ? *++p : *p;
        out[o] = 0;
        ok = true;
    }
    kiln__free(text);
    return ok;
}

static void read_bad_file(const char *rel, const char *name)
{
    char path[4096], want[400], got[2048];
    snprintf(path, sizeof(path), "%s", data_path(rel));
    CU_ASSERT_FATAL(expected_fragment(path, want, sizeof(want)));
    kiln_error err = {0};
    kiln_graph *g = (kiln_graph *)1;
    kiln_status st = kiln_graph_read_json_file(ctx, path, &g, &err);
    kiln_error_format(&err, got, sizeof(got));
    bool ok = st != KILN_OK && g == NULL && strstr(kiln_error_message(&err), want) != NULL &&
              strstr(got, name) != NULL; /* file named by frame or message */
    if (!ok)
        fprintf(stderr, "\n%s: status %s, message \"%s\", wanted \"%s\"\n", name,
                kiln_status_name(st), got, want);
    CU_ASSERT(ok);
}

static void test_graph_json_bad_files(void)
{
    CU_ASSERT(each_json_file("bad", read_bad_file) >= 20);
}

static void test_graph_json_missing_file(void)
{
    kiln_error err = {0};
    kiln_graph *g = NULL;
    CU_ASSERT_EQUAL(kiln_graph_read_json_file(ctx, "/nonexistent/x.json", &g, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "/nonexistent/x.json"));
}

/* ---- scale ---------------------------------------------------------------- */

/* A long chain round-trips intact (speed is measured by bench/ir_scale, not here). */
static void test_graph_json_large_graph(void)
{
#if defined(__SANITIZE_ADDRESS__)
    const uint32_t N = 50000; /* instrumented malloc makes jansson much slower */
#else
    const uint32_t N = 200000;
#endif
    kiln_graph *g = kiln_graph_create(ctx, "big");
    kiln_graph_reserve(g, N, 2 * N, N);
    char name[32];
    kiln_node_id prev = 0, prev2 = 0;
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "n%u", i);
        kiln_node_id n = kiln_graph_add_node(g, name, i ? "Add" : "Data", i ? 2 : 0, 1);
        int64_t dims[2] = {1, i};
        kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), 2, dims);
        if (prev)
            kiln_edge_add(g, prev, 0, n, 0);
        if (prev2)
            kiln_edge_add(g, prev2, 0, n, 1);
        prev2 = prev;
        prev = n;
    }
    char *s = kiln_graph_to_json_string(g, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    kiln_error err = {0};
    kiln_graph *g2 = NULL;
    expect_ok(kiln_graph_read_json_string(ctx, s, strlen(s), "big", &g2, &err), &err);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g2), N);
    /* the round trip is exact: writing the copy gives the same text */
    char *s2 = g2 ? kiln_graph_to_json_string(g2, NULL) : NULL;
    CU_ASSERT(s2 && strcmp(s, s2) == 0);
    kiln__free(s2);
    kiln__free(s);
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g);
}

/* ---- reading a file in place --------------------------------------------- */

/* A file larger than the window the reader keeps resident (it maps the file
 * and drops the pages it has parsed): the graph equals the one read from the
 * same text in memory, and errors near the end still name their line and
 * column or JSON path.  Nodes with many small values and a big data_b64 go
 * past the per-node allocation arena's chunk and its large-block limit. */
static char *big_doc(uint32_t nodes, const char *tail)
{
    size_t cap = (size_t)nodes * 1300 + 4 * 1024 * 1024, len = 0;
    char *t = kiln__malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    len += (size_t)snprintf(t + len, cap - len,
                            "{\"kiln_graph\": 1, \"name\": \"big\", \"nodes\": [\n"
                            "{\"name\": \"n0\", \"type\": \"Data\", \"outputs\": [{}]}");
    char pad[1001];
    memset(pad, 'p', 1000);
    pad[1000] = 0;
    for (uint32_t i = 1; i < nodes; i++)
        len +=
            (size_t)snprintf(t + len, cap - len,
                             ",\n{\"name\": \"n%u\", \"type\": \"Relu\", \"inputs\": [\"n%u:0\"], "
                             "\"outputs\": [{\"shape\": [1, %u]}], \"attrs\": {\"s\": \"%s\"}}",
                             i, i - 1, i, pad);
    /* one node with 40000 list elements, one with 1.5 MB of base64 */
    len += (size_t)snprintf(t + len, cap - len,
                            ",\n{\"name\": \"many\", \"type\": \"T\", "
                            "\"attrs\": {\"l\": [0");
    for (int i = 1; i < 40000; i++)
        len += (size_t)snprintf(t + len, cap - len, ", %d", i);
    len += (size_t)snprintf(t + len, cap - len,
                            "]}},\n{\"name\": \"w\", \"type\": \"Const\", "
                            "\"attrs\": {\"value\": {\"type\": \"tensor\", \"value\": {\"dtype\": "
                            "\"uint8\", \"shape\": [1179648], \"data_b64\": \"");
    for (int i = 0; i < 1179648 / 3; i++)
        memcpy(t + len + 4 * (size_t)i, "AQID", 4); /* bytes 1, 2, 3 */
    len += 4 * (size_t)(1179648 / 3);
    len += (size_t)snprintf(t + len, cap - len, "\"}}}}%s\n]}\n", tail);
    CU_ASSERT_FATAL(len < cap);
    return t;
}

static char *write_temp(const char *text, char *path, size_t size)
{
    snprintf(path, size, "/tmp/kiln_json_big_%d_XXXXXX", (int)getpid());
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    size_t len = strlen(text);
    CU_ASSERT_FATAL(write(fd, text, len) == (ssize_t)len);
    close(fd);
    return path;
}

static void test_graph_json_read_file_in_place(void)
{
#if defined(__SANITIZE_ADDRESS__)
    const uint32_t N = 12000; /* > 8 MB: one dropped block */
#else
    const uint32_t N = 20000;
#endif
    char path[128];
    char *text = big_doc(N, "");
    write_temp(text, path, sizeof path);
    kiln_error err = {0};
    kiln_graph *gf = NULL, *gs = NULL;
    expect_ok(kiln_graph_read_json_file(ctx, path, &gf, &err), &err);
    expect_ok(kiln_graph_read_json_string(ctx, text, strlen(text), path, &gs, &err), &err);
    CU_ASSERT_EQUAL(kiln_graph_node_count(gf), N + 2);
    char *a = kiln_graph_to_json_string(gf, &err), *b = kiln_graph_to_json_string(gs, &err);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(strcmp(a, b) == 0);
    const int64_t *l;
    uint32_t n;
    CU_ASSERT(kiln_attrs_get_list_int(kiln_node_attrs(gf, kiln_graph_find_node(gf, "many")), "l",
                                      &l, &n) &&
              n == 40000 && l[39999] == 39999);
    kiln_tensor_value t;
    CU_ASSERT_FATAL(
        kiln_attrs_get_tensor(kiln_node_attrs(gf, kiln_graph_find_node(gf, "w")), "value", &t));
    CU_ASSERT(t.nbytes == 1179648 && ((const uint8_t *)t.data)[1179647] == 3);
    kiln__free(a);
    kiln__free(b);
    kiln_graph_destroy(gf);
    kiln_graph_destroy(gs);
    unlink(path);
    kiln__free(text);

    /* a syntax error on the last line: its line and column */
    text = big_doc(N, ",\n{\"name\": }");
    write_temp(text, path, sizeof path);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_read_json_file(ctx, path, &gf, &err), KILN_ERR_PARSE);
    char want[256];
    snprintf(want, sizeof want, "%s:%u:10: syntax error: unexpected token", path, N + 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), want));
    if (!strstr(kiln_error_message(&err), want))
        fprintf(stderr, "\nwanted %s, got %s\n", want, kiln_error_message(&err));
    unlink(path);
    kiln__free(text);

    /* an error found after the nodes: the JSON path */
    text = big_doc(N, ",\n{\"name\": \"x\", \"type\": \"T\", \"inputs\": [\"nope:0\"]}");
    write_temp(text, path, sizeof path);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_read_json_file(ctx, path, &gf, &err), KILN_ERR_NOT_FOUND);
    snprintf(want, sizeof want,
             "$.nodes[%u].inputs[0]: node \"x\": input 0 names missing "
             "producer \"nope\"",
             N + 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), want));
    char full[1024];
    kiln_error_format(&err, full, sizeof full);
    CU_ASSERT_PTR_NOT_NULL(strstr(full, path));
    unlink(path);
    kiln__free(text);
}

/* ---- "nodes" on two threads ------------------------------------------------ */

/* Read @p text with slots of @p chunk bytes (SIZE_MAX / 4: on one thread);
 * the graph written back, or NULL with @p err set. */
static char *read_chunked(const char *text, size_t chunk, kiln_error *err)
{
    kiln__json_read_chunk = chunk;
    kiln_graph *g = NULL;
    kiln_status st = kiln_graph_read_json_string(ctx, text, strlen(text), "chunked", &g, err);
    kiln__json_read_chunk = 0;
    char *s = st == KILN_OK ? kiln_graph_to_json_string(g, err) : NULL;
    kiln_graph_destroy(g);
    return s;
}

/* A chain of @p n nodes with attributes and a subgraph; node @p bad_at (when
 * < n) is replaced by @p bad. */
static char *chain_doc(uint32_t n, uint32_t bad_at, const char *bad)
{
    size_t cap = (size_t)n * 300 + 4096, len = 0;
    char *t = kiln__malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    len += (size_t)snprintf(t + len, cap - len, "{\"kiln_graph\": 1, \"nodes\": [\n");
    for (uint32_t i = 0; i < n; i++) {
        const char *sep = i ? ",\n" : "";
        if (i == bad_at)
            len += (size_t)snprintf(t + len, cap - len, "%s%s", sep, bad);
        else if (i == 0)
            len += (size_t)snprintf(t + len, cap - len,
                                    "{\"name\": \"n0\", \"type\": \"Data\", "
                                    "\"attrs\": {\"index\": 0}, \"outputs\": [{\"dtype\": "
                                    "\"float16\", \"shape\": [2, 3]}]}");
        else if (i == n / 2)
            len += (size_t)snprintf(
                t + len, cap - len,
                "%s{\"name\": \"n%u\", \"type\": \"If\", \"inputs\": [\"n%u:0\", \"n%u\"], "
                "\"outputs\": [{}], \"subgraphs\": {\"then_branch\": {\"name\": \"t\", "
                "\"nodes\": [{\"name\": \"a\", \"type\": \"Data\", \"attrs\": "
                "{\"_parent_node_index\": 0}, \"outputs\": [{}]}, {\"name\": \"o\", "
                "\"type\": \"NetOutput\", \"inputs\": [\"a:0\"]}]}}}",
                sep, i, i - 1, i - 1);
        else
            len += (size_t)snprintf(t + len, cap - len,
                                    "%s{\"name\": \"n%u\", \"type\": \"Relu\", \"inputs\": "
                                    "[\"n%u:0\"], \"control_inputs\": [\"n%u\"], \"outputs\": "
                                    "[{\"shape\": [1, %u]}], \"attrs\": {\"k\": %u}}",
                                    sep, i, i - 1, i / 2, i, i % 7);
    }
    len += (size_t)snprintf(t + len, cap - len, "\n], \"name\": \"chain\"}\n");
    CU_ASSERT_FATAL(len < cap);
    return t;
}

/* The two-thread reader gives the graph and the messages of the one-thread
 * reader: slots of one node and of a few hundred bytes, errors before,
 * inside and after the list, and every file of tests/data/json/bad. */
static void read_bad_file_chunked(const char *rel, const char *name)
{
    kiln__json_read_chunk = 1;
    read_bad_file(rel, name);
    kiln__json_read_chunk = 0;
}

static void read_good_file_chunked(const char *rel, const char *name)
{
    (void)name;
    char *text;
    size_t len;
    CU_ASSERT_FATAL(kiln_file_read_all(data_path(rel), &text, &len, NULL) == KILN_OK);
    kiln_error err = {0};
    char *a = read_chunked(text, SIZE_MAX / 4, &err), *b = read_chunked(text, 1, &err);
    CU_ASSERT(a && b && strcmp(a, b) == 0);
    kiln__free(a);
    kiln__free(b);
    kiln__free(text);
}

static void test_graph_json_read_chunked(void)
{
    const uint32_t N = 3000;
    char *text = chain_doc(N, N, NULL);
    kiln_error err = {0};
    char *one = read_chunked(text, SIZE_MAX / 4, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    static const size_t chunks[] = {1, 100, 777, 4096, 65536};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        char *two = read_chunked(text, chunks[c], &err);
        CU_ASSERT(two && strcmp(one, two) == 0);
        kiln__free(two);
    }
    kiln__free(one);
    kiln__free(text);

    /* errors: each read both ways gives the same status and message */
    static const struct {
        uint32_t at;
        const char *node, *want;
    } bad[] = {
        {5, "{\"name\": \"n1\", \"type\": \"T\"}", "$.nodes[5].name: duplicate node name"},
        {2000, "{\"name\": \"x\", \"type\": \"T\", \"bogus\": 1}",
         "$.nodes[2000].bogus: unknown key"},
        {2500, "{\"name\": }", ":2502:10: syntax error"},
        {2500, "{\"name\": \"x\", \"type\": \"T\"} {", "expected ',' or ']' in \"nodes\""},
        {2999, "{\"name\": \"x\", \"type\": \"T\", \"inputs\": [\"nope\"]}",
         "$.nodes[2999].inputs[0]: node \"x\": input 0 names missing producer \"nope\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        text = chain_doc(N, bad[i].at, bad[i].node);
        char m1[1024], m2[1024];
        kiln_error e1 = {0}, e2 = {0};
        CU_ASSERT_PTR_NULL(read_chunked(text, SIZE_MAX / 4, &e1));
        CU_ASSERT_PTR_NULL(read_chunked(text, 300, &e2));
        kiln_error_format(&e1, m1, sizeof m1);
        kiln_error_format(&e2, m2, sizeof m2);
        CU_ASSERT_EQUAL(e1.code, e2.code);
        CU_ASSERT_STRING_EQUAL(m1, m2);
        CU_ASSERT_PTR_NOT_NULL(strstr(m2, bad[i].want));
        if (!strstr(m2, bad[i].want))
            fprintf(stderr, "\nwanted %s, got %s\n", bad[i].want, m2);
        kiln__free(text);
    }

    CU_ASSERT(each_json_file("bad", read_bad_file_chunked) >= 20);
    CU_ASSERT(each_json_file("good", read_good_file_chunked) >= 3);
}

/* Inputs that are not a plain non-empty file go through a whole read: an
 * empty file is a syntax error, a directory is named as one. */
static void test_graph_json_read_file_not_mapped(void)
{
    char path[128];
    write_temp("", path, sizeof path);
    kiln_error err = {0};
    kiln_graph *g = (kiln_graph *)1;
    CU_ASSERT_EQUAL(kiln_graph_read_json_file(ctx, path, &g, &err), KILN_ERR_PARSE);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), ":1:1: syntax error"));
    unlink(path);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_read_json_file(ctx, "/tmp", &g, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "directory"));
    /* a FIFO: read as a stream, opened once */
    snprintf(path, sizeof path, "/tmp/kiln_json_fifo_%d", (int)getpid());
    CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
    pid_t child = fork();
    CU_ASSERT_FATAL(child >= 0);
    if (child == 0) {
        FILE *f = fopen(path, "w");
        fputs("{\"kiln_graph\": 1, \"name\": \"p\", \"nodes\": [{\"name\": \"a\", "
              "\"type\": \"Data\", \"outputs\": [{}]}]}",
              f);
        _exit(fclose(f) == 0 ? 0 : 1);
    }
    kiln_error_clear(&err);
    expect_ok(kiln_graph_read_json_file(ctx, path, &g, &err), &err);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 1);
    kiln_graph_destroy(g);
    int status = 0;
    CU_ASSERT(waitpid(child, &status, 0) == child && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0);
    unlink(path);
}

/* ---- fileio --------------------------------------------------------------- */

static kiln_status write_hello(FILE *f, void *ud, kiln_error *err)
{
    (void)ud;
    (void)err;
    fputs("hello\n", f);
    return KILN_OK;
}

static kiln_status write_then_fail(FILE *f, void *ud, kiln_error *err)
{
    (void)ud;
    fputs("partial", f);
    return kiln_errorf(err, KILN_ERR_INTERNAL, "writer failed on purpose");
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_fileio_atomic_write_and_failure(void)
{
    char dir[] = "/tmp/kiln_fileio_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    kiln_error err = {0};

    /* A failing writer leaves neither the file nor a temporary. */
    CU_ASSERT_EQUAL(kiln_file_write_atomic(path, write_then_fail, NULL, &err), KILN_ERR_INTERNAL);
    CU_ASSERT_STRING_EQUAL(kiln_error_message(&err), "writer failed on purpose");
    CU_ASSERT_EQUAL(access(path, F_OK), -1);
    CU_ASSERT_EQUAL(count_entries(dir), 0);

    /* Success writes the file; a later failure keeps the old content. */
    kiln_error_clear(&err);
    expect_ok(kiln_file_write_atomic(path, write_hello, NULL, &err), &err);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_file_write_atomic(path, write_then_fail, NULL, &err), KILN_ERR_INTERNAL);
    char *buf;
    size_t len;
    expect_ok(kiln_file_read_all(path, &buf, &len, &err), &err);
    CU_ASSERT_EQUAL(len, 6);
    CU_ASSERT_STRING_EQUAL(buf, "hello\n");
    kiln__free(buf);
    CU_ASSERT_EQUAL(count_entries(dir), 1);

    /* Graph writer goes through the same path. */
    kiln_graph *g = build_api_graph();
    kiln_error_clear(&err);
    snprintf(path, sizeof(path), "%s/g.json", dir);
    expect_ok(kiln_graph_write_json_file(g, path, &err), &err);
    kiln_graph *g2 = NULL;
    expect_ok(kiln_graph_read_json_file(ctx, path, &g2, &err), &err);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g2), kiln_graph_node_count(g));
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g);
    unlink(path);
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    unlink(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

static void test_fileio_errors(void)
{
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_file_write_atomic("/nonexistent-dir/x", write_hello, NULL, &err),
                    KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "/nonexistent-dir/x"));
    kiln_error_clear(&err);
    char *buf = (char *)1;
    CU_ASSERT_EQUAL(kiln_file_read_all("/nonexistent-dir/y", &buf, NULL, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NULL(buf);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_file_read_all("/tmp", &buf, NULL, &err), KILN_ERR_IO);
}

/* kiln_file_commit: a temporary written by someone else replaces the target;
 * a failed commit removes the temporary and leaves the target alone. */
static void test_fileio_commit(void)
{
    char dir[] = "/tmp/kiln_commit_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char path[256], tmp[256];
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    snprintf(tmp, sizeof(tmp), "%s/out.txt.part", dir);
    FILE *f = fopen(tmp, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("exported\n", f);
    fclose(f);
    kiln_error err = {0};
    expect_ok(kiln_file_commit(tmp, path, &err), &err);
    char *buf;
    expect_ok(kiln_file_read_all(path, &buf, NULL, &err), &err);
    CU_ASSERT_STRING_EQUAL(buf, "exported\n");
    kiln__free(buf);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
    /* rename into a missing directory fails: the temporary goes, out.txt stays */
    f = fopen(tmp, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    char bad[300];
    snprintf(bad, sizeof(bad), "%s/missing/out.txt", dir);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_file_commit(tmp, bad, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "cannot rename"));
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
    CU_ASSERT_EQUAL(count_entries(dir), 1);
    unlink(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

int main(void)
{
    static const kiln_test_case json_tests[] = {
        {"test_graph_json_roundtrip_good_files", test_graph_json_roundtrip_good_files},
        {"test_graph_json_reads_example", test_graph_json_reads_example},
        {"test_graph_json_reads_subgraphs_and_keys", test_graph_json_reads_subgraphs_and_keys},
        {"test_graph_json_reads_attr_forms", test_graph_json_reads_attr_forms},
        {"test_graph_json_roundtrip_api_graph", test_graph_json_roundtrip_api_graph},
        {"test_graph_json_b64_many_and_lookalikes", test_graph_json_b64_many_and_lookalikes},
        {"test_graph_json_float_digits", test_graph_json_float_digits},
        {"test_graph_json_empty_graph", test_graph_json_empty_graph},
        {"test_graph_json_colon_names", test_graph_json_colon_names},
        {"test_graph_json_direct_writer_fixed", test_graph_json_direct_writer_fixed},
        {"test_graph_json_direct_writer_random", test_graph_json_direct_writer_random},
        {"test_graph_json_direct_writer_symbol_cache", test_graph_json_direct_writer_symbol_cache},
        {"test_graph_json_writer_rejects_bad_utf8", test_graph_json_writer_rejects_bad_utf8},
        {"test_graph_json_writer_io_error", test_graph_json_writer_io_error},
        {"test_graph_json_bad_files", test_graph_json_bad_files},
        {"test_graph_json_missing_file", test_graph_json_missing_file},
        {"test_graph_json_large_graph", test_graph_json_large_graph},
        {"test_graph_json_read_file_in_place", test_graph_json_read_file_in_place},
        {"test_graph_json_read_file_not_mapped", test_graph_json_read_file_not_mapped},
        {"test_graph_json_read_chunked", test_graph_json_read_chunked},
        {NULL, NULL},
    };
    static const kiln_test_case fileio_tests[] = {
        {"test_fileio_atomic_write_and_failure", test_fileio_atomic_write_and_failure},
        {"test_fileio_errors", test_fileio_errors},
        {"test_fileio_commit", test_fileio_commit},
        {NULL, NULL},
    };
    static const kiln_test_suite suites[] = {
        {"graph_json", json_tests},
        {"fileio", fileio_tests},
        {NULL, NULL},
    };
    ctx = kiln_ctx_create();
    if (!ctx)
        return 1;
    int rc = kiln_test_run_suites(suites);
    kiln_ctx_destroy(ctx);
    return rc;
}
