/*
 * fusion_exec.c - the fusion executor (GE PatternFusionPass::Run,
 * DecomposePass::Run, FusionPassExecutor::RunPasses; GE_SEMANTICS 8.3) and
 * the match accessors of kiln_pass.h.
 *
 * kiln__fusion_run_pass runs one fusion pass instance over one graph; the
 * pass manager calls it for a fusion pass listed in a manifest stage (root,
 * then every subgraph) and kiln_fusion_run_stage for every loaded fusion
 * pass of a GE stage.  Per match of a PATTERN or DECOMPOSE pass:
 *
 *   meet_requirements (veto) -> replacement_new + replacement hook ->
 *   arity check -> kiln_fusion_replace (CanFuse -> rewrite -> ReportFuse ->
 *   delete; a CanFuse refusal, KILN_ERR_CONFLICT, skips the match: GE's
 *   WillCauseCycleIfFuse)
 *
 * Counters of the pass (kiln_pass_stat_add, shown by --stats / --report):
 * ReportFuse adds "matched" and "effected" for every applied match; the
 * executor adds "matched" for each match it found but did not apply, so
 * "matched" counts every match and "effected" the applied ones.
 */
#include "pattern.h"
#include "crash.h"
#include "graph_int.h"
#include "options.h"
#include "passctx.h"
#include "passmgr.h"

#include <ctype.h>
#include <jansson.h>

/* ---- match accessors ------------------------------------------------------ */

uint32_t kiln_match_input_count(const kiln_match *m) { return m ? m->ninputs : 0; }

kiln_anchor kiln_match_input(const kiln_match *m, uint32_t i)
{
    return (m && i < m->ninputs) ? m->inputs[i] : (kiln_anchor){0, 0};
}

uint32_t kiln_match_output_count(const kiln_match *m) { return m ? m->noutputs : 0; }

kiln_anchor kiln_match_output(const kiln_match *m, uint32_t j)
{
    return (m && j < m->noutputs) ? m->outputs[j] : (kiln_anchor){0, 0};
}

uint32_t kiln_match_node_count(const kiln_match *m) { return m ? m->nmatched : 0; }

kiln_node_id kiln_match_node_at(const kiln_match *m, uint32_t k)
{
    return (m && k < m->nmatched) ? m->matched[k] : 0;
}

const kiln_fusion_boundary *kiln_match_boundary(const kiln_match *m)
{
    return m ? &m->boundary : NULL;
}

/* ---- one pass over one graph ----------------------------------------------- */

typedef struct frun {
    kiln_pass_ctx *pc;
    const kiln_component *c;
    void *inst;
    kiln_graph *g;
    kiln_error *err;
    bool changed;
} frun;

/* The replacement must keep the boundary's arity (GE checks it in
 * SubgraphRewriter::Replace; here it is the executor's, to name the pass). */
static kiln_status check_arity(frun *r, const kiln_match *m, const kiln_graph *repl)
{
    uint32_t ndata = 0, nout = 0, outin = 0;
    for (kiln_node_id v = kiln_graph_next_node(repl, 0); v; v = kiln_graph_next_node(repl, v)) {
        const char *op = kiln_node_op_str(repl, v);
        if (strcmp(op, "Data") == 0)
            ndata++;
        else if (strcmp(op, "NetOutput") == 0) {
            nout++;
            outin = kiln_node_input_count(repl, v);
        }
    }
    const char *why = NULL;
    char buf[160];
    if (ndata != m->ninputs) {
        snprintf(buf, sizeof(buf), "%u Data nodes for %u boundary inputs", ndata, m->ninputs);
        why = buf;
    } else if (nout == 0) {
        why = "no NetOutput";
    } else if (nout > 1) {
        snprintf(buf, sizeof(buf), "%u NetOutput nodes", nout);
        why = buf;
    } else if (outin != m->noutputs) {
        snprintf(buf, sizeof(buf), "a NetOutput with %u inputs for %u boundary outputs", outin,
                 m->noutputs);
        why = buf;
    }
    if (!why)
        return KILN_OK;
    const char *first = m->nmatched ? kiln_node_name_str(r->g, m->matched[0]) : "?";
    return kiln_errorf(r->err, KILN_ERR_INVALID,
                       "fusion pass %s: the replacement of the match at '%s' on graph %s breaks "
                       "the boundary's arity: %s",
                       r->c->name, first, kiln_graph_name(r->g), why);
}

