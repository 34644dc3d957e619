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
 *   4. run the manifest's pipeline (kiln_model_compile);
 *   5. pick the runtime: the one named by the session option `kiln.runtime`
 *      (manifest "options" or --option), else the first loaded runtime
 *      component (kiln_model_prepare; --max-memory sets its option
 *      max_memory), run once (kiln_model_run; --repeat N: N times), unload;
 *   6. print one summary line per output on stdout (unless -q) and, with
 *      --output-dir, write DIR/output.N.bin + .json for every output
 *      (DIR/output.N.npy with --output-format npy); --report (with the runs'
 *      per-op times and memory) and --trace (Chrome trace) after the runs, from
 *      the runtime's profile (kiln_model_set_profiling).  Nothing
 *      is written unless the whole run succeeded, and a failed write removes
 *      the outputs already written.
 * Exit status 0 / 1 (work failed, message names input, node or plugin) / 2.
 */
#include "cli.h"
#include "tensor_io.h"
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct run_state {
    kiln_cli_session ses; /* session, model, error */
    uint32_t nin, nout;
    const char **files; /* input file per index */
    kiln_tensor *in;    /* owned tensors (bound to the model's inputs) */
} run_state;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Match the --input arguments to inputs; returns 2 for usage errors, 1 for bad names. */
static int assign_files(kiln_cli *c, run_state *s)
{
    kiln_model *m = s->ses.m;
    s->files = kiln_alloc(sizeof(char *) * (s->nin + 1u));
    if (!s->files) {
        kiln_errorf(s->ses.err, KILN_ERR_NOMEM, "out of memory");
        return kiln_cli_fail(s->ses.err);
    }
    memset(s->files, 0, sizeof(char *) * (s->nin + 1u));
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
            if ((i = kiln_model_input_index(m, name)) < 0) {
                char list[1024] = "";
                size_t n = 0;
                for (uint32_t k = 0; k < s->nin && n < sizeof(list); k++)
                    n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", k ? ", " : "",
                                          kiln_model_input_node(m, k));
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
                    kiln_model_input_node(m, (uint32_t)i), s->files[i], arg);
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
            char want[512];
            const char *name = kiln_model_input_name(m, i);
            kiln_model_input_desc_str(m, i, want, sizeof(want));
            fprintf(stderr, "  missing input %s (index %u): %s; pass --input %s=FILE\n", name, i,
                    want, name);
        }
    return missing ? 1 : 0;
}

/* Read the input files, check them against the declared inputs and bind them
 * (which sets the Data descriptors' shapes before compiling). */
