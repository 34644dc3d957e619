/*
 * run.c - `kiln run MODEL [-m MANIFEST] [--input [NAME=]FILE]... [--output-dir DIR]`
 * (design contract CLI, docs/run.md).
 *
 *   1. load the manifest (with the command-line overrides) and import the model;
 *   2. match every --input to a root Data node: NAME is the node name or the
 *      `_onnx_name` of its output; a bare FILE is the next input by `index`
 *      that has none yet; read the files (tensor_io.c);
 *      A missing input is reported with every other missing one, each with
 *      its expected dtype and shape.  --input-shape NAME=DIMS sets the
 *      session option kiln.input_shape.<node> (InferShapes reads it) and the
 *      file must hold that shape;
 *   3. set the Data descriptors' shapes from the inputs (a dtype or a fixed dim
 *      that differs from what the model declares is an error naming the input),
 *      so the pipeline's InferShapes makes every shape static;
 *   4. run the manifest's pipeline (kiln_stage_run_pipeline);
 *   5. pick the runtime: the one named by the session option `kiln.runtime`
 *      (manifest "options" or --option), else the first loaded runtime
 *      component; create it (--max-memory sets its option max_memory), load,
 *      run once, unload;
 *   6. print one summary line per output on stdout (unless -q) and, with
 *      --output-dir, write DIR/output.N.bin + .json for every output
 *      (DIR/output.N.npy with --output-format npy).  Nothing
 *      is written unless the whole run succeeded, and a failed write removes
 *      the outputs already written.
 * Exit status 0 / 1 (work failed, message names input, node or plugin) / 2.
 */
#include "cli.h"
#include "options.h"
#include "fileio.h"
#include "tensor_io.h"
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RUNTIME_OPTION "kiln.runtime"

typedef struct run_state {
    kiln_cli_session ses; /* context, pipeline, graph, stage run, error */
    uint32_t nin, nout;
    kiln_node_id *data;    /* root Data nodes by index */
    const char **files;    /* input file per index */
    kiln_tensor *in, *out; /* owned tensors */
    char **out_names;      /* owned */
    const kiln_component *rt;
    void *rt_inst, *model;
    kiln_options *rt_opts; /* the runtime instance's options (live as long as it) */
} run_state;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool is_op(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* The user-facing name of output @p o of @p n: its `_onnx_name`, else the node name. */
static const char *value_name(kiln_graph *g, kiln_node_id n, uint32_t o, char *buf, size_t size)
{
    const char *s;
    if (o < kiln_node_output_count(g, n) &&
        kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)), "_onnx_name", &s))
        return s;
    if (o == 0)
        return kiln_node_name_str(g, n);
    snprintf(buf, size, "%s:%u", kiln_node_name_str(g, n), o);
    return buf;
}

/* Root Data nodes sorted by `index` into s->data (indices must be 0..n-1). */
static kiln_status collect_inputs(run_state *s)
{
    kiln_graph *g = s->ses.g;
    s->nin = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        s->nin += is_op(g, n, "Data");
    kiln__free(s->data);
    s->data = kiln__calloc(s->nin + 1u, sizeof(kiln_node_id));
    if (!s->data)
        return kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int64_t idx;
        if (!is_op(g, n, "Data"))
            continue;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx) || idx < 0 ||
            idx >= (int64_t)s->nin || s->data[idx])
            return kiln_errorf(&s->ses.err, KILN_ERR_INVALID,
                               "Data node %s: attribute 'index' must be unique and in 0..%u",
                               kiln_node_name_str(g, n), s->nin ? s->nin - 1 : 0);
        s->data[idx] = n;
    }
    return KILN_OK;
}

/* Index of the input called @p name (node name or `_onnx_name`), or -1. */
static int64_t find_input(run_state *s, const char *name)
{
    char buf[64];
    for (uint32_t i = 0; i < s->nin; i++)
        if (strcmp(kiln_node_name_str(s->ses.g, s->data[i]), name) == 0 ||
            strcmp(value_name(s->ses.g, s->data[i], 0, buf, sizeof(buf)), name) == 0)
            return i;
    return -1;
}

