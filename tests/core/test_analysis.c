/*
 * test_analysis.c - cached analyses: topological order (determinism, cycle
 * reporting, caching and invalidation) and reachability (exact agreement with
 * a brute-force search on random DAGs with data and control edges, edits,
 * cyclic graphs, dead nodes).
 */
#include "kiln_test.h"
#include "analysis.h"
#include <string.h>

/* ---- topological order --------------------------------------------------- */

static void test_analysis_topo_order(void)
{
    kiln_graph *g = kiln_test_graph("g");
    /* ids in an order that is not topological: c (1) consumes a (2) and b (3) */
    kiln_node_id c = kiln_test_node(g, "c", "Add", 2, 1);
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Data", 0, 1);
    kiln_node_id d = kiln_test_node(g, "d", "NoOp", 0, 0);
    CU_ASSERT_EQUAL(kiln_edge_add(g, a, 0, c, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_edge_add(g, b, 0, c, 1), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, c, d), KILN_OK);
    const kiln_node_id *order;
    uint32_t n;
    kiln_error err = {0};
    CU_ASSERT_EQUAL_FATAL(kiln_graph_topo_order(g, &order, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(order[0], a);
    CU_ASSERT_EQUAL(order[1], b);
    CU_ASSERT_EQUAL(order[2], c);
    CU_ASSERT_EQUAL(order[3], d);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, a), 0);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, d), 3);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, 0), UINT32_MAX);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, 99), UINT32_MAX);

    /* cached: same array until an edit; an attribute edit keeps it */
    const kiln_node_id *again;
    CU_ASSERT_EQUAL(kiln_graph_topo_order(g, &again, &n, &err), KILN_OK);
    CU_ASSERT_PTR_EQUAL(again, order);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(g, c), "x", 1), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_topo_order(g, &again, &n, &err), KILN_OK);
    CU_ASSERT_PTR_EQUAL(again, order);

    /* structural edit: d now precedes a */
    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, c, d), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, d, a), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_topo_order(g, &order, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL(order[0], b);
    CU_ASSERT_EQUAL(order[1], d);
    CU_ASSERT_EQUAL(order[2], a);
    CU_ASSERT_EQUAL(order[3], c);
    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, b), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_topo_order(g, &order, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, b), UINT32_MAX);
    CU_ASSERT_EQUAL(err.code, KILN_OK);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

static void test_analysis_topo_cycle_names_node_on_cycle(void)
{
    kiln_graph *g = kiln_test_graph("g");
    /* "down" has the smallest id and is blocked, but it is not on the cycle */
    kiln_node_id down = kiln_test_node(g, "down", "Relu", 1, 1);
    kiln_node_id src = kiln_test_node(g, "src", "Data", 0, 1);
    kiln_node_id p = kiln_test_node(g, "p", "Add", 2, 1);
    kiln_node_id q = kiln_test_node(g, "q", "Relu", 1, 1);
    CU_ASSERT_EQUAL(kiln_edge_add(g, src, 0, p, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_edge_add(g, p, 0, q, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, q, p), KILN_OK);
    CU_ASSERT_EQUAL(kiln_edge_add(g, q, 0, down, 0), KILN_OK);
    static const kiln_node_id dummy[1] = {0};
    const kiln_node_id *order = dummy;
    uint32_t n = 7;
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_graph_topo_order(g, &order, &n, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(order);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT(strstr(err.msg, "cycle") != NULL);
    CU_ASSERT(strstr(err.msg, "node p") != NULL || strstr(err.msg, "node q") != NULL);
    CU_ASSERT(strstr(err.msg, "down") == NULL);
    CU_ASSERT_EQUAL(kiln_graph_topo_index(g, src), UINT32_MAX);

    /* reachability still answers, through the plain search */
    CU_ASSERT_TRUE(kiln_graph_reachable(g, src, down));
    CU_ASSERT_TRUE(kiln_graph_reachable(g, q, p));
    CU_ASSERT_TRUE(kiln_graph_reachable(g, p, q));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, down, src));

    /* a two-node data cycle with no source at all */
    kiln_graph *h = kiln_test_graph("g");
    kiln_node_id x = kiln_test_node(h, "x", "Relu", 1, 1);
    kiln_node_id y = kiln_test_node(h, "y", "Relu", 1, 1);
    CU_ASSERT_EQUAL(kiln_edge_add(h, x, 0, y, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_edge_add(h, y, 0, x, 0), KILN_OK);
    kiln_error e2 = {0};
    CU_ASSERT_EQUAL(kiln_graph_topo_order(h, NULL, NULL, &e2), KILN_ERR_INVALID);
    CU_ASSERT(strstr(e2.msg, "node x") != NULL || strstr(e2.msg, "node y") != NULL);
    CU_ASSERT_TRUE(kiln_graph_reachable(h, y, x));
    kiln_graph_destroy(h);
    kiln_graph_destroy(g);
}

/* ---- reachability against brute force ------------------------------------ */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* Brute force: one BFS per node through the public accessors. */
static uint8_t *closure(const kiln_graph *g)
{
    uint32_t lim = kiln_graph_id_limit(g);
    uint8_t *m = calloc((size_t)lim * lim, 1);
    kiln_node_id *queue = malloc((size_t)lim * sizeof(*queue));
    for (kiln_node_id s = 1; s < lim; s++) {
        if (!kiln_node_is_live(g, s))
            continue;
        uint8_t *row = &m[(size_t)s * lim];
        uint32_t h = 0, t = 0;
        row[s] = 1;
        queue[t++] = s;
        while (h < t) {
            kiln_node_id n = queue[h++];
            for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
                for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c)) {
                    kiln_node_id d = kiln_use_dst(g, c).node;
                    if (!row[d]) {
                        row[d] = 1;
                        queue[t++] = d;
                    }
                }
            for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c)) {
                kiln_node_id d = kiln_ctrl_dst(g, c);
                if (!row[d]) {
                    row[d] = 1;
                    queue[t++] = d;
                }
            }
        }
    }
    free(queue);
    return m;
}

