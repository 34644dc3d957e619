/*
 * test_ms_soak.c - soak of the multi-stream runtime: one model with four
 * parallel towers (MatMul on the aicore engine, element-wise ops on the
 * vector engine, so the stream allocator gives it several streams and
 * events) compiled once and run KILN_SOAK_RUNS times (default 10000; 2000 in
 * sanitizer builds) in one process.
 *
 * Every run's outputs must be byte-identical to the sequential runtime's (a
 * race, a lost event or a buffer reused too early shows as a different
 * output; under ThreadSanitizer, which runs this suite with the "threads"
 * label, as a report), and the resident memory must stay flat: after a
 * warm-up of 500 runs, VmRSS may grow by at most 1 MiB over the rest (a lost
 * free per run or a growing pool would exceed it within a few thousand runs).
 * The RSS bound is checked in builds without a sanitizer only (their
 * allocators keep freed memory in quarantine by design); a doubled free is
 * caught there by ASan and a lost one by LeakSanitizer at exit.
 */
#include "kiln_test.h"
#include "kiln/kiln_embed.h"

#include <stdlib.h>

static void put_const(kiln_test_text *t, const char *name, int rows, int cols, uint32_t seed)
{
    kiln_test_put(t, ",\n{\"name\":\"%s\",\"type\":\"Const\",\"outputs\":[{\"dtype\":\"float32\","
           "\"shape\":[%d,%d]}],\"attrs\":{\"value\":{\"type\":\"tensor\",\"value\":{\"dtype\":"
           "\"float32\",\"shape\":[%d,%d],\"data\":[",
        name, rows, cols, rows, cols);
    for (int i = 0; i < rows * cols; i++)
        kiln_test_put(t, "%s%.3f", i ? "," : "", (double)((seed * 31u + (uint32_t)i * 17u) % 19u) / 19.0 - 0.5);
    kiln_test_put(t, "]}}}}");
}

#define OUT1 ",\"outputs\":[{\"dtype\":\"float32\"}]"
#define TOWERS 4
#define DEPTH 3

/* x -> TOWERS x (MatMul -> Relu -> MatMul -> Sigmoid ...) -> Add tree -> out */
static char *towers_graph(void)
{
    kiln_test_text t = {NULL, 0, 0};
    kiln_test_put(&t, "{\"kiln_graph\":1,\"name\":\"soak_towers\",\"nodes\":[\n{\"name\":\"x\",\"type\":"
            "\"Data\",\"attrs\":{\"index\":0},\"outputs\":[{\"dtype\":\"float32\",\"shape\":[16,"
            "32]}]}");
    for (uint32_t k = 0; k < TOWERS; k++) {
        char prev[32] = "x";
        for (uint32_t d = 0; d < DEPTH; d++) {
            char w[32], mm[32], act[32];
            snprintf(w, sizeof(w), "w%u_%u", k, d);
            snprintf(mm, sizeof(mm), "mm%u_%u", k, d);
            snprintf(act, sizeof(act), "act%u_%u", k, d);
            put_const(&t, w, 32, 32, k * 10 + d);
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"MatMul\",\"inputs\":[\"%s:0\",\"%s:0\"]" OUT1
                    "}", mm, prev, w);
            kiln_test_put(&t, ",\n{\"name\":\"%s\",\"type\":\"%s\",\"inputs\":[\"%s:0\"]" OUT1 "}", act,
                d % 2 ? "Sigmoid" : "Relu", mm);
            snprintf(prev, sizeof(prev), "%s", act);
        }
    }
    kiln_test_put(&t, ",\n{\"name\":\"sum01\",\"type\":\"Add\",\"inputs\":[\"act0_%u:0\",\"act1_%u:0\"]" OUT1
            "}", DEPTH - 1, DEPTH - 1);
    kiln_test_put(&t, ",\n{\"name\":\"sum23\",\"type\":\"Add\",\"inputs\":[\"act2_%u:0\",\"act3_%u:0\"]" OUT1
            "}", DEPTH - 1, DEPTH - 1);
    kiln_test_put(&t, ",\n{\"name\":\"sum\",\"type\":\"Mul\",\"inputs\":[\"sum01:0\",\"sum23:0\"]" OUT1 "}");
    kiln_test_put(&t, ",\n{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"sum:0\",\"act1_0:0\"]}\n]}\n");
    return t.s;
}

