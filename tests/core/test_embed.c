/*
 * test_embed.c - the embedding API (kiln_embed.h) as an embedder uses it:
 * the default manifest, a JSON and an ONNX model compiled, written, read back
 * and run with named inputs and outputs, every override, introspection, and
 * the errors of each call (named input, dtype, shape, order of calls).
 * Only the installed header is used; the kernel comes from the static archive.
 */
#include "kiln_test.h"
#include <kiln/kiln_embed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char msg[2048];
static char dir[] = "/tmp/kiln-embed-XXXXXX";

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

#define EXPECT_ERR(call, code, fragment)                                                       \
    do {                                                                                       \
        kiln_error_clear(err);                                                                 \
        CU_ASSERT_EQUAL((call), (code));                                                       \
        if (!strstr(emsg(err), (fragment))) {                                                  \
            fprintf(stderr, "\n%s:%d: got '%s', want '%s'\n", __FILE__, __LINE__, msg,         \
                    (fragment));                                                               \
            CU_FAIL("message");                                                                \
        }                                                                                      \
        kiln_error_clear(err);                                                                 \
    } while (0)

static const char *data_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/tests/data/run/%s", kiln_test_env("KILN_SOURCE_DIR", ".."), name);
    return buf;
}

static float X[6] = {-2, -1, 0, 1, 2, -2}, Y[6] = {-1, 0, 1, 2, -2, -1};
static const int64_t D23[2] = {2, 3};

/* Bind x and y, compile, run; check Relu(x + y) and x @ w. */
static void run_add_relu(kiln_model *m, kiln_error *err, bool compile)
{
    kiln_tensor x = {KILN_DT_FLOAT32, 2, D23, X, sizeof(X)};
    kiln_tensor y = {KILN_DT_FLOAT32, 2, D23, Y, sizeof(Y)};
    EXPECT_OK(kiln_model_set_input(m, "x", &x, err));
    EXPECT_OK(kiln_model_set_input_at(m, 1, &y, err));
    if (compile)
        EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_OK(kiln_model_run(m, err));
    CU_ASSERT_EQUAL_FATAL(kiln_model_output_count(m), 2);
    CU_ASSERT_STRING_EQUAL(kiln_model_output_name(m, 0), "relu");
    CU_ASSERT_EQUAL(kiln_model_output_index(m, "mm"), 1);
    const kiln_tensor *r = kiln_model_output(m, 0), *mm = kiln_model_output(m, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mm);
    static const float want_r[6] = {0, 0, 1, 3, 0, 0}, want_mm[4] = {-2, -1, -1, 0};
    CU_ASSERT_EQUAL(r->dtype, KILN_DT_FLOAT32);
    CU_ASSERT(r->rank == 2 && r->dims[0] == 2 && r->dims[1] == 3);
    CU_ASSERT(mm->rank == 2 && mm->dims[0] == 2 && mm->dims[1] == 2);
    CU_ASSERT(r->nbytes == sizeof(want_r) && memcmp(r->data, want_r, sizeof(want_r)) == 0);
    CU_ASSERT(mm->nbytes == sizeof(want_mm) && memcmp(mm->data, want_mm, sizeof(want_mm)) == 0);
}

