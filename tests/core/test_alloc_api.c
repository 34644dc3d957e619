/*
 * test_alloc_api.c - the runtime allocator stacks through the public API only
 * (kiln_alloc_api.h, kiln_session_alloc_stack_create), as a program outside
 * the project drives them: the header's example sequence with its recycle
 * figures, reuse after the final clean, host sharing, errors naming the
 * allocator, the caching L1, four threads on four streams of one stack, and
 * the learned plans (replay) with every blocks' bytes and ranges checked
 * (labelled "threads": make test-tsan runs it).
 */
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
    const char *off[] = {"replay=false"}; /* GE's recycle figures, no learned plan */
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", off, 1, &cfg, &a, E),
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
    /* every block back in L1, but for the arenas of the plan learned from the run */
    CU_ASSERT_EQUAL(s.plans, 1);
    CU_ASSERT_EQUAL(s.reserved, s.cached + s.plan_arena);
    kiln_alloc_stack_destroy(a);
}

/* ---- learned plans (replay) ------------------------------------------------------- */
/* Every block the test holds, with its bytes: an overlap of two live blocks, or
 * a block whose bytes another holder changed, fails the test. */
typedef struct range {
    char *p;
    size_t n;
} range;
static range live_set[4096];
static uint32_t nlive;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static int overlaps;

static void hold(void *p, size_t n, unsigned char tag)
{
    pthread_mutex_lock(&live_mu);
    for (uint32_t i = 0; i < nlive; i++)
        if ((char *)p < live_set[i].p + live_set[i].n && live_set[i].p < (char *)p + n)
            overlaps++;
    if (nlive < 4096)
        live_set[nlive++] = (range){p, n};
    pthread_mutex_unlock(&live_mu);
    memset(p, tag, n);
}

static int release(void *p, size_t n, unsigned char tag)
{
    int bad = 0;
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i += 61)
        bad += c[i] != tag;
    bad += c[n - 1] != tag;
    pthread_mutex_lock(&live_mu);
    for (uint32_t i = 0; i < nlive; i++)
        if (live_set[i].p == p) {
            live_set[i] = live_set[--nlive];
            break;
        }
    pthread_mutex_unlock(&live_mu);
    return bad;
}

/* One run of a stream's requests: @p n requests, request i freed after
 * request i + 2 (a window of three), sizes from @p seed; @p variant: 1 = the
 * fourth request has another size, 2 = one request more, 3 = request 2 is used
 * by stream (s + 1) % streams too and freed there last (access: a no-op for
 * an allocator that does not track streams, whose second free is ignored). */
static int stream_run(kiln_alloc_stack *a, uint32_t s, uint32_t streams, uint32_t n,
                      uint32_t seed, int variant)
{
    void *p[64];
    size_t sz[64];
    int bad = 0;
    uint32_t total = n + (variant == 2);
    for (uint32_t i = 0; i < total && i < 64; i++) {
        if (i >= 3) {
            uint32_t k = i - 3;
            bad += release(p[k], sz[k], (unsigned char)(s * 64 + k));
            kiln_alloc_stack_free(a, p[k], s);
            if (variant == 3 && k == 2)
                kiln_alloc_stack_free(a, p[k], (s + 1) % streams);
        }
        sz[i] = 64 + (size_t)((seed * 2654435761u + i * 40503u) % 30000);
        if (variant == 1 && i == 3)
            sz[i] += 512;
        p[i] = kiln_alloc_stack_alloc(a, sz[i], s);
        if (!p[i])
            return bad + 1000;
        hold(p[i], sz[i], (unsigned char)(s * 64 + i));
        if (variant == 3 && i == 2 &&
            kiln_alloc_stack_access(a, p[i], s, (s + 1) % streams, NULL) != KILN_OK)
            bad++;
    }
    for (uint32_t k = total > 3 ? total - 3 : 0; k < total; k++) {
        bad += release(p[k], sz[k], (unsigned char)(s * 64 + k));
        kiln_alloc_stack_free(a, p[k], s);
        if (variant == 3 && k == 2)
            kiln_alloc_stack_free(a, p[k], (s + 1) % streams);
    }
    return bad;
}

