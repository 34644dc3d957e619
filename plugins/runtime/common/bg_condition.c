/*
 * bg_condition.c - the runtime graph build of If/Case (bg_condition.h,
 * docs/control_flow_lowering.md): the control frame, the branch graphs with
 * InnerData/InnerNetOutput, CalcSubgraphGuardersPolicy and
 * CalcChainConflictSolvePolicy, placements.
 */
#include "bg_condition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ATTR_INDEX "index"                            /* GE kFeedIndex */
#define ATTR_BRANCH "branch"                          /* GE kRelativeBranch */
#define ATTR_REQUEST_WATCHER "_request_watcher"       /* GE kRequestWatcher */
#define ATTR_RELEASE_INDEX "ReleaseResourceIndex"     /* GE kReleaseResourceIndex */
#define ATTR_GUARDER_OUTSIDE "NodeWithGuarderOutside" /* GE kNodeWithGuarderOutside */
#define ATTR_PLACEMENT "_placement"
#define ATTR_LOWERED "_bg_lowered"

static const char *const free_types[] = {
    "FreeMemory",         "FreeMemHbm",          "FreeBatchHbm",           "FreeTensorMemory",
    "FreeFftsMem",        "FreeBatchFftsMems",   "FreeFixedFeatureMemory", "FreeMemoryHoldAddr",
    "FreeMemHbmHoldAddr", "FreeBatchHbmHoldAddr"};

bool kiln_bg_is_free_type(const char *op)
{
    for (size_t i = 0; op && i < sizeof(free_types) / sizeof(free_types[0]); i++)
        if (strcmp(op, free_types[i]) == 0)
            return true;
    return false;
}

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool is_cond_op(const kiln_graph *g, kiln_node_id n)
{
    return op_is(g, n, "If") || op_is(g, n, "Case");
}

/* ---- copying nodes and graphs ------------------------------------------------------- */

/* A subgraph of @p n named @p base, or base_1, base_2, ... when taken. */
static kiln_graph *add_subgraph(kiln_graph *g, kiln_node_id n, const char *role, const char *base)
{
    char name[512];
    snprintf(name, sizeof(name), "%.480s", base);
    for (int k = 1; k < 1000; k++) {
        kiln_graph *s = kiln_node_add_subgraph(g, n, role, name);
        if (s)
            return s;
        snprintf(name, sizeof(name), "%.480s_%d", base, k);
    }
    return NULL;
}

static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, kiln_error *err);

/* A copy of @p sn of @p src in @p dst under @p name / @p op: attrs, descriptors, subgraphs. */
static kiln_node_id copy_node(kiln_graph *dst, kiln_graph *src, kiln_node_id sn, const char *name,
                              const char *op, kiln_error *err)
{
    uint32_t nin = kiln_node_input_count(src, sn), nout = kiln_node_output_count(src, sn);
    kiln_node_id n = kiln_graph_add_node(dst, name, op, nin, nout);
    if (!n) {
        kiln_errorf(err, KILN_ERR_NOMEM, "graph %s: cannot add node %s (%s)", kiln_graph_name(dst),
                    name, op);
        return 0;
    }
    kiln_status st = kiln_attrs_copy(kiln_node_attrs_mut(dst, n), kiln_node_attrs(src, sn));
    for (uint32_t o = 0; st == KILN_OK && o < nout; o++)
        st = kiln_desc_copy(dst, kiln_node_output_desc(dst, n, o),
                            kiln_node_output_desc(src, sn, o));
    for (uint32_t i = 0; st == KILN_OK && i < nin; i++)
        if (kiln_node_input_has_desc(src, sn, i))
            st = kiln_desc_copy(dst, kiln_node_input_desc_mut(dst, n, i),
                                kiln_node_input_desc(src, sn, i));
    if (st != KILN_OK) {
        kiln_errorf(err, st, "graph %s: cannot copy node %s", kiln_graph_name(dst), name);
        return 0;
    }
    uint32_t ns = kiln_node_subgraph_count(src, sn);
    for (uint32_t i = 0; i < ns; i++) {
        const char *role = NULL;
        kiln_graph *ss = kiln_node_subgraph(src, sn, i, &role);
        char base[512];
        snprintf(base, sizeof(base), "%s_bg", kiln_graph_name(ss));
        kiln_graph *ds = add_subgraph(dst, n, role, base);
        if (!ds) {
            kiln_errorf(err, KILN_ERR_NOMEM, "node %s: cannot add subgraph %s", name, base);
            return 0;
        }
        if (kiln_attrs_copy(kiln_graph_attrs(ds), kiln_graph_attrs(ss)) != KILN_OK ||
            copy_graph(ds, ss, err) != KILN_OK)
            return 0;
    }
    return n;
}