static void test_embed_compile_write_run(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(kiln_error_code(err), KILN_OK);
    uint32_t major = 0, minor = 99;
    kiln_abi_version(&major, &minor);
    CU_ASSERT(major == KILN_ABI_MAJOR && minor == KILN_ABI_MINOR);
    CU_ASSERT(strchr(kiln_version(), '.') != NULL);
    CU_ASSERT(strstr(kiln_default_manifest(), "share/kiln/manifests/default.json") != NULL);
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));

    char path[4096], out[4200];
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    CU_ASSERT_EQUAL(kiln_model_input_count(m), 2);
    CU_ASSERT_STRING_EQUAL(kiln_model_input_name(m, 1), "y");
    CU_ASSERT_EQUAL(kiln_model_input_index(m, "y"), 1);
    CU_ASSERT_EQUAL(kiln_model_input_index(m, "nope"), -1);
    kiln_dtype dt;
    int32_t rank;
    const int64_t *dims;
    CU_ASSERT_EQUAL(kiln_model_input_desc(m, 0, &dt, &rank, &dims), KILN_OK);
    CU_ASSERT(dt == KILN_DT_FLOAT32 && rank == 2 && dims[0] == 2 && dims[1] == 3);
    CU_ASSERT_PTR_NULL(kiln_model_output(m, 0)); /* not run yet */
    EXPECT_ERR(kiln_model_run(m, err), KILN_ERR_INVALID, "the model is not compiled");
    EXPECT_ERR(kiln_model_prepare(m, err), KILN_ERR_INVALID, "the model is not compiled");
    run_add_relu(m, err, true);
    EXPECT_OK(kiln_model_prepare(m, err)); /* already loaded: a no-op */
    /* a second run with new data in the same buffers */
    X[0] = 5;
    EXPECT_OK(kiln_model_run(m, err));
    CU_ASSERT_EQUAL(((const float *)kiln_model_output(m, 0)->data)[0], 4); /* relu(5 - 1) */
    X[0] = -2;
    EXPECT_OK(kiln_model_verify(m, err));

    /* write JSON, DOT and ONNX; read the JSON and the ONNX back and run them */
    snprintf(out, sizeof(out), "%s/c.json", dir);
    EXPECT_OK(kiln_model_write(m, out, NULL, err));
    snprintf(out, sizeof(out), "%s/c.dot", dir);
    EXPECT_OK(kiln_model_write(m, out, NULL, err));
    snprintf(out, sizeof(out), "%s/graph", dir); /* no extension: format given */
    EXPECT_OK(kiln_model_write(m, out, "onnx", err));
    char *json = kiln_model_to_json(m, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT(strstr(json, "\"kiln_graph\"") != NULL);
    kiln_model *mj = NULL;
    EXPECT_OK(kiln_model_import_json(s, json, strlen(json), &mj, err));
    kiln_free(json);
    run_add_relu(mj, err, true);
    kiln_model_destroy(mj);
    kiln_model *mo = NULL;
    EXPECT_OK(kiln_model_import(s, out, "onnx", &mo, err));
    run_add_relu(mo, err, true);
    kiln_model_destroy(mo);
    snprintf(out, sizeof(out), "%s/c.json", dir);
    EXPECT_OK(kiln_model_import(s, out, NULL, &mo, err));
    run_add_relu(mo, err, true);
    kiln_model_destroy(mo);
    snprintf(out, sizeof(out), "%s/report.json", dir);
    EXPECT_OK(kiln_model_write_report(m, out, err));
    CU_ASSERT_EQUAL(access(out, R_OK), 0);

    /* the input checks */
    float small[2] = {0};
    kiln_tensor bad = {KILN_DT_FLOAT32, 1, (const int64_t[]){2}, small, sizeof(small)};
    EXPECT_ERR(kiln_model_set_input(m, "z", &bad, err), KILN_ERR_NOT_FOUND,
               "the model has no input named 'z' (inputs: x, y)");
    EXPECT_ERR(kiln_model_set_input(m, "x", &bad, err), KILN_ERR_INVALID,
               "input x: expected float32 [2,3], got float32 [2]");
    bad.dtype = KILN_DT_INT32;
    EXPECT_ERR(kiln_model_set_input_at(m, 0, &bad, err), KILN_ERR_INVALID, "got int32 [2]");
    EXPECT_ERR(kiln_model_set_input_at(m, 7, &bad, err), KILN_ERR_NOT_FOUND,
               "the model has no input 7 (it has 2)");

    /* formats nobody provides */
    snprintf(out, sizeof(out), "%s/c.xyz", dir);
    EXPECT_ERR(kiln_model_write(m, out, NULL, err), KILN_ERR_UNSUPPORTED,
               "no loaded plugin writes '.xyz' files");
    EXPECT_ERR(kiln_model_write(m, out, "tflite", err), KILN_ERR_UNSUPPORTED,
               "no loaded plugin writes 'tflite' (--format; formats known: json, dot, onnx");
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    kiln_model *none = NULL;
    FILE *xyz = fopen(out, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(xyz);
    fclose(xyz);
    EXPECT_ERR(kiln_model_import(s, out, NULL, &none, err), KILN_ERR_UNSUPPORTED,
               "no loaded plugin imports '.xyz' files");
    EXPECT_ERR(kiln_model_import(s, "/nonexistent/m.onnx", NULL, &none, err), KILN_ERR_NOT_FOUND,
               "/nonexistent/m.onnx: no such file");
    CU_ASSERT_PTR_NULL(none);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* A missing input is named with its dtype and shape. */
static void test_embed_missing_input(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    char path[4096];
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), "json", &m, err));
    kiln_tensor x = {KILN_DT_FLOAT32, 2, D23, X, sizeof(X)};
    EXPECT_OK(kiln_model_set_input(m, "x", &x, err));
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_ERR(kiln_model_run(m, err), KILN_ERR_INVALID,
               "run: missing input y (index 1, float32 [2,3])");
    /* after compiling, the shape is fixed */
    kiln_tensor x2 = {KILN_DT_FLOAT32, 2, (const int64_t[]){3, 2}, X, sizeof(X)};
    EXPECT_ERR(kiln_model_set_input(m, "x", &x2, err), KILN_ERR_INVALID, "expected float32 [2,3]");
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* Overrides, extra plugins and introspection. */
static void test_embed_session_overrides(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    /* overrides edit a loaded pipeline */
    EXPECT_ERR(kiln_session_set_passes(s, "PruneGraphPass", err), KILN_ERR_INVALID,
               "no manifest loaded");
    EXPECT_ERR(kiln_session_select_passes(s, "Prune", false, err), KILN_ERR_INVALID,
               "no manifest loaded");
    char path[4096];
    kiln_model *m = NULL;
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    EXPECT_ERR(kiln_model_compile(m, NULL, err), KILN_ERR_INVALID, "no manifest loaded");
    kiln_model_destroy(m);
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    EXPECT_OK(kiln_session_set_option(s, "ge.x", "1", err));
    CU_ASSERT_STRING_EQUAL(kiln_session_option(s, "ge.x"), "1");
    EXPECT_OK(kiln_session_select_passes(s, "^Prune", false, err));
    EXPECT_ERR(kiln_session_set_pass_option(s, "NoSuchPass", "k", "v", err), KILN_ERR_NOT_FOUND,
               "NoSuchPass");
    EXPECT_OK(kiln_session_set_instrumentation(s, "verify_each", "true", err));
    EXPECT_OK(kiln_session_set_instrumentation(s, "bisect_limit", "-1", err));
    EXPECT_OK(kiln_session_set_instrumentation(s, "print_after", NULL, err));
    EXPECT_ERR(kiln_session_set_instrumentation(s, "verify_each", "yes", err), KILN_ERR_PARAM,
               "expected true or false, got yes");
    EXPECT_ERR(kiln_session_set_instrumentation(s, "colour", "1", err), KILN_ERR_PARAM,
               "unknown instrumentation setting 'colour'");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    kiln_session_print_pipeline(s, f, true);
    fclose(f);
    CU_ASSERT(strstr(text, "-PruneGraphPass") != NULL); /* disabled by the selector */
    free(text);
    EXPECT_OK(kiln_session_set_passes(s, "prepare(InferShapes),lint(GraphLint)", err));
    EXPECT_ERR(kiln_session_set_passes(s, "NoSuchPass", err), KILN_ERR_NOT_FOUND, "NoSuchPass");

    /* an extra plugin file, then the registry as the CLI's `plugins` verb lists it */
    char tp[4096];
    snprintf(tp, sizeof(tp), "%s/libtp_host_has.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    EXPECT_OK(kiln_session_load_plugin(s, tp, err));
    EXPECT_ERR(kiln_session_load_plugin(s, "/nonexistent/libx.so", err), KILN_ERR_NOT_FOUND,
               "cannot open /nonexistent/libx.so");
    bool found = false;
    for (uint32_t i = 0; i < kiln_session_component_count(s); i++) {
        kiln_component_info ci = {.struct_size = sizeof(ci)};
        CU_ASSERT_FATAL(kiln_session_component(s, i, &ci));
        if (strcmp(ci.name, "HostHasPass") != 0)
            continue;
        found = true;
        CU_ASSERT_STRING_EQUAL(ci.kind, "pass");
        CU_ASSERT_EQUAL(((const kiln_pass_desc *)ci.desc)->kind, KILN_PASS_KIND_GRAPH);
        kiln_plugin_info pi = {.struct_size = sizeof(pi)};
        CU_ASSERT_FATAL(kiln_session_plugin(s, (uint32_t)ci.plugin, &pi));
        CU_ASSERT_STRING_EQUAL(pi.name, "kiln.test.host_has");
        CU_ASSERT(pi.file && strstr(pi.file, "libtp_host_has.so"));
    }
    CU_ASSERT(found);
    kiln_component_info old = {.struct_size = 4};
    CU_ASSERT_FALSE(kiln_session_component(s, 0, &old)); /* too small a struct */
    kiln_plugin_info pi_far = {.struct_size = sizeof(pi_far)};
    CU_ASSERT_FALSE(kiln_session_plugin(s, 9999, &pi_far));

    /* a fusion pass listed in the pipeline runs: Relu(Relu(x)) -> Relu(x) */
    kiln_session *s2 = kiln_session_create();
    char mf[4200];
    snprintf(mf, sizeof(mf), "%s/empty.json", dir);
    FILE *mfp = fopen(mf, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mfp);
    fputs("{\"kiln_manifest\": 1}", mfp);
    fclose(mfp);
    EXPECT_OK(kiln_session_load_manifest(s2, mf, err));
    snprintf(tp, sizeof(tp), "%s/libtp_good.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    EXPECT_OK(kiln_session_load_plugin(s2, tp, err));
    EXPECT_OK(kiln_session_set_passes(s2, "TestFusionPass", err));
    char rr[4200];
    snprintf(rr, sizeof(rr), "%s/relu_relu.json", dir);
    FILE *rfp = fopen(rr, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rfp);
    fputs("{\"kiln_graph\": 1, \"name\": \"rr\", \"nodes\": ["
          "{\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, "
          "\"outputs\": [{\"dtype\": \"float32\", \"shape\": [2]}]},"
          "{\"name\": \"r1\", \"type\": \"Relu\", \"inputs\": [\"x:0\"], "
          "\"outputs\": [{\"dtype\": \"float32\", \"shape\": [2]}]},"
          "{\"name\": \"r2\", \"type\": \"Relu\", \"inputs\": [\"r1:0\"], "
          "\"outputs\": [{\"dtype\": \"float32\", \"shape\": [2]}]},"
          "{\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"r2:0\"]}]}",
          rfp);
    fclose(rfp);
    EXPECT_OK(kiln_model_import(s2, rr, NULL, &m, err));
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    uint32_t relus = 0;
    kiln_graph *rg = kiln_model_graph(m);
    for (kiln_node_id v = kiln_graph_next_node(rg, 0); v; v = kiln_graph_next_node(rg, v))
        relus += strcmp(kiln_node_op_str(rg, v), "Relu") == 0;
    CU_ASSERT_EQUAL(relus, 1);
    kiln_model_destroy(m);
    kiln_session_destroy(s2);

    /* a runtime nobody provides */
    EXPECT_OK(kiln_session_set_option(s, "kiln.runtime", "warp", err));
    EXPECT_OK(kiln_session_set_passes(s, "prepare(InferShapes)", err));
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    kiln_tensor x = {KILN_DT_FLOAT32, 2, D23, X, sizeof(X)};
    EXPECT_OK(kiln_model_set_input_at(m, 0, &x, err));
    EXPECT_OK(kiln_model_set_input_at(m, 1, &x, err));
    kiln_compile_options co = {sizeof(co), "no_such_step", NULL, NULL};
    EXPECT_ERR(kiln_model_compile(m, &co, err), KILN_ERR_PARAM, "unknown build step 'no_such_step'");
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_ERR(kiln_model_run(m, err), KILN_ERR_NOT_FOUND,
               "option kiln.runtime names runtime 'warp', which no loaded plugin provides");
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

static char hello[] = "hello\n";

/* A writer for kiln_output_write. */
static kiln_status write_hello(FILE *f, void *ud, kiln_error *err)
{
    (void)err;
    return fputs((const char *)ud, f) >= 0 ? KILN_OK : KILN_ERR_IO;
}

/* Options, suggestions, components, build steps, formats, files and the output set. */
static void test_embed_helpers(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const char *hint = "x";
    CU_ASSERT(kiln_option_key_known("kiln.runtime", &hint) && !hint);
    CU_ASSERT(kiln_option_key_known("kiln.input_shape.x", NULL));
    CU_ASSERT(kiln_option_key_known("cpu.threads", &hint)); /* a plugin's */
    CU_ASSERT(!kiln_option_key_known("kiln.runtim", &hint));
    CU_ASSERT(hint && strcmp(hint, "kiln.runtime") == 0);
    CU_ASSERT(!kiln_option_key_known("kiln.input_shapes.x", &hint));
    CU_ASSERT(hint && strcmp(hint, "kiln.input_shape.x") == 0);
    static const char *const verbs[] = {"compile", "convert", "run"};
    CU_ASSERT_STRING_EQUAL(kiln_suggest("compil", verbs, 3), "compile");
    CU_ASSERT(kiln_build_step_valid("after_ub_match") && !kiln_build_step_valid("later"));

    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    CU_ASSERT(kiln_session_has_component(s, "pass", "InferShapes"));
    CU_ASSERT(!kiln_session_has_component(s, "engine", "InferShapes"));
    CU_ASSERT(!kiln_session_has_component(s, "pass", "NoSuchPass"));
    char fmts[256];
    kiln_session_formats(s, true, fmts, sizeof(fmts));
    CU_ASSERT_STRING_EQUAL(fmts, "json, onnx, kmodel");
    kiln_session_formats(s, false, fmts, sizeof(fmts));
    CU_ASSERT_STRING_EQUAL(fmts, "json, dot, onnx, kmodel");

    /* a manifest with an unknown kiln.* option is refused, with a suggestion */
    char man[4200], a[4200], b[4200];
    snprintf(man, sizeof(man), "%s/badopt.json", dir);
    FILE *f = fopen(man, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"kiln_manifest\": 1, \"options\": {\"kiln.runtme\": \"seq\"}}\n");
    fclose(f);
    kiln_session *s2 = kiln_session_create();
    EXPECT_ERR(kiln_session_load_manifest(s2, man, err), KILN_ERR_PARAM,
               "unknown option 'kiln.runtme' (did you mean 'kiln.runtime'?)");
    kiln_session_destroy(s2);

    /* files: check and read */
    EXPECT_ERR(kiln_input_check("/nonexistent/in.bin", err), KILN_ERR_NOT_FOUND, "no such file");
    EXPECT_ERR(kiln_input_check(dir, err), KILN_ERR_IO, "is a directory");
    char *buf = NULL;
    size_t len = 0;
    EXPECT_OK(kiln_input_read(man, &buf, &len, err));
    CU_ASSERT(buf && len == strlen(buf) && strstr(buf, "kiln_manifest"));
    kiln_free(buf);

    /* the output set: nothing until the commit, nothing at all on abort */
    kiln_model *m = NULL;
    char path[4096];
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    snprintf(a, sizeof(a), "%s/set_a.txt", dir);
    snprintf(b, sizeof(b), "%s/set_b.dot", dir);
    kiln_output_set_begin();
    EXPECT_OK(kiln_output_write(a, write_hello, hello, err));
    EXPECT_OK(kiln_model_write(m, b, NULL, err));
    CU_ASSERT(access(a, F_OK) != 0 && access(b, F_OK) != 0);
    kiln_output_set_abort();
    CU_ASSERT(access(a, F_OK) != 0 && access(b, F_OK) != 0);
    kiln_output_set_begin();
    EXPECT_OK(kiln_output_write(a, write_hello, hello, err));
    EXPECT_OK(kiln_model_write(m, b, "dot", err));
    EXPECT_OK(kiln_output_set_commit(err));
    CU_ASSERT(access(a, R_OK) == 0 && access(b, R_OK) == 0);
    /* a format by name, with or without its dot */
    snprintf(a, sizeof(a), "%s/noext", dir);
    EXPECT_OK(kiln_model_write(m, a, ".onnx", err));
    kiln_model *back = NULL;
    EXPECT_OK(kiln_model_import(s, a, "onnx", &back, err));
    CU_ASSERT_EQUAL(kiln_model_input_count(back), 2);
    kiln_model_destroy(back);
    EXPECT_ERR(kiln_model_import(s, a, NULL, &back, err), KILN_ERR_UNSUPPORTED,
               "no extension to tell the format by (formats known: json, onnx");
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* Pause at a build step, write the state, resume it in a fresh session. */
static void test_embed_pause_resume(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    EXPECT_OK(kiln_session_set_option(s, "x.note", "kept", err));
    kiln_model *m = NULL;
    char path[4096], state[4200], out[4200];
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    snprintf(state, sizeof(state), "%s/state.json", dir);
    EXPECT_ERR(kiln_model_write_paused(m, state, err), KILN_ERR_INVALID, "did not pause");
    kiln_compile_options co = {
        .struct_size = sizeof(co), .stop_step = "before_ub_match", .build_mode = "tuning"};
    CU_ASSERT_EQUAL_FATAL(kiln_model_compile(m, &co, err), KILN_PAUSED);
    CU_ASSERT_STRING_EQUAL(kiln_model_paused_step(m), "before_ub_match");
    CU_ASSERT_PTR_NULL(kiln_model_resumed_step(m));
    EXPECT_OK(kiln_model_write_paused(m, state, err));
    kiln_model_destroy(m);

    /* a session that loaded anything cannot resume */
    EXPECT_ERR(kiln_session_resume(s, state, &m, err), KILN_ERR_INVALID, "must be fresh");
    kiln_session_destroy(s);

    s = kiln_session_create();
    EXPECT_OK(kiln_session_resume(s, state, &m, err));
    CU_ASSERT_STRING_EQUAL(kiln_model_resumed_step(m), "before_ub_match");
    CU_ASSERT_STRING_EQUAL(kiln_session_option(s, "x.note"), "kept"); /* replayed */
    CU_ASSERT(kiln_model_step_reachable(m, "after_build"));
    CU_ASSERT(!kiln_model_step_reachable(m, "before_ub_match"));
    co.stop_step = "before_ub_match";
    EXPECT_ERR(kiln_model_compile(m, &co, err), KILN_ERR_PARAM, "is not after before_ub_match");
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    CU_ASSERT_PTR_NULL(kiln_model_paused_step(m));
    snprintf(out, sizeof(out), "%s/resumed.json", dir);
    EXPECT_OK(kiln_model_write(m, out, NULL, err));
    run_add_relu(m, err, false);
    CU_ASSERT_PTR_NOT_NULL(kiln_model_runtime(m));
    kiln_model_destroy(m);
    kiln_session_destroy(s);

    /* a state that is not one */
    s = kiln_session_create();
    kiln_error_clear(err);
    CU_ASSERT_NOT_EQUAL(kiln_session_resume(s, path, &m, err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(err), path));
    CU_ASSERT_PTR_NULL(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* Input shapes, the inputs' I/O status, node names and runtime options. */
static void test_embed_inputs_runtime(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    kiln_model *m = NULL;
    char path[4096];
    EXPECT_OK(kiln_model_import(s, data_path("add_relu.json", path, sizeof(path)), NULL, &m, err));
    EXPECT_OK(kiln_model_io_status(m, err));
    CU_ASSERT_STRING_EQUAL(kiln_model_input_node(m, 0), "x");
    CU_ASSERT_PTR_NULL(kiln_model_input_node(m, 2));
    char ds[64] = "junk";
    kiln_model_input_desc_str(m, 1, ds, sizeof(ds));
    CU_ASSERT_STRING_EQUAL(ds, "float32 [2,3]");
    kiln_model_input_desc_str(m, 2, ds, sizeof(ds));
    CU_ASSERT_STRING_EQUAL(ds, "");
    EXPECT_ERR(kiln_model_set_input_shape(m, "x", 2, (const int64_t[]){4, 3}, err),
               KILN_ERR_INVALID, "input x is declared float32 [2,3]; only its unknown dims");
    EXPECT_ERR(kiln_model_set_input_shape(m, "q", 1, (const int64_t[]){1}, err), KILN_ERR_NOT_FOUND,
               "the model has no input named 'q'");
    EXPECT_OK(kiln_model_set_input_shape(m, "x", 2, D23, err));
    CU_ASSERT_STRING_EQUAL(kiln_session_option(s, "kiln.input_shape.x"), "2,3");
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_OK(kiln_model_set_runtime_option(m, "no_such_option", "1", err));
    EXPECT_ERR(kiln_model_prepare(m, err), KILN_ERR_UNSUPPORTED, "has no no_such_option option");
    CU_ASSERT_PTR_NULL(kiln_model_runtime(m));
    kiln_model_destroy(m);

    /* Data nodes without unique indices: the model still compiles and
     * writes, but has no inputs to set or run */
    char *text = NULL;
    size_t len = 0;
    EXPECT_OK(kiln_input_read(path, &text, &len, err));
    char *one = strstr(text, "\"index\": 1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    one[9] = '0';
    EXPECT_OK(kiln_model_import_json(s, text, len, &m, err));
    kiln_free(text);
    EXPECT_ERR(kiln_model_io_status(m, err), KILN_ERR_INVALID, "attribute 'index' must be unique");
    CU_ASSERT_EQUAL(kiln_model_input_count(m), 0);
    kiln_tensor x = {KILN_DT_FLOAT32, 2, D23, X, sizeof(X)};
    EXPECT_ERR(kiln_model_set_input(m, "x", &x, err), KILN_ERR_INVALID, "must be unique");
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_ERR(kiln_model_run(m, err), KILN_ERR_INVALID, "must be unique");
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    static const kiln_test_case cases[] = {
        {"test_embed_compile_write_run", test_embed_compile_write_run},
        {"test_embed_missing_input", test_embed_missing_input},
        {"test_embed_session_overrides", test_embed_session_overrides},
        {"test_embed_helpers", test_embed_helpers},
        {"test_embed_pause_resume", test_embed_pause_resume},
        {"test_embed_inputs_runtime", test_embed_inputs_runtime},
        {NULL, NULL},
    };
    int rc = kiln_test_run("embed", cases);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
