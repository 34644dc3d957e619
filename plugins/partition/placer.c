/*
 * placer.c - EnginePlacer (GE compiler/graph/partition/engine_place.cc):
 * every node of a graph is placed on one engine and the choice is recorded
 * as `_kiln_engine` (GRAPH_FORMAT's node `engine`).
 *
 * Per node, in order (docs/partition.md):
 *   1. `_kiln_engine` non-empty: that engine (a pin); it must be loaded;
 *   2. `_lxfusion_engine_name` and `_lxfusion_op_kernel_lib_name` both
 *      non-empty (GE SelectEngine's user engine): that engine; it must be
 *      loaded; only one of the two is ignored (GE EP6);
 *   3. the first engine, in priority order, that takes the node
 *      (kiln_engine_check: op entry, dtype, formats, supports());
 *   4. none: a GE-local op type (Data, Const, NetOutput, control flow, ...)
 *      goes to the pseudo engine "ge_local" (GE's DNN_VM_GE_LOCAL, which the
 *      runtime handles itself); anything else is an error (GE EZ3003) listing
 *      every engine consulted and why it declined -- or, with the pass option
 *      unsupported=warn, a warning with the same text, and the node stays
 *      unplaced (the partitioner gives it the engine "unplaced").
 * Then, as GE's Apply (EP3), the placement is written back as
 * `_lxfusion_engine_name` and `_lxfusion_op_kernel_lib_name` (the kernel lib
 * is the engine name), except on host-CPU ops: a pin fills absent ones only,
 * the _lxfusion pair is left as it is, a searched engine replaces both.
 * Priority order: the engines named by the pass option priority, else the
 * session option kiln.engine_priority (comma-separated, each must be
 * loaded), then the others by descending priority, ties in registration order.
 * Complexity: O(nodes x engines x op-table size).
 */
#include "partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kp_is_ge_local_op(const char *op)
{
    static const char *const ops[] = {
        "Data",          "RefData",     "AippData",      "Const",        "Constant",
        "Variable",      "VariableV2",  "VarHandleOp",   "NetOutput",    "NoOp",
        "If",            "StatelessIf", "While",         "StatelessWhile", "Case",
        "StatelessCase", "PartitionedCall", "StatefulPartitionedCall", "Identity",
        "MemcpyAsync",   "MemcpyAddrAsync", "AtomicAddrClean", "MemSet", "PlaceHolder",
        "End",           "StreamActive", "StreamSwitch", "Send", "Recv",
        /* GE's ge_local NoOp ops: views of a continuous buffer, no task */
        "PhonyConcat",   "PhonySplit"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(ops[i], op) == 0)
            return true;
    return false;
}

typedef struct eng {
    const char *name;
    int32_t priority;
    uint32_t reg;
} eng;

static int eng_cmp(const void *a, const void *b)
{
    const eng *x = a, *y = b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return x->reg < y->reg ? -1 : x->reg > y->reg;
}

/* The engines of @p g's context in placement order; NULL with the error set. */
static eng *engine_order(kiln_pass_ctx *ctx, kiln_graph *g, const char *pri, uint32_t *count)
{
    uint32_t n = kiln_engine_count(g);
    eng *v = kiln_alloc((n + 1) * sizeof(eng));
    if (!v) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        v[i].name = kiln_engine_at(g, i, &v[i].priority);
        v[i].reg = i;
    }
    qsort(v, n, sizeof(eng), eng_cmp);
    const char *what = "option priority";
    if (!pri || !pri[0]) {
        pri = kiln_pass_session_option(ctx, "kiln.engine_priority");
        what = "session option kiln.engine_priority";
    }
    uint32_t front = 0;
    for (const char *p = pri; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        uint32_t i = front;
        while (i < n && !(strlen(v[i].name) == len && strncmp(v[i].name, p, len) == 0))
            i++;
        if (i == n) {
            char known[512] = "";
            size_t k = 0;
            for (uint32_t j = 0; j < n && k < sizeof(known); j++)
                k += (size_t)snprintf(known + k, sizeof(known) - k, "%s%s", j ? ", " : "",
                                      kiln_engine_at(g, j, NULL));
            kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PARAM,
                        "%s names engine '%.*s', which is not loaded or named twice "
                        "(loaded: %s)",
                        what, (int)len, p, n ? known : "none");
            kiln_free(v);
            return NULL;
        }
        eng t = v[i];
        memmove(&v[front + 1], &v[front], (i - front) * sizeof(eng));
        v[front++] = t;
        p = e ? e + 1 : p + len;
    }
    *count = n;
    return v;
}

