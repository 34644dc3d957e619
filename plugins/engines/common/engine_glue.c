/*
 * engine_glue.c - one op table -> one engine (cpu_engine.h).
 *
 * Every built-in engine registers through cpu_engine_register(): its
 * kiln_op_info table is derived from its cpu_op table (first entry of an op
 * type wins), kernel_create finds the node's cpu_op by op type, runs its
 * prepare() and hands the runtime a small binding {op, state} with a
 * trampoline kernel; kernel_destroy calls release() and frees the binding.
 * calc_op_running_param keeps the host's descriptor sizes and declares no
 * workspace (the kernels size their scratch in prepare()); generate_task
 * emits one kernel task "<engine>.<op>", which the engine's task_fill may
 * turn into another kind (rts).
 */
#include "cpu_util.h"

#include <stdio.h>
#include <string.h>

const cpu_op *cpu_table_find(const cpu_op *table, uint32_t count, const char *op_type)
{
    if (!op_type)
        return NULL;
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(table[i].op_type, op_type) == 0)
            return &table[i];
    return NULL;
}

void cpu_engine_fill(cpu_engine *e)
{
    const cpu_engine_def *d = &e->def;
    if (*d->count > CPU_ENGINE_MAX_OPS) {
        e->count = *d->count; /* refused by cpu_engine_register */
        return;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < *d->count; i++) {
        const cpu_op *op = &d->table[i];
        snprintf(e->task_names[i], CPU_TASK_NAME_MAX, "%s.%s", d->name, op->op_type);
        if (cpu_table_find(d->table, *d->count, op->op_type) != op)
            continue; /* listed twice: the first wins */
        e->ops[k++] =
            (kiln_op_info){sizeof(kiln_op_info), op->op_type, op->dtype_mask, d->formats, 0};
    }
    e->count = k;
}

typedef struct cpu_binding {
    const cpu_op *op;
    void *state;
} cpu_binding;

static kiln_status run_bound(void *kernel_state, const kiln_kernel_args *args, kiln_error *err)
{
    const cpu_binding *b = kernel_state;
    return b->op->run(b->state, args, err);
}

static kiln_status glue_kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                      kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    const cpu_engine *e = inst;
    const char *type = kiln_node_op_str(g, n);
    const cpu_op *op = cpu_table_find(e->def.table, *e->def.count, type);
    if (!op || !op->run)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node %s: the %s engine has no kernel for op %s",
                           kiln_node_name_str(g, n), e->def.name, type);
    cpu_binding *b = kiln_alloc(sizeof(*b));
    if (!b)
        return kiln_errorf(err, KILN_ERR_NOMEM, "node %s: out of memory", kiln_node_name_str(g, n));
    b->op = op;
    b->state = NULL;
    if (op->prepare) {
        kiln_status st = op->prepare(g, n, &b->state, err);
        if (st != KILN_OK) {
            if (op->release && b->state)
                op->release(b->state);
            kiln_free(b);
            return st;
        }
    }
    *fn = run_bound;
    *state = b;
    return KILN_OK;
}

static void glue_kernel_destroy(void *inst, void *state)
{
    (void)inst;
    cpu_binding *b = state;
    if (!b)
        return;
    if (b->op->release && b->state)
        b->op->release(b->state);
    kiln_free(b);
}

static kiln_status glue_running_param(void *inst, const kiln_graph *g, kiln_node_id n,
                                      kiln_running_param *rp, kiln_error *err)
{
    const cpu_engine *e = inst;
    if (!cpu_table_find(e->def.table, *e->def.count, kiln_node_op_str(g, n)))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: the %s engine has no op %s",
                           kiln_node_name_str(g, n), e->def.name, kiln_node_op_str(g, n));
    rp->workspace_count = 0; /* scratch is sized by prepare() */
    return KILN_OK;
}

static kiln_status glue_generate_task(void *inst, const kiln_graph *g, kiln_node_id n,
                                      kiln_task_desc *task, kiln_error *err)
{
    const cpu_engine *e = inst;
    const char *type = kiln_node_op_str(g, n);
    const cpu_op *op = cpu_table_find(e->def.table, *e->def.count, type);
    if (!op)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node %s: the %s engine has no task for op %s", kiln_node_name_str(g, n),
                           e->def.name, type);
    task->kind = KILN_TASK_KERNEL;
    task->kernel_name = e->task_names[op - e->def.table];
    if (e->def.task_fill)
        e->def.task_fill(g, n, task);
    return KILN_OK;
}

kiln_status cpu_engine_register(kiln_registrar *r, cpu_engine *e,
                                kiln_status (*create)(const kiln_options *, kiln_error *, void **),
                                kiln_error *err)
{
    if (e->count > CPU_ENGINE_MAX_OPS)
        return kiln_errorf(err, KILN_ERR_LIMIT, "%s engine: %u op entries, more than %d",
                           e->def.name, e->count, CPU_ENGINE_MAX_OPS);
    const kiln_engine_desc engine = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = e->def.name,
        .summary = e->def.summary,
        .priority = e->def.priority,
        .op_count = e->count,
        .ops = e->ops,
        .create = create,
        .optimize_subgraph = e->def.optimize_subgraph,
        .kernel_create = glue_kernel_create,
        .kernel_destroy = glue_kernel_destroy,
        .optimize_original_graph = e->def.optimize_original_graph,
        .optimize_whole_graph = e->def.optimize_whole_graph,
        .calc_op_running_param = glue_running_param,
        .generate_task = glue_generate_task,
        .optimize_subgraph_wanted = e->def.optimize_subgraph_wanted,
    };
    return kiln_register_engine(r, &engine);
}
