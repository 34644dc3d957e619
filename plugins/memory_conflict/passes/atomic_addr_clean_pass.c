/*
 * atomic_addr_clean_pass.c - AtomicAddrCleanPass (GE atomic_addr_clean_pass.cc;
 * GE_SEMANTICS 6.4, seed 3.1.5).  A graph pass, run on the root and on every
 * subgraph.
 *
 * Atomic ops accumulate into their outputs, which must be zeroed before they
 * run.  Candidates among the direct nodes:
 *   - HCCL ops (type Hcom*, kiln's stand-in for GE's ops-kernel isAtomic) with
 *     no input from a Data-like node, unless ge.exec.atomicCleanPolicy is "1";
 *   - nodes with `atomic_input_index` or `atomic_output_index`: they get
 *     `is_atomic_node`=true; with policy "1", or when they feed a `_no_task`
 *     node or an output carries `ref_var_src_var_name`, they get
 *     `need_gentask_atomic`=true and clean themselves (not candidates).
 * A LoopCond makes the graph a loop graph.  Unknown-shape graphs get no clean
 * node.  Loop graph: each candidate (except atomic-output-only nodes whose every
 * atomic output feeds an HCCL atomic op, and nodes whose every output feeds
 * one) gets its own clean node `<clean><n><k>` and it copies the atomic node's
 * `_stream_label`.  Normal graph: non-HCCL candidates with
 * `_is_connected_to_netoutput` get their own clean node `<clean><n>_<k>`
 * (zero copy may move their outputs); the others share one `<clean><n>`, which
 * is also ordered before the producers of HCCL atomic inputs and before every
 * "second node" (consumer of an input-less Data/Variable) except NetOutput,
 * dispersed atomic nodes and need_gentask_atomic nodes.  All ordering is by
 * control edges from the clean node.
 *
 * The clean node is an `AtomicAddrClean` named `atomic_addr_clean`, or with
 * pass option clean_op=MemSet a `MemSet` named `atomic_memset` with `sizes`=[]
 * (GE picks MemSet when a kernel store supports it).  Subgraph clean nodes are
 * prefixed `<graph>_`; then come the graph attribute `_session_graph_id` and a
 * counter <n> (GE: process-wide; kiln: per pass instance, skipping taken
 * names).  GE adds clean nodes at the front of the node list; kiln nodes have
 * no list position, only ids.  GE compiles need_gentask_atomic nodes through
 * their kernel store here; kiln has none to call.
 * Not idempotent (as in GE): a second run adds another clean node.
 * Requires: nothing.  Preserves: nothing.  Complexity: O(n + e).
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

typedef struct clean_inst {
    bool memset;
    uint32_t counter;
} clean_inst;

enum { K_HCOM = 1, K_CAND = 2, K_GENTASK = 4, K_DISPERSED = 8 };

typedef struct clean_run {
    clean_inst *inst;
    kiln_pass_ctx *ctx;
    kiln_graph *g;
    uint8_t *kind; /* K_* per node id */
    uint32_t lim;
    bool loop;
} clean_run;

static bool feeds_no_task(const kiln_graph *g, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
            if (mc_node_bool(g, kiln_use_dst(g, u).node, "_no_task"))
                return true;
    return false;
}

static bool ref_variable(kiln_graph *g, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (kiln_attrs_has(kiln_desc_attrs(kiln_node_output_desc(g, n, o)), "ref_var_src_var_name"))
            return true;
    return false;
}

static bool hcom_atomic(const kiln_graph *g, kiln_node_id n)
{
    if (!mc_is_hcom(g, n))
        return false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (p.node && mc_is_data_like(g, p.node))
            return false;
    }
    return true;
}