/* Match the --input arguments to inputs; returns 2 for usage errors, 1 for bad names. */
static int assign_files(kiln_cli *c, run_state *s)
{
    s->files = kiln__calloc(s->nin + 1u, sizeof(char *));
    if (!s->files) {
        kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
        return kiln_cli_fail(&s->ses.err);
    }
    uint32_t next = 0;
    for (uint32_t a = 0; a < c->ninputs; a++) {
        const char *arg = c->inputs[a], *eq = strchr(arg, '=');
        int64_t i;
        if (eq) {
            char name[1024];
            if (eq == arg || !eq[1] || (size_t)(eq - arg) >= sizeof(name)) {
                fprintf(stderr, "kiln run: --input expects NAME=FILE or FILE, got '%s'\n", arg);
                return 2;
            }
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = 0;
            if ((i = find_input(s, name)) < 0) {
                char list[1024] = "";
                size_t n = 0;
                for (uint32_t k = 0; k < s->nin && n < sizeof(list); k++)
                    n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", k ? ", " : "",
                                          kiln_node_name_str(s->ses.g, s->data[k]));
                fprintf(stderr, "kiln: run: the model has no input named '%s' (inputs: %s)\n", name,
                        s->nin ? list : "none");
                return 1;
            }
            arg = eq + 1;
        } else {
            while (next < s->nin && s->files[next])
                next++;
            if (next >= s->nin) {
                fprintf(stderr, "kiln: run: --input %s: the model has only %u input%s\n", arg,
                        s->nin, s->nin == 1 ? "" : "s");
                return 1;
            }
            i = next;
        }
        if (s->files[i]) {
            fprintf(stderr, "kiln: run: input %s is given twice (%s and %s)\n",
                    kiln_node_name_str(s->ses.g, s->data[i]), s->files[i], arg);
            return 1;
        }
        s->files[i] = arg;
    }
    /* Every missing input at once, each with what it expects. */
    uint32_t missing = 0;
    for (uint32_t i = 0; i < s->nin; i++)
        missing += !s->files[i];
    if (missing)
        fprintf(stderr, "kiln: run: %u of the model's %u input%s ha%s no file:\n", missing, s->nin,
                s->nin == 1 ? "" : "s", missing == 1 ? "s" : "ve");
    for (uint32_t i = 0; i < s->nin; i++)
        if (!s->files[i]) {
            char buf[64], want[512];
            const char *name = value_name(s->ses.g, s->data[i], 0, buf, sizeof(buf));
            kiln_cli_desc_str(kiln_node_output_desc(s->ses.g, s->data[i], 0), want, sizeof(want));
            fprintf(stderr, "  missing input %s (index %u): %s; pass --input %s=FILE\n", name, i,
                    want, name);
        }
    return missing ? 1 : 0;
}

/* The value of kiln.input_shape.<node> (set from --input-shape), or NULL. */
static const char *input_shape_option(run_state *s, kiln_node_id n)
{
    char key[600];
    snprintf(key, sizeof(key), "kiln.input_shape.%s", kiln_node_name_str(s->ses.g, n));
    return kiln_ctx_option(s->ses.ctx, key);
}

/* Read the input files and set the Data descriptors from them. */
static kiln_status read_inputs(run_state *s)
{
    kiln_graph *g = s->ses.g;
    s->in = kiln__calloc(s->nin + 1u, sizeof(kiln_tensor));
    if (!s->in)
        return kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < s->nin; i++) {
        const char *name = kiln_node_name_str(g, s->data[i]);
        kiln_status st = kiln_cli_tensor_read(s->files[i], &s->in[i], &s->ses.err);
        if (st != KILN_OK)
            return kiln_error_push(&s->ses.err, "input %s", name);
        const kiln_tensor *t = &s->in[i];
        kiln_tensor_desc *d = kiln_node_output_desc(g, s->data[i], 0);
        int32_t rank = kiln_desc_rank(d);
        const int64_t *dims = kiln_desc_dims(d);
        bool ok = kiln_desc_dtype(d) == t->dtype && (rank < 0 || (uint32_t)rank == t->rank);
        for (int32_t k = 0; ok && rank > 0 && k < rank; k++)
            ok = dims[k] < 0 || dims[k] == t->dims[k];
        const char *fixed = input_shape_option(s, s->data[i]);
        if (ok && fixed) {
            /* --input-shape NAME=DIMS: the file must hold that shape. */
            char got[256];
            kiln_cli_dims_str(t->rank, t->dims, got, sizeof(got));
            char want[256];
            snprintf(want, sizeof(want), "[%s]", fixed);
            if (strcmp(want, got) != 0)
                return kiln_errorf(&s->ses.err, KILN_ERR_INVALID,
                                   "input %s (%s): --input-shape fixes it to %s, the file holds %s",
                                   name, s->files[i], want, got);
        }
        if (!ok) {
            char want[256] = "[?]", got[256];
            if (rank >= 0)
                kiln_cli_dims_str((uint32_t)rank, dims, want, sizeof(want));
            kiln_cli_dims_str(t->rank, t->dims, got, sizeof(got));
            return kiln_errorf(&s->ses.err, KILN_ERR_INVALID,
                               "input %s (%s): expected %s %s, got %s %s", name, s->files[i],
                               kiln_dtype_name(kiln_desc_dtype(d)), want, kiln_dtype_name(t->dtype),
                               got);
        }
        if ((st = kiln_desc_set_shape(g, d, (int32_t)t->rank, t->dims)) != KILN_OK)
            return kiln_errorf(&s->ses.err, st, "input %s: cannot set its shape", name);
    }
    return KILN_OK;
}

