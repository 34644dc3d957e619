/*
 * decl_load.c - parse and check declarative fusions (docs/fusion.md).
 *
 * Everything a definition can get wrong is found here, when the plugin
 * loads, so a pass never meets a half-valid definition: unknown keys, an
 * unknown capture or op type, a pattern without outputs or with a node that
 * reaches no output, an edge to an input fed twice, a replacement whose output
 * count differs from the pattern's, a replacement reading a matched node
 * (only pattern inputs cross the boundary) or a later replacement node.
 * Messages: "<file>: <json path>: <reason>".
 */
#include "decl.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECL_MAX_NODES 64
#define DECL_NSTAGES (sizeof(stages) / sizeof(stages[0]))

typedef struct loader {
    kiln_registrar *reg;
    const char *file; /* the file the JSON paths are relative to */
    kiln_error *err;
} loader;

/* A JSON path into @p buf: a path too long for it is cut (it only names the
 * place in a message). */
static void jpath(char *buf, size_t size, const char *fmt, ...) KILN_PRINTF(3, 4);
static void jpath(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

static kiln_status failp(loader *L, const char *path, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status failp(loader *L, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kiln_errorf(L->err, KILN_ERR_INVALID, "%s: %s: %s", L->file, path, msg);
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "null";
    }
}

/* Unknown members of @p obj are errors (x- keys are ignored). */
static kiln_status check_keys(loader *L, const char *path, json_t *obj, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        bool ok = strncmp(k, "x-", 2) == 0;
        for (const char *const *q = keys; *q && !ok; q++)
            ok = strcmp(*q, k) == 0;
        if (!ok) {
            char allowed[256] = "";
            for (const char *const *q = keys; *q; q++)
                snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
                         q == keys ? "" : ", ", *q);
            return failp(L, path, "unknown key \"%s\" (keys: %s)", k, allowed);
        }
    }
    return KILN_OK;
}

static int32_t find_cap(const dfusion *f, const char *name, size_t len)
{
    for (uint32_t i = 0; i < f->npnodes; i++)
        if (strlen(f->pnodes[i].name) == len && strncmp(f->pnodes[i].name, name, len) == 0)
            return (int32_t)i;
    return -1;
}

/* "name" or "name:k" -> name length and k. */
static bool split_ref(const char *s, size_t *len, uint32_t *k)
{
    const char *c = strrchr(s, ':');
    *k = 0;
    *len = strlen(s);
    if (!c)
        return *len > 0;
    char *end;
    errno = 0;
    unsigned long v = strtoul(c + 1, &end, 10);
    if (c[1] == 0 || *end || errno || v > 1024 || c == s)
        return false;
    *len = (size_t)(c - s);
    *k = (uint32_t)v;
    return true;
}

/* A tensor of the pattern: "cap" or "cap:k". */
static kiln_status parse_tref(loader *L, const dfusion *f, const char *path, json_t *v, dref *out)
{
    if (!json_is_string(v))
        return failp(L, path, "expected a tensor reference \"capture[:output]\", got %s", jtype(v));
    const char *s = json_string_value(v);
    size_t len;
    if (!split_ref(s, &len, &out->out))
        return failp(L, path, "bad tensor reference \"%s\" (expected \"capture[:output]\")", s);
    if ((out->cap = find_cap(f, s, len)) < 0)
        return failp(L, path, "unknown capture \"%.*s\" (not a pattern input or node)", (int)len,
                     s);
    if (f->pnodes[out->cap].is_input && out->out != 0)
        return failp(L, path, "pattern input \"%s\" has one tensor (output 0)",
                     f->pnodes[out->cap].name);
    return KILN_OK;
}

static bool valid_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s == ':' || *s == ' ' || *s == '-' || *s == '>' || *s == '.')
            return false;
    return true;
}

static kiln_status add_pnode(loader *L, dfusion *f, const char *path, const char *name,
                             const char *op, bool is_input)
{
    if (!valid_name(name))
        return failp(L, path,
                     "bad capture name \"%s\" (non-empty, without ':', '.', '-', '>' "
                     "or spaces)",
                     name);
    if (find_cap(f, name, strlen(name)) >= 0)
        return failp(L, path, "capture \"%s\" is declared twice", name);
    if (f->npnodes >= DECL_MAX_NODES)
        return failp(L, path, "more than %d pattern nodes", DECL_MAX_NODES);
    dpnode *n = &f->pnodes[f->npnodes];
    n->name = dupstr(name);
    n->op = dupstr(op);
    n->is_input = is_input;
    n->input_index = is_input ? (int32_t)f->ninputs : -1;
    if (!n->name || !n->op)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    f->npnodes++;
    if (is_input)
        f->ninputs++;
    return KILN_OK;
}

static kiln_status add_pedge(loader *L, dfusion *f, const char *path, dref src, int32_t dst,
                             uint32_t di)
{
    if (f->pnodes[dst].is_input)
        return failp(L, path, "pattern input \"%s\" cannot be fed (it is the boundary)",
                     f->pnodes[dst].name);
    for (uint32_t i = 0; i < f->npedges; i++)
        if (f->pedges[i].dst == dst && f->pedges[i].di == di)
            return failp(L, path, "input %u of \"%s\" is fed twice", di, f->pnodes[dst].name);
    if (src.cap == dst)
        return failp(L, path, "\"%s\" feeds itself", f->pnodes[dst].name);
    dpedge *e = realloc(f->pedges, (f->npedges + 1) * sizeof(*e));
    if (!e)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    f->pedges = e;
    e[f->npedges++] = (dpedge){src.cap, dst, src.out, di};
    return KILN_OK;
}