/* GE IsNeedCleanNode over all direct nodes; returns the number of candidates. */
static uint32_t classify(clean_run *r, bool separately, bool *changed)
{
    kiln_graph *g = r->g;
    uint32_t cands = 0;
    const kiln_sym loop_cond = mc_sym(g, "LoopCond");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (mc_is_sym(g, n, loop_cond))
            r->loop = true;
        if (!separately && hcom_atomic(g, n)) {
            r->kind[n] = K_HCOM | K_CAND;
            cands++;
            continue;
        }
        if (!mc_node_has(g, n, "atomic_input_index") && !mc_node_has(g, n, "atomic_output_index"))
            continue;
        if (!mc_node_bool(g, n, "is_atomic_node")) {
            mc_set_node_bool(g, n, "is_atomic_node", true);
            *changed = true;
        }
        if (separately || feeds_no_task(g, n) || ref_variable(g, n)) {
            if (!mc_node_bool(g, n, "need_gentask_atomic")) {
                mc_set_node_bool(g, n, "need_gentask_atomic", true);
                *changed = true;
            }
            if (!separately)
                r->kind[n] = K_GENTASK;
            continue;
        }
        r->kind[n] = K_CAND;
        cands++;
    }
    return cands;
}

/* GE IsAllConnectHcclNode: every output has at least one HCCL atomic consumer. */
static bool all_outputs_feed_hcom(const clean_run *r, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(r->g, n); o++) {
        bool found = false;
        for (uint32_t u = kiln_use_first(r->g, n, o); u && !found; u = kiln_use_next(r->g, u))
            found = (r->kind[kiln_use_dst(r->g, u).node] & K_HCOM) != 0;
        if (!found)
            return false;
    }
    return true;
}

/* GE CheckSkipInsertInLoopGraph. */
static bool loop_skip(const clean_run *r, kiln_node_id n)
{
    const int64_t *v;
    uint32_t cnt;
    if (mc_node_has(r->g, n, "atomic_input_index") ||
        !kiln_attrs_get_list_int(kiln_node_attrs(r->g, n), "atomic_output_index", &v, &cnt))
        return false;
    for (uint32_t i = 0; i < cnt; i++) {
        bool found = false;
        if (v[i] < 0 || v[i] >= (int64_t)kiln_node_output_count(r->g, n))
            return false;
        for (uint32_t u = kiln_use_first(r->g, n, (uint32_t)v[i]); u && !found;
             u = kiln_use_next(r->g, u))
            found = hcom_atomic(r->g, kiln_use_dst(r->g, u).node);
        if (!found)
            return false;
    }
    return true;
}

/* GE InsertAtomicMemsetNode + the caller's renaming (@p suffix). */
static kiln_node_id add_clean(clean_run *r, const char *suffix, const char *why)
{
    kiln_graph *g = r->g;
    const char *sgid = "";
    kiln_attrs_get_string(kiln_graph_attrs(g), "_session_graph_id", &sgid);
    const char *base = r->inst->memset ? "atomic_memset" : "atomic_addr_clean";
    bool sub = kiln_graph_parent(g) != NULL;
    char name[600];
    do {
        snprintf(name, sizeof name, "%s%s%s%s%u%s", sub ? kiln_graph_name(g) : "", sub ? "_" : "",
                 base, sgid, ++r->inst->counter, suffix);
    } while (kiln_graph_find_node(g, name));
    kiln_node_id c = kiln_graph_add_node(g, name, r->inst->memset ? "MemSet" : "AtomicAddrClean",
                                         0, 0);
    kiln_attrs *a = c ? kiln_node_attrs_mut(g, c) : NULL;
    if (!a || (*sgid && kiln_attrs_set_string(a, "_session_graph_id", sgid) != KILN_OK) ||
        (r->inst->memset && kiln_attrs_set_list_int(a, "sizes", NULL, 0) != KILN_OK)) {
        kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_NOMEM, "cannot add clean node %s", name);
        return 0;
    }
    kiln_pass_explain(r->ctx, g, c, "AtomicAddrCleanPass: %s", why);
    kiln_pass_stat_add(r->ctx, "clean nodes inserted", 1);
    return c;
}