static kiln_status read_inputs(run_state *s)
{
    kiln_model *m = s->ses.m;
    s->in = kiln_alloc(sizeof(kiln_tensor) * (s->nin + 1u));
    if (!s->in)
        return kiln_errorf(s->ses.err, KILN_ERR_NOMEM, "out of memory");
    memset(s->in, 0, sizeof(kiln_tensor) * (s->nin + 1u));
    for (uint32_t i = 0; i < s->nin; i++) {
        const char *name = kiln_model_input_node(m, i);
        kiln_status st = kiln_cli_tensor_read(s->files[i], &s->in[i], s->ses.err);
        if (st != KILN_OK)
            return kiln_error_push(s->ses.err, "input %s", name);
        const kiln_tensor *t = &s->in[i];
        kiln_dtype dt;
        int32_t rank;
        const int64_t *dims;
        kiln_model_input_desc(m, i, &dt, &rank, &dims);
        bool ok = dt == t->dtype && (rank < 0 || (uint32_t)rank == t->rank);
        for (int32_t k = 0; ok && rank > 0 && k < rank; k++)
            ok = dims[k] < 0 || dims[k] == t->dims[k];
        char key[600];
        snprintf(key, sizeof(key), "kiln.input_shape.%s", name);
        const char *fixed = kiln_session_option(s->ses.s, key);
        if (ok && fixed) {
            /* --input-shape NAME=DIMS: the file must hold that shape. */
            char got[256];
            kiln_cli_dims_str(t->rank, t->dims, got, sizeof(got));
            char want[256];
            snprintf(want, sizeof(want), "[%s]", fixed);
            if (strcmp(want, got) != 0)
                return kiln_errorf(s->ses.err, KILN_ERR_INVALID,
                                   "input %s (%s): --input-shape fixes it to %s, the file holds %s",
                                   name, s->files[i], want, got);
        }
        if (!ok) {
            char want[256] = "[?]", got[256];
            if (rank >= 0)
                kiln_cli_dims_str((uint32_t)rank, dims, want, sizeof(want));
            kiln_cli_dims_str(t->rank, t->dims, got, sizeof(got));
            return kiln_errorf(s->ses.err, KILN_ERR_INVALID,
                               "input %s (%s): expected %s %s, got %s %s", name, s->files[i],
                               kiln_dtype_name(dt), want, kiln_dtype_name(t->dtype), got);
        }
        if ((st = kiln_model_set_input_at(m, i, t, s->ses.err)) != KILN_OK)
            return kiln_error_push(s->ses.err, "input %s (%s)", name, s->files[i]);
    }
    return KILN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * Load the compiled model into its runtime, run it @p repeat times (the
 * outputs of the last run stay in the model).  With repeat > 1 the median and
 * minimum run times go to stderr (bench/models.sh reads them).
 */
static kiln_status execute(run_state *s, int verbosity, int repeat, int64_t max_memory,
                           bool profile)
{
    kiln_model *m = s->ses.m;
    kiln_status st = KILN_OK;
    if (max_memory > 0) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)max_memory);
        st = kiln_model_set_runtime_option(m, "max_memory", v, s->ses.err);
    }
    if (st == KILN_OK && profile)
        st = kiln_model_set_profiling(m, true, s->ses.err);
    double t0 = now_ms(), t1 = t0, t2 = t0;
    if (st == KILN_OK && (st = kiln_model_prepare(m, s->ses.err)) != KILN_OK && max_memory > 0 &&
        kiln_error_code(s->ses.err) == KILN_ERR_UNSUPPORTED)
        return kiln_error_push(s->ses.err, "--max-memory");
    t1 = now_ms();
    double *times = NULL;
    if (st == KILN_OK && repeat > 1 && !(times = malloc(sizeof(double) * (size_t)repeat)))
        st = kiln_errorf(s->ses.err, KILN_ERR_NOMEM, "out of memory");
    for (int r = 0; st == KILN_OK && r < (repeat > 1 ? repeat : 1); r++) {
        double tr = now_ms();
        st = kiln_model_run(m, s->ses.err);
        t2 = now_ms();
        if (times)
            times[r] = t2 - tr;
    }
    if (st == KILN_OK && times) {
        qsort(times, (size_t)repeat, sizeof(double), cmp_double);
        fprintf(stderr, "kiln: run: %d runs, median %.3f ms, min %.3f ms\n", repeat,
                times[repeat / 2], times[0]);
    }
    free(times);
    if (st != KILN_OK)
        return st;
    if (verbosity > 0) {
        fprintf(stderr, "kiln: run: runtime %s: load %.3f ms, run %.3f ms%s\n",
                kiln_model_runtime(m), t1 - t0, t2 - t1, repeat > 1 ? " (all runs)" : "");
    }
    return KILN_OK;
}

/* Write every output to @p dir (created when missing); all or nothing: the
 * writes belong to the command's output set (kiln_output_set_*). */