static bool known_engine(const eng *v, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return true;
    return strcmp(name, KP_GE_LOCAL) == 0;
}

static kiln_pass_result fail_pin(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                 const char *attr, const char *want, const eng *v, uint32_t ne)
{
    char known[512] = "";
    size_t k = 0;
    for (uint32_t j = 0; j < ne && k < sizeof(known); j++)
        k += (size_t)snprintf(known + k, sizeof(known) - k, "%s, ", v[j].name);
    snprintf(known + (k < sizeof(known) ? k : sizeof(known) - 1),
             sizeof(known) - (k < sizeof(known) ? k : sizeof(known) - 1), "%s", KP_GE_LOCAL);
    kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOT_FOUND,
                "graph %s: node %s (%s) is pinned by %s to engine '%s', which no "
                "loaded plugin provides (engines: %s)",
                kiln_graph_name(g), kiln_node_name_str(g, n), kiln_node_op_str(g, n), attr, want,
                known);
    return KILN_PASS_FAILED;
}

typedef struct place_inst {
    bool warn;            /* unsupported=warn */
    const char *priority; /* option priority ("" = none) */
} place_inst;

static const kiln_option_def place_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "unsupported", "error",
     "a node no engine supports: error (GE) or warn (left unplaced)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "priority", "",
     "engines placed first, in this order (comma-separated); default: session option "
     "kiln.engine_priority",
     0, 0},
};

static kiln_status place_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    const char *u = "error";
    kiln_options_get_string(opts, "unsupported", &u);
    if (strcmp(u, "error") != 0 && strcmp(u, "warn") != 0)
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "EnginePlacer: option unsupported is '%s' (expected error or warn)", u);
    place_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "EnginePlacer: out of memory");
    p->warn = strcmp(u, "warn") == 0;
    p->priority = "";
    kiln_options_get_string(opts, "priority", &p->priority);
    *inst = p;
    return KILN_OK;
}

static void place_destroy(void *inst)
{
    kiln_free(inst);
}