/* The edges of the nodes @p map maps (src id -> dst id, 0: not copied). */
static kiln_status copy_edges(kiln_graph *dst, kiln_graph *src, const kiln_node_id *map,
                              const uint32_t *port, kiln_error *err)
{
    uint32_t lim = kiln_graph_id_limit(src);
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n; n = kiln_graph_next_node(src, n)) {
        if (!map[n] || port[n] != UINT32_MAX) /* port set: an InnerData stand-in */
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(src, n); i++) {
            kiln_anchor p = kiln_node_input_peer(src, n, i);
            if (!p.node || p.node >= lim || !map[p.node])
                continue;
            uint32_t so = port[p.node] != UINT32_MAX ? port[p.node] : p.index;
            kiln_status st = kiln_edge_add(dst, map[p.node], so, map[n], i);
            if (st != KILN_OK)
                return kiln_errorf(err, st, "graph %s: cannot connect %s input %u",
                                   kiln_graph_name(dst), kiln_node_name_str(src, n), i);
        }
        for (uint32_t c = kiln_ctrl_out_first(src, n); c; c = kiln_ctrl_out_next(src, c)) {
            kiln_node_id d = kiln_ctrl_dst(src, c);
            if (d < lim && map[d] && kiln_ctrl_add(dst, map[n], map[d]) != KILN_OK)
                return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        }
    }
    return KILN_OK;
}

static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, kiln_error *err)
{
    uint32_t lim = kiln_graph_id_limit(src);
    kiln_node_id *map = calloc(lim + 1, sizeof(*map));
    uint32_t *port = malloc((lim + 1) * sizeof(*port));
    if (!map || !port) {
        free(map);
        free(port);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    memset(port, 0xff, (lim + 1) * sizeof(*port));
    kiln_status st = KILN_OK;
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(src, n)) {
        map[n] = copy_node(dst, src, n, kiln_node_name_str(src, n), kiln_node_op_str(src, n), err);
        if (!map[n])
            st = kiln_error_code(err) != KILN_OK ? kiln_error_code(err) : KILN_ERR_NOMEM;
    }
    if (st == KILN_OK)
        st = copy_edges(dst, src, map, port, err);
    free(map);
    free(port);
    return st;
}

/* ---- the lowering state -------------------------------------------------------------- */

typedef struct branch {
    kiln_graph *src; /* the original branch (NULL: empty) */
    const char *role;
    kiln_graph *dst;  /* the lowered branch */
    kiln_node_id out; /* its InnerNetOutput */
    uint32_t nout;
} branch;

typedef struct lowering {
    kiln_graph *g;
    kiln_node_id c;   /* the original node */
    kiln_node_id c2;  /* the lowered node */
    const char *name; /* the node's name */
    branch *br;
    uint32_t nbr;
    uint32_t nout;
    kiln_anchor *outer; /* distinct outer values; [0] = the condition */
    uint32_t nouter;
    kiln_error *err;
} lowering;

/* The guarder of output (n, o) of @p g: a consumer whose ReleaseResourceIndex is its input. */
static kiln_node_id guarder_of(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
        kiln_anchor d = kiln_use_dst(g, u);
        int64_t idx;
        if (kiln_attrs_get_int(kiln_node_attrs(g, d.node), ATTR_RELEASE_INDEX, &idx) &&
            idx == (int64_t)d.index)
            return d.node;
    }
    return 0;
}

static uint32_t outer_index(lowering *L, kiln_anchor a)
{
    for (uint32_t i = 0; i < L->nouter; i++)
        if (L->outer[i].node == a.node && L->outer[i].index == a.index)
            return i;
    L->outer[L->nouter] = a;
    return L->nouter++;
}

/* The branches of the node in order: If then/else (missing: empty), Case branch_0.. */
static kiln_status find_branches(lowering *L)
{
    kiln_graph *g = L->g;
    uint32_t ns = kiln_node_subgraph_count(g, L->c);
    bool is_if = op_is(g, L->c, "If");
    L->nbr = is_if ? 2 : 0;
    if (!is_if)
        for (uint32_t i = 0; i < ns; i++) {
            const char *role = NULL;
            kiln_node_subgraph(g, L->c, i, &role);
            if (role && strncmp(role, "branch_", 7) == 0)
                L->nbr++;
        }
    if (!L->nbr)
        return kiln_errorf(L->err, KILN_ERR_INVALID, "Case node %s has no branch_* subgraph",
                           L->name);
    L->br = calloc(L->nbr, sizeof(*L->br));
    if (!L->br)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    if (is_if) {
        L->br[0].role = "then_branch";
        L->br[1].role = "else_branch";
    }
    for (uint32_t i = 0; i < ns; i++) {
        const char *role = NULL;
        kiln_graph *s = kiln_node_subgraph(g, L->c, i, &role);
        if (!role)
            continue;
        if (is_if) {
            for (uint32_t b = 0; b < 2; b++)
                if (strcmp(role, L->br[b].role) == 0)
                    L->br[b].src = s;
            continue;
        }
        char *end = NULL;
        long k = strncmp(role, "branch_", 7) == 0 ? strtol(role + 7, &end, 10) : -1;
        if (k < 0 || (uint32_t)k >= L->nbr || !end || *end || L->br[k].src)
            return kiln_errorf(L->err, KILN_ERR_INVALID,
                               "Case node %s: subgraph role '%s' is "
                               "not branch_0..branch_%u, each once",
                               L->name, role, L->nbr - 1);
        L->br[k].src = s;
        L->br[k].role = role;
    }
    return KILN_OK;
}