/* Output names from the root NetOutput, taken before the passes edit the graph. */
static kiln_status name_outputs(run_state *s)
{
    kiln_graph *g = s->ses.g;
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (is_op(g, n, "NetOutput"))
            no = n;
    s->nout = no ? kiln_node_input_count(g, no) : 0;
    s->out_names = kiln__calloc(s->nout + 1u, sizeof(char *));
    if (!s->out_names)
        return kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j < s->nout; j++) {
        char buf[512];
        const char *name = NULL;
        kiln_anchor a = kiln_node_input_peer(g, no, j);
        if (kiln_node_input_has_desc(g, no, j))
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_input_desc(g, no, j)), "_onnx_name",
                                  &name);
        if (!name)
            name = a.node ? value_name(g, a.node, a.index, buf, sizeof(buf)) : "";
        if (!(s->out_names[j] = kiln__strdup(name)))
            return kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

/* The runtime named by the session option, else the first one loaded. */
static kiln_status pick_runtime(run_state *s)
{
    const char *want = kiln_ctx_option(s->ses.ctx, RUNTIME_OPTION);
    if (want && want[0]) {
        s->rt = kiln_registry_find(s->ses.ctx, KILN_COMP_RUNTIME, want);
        if (!s->rt)
            return kiln_errorf(&s->ses.err, KILN_ERR_NOT_FOUND,
                               "option %s names runtime '%s', which no loaded plugin provides",
                               RUNTIME_OPTION, want);
        return KILN_OK;
    }
    for (uint32_t i = 0; i < kiln_registry_count(s->ses.ctx) && !s->rt; i++)
        if (kiln_registry_at(s->ses.ctx, i)->kind == KILN_COMP_RUNTIME)
            s->rt = kiln_registry_at(s->ses.ctx, i);
    if (!s->rt)
        return kiln_errorf(&s->ses.err, KILN_ERR_NOT_FOUND,
                           "no loaded plugin provides a runtime component (kiln run needs one, "
                           "e.g. libkiln_runtime_seq.so, and an engine with kernels, e.g. "
                           "libkiln_vector.so); add them to the manifest");
    return KILN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * Create the runtime instance, load the graph, run @p repeat times (outputs
 * of the last run in s->out).  With repeat > 1 the median and minimum run
 * times go to stderr (bench/models.sh reads them).
 */
static kiln_status execute(run_state *s, int verbosity, int repeat, int64_t max_memory)
{
    const kiln_runtime_desc *rd = &s->rt->d.runtime;
    const char *plugin = s->rt->plugin ? s->rt->plugin->desc.name : "<built-in>";
    kiln_status st = KILN_OK;
    /* the runtime's options: its schema's defaults, max_memory from the flag */
    kiln_options *opts = s->rt_opts =
        rd->option_count ? kiln__options_create(rd->options, rd->option_count) : NULL;
    if (rd->option_count && !opts)
        return kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    if (max_memory > 0) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)max_memory);
        if (!opts || !kiln__options_lookup(opts, "max_memory"))
            st = kiln_errorf(&s->ses.err, KILN_ERR_UNSUPPORTED,
                             "--max-memory: runtime %s (plugin %s) has no max_memory option",
                             s->rt->name, plugin);
        else
            st = kiln__options_set_text(opts, "max_memory", v, &s->ses.err);
        if (st != KILN_OK)
            return st;
    }
    kiln_activity act = KILN_ACTIVITY(plugin, s->rt->name, "runtime create", s->ses.g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = rd->create ? rd->create(opts, &s->ses.err, &s->rt_inst) : KILN_OK;
    double t0 = now_ms(), t1 = t0, t2 = t0;
    if (st == KILN_OK) {
        act.stage = "runtime load";
        st = rd->load(s->rt_inst, s->ses.g, &s->model, &s->ses.err);
        t1 = now_ms();
    }
    if (st == KILN_OK) {
        if (!(s->out = kiln__calloc(s->nout + 1u, sizeof(kiln_tensor))))
            st = kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    }
    double *times = NULL;
    if (st == KILN_OK && repeat > 1 && !(times = kiln__malloc(sizeof(double) * (size_t)repeat)))
        st = kiln_errorf(&s->ses.err, KILN_ERR_NOMEM, "out of memory");
    for (int r = 0; st == KILN_OK && r < (repeat > 1 ? repeat : 1); r++) {
        if (r)
            for (uint32_t j = 0; j < s->nout; j++)
                kiln_cli_tensor_free(&s->out[j]);
        act.stage = "runtime run";
        double tr = now_ms();
        st = rd->run(s->rt_inst, s->model, s->in, s->nin, s->out, s->nout, &s->ses.err);
        t2 = now_ms();
        if (times)
            times[r] = t2 - tr;
    }
    kiln__activity_leave(prev);
    if (st == KILN_OK && times) {
        qsort(times, (size_t)repeat, sizeof(double), cmp_double);
        fprintf(stderr, "kiln: run: %d runs, median %.3f ms, min %.3f ms\n", repeat,
                times[repeat / 2], times[0]);
    }
    kiln__free(times);
    if (st != KILN_OK)
        return kiln_error_push(&s->ses.err, "runtime %s (plugin %s)", s->rt->name, plugin);
    if (verbosity > 0)
        fprintf(stderr, "kiln: run: runtime %s: load %.3f ms, run %.3f ms%s\n", s->rt->name,
                t1 - t0, t2 - t1, repeat > 1 ? " (all runs)" : "");
    return KILN_OK;
}

