/*
 * info.c - `kiln info MODEL [--json] [-m MANIFEST]`: what a model is made of.
 *
 * Imports MODEL with the manifest's frontends (no pass runs) and prints
 *   - the inputs (root Data nodes by `index`) and outputs (inputs of the root
 *     NetOutput) with dtype and shape; a dim the model leaves symbolic shows
 *     its name (`_onnx_dim_params`), an unknown one '?';
 *   - the opsets the model imports (root graph attribute onnx_opset_import);
 *   - node counts (root, every subgraph) and the subgraphs with their owners;
 *   - the op histogram over the root and every subgraph, each op type with
 *     the engines that support its nodes, asked through the engines' own
 *     support query (kiln_engine_for_node: op table, dtype mask, supports())
 *     after the manifest's InferShapes alone has made the dtypes known.
 *     Data, NetOutput, Const and Constant are graph structure the runtime
 *     handles itself, shown as "(graph)" when no engine claims them.
 *   - for an executable model file (.kmodel, docs/model_format.md), what the
 *     loader verified and recorded on the root (`_kiln_kmodel_*`): format
 *     version, producer, sections (offset, size, SHA-256, all checked), the
 *     model name, streams, tasks per stream, events, memory per type and
 *     the weights (size, constants, deduplicated ones).
 * --json prints the same as one JSON object (docs/run.md).  Exit 0, 1 when
 * the model or manifest cannot be read, 2 for usage errors.
 */
#include "cli.h"
#include <jansson.h>

typedef struct op_row {
    const char *op; /* interned in the context: lives as long as the graph */
    uint32_t count, unsupported;
    const char *engines[8];
    uint32_t nengines;
} op_row;

typedef struct info {
    kiln_graph *root;
    op_row *ops;
    uint32_t nops, cap;
    uint32_t total_nodes;
} info;

static bool is_structure(const char *op)
{
    return strcmp(op, "Data") == 0 || strcmp(op, "NetOutput") == 0 || strcmp(op, "Const") == 0 ||
           strcmp(op, "Constant") == 0;
}

/* Count the nodes of @p g into the histogram; false on OOM. */
static bool histogram(info *in, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const char *op = kiln_node_op_str(g, n);
        op_row *r = NULL;
        for (uint32_t i = 0; i < in->nops && !r; i++)
            if (strcmp(in->ops[i].op, op) == 0)
                r = &in->ops[i];
        if (!r) {
            if (in->nops == in->cap) {
                uint32_t cap = in->cap ? in->cap * 2 : 32;
                op_row *ops = realloc(in->ops, sizeof(op_row) * cap);
                if (!ops)
                    return false;
                in->ops = ops;
                in->cap = cap;
            }
            r = &in->ops[in->nops++];
            memset(r, 0, sizeof(*r));
            r->op = op;
        }
        r->count++;
        in->total_nodes++;
        const char *e = kiln_engine_for_node(g, n);
        if (!e) {
            r->unsupported++;
            continue;
        }
        bool seen = false;
        for (uint32_t k = 0; k < r->nengines && !seen; k++)
            seen = strcmp(r->engines[k], e) == 0;
        if (!seen && r->nengines < 8)
            r->engines[r->nengines++] = e;
    }
    return true;
}

static int cmp_rows(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->op, y->op);
}

/* Shape of @p d as JSON: dims as integers, symbolic dims as their names, unknown as "?". */
static json_t *shape_json(const kiln_tensor_desc *d)
{
    int32_t rank = d ? kiln_desc_rank(d) : -1;
    if (rank < 0)
        return json_null();
    const int64_t *dims = kiln_desc_dims(d);
    const char *const *params = NULL;
    uint32_t np = 0;
    kiln_attrs_get_list_string(kiln_desc_attrs(d), "_onnx_dim_params", &params, &np);
    json_t *a = json_array();
    for (int32_t k = 0; a && k < rank; k++) {
        if (dims[k] >= 0)
            json_array_append_new(a, json_integer(dims[k]));
        else
            json_array_append_new(a,
                                  json_string((uint32_t)k < np && params[k][0] ? params[k] : "?"));
    }
    return a;
}