/* The NetOutput of @p s (0: none); more than one is an error. */
static kiln_status find_netoutput(lowering *L, kiln_graph *s, kiln_node_id *out)
{
    *out = 0;
    for (kiln_node_id n = kiln_graph_next_node(s, 0); n; n = kiln_graph_next_node(s, n))
        if (op_is(s, n, "NetOutput")) {
            if (*out)
                return kiln_errorf(L->err, KILN_ERR_INVALID,
                                   "node %s: branch %s has more than "
                                   "one NetOutput",
                                   L->name, kiln_graph_name(s));
            *out = n;
        }
    return KILN_OK;
}

/* Output counts: every branch returns the same number (an empty branch 0). */
static kiln_status check_arity(lowering *L)
{
    for (uint32_t b = 0; b < L->nbr; b++) {
        kiln_node_id no = 0;
        if (L->br[b].src && find_netoutput(L, L->br[b].src, &no) != KILN_OK)
            return kiln_error_code(L->err);
        L->br[b].nout = no ? kiln_node_input_count(L->br[b].src, no) : 0;
        if (L->br[b].nout != L->br[0].nout)
            return kiln_errorf(L->err, KILN_ERR_INVALID,
                               "%s node %s: branch %s returns %u "
                               "outputs, branch %s returns %u; all branches must return the "
                               "same number (an empty branch returns 0)",
                               kiln_node_op_str(L->g, L->c), L->name, L->br[b].role, L->br[b].nout,
                               L->br[0].role, L->br[0].nout);
    }
    L->nout = L->br[0].nout;
    if (L->nout > KILN_BG_MAX_OUTPUTS)
        return kiln_errorf(L->err, KILN_ERR_LIMIT, "node %s: %u outputs", L->name, L->nout);
    uint32_t have = kiln_node_output_count(L->g, L->c);
    if (have != L->nout)
        return kiln_errorf(L->err, KILN_ERR_INVALID,
                           "%s node %s has %u outputs, its branches "
                           "return %u",
                           kiln_node_op_str(L->g, L->c), L->name, have, L->nout);
    return KILN_OK;
}

/* Subgraph 0: the control frame of GE's CreateControlFrame. */
static kiln_status build_cond_graph(lowering *L)
{
    char base[512];
    snprintf(base, sizeof(base), "%.480s_CondGraph", L->name);
    kiln_graph *s = add_subgraph(L->g, L->c2, "cond", base);
    if (!s)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "node %s: cannot add its cond graph", L->name);
    uint32_t n = L->nbr;
    kiln_node_id d = kiln_graph_add_node(s, "InnerData", "InnerData", 0, 1);
    kiln_node_id sn = kiln_graph_add_node(s, "SwitchNotify", "SwitchNotify", 1, n + 1);
    kiln_node_id wp = kiln_graph_add_node(s, "WatcherPlaceholder", "WatcherPlaceholder", 1, 0);
    kiln_node_id wa = kiln_graph_add_node(s, "WaitAnyone", "WaitAnyone", 0, 0);
    if (!d || !sn || !wp || !wa)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    kiln_anchor ca = L->outer[0];
    kiln_status st = kiln_attrs_set_int(kiln_node_attrs_mut(s, d), ATTR_INDEX, 0);
    if (st == KILN_OK)
        st = kiln_desc_copy(s, kiln_node_output_desc(s, d, 0),
                            kiln_node_output_desc(L->g, ca.node, ca.index));
    if (st == KILN_OK)
        st = kiln_edge_add(s, d, 0, sn, 0);
    if (st == KILN_OK)
        st = kiln_attrs_set_bool(kiln_desc_attrs_mut(s, kiln_node_output_desc(s, sn, 0)),
                                 ATTR_REQUEST_WATCHER, true);
    if (st == KILN_OK)
        st = kiln_edge_add(s, sn, 0, wp, 0);
    for (uint32_t i = 1; st == KILN_OK && i <= n; i++) {
        char pn[64], dn[64];
        snprintf(pn, sizeof(pn), "BranchPivot_%u", i);
        snprintf(dn, sizeof(dn), "BranchDone_%u", i);
        kiln_node_id pv = kiln_graph_add_node(s, pn, "BranchPivot", 1, 0);
        kiln_node_id done = kiln_graph_add_node(s, dn, "BranchDone", 0, 0);
        if (!pv || !done)
            return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        st = kiln_attrs_set_int(kiln_node_attrs_mut(s, pv), ATTR_BRANCH, i);
        if (st == KILN_OK)
            st = kiln_attrs_set_int(kiln_node_attrs_mut(s, done), ATTR_BRANCH, i);
        if (st == KILN_OK)
            st = kiln_edge_add(s, sn, i, pv, 0);
        if (st == KILN_OK)
            st = kiln_ctrl_add(s, pv, done);
        if (st == KILN_OK)
            st = kiln_ctrl_add(s, done, wa);
    }
    return st == KILN_OK ? KILN_OK
                         : kiln_errorf(L->err, st, "node %s: cannot build its cond graph", L->name);
}

