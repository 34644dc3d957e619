/*
 * test_memplan_kiln.c - kiln's memory planner (libkiln_memplan.so, component
 * "kiln") through kiln_session_mem_plan: seeded random problems checked by an
 * independent pairwise check here and by kiln_mem_plan_check, FIXED blocks,
 * alignment, the capacity error, determinism, perfect packings with a known
 * optimum (a regression bound), the committed MiniMalloc instances (five
 * within 5 % of the optimum), and the checker rejecting an overlapping plan.
 */
#include "kiln_test.h"
#include <kiln/kiln_embed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char msg[2048];
static kiln_session *S;
static kiln_error *E;

static const char *emsg(void)
{
    kiln_error_format(E, msg, sizeof(msg));
    return msg;
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static bool session(void)
{
    if (S)
        return true;
    E = kiln_error_create();
    S = kiln_session_create();
    if (!S || kiln_session_load_manifest(S, NULL, E) != KILN_OK) {
        fprintf(stderr, "\nmanifest: %s\n", emsg());
        return false;
    }
    return true;
}

/* Independent check: aligned, FIXED kept, no two time-overlapping blocks
 * overlapping in memory, peak covers every block.  O(n^2). */
static bool plan_ok(const kiln_mem_problem *p, const int64_t *fixed, int64_t peak)
{
    for (uint32_t i = 0; i < p->block_count; i++) {
        const kiln_mem_block *a = &p->blocks[i];
        uint32_t al = a->alignment ? a->alignment : p->alignment;
        if (a->offset < 0 || (al && a->offset % al) || a->offset + a->size > peak)
            return false;
        if (fixed && fixed[i] >= 0 && a->offset != fixed[i])
            return false;
        for (uint32_t j = i + 1; j < p->block_count; j++) {
            const kiln_mem_block *b = &p->blocks[j];
            if (a->first_use <= b->last_use && b->first_use <= a->last_use &&
                a->offset < b->offset + b->size && b->offset < a->offset + a->size)
                return false;
        }
    }
    return true;
}

static kiln_mem_block *random_blocks(uint32_t n, uint32_t steps, int64_t maxsize)
{
    kiln_mem_block *b = calloc(n, sizeof(*b));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = rnd(steps), len = 1 + rnd(rnd(4) == 0 ? steps : 8);
        b[i].first_use = s;
        b[i].last_use = s + len - 1;
        b[i].size = 1 + rnd((uint32_t)maxsize);
        b[i].id = i;
    }
    return b;
}

static kiln_mem_problem problem(kiln_mem_block *b, uint32_t n, uint32_t align)
{
    kiln_mem_problem p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.block_count = n;
    p.blocks = b;
    p.alignment = align;
    p.stream_count = 1;
    p.memory_type = "test";
    return p;
}

static void test_random(void)
{
    CU_ASSERT_FATAL(session());
    for (uint32_t seed = 1; seed <= 40; seed++) {
        rng_state = seed;
        uint32_t n = 5 + rnd(seed <= 30 ? 200 : 3000);
        kiln_mem_block *b = random_blocks(n, 10 + rnd(400), seed % 2 ? 1000 : 1 << 20);
        kiln_mem_problem p = problem(b, n, seed % 3 == 0 ? 64 : 1);
        int64_t peak = 0, load = kiln_mem_problem_load(&p);
        /* a small search budget: the search runs (and is checked) on the
         * problems not at LOAD, within a unit test's time */
        const char *opts[] = {"search_nodes=20000"};
        kiln_status st = kiln_session_mem_plan(S, "kiln", opts, 1, &p, &peak, E);
        if (st != KILN_OK)
            fprintf(stderr, "\nseed %u: %s\n", seed, emsg());
        CU_ASSERT_EQUAL(st, KILN_OK);
        CU_ASSERT(plan_ok(&p, NULL, peak));
        /* LOAD rounds sizes up to the alignment, a plan need not (its last
         * block may end unaligned): a lower bound only when unaligned */
        if (p.alignment <= 1)
            CU_ASSERT(peak >= load);
        free(b);
    }
}