static void test_replay(void)
{
    CU_ASSERT_FATAL(session());
    static const char *const comps[2] = {"three_layer", "caching"};
    for (int c = 0; c < 2; c++) {
        uint32_t streams = c == 0 ? 2 : 1;
        kiln_alloc_config cfg = {sizeof(cfg), streams, 0, NULL, 0};
        kiln_alloc_stack *a = NULL;
        CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, comps[c], NULL, 0, &cfg, &a, E),
                              KILN_OK);
        overlaps = 0;
        int bad = 0;
        /* run 1 is learned; run 2 follows the plan */
        for (int run = 0; run < 2; run++) {
            for (uint32_t s = 0; s < streams; s++)
                bad += stream_run(a, s, streams, 20, s + 1, 0);
            kiln_alloc_stack_last_wait(a);
        }
        kiln_alloc_stats st = stats(a);
        if (getenv("KILN_TEST_VERBOSE"))
            fprintf(stderr, "[%s: peak reserved %llu allocated %llu, steady %llu / %llu]\n",
                    comps[c], (unsigned long long)st.peak_reserved,
                    (unsigned long long)st.peak_allocated,
                    (unsigned long long)st.steady_peak_reserved,
                    (unsigned long long)st.steady_peak_allocated);
        CU_ASSERT_EQUAL(st.plans, 1);
        CU_ASSERT_EQUAL(st.plan_hits, 20 * streams);
        CU_ASSERT_EQUAL(st.plan_fallbacks, 0);
        CU_ASSERT(st.plan_arena > 0);
        CU_ASSERT_EQUAL(st.steady_peak_reserved, st.plan_arena); /* nothing beside it */
        CU_ASSERT(st.steady_peak_reserved < st.peak_reserved);
        CU_ASSERT(st.steady_peak_reserved * 100 <= st.steady_peak_allocated * 110);
        /* each fallback, then a run that follows the plan re-learned after it */
        uint64_t plans = st.plans, hits = st.plan_hits, fb = 0;
        for (int variant = 1; variant <= (c == 0 ? 3 : 2); variant++) {
            for (uint32_t s = 0; s < streams; s++)
                bad += stream_run(a, s, streams, 20, s + 1, s == 0 ? variant : 0);
            kiln_alloc_stack_last_wait(a);
            st = stats(a);
            CU_ASSERT_EQUAL(st.allocated, 0);
            /* learned again: another size, one request more, one fewer than the
             * plan of variant 2 (variant 3: a block used by another stream too) */
            CU_ASSERT_EQUAL(st.plans, plans + 1);
            if (variant < 3)
                CU_ASSERT(st.plan_fallbacks > fb);
            plans = st.plans;
            hits = st.plan_hits;
            fb = st.plan_fallbacks;
            for (uint32_t s = 0; s < streams; s++)
                bad += stream_run(a, s, streams, 20, s + 1, s == 0 ? variant : 0);
            kiln_alloc_stack_last_wait(a);
            st = stats(a);
            CU_ASSERT_EQUAL(st.plan_fallbacks, fb); /* followed; variant 3: the block
                                                       both streams use is planned too */
            CU_ASSERT_EQUAL(st.plans, plans);
            CU_ASSERT_EQUAL(st.plan_hits - hits, 20u * streams + (variant == 2));
            hits = st.plan_hits;
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(overlaps, 0);
        CU_ASSERT_EQUAL(nlive, 0);
        kiln_alloc_stack_destroy(a);
    }
    /* replay=false: nothing learned */
    kiln_alloc_config cfg = {sizeof(cfg), 1, 0, NULL, 0};
    kiln_alloc_stack *a = NULL;
    const char *off[] = {"replay=false"};
    CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, "three_layer", off, 1, &cfg, &a, E),
                          KILN_OK);
    for (int run = 0; run < 3; run++) {
        CU_ASSERT_EQUAL(stream_run(a, 0, 1, 20, 1, 0), 0);
        kiln_alloc_stack_last_wait(a);
    }
    kiln_alloc_stats st = stats(a);
    CU_ASSERT_EQUAL(st.plans, 0);
    CU_ASSERT_EQUAL(st.plan_hits, 0);
    CU_ASSERT_EQUAL(st.steady_peak_reserved, st.peak_reserved);
    kiln_alloc_stack_destroy(a);
}