static json_t *value_json(const char *name, const char *node, const kiln_tensor_desc *d)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "name", name, "node", node, "dtype",
                     d ? kiln_dtype_name(kiln_desc_dtype(d)) : "unknown", "shape", shape_json(d));
}

/* Inputs (by index) and outputs of the root graph, named as kiln run names them. */
static kiln_status io_json(kiln_model *m, json_t *doc, kiln_error *err)
{
    json_t *ins = json_array(), *outs = json_array();
    json_object_set_new(doc, "inputs", ins);
    json_object_set_new(doc, "outputs", outs);
    kiln_status st = kiln_model_io_status(m, err);
    if (st != KILN_OK)
        return st;
    kiln_graph *g = kiln_model_graph(m);
    for (uint32_t i = 0; i < kiln_model_input_count(m); i++) {
        const char *node = kiln_model_input_node(m, i);
        kiln_node_id n = kiln_graph_find_node(g, node);
        const kiln_tensor_desc *d =
            n && kiln_node_output_count(g, n) ? kiln_node_output_desc(g, n, 0) : NULL;
        json_t *v = value_json(kiln_model_input_name(m, i), node, d);
        json_object_set_new(v, "index", json_integer(i));
        json_array_append_new(ins, v);
    }
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (strcmp(kiln_node_op_str(g, n), "NetOutput") == 0)
            no = n;
    for (uint32_t j = 0; no && j < kiln_model_output_count(m); j++) {
        kiln_anchor a = kiln_node_input_peer(g, no, j);
        const kiln_tensor_desc *d =
            kiln_node_input_has_desc(g, no, j) ? kiln_node_input_desc(g, no, j) : NULL;
        if (a.node && a.index < kiln_node_output_count(g, a.node) && (!d || kiln_desc_rank(d) < 0))
            d = kiln_node_output_desc(g, a.node, a.index);
        json_t *v = value_json(kiln_model_output_name(m, j),
                               a.node ? kiln_node_name_str(g, a.node) : "", d);
        json_object_set_new(v, "index", json_integer(j));
        json_array_append_new(outs, v);
    }
    return KILN_OK;
}

static json_t *build_doc(info *in, kiln_model *m, const char *path, kiln_error *err)
{
    kiln_graph *g = in->root;
    json_t *doc = json_object();
    json_object_set_new(doc, "model", json_string(path));
    json_object_set_new(doc, "graph", json_string(kiln_graph_name(g)));
    json_t *ops = json_array();
    const char *const *opsets;
    uint32_t nopsets = 0;
    if (kiln_attrs_get_list_string(kiln_graph_attrs(g), "onnx_opset_import", &opsets, &nopsets))
        for (uint32_t i = 0; i < nopsets; i++) {
            const char *colon = strrchr(opsets[i], ':');
            json_array_append_new(ops,
                                  colon ? json_pack("{s:s%, s:I}", "domain", opsets[i],
                                                    (size_t)(colon - opsets[i]), "version",
                                                    (json_int_t)strtoll(colon + 1, NULL, 10))
                                        : json_pack("{s:s, s:n}", "domain", opsets[i], "version"));
        }
    json_object_set_new(doc, "opsets", ops);
    if (io_json(m, doc, err) != KILN_OK) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* Node counts, subgraphs and the op histogram into @p doc. */
static void add_structure(info *in, json_t *doc)
{
    kiln_graph *g = in->root;
    json_object_set_new(doc, "root_nodes", json_integer(kiln_graph_node_count(g)));
    json_object_set_new(doc, "nodes", json_integer(in->total_nodes));
    json_t *subs = json_array();
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(g); i++) {
        kiln_graph *sg = kiln_graph_all_subgraph(g, i);
        kiln_graph *parent = kiln_graph_parent(sg);
        kiln_node_id owner = kiln_graph_parent_node(sg);
        const char *role = "";
        for (uint32_t k = 0; parent && k < kiln_node_subgraph_count(parent, owner); k++) {
            const char *r = NULL;
            if (kiln_node_subgraph(parent, owner, k, &r) == sg && r)
                role = r;
        }
        json_array_append_new(
            subs, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "name", kiln_graph_name(sg), "parent",
                            parent ? kiln_graph_name(parent) : "", "owner",
                            parent ? kiln_node_name_str(parent, owner) : "", "owner_op",
                            parent ? kiln_node_op_str(parent, owner) : "", "role", role, "nodes",
                            (int)kiln_graph_node_count(sg)));
    }
    json_object_set_new(doc, "subgraphs", subs);
    json_t *hist = json_array();
    for (uint32_t i = 0; i < in->nops; i++) {
        const op_row *r = &in->ops[i];
        json_t *eng = json_array();
        for (uint32_t k = 0; k < r->nengines; k++)
            json_array_append_new(eng, json_string(r->engines[k]));
        json_array_append_new(hist, json_pack("{s:s, s:i, s:o, s:i, s:b}", "op", r->op, "count",
                                              (int)r->count, "engines", eng, "unsupported",
                                              (int)r->unsupported, "graph_structure",
                                              is_structure(r->op)));
    }
    json_object_set_new(doc, "ops", hist);
}