static void test_fixed_and_alignment(void)
{
    CU_ASSERT_FATAL(session());
    rng_state = 77;
    uint32_t n = 300;
    kiln_mem_block *b = random_blocks(n, 100, 5000);
    int64_t fixed[300];
    for (uint32_t i = 0; i < n; i++) {
        fixed[i] = -1;
        b[i].alignment = i % 5 == 0 ? 256 : 0; /* else the problem's 32 */
    }
    /* three FIXED blocks, one high above everything, apart in time */
    uint32_t fx[3] = {10, 20, 30};
    int64_t at[3] = {0, 4096, 1 << 24};
    for (int k = 0; k < 3; k++) {
        b[fx[k]].flags = KILN_MEM_BLOCK_FIXED;
        b[fx[k]].first_use = b[fx[k]].last_use = 200 + 10 * k; /* alone in time */
        b[fx[k]].offset = fixed[fx[k]] = at[k];
        b[fx[k]].alignment = 0;
    }
    kiln_mem_problem p = problem(b, n, 32);
    int64_t peak = 0;
    const char *small[] = {"search_nodes=20000"}; /* a unit test's budget */
    kiln_status st = kiln_session_mem_plan(S, NULL, small, 1, &p, &peak, E);
    if (st != KILN_OK)
        fprintf(stderr, "\n%s\n", emsg());
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
    CU_ASSERT(plan_ok(&p, fixed, peak));
    for (uint32_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(b[i].offset % (i % 5 == 0 && !(b[i].flags & KILN_MEM_BLOCK_FIXED)
                                           ? 256 : 32), 0);
    CU_ASSERT_EQUAL(peak, (1 << 24) + b[30].size);
    /* a FIXED block overlapping others in time: they go around it */
    b[30].first_use = 0;
    b[30].last_use = 99;
    b[30].offset = 64;
    fixed[30] = 64;
    st = kiln_session_mem_plan(S, "kiln", small, 1, &p, &peak, E);
    CU_ASSERT_EQUAL(st, KILN_OK);
    CU_ASSERT(plan_ok(&p, fixed, peak));
    free(b);
}

static void test_capacity_and_errors(void)
{
    CU_ASSERT_FATAL(session());
    rng_state = 5;
    kiln_mem_block *b = random_blocks(100, 50, 1000);
    kiln_mem_problem p = problem(b, 100, 1);
    int64_t load = kiln_mem_problem_load(&p), peak = 0;
    p.capacity = load - 1;
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", NULL, 0, &p, &peak, E), KILN_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "above the capacity"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "memory planner kiln"));
    p.capacity = 4 * load;
    const char *small[] = {"search_nodes=20000"};
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", small, 1, &p, &peak, E), KILN_OK);
    CU_ASSERT(peak <= p.capacity);
    p.capacity = 0;
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "no_such_planner", NULL, 0, &p, &peak, E),
                    KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "no_such_planner"));
    const char *bad[] = {"effort=7"};
    kiln_error_clear(E);
    CU_ASSERT_NOT_EQUAL(kiln_session_mem_plan(S, "kiln", bad, 1, &p, &peak, E), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(emsg(), "effort"));
    const char *good[] = {"effort=0", "rekey_limit=4"};
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", good, 2, &p, &peak, E), KILN_OK);
    CU_ASSERT(plan_ok(&p, NULL, peak));
    free(b);
}

/* kiln_mem_plan_check rejects an overlapping plan (what the planner's plans
 * are checked with): two live-together blocks at one offset. */
static void test_checker_catches_overlap(void)
{
    CU_ASSERT_FATAL(session());
    kiln_mem_block b[3] = {{.size = 100, .first_use = 0, .last_use = 5, .id = 1},
                           {.size = 100, .first_use = 5, .last_use = 9, .id = 2},
                           {.size = 50, .first_use = 6, .last_use = 9, .id = 3}};
    kiln_mem_problem p = problem(b, 3, 1);
    int64_t peak = 0;
    CU_ASSERT_EQUAL_FATAL(kiln_session_mem_plan(S, "kiln", NULL, 0, &p, &peak, E), KILN_OK);
    CU_ASSERT_EQUAL(peak, kiln_mem_problem_load(&p));
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&p, peak, E), KILN_OK);
    b[1].offset = b[0].offset + 10; /* overlaps block 1 at step 5 */
    kiln_error_clear(E);
    CU_ASSERT_EQUAL(kiln_mem_plan_check(&p, peak + 200, E), KILN_ERR_INVALID);
    CU_ASSERT(!plan_ok(&p, NULL, peak + 200));
}