/* Random DAG: nodes get a random rank (so ids are not a topological order),
 * inputs come from lower-ranked nodes, plus random forward control edges. */
static kiln_graph *random_dag(uint32_t n, uint32_t fanin, uint32_t nctrl)
{
    kiln_graph *g = kiln_test_graph("g");
    uint32_t *rank_of = malloc(n * sizeof(*rank_of));
    kiln_node_id *by_rank = malloc(n * sizeof(*by_rank));
    for (uint32_t i = 0; i < n; i++)
        rank_of[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = rnd(i + 1), t = rank_of[i];
        rank_of[i] = rank_of[j];
        rank_of[j] = t;
    }
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "n%u", i);
        uint32_t nin = rank_of[i] ? 1 + rnd(fanin) : 0;
        by_rank[rank_of[i]] = kiln_test_node(g, name, "Op", nin, 1 + rnd(2));
    }
    for (uint32_t r = 1; r < n; r++) {
        kiln_node_id d = by_rank[r];
        for (uint32_t i = 0; i < kiln_node_input_count(g, d); i++) {
            if (rnd(5) == 0)
                continue; /* leave some inputs unconnected */
            /* mostly nearby producers, sometimes far ones */
            uint32_t back = rnd(4) ? 1 + rnd(r < 8 ? r : 8) : 1 + rnd(r);
            kiln_node_id s = by_rank[r - back];
            CU_ASSERT_EQUAL(kiln_edge_add(g, s, rnd(kiln_node_output_count(g, s)), d, i), KILN_OK);
        }
    }
    for (uint32_t k = 0; k < nctrl; k++) {
        uint32_t a = rnd(n), b = rnd(n);
        if (a == b)
            continue;
        if (a > b) {
            uint32_t t = a;
            a = b;
            b = t;
        }
        CU_ASSERT_EQUAL(kiln_ctrl_add(g, by_rank[a], by_rank[b]), KILN_OK);
    }
    free(rank_of);
    free(by_rank);
    return g;
}

static uint32_t compare_all_pairs(kiln_graph *g)
{
    uint8_t *m = closure(g);
    uint32_t lim = kiln_graph_id_limit(g), bad = 0, pos = 0;
    for (kiln_node_id a = 0; a < lim; a++)
        for (kiln_node_id b = 0; b < lim; b++) {
            bool want =
                kiln_node_is_live(g, a) && kiln_node_is_live(g, b) && m[(size_t)a * lim + b];
            bool got = kiln_graph_reachable(g, a, b);
            pos += want;
            if (want != got && bad++ < 5)
                fprintf(stderr, "reachable(%u, %u): got %d want %d\n", a, b, got, want);
            if (kiln_graph_ordered(g, a, b) !=
                (want ||
                 (kiln_node_is_live(g, a) && kiln_node_is_live(g, b) && m[(size_t)b * lim + a])))
                bad++;
        }
    free(m);
    CU_ASSERT(pos > lim); /* the graphs are not trivially disconnected */
    return bad;
}

