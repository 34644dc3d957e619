/*
 * acme_tuner.c - a vendor tuner built out of tree against the kiln SDK.
 *
 * A tuner is called at each build step a build reaches (before_ub_match,
 * after_ub_match, after_build; docs/tuning.md) with the whole graph, and may
 * read and edit it.  AcmeTuner shows the two things a tuner does:
 *
 *   - it records what it saw: at every step it appends the step name to the
 *     graph attribute "acme_tuner_steps" and the live node count to
 *     "acme_tuner_nodes";
 *   - it makes a tuning decision: at after_ub_match (where GE's tuning tool
 *     tunes the fused subgraphs) every node whose first output has a known
 *     shape gets "acme_block_dim", the number of cores its work is split
 *     over: min(option max_cores, elements of that output).
 *
 * A tuner instance lives for one call, so it keeps nothing between steps but
 * what it writes into the graph.  That is what lets `kiln compile --resume`
 * continue a paused build in another process with the same result.
 *
 * Build: see CMakeLists.txt (find_package(kiln) + kiln_add_plugin).  Only
 * <kiln/kiln.h> is included; the .so links against nothing from kiln.
 */
#include <kiln/kiln.h>
#include <string.h>

#define MAX_STEPS 16 /* steps a graph can have recorded; a longer history is an error */

typedef struct acme_tuner {
    int64_t max_cores;
} acme_tuner;

static const kiln_option_def options[] = {
    {.struct_size = sizeof(kiln_option_def), .type = KILN_OPT_INT, .name = "max_cores",
     .default_value = "8", .help = "cores a node's work may be split over", .min = 1,
     .max = 1024},
};

static kiln_status create(const kiln_options *opts, kiln_error *err, void **inst)
{
    acme_tuner *t = kiln_alloc(sizeof(*t));
    if (!t)
        return kiln_errorf(err, KILN_ERR_NOMEM, "AcmeTuner: out of memory");
    t->max_cores = 8;
    kiln_options_get_int(opts, "max_cores", &t->max_cores);
    *inst = t;
    return KILN_OK;
}

static void destroy(void *inst)
{
    kiln_free(inst);
}

/* Append @p step and the node count to the graph's history attributes. */
static kiln_status record(kiln_graph *root, const char *step)
{
    kiln_attrs *a = kiln_graph_attrs(root);
    const char *const *names = NULL;
    const int64_t *counts = NULL;
    uint32_t n = 0, m = 0;
    kiln_attrs_get_list_string(a, "acme_tuner_steps", &names, &n);
    kiln_attrs_get_list_int(a, "acme_tuner_nodes", &counts, &m);
    if (n != m || n >= MAX_STEPS)
        return KILN_ERR_INVALID;
    /* Copies first: setting an attribute replaces the storage the old value is in. */
    char buf[MAX_STEPS][32];
    const char *nv[MAX_STEPS];
    int64_t cv[MAX_STEPS];
    for (uint32_t i = 0; i < n; i++) {
        strncpy(buf[i], names[i], sizeof(buf[i]) - 1);
        buf[i][sizeof(buf[i]) - 1] = 0;
        nv[i] = buf[i];
        cv[i] = counts[i];
    }
    nv[n] = step;
    cv[n] = kiln_graph_node_count(root);
    kiln_status st = kiln_attrs_set_list_string(a, "acme_tuner_steps", nv, n + 1);
    return st != KILN_OK ? st : kiln_attrs_set_list_int(a, "acme_tuner_nodes", cv, n + 1);
}

/* The tuning decision: split each node's first output over up to max_cores cores. */
static kiln_status decide(const acme_tuner *t, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (!kiln_node_output_count(g, n))
            continue;
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        int32_t rank = d ? kiln_desc_rank(d) : -1;
        if (rank < 0)
            continue; /* unknown shape: nothing to decide */
        /* min(max_cores, elements): the product saturates at max_cores */
        const int64_t *dims = kiln_desc_dims(d);
        int64_t cores = 1;
        for (int32_t i = 0; i < rank && cores > 0; i++)
            cores = dims[i] < 0 ? -1 /* dynamic */
                    : dims[i] >= t->max_cores ? (dims[i] ? t->max_cores : 0)
                                              : cores * dims[i];
        if (cores <= 0)
            continue;
        if (cores > t->max_cores)
            cores = t->max_cores;
        kiln_status st = kiln_attrs_set_int(kiln_node_attrs_mut(g, n), "acme_block_dim", cores);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status on_build_step(void *inst, kiln_pass_ctx *ctx, const char *step,
                                 kiln_graph *root)
{
    (void)ctx;
    kiln_status st = record(root, step);
    if (st == KILN_OK && strcmp(step, KILN_STEP_AFTER_UB_MATCH) == 0)
        st = decide(inst, root);
    return st;
}

static const kiln_tuner_desc acme_tuner_desc = {
    .struct_size = sizeof(kiln_tuner_desc),
    .name = "AcmeTuner",
    .summary = "records the build steps it sees, picks a block dim per node (vendor example)",
    .option_count = 1,
    .options = options,
    .create = create,
    .destroy = destroy,
    .on_build_step = on_build_step,
};

static kiln_status init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err)
{
    (void)host;
    (void)err;
    return kiln_register_tuner(reg, &acme_tuner_desc);
}

KILN_PLUGIN_DEFINE("com.acme.tuner", "0.1.0", "Apache-2.0", "ACME example tuner", init, NULL)