/* GE LinkToAtomicNode. */
static kiln_status link(clean_run *r, kiln_node_id atomic, kiln_node_id clean)
{
    if (kiln_ctrl_add(r->g, clean, atomic) != KILN_OK)
        return KILN_ERR_NOMEM;
    const char *label;
    if (r->loop && kiln_attrs_get_string(kiln_node_attrs(r->g, atomic), "_stream_label", &label)) {
        kiln_attrs *a = kiln_node_attrs_mut(r->g, clean);
        if (!a || kiln_attrs_set_string(a, "_stream_label", label) != KILN_OK)
            return KILN_ERR_NOMEM;
    }
    return KILN_OK;
}

/* GE LinkToHcomPeerInNode. */
static kiln_status link_hcom_producers(clean_run *r, kiln_node_id clean)
{
    for (kiln_node_id n = 1; n < r->lim; n++) {
        if (!(r->kind[n] & K_HCOM))
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(r->g, n); i++) {
            kiln_anchor p = kiln_node_input_peer(r->g, n, i);
            if (!p.node)
                return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_PARAM,
                                   "input %u of %s is not connected", i,
                                   kiln_node_name_str(r->g, n));
            if (link(r, p.node, clean) != KILN_OK)
                return KILN_ERR_NOMEM;
        }
    }
    return KILN_OK;
}

static kiln_status handle_loop(clean_run *r)
{
    uint32_t index = 0;
    for (kiln_node_id n = 1; n < r->lim; n++) {
        if (!(r->kind[n] & K_CAND) || loop_skip(r, n) || all_outputs_feed_hcom(r, n))
            continue;
        char suffix[16], why[600];
        snprintf(suffix, sizeof suffix, "%u", index++);
        snprintf(why, sizeof why, "loop graph: clean before atomic %s every iteration",
                 kiln_node_name_str(r->g, n));
        kiln_node_id c = add_clean(r, suffix, why);
        if (!c || link(r, n, c) != KILN_OK)
            return KILN_ERR_NOMEM;
    }
    return KILN_OK;
}

/* GE LinkToPotentialPrecedenceNode: order the shared node before every second node. */
static kiln_status link_second_nodes(clean_run *r, kiln_node_id clean)
{
    kiln_graph *g = r->g;
    const kiln_sym netoutput = mc_sym(g, "NetOutput");
    static const char *const second_ops[] = {"Data",     "RefData",    "AippData",
                                             "Variable", "VariableV2", "VarHandleOp", NULL};
    mc_symset second; /* mc_is_data_like || mc_is_variable, as symbols of this run */
    if (!mc_symset_init(&second, g, second_ops))
        return KILN_ERR_NOMEM;
    for (kiln_node_id n = 1; n < r->lim; n++) {
        if (!kiln_node_is_live(g, n) || !mc_symset_has(&second, g, n) ||
            kiln_node_ctrl_in_count(g, n) > 0)
            continue;
        bool has_in = false;
        for (uint32_t i = 0; i < kiln_node_input_count(g, n) && !has_in; i++)
            has_in = kiln_node_input_peer(g, n, i).node != 0;
        if (has_in)
            continue;
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
            for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
                kiln_node_id s = kiln_use_dst(g, u).node;
                if ((r->kind[s] & (K_DISPERSED | K_GENTASK)) || mc_is_sym(g, s, netoutput))
                    continue;
                if (kiln_ctrl_add(g, clean, s) != KILN_OK)
                    return KILN_ERR_NOMEM;
            }
        for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id s = kiln_ctrl_dst(g, c);
            if ((r->kind[s] & (K_DISPERSED | K_GENTASK)) || mc_is_sym(g, s, netoutput))
                continue;
            if (kiln_ctrl_add(g, clean, s) != KILN_OK)
                return KILN_ERR_NOMEM;
        }
    }
    return KILN_OK;
}