static void test_deterministic(void)
{
    CU_ASSERT_FATAL(session());
    rng_state = 99;
    uint32_t n = 500;
    kiln_mem_block *b = random_blocks(n, 200, 100000);
    kiln_mem_block *c = malloc(n * sizeof(*c));
    memcpy(c, b, n * sizeof(*c));
    kiln_mem_problem p = problem(b, n, 1), q = problem(c, n, 1);
    const char *opts[] = {"effort=2", "search_nodes=20000", "time_budget_ms=100000"};
    int64_t pk1 = 0, pk2 = 0;
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", opts, 3, &p, &pk1, E), KILN_OK);
    CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", opts, 3, &q, &pk2, E), KILN_OK);
    CU_ASSERT_EQUAL(pk1, pk2);
    for (uint32_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(b[i].offset, c[i].offset);
    free(b);
    free(c);
}

/* Many sections (the skyline's max tree three levels deep, ranges across
 * its groups of 64): the plan is valid, and the same with the steps spread
 * a thousandfold (sections then come from a sort, not a bitmap over the
 * steps): same sections, same plan. */
static void test_many_sections(void)
{
    CU_ASSERT_FATAL(session());
    for (uint32_t seed = 1; seed <= 3; seed++) {
        rng_state = seed * 77;
        uint32_t n = 3000 + 1000 * seed;
        kiln_mem_block *b = calloc(n, sizeof(*b));
        for (uint32_t i = 0; i < n; i++) {
            uint32_t s = rnd(60000), len = 1 + rnd(rnd(8) == 0 ? 20000 : rnd(4) == 0 ? 500 : 20);
            b[i].first_use = s;
            b[i].last_use = s + len - 1;
            b[i].size = 1 + rnd(seed == 2 ? 4096 : 100000);
            b[i].id = i;
        }
        kiln_mem_block *c = malloc(n * sizeof(*c));
        memcpy(c, b, n * sizeof(*c));
        for (uint32_t i = 0; i < n; i++) {
            c[i].first_use *= 1000;
            c[i].last_use = c[i].last_use * 1000 + 999;
        }
        kiln_mem_problem p = problem(b, n, seed == 3 ? 512 : 1), q = problem(c, n, p.alignment);
        const char *opts[] = {"effort=1"};
        int64_t pk1 = 0, pk2 = 0;
        CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", opts, 1, &p, &pk1, E), KILN_OK);
        CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", opts, 1, &q, &pk2, E), KILN_OK);
        CU_ASSERT(plan_ok(&p, NULL, pk1));
        CU_ASSERT_EQUAL(pk1, pk2);
        uint32_t diff = 0;
        for (uint32_t i = 0; i < n; i++)
            diff += b[i].offset != c[i].offset;
        CU_ASSERT_EQUAL(diff, 0);
        free(b);
        free(c);
    }
}

/* A perfect packing: the rectangle [0, W) x [0, T) cut recursively into
 * blocks (alternating cuts in time and in space), so the optimum is W =
 * LOAD.  The goal is 5 %; the planner with a reduced search budget lands at
 * 1.08-1.27 x (these fine guillotine cuts defeat the search's pruning), so
 * the bound here is a regression guard. */
#define PERFECT_BOUND 130
static uint32_t cut(kiln_mem_block *b, uint32_t n, int64_t x, int64_t w, uint32_t t0,
                    uint32_t t1, int depth)
{
    if (depth == 0 || (w < 2 && t1 - t0 < 2)) {
        b[n].size = w;
        b[n].first_use = t0;
        b[n].last_use = t1 - 1;
        b[n].id = n;
        return n + 1;
    }
    if ((depth % 2 && t1 - t0 >= 2) || w < 2) {
        uint32_t m = t0 + 1 + rnd(t1 - t0 - 1);
        n = cut(b, n, x, w, t0, m, depth - 1);
        return cut(b, n, x, w, m, t1, depth - 1);
    }
    int64_t m = 1 + rnd((uint32_t)(w - 1));
    n = cut(b, n, x, m, t0, t1, depth - 1);
    return cut(b, n, x + m, w - m, t0, t1, depth - 1);
}

static void test_perfect_packing(void)
{
    CU_ASSERT_FATAL(session());
    for (uint32_t seed = 1; seed <= 10; seed++) {
        rng_state = seed * 1000;
        kiln_mem_block *b = calloc(1 << 10, sizeof(*b));
        uint32_t n = cut(b, 0, 0, 1 << 16, 0, 1000, 8);
        kiln_mem_problem p = problem(b, n, 1);
        int64_t peak = 0, load = kiln_mem_problem_load(&p);
        CU_ASSERT_EQUAL(load, 1 << 16);
        const char *opts[] = {"search_nodes=100000"};
        CU_ASSERT_EQUAL_FATAL(kiln_session_mem_plan(S, "kiln", opts, 1, &p, &peak, E), KILN_OK);
        CU_ASSERT(plan_ok(&p, NULL, peak));
        if (peak > load * PERFECT_BOUND / 100 || getenv("KILN_TEST_VERBOSE"))
            fprintf(stderr, "\nperfect packing %u: %u blocks, peak %lld, optimum %lld\n", seed,
                    n, (long long)peak, (long long)load);
        CU_ASSERT(peak <= load * PERFECT_BOUND / 100);
        free(b);
    }
}

/* Read a committed MiniMalloc instance into @p b (room for 1000 blocks). */
static uint32_t read_minimalloc(char c, kiln_mem_block *b)
{
    const char *src = kiln_test_env("KILN_SOURCE_DIR", ".");
    char path[4096];
    snprintf(path, sizeof(path), "%s/bench/data/memplan/minimalloc/%c.1048576.csv", src, c);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    uint32_t n = 0;
    char line[256];
    long long id, lo, up, sz;
    while (n < 1000 && fgets(line, sizeof(line), f))
        if (sscanf(line, "%lld,%lld,%lld,%lld", &id, &lo, &up, &sz) == 4) {
            b[n] = (kiln_mem_block){.size = sz, .first_use = (uint32_t)lo,
                                    .last_use = (uint32_t)(up - 1), .id = n};
            n++;
        }
    fclose(f);
    return n;
}

/* The committed MiniMalloc challenging set, each known to fit in 1,048,576
 * bytes.  With the default options (the exact search) A, B, C, E, F, G, H and
 * K reach their optimum quickly: they must be within 1.05 x of 1,048,576 (the
 * issue's goal; bench/memplan runs the whole set, D, I and J spend the whole
 * node budget, seconds).  E needs the search's T-C-W preorder re-sorted per
 * part by the remaining section totals: without it E ends at 1.06 x.  Every
 * instance, greedy only (effort=1), stays under the regression bound of 1.25 x. */
static void test_minimalloc_set(void)
{
    CU_ASSERT_FATAL(session());
    kiln_mem_block *b = calloc(1000, sizeof(*b));
    for (char c = 'A'; c <= 'K'; c++) {
        bool fast = strchr("ABCEFGHK", c) != NULL;
        uint32_t n = read_minimalloc(c, b);
        kiln_mem_problem p = problem(b, n, 1);
        int64_t peak = 0;
        const char *greedy[] = {"effort=1"};
        CU_ASSERT_EQUAL(kiln_session_mem_plan(S, "kiln", fast ? NULL : greedy, fast ? 0 : 1, &p,
                                              &peak, E),
                        KILN_OK);
        CU_ASSERT(plan_ok(&p, NULL, peak));
        int64_t bound = fast ? 1048576 * 105 / 100 : 1048576 * 125 / 100;
        if (peak > bound)
            fprintf(stderr, "\nMiniMalloc %c: peak %lld > %lld\n", c, (long long)peak,
                    (long long)bound);
        CU_ASSERT(peak <= bound);
    }
    free(b);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"random problems, checked", test_random},
        {"FIXED blocks and alignment", test_fixed_and_alignment},
        {"capacity, unknown planner, options", test_capacity_and_errors},
        {"checker catches an overlap", test_checker_catches_overlap},
        {"deterministic", test_deterministic},
        {"many sections, dense and spread steps", test_many_sections},
        {"perfect packings (regression bound)", test_perfect_packing},
        {"MiniMalloc A-K (all but D, I, J within 5 %)", test_minimalloc_set},
        {NULL, NULL}};
    int rc = kiln_test_run("memplan_kiln", cases);
    kiln_session_destroy(S);
    kiln_error_destroy(E);
    return rc;
}