/* Branch @p b: InnerData per distinct outer value, the nodes, InnerNetOutput. */
static kiln_status build_branch(lowering *L, uint32_t b)
{
    branch *br = &L->br[b];
    char base[512];
    snprintf(base, sizeof(base), "%s_%s", L->name, br->role);
    br->dst = add_subgraph(L->g, L->c2, br->role, base);
    if (!br->dst)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "node %s: cannot add branch %s", L->name,
                           br->role);
    kiln_graph *s = br->src, *d = br->dst;
    uint32_t pos[KILN_BG_MAX_OUTPUTS];
    if (!s) { /* an empty branch: InnerNetOutput only */
        br->out = kiln_graph_add_node(d, "InnerNetOutput", "InnerNetOutput", 0, 0);
        return br->out ? KILN_OK : kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    }
    if (kiln_attrs_copy(kiln_graph_attrs(d), kiln_graph_attrs(s)) != KILN_OK)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    uint32_t lim = kiln_graph_id_limit(s), nin = kiln_node_input_count(L->g, L->c);
    kiln_node_id *map = calloc(lim + 1, sizeof(*map));
    uint32_t *port = malloc((lim + 1) * sizeof(*port));
    kiln_node_id *inner =
        calloc(L->nouter + nin + 1, sizeof(*inner)); /* outer index -> InnerData */
    kiln_status st = KILN_OK;
    if (!map || !port || !inner) {
        st = kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    memset(port, 0xff, (lim + 1) * sizeof(*port));
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(s, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(s, n)) {
        if (op_is(s, n, "NetOutput")) {
            no = n;
            continue;
        }
        if (!op_is(s, n, "Data")) {
            map[n] = copy_node(d, s, n, kiln_node_name_str(s, n), kiln_node_op_str(s, n), L->err);
            if (!map[n])
                st = kiln_error_code(L->err);
            continue;
        }
        int64_t p;
        if (!kiln_attrs_get_int(kiln_node_attrs(s, n), "_parent_node_index", &p) || p < 0 ||
            p >= (int64_t)nin) {
            st = kiln_errorf(L->err, KILN_ERR_INVALID,
                             "node %s: Data %s of branch %s has no "
                             "valid _parent_node_index (the node has %u inputs)",
                             L->name, kiln_node_name_str(s, n), br->role, nin);
            break;
        }
        if (!kiln_node_output_use_count(s, n, 0))
            continue; /* not used: no InnerData, not an input of the lowered node */
        kiln_anchor a = kiln_node_input_peer(L->g, L->c, (uint32_t)p);
        if (!a.node) {
            st = kiln_errorf(L->err, KILN_ERR_INVALID,
                             "node %s: input %lld, which Data %s of "
                             "branch %s stands for, is unconnected",
                             L->name, (long long)p, kiln_node_name_str(s, n), br->role);
            break;
        }
        uint32_t k = outer_index(L, a);
        if (!inner[k]) {
            inner[k] = copy_node(d, s, n, kiln_node_name_str(s, n), "InnerData", L->err);
            if (!inner[k]) {
                st = kiln_error_code(L->err);
                break;
            }
            kiln_attrs *at = kiln_node_attrs_mut(d, inner[k]);
            kiln_attrs_remove(at, "_parent_node_index");
            st = kiln_attrs_set_int(at, ATTR_INDEX, k);
            kiln_node_id gd = guarder_of(L->g, a.node, a.index);
            if (st == KILN_OK && gd && kiln_bg_is_free_type(kiln_node_op_str(L->g, gd)))
                st = kiln_attrs_set_string(at, ATTR_GUARDER_OUTSIDE, kiln_node_op_str(L->g, gd));
        }
        map[n] = inner[k];
        port[n] = 0;
    }
    if (st != KILN_OK)
        goto done;
    /* InnerNetOutput: input j is the value the branch returns as output j */
    for (uint32_t j = 0; j < br->nout; j++)
        pos[j] = UINT32_MAX;
    for (uint32_t i = 0; i < br->nout; i++) {
        int64_t pi = i;
        if (kiln_node_input_has_desc(s, no, i))
            kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(s, no, i)),
                               "_parent_node_index", &pi);
        if (pi < 0 || pi >= (int64_t)br->nout || pos[pi] != UINT32_MAX) {
            st = kiln_errorf(L->err, KILN_ERR_INVALID,
                             "node %s: NetOutput input %u of branch %s "
                             "maps to output %lld, out of range or taken twice",
                             L->name, i, br->role, (long long)pi);
            goto done;
        }
        pos[pi] = i;
    }
    br->out = kiln_graph_add_node(d, "InnerNetOutput", "InnerNetOutput", br->nout, 0);
    if (!br->out) {
        st = kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = copy_edges(d, s, map, port, L->err)) != KILN_OK)
        goto done;
    for (uint32_t j = 0; j < br->nout && st == KILN_OK; j++) {
        kiln_anchor p = kiln_node_input_peer(s, no, pos[j]);
        if (!p.node || !map[p.node])
            continue;
        st = kiln_edge_add(d, map[p.node], port[p.node] != UINT32_MAX ? port[p.node] : p.index,
                           br->out, j);
    }
    if (st == KILN_OK && no) /* control edges into the NetOutput */
        for (uint32_t c = kiln_ctrl_in_first(s, no); c && st == KILN_OK;
             c = kiln_ctrl_in_next(s, c)) {
            kiln_node_id src = kiln_ctrl_src(s, c);
            if (src < lim && map[src])
                st = kiln_ctrl_add(d, map[src], br->out);
        }
done:
    free(map);
    free(port);
    free(inner);
    return st;
}