static kiln_status handle_normal(clean_run *r)
{
    kiln_graph *g = r->g;
    uint32_t index = 0, common = 0;
    for (kiln_node_id n = 1; n < r->lim; n++) {
        if (!(r->kind[n] & K_CAND) || all_outputs_feed_hcom(r, n))
            continue;
        const int64_t *v;
        uint32_t cnt = 0;
        kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_is_connected_to_netoutput", &v, &cnt);
        if (cnt == 0 || (r->kind[n] & K_HCOM)) {
            common++;
            continue;
        }
        char suffix[16], why[600];
        snprintf(suffix, sizeof suffix, "_%u", index++);
        snprintf(why, sizeof why, "own clean node for %s (its outputs reach NetOutput)",
                 kiln_node_name_str(g, n));
        kiln_node_id c = add_clean(r, suffix, why);
        if (!c || link(r, n, c) != KILN_OK || link_hcom_producers(r, c) != KILN_OK)
            return KILN_ERR_NOMEM;
        r->kind[n] |= K_DISPERSED;
    }
    if (common == 0)
        return KILN_OK;
    kiln_node_id c = add_clean(r, "", "one clean node for the atomic ops of the graph");
    if (!c)
        return KILN_ERR_NOMEM;
    for (kiln_node_id n = 1; n < r->lim; n++)
        if ((r->kind[n] & K_CAND) && !(r->kind[n] & K_DISPERSED) && !all_outputs_feed_hcom(r, n) &&
            link(r, n, c) != KILN_OK)
            return KILN_ERR_NOMEM;
    kiln_status st = link_hcom_producers(r, c);
    return st != KILN_OK ? st : link_second_nodes(r, c);
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    const char *policy = kiln_pass_session_option(ctx, "ge.exec.atomicCleanPolicy");
    bool separately = policy && strcmp(policy, "1") == 0;
    clean_run r = {inst, ctx, g, NULL, kiln_graph_id_limit(g), false};
    r.kind = kiln_alloc((size_t)r.lim + 1);
    if (!r.kind)
        return mc_fail(ctx, "AtomicAddrCleanPass: allocation", kiln_graph_name(g));
    memset(r.kind, 0, (size_t)r.lim + 1);
    bool changed = false;
    uint32_t cands = classify(&r, separately, &changed);
    kiln_status st = KILN_OK;
    if (cands && !mc_graph_unknown(g)) {
        uint64_t before = kiln_graph_mutation(g);
        st = r.loop ? handle_loop(&r) : handle_normal(&r);
        changed = changed || kiln_graph_mutation(g) != before;
    }
    kiln_free(r.kind);
    if (st != KILN_OK) {
        kiln_errorf(kiln_pass_error(ctx), st, "AtomicAddrCleanPass failed on graph %s",
                    kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

static const kiln_option_def options[] = {
    {.struct_size = sizeof(kiln_option_def), .type = KILN_OPT_STRING, .name = "clean_op",
     .default_value = "AtomicAddrClean",
     .help = "clean node type: AtomicAddrClean (atomic_addr_clean) or MemSet (atomic_memset)"},
};

static kiln_status create(const kiln_options *opts, kiln_error *err, void **out)
{
    const char *op = "AtomicAddrClean";
    kiln_options_get_string(opts, "clean_op", &op);
    if (strcmp(op, "AtomicAddrClean") != 0 && strcmp(op, "MemSet") != 0)
        return kiln_errorf(err, KILN_ERR_PARAM, "clean_op must be AtomicAddrClean or MemSet, not %s",
                           op);
    clean_inst *inst = kiln_alloc(sizeof *inst);
    if (!inst)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    inst->memset = strcmp(op, "MemSet") == 0;
    inst->counter = 0;
    *out = inst;
    return KILN_OK;
}

static void destroy(void *inst)
{
    kiln_free(inst);
}

const kiln_pass_desc kiln_mc_atomic_addr_clean_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "AtomicAddrCleanPass",
    .summary = "insert AtomicAddrClean/MemSet nodes zeroing atomic outputs before they run",
    .option_count = 1,
    .options = options,
    .create = create,
    .destroy = destroy,
    .run_graph = run,
};
