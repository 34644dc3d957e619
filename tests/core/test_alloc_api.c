/*
 * test_alloc_api.c - the runtime allocator stacks through the public API only
 * (kiln_alloc_api.h, kiln_session_alloc_stack_create), as a program outside
 * the project drives them: the header's example sequence with its recycle
 * figures, reuse after the final clean, host sharing, errors naming the
 * allocator, the caching L1, and four threads on four streams of one stack
 * (labelled "threads": make test-tsan runs it).
 */
#ifndef KILN_EXPERIMENTAL
#define KILN_EXPERIMENTAL
#endif
#include <stdlib.h>
#include "kiln_test.h"
#include <kiln/kiln_embed.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kiln_session *S;
static kiln_error *E;
static char msg[2048];

static const char *emsg(void)
{
    kiln_error_format(E, msg, sizeof(msg));
    if (getenv("KILN_TEST_VERBOSE"))
        fprintf(stderr, "[%s]\n", msg);
    return msg;
}

static bool session(void)
{
    if (S)
        return true;
    E = kiln_error_create();
    S = kiln_session_create();
    /* the source tree's manifest (a build that only made the test targets,
     * make test-tsan, installs none beside the binary); plugins from the build */
    char path[1024];
    const char *src = getenv("KILN_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/manifests/default.json", src ? src : "..");
    if (getenv("KILN_PLUGIN_DIR"))
        setenv("KILN_PLUGIN_PATH", getenv("KILN_PLUGIN_DIR"), 1);
    if (!S || kiln_session_load_manifest(S, path, E) != KILN_OK) {
        fprintf(stderr, "\nmanifest: %s\n", emsg());
        return false;
    }
    return true;
}

static kiln_alloc_stats stats(kiln_alloc_stack *a)
{
    kiln_alloc_stats s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    kiln_alloc_stack_stats(a, &s);
    return s;
}

static void test_example_sequence(void)
{
    CU_ASSERT_FATAL(session());
    uint32_t ev[2] = {0, 1};
    kiln_alloc_config cfg = {sizeof(cfg), 2, 1, ev, 0};
    kiln_alloc_stack *a = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", NULL, 0, &cfg, &a, E),
                          KILN_OK);
    void *p = kiln_alloc_stack_alloc(a, 4096, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
    memset(p, 0xab, 4096);
    CU_ASSERT_EQUAL(kiln_alloc_stack_access(a, p, 0, 1, E), KILN_OK);
    kiln_alloc_stack_free(a, p, 0);
    kiln_alloc_stats s = stats(a);
    CU_ASSERT_EQUAL(s.local_recycles, 1);
    CU_ASSERT_EQUAL(s.allocated, 4096);
    /* still occupied by stream 1: a new block on stream 0 is another block */
    void *q = kiln_alloc_stack_alloc(a, 4096, 0);
    CU_ASSERT_PTR_NOT_EQUAL(q, p);
    kiln_alloc_stack_free(a, q, 0);
    CU_ASSERT_EQUAL(kiln_alloc_stack_send_events(a, 0, (const uint32_t[]){0}, 1, E), KILN_OK);
    kiln_alloc_stack_free(a, p, 1);
    CU_ASSERT_EQUAL(kiln_alloc_stack_wait_events(a, 1, (const uint32_t[]){0}, 1, E), KILN_OK);
    s = stats(a);
    CU_ASSERT_EQUAL(s.local_recycles, 2);
    CU_ASSERT_EQUAL(s.borrow_recycles, 1); /* settled at 1: filed in 1's borrow allocator */
    CU_ASSERT_EQUAL(s.allocated, 0);
    kiln_alloc_stack_free(a, p, 1); /* a second free of a recycled block is ignored */
    CU_ASSERT_EQUAL(stats(a).borrow_recycles, 1);
    kiln_alloc_stack_last_wait(a);
    s = stats(a);
    CU_ASSERT_EQUAL(s.birth_recycles, 2);
    CU_ASSERT_EQUAL(s.cached, 2 * 4096); /* both pools back in L1 */
    void *r = kiln_alloc_stack_alloc(a, 4096, 1);
    CU_ASSERT(r == p || r == q); /* from L1's cache, no system call */
    CU_ASSERT_EQUAL(stats(a).system_allocs, 2);
    kiln_alloc_stack_free(a, r, 1);
    /* errors name the allocator */
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_alloc_stack_send_events(a, 0, (const uint32_t[]){5}, 1, E),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "three_layer"));
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "event 5 out of range"));
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_alloc_stack_access(a, (void *)&cfg, 0, 1, E), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "not allocated by this stack"));
    CU_ASSERT_PTR_NULL(kiln_alloc_stack_alloc(a, 16, 2)); /* stream out of range */
    CU_ASSERT_PTR_NULL(kiln_alloc_stack_alloc(a, 0, 0));
    void *leak = kiln_alloc_stack_alloc(a, 1000, 0); /* released with the stack */
    CU_ASSERT_PTR_NOT_NULL(leak);
    kiln_alloc_stack_destroy(a);
}

static void test_host_share(void)
{
    CU_ASSERT_FATAL(session());
    kiln_alloc_config cfg = {sizeof(cfg), 2, 0, NULL, KILN_ALLOC_HOST_MEMORY};
    kiln_alloc_stack *a = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", NULL, 0, &cfg, &a, E),
                          KILN_OK);
    void *p = kiln_alloc_stack_alloc(a, 100, 0);
    CU_ASSERT_EQUAL(kiln_alloc_stack_access(a, p, 0, 1, E), KILN_OK);
    kiln_alloc_stack_free(a, p, 1);
    CU_ASSERT_EQUAL(stats(a).allocated, 100); /* one holder left */
    kiln_alloc_stack_free(a, p, 0);
    CU_ASSERT_EQUAL(stats(a).allocated, 0);
    CU_ASSERT_EQUAL(stats(a).birth_recycles, 1);
    CU_ASSERT_PTR_EQUAL(kiln_alloc_stack_alloc(a, 100, 0), p); /* from stream 0's pool */
    kiln_alloc_stack_destroy(a);
}