/* One match: veto, replacement, rewrite.  KILN_OK also when skipped. */
static kiln_status apply_match(frun *r, const kiln_match *m)
{
    const kiln_fusion_pass_desc *d = &r->c->d.fusion;
    if (d->meet_requirements && !d->meet_requirements(r->inst, r->g, m)) {
        kiln_pass_stat_add(r->pc, "matched", 1);
        return KILN_OK;
    }
    kiln_graph *repl = kiln_fusion_replacement_new(r->g, &m->boundary);
    if (!repl)
        return kiln_errorf(r->err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", r->c->name);
    kiln_status st = d->replacement(r->inst, r->pc, r->g, m, repl);
    if (st == KILN_ERR_NOT_FOUND) {
        kiln_fusion_replacement_free(repl);
        kiln_pass_stat_add(r->pc, "matched", 1);
        return KILN_OK;
    }
    if (st != KILN_OK) {
        kiln_fusion_replacement_free(repl);
        if (kiln_error_code(r->err) == KILN_OK)
            kiln_errorf(r->err, st, "fusion pass %s: replacement failed on graph %s (%s)",
                        r->c->name, kiln_graph_name(r->g), kiln_status_str(st));
        return st;
    }
    st = check_arity(r, m, repl);
    if (st != KILN_OK) {
        kiln_fusion_replacement_free(repl);
        return st;
    }
    st = kiln_fusion_replace(r->pc, r->g, &m->boundary, repl);
    if (st == KILN_ERR_CONFLICT) { /* CanFuse said no: skip the match (GE M9) */
        char msg[512];
        kiln_error_format(r->err, msg, sizeof(msg));
        kiln_diag(r->pc, KILN_SEV_DEBUG, "skip a match on graph %s: %s", kiln_graph_name(r->g),
                  msg);
        kiln_error_clear(r->err);
        kiln_pass_stat_add(r->pc, "matched", 1);
        return KILN_OK;
    }
    if (st != KILN_OK) {
        if (kiln_error_code(r->err) == KILN_OK)
            kiln_errorf(r->err, st, "replace failed (%s)", kiln_status_str(st));
        return kiln_error_push(r->err, "fusion pass %s on graph %s", r->c->name,
                               kiln_graph_name(r->g));
    }
    r->changed = true;
    return KILN_OK;
}

/* The pass's patterns, built and validated (GE: once per pass, whatever the
 * number of graphs it runs on). */
static kiln_status build_pattern(frun *r, kiln_pattern *p)
{
    const kiln_fusion_pass_desc *d = &r->c->d.fusion;
    kiln__pattern_init(p);
    kiln_status st = d->patterns(r->inst, p, r->err);
    if (st != KILN_OK) {
        if (kiln_error_code(r->err) == KILN_OK)
            kiln_errorf(r->err, st, "fusion pass %s: patterns failed (%s)", r->c->name,
                        kiln_status_str(st));
        kiln__pattern_free(p);
        return st;
    }
    st = kiln__pattern_validate(p, r->c->name, r->err);
    if (st != KILN_OK)
        kiln__pattern_free(p);
    return st;
}

static kiln_status match_pattern(frun *r, const kiln_pattern *p, const kiln_op_index *ix)
{
    kiln_status st = KILN_OK;
    kiln_matcher *mt = kiln__matcher_create_ix(p, r->g, ix);
    if (!mt)
        st = kiln_errorf(r->err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", r->c->name);
    for (uint32_t a = 0; st == KILN_OK && a < kiln__pattern_alt_count(p); a++) {
        kiln__matcher_begin(mt, a);
        const kiln_match *m;
        while (st == KILN_OK && (m = kiln__matcher_next(mt)) != NULL) {
            /* what a replacement changes: the matched nodes go, the consumers
             * of the outputs are re-fed */
            for (uint32_t k = 0; k < m->nmatched; k++)
                kiln__matcher_touch(mt, m->matched[k]);
            for (uint32_t j = 0; j < m->noutputs; j++)
                for (uint32_t u = kiln_use_first(r->g, m->outputs[j].node, m->outputs[j].index); u;
                     u = kiln_use_next(r->g, u))
                    kiln__matcher_touch(mt, kiln_use_dst(r->g, u).node);
            st = apply_match(r, m);
        }
        if (st == KILN_OK && r->g->oom)
            st = kiln_errorf(r->err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", r->c->name);
    }
    kiln__matcher_destroy(mt);
    return st;
}

static kiln_status run_pattern(frun *r)
{
    kiln_pattern p;
    kiln_status st = build_pattern(r, &p);
    if (st != KILN_OK)
        return st;
    st = match_pattern(r, &p, NULL);
    kiln__pattern_free(&p);
    return st;
}

/* DECOMPOSE: every live node of a listed op is a one-node match whose
 * boundary is its inputs and outputs (nodes with an unconnected input are
 * left alone: a boundary input needs a producer). */
static kiln_status run_decompose(frun *r)
{
    const kiln_fusion_pass_desc *d = &r->c->d.fusion;
    kiln_graph *g = r->g;
    kiln_sym ops[64];
    uint32_t nops = 0;
    for (uint32_t i = 0; d->decompose_ops[i] && nops < 64; i++) {
        kiln_sym s = kiln_sym_lookup(g, d->decompose_ops[i]);
        if (s)
            ops[nops++] = s;
    }
    if (!nops)
        return KILN_OK;
    kiln_node_id *todo = NULL;
    uint32_t ntodo = 0, cap = 0;
    uint32_t limit0 = g->node_limit;
    for (kiln_node_id v = 1; v < limit0; v++) {
        if (g->nodes[v].flags & KILN_NODEF_DEAD)
            continue;
        for (uint32_t k = 0; k < nops; k++)
            if (g->nodes[v].op == ops[k]) {
                if (!KILN_GROW(todo, cap, ntodo + 1)) {
                    kiln__free(todo);
                    return kiln_errorf(r->err, KILN_ERR_NOMEM, "fusion pass %s: out of memory",
                                       r->c->name);
                }
                todo[ntodo++] = v;
                break;
            }
    }
    kiln_status st = KILN_OK;
    kiln_anchor *in = NULL, *out = NULL;
    for (uint32_t t = 0; t < ntodo && st == KILN_OK; t++) {
        kiln_node_id v = todo[t];
        if (!kiln__live(g, v))
            continue;
        uint32_t nin = kiln_node_input_count(g, v), nout = kiln_node_output_count(g, v);
        kiln__free(in);
        kiln__free(out);
        in = kiln__calloc(nin ? nin : 1, sizeof(*in));
        out = kiln__calloc(nout ? nout : 1, sizeof(*out));
        if (!in || !out) {
            st = kiln_errorf(r->err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", r->c->name);
            break;
        }
        bool ok = true;
        for (uint32_t i = 0; i < nin; i++)
            ok = ok && (in[i] = kiln_node_input_peer(g, v, i)).node != 0;
        if (!ok)
            continue;
        for (uint32_t o = 0; o < nout; o++)
            out[o] = (kiln_anchor){v, o};
        kiln_match m = {0};
        m.pattern_index = 0;
        m.nodes = &todo[t];
        m.nnodes = 1;
        m.inputs = in;
        m.ninputs = nin;
        m.outputs = out;
        m.noutputs = nout;
        m.matched = &todo[t];
        m.nmatched = 1;
        m.boundary =
            (kiln_fusion_boundary){sizeof(kiln_fusion_boundary), &todo[t], 1, in, nin, out, nout};
        st = apply_match(r, &m);
    }
    kiln__free(in);
    kiln__free(out);
    kiln__free(todo);
    return st;
}

kiln_status kiln__fusion_run_pass(void *user, kiln_pass_ctx *pc, const kiln_component *comp,
                                  void *inst, kiln_graph *g, bool *changed, kiln_error *err)
{
    (void)user;
    *changed = false;
    frun r = {pc, comp, inst, g, err, false};
    kiln_status st = KILN_OK;
    switch (comp->d.fusion.kind) {
    case KILN_FUSION_PATTERN:
        st = run_pattern(&r);
        break;
    case KILN_FUSION_DECOMPOSE:
        st = run_decompose(&r);
        break;
    case KILN_FUSION_BASE: {
        kiln_pass_result res = comp->d.fusion.run(inst, pc, g);
        if (res == KILN_PASS_CHANGED)
            r.changed = true;
        else if (res != KILN_PASS_NOT_CHANGED) {
            st = kiln_error_code(err) != KILN_OK ? kiln_error_code(err) : KILN_ERR_PASS;
            if (kiln_error_code(err) == KILN_OK)
                kiln_errorf(err, st, "fusion pass %s failed on graph %s", comp->name,
                            kiln_graph_name(g));
        }
        break;
    }
    default:
        st = kiln_errorf(err, KILN_ERR_INVALID, "fusion pass %s: unknown kind %d", comp->name,
                         (int)comp->d.fusion.kind);
    }
    *changed = r.changed;
    return st;
}

/* ---- switches (GE FusionUtils::ParseFusionSwitch, PassOptionUtils) ---------- */

typedef struct fswitch {
    char *name;
    int on; /* 1 on, 0 off */
} fswitch;

typedef struct switches {
    fswitch *opt; /* ge.optimizationSwitch */
    uint32_t nopt, opt_cap;
    fswitch *file; /* ge.fusionSwitchFile GraphFusion entries */
    uint32_t nfile, file_cap;
    int all; /* -1 unset */
} switches;

static void switches_free(switches *s)
{
    for (uint32_t i = 0; i < s->nopt; i++)
        kiln__free(s->opt[i].name);
    for (uint32_t i = 0; i < s->nfile; i++)
        kiln__free(s->file[i].name);
    kiln__free(s->opt);
    kiln__free(s->file);
}

static int onoff(const char *v)
{
    return strcmp(v, "on") == 0 ? 1 : strcmp(v, "off") == 0 ? 0 : -1;
}

static kiln_status add_switch(fswitch **v, uint32_t *n, uint32_t *cap, const char *name, size_t len,
                              int on, kiln_error *err)
{
    if (!KILN_GROW(*v, *cap, *n + 1))
        return kiln_errorf(err, KILN_ERR_NOMEM, "fusion switches: out of memory");
    char *s = kiln__malloc(len + 1);
    if (!s)
        return kiln_errorf(err, KILN_ERR_NOMEM, "fusion switches: out of memory");
    memcpy(s, name, len);
    s[len] = 0;
    (*v)[(*n)++] = (fswitch){s, on};
    return KILN_OK;
}

/* "Name:off;Other:on" (spaces around tokens ignored). */
static kiln_status parse_opt_switch(switches *s, const char *text, kiln_error *err)
{
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *a = p, *b = p + len;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a < b) {
            const char *colon = memchr(a, ':', (size_t)(b - a));
            char val[8] = "";
            const char *v = colon ? colon + 1 : b;
            while (v < b && isspace((unsigned char)*v))
                v++;
            size_t vl = (size_t)(b - v);
            if (vl < sizeof(val)) {
                memcpy(val, v, vl);
                val[vl] = 0;
            }
            const char *ne = colon ? colon : a;
            while (ne > a && isspace((unsigned char)ne[-1]))
                ne--;
            int on = onoff(val);
            if (!colon || ne == a || on < 0)
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "option ge.optimizationSwitch: bad entry '%.*s' (expected "
                                   "Name:on or Name:off, separated by ';')",
                                   (int)(b - a), a);
            kiln_status st =
                add_switch(&s->opt, &s->nopt, &s->opt_cap, a, (size_t)(ne - a), on, err);
            if (st != KILN_OK)
                return st;
        }
        p = end ? end + 1 : p + len;
    }
    return KILN_OK;
}

/* {"Switch": {"GraphFusion": {"Name": "on|off", "ALL": "on|off"}}} */
static kiln_status parse_switch_file(switches *s, const char *path, kiln_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        return kiln_errorf(err, KILN_ERR_INVALID, "ge.fusionSwitchFile %s: %s (line %d)", path,
                           je.text, je.line);
    kiln_status st = KILN_OK;
    json_t *sw = json_object_get(doc, "Switch");
    json_t *gf = sw ? json_object_get(sw, "GraphFusion") : NULL;
    if (!json_is_object(doc) || (sw && !json_is_object(sw)) || (gf && !json_is_object(gf))) {
        st = kiln_errorf(err, KILN_ERR_INVALID,
                         "ge.fusionSwitchFile %s: expected {\"Switch\": {\"GraphFusion\": "
                         "{\"Name\": \"on\"|\"off\"}}}",
                         path);
        goto out;
    }
    const char *key;
    json_t *val;
    if (gf)
        json_object_foreach(gf, key, val)
        {
            int on = json_is_string(val) ? onoff(json_string_value(val)) : -1;
            if (on < 0) {
                st = kiln_errorf(err, KILN_ERR_INVALID,
                                 "ge.fusionSwitchFile %s: Switch.GraphFusion.%s must be \"on\" or "
                                 "\"off\"",
                                 path, key);
                goto out;
            }
            if (strcmp(key, "ALL") == 0)
                s->all = on;
            else if ((st = add_switch(&s->file, &s->nfile, &s->file_cap, key, strlen(key), on,
                                      err)) != KILN_OK)
                goto out;
        }
out:
    json_decref(doc);
    return st;
}

/* ge.optimizationSwitch decides when it names the pass, else the file's
 * entry for the pass, else its ALL, else on. */
static bool pass_enabled(const switches *s, const char *name)
{
    for (uint32_t i = s->nopt; i-- > 0;)
        if (strcmp(s->opt[i].name, name) == 0)
            return s->opt[i].on;
    for (uint32_t i = 0; i < s->nfile; i++)
        if (strcmp(s->file[i].name, name) == 0)
            return s->file[i].on;
    return s->all != 0;
}

/* ---- a GE stage ------------------------------------------------------------- */

static int cmp_comp(const void *a, const void *b)
{
    const kiln_component *x = *(const kiln_component *const *)a;
    const kiln_component *y = *(const kiln_component *const *)b;
    return strcmp(x->name, y->name);
}

/* The op indexes of the graphs a stage's pattern passes ran on (kiln__op_index_build),
 * built on first use: the passes after the first take their candidates from them
 * instead of walking the whole graph each. */
typedef struct ix_cache {
    kiln_graph **g;
    kiln_op_index **ix;
    uint32_t n, cap;
} ix_cache;

static const kiln_op_index *ix_get(ix_cache *xc, kiln_graph *g)
{
    for (uint32_t i = 0; i < xc->n; i++)
        if (xc->g[i] == g)
            return xc->ix[i];
    uint32_t cap = xc->cap;
    if (!KILN_GROW(xc->g, cap, xc->n + 1) || !KILN_GROW(xc->ix, xc->cap, xc->n + 1))
        return NULL; /* the matcher walks the graph */
    kiln_op_index *ix = kiln__op_index_build(g);
    if (ix) {
        xc->g[xc->n] = g;
        xc->ix[xc->n++] = ix;
    }
    return ix;
}

static void ix_drop(ix_cache *xc)
{
    for (uint32_t i = 0; i < xc->n; i++)
        kiln__op_index_free(xc->ix[i]);
    xc->n = 0;
}

/* Run one fusion pass instance over @p g and, when @p g is a root, every
 * subgraph whose owner is still alive (GE skips orphan subgraphs). */
static kiln_status run_everywhere(kiln_pass_ctx *pc, const kiln_component *c, void *inst,
                                  kiln_graph *g, bool *changed, ix_cache *xc, kiln_error *err)
{
    /* a pattern pass's patterns are built once, for the root and its subgraphs */
    kiln_pattern pat;
    bool prebuilt = c->d.fusion.kind == KILN_FUSION_PATTERN;
    if (prebuilt) {
        frun r0 = {pc, c, inst, g, err, false};
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, pc->stage, g, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        kiln_status st = build_pattern(&r0, &pat);
        kiln__activity_leave(prev);
        if (st != KILN_OK)
            return st;
    }
    kiln_status st = KILN_OK;
    uint32_t nsub = kiln_graph_parent(g) ? 0 : kiln_graph_all_subgraph_count(g);
    for (uint32_t i = 0; i <= nsub && st == KILN_OK; i++) {
        kiln_graph *sg = g;
        if (i > 0) {
            if (i - 1 >= kiln_graph_all_subgraph_count(g))
                break;
            sg = kiln_graph_all_subgraph(g, i - 1);
            kiln_graph *parent = kiln_graph_parent(sg);
            if (!parent || !kiln_node_is_live(parent, kiln_graph_parent_node(sg)))
                continue;
        }
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, pc->stage, sg, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        frun r = {pc, c, inst, sg, err, false};
        if (prebuilt)
            st = match_pattern(&r, &pat, ix_get(xc, sg));
        else
            st = kiln__fusion_run_pass(NULL, pc, c, inst, sg, &r.changed, err);
        /* a base pass may change op types: the indexes are rebuilt when next needed */
        if (c->d.fusion.kind == KILN_FUSION_BASE)
            ix_drop(xc);
        kiln__activity_leave(prev);
        *changed = *changed || r.changed;
        if (st == KILN_OK && kiln_graph_oom(g))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", c->name);
    }
    if (prebuilt)
        kiln__pattern_free(&pat);
    return st;
}

kiln_pass_result kiln_fusion_run_stage(kiln_pass_ctx *pc, kiln_graph *g, int32_t stage)
{
    if (!pc || !g)
        return KILN_PASS_FAILED;
    kiln_error *err = pc->err;
    kiln_ctx *ctx = pc->ctx;
    if (kiln__registry_need(ctx, KILN_COMP_FUSION, err) != KILN_OK)
        return KILN_PASS_FAILED;
    const kiln_component **list = NULL;
    uint32_t n = 0, cap = 0;
    switches sw = {.all = -1};
    ix_cache xc = {0};
    kiln_pass_result res = KILN_PASS_FAILED;
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_FUSION || c->d.fusion.stage != stage)
            continue;
        if (!KILN_GROW(list, cap, n + 1)) {
            kiln_errorf(err, KILN_ERR_NOMEM, "fusion executor: out of memory");
            goto out;
        }
        list[n++] = c;
    }
    if (n > 1)
        qsort(list, n, sizeof(*list), cmp_comp);
    const char *opt = kiln_pass_session_option(pc, "ge.optimizationSwitch");
    const char *file = kiln_pass_session_option(pc, "ge.fusionSwitchFile");
    if (n && opt && parse_opt_switch(&sw, opt, err) != KILN_OK)
        goto out;
    if (n && file && file[0] && parse_switch_file(&sw, file, err) != KILN_OK)
        goto out;
    bool changed = false;
    const kiln_component *saved = pc->comp;
    for (uint32_t i = 0; i < n; i++) {
        const kiln_component *c = list[i];
        if (!pass_enabled(&sw, c->name)) {
            kiln_diag(pc, KILN_SEV_DEBUG, "fusion pass %s is switched off", c->name);
            continue;
        }
        kiln_options *o = kiln__options_create(c->d.fusion.options, c->d.fusion.option_count);
        if (!o) {
            kiln_errorf(err, KILN_ERR_NOMEM, "fusion executor: out of memory");
            goto out;
        }
        void *inst = NULL;
        pc->comp = c;
        kiln_status st = KILN_OK;
        if (c->d.fusion.create) {
            kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, pc->stage, NULL, 0);
            kiln_activity *prev = kiln__activity_enter(&a);
            st = c->d.fusion.create(o, err, &inst);
            kiln__activity_leave(prev);
            if (st != KILN_OK)
                kiln_errorf(err, st, "cannot create fusion pass %s (%s)", c->name,
                            kiln_status_str(st));
        }
        static const char *const counters[] = {"matched", "effected"};
        int64_t before[2];
        for (int k = 0; k < 2; k++)
            before[k] = kiln__passctx_stat(pc, pc->stage, c->name, counters[k]);
        if (st == KILN_OK)
            st = run_everywhere(pc, c, inst, g, &changed, &xc, err);
        /* The calling executor pass shows them too ("Name.matched"), so the
         * --report entry of RunBuiltinFusionPasses & co lists its passes. */
        pc->comp = saved;
        for (int k = 0; saved && k < 2; k++) {
            int64_t d = kiln__passctx_stat(pc, pc->stage, c->name, counters[k]) - before[k];
            char key[256];
            snprintf(key, sizeof(key), "%s.%s", c->name, counters[k]);
            if (d)
                kiln_pass_stat_add(pc, key, d);
        }
        if (inst && c->d.fusion.destroy)
            c->d.fusion.destroy(inst);
        kiln__options_destroy(o);
        pc->comp = saved;
        if (st != KILN_OK)
            goto out;
    }
    res = changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
out:
    ix_drop(&xc);
    kiln__free(xc.g);
    kiln__free(xc.ix);
    switches_free(&sw);
    kiln__free(list);
    return res;
}