/*
 * Run the manifest's InferShapes alone (when a plugin provides it), so that
 * every node's dtype is known to the engines' support query; its warnings
 * (ops without inference) go to stderr only with -v.  A failure is reported
 * and the declared dtypes are used.
 */
static void infer_dtypes(kiln_cli *c, kiln_cli_session *s)
{
    if (!kiln_session_has_component(s->s, "pass", "InferShapes"))
        return;
    FILE *null = c->verbosity > 0 ? NULL : fopen("/dev/null", "w");
    if (null)
        kiln_session_set_log(s->s, null);
    kiln_error *err = kiln_error_create();
    kiln_status st = err ? kiln_session_set_passes(s->s, "InferShapes", err) : KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = kiln_model_compile(s->m, NULL, err);
    if (st != KILN_OK && c->verbosity >= 0) {
        char buf[1024] = "out of memory";
        if (err)
            kiln_error_format(err, buf, sizeof(buf));
        fprintf(stderr,
                "kiln: info: warning: InferShapes failed (%s); the engines are asked "
                "with the declared dtypes\n",
                buf);
    }
    kiln_error_destroy(err);
    kiln_session_set_log(s->s, stderr);
    if (null)
        fclose(null);
}

/* The "kmodel" block of a model file's facts (the loader's `_kiln_kmodel_*`
 * root attributes); nothing for other models. */