/* Write every output to @p dir (created when missing); all or nothing: the
 * writes belong to the command's output set (kiln_file_defer_*). */
static kiln_status write_outputs(run_state *s, const char *dir, bool npy)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 && mkdir(dir, 0777) != 0)
        return kiln_errorf(&s->ses.err, KILN_ERR_IO, "cannot create output directory %s: %s", dir,
                           strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kiln_errorf(&s->ses.err, KILN_ERR_IO, "%s is not a directory", dir);
    for (uint32_t j = 0; j < s->nout; j++) {
        kiln_status st =
            npy ? kiln_cli_tensor_write_npy(dir, j, &s->out[j], &s->ses.err)
                : kiln_cli_tensor_write(dir, j, s->out_names[j], &s->out[j], &s->ses.err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static void summarize(const run_state *s)
{
    for (uint32_t j = 0; j < s->nout; j++) {
        const kiln_tensor *t = &s->out[j];
        char dims[256];
        double lo, hi, mean;
        kiln_cli_dims_str(t->rank, t->dims, dims, sizeof(dims));
        kiln_cli_tensor_stats(t, &lo, &hi, &mean);
        printf("output %u %s: %s %s min %.6g max %.6g mean %.6g\n", j, s->out_names[j],
               kiln_dtype_name(t->dtype), dims, lo, hi, mean);
    }
}

static void run_state_free(run_state *s)
{
    kiln_activity act = {.plugin = s->rt ? kiln__comp_plugin(s->rt) : NULL,
                         .component = s->rt ? s->rt->name : NULL,
                         .stage = "runtime unload",
                         .doing = "unloading the model"};
    kiln_activity *prev = kiln__activity_enter(&act);
    if (s->model && s->rt && s->rt->d.runtime.unload)
        s->rt->d.runtime.unload(s->rt_inst, s->model);
    if (s->rt_inst && s->rt && s->rt->d.runtime.destroy)
        s->rt->d.runtime.destroy(s->rt_inst);
    kiln__options_destroy(s->rt_opts);
    kiln__activity_leave(prev);
    for (uint32_t i = 0; s->in && i < s->nin; i++)
        kiln_cli_tensor_free(&s->in[i]);
    for (uint32_t j = 0; s->out && j < s->nout; j++)
        kiln_cli_tensor_free(&s->out[j]);
    for (uint32_t j = 0; s->out_names && j < s->nout; j++)
        kiln__free(s->out_names[j]);
    kiln__free(s->in);
    kiln__free(s->out);
    kiln__free(s->out_names);
    kiln__free(s->files);
    kiln__free(s->data);
    kiln_cli_session_end(&s->ses);
}

int kiln_cli_run(kiln_cli *c)
{
    if (kiln_cli_model_only(c, "outputs go to --output-dir"))
        return 2;
    if (c->output_format && !c->output_dir) {
        fprintf(stderr, "kiln run: --output-format needs --output-dir DIR\n");
        return 2;
    }
    if (c->json) {
        fprintf(stderr, "kiln run: --json belongs to 'kiln info'\n");
        return 2;
    }
    kiln_cli_file in[2 + KILN_CLI_MAX_LIST] = {{"model", c->positional[0], false},
                                               {"manifest", c->manifest, false}};
    for (uint32_t a = 0; a < c->ninputs; a++) {
        const char *eq = strchr(c->inputs[a], '=');
        in[2 + a] = (kiln_cli_file){"--input", eq ? eq + 1 : c->inputs[a], true};
    }
    const kiln_cli_file out[] = {{"--report", c->report, false}};
    int rc = kiln_cli_check_files(c, in, 2 + c->ninputs, out, 1);
    if (rc)
        return rc;
    run_state s;
    memset(&s, 0, sizeof(s));
    rc = 1;
    if (!kiln_cli_session_begin(c, &s.ses))
        goto done;
    kiln_status st;
    if ((st = kiln_cli_load_model(s.ses.ctx, c->positional[0], c->input_format, &s.ses.g,
                                  &s.ses.err)) != KILN_OK ||
        (st = kiln_cli_apply_input_shapes(c, s.ses.ctx, s.ses.g, &s.ses.err)) != KILN_OK ||
        (st = collect_inputs(&s)) != KILN_OK)
        goto fail;
    if ((rc = assign_files(c, &s)) != 0)
        goto done;
    rc = 1;
    if ((st = read_inputs(&s)) != KILN_OK || (st = name_outputs(&s)) != KILN_OK)
        goto fail;
    st = kiln_stage_run_pipeline(s.ses.ctx, &s.ses.p, s.ses.g, &s.ses.run, &s.ses.err);
    if (st == KILN_PAUSED) {
        fprintf(stderr,
                "kiln: run: the manifest stops the build at step %s; kiln run needs "
                "the whole pipeline\n",
                s.ses.run.paused_step);
        goto done;
    }
    if (st != KILN_OK)
        goto fail;
    kiln_file_defer_begin(); /* --report and the outputs: all or nothing */
    if (c->report &&
        (st = kiln_stage_write_report(&s.ses.run, s.ses.g, c->report, &s.ses.err)) != KILN_OK)
        goto fail;
    /* The passes may have renumbered nodes: find the Data nodes again. */
    uint32_t nin = s.nin;
    if ((st = collect_inputs(&s)) != KILN_OK)
        goto fail;
    if (s.nin != nin) {
        fprintf(stderr,
                "kiln: run: the pipeline changed the number of model inputs (%u -> "
                "%u)\n",
                nin, s.nin);
        s.nin = nin; /* s.in holds that many tensors */
        goto done;
    }
    if ((st = pick_runtime(&s)) != KILN_OK ||
        (st = execute(&s, c->verbosity, c->repeat, c->max_memory)) != KILN_OK)
        goto fail;
    if (c->output_dir &&
        (st = write_outputs(&s, c->output_dir,
                            c->output_format && strcmp(c->output_format, "npy") == 0)) != KILN_OK)
        goto fail;
    if ((st = kiln_file_defer_commit(&s.ses.err)) != KILN_OK)
        goto fail;
    if (c->verbosity >= 0)
        summarize(&s);
    rc = 0;
    goto done;
fail:
    kiln_cli_fail(&s.ses.err);
done:
    kiln_file_defer_abort();
    run_state_free(&s);
    return rc;
}
