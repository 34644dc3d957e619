/*
 * tp_engine.c - a test plugin with two engines that implement every compiler
 * hook of kiln_engine_desc (tests/core/test_engine.c, tests/e2e/engines.sh):
 *
 *   tp_first  (priority 7)  ops Relu, Add (float32)
 *   tp_second (priority 3)  ops Relu, Cast (any dtype)
 *
 * optimize_original_graph / optimize_whole_graph / optimize_subgraph append
 * "<engine>:<hook>;" to the string attribute `tp_engine_calls` of the graph
 * they get, so a test sees which hooks ran, on which graph, in which order;
 * they fail (KILN_ERR_INVALID) when the graph's string attribute
 * tp_engine_fail names their engine.
 * calc_op_running_param raises output 0 by 32 bytes and declares one
 * workspace of 64 bytes, or, for a node with the int attribute tp_bad = 1,
 * returns 99 workspaces (the host must refuse).  generate_task writes a
 * kernel task "tp.<op>" whose 4-byte argument blob is the node's output
 * count, and a kind out of range for tp_bad = 2.
 */
#include <kiln/kiln.h>

#include <stdio.h>
#include <string.h>

static void note(kiln_graph *g, const char *engine, const char *hook)
{
    const char *old = "";
    kiln_attrs *a = kiln_graph_attrs(g);
    kiln_attrs_get_string(a, "tp_engine_calls", &old);
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s%s:%s;", old, engine, hook);
    kiln_attrs_set_string(a, "tp_engine_calls", buf);
}

/* A graph whose string attribute tp_engine_fail names the engine makes its hooks fail. */
static bool told_to_fail(kiln_graph *g, const char *engine)
{
    const char *who = NULL;
    return kiln_attrs_get_string(kiln_graph_attrs(g), "tp_engine_fail", &who) &&
           strcmp(who, engine) == 0;
}

#define HOOK(eng, hook)                                                                            \
    static kiln_status eng##_##hook(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)                 \
    {                                                                                              \
        (void)inst;                                                                                \
        if (told_to_fail(g, #eng)) {                                                               \
            if (ctx)                                                                               \
                kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,                                \
                            "told to fail by tp_engine_fail");                                     \
            return KILN_ERR_INVALID;                                                               \
        }                                                                                          \
        note(g, #eng, #hook);                                                                      \
        return KILN_OK;                                                                            \
    }
HOOK(tp_first, original)
HOOK(tp_first, subgraph)
HOOK(tp_first, whole)
HOOK(tp_second, original)
HOOK(tp_second, whole)

static int64_t bad_mode(const kiln_graph *g, kiln_node_id n)
{
    int64_t v = 0;
    kiln_attrs_get_int(kiln_node_attrs(g, n), "tp_bad", &v);
    return v;
}

static kiln_status running_param(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_running_param *rp, kiln_error *err)
{
    (void)inst;
    (void)err;
    if (bad_mode(g, n) == 1) {
        rp->workspace_count = 99;
        return KILN_OK;
    }
    if (rp->output_count && rp->output_sizes[0] >= 0)
        rp->output_sizes[0] += 32;
    rp->workspace_count = 1;
    rp->workspace_sizes[0] = 64;
    return KILN_OK;
}

static kiln_status generate_task(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_task_desc *task, kiln_error *err)
{
    (void)inst;
    (void)err;
    if (bad_mode(g, n) == 2) {
        task->kind = 1000;
        return KILN_OK;
    }
    task->kind = KILN_TASK_KERNEL;
    task->kernel_name = strcmp(kiln_node_op_str(g, n), "Add") == 0 ? "tp.Add" : "tp.Relu";
    uint32_t nout = kiln_node_output_count(g, n);
    if (task->args && task->args_capacity >= sizeof(nout)) {
        memcpy(task->args, &nout, sizeof(nout));
        task->args_size = sizeof(nout);
    }
    return KILN_OK;
}

static kiln_status relu(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    (void)err;
    const float *x = a->inputs[0].data;
    float *y = a->outputs[0].data;
    for (size_t i = 0; i < a->outputs[0].nbytes / sizeof(float); i++)
        y[i] = x[i] > 0 ? x[i] : 0;
    return KILN_OK;
}

static kiln_status kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    (void)inst;
    if (strcmp(kiln_node_op_str(g, n), "Relu") != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "tp_engine: no kernel for %s",
                           kiln_node_op_str(g, n));
    *fn = relu;
    *state = NULL;
    return KILN_OK;
}

static const kiln_op_info first_ops[] = {
    {sizeof(kiln_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0},
    {sizeof(kiln_op_info), "Add", 1u << KILN_DT_FLOAT32, "ND,NCHW", 0},
};
static const kiln_op_info second_ops[] = {{sizeof(kiln_op_info), "Relu", 0, NULL, 0},
                                          {sizeof(kiln_op_info), "Cast", 0, NULL, 0}};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    /* registered low priority first: the host must order by priority */
    static const kiln_engine_desc second = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = "tp_second",
        .summary = "test engine (low priority)",
        .priority = 3,
        .op_count = 2,
        .ops = second_ops,
        .kernel_create = kernel_create,
        .optimize_original_graph = tp_second_original,
        .optimize_whole_graph = tp_second_whole,
    };
    static const kiln_engine_desc first = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = "tp_first",
        .summary = "test engine (high priority)",
        .priority = 7,
        .op_count = 2,
        .ops = first_ops,
        .optimize_subgraph = tp_first_subgraph,
        .kernel_create = kernel_create,
        .optimize_original_graph = tp_first_original,
        .optimize_whole_graph = tp_first_whole,
        .calc_op_running_param = running_param,
        .generate_task = generate_task,
    };
    kiln_status st = kiln_register_engine(r, &second);
    return st ? st : kiln_register_engine(r, &first);
}

KILN_PLUGIN_DEFINE("test.engine", "1.0", "MIT", "engines with every compiler hook", init, NULL)