static void add_kmodel(kiln_graph *g, json_t *doc)
{
    const kiln_attrs *a = kiln_graph_attrs(g);
    const char *fmt, *name = "", *producer = "";
    if (!kiln_attrs_get_string(a, "_kiln_kmodel_format", &fmt))
        return;
    kiln_attrs_get_string(a, "_kiln_kmodel_name", &name);
    kiln_attrs_get_string(a, "_kiln_kmodel_producer", &producer);
    json_t *k = json_pack("{s:s, s:s, s:s}", "format", fmt, "name", name, "producer", producer);
    const char *const *names = NULL, *const *hashes = NULL;
    const int64_t *sizes = NULL, *offs = NULL;
    uint32_t n = 0, nh = 0, ns = 0, no = 0;
    kiln_attrs_get_list_string(a, "_kiln_kmodel_sections", &names, &n);
    kiln_attrs_get_list_string(a, "_kiln_kmodel_section_sha256", &hashes, &nh);
    kiln_attrs_get_list_int(a, "_kiln_kmodel_section_sizes", &sizes, &ns);
    kiln_attrs_get_list_int(a, "_kiln_kmodel_section_offsets", &offs, &no);
    json_t *secs = json_array();
    for (uint32_t i = 0; i < n && i < nh && i < ns && i < no; i++)
        json_array_append_new(secs, json_pack("{s:s, s:I, s:I, s:s, s:b}", "name", names[i],
                                              "offset", (json_int_t)offs[i], "size",
                                              (json_int_t)sizes[i], "sha256", hashes[i],
                                              "sha256_ok", 1));
    json_object_set_new(k, "sections", secs);
    static const char *const ints[] = {"streams", "events", "event_tasks", "models", "tasks",
                                       "nodes"};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        char key[64];
        int64_t v = 0;
        snprintf(key, sizeof(key), "_kiln_kmodel_%s", ints[i]);
        kiln_attrs_get_int(a, key, &v);
        json_object_set_new(k, ints[i], json_integer(v));
    }
    const int64_t *tasks = NULL;
    uint32_t nt = 0;
    kiln_attrs_get_list_int(a, "_kiln_kmodel_stream_tasks", &tasks, &nt);
    json_t *tv = json_array();
    for (uint32_t i = 0; i < nt; i++)
        json_array_append_new(tv, json_integer(tasks[i]));
    json_object_set_new(k, "tasks_per_stream", tv);
    const char *const *types = NULL;
    const int64_t *msz = NULL, *mld = NULL;
    uint32_t nmt = 0, nms = 0, nml = 0;
    kiln_attrs_get_list_string(a, "_kiln_kmodel_memory_types", &types, &nmt);
    kiln_attrs_get_list_int(a, "_kiln_kmodel_memory_sizes", &msz, &nms);
    kiln_attrs_get_list_int(a, "_kiln_kmodel_memory_loads", &mld, &nml);
    json_t *mem = json_array();
    for (uint32_t i = 0; i < nmt; i++)
        json_array_append_new(mem, json_pack("{s:s, s:I, s:I}", "type", types[i], "size",
                                             (json_int_t)(i < nms ? msz[i] : -1), "load",
                                             (json_int_t)(i < nml ? mld[i] : -1)));
    json_object_set_new(k, "memory", mem);
    int64_t nsub = 0, ssz = 0, sld = 0;
    if (kiln_attrs_get_int(a, "_kiln_memory_subgraphs", &nsub)) { /* MemoryAssigner's subgraph plans */
        kiln_attrs_get_int(a, "_kiln_memory_subgraph_sizes", &ssz);
        kiln_attrs_get_int(a, "_kiln_memory_subgraph_loads", &sld);
        json_object_set_new(k, "memory_subgraphs",
                            json_pack("{s:I, s:I, s:I}", "planned", (json_int_t)nsub, "size",
                                      (json_int_t)ssz, "load", (json_int_t)sld));
    }
    int64_t ws = 0, wc = 0, wd = 0;
    kiln_attrs_get_int(a, "_kiln_kmodel_weight_size", &ws);
    kiln_attrs_get_int(a, "_kiln_kmodel_weight_constants", &wc);
    kiln_attrs_get_int(a, "_kiln_kmodel_weight_deduplicated", &wd);
    json_object_set_new(k, "weights", json_pack("{s:I, s:I, s:I}", "size", (json_int_t)ws,
                                                "constants", (json_int_t)wc, "deduplicated",
                                                (json_int_t)wd));
    json_object_set_new(doc, "kmodel", k);
}