/* "src[:k] -> dst[:i]" */
static kiln_status parse_edge(loader *L, dfusion *f, const char *path, json_t *v)
{
    if (!json_is_string(v))
        return failp(L, path, "expected an edge \"src[:output] -> dst[:input]\", got %s", jtype(v));
    const char *s = json_string_value(v);
    const char *arrow = strstr(s, "->");
    char a[128], b[128];
    if (!arrow || (size_t)(arrow - s) >= sizeof(a) || strlen(arrow + 2) >= sizeof(b))
        return failp(L, path, "bad edge \"%s\" (expected \"src[:output] -> dst[:input]\")", s);
    size_t na = (size_t)(arrow - s);
    memcpy(a, s, na);
    a[na] = 0;
    snprintf(b, sizeof(b), "%s", arrow + 2);
    char *pa = a, *pb = b;
    while (*pa == ' ')
        pa++;
    while (*pb == ' ')
        pb++;
    for (char *e = pa + strlen(pa); e > pa && e[-1] == ' ';)
        *--e = 0;
    for (char *e = pb + strlen(pb); e > pb && e[-1] == ' ';)
        *--e = 0;
    json_t *ja = json_string(pa);
    dref src, dst;
    kiln_status st = parse_tref(L, f, path, ja, &src);
    json_decref(ja);
    if (st != KILN_OK)
        return st;
    size_t len;
    if (!split_ref(pb, &len, &dst.out))
        return failp(L, path, "bad edge destination \"%s\"", pb);
    if ((dst.cap = find_cap(f, pb, len)) < 0)
        return failp(L, path, "unknown capture \"%.*s\"", (int)len, pb);
    return add_pedge(L, f, path, src, dst.cap, dst.out);
}

static const struct {
    const char *name;
    int32_t stage;
} stages[] = {
    {"before_infer_shape", KILN_FUSION_STAGE_BEFORE_INFER_SHAPE},
    {"after_infer_shape", KILN_FUSION_STAGE_AFTER_INFER_SHAPE},
    {"after_builtin_fusion", KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION},
    {"after_origin_graph_optimize", KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE},
    {"builtin", KILN_FUSION_STAGE_BUILTIN},
};