/* Four threads on four streams, runs ended by one of them with last_wait while
 * the others wait (the multistream runtime's last sync stage); some runs
 * differ (another size, one request more, a block crossing streams). */
typedef struct rworker {
    kiln_alloc_stack *a;
    pthread_barrier_t *bar;
    uint32_t stream;
    int bad;
} rworker;

static void *replay_work(void *arg)
{
    rworker *w = arg;
    for (int run = 0; run < 60; run++) {
        int variant = (run % 7 == 5) ? 1 + (int)((w->stream + (uint32_t)run) % 3) : 0;
        w->bad += stream_run(w->a, w->stream, 4, 24, w->stream + 7, variant);
        if (pthread_barrier_wait(w->bar) == PTHREAD_BARRIER_SERIAL_THREAD)
            kiln_alloc_stack_last_wait(w->a);
        pthread_barrier_wait(w->bar);
    }
    return NULL;
}

static void test_replay_threads(void)
{
    CU_ASSERT_FATAL(session());
    static const char *const comps[2] = {"three_layer", "caching"};
    for (int c = 0; c < 2; c++) {
        kiln_alloc_config cfg = {sizeof(cfg), 4, 0, NULL, 0};
        kiln_alloc_stack *a = NULL;
        CU_ASSERT_EQUAL_FATAL(kiln_session_alloc_stack_create(S, comps[c], NULL, 0, &cfg, &a, E),
                              KILN_OK);
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, 4);
        overlaps = 0;
        pthread_t t[4];
        rworker w[4];
        for (uint32_t i = 0; i < 4; i++) {
            w[i] = (rworker){a, &bar, i, 0};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, replay_work, &w[i]), 0);
        }
        for (uint32_t i = 0; i < 4; i++) {
            pthread_join(t[i], NULL);
            CU_ASSERT_EQUAL(w[i].bad, 0);
        }
        pthread_barrier_destroy(&bar);
        CU_ASSERT_EQUAL(overlaps, 0); /* no two live blocks ever shared a byte */
        kiln_alloc_stats st = stats(a);
        CU_ASSERT_EQUAL(st.allocated, 0);
        if (getenv("KILN_TEST_VERBOSE"))
            fprintf(stderr, "[%s: %llu plans, %llu hits, %llu fallbacks]\n", comps[c],
                    (unsigned long long)st.plans, (unsigned long long)st.plan_hits,
                    (unsigned long long)st.plan_fallbacks);
        CU_ASSERT(st.plans >= 2);       /* the runs that differ are learned again */
        CU_ASSERT(st.plan_fallbacks > 0);
        CU_ASSERT(st.plan_hits > 0);
        kiln_alloc_stack_destroy(a);
    }
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"the header's example: local, borrow, birth recycle", test_example_sequence},
        {"host memory: access shares", test_host_share},
        {"errors name the allocator; capacity", test_errors},
        {"caching L1: release threshold", test_caching},
        {"four threads on four streams", test_threads},
        {"learned plans: adopted, followed, each fallback, re-learned", test_replay},
        {"learned plans: four threads on four streams, runs ended by last_wait",
         test_replay_threads},
        {NULL, NULL}};
    int rc = kiln_test_run("alloc_api", cases);
    kiln_session_destroy(S);
    kiln_error_destroy(E);
    return rc;
}