/* A node of @p np I/O pairs on the InnerNetOutput inputs @p idx of branch @p br:
 * src[k] -> node:k -> InnerNetOutput:idx[k] (GE InsertNodeBefore/After). */
static kiln_status insert_pairs(lowering *L, branch *br, const char *name, const char *op,
                                const uint32_t *idx, const kiln_anchor *src, uint32_t np)
{
    kiln_graph *d = br->dst;
    kiln_node_id n = kiln_graph_add_node(d, name, op, np, np);
    if (!n)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "node %s: cannot add %s %s", L->name, op, name);
    for (uint32_t k = 0; k < np; k++) {
        kiln_anchor p = src[k];
        kiln_status st = kiln_edge_remove(d, br->out, idx[k]);
        if (st == KILN_OK)
            st = kiln_edge_add(d, p.node, p.index, n, k);
        if (st == KILN_OK)
            st = kiln_edge_add(d, n, k, br->out, idx[k]);
        if (st == KILN_OK)
            st = kiln_desc_copy(d, kiln_node_output_desc(d, n, k),
                                kiln_node_output_desc(d, p.node, p.index));
        if (st != KILN_OK)
            return kiln_errorf(L->err, st, "node %s: cannot insert %s %s", L->name, op, name);
    }
    return KILN_OK;
}

typedef struct guard_rec {
    uint32_t index;
    const char *type;
} guard_rec;

static int guard_cmp(const void *a, const void *b)
{
    const guard_rec *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return strcmp(x->type, y->type);
}

/* CalcSubgraphGuardersPolicy + EnsureResourceLifeCycleExtended. */
static kiln_status guarders_policy(lowering *L, uint32_t *nguarded)
{
    uint32_t nb = L->nbr, no = L->nout;
    *nguarded = 0;
    if (!no)
        return KILN_OK;
    guard_rec *all = calloc((size_t)nb * no + 1, sizeof(*all));
    uint8_t *has = calloc((size_t)nb * no + 1, 1); /* [b*no+j]: guarded in branch b */
    kiln_anchor *plus = calloc((size_t)nb * no * 2 + 1, sizeof(*plus)); /* src per +1 edge */
    uint32_t *plus_idx = calloc((size_t)nb * no * 2 + 1, sizeof(*plus_idx));
    uint32_t *nplus = calloc(nb, sizeof(*nplus));
    kiln_node_id *rm = calloc((size_t)nb * no + 1, sizeof(*rm));
    uint32_t *nrm = calloc(nb, sizeof(*nrm));
    kiln_status st = KILN_OK;
    uint32_t nall = 0;
    if (!all || !has || !plus || !plus_idx || !nplus || !rm || !nrm) {
        st = kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint32_t b = 0; b < nb && st == KILN_OK; b++) {
        kiln_graph *d = L->br[b].dst;
        kiln_anchor *pl = plus + (size_t)b * no * 2;
        uint32_t *pi = plus_idx + (size_t)b * no * 2;
        for (uint32_t j = 0; j < no; j++) {
            kiln_anchor p = kiln_node_input_peer(d, L->br[b].out, j);
            if (!p.node)
                continue;
            const char *type = NULL;
            kiln_node_id in_graph = 0;
            const char *outside = NULL;
            if (op_is(d, p.node, "InnerData") &&
                kiln_attrs_get_string(kiln_node_attrs(d, p.node), ATTR_GUARDER_OUTSIDE, &outside) &&
                outside[0]) {
                if (!kiln_bg_is_free_type(outside)) {
                    st = kiln_errorf(L->err, KILN_ERR_INVALID,
                                     "node %s: InnerData %s of branch "
                                     "%s: %s '%s' is not a Free-type guarder",
                                     L->name, kiln_node_name_str(d, p.node), L->br[b].role,
                                     ATTR_GUARDER_OUTSIDE, outside);
                    break;
                }
                type = outside;
            } else if ((in_graph = guarder_of(d, p.node, p.index)) != 0) {
                type = kiln_node_op_str(d, in_graph);
            }
            if (!type)
                continue;
            all[nall++] = (guard_rec){j, type};
            has[(size_t)b * no + j] = 1;
            if (in_graph) {
                /* the first output of a guarded value takes the guarder's place;
                 * every repeat gets a +1 reference */
                bool seen = false;
                for (uint32_t k = 0; k < j; k++) {
                    kiln_anchor q = kiln_node_input_peer(d, L->br[b].out, k);
                    seen |= has[(size_t)b * no + k] && q.node == p.node && q.index == p.index;
                }
                if (seen)
                    pl[nplus[b]] = p, pi[nplus[b]++] = j;
                bool listed = false;
                for (uint32_t k = 0; k < nrm[b]; k++)
                    listed |= rm[(size_t)b * no + k] == in_graph;
                if (!listed)
                    rm[(size_t)b * no + nrm[b]++] = in_graph;
            } else {
                pl[nplus[b]] = p, pi[nplus[b]++] = j;
            }
        }
    }
    if (st != KILN_OK || !nall)
        goto done;
    qsort(all, nall, sizeof(*all), guard_cmp);
    uint32_t u = 0; /* the set of (index, type) */
    for (uint32_t i = 0; i < nall; i++)
        if (!u || guard_cmp(&all[u - 1], &all[i]) != 0)
            all[u++] = all[i];
    nall = u;
    /* a guarded output index: each branch without a guarder for it gets +1 */
    for (uint32_t i = 0; i < nall; i++)
        for (uint32_t b = 0; b < nb; b++) {
            uint32_t j = all[i].index;
            if (has[(size_t)b * no + j])
                continue;
            kiln_anchor p = kiln_node_input_peer(L->br[b].dst, L->br[b].out, j);
            bool dup = false;
            for (uint32_t k = 0; k < nplus[b]; k++)
                dup |= plus_idx[(size_t)b * no * 2 + k] == j;
            if (!p.node || dup || nplus[b] >= no * 2)
                continue;
            plus[(size_t)b * no * 2 + nplus[b]] = p;
            plus_idx[(size_t)b * no * 2 + nplus[b]++] = j;
        }
    /* the parent owns the lifetimes: one guarder per guarded output */
    for (uint32_t i = 0; i < nall && st == KILN_OK; i++) {
        char gn[512];
        snprintf(gn, sizeof(gn), "%s_%s_%u", L->name, all[i].type, all[i].index);
        kiln_node_id gd = kiln_graph_add_node(L->g, gn, all[i].type, 1, 0);
        if (!gd) {
            st = kiln_errorf(L->err, KILN_ERR_INVALID,
                             "node %s: cannot add guarder %s (name "
                             "taken?)",
                             L->name, gn);
            break;
        }
        st = kiln_attrs_set_int(kiln_node_attrs_mut(L->g, gd), ATTR_RELEASE_INDEX, 0);
        if (st == KILN_OK)
            st = kiln_edge_add(L->g, L->c2, all[i].index, gd, 0);
    }
    for (uint32_t b = 0; b < nb && st == KILN_OK; b++) {
        for (uint32_t k = 0; k < nrm[b] && st == KILN_OK; k++)
            st = kiln_graph_remove_node(L->br[b].dst, rm[(size_t)b * no + k]);
        if (st == KILN_OK && nplus[b]) {
            char nm[512];
            snprintf(nm, sizeof(nm), "%s_Subgraph_%u_AddResRef_", L->name, b);
            st = insert_pairs(L, &L->br[b], nm, "IdentityAddr", plus_idx + (size_t)b * no * 2,
                              plus + (size_t)b * no * 2, nplus[b]);
        }
    }
    if (st == KILN_OK)
        *nguarded = nall;
done:
    free(all);
    free(has);
    free(plus);
    free(plus_idx);
    free(nplus);
    free(rm);
    free(nrm);
    return st;
}