static kiln_status parse_pattern(loader *L, dfusion *f, const char *path, json_t *pat)
{
    static const char *const keys[] = {"inputs", "nodes", "edges", "outputs", NULL};
    char p[256];
    if (!json_is_object(pat))
        return failp(L, path, "expected an object, got %s", jtype(pat));
    kiln_status st = check_keys(L, path, pat, keys);
    if (st != KILN_OK)
        return st;
    if (!(f->pnodes = calloc(DECL_MAX_NODES, sizeof(dpnode))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    json_t *inputs = json_object_get(pat, "inputs"), *nodes = json_object_get(pat, "nodes");
    json_t *edges = json_object_get(pat, "edges"), *outputs = json_object_get(pat, "outputs");
    size_t i;
    json_t *v;
    if (inputs && !json_is_array(inputs))
        return failp(L, path, "\"inputs\": expected an array of names, got %s", jtype(inputs));
    json_array_foreach(inputs, i, v)
    {
        jpath(p, sizeof(p), "%s.inputs[%zu]", path, i);
        if (!json_is_string(v))
            return failp(L, p, "expected a name, got %s", jtype(v));
        if ((st = add_pnode(L, f, p, json_string_value(v), "Data", true)) != KILN_OK)
            return st;
    }
    if (!json_is_array(nodes) || json_array_size(nodes) == 0)
        return failp(L, path, "\"nodes\": expected a non-empty array of {\"name\", \"op\"}");
    static const char *const nkeys[] = {"name", "op", "inputs", NULL};
    json_array_foreach(nodes, i, v)
    {
        jpath(p, sizeof(p), "%s.nodes[%zu]", path, i);
        if (!json_is_object(v))
            return failp(L, p, "expected an object {\"name\", \"op\"}, got %s", jtype(v));
        if ((st = check_keys(L, p, v, nkeys)) != KILN_OK)
            return st;
        json_t *jn = json_object_get(v, "name"), *jo = json_object_get(v, "op");
        if (!json_is_string(jn) || !json_is_string(jo))
            return failp(L, p, "\"name\" and \"op\" (strings) are required");
        const char *op = json_string_value(jo);
        if (strcmp(op, "Data") == 0)
            return failp(L, p, "op Data: list boundary inputs in \"inputs\"");
        if (!kiln_registrar_op_known(L->reg, op))
            return failp(L, p, "unknown op \"%s\" (no loaded op set or engine knows it)", op);
        if ((st = add_pnode(L, f, p, json_string_value(jn), op, false)) != KILN_OK)
            return st;
    }
    /* node "inputs" after every node exists (a node may read a later one) */
    json_array_foreach(nodes, i, v)
    {
        json_t *ins = json_object_get(v, "inputs");
        if (!ins)
            continue;
        jpath(p, sizeof(p), "%s.nodes[%zu].inputs", path, i);
        if (!json_is_array(ins))
            return failp(L, p, "expected an array of tensor references, got %s", jtype(ins));
        int32_t dst = find_cap(f, json_string_value(json_object_get(v, "name")),
                               strlen(json_string_value(json_object_get(v, "name"))));
        size_t k;
        json_t *r;
        json_array_foreach(ins, k, r)
        {
            char pk[288];
            jpath(pk, sizeof(pk), "%s[%zu]", p, k);
            dref src;
            if ((st = parse_tref(L, f, pk, r, &src)) != KILN_OK ||
                (st = add_pedge(L, f, pk, src, dst, (uint32_t)k)) != KILN_OK)
                return st;
        }
    }
    if (edges && !json_is_array(edges))
        return failp(L, path, "\"edges\": expected an array, got %s", jtype(edges));
    json_array_foreach(edges, i, v)
    {
        jpath(p, sizeof(p), "%s.edges[%zu]", path, i);
        if ((st = parse_edge(L, f, p, v)) != KILN_OK)
            return st;
    }
    if (!json_is_array(outputs) || json_array_size(outputs) == 0) {
        jpath(p, sizeof(p), "%s.outputs", path);
        return failp(L, outputs ? p : path,
                     "the pattern has no output (\"outputs\": [\"capture[:output]\", ...])");
    }
    f->noutputs = (uint32_t)json_array_size(outputs);
    if (!(f->outputs = calloc(f->noutputs, sizeof(dref))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    json_array_foreach(outputs, i, v)
    {
        jpath(p, sizeof(p), "%s.outputs[%zu]", path, i);
        if ((st = parse_tref(L, f, p, v, &f->outputs[i])) != KILN_OK)
            return st;
        if (f->pnodes[f->outputs[i].cap].is_input)
            return failp(L, p, "pattern input \"%s\" cannot be a pattern output",
                         f->pnodes[f->outputs[i].cap].name);
        for (size_t j = 0; j < i; j++)
            if (f->outputs[j].cap == f->outputs[i].cap && f->outputs[j].out == f->outputs[i].out)
                return failp(L, p, "output listed twice");
    }
    /* every node reaches an output (the matcher walks back from the outputs);
     * every pattern input feeds a node */
    bool reach[DECL_MAX_NODES] = {false};
    for (uint32_t o = 0; o < f->noutputs; o++)
        reach[f->outputs[o].cap] = true;
    for (bool grew = true; grew;) {
        grew = false;
        for (uint32_t e = 0; e < f->npedges; e++)
            if (reach[f->pedges[e].dst] && !reach[f->pedges[e].src])
                reach[f->pedges[e].src] = grew = true;
    }
    for (uint32_t n = 0; n < f->npnodes; n++) {
        if (reach[n])
            continue;
        return failp(L, path, "%s \"%s\" %s", f->pnodes[n].is_input ? "pattern input" : "node",
                     f->pnodes[n].name,
                     f->pnodes[n].is_input ? "feeds no pattern node on the way to an output"
                                           : "does not reach a pattern output");
    }
    return KILN_OK;
}

/* ---- requirements ----------------------------------------------------------------- */

static kiln_status parse_dtypes(loader *L, const char *path, json_t *v, uint32_t *mask)
{
    json_t *one = v;
    size_t i = 0;
    *mask = 0;
    if (json_is_array(v) && json_array_size(v) == 0)
        return failp(L, path, "empty dtype list");
    do {
        if (json_is_array(v))
            one = json_array_get(v, i);
        kiln_dtype dt;
        if (!json_is_string(one) || !kiln_dtype_parse(json_string_value(one), &dt))
            return failp(L, path, "expected a dtype name (float32, int64, ...) or a list of them");
        *mask |= 1u << dt;
    } while (json_is_array(v) && ++i < json_array_size(v));
    return KILN_OK;
}

static kiln_status parse_ints(loader *L, const char *path, json_t *v, bool nulls, dreq *q)
{
    json_t *one = v;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!(q->list = calloc(n ? n : 1, sizeof(int64_t))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    q->nlist = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        if (json_is_array(v))
            one = json_array_get(v, i);
        if (nulls && json_is_null(one))
            q->list[i] = -2;
        else if (json_is_integer(one) && json_integer_value(one) >= 0)
            q->list[i] = json_integer_value(one);
        else
            return failp(L, path, "expected %s",
                         nulls ? "a list of dims (integers >= 0 or null)"
                               : "an integer >= 0 or a list of them");
    }
    return KILN_OK;
}

/* "capture.attribute" */
static kiln_status parse_attr_ref(loader *L, const dfusion *f, const char *path, json_t *v,
                                  int32_t *cap, char **key)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    const char *dot = s ? strchr(s, '.') : NULL;
    if (!dot || dot == s || !dot[1])
        return failp(L, path, "expected \"capture.attribute\"");
    if ((*cap = find_cap(f, s, (size_t)(dot - s))) < 0)
        return failp(L, path, "unknown capture \"%.*s\"", (int)(dot - s), s);
    if (f->pnodes[*cap].is_input)
        return failp(L, path,
                     "\"%s\" is a pattern input: it matches any producer, whose "
                     "attributes are not part of the match",
                     f->pnodes[*cap].name);
    if (!(*key = dupstr(dot + 1)))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

static kiln_status parse_req(loader *L, dfusion *f, const char *path, json_t *v, dreq *q)
{
    static const char *const keys[] = {
        "tensor", "dtype",       "rank",  "shape", "same_dtype", "same_shape", "attr",
        "equals", "equals_attr", "const", "value", "tolerance",  NULL};
    char p[288];
    if (!json_is_object(v))
        return failp(L, path, "expected an object, got %s", jtype(v));
    kiln_status st = check_keys(L, path, v, keys);
    if (st != KILN_OK)
        return st;
    json_t *t = json_object_get(v, "tensor"), *a = json_object_get(v, "attr");
    json_t *c = json_object_get(v, "const");
    if (!!t + !!a + !!c != 1)
        return failp(L, path, "a requirement names one of \"tensor\", \"attr\" or \"const\"");
    q->node = q->node2 = -1;
    if (t) {
        const char *which[] = {"dtype", "rank", "shape", "same_dtype", "same_shape"};
        int found = -1;
        for (int k = 0; k < 5; k++) {
            if (!json_object_get(v, which[k]))
                continue;
            if (found >= 0)
                return failp(L, path, "one check per requirement (\"%s\" and \"%s\")", which[found],
                             which[k]);
            found = k;
        }
        jpath(p, sizeof(p), "%s.tensor", path);
        if ((st = parse_tref(L, f, p, t, &q->t)) != KILN_OK)
            return st;
        if (found < 0)
            return failp(L, path,
                         "a tensor requirement needs dtype, rank, shape, same_dtype "
                         "or same_shape");
        json_t *w = json_object_get(v, which[found]);
        jpath(p, sizeof(p), "%s.%s", path, which[found]);
        switch (found) {
        case 0:
            q->kind = DREQ_DTYPE;
            return parse_dtypes(L, p, w, &q->dtype_mask);
        case 1:
            q->kind = DREQ_RANK;
            return parse_ints(L, p, w, false, q);
        case 2:
            q->kind = DREQ_SHAPE;
            if (!json_is_array(w))
                return failp(L, p, "expected a list of dims (integers >= 0 or null)");
            return parse_ints(L, p, w, true, q);
        default:
            q->kind = found == 3 ? DREQ_SAME_DTYPE : DREQ_SAME_SHAPE;
            return parse_tref(L, f, p, w, &q->t2);
        }
    }
    if (a) {
        jpath(p, sizeof(p), "%s.attr", path);
        if ((st = parse_attr_ref(L, f, p, a, &q->node, &q->attr)) != KILN_OK)
            return st;
        json_t *eq = json_object_get(v, "equals"), *eqa = json_object_get(v, "equals_attr");
        if (!eq == !eqa)
            return failp(L, path,
                         "an attribute requirement has \"equals\" (a value) or "
                         "\"equals_attr\" (\"capture.attribute\")");
        if (eq) {
            if (json_is_null(eq) || json_is_object(eq))
                return failp(L, path, "\"equals\": expected a number, bool, string or list");
            q->kind = DREQ_ATTR_EQ;
            q->literal = json_incref(eq);
            return KILN_OK;
        }
        q->kind = DREQ_ATTR_EQ_ATTR;
        jpath(p, sizeof(p), "%s.equals_attr", path);
        return parse_attr_ref(L, f, p, eqa, &q->node2, &q->attr2);
    }
    jpath(p, sizeof(p), "%s.const", path);
    if ((st = parse_tref(L, f, p, c, &q->t)) != KILN_OK)
        return st;
    const char *op = f->pnodes[q->t.cap].op;
    if (strcmp(op, "Const") != 0 && strcmp(op, "Constant") != 0)
        return failp(L, p, "\"%s\" is a %s node, not a pattern Const", f->pnodes[q->t.cap].name,
                     f->pnodes[q->t.cap].is_input ? "input" : op);
    json_t *val = json_object_get(v, "value"), *tol = json_object_get(v, "tolerance");
    if (!json_is_number(val))
        return failp(L, path, "a const requirement needs \"value\" (a number)");
    if (tol && (!json_is_number(tol) || json_number_value(tol) < 0))
        return failp(L, path, "\"tolerance\": expected a number >= 0");
    q->kind = DREQ_CONST_VALUE;
    q->value = json_number_value(val);
    q->tolerance = tol ? json_number_value(tol) : 0;
    return KILN_OK;
}

/* ---- replacement ------------------------------------------------------------------ */

/* A replacement input: a pattern input name, or "node[:k]" of an earlier replacement node. */
static kiln_status parse_rin(loader *L, const dfusion *f, const char *path, json_t *v,
                             uint32_t upto, drin *out)
{
    if (!json_is_string(v))
        return failp(L, path, "expected a pattern input or \"replacement_node[:output]\", got %s",
                     jtype(v));
    const char *s = json_string_value(v);
    size_t len;
    uint32_t k;
    if (!split_ref(s, &len, &k))
        return failp(L, path, "bad reference \"%s\"", s);
    for (uint32_t i = 0; i < f->nrnodes; i++) {
        if (strlen(f->rnodes[i].name) != len || strncmp(f->rnodes[i].name, s, len) != 0)
            continue;
        if (i >= upto)
            return failp(L, path,
                         "replacement node \"%s\" is defined later (list nodes in "
                         "dependency order)",
                         f->rnodes[i].name);
        *out = (drin){false, i, k};
        return KILN_OK;
    }
    int32_t c = find_cap(f, s, len);
    if (c < 0)
        return failp(L, path,
                     "unknown capture \"%.*s\" (not a pattern input or replacement "
                     "node)",
                     (int)len, s);
    if (!f->pnodes[c].is_input)
        return failp(L, path,
                     "\"%s\" is a matched node, deleted by the fusion: a replacement "
                     "reads pattern inputs only",
                     f->pnodes[c].name);
    if (k != 0)
        return failp(L, path, "pattern input \"%s\" has one tensor (output 0)", f->pnodes[c].name);
    *out = (drin){true, (uint32_t)f->pnodes[c].input_index, 0};
    return KILN_OK;
}

static kiln_status parse_attr_value(loader *L, const dfusion *f, const char *path, const char *key,
                                    json_t *v, dattr *a)
{
    if (!(a->key = dupstr(key)))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    a->cap = -1;
    if (!json_is_object(v)) {
        if (json_is_null(v))
            return failp(L, path, "null is not an attribute value");
        if (json_is_array(v)) {
            size_t i;
            json_t *e;
            int kinds = 0; /* 1 int, 2 real, 4 string, 8 bool */
            json_array_foreach(v, i, e)
            {
                kinds |= json_is_integer(e)   ? 1
                         : json_is_real(e)    ? 2
                         : json_is_string(e)  ? 4
                         : json_is_boolean(e) ? 8
                                              : 16;
            }
            if (kinds & 16 || (kinds & 4 && kinds != 4) || (kinds & 8 && kinds != 8))
                return failp(L, path,
                             "a list attribute holds numbers, strings or bools, one "
                             "kind");
        }
        a->kind = DATTR_LITERAL;
        a->literal = json_incref(v);
        return KILN_OK;
    }
    static const char *const keys[] = {"from", "scalar", "dtype", "tensor", "optional", NULL};
    kiln_status st = check_keys(L, path, v, keys);
    if (st != KILN_OK)
        return st;
    json_t *from = json_object_get(v, "from"), *sc = json_object_get(v, "scalar");
    json_t *dt = json_object_get(v, "dtype"), *tn = json_object_get(v, "tensor");
    json_t *opt = json_object_get(v, "optional");
    if (!!from + !!sc + !!dt + !!tn != 1)
        return failp(L, path,
                     "an attribute object has one of \"from\", \"scalar\", \"dtype\", "
                     "\"tensor\"");
    if (opt && (!json_is_boolean(opt) || !from))
        return failp(L, path, "\"optional\" (bool) goes with \"from\"");
    char p[288];
    if (from) {
        a->kind = DATTR_FROM;
        a->optional = json_is_true(opt);
        jpath(p, sizeof(p), "%s.from", path);
        return parse_attr_ref(L, f, p, from, &a->cap, &a->from_key);
    }
    if (sc) {
        a->kind = DATTR_SCALAR;
        jpath(p, sizeof(p), "%s.scalar", path);
        dref r;
        if ((st = parse_tref(L, f, p, sc, &r)) != KILN_OK)
            return st;
        const char *op = f->pnodes[r.cap].op;
        if (strcmp(op, "Const") != 0 && strcmp(op, "Constant") != 0)
            return failp(L, p, "\"%s\" is not a pattern Const", f->pnodes[r.cap].name);
        a->cap = r.cap;
        return KILN_OK;
    }
    if (dt) {
        a->kind = DATTR_DTYPE;
        if (!json_is_string(dt) || !kiln_dtype_parse(json_string_value(dt), &a->dtype))
            return failp(L, path, "\"dtype\": expected a dtype name");
        return KILN_OK;
    }
    /* tensor: {"dtype": "float32", "shape": [..], "data": [..]} */
    json_t *tdt = json_object_get(tn, "dtype"), *tsh = json_object_get(tn, "shape");
    json_t *tdata = json_object_get(tn, "data");
    kiln_dtype tt;
    if (!json_is_object(tn) || !json_is_string(tdt) ||
        !kiln_dtype_parse(json_string_value(tdt), &tt) || tt == KILN_DT_STRING ||
        tt == KILN_DT_FLOAT16 || tt == KILN_DT_BFLOAT16 || !json_is_array(tsh) ||
        !json_is_array(tdata))
        return failp(L, path,
                     "\"tensor\": expected {\"dtype\", \"shape\", \"data\"} (dtype: not string, "
                     "float16 or bfloat16)");
    int64_t numel = 1;
    size_t i;
    json_t *e;
    json_array_foreach(tsh, i, e)
    {
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            !kiln_mul_i64(numel, json_integer_value(e), &numel))
            return failp(L, path, "\"tensor\": bad shape");
    }
    if ((int64_t)json_array_size(tdata) != numel)
        return failp(L, path, "\"tensor\": %zu values for %lld elements", json_array_size(tdata),
                     (long long)numel);
    json_array_foreach(tdata, i, e)
    {
        if (!json_is_number(e) && !json_is_boolean(e))
            return failp(L, path, "\"tensor\": data holds numbers");
    }
    a->kind = DATTR_TENSOR;
    a->literal = json_incref(tn);
    return KILN_OK;
}

static kiln_status parse_rnode(loader *L, dfusion *f, const char *path, json_t *v, uint32_t idx)
{
    static const char *const keys[] = {"name",  "op",         "inputs", "outputs",
                                       "attrs", "copy_attrs", "like",   NULL};
    if (!json_is_object(v))
        return failp(L, path, "expected an object, got %s", jtype(v));
    kiln_status st = check_keys(L, path, v, keys);
    if (st != KILN_OK)
        return st;
    drnode *n = &f->rnodes[idx];
    n->copy_attrs = -1;
    n->like.cap = -1;
    json_t *jn = json_object_get(v, "name"), *jo = json_object_get(v, "op");
    if (jn && (!json_is_string(jn) || !valid_name(json_string_value(jn))))
        return failp(L, path, "\"name\": expected a name without ':', '.', '-', '>' or spaces");
    if (!json_is_string(jo) || !json_string_value(jo)[0])
        return failp(L, path, "\"op\" (a string) is required");
    const char *op = json_string_value(jo);
    if (strcmp(op, "Data") == 0 || strcmp(op, "NetOutput") == 0)
        return failp(L, path, "op %s: the replacement's inputs and outputs are implicit", op);
    if (!kiln_registrar_op_known(L->reg, op))
        return failp(L, path, "unknown op \"%s\" (no loaded op set or engine knows it)", op);
    char nm[32];
    snprintf(nm, sizeof(nm), "fused%u", idx);
    free(n->name);
    n->name = dupstr(jn ? json_string_value(jn) : idx == 0 && f->nrnodes == 1 ? "fused" : nm);
    n->op = dupstr(op);
    if (!n->name || !n->op)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < idx; i++)
        if (strcmp(f->rnodes[i].name, n->name) == 0)
            return failp(L, path, "replacement node \"%s\" is declared twice", n->name);
    char p[288];
    json_t *ins = json_object_get(v, "inputs");
    if (ins && !json_is_array(ins))
        return failp(L, path, "\"inputs\": expected an array, got %s", jtype(ins));
    n->ninputs = (uint32_t)json_array_size(ins);
    if (n->ninputs && !(n->inputs = calloc(n->ninputs, sizeof(drin))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(ins, i, e)
    {
        jpath(p, sizeof(p), "%s.inputs[%zu]", path, i);
        if ((st = parse_rin(L, f, p, e, idx, &n->inputs[i])) != KILN_OK)
            return st;
    }
    json_t *no = json_object_get(v, "outputs");
    if (no && (!json_is_integer(no) || json_integer_value(no) < 1 || json_integer_value(no) > 64))
        return failp(L, path, "\"outputs\": expected an output count in [1, 64]");
    n->noutputs = no ? (uint32_t)json_integer_value(no) : 1;
    json_t *ca = json_object_get(v, "copy_attrs");
    if (ca) {
        jpath(p, sizeof(p), "%s.copy_attrs", path);
        dref r;
        if ((st = parse_tref(L, f, p, ca, &r)) != KILN_OK)
            return st;
        if (f->pnodes[r.cap].is_input)
            return failp(L, p, "\"%s\" is a pattern input (no attributes to copy)",
                         f->pnodes[r.cap].name);
        n->copy_attrs = r.cap;
    }
    json_t *like = json_object_get(v, "like");
    if (like) {
        jpath(p, sizeof(p), "%s.like", path);
        if ((st = parse_tref(L, f, p, like, &n->like)) != KILN_OK)
            return st;
    }
    json_t *attrs = json_object_get(v, "attrs");
    if (attrs && !json_is_object(attrs))
        return failp(L, path, "\"attrs\": expected an object, got %s", jtype(attrs));
    if (json_object_size(attrs) && !(n->attrs = calloc(json_object_size(attrs), sizeof(dattr))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    const char *k;
    json_object_foreach(attrs, k, e)
    {
        jpath(p, sizeof(p), "%s.attrs.%s", path, k);
        dattr *a = &n->attrs[n->nattrs++];
        if ((st = parse_attr_value(L, f, p, k, e, a)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status parse_replacement(loader *L, dfusion *f, const char *path, json_t *v)
{
    if (!json_is_object(v))
        return failp(L, path, "expected an object, got %s", jtype(v));
    json_t *nodes = json_object_get(v, "nodes");
    char p[288];
    kiln_status st;
    json_t *outs = NULL;
    if (nodes) { /* a small graph */
        static const char *const keys[] = {"nodes", "outputs", NULL};
        if ((st = check_keys(L, path, v, keys)) != KILN_OK)
            return st;
        if (!json_is_array(nodes) || json_array_size(nodes) == 0 ||
            json_array_size(nodes) > DECL_MAX_NODES)
            return failp(L, path, "\"nodes\": expected an array of 1 to %d nodes", DECL_MAX_NODES);
        f->nrnodes = (uint32_t)json_array_size(nodes);
        if (!(f->rnodes = calloc(f->nrnodes, sizeof(drnode))))
            return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        /* names first, so "defined later" can be told from "unknown" */
        for (uint32_t i = 0; i < f->nrnodes; i++) {
            json_t *jn = json_object_get(json_array_get(nodes, i), "name");
            char nm[32];
            snprintf(nm, sizeof(nm), "fused%u", i);
            f->rnodes[i].name = dupstr(json_is_string(jn) ? json_string_value(jn) : nm);
            if (!f->rnodes[i].name)
                return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        }
        for (uint32_t i = 0; i < f->nrnodes; i++) {
            jpath(p, sizeof(p), "%s.nodes[%u]", path, i);
            if ((st = parse_rnode(L, f, p, json_array_get(nodes, i), i)) != KILN_OK)
                return st;
        }
        outs = json_object_get(v, "outputs");
        if (!json_is_array(outs))
            return failp(L, path,
                         "\"outputs\": expected an array of \"node[:output]\" (one per "
                         "pattern output)");
    } else { /* one node */
        f->nrnodes = 1;
        if (!(f->rnodes = calloc(1, sizeof(drnode))))
            return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
        if ((st = parse_rnode(L, f, path, v, 0)) != KILN_OK)
            return st;
    }
    f->routputs = calloc(f->noutputs, sizeof(drin));
    if (!f->routputs)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    if (!outs) {
        if (f->rnodes[0].noutputs != f->noutputs)
            return failp(L, path,
                         "replacement arity mismatch: the pattern has %u output%s, op "
                         "%s gives %u (set \"outputs\")",
                         f->noutputs, f->noutputs == 1 ? "" : "s", f->rnodes[0].op,
                         f->rnodes[0].noutputs);
        for (uint32_t j = 0; j < f->noutputs; j++)
            f->routputs[j] = (drin){false, 0, j};
        return KILN_OK;
    }
    jpath(p, sizeof(p), "%s.outputs", path);
    if (json_array_size(outs) != f->noutputs)
        return failp(L, p,
                     "replacement arity mismatch: the pattern has %u output%s, the "
                     "replacement %zu",
                     f->noutputs, f->noutputs == 1 ? "" : "s", json_array_size(outs));
    size_t i;
    json_t *e;
    json_array_foreach(outs, i, e)
    {
        char pi[320];
        jpath(pi, sizeof(pi), "%s[%zu]", p, i);
        if ((st = parse_rin(L, f, pi, e, f->nrnodes, &f->routputs[i])) != KILN_OK)
            return st;
        if (f->routputs[i].from_input)
            return failp(L, pi,
                         "a replacement output is a replacement node's output, not a "
                         "pattern input");
        if (f->routputs[i].out >= f->rnodes[f->routputs[i].index].noutputs)
            return failp(L, pi, "node \"%s\" has %u output(s)",
                         f->rnodes[f->routputs[i].index].name,
                         f->rnodes[f->routputs[i].index].noutputs);
    }
    return KILN_OK;
}

static kiln_status check_rnode_refs(loader *L, const dfusion *f, const char *path)
{
    for (uint32_t i = 0; i < f->nrnodes; i++)
        for (uint32_t k = 0; k < f->rnodes[i].ninputs; k++) {
            const drin *r = &f->rnodes[i].inputs[k];
            if (!r->from_input && r->out >= f->rnodes[r->index].noutputs)
                return failp(L, path,
                             "replacement node \"%s\" input %u: \"%s\" has %u "
                             "output(s)",
                             f->rnodes[i].name, k, f->rnodes[r->index].name,
                             f->rnodes[r->index].noutputs);
        }
    return KILN_OK;
}

static kiln_status parse_fusion(loader *L, dset *s, const char *path, json_t *v, dfusion *f)
{
    static const char *const keys[] = {"name",    "summary",  "stage",       "commutative",
                                       "pattern", "requires", "replacement", NULL};
    char p[256];
    if (!json_is_object(v))
        return failp(L, path, "a fusion is an object, got %s", jtype(v));
    kiln_status st = check_keys(L, path, v, keys);
    if (st != KILN_OK)
        return st;
    json_t *jn = json_object_get(v, "name");
    if (!json_is_string(jn) || !json_string_value(jn)[0])
        return failp(L, path, "\"name\" (the pass name, a string) is required");
    for (uint32_t i = 0; i < s->n; i++)
        if (strcmp(s->f[i].name, json_string_value(jn)) == 0)
            return failp(L, path, "fusion %s is declared twice", json_string_value(jn));
    f->name = dupstr(json_string_value(jn));
    json_t *js = json_object_get(v, "summary");
    if (js && !json_is_string(js))
        return failp(L, path, "\"summary\": expected a string");
    f->summary = dupstr(js ? json_string_value(js) : "declarative fusion");
    char origin[600];
    jpath(origin, sizeof(origin), "%s: %s", L->file, path);
    f->origin = dupstr(origin);
    if (!f->name || !f->summary || !f->origin)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    json_t *jst = json_object_get(v, "stage");
    f->stage = KILN_FUSION_STAGE_AFTER_INFER_SHAPE;
    if (jst) {
        size_t k = 0;
        while (k < DECL_NSTAGES &&
               (!json_is_string(jst) || strcmp(stages[k].name, json_string_value(jst)) != 0))
            k++;
        if (k == DECL_NSTAGES)
            return failp(L, path,
                         "\"stage\": expected one of before_infer_shape, "
                         "after_infer_shape, after_builtin_fusion, "
                         "after_origin_graph_optimize, builtin");
        f->stage = stages[k].stage;
    }
    json_t *jc = json_object_get(v, "commutative");
    if (jc && !json_is_boolean(jc))
        return failp(L, path, "\"commutative\": expected a bool");
    f->commutative = json_is_true(jc);
    json_t *pat = json_object_get(v, "pattern");
    if (!pat)
        return failp(L, path, "\"pattern\" is required");
    jpath(p, sizeof(p), "%s.pattern", path);
    if ((st = parse_pattern(L, f, p, pat)) != KILN_OK)
        return st;
    json_t *req = json_object_get(v, "requires");
    if (req && !json_is_array(req))
        return failp(L, path, "\"requires\": expected an array");
    f->nreqs = (uint32_t)json_array_size(req);
    if (f->nreqs && !(f->reqs = calloc(f->nreqs, sizeof(dreq))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < f->nreqs; i++) {
        jpath(p, sizeof(p), "%s.requires[%u]", path, i);
        if ((st = parse_req(L, f, p, json_array_get(req, i), &f->reqs[i])) != KILN_OK)
            return st;
    }
    json_t *rep = json_object_get(v, "replacement");
    if (!rep)
        return failp(L, path, "\"replacement\" is required");
    jpath(p, sizeof(p), "%s.replacement", path);
    if ((st = parse_replacement(L, f, p, rep)) != KILN_OK ||
        (st = check_rnode_refs(L, f, p)) != KILN_OK)
        return st;
    return KILN_OK;
}

static kiln_status parse_list(loader *L, dset *s, const char *path, json_t *arr)
{
    if (!json_is_array(arr))
        return failp(L, path, "expected an array of fusions, got %s", jtype(arr));
    size_t n = json_array_size(arr);
    dfusion *nf = realloc(s->f, (s->n + n + 1) * sizeof(dfusion));
    if (!nf)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    s->f = nf;
    for (size_t i = 0; i < n; i++) {
        char p[256];
        jpath(p, sizeof(p), "%s[%zu]", path, i);
        memset(&s->f[s->n], 0, sizeof(dfusion));
        kiln_status st = parse_fusion(L, s, p, json_array_get(arr, i), &s->f[s->n]);
        s->n++; /* freed with the set either way */
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status decl_load(kiln_registrar *r, const char *config, const char *file, const char *jpath,
                      dset *out, kiln_error *err)
{
    memset(out, 0, sizeof(*out));
    loader L = {r, file ? file : "(no manifest)", err};
    json_error_t je;
    json_t *root = json_loads(config, JSON_DECODE_ANY, &je);
    if (!root)
        return failp(&L, jpath, "%s", je.text);
    kiln_status st = KILN_OK;
    if (!json_is_object(root)) {
        st = failp(&L, jpath, "expected an object {\"fusions\": [...] or \"file.json\"}, got %s",
                   jtype(root));
        goto done;
    }
    static const char *const keys[] = {"fusions", NULL};
    if ((st = check_keys(&L, jpath, root, keys)) != KILN_OK)
        goto done;
    json_t *fus = json_object_get(root, "fusions");
    char p[256];
    snprintf(p, sizeof(p), "%.200s.fusions", jpath);
    if (!fus) {
        st = failp(&L, jpath, "\"fusions\" is required (an array, or a file name)");
    } else if (json_is_string(fus)) {
        /* a file, relative to the manifest's directory */
        char path[PATH_MAX];
        const char *name = json_string_value(fus);
        const char *slash = file ? strrchr(file, '/') : NULL;
        if (name[0] == '/' || !slash)
            snprintf(path, sizeof(path), "%s", name);
        else
            snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - file), file, name);
        json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
            st = je.line > 0 ? kiln_errorf(err, KILN_ERR_PARSE, "%s: line %d column %d: %s", path,
                                           je.line, je.column, je.text)
                             : failp(&L, p, "cannot read %s: %s", path, je.text);
            goto done;
        }
        loader L2 = {r, path, err};
        json_t *list = json_is_object(doc) ? json_object_get(doc, "fusions") : doc;
        if (json_is_object(doc) && (st = check_keys(&L2, "$", doc, keys)) != KILN_OK) {
            json_decref(doc);
            goto done;
        }
        st = parse_list(&L2, out, json_is_object(doc) ? "$.fusions" : "$",
                        list ? list : json_null());
        json_decref(doc);
    } else {
        st = parse_list(&L, out, p, fus);
    }
done:
    json_decref(root);
    if (st != KILN_OK)
        decl_free(out);
    return st;
}

static void free_fusion(dfusion *f)
{
    for (uint32_t i = 0; f->pnodes && i < f->npnodes; i++) {
        free(f->pnodes[i].name);
        free(f->pnodes[i].op);
    }
    free(f->pnodes);
    free(f->pedges);
    free(f->outputs);
    for (uint32_t i = 0; i < f->nreqs; i++) {
        free(f->reqs[i].list);
        free(f->reqs[i].attr);
        free(f->reqs[i].attr2);
        json_decref(f->reqs[i].literal);
    }
    free(f->reqs);
    for (uint32_t i = 0; i < f->nrnodes; i++) {
        drnode *n = &f->rnodes[i];
        free(n->name);
        free(n->op);
        free(n->inputs);
        for (uint32_t k = 0; k < n->nattrs; k++) {
            free(n->attrs[k].key);
            free(n->attrs[k].from_key);
            json_decref(n->attrs[k].literal);
        }
        free(n->attrs);
    }
    free(f->rnodes);
    free(f->routputs);
    free(f->name);
    free(f->summary);
    free(f->origin);
}

void decl_free(dset *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        free_fusion(&s->f[i]);
    free(s->f);
    memset(s, 0, sizeof(*s));
}