static kiln_status write_outputs(run_state *s, const char *dir, bool npy)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 && mkdir(dir, 0777) != 0)
        return kiln_errorf(s->ses.err, KILN_ERR_IO, "cannot create output directory %s: %s", dir,
                           strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kiln_errorf(s->ses.err, KILN_ERR_IO, "%s is not a directory", dir);
    for (uint32_t j = 0; j < s->nout; j++) {
        const kiln_tensor *t = kiln_model_output(s->ses.m, j);
        kiln_status st =
            npy ? kiln_cli_tensor_write_npy(dir, j, t, s->ses.err)
                : kiln_cli_tensor_write(dir, j, kiln_model_output_name(s->ses.m, j), t, s->ses.err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static void summarize(const run_state *s)
{
    for (uint32_t j = 0; j < s->nout; j++) {
        const kiln_tensor *t = kiln_model_output(s->ses.m, j);
        char dims[256];
        double lo, hi, mean;
        kiln_cli_dims_str(t->rank, t->dims, dims, sizeof(dims));
        kiln_cli_tensor_stats(t, &lo, &hi, &mean);
        printf("output %u %s: %s %s min %.6g max %.6g mean %.6g\n", j,
               kiln_model_output_name(s->ses.m, j), kiln_dtype_name(t->dtype), dims, lo, hi, mean);
    }
}

static void run_state_free(run_state *s)
{
    kiln_model_destroy(s->ses.m); /* unloads it from the runtime before the inputs go */
    s->ses.m = NULL;
    for (uint32_t i = 0; s->in && i < s->nin; i++)
        kiln_cli_tensor_free(&s->in[i]);
    kiln_free(s->in);
    kiln_free((void *)s->files);
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
    const kiln_cli_file out[] = {{"--report", c->report, false}, {"--trace", c->trace, false}};
    int rc = kiln_cli_check_files(c, in, 2 + c->ninputs, out, 2);
    if (rc)
        return rc;
    run_state s;
    memset(&s, 0, sizeof(s));
    rc = 1;
    if (!kiln_cli_session_begin(c, &s.ses))
        goto done;
    kiln_status st;
    if ((st = kiln_model_import(s.ses.s, c->positional[0], c->input_format, &s.ses.m, s.ses.err)) !=
            KILN_OK ||
        (st = kiln_cli_apply_input_shapes(c, s.ses.m, s.ses.err)) != KILN_OK ||
        (st = kiln_model_io_status(s.ses.m, s.ses.err)) != KILN_OK)
        goto fail;
    s.nin = kiln_model_input_count(s.ses.m);
    s.nout = kiln_model_output_count(s.ses.m);
    if ((rc = assign_files(c, &s)) != 0)
        goto done;
    rc = 1;
    if ((st = read_inputs(&s)) != KILN_OK)
        goto fail;
    st = kiln_model_compile(s.ses.m, NULL, s.ses.err);
    if (st == KILN_PAUSED) {
        fprintf(stderr,
                "kiln: run: the manifest stops the build at step %s; kiln run needs "
                "the whole pipeline\n",
                kiln_model_paused_step(s.ses.m));
        goto done;
    }
    if (st != KILN_OK)
        goto fail;
    kiln_output_set_begin(); /* --report, --trace and the outputs: all or nothing */
    if ((st = execute(&s, c->verbosity, c->repeat, c->max_memory, c->report || c->trace)) !=
        KILN_OK)
        goto fail;
    /* after the runs: the report's "run" section and the trace come from their profile */
    if (c->report && (st = kiln_model_write_report(s.ses.m, c->report, s.ses.err)) != KILN_OK)
        goto fail;
    if (c->trace && (st = kiln_model_write_trace(s.ses.m, c->trace, s.ses.err)) != KILN_OK)
        goto fail;
    if (c->output_dir &&
        (st = write_outputs(&s, c->output_dir,
                            c->output_format && strcmp(c->output_format, "npy") == 0)) != KILN_OK)
        goto fail;
    if ((st = kiln_output_set_commit(s.ses.err)) != KILN_OK)
        goto fail;
    if (c->verbosity >= 0)
        summarize(&s);
    rc = 0;
    goto done;
fail:
    kiln_cli_fail(s.ses.err);
done:
    kiln_output_set_abort();
    run_state_free(&s);
    return rc;
}