/* CalcChainConflictSolvePolicy + EnsureChainConflictSolved. */
static kiln_status chain_conflict_policy(lowering *L, uint32_t *nconflict)
{
    uint32_t no = L->nout, nc = 0;
    *nconflict = 0;
    if (!no)
        return KILN_OK;
    uint32_t *conf = calloc(no, sizeof(*conf));
    kiln_anchor *src = calloc(no, sizeof(*src));
    kiln_status st = KILN_OK;
    if (!conf || !src) {
        st = kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint32_t j = 0; j < no; j++) {
        int64_t first = 0;
        bool conflict = false;
        for (uint32_t b = 0; b < L->nbr; b++) {
            kiln_graph *d = L->br[b].dst;
            kiln_anchor p = kiln_node_input_peer(d, L->br[b].out, j);
            int64_t v = -1;
            if (p.node && op_is(d, p.node, "InnerData") &&
                !kiln_attrs_get_int(kiln_node_attrs(d, p.node), ATTR_INDEX, &v)) {
                st = kiln_errorf(L->err, KILN_ERR_INVALID, "node %s: InnerData %s has no '%s'",
                                 L->name, kiln_node_name_str(d, p.node), ATTR_INDEX);
                goto done;
            }
            if (b == 0)
                first = v;
            else if (v != first)
                conflict = true;
        }
        if (conflict)
            conf[nc++] = j;
    }
    for (uint32_t b = 0; b < L->nbr && nc && st == KILN_OK; b++) {
        char nm[512];
        snprintf(nm, sizeof(nm), "%s_PointFrom_%u", L->name, b);
        for (uint32_t k = 0; k < nc; k++)
            src[k] = kiln_node_input_peer(L->br[b].dst, L->br[b].out, conf[k]);
        st = insert_pairs(L, &L->br[b], nm, "PointFromInputs", conf, src, nc);
    }
    if (st == KILN_OK)
        *nconflict = nc;
done:
    free(conf);
    free(src);
    return st;
}

static const char *placement_of(kiln_graph *g, const kiln_tensor_desc *d)
{
    const char *p = NULL;
    if (!kiln_attrs_get_string(kiln_desc_attrs(d), ATTR_PLACEMENT, &p) || !p || !p[0])
        p = kiln_desc_memory_type(g, d);
    if (!p || !p[0])
        p = "HBM";
    return strcasecmp(p, "following") == 0 || strcasecmp(p, "host") == 0 ? "host" : p;
}