static kiln_pass_result place_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    bool warn = inst && ((place_inst *)inst)->warn;
    uint32_t ne = 0;
    eng *v = engine_order(ctx, g, inst ? ((place_inst *)inst)->priority : NULL, &ne);
    if (!v)
        return KILN_PASS_FAILED;
    uint32_t *counts = kiln_alloc((ne + 2) * sizeof(uint32_t));
    if (!counts) {
        kiln_free(v);
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
        return KILN_PASS_FAILED;
    }
    memset(counts, 0, (ne + 2) * sizeof(uint32_t)); /* [ne]: unplaced, [ne + 1]: ge_local */
    kiln_pass_result res = KILN_PASS_NOT_CHANGED;
    /* A key never interned is on no node; each node is visited once, so one
     * that no node had at the start is on a node only after its own writes:
     * the node's three values are read once, up front, and only when some
     * node can have them. */
    bool has_engine = kiln_sym_lookup(g, KP_ATTR_ENGINE) != 0;
    bool has_lx_e = kiln_sym_lookup(g, KP_ATTR_LX_ENGINE) != 0;
    bool has_lx_k = kiln_sym_lookup(g, KP_ATTR_LX_KERNEL) != 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const kiln_attrs *a = kiln_node_attrs(g, n);
        const char *pin = NULL, *lx_e = NULL, *lx_k = NULL, *chosen = NULL;
        const char *old = NULL; /* _kiln_engine as found ("" included) */
        bool by_pair = false;
        if (!(has_engine && kiln_attrs_get_string(a, KP_ATTR_ENGINE, &old)))
            old = NULL;
        if (!has_lx_e || !kiln_attrs_get_string(a, KP_ATTR_LX_ENGINE, &lx_e))
            lx_e = NULL;
        if (!has_lx_k || !kiln_attrs_get_string(a, KP_ATTR_LX_KERNEL, &lx_k))
            lx_k = NULL;
        pin = old && old[0] ? old : NULL;
        if (pin) {
            if (!known_engine(v, ne, pin)) {
                res = fail_pin(ctx, g, n, "_kiln_engine", pin, v, ne);
                break;
            }
            kiln_pass_explain(ctx, g, n, "placed on %s: pinned by _kiln_engine", pin);
            chosen = pin;
        } else if (lx_e && lx_e[0] && lx_k && lx_k[0]) {
            if (!known_engine(v, ne, lx_e)) {
                res = fail_pin(ctx, g, n, "_lxfusion_engine_name", lx_e, v, ne);
                break;
            }
            kiln_pass_explain(ctx, g, n,
                              "placed on %s: pinned by _lxfusion_engine_name (kernel lib %s)",
                              lx_e, lx_k);
            chosen = lx_e;
            by_pair = true;
        } else {
            for (uint32_t i = 0; i < ne && !chosen; i++)
                if (kiln_engine_check(g, v[i].name, n, NULL, 0) == KILN_OK)
                    chosen = v[i].name;
            if (!chosen && kp_is_ge_local_op(kiln_node_op_str(g, n)))
                chosen = KP_GE_LOCAL;
            if (!chosen) {
                char why[2048];
                size_t k = 0;
                for (uint32_t i = 0; i < ne && k < sizeof(why); i++) {
                    char r[256];
                    kiln_engine_check(g, v[i].name, n, r, sizeof(r));
                    k += (size_t)snprintf(why + k, sizeof(why) - k, "%s%s: %s", i ? "; " : "",
                                          v[i].name, r);
                }
                if (warn) {
                    kiln_diag(ctx, KILN_SEV_WARNING,
                              "graph %s: no engine supports node %s (op %s), left unplaced: %s",
                              kiln_graph_name(g), kiln_node_name_str(g, n),
                              kiln_node_op_str(g, n), ne ? why : "no engine is loaded");
                    counts[ne]++;
                    continue;
                }
                kiln_errorf(kiln_pass_error(ctx), KILN_ERR_UNSUPPORTED,
                            "graph %s: no engine supports node %s (op %s): %s",
                            kiln_graph_name(g), kiln_node_name_str(g, n), kiln_node_op_str(g, n),
                            ne ? why : "no engine is loaded");
                res = KILN_PASS_FAILED;
                break;
            }
        }
        /* GE's Apply (UpdateOpDescWithOpInfo, EP3): the placement written back as
         * _lxfusion_engine_name and _lxfusion_op_kernel_lib_name (kiln's kernel
         * store is the engine: the kernel lib is the engine name), except for
         * host-CPU ops.  The op-info of a pinned op (GE case 2) fills absent
         * attributes only; of the _lxfusion pair (case 1) it is the pair itself;
         * of the engine search (case 3) it replaces both. */
        if (strcmp(chosen, KP_HOST_CPU) != 0 && !by_pair) {
            for (int k = 0; k < 2 && res != KILN_PASS_FAILED; k++) {
                /* the values read above: writing one key leaves the other */
                const char *key = k ? KP_ATTR_LX_KERNEL : KP_ATTR_LX_ENGINE, *cur = k ? lx_k : lx_e;
                bool has = cur && cur[0];
                if (has && (pin || strcmp(cur, chosen) == 0))
                    continue;
                if (kiln_attrs_set_string(kiln_node_attrs_mut(g, n), key, chosen) != KILN_OK) {
                    kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
                    res = KILN_PASS_FAILED;
                } else {
                    res = KILN_PASS_CHANGED;
                }
            }
            if (res == KILN_PASS_FAILED)
                break;
        }
        if (!(old && strcmp(old, chosen) == 0)) {
            if (kiln_attrs_set_string(kiln_node_attrs_mut(g, n), KP_ATTR_ENGINE, chosen) !=
                KILN_OK) {
                kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
                res = KILN_PASS_FAILED;
                break;
            }
            res = KILN_PASS_CHANGED;
        }
        uint32_t i = 0;
        while (i < ne && strcmp(v[i].name, chosen) != 0)
            i++;
        counts[i < ne ? i : ne + 1]++;
    }
    if (res != KILN_PASS_FAILED) {
        char key[160];
        for (uint32_t i = 0; i <= ne + 1; i++)
            if (counts[i]) {
                snprintf(key, sizeof(key), i == ne ? "unplaced" : "placed.%s",
                         i < ne ? v[i].name : KP_GE_LOCAL);
                kiln_pass_stat_add(ctx, key, counts[i]);
            }
    }
    kiln_free(counts);
    kiln_free(v);
    return res;
}

const kiln_pass_desc kp_engine_placer = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "EnginePlacer",
    .summary = "place every node on the highest-priority engine that supports it (_kiln_engine)",
    .flags = KILN_PASS_PRESERVES_CFG,
    .option_count = 2,
    .options = place_options,
    .create = place_create,
    .destroy = place_destroy,
    .run_graph = place_run,
};