static kiln_model *compiled(kiln_session *s, const char *json, const float *in, kiln_error *err)
{
    kiln_model *m = NULL;
    static const int64_t dims[2] = {16, 32};
    kiln_tensor x = {KILN_DT_FLOAT32, 2, dims, (void *)(uintptr_t)in, 16 * 32 * sizeof(float)};
    kiln_status st = kiln_model_import_json(s, json, strlen(json), &m, err);
    if (st == KILN_OK)
        st = kiln_model_set_input_at(m, 0, &x, err);
    if (st == KILN_OK)
        st = kiln_model_compile(m, NULL, err);
    if (st != KILN_OK) {
        char msg[2048];
        kiln_error_format(err, msg, sizeof(msg));
        fprintf(stderr, "compile: %s\n", msg);
        kiln_model_destroy(m);
        return NULL;
    }
    return m;
}

/* Resident set size in KiB (0 when /proc is not there). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    long kib = 0;
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void test_soak(void)
{
    setenv("KILN_PLUGIN_PATH", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"), 1);
    bool sanitized = getenv("KILN_TEST_SANITIZE") != NULL;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    sanitized = true;
#endif
    const char *e = getenv("KILN_SOAK_RUNS");
    long runs = e ? atol(e) : (sanitized ? 2000 : 10000);
    char *json = towers_graph();
    float in[16 * 32];
    for (int i = 0; i < 16 * 32; i++)
        in[i] = (float)((i * 7) % 23) / 23.0f - 0.5f;
    kiln_session *seq = kiln_test_session("sequential"), *ms = kiln_test_session("multistream");
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ms);
    kiln_error *err = kiln_error_create();
    kiln_model *ref = compiled(seq, json, in, err);
    kiln_model *m = compiled(ms, json, in, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(kiln_model_run(ref, err), KILN_OK);

    /* the soak means something only with several streams and events */
    const kiln_schedule *sch = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_schedule_get(kiln_model_graph(m), &sch, NULL), KILN_OK);
    uint32_t nev = 0;
    kiln_schedule_events(sch, &nev);
    uint32_t nstreams = kiln_schedule_stream_count(sch);
    CU_ASSERT(nstreams > 1);
    CU_ASSERT(nev > 0);

    uint32_t nout = kiln_model_output_count(ref);
    CU_ASSERT_EQUAL_FATAL(kiln_model_output_count(m), nout);
    long rss_warm = 0, mismatches = 0, failures = 0;
    for (long r = 0; r < runs && failures + mismatches < 3; r++) {
        if (kiln_model_run(m, err) != KILN_OK) {
            char msg[1024];
            kiln_error_format(err, msg, sizeof(msg));
            fprintf(stderr, "run %ld: %s\n", r, msg);
            failures++;
            continue;
        }
        for (uint32_t j = 0; j < nout; j++) {
            const kiln_tensor *a = kiln_model_output(ref, j), *b = kiln_model_output(m, j);
            if (a->nbytes != b->nbytes || memcmp(a->data, b->data, a->nbytes) != 0) {
                fprintf(stderr, "run %ld: output %u differs from the sequential runtime's\n", r, j);
                mismatches++;
                break;
            }
        }
        if (r == 499)
            rss_warm = rss_kib();
    }
    long rss_end = rss_kib();
    fprintf(stderr, "\n  ms_soak: %ld runs on %u streams, %u events; %ld failed, %ld differed; "
            "VmRSS %ld KiB after 500 runs, %ld KiB at the end (%+ld KiB)%s\n",
            runs, nstreams, nev, failures, mismatches, rss_warm, rss_end, rss_end - rss_warm,
            sanitized ? " (not bounded: sanitizer build)" : "");
    CU_ASSERT_EQUAL(failures, 0);
    CU_ASSERT_EQUAL(mismatches, 0);
    if (!sanitized && runs >= 1000 && rss_warm > 0)
        CU_ASSERT(rss_end - rss_warm <= 1024);
    kiln_model_destroy(ref);
    kiln_model_destroy(m);
    kiln_error_destroy(err);
    kiln_session_destroy(seq);
    kiln_session_destroy(ms);
    free(json);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_soak", test_soak},
        {NULL, NULL},
    };
    return kiln_test_run("ms_soak", cases);
}