/* UpdatePlacement: the common placement of each output, `end` when the branches differ. */
static kiln_status update_placement(lowering *L)
{
    for (uint32_t j = 0; j < L->nout; j++) {
        const char *common = NULL;
        bool differ = false;
        for (uint32_t b = 0; b < L->nbr; b++) {
            kiln_graph *d = L->br[b].dst;
            kiln_anchor p = kiln_node_input_peer(d, L->br[b].out, j);
            if (!p.node)
                continue;
            const char *pl = placement_of(d, kiln_node_output_desc(d, p.node, p.index));
            if (!common)
                common = pl;
            else if (strcmp(common, pl) != 0)
                differ = true;
        }
        kiln_tensor_desc *od = kiln_node_output_desc(L->g, L->c2, j);
        kiln_status st = kiln_attrs_set_string(kiln_desc_attrs_mut(L->g, od), ATTR_PLACEMENT,
                                               differ   ? "end"
                                               : common ? common
                                                        : "HBM");
        if (st != KILN_OK)
            return kiln_errorf(L->err, st, "out of memory");
    }
    return KILN_OK;
}

/* The lowered node takes the original's place: inputs, consumers, control edges. */
static kiln_status take_place(lowering *L)
{
    kiln_graph *g = L->g;
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < L->nouter && st == KILN_OK; i++)
        st = kiln_edge_add(g, L->outer[i].node, L->outer[i].index, L->c2, i);
    for (uint32_t o = 0; o < L->nout && st == KILN_OK; o++) {
        kiln_anchor uses[256];
        uint32_t nu = 0;
        for (;;) { /* in batches: edges move while iterating */
            nu = 0;
            for (uint32_t u = kiln_use_first(g, L->c, o); u && nu < 256; u = kiln_use_next(g, u))
                uses[nu++] = kiln_use_dst(g, u);
            if (!nu)
                break;
            for (uint32_t k = 0; k < nu && st == KILN_OK; k++) {
                st = kiln_edge_remove(g, uses[k].node, uses[k].index);
                if (st == KILN_OK)
                    st = kiln_edge_add(g, L->c2, o, uses[k].node, uses[k].index);
            }
            if (st != KILN_OK)
                break;
        }
    }
    for (uint32_t c = kiln_ctrl_in_first(g, L->c); c && st == KILN_OK; c = kiln_ctrl_in_next(g, c))
        st = kiln_ctrl_add(g, kiln_ctrl_src(g, c), L->c2);
    for (uint32_t c = kiln_ctrl_out_first(g, L->c); c && st == KILN_OK;
         c = kiln_ctrl_out_next(g, c))
        st = kiln_ctrl_add(g, L->c2, kiln_ctrl_dst(g, c));
    if (st == KILN_OK)
        st = kiln_graph_remove_node(g, L->c);
    return st == KILN_OK ? KILN_OK
                         : kiln_errorf(L->err, st,
                                       "node %s: cannot replace it by its lowered "
                                       "form",
                                       L->name);
}

kiln_status kiln_bg_lower_cond(kiln_graph *g, kiln_node_id n, kiln_bg_cond_result *res,
                               kiln_error *err)
{
    if (res)
        memset(res, 0, sizeof(*res));
    if (!g || !n || !kiln_node_is_live(g, n))
        return kiln_errorf(err, KILN_ERR_INVALID, "bg_condition: no such node");
    if (!is_cond_op(g, n))
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s (%s) is not an If or Case",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    char name[512], tmp[600];
    snprintf(name, sizeof(name), "%s", kiln_node_name_str(g, n));
    lowering L = {.g = g, .c = n, .name = name, .err = err};
    uint32_t nin = kiln_node_input_count(g, n);
    kiln_status st = KILN_OK;
    if (!nin || !kiln_node_input_peer(g, n, 0).node)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s node %s: input 0 (the %s) is unconnected",
                           kiln_node_op_str(g, n), name, op_is(g, n, "If") ? "condition" : "index");
    if ((st = find_branches(&L)) != KILN_OK || (st = check_arity(&L)) != KILN_OK)
        goto fail;
    L.outer = calloc(nin + 1, sizeof(*L.outer));
    if (!L.outer) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    L.outer[L.nouter++] = kiln_node_input_peer(g, n, 0);
    /* the original steps aside for its lowered form, which takes its name */
    snprintf(tmp, sizeof(tmp), "%s__bg_source", name);
    if ((st = kiln_node_set_name(g, n, tmp)) != KILN_OK) {
        kiln_errorf(err, st, "node %s: cannot rename it while lowering", name);
        goto fail;
    }
    L.c2 = kiln_graph_add_node(g, name, kiln_node_op_str(g, n), 0, L.nout);
    if (!L.c2) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "node %s: cannot add its lowered form", name);
        goto undo;
    }
    st = kiln_attrs_copy(kiln_node_attrs_mut(g, L.c2), kiln_node_attrs(g, n));
    for (uint32_t o = 0; st == KILN_OK && o < L.nout; o++)
        st = kiln_desc_copy(g, kiln_node_output_desc(g, L.c2, o), kiln_node_output_desc(g, n, o));
    if (st == KILN_OK)
        st = kiln_attrs_set_bool(kiln_node_attrs_mut(g, L.c2), ATTR_LOWERED, true);
    if (st != KILN_OK) {
        kiln_errorf(err, st, "out of memory");
        goto undo;
    }
    if ((st = build_cond_graph(&L)) != KILN_OK)
        goto undo;
    for (uint32_t b = 0; b < L.nbr; b++)
        if ((st = build_branch(&L, b)) != KILN_OK)
            goto undo;
    if ((st = kiln_node_set_input_count(g, L.c2, L.nouter)) != KILN_OK) {
        kiln_errorf(err, st, "out of memory");
        goto undo;
    }
    uint32_t nguarded = 0, nconflict = 0;
    if ((st = guarders_policy(&L, &nguarded)) != KILN_OK ||
        (st = chain_conflict_policy(&L, &nconflict)) != KILN_OK ||
        (st = update_placement(&L)) != KILN_OK || (st = take_place(&L)) != KILN_OK)
        goto undo;
    if (res) {
        res->node = L.c2;
        res->branch_count = L.nbr;
        res->output_count = L.nout;
        res->holder_count = L.nout ? L.nout : 1;
        res->conflict_count = nconflict;
        res->guarded_count = nguarded;
    }
    free(L.br);
    free(L.outer);
    return KILN_OK;