static void test_errors(void)
{
    CU_ASSERT_FATAL(session());
    kiln_alloc_config cfg = {sizeof(cfg), 2, 0, NULL, 0};
    kiln_alloc_stack *a = NULL;
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_alloc_stack_create(S, "nosuch", NULL, 0, &cfg, &a, E),
                    KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "nosuch"));
    const char *bad[] = {"capacity"};
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_alloc_stack_create(S, "three_layer", bad, 1, &cfg, &a, E),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "allocator three_layer"));
    const char *unknown[] = {"colour=red"};
    kiln_error_clear(E);
    CU_ASSERT_NOT_EQUAL(kiln_session_alloc_stack_create(S, "three_layer", unknown, 1, &cfg, &a, E),
                        KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "colour"));
    cfg.stream_count = 65;
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_alloc_stack_create(S, "three_layer", NULL, 0, &cfg, &a, E),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "65 streams"));
    uint32_t ev[2] = {0, 3};
    kiln_alloc_config c2 = {sizeof(c2), 2, 1, ev, 0};
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_alloc_stack_create(S, "three_layer", NULL, 0, &c2, &a, E),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "event 0 (0 -> 3)"));
    CU_ASSERT_PTR_NULL(a);
    /* a capacity: beyond it, a request fails */
    const char *cap[] = {"capacity=65536"};
    cfg.stream_count = 1;
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", cap, 1, &cfg, &a, E),
                          KILN_OK);
    void *p = kiln_alloc_stack_alloc(a, 65536, 0);
    CU_ASSERT_PTR_NOT_NULL(p);
    CU_ASSERT_PTR_NULL(kiln_alloc_stack_alloc(a, 1, 0));
    kiln_alloc_stack_free(a, p, 0);
    CU_ASSERT_PTR_NOT_NULL(p = kiln_alloc_stack_alloc(a, 1, 0)); /* pools shrunk into L1 */
    kiln_alloc_stack_destroy(a);
}

static void test_caching(void)
{
    CU_ASSERT_FATAL(session());
    kiln_alloc_config cfg = {sizeof(cfg), 1, 0, NULL, 0};
    kiln_alloc_stack *a = NULL;
    const char *opt[] = {"release_threshold=0"};
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "caching", opt, 1, &cfg, &a, E),
                          KILN_OK);
    void *p = kiln_alloc_stack_alloc(a, 5000, 0);
    CU_ASSERT_EQUAL(stats(a).allocated, 5000);
    kiln_alloc_stack_free(a, p, 0);
    kiln_alloc_stats s = stats(a);
    CU_ASSERT_EQUAL(s.allocated, 0);
    CU_ASSERT_EQUAL(s.reserved, 0); /* threshold 0: nothing cached */
    CU_ASSERT_EQUAL(s.system_frees, 1);
    CU_ASSERT_EQUAL(kiln_alloc_stack_access(a, p, 0, 0, E), KILN_OK); /* no hook: no-op */
    kiln_alloc_stack_destroy(a);
}

/* ---- four threads, four streams ----------------------------------------------------- */
typedef struct worker {
    kiln_alloc_stack *a;
    uint32_t stream;
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (w->stream + 1);
    void *live[16] = {0};
    size_t sz[16] = {0};
    for (int it = 0; it < 20000; it++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t k = (uint32_t)(rng >> 40) % 16;
        if (live[k]) {
            const unsigned char *c = live[k];
            for (size_t i = 0; i < sz[k]; i += 97)
                if (c[i] != (unsigned char)(w->stream * 16 + k))
                    w->bad++;
            kiln_alloc_stack_free(w->a, live[k], w->stream);
            live[k] = NULL;
        } else {
            sz[k] = 64 + (size_t)((rng >> 20) % 20000);
            live[k] = kiln_alloc_stack_alloc(w->a, sz[k], w->stream);
            if (!live[k])
                w->bad++;
            else
                memset(live[k], (int)(w->stream * 16 + k), sz[k]);
        }
    }
    for (int k = 0; k < 16; k++)
        if (live[k])
            kiln_alloc_stack_free(w->a, live[k], w->stream);
    return NULL;
}

static void test_threads(void)
{
    CU_ASSERT_FATAL(session());
    kiln_alloc_config cfg = {sizeof(cfg), 4, 0, NULL, 0};
    kiln_alloc_stack *a = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", NULL, 0, &cfg, &a, E),
                          KILN_OK);
    pthread_t t[4];
    worker w[4];
    for (uint32_t i = 0; i < 4; i++) {
        w[i] = (worker){a, i, 0};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (uint32_t i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(w[i].bad, 0); /* no block handed to two holders at once */
    }
    kiln_alloc_stack_last_wait(a);
    kiln_alloc_stats s = stats(a);
    CU_ASSERT_EQUAL(s.allocated, 0);
    CU_ASSERT_EQUAL(s.allocs, s.frees);
    CU_ASSERT_EQUAL(s.reserved, s.cached); /* every block back in L1 */
    kiln_alloc_stack_destroy(a);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"the header's example: local, borrow, birth recycle", test_example_sequence},
        {"host memory: access shares", test_host_share},
        {"errors name the allocator; capacity", test_errors},
        {"caching L1: release threshold", test_caching},
        {"four threads on four streams", test_threads},
        {NULL, NULL}};
    int rc = kiln_test_run("alloc_api", cases);
    kiln_session_destroy(S);
    kiln_error_destroy(E);
    return rc;
}