/* The position index agrees with the order; dead ids have none. */
static void check_topo_index(kiln_graph *g)
{
    const kiln_node_id *order;
    uint32_t n;
    kiln_error err = {0};
    CU_ASSERT_EQUAL_FATAL(kiln_graph_topo_order(g, &order, &n, &err), KILN_OK);
    for (uint32_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(kiln_graph_topo_index(g, order[i]), i);
    for (kiln_node_id v = 0; v < kiln_graph_id_limit(g); v++)
        if (!kiln_node_is_live(g, v))
            CU_ASSERT_EQUAL(kiln_graph_topo_index(g, v), UINT32_MAX);
}

static void test_analysis_reach_matches_bruteforce(void)
{
    static const uint32_t shapes[][3] = {
        {300, 3, 30}, {400, 2, 200}, {500, 1, 5}, {350, 3, 0}, {250, 2, 600},
    };
    for (uint32_t s = 0; s < KILN_ARRAY_LEN(shapes); s++) {
        rng_state = 0x9e3779b97f4a7c15ull + s;
        kiln_graph *g = random_dag(shapes[s][0], shapes[s][1], shapes[s][2]);
        CU_ASSERT_EQUAL(compare_all_pairs(g), 0);
        check_topo_index(g);
        /* remove some nodes and compare again (dead ids, stale cache) */
        for (uint32_t k = 0; k < 20; k++) {
            kiln_node_id v = 1 + rnd(kiln_graph_id_limit(g) - 1);
            if (kiln_node_is_live(g, v))
                CU_ASSERT_EQUAL(kiln_graph_remove_node(g, v), KILN_OK);
        }
        CU_ASSERT_EQUAL(compare_all_pairs(g), 0);
        check_topo_index(g);
        kiln_test_verify_ok(g);
        kiln_graph_destroy(g);
    }
}

static void test_analysis_reach_invalidated_by_edits(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Relu", 1, 1);
    kiln_node_id c = kiln_test_node(g, "c", "Data", 0, 1);
    kiln_node_id d = kiln_test_node(g, "d", "Relu", 1, 1);
    CU_ASSERT_EQUAL(kiln_edge_add(g, a, 0, b, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_edge_add(g, c, 0, d, 0), KILN_OK);
    CU_ASSERT_TRUE(kiln_graph_reachable(g, a, b));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, a, d));
    CU_ASSERT_FALSE(kiln_graph_ordered(g, b, d));
    CU_ASSERT_TRUE(kiln_graph_reachable(g, a, a));

    CU_ASSERT_EQUAL(kiln_ctrl_add(g, b, c), KILN_OK); /* a -> b => c -> d */
    CU_ASSERT_TRUE(kiln_graph_reachable(g, a, d));
    CU_ASSERT_TRUE(kiln_graph_ordered(g, d, b));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, d, a));

    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, b, c), KILN_OK);
    CU_ASSERT_FALSE(kiln_graph_reachable(g, a, d));
    CU_ASSERT_EQUAL(kiln_edge_remove(g, b, 0), KILN_OK);
    CU_ASSERT_FALSE(kiln_graph_reachable(g, a, b));
    CU_ASSERT_EQUAL(kiln_edge_add(g, c, 0, b, 0), KILN_OK);
    CU_ASSERT_TRUE(kiln_graph_reachable(g, c, b));

    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, c), KILN_OK);
    CU_ASSERT_FALSE(kiln_graph_reachable(g, c, d));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, c, c));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, 0, d));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, a, 1000));
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* A long chain with side branches: most positive answers need the labels'
 * tree intervals or the pruned search, not just the topo filter. */
static void test_analysis_reach_chain_with_branches(void)
{
    kiln_graph *g = kiln_test_graph("g");
    char name[32];
    kiln_node_id prev = kiln_test_node(g, "in", "Data", 0, 1);
    kiln_node_id first = prev;
    kiln_node_id side[200];
    for (uint32_t i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "main%u", i);
        kiln_node_id m = kiln_test_node(g, name, "Add", 2, 1);
        snprintf(name, sizeof(name), "side%u", i);
        side[i] = kiln_test_node(g, name, "Relu", 1, 1);
        CU_ASSERT_EQUAL(kiln_edge_add(g, prev, 0, side[i], 0), KILN_OK);
        CU_ASSERT_EQUAL(kiln_edge_add(g, prev, 0, m, 0), KILN_OK);
        CU_ASSERT_EQUAL(kiln_edge_add(g, side[i], 0, m, 1), KILN_OK);
        prev = m;
    }
    CU_ASSERT_TRUE(kiln_graph_reachable(g, first, prev));
    CU_ASSERT_TRUE(kiln_graph_reachable(g, side[3], side[150]));
    CU_ASSERT_FALSE(kiln_graph_reachable(g, side[150], side[3]));
    CU_ASSERT_EQUAL(compare_all_pairs(g), 0);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_analysis_topo_order", test_analysis_topo_order},
        {"test_analysis_topo_cycle_names_node_on_cycle",
         test_analysis_topo_cycle_names_node_on_cycle},
        {"test_analysis_reach_matches_bruteforce", test_analysis_reach_matches_bruteforce},
        {"test_analysis_reach_invalidated_by_edits", test_analysis_reach_invalidated_by_edits},
        {"test_analysis_reach_chain_with_branches", test_analysis_reach_chain_with_branches},
        {NULL, NULL},
    };
    return kiln_test_run("analysis", cases);
}