undo:
    if (L.c2) { /* its guarders in the parent first, then the node and its subgraphs */
        for (uint32_t o = 0; o < L.nout; o++)
            for (kiln_node_id gd; (gd = guarder_of(g, L.c2, o)) != 0;)
                kiln_graph_remove_node(g, gd);
        kiln_graph_remove_node(g, L.c2);
    }
    kiln_node_set_name(g, n, name);
fail:
    free(L.br);
    free(L.outer);
    if (kiln_error_code(err) == KILN_OK)
        kiln_errorf(err, st, "node %s: lowering failed", name);
    return st;
}

/* ---- whole graphs -------------------------------------------------------------------- */

/* Give every computed value a branch returns, and every computed input of the
 * node, a FreeMemory guarder (GE guards each allocated output). */
static kiln_status auto_guard(kiln_graph *g, kiln_node_id c, kiln_error *err)
{
    kiln_graph *gs[65];
    kiln_node_id outs[65];
    uint32_t ng = 0;
    gs[ng] = g, outs[ng++] = c; /* the node's own inputs, in g */
    for (uint32_t i = 0; i < kiln_node_subgraph_count(g, c) && ng < 65; i++) {
        kiln_graph *s = kiln_node_subgraph(g, c, i, NULL);
        for (kiln_node_id n = kiln_graph_next_node(s, 0); n; n = kiln_graph_next_node(s, n))
            if (op_is(s, n, "NetOutput")) {
                gs[ng] = s, outs[ng++] = n;
                break;
            }
    }
    for (uint32_t k = 0; k < ng; k++) {
        kiln_graph *s = gs[k];
        for (uint32_t i = 0; i < kiln_node_input_count(s, outs[k]); i++) {
            kiln_anchor p = kiln_node_input_peer(s, outs[k], i);
            if (!p.node || op_is(s, p.node, "Data") || op_is(s, p.node, "Const") ||
                op_is(s, p.node, "Constant") || op_is(s, p.node, "InnerData") ||
                guarder_of(s, p.node, p.index))
                continue;
            char nm[512];
            snprintf(nm, sizeof(nm), "%s_FreeMemory_%u", kiln_node_name_str(s, p.node), p.index);
            kiln_node_id gd = kiln_graph_add_node(s, nm, "FreeMemory", 1, 0);
            kiln_status st =
                gd ? kiln_attrs_set_int(kiln_node_attrs_mut(s, gd), ATTR_RELEASE_INDEX, 0)
                   : KILN_ERR_INVALID;
            if (st == KILN_OK)
                st = kiln_edge_add(s, p.node, p.index, gd, 0);
            if (st != KILN_OK)
                return kiln_errorf(err, st, "graph %s: cannot add guarder %s", kiln_graph_name(s),
                                   nm);
        }
    }
    return KILN_OK;
}

/* The deepest If/Case not lowered yet, in @p root or any of its subgraphs. */
static kiln_node_id next_cond(kiln_graph *root, kiln_graph **where)
{
    kiln_node_id best = 0;
    uint32_t best_depth = 0;
    uint32_t ns = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= ns; i++) {
        kiln_graph *s = i == ns ? root : kiln_graph_all_subgraph(root, i);
        if (!s)
            continue;
        uint32_t depth = kiln_graph_depth(s);
        for (kiln_node_id n = kiln_graph_next_node(s, 0); n; n = kiln_graph_next_node(s, n)) {
            bool done = false;
            if (!is_cond_op(s, n) ||
                (kiln_attrs_get_bool(kiln_node_attrs(s, n), ATTR_LOWERED, &done) && done))
                continue;
            if (!best || depth > best_depth) {
                best = n, best_depth = depth, *where = s;
            }
        }
    }
    return best;
}

kiln_status kiln_bg_lower_graph(kiln_graph *g, bool guard, uint32_t *count, kiln_error *err)
{
    uint32_t k = 0;
    kiln_graph *s = NULL;
    for (kiln_node_id n; (n = next_cond(g, &s)) != 0; k++) {
        if (guard && auto_guard(s, n, err) != KILN_OK)
            return kiln_error_code(err);
        kiln_status st = kiln_bg_lower_cond(s, n, NULL, err);
        if (st != KILN_OK)
            return st;
    }
    if (count)
        *count = k;
    return KILN_OK;
}