static void print_kmodel(const json_t *k)
{
    size_t i;
    json_t *v;
    printf("format:    kmodel %s (%s)\nname:      %s\nsections:\n",
           json_string_value(json_object_get(k, "format")),
           json_string_value(json_object_get(k, "producer")),
           json_string_value(json_object_get(k, "name")));
    json_array_foreach(json_object_get(k, "sections"), i, v)
        printf("  %-8s offset %-10lld size %-10lld sha256 %.16s... ok\n",
               json_string_value(json_object_get(v, "name")),
               (long long)json_integer_value(json_object_get(v, "offset")),
               (long long)json_integer_value(json_object_get(v, "size")),
               json_string_value(json_object_get(v, "sha256")));
    printf("streams:   %lld (tasks per stream:",
           (long long)json_integer_value(json_object_get(k, "streams")));
    json_array_foreach(json_object_get(k, "tasks_per_stream"), i, v)
        printf(" %lld", (long long)json_integer_value(v));
    printf(")\nevents:    %lld (%lld record/wait tasks)\nmodels:    %lld (root + subgraphs), "
           "%lld tasks in all\n",
           (long long)json_integer_value(json_object_get(k, "events")),
           (long long)json_integer_value(json_object_get(k, "event_tasks")),
           (long long)json_integer_value(json_object_get(k, "models")),
           (long long)json_integer_value(json_object_get(k, "tasks")));
    json_t *mem = json_object_get(k, "memory");
    printf("memory:   %s\n", json_array_size(mem) ? "" : " not planned (MemoryAssigner did not run)");
    json_array_foreach(mem, i, v)
        printf("  %-8s %lld bytes (LOAD %lld)\n", json_string_value(json_object_get(v, "type")),
               (long long)json_integer_value(json_object_get(v, "size")),
               (long long)json_integer_value(json_object_get(v, "load")));
    json_t *ms = json_object_get(k, "memory_subgraphs");
    if (ms && json_integer_value(json_object_get(ms, "planned")) > 0)
        printf("  subgraphs %lld planned, %lld bytes in their regions (LOAD %lld)\n",
               (long long)json_integer_value(json_object_get(ms, "planned")),
               (long long)json_integer_value(json_object_get(ms, "size")),
               (long long)json_integer_value(json_object_get(ms, "load")));
    json_t *w = json_object_get(k, "weights");
    printf("weights:   %lld bytes, %lld constants, %lld deduplicated\n",
           (long long)json_integer_value(json_object_get(w, "size")),
           (long long)json_integer_value(json_object_get(w, "constants")),
           (long long)json_integer_value(json_object_get(w, "deduplicated")));
}

static void print_value(const json_t *v)
{
    json_t *shape = json_object_get(v, "shape");
    char sh[512] = "unknown rank";
    if (json_is_array(shape)) {
        size_t n = (size_t)snprintf(sh, sizeof(sh), "[");
        for (size_t k = 0; k < json_array_size(shape) && n < sizeof(sh); k++) {
            json_t *d = json_array_get(shape, k);
            n += json_is_integer(d)
                     ? (size_t)snprintf(sh + n, sizeof(sh) - n, "%s%lld", k ? "," : "",
                                        (long long)json_integer_value(d))
                     : (size_t)snprintf(sh + n, sizeof(sh) - n, "%s%s", k ? "," : "",
                                        json_string_value(d));
        }
        if (n < sizeof(sh))
            snprintf(sh + n, sizeof(sh) - n, "]");
    }
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *node = json_string_value(json_object_get(v, "node"));
    printf("  %lld %s: %s %s", (long long)json_integer_value(json_object_get(v, "index")), name,
           json_string_value(json_object_get(v, "dtype")), sh);
    if (node[0] && strcmp(node, name) != 0)
        printf("  (node %s)", node);
    printf("\n");
}

static void print_text(const json_t *doc)
{
    size_t i;
    json_t *v;
    printf("model:     %s\ngraph:     %s\nopsets:    ",
           json_string_value(json_object_get(doc, "model")),
           json_string_value(json_object_get(doc, "graph")));
    json_array_foreach(json_object_get(doc, "opsets"), i, v)
        printf("%s%s:%lld", i ? ", " : "", json_string_value(json_object_get(v, "domain")),
               (long long)json_integer_value(json_object_get(v, "version")));
    json_t *subs = json_object_get(doc, "subgraphs");
    printf("%s\nnodes:     %lld (root graph %lld, %zu subgraph%s)\n",
           json_array_size(json_object_get(doc, "opsets")) ? "" : "none (not an ONNX model)",
           (long long)json_integer_value(json_object_get(doc, "nodes")),
           (long long)json_integer_value(json_object_get(doc, "root_nodes")), json_array_size(subs),
           json_array_size(subs) == 1 ? "" : "s");
    if (json_object_get(doc, "kmodel"))
        print_kmodel(json_object_get(doc, "kmodel"));
    printf("inputs:\n");
    json_array_foreach(json_object_get(doc, "inputs"), i, v) print_value(v);
    printf("outputs:\n");
    json_array_foreach(json_object_get(doc, "outputs"), i, v) print_value(v);
    printf("ops (count, engines):\n");
    json_array_foreach(json_object_get(doc, "ops"), i, v)
    {
        json_t *eng = json_object_get(v, "engines");
        char e[256] = "";
        size_t n = 0, k;
        json_t *x;
        json_array_foreach(eng, k, x) n += (size_t)snprintf(
            e + n, n < sizeof(e) ? sizeof(e) - n : 0, "%s%s", k ? "," : "", json_string_value(x));
        long long uns = (long long)json_integer_value(json_object_get(v, "unsupported"));
        if (!json_array_size(eng))
            snprintf(e, sizeof(e), "%s",
                     json_is_true(json_object_get(v, "graph_structure")) ? "(graph)" : "none");
        else if (uns)
            snprintf(e + strlen(e), sizeof(e) - strlen(e), " (%lld node%s: none)", uns,
                     uns == 1 ? "" : "s");
        printf("  %-24s %6lld  %s\n", json_string_value(json_object_get(v, "op")),
               (long long)json_integer_value(json_object_get(v, "count")), e);
    }
    if (json_array_size(subs)) {
        printf("subgraphs:\n");
        json_array_foreach(subs, i, v)
            printf("  %s: %s of %s (%s) in %s, %lld nodes\n",
                   json_string_value(json_object_get(v, "name")),
                   json_string_value(json_object_get(v, "role")),
                   json_string_value(json_object_get(v, "owner")),
                   json_string_value(json_object_get(v, "owner_op")),
                   json_string_value(json_object_get(v, "parent")),
                   (long long)json_integer_value(json_object_get(v, "nodes")));
    }
}

int kiln_cli_info(kiln_cli *c)
{
    if (kiln_cli_model_only(c, "info only reads the model"))
        return 2;
    if (c->ninputs || c->output_dir || c->output_format || c->ninput_shapes || c->repeat) {
        fprintf(stderr, "kiln info: --input, --input-shape and the output options belong to "
                        "'kiln run'\n");
        return 2;
    }
    kiln_cli_session s;
    info in;
    memset(&in, 0, sizeof(in));
    int rc = 1;
    json_t *doc = NULL;
    if (!kiln_cli_session_begin(c, &s))
        goto done;
    if (kiln_model_import(s.s, c->positional[0], c->input_format, &s.m, s.err) != KILN_OK)
        goto fail;
    in.root = kiln_model_graph(s.m);
    /* Inputs and outputs as the model declares them, before inference. */
    if (!(doc = build_doc(&in, s.m, c->positional[0], s.err))) {
        if (kiln_error_code(s.err) == KILN_OK)
            kiln_errorf(s.err, KILN_ERR_NOMEM, "out of memory");
        kiln_error_push(s.err, "%s", c->positional[0]);
        goto fail;
    }
    infer_dtypes(c, &s);
    bool ok = histogram(&in, in.root);
    for (uint32_t i = 0; ok && i < kiln_graph_all_subgraph_count(in.root); i++)
        ok = histogram(&in, kiln_graph_all_subgraph(in.root, i));
    if (!ok) {
        kiln_errorf(s.err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    qsort(in.ops, in.nops, sizeof(op_row), cmp_rows);
    add_structure(&in, doc);
    add_kmodel(in.root, doc);
    if (c->json) {
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!text) {
            kiln_errorf(s.err, KILN_ERR_NOMEM, "out of memory");
            goto fail;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_text(doc);
    }
    rc = 0;
    goto done;
fail:
    kiln_cli_fail(s.err);
done:
    json_decref(doc);
    free(in.ops);
    kiln_cli_session_end(&s);
    return rc;
}
