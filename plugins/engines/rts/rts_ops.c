/*
 * rts_ops.c - the rts engine's op table (cpu_ops_rts[]): the stream, event
 * and copy nodes that later compiler stages insert (GE's DNN_VM_RTS ops).
 *
 * On the sequential runtime everything runs on one stream, in topological
 * order, so:
 *   MemcpyAsync, MemcpyAddrAsync  copy input 0 to output 0 (a real copy);
 *   Send, Recv                    nothing to do: one stream is already
 *                                 ordered (a multi-stream runtime records /
 *                                 waits for the node's event);
 *   StreamActive                  nothing to do: the only stream is active;
 *   StreamSwitch                  refused at load: choosing which stream runs
 *                                 needs the multi-stream runtime;
 *   CopyH2D, CopyD2H, CopyD2D     copies between memory types (PlacedLowering,
 *                                 docs/memory_planning.md): input 0 to output
 *                                 0, each in its own type's arena (a real copy);
 *   SyncStream                    nothing to do: the node's stream ran every
 *                                 earlier task before it (each runtime runs a
 *                                 stream's tasks in order), which is what the
 *                                 copy after it waits for;
 *   FreeMemory                    nothing to do on a static plan: its input's
 *                                 life ends at this node, which the planner
 *                                 already counts (it reads the input).
 * Their tasks (generate_task) carry the real meaning: MEMCPY, EVENT_RECORD /
 * EVENT_WAIT with the event id, STREAM_ACTIVE, STREAM_SWITCH with the
 * target stream (rts_task_fill).
 */
#include "rts_ops.h"

#include <string.h>

static CPU_KERNEL(rts_copy)
{
    (void)state;
    return cpu_copy_through(a, err);
}

static CPU_KERNEL(rts_nop)
{
    (void)state;
    (void)a;
    (void)err;
    return KILN_OK;
}

static CPU_PREPARE(rts_stream_switch_prepare)
{
    (void)state;
    return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                         "StreamSwitch chooses between streams at run time; the sequential "
                         "runtime runs one stream (a multi-stream runtime executes it)");
}

const cpu_op cpu_ops_rts[] = {
    {"MemcpyAsync", CPU_FIXED, NULL, rts_copy, NULL},
    {"MemcpyAddrAsync", CPU_FIXED, NULL, rts_copy, NULL},
    {"Send", 0, NULL, rts_nop, NULL},
    {"Recv", 0, NULL, rts_nop, NULL},
    {"StreamActive", 0, NULL, rts_nop, NULL},
    {"StreamSwitch", 0, rts_stream_switch_prepare, rts_nop, NULL},
    {"CopyH2D", CPU_FIXED, NULL, rts_copy, NULL},
    {"CopyD2H", CPU_FIXED, NULL, rts_copy, NULL},
    {"CopyD2D", CPU_FIXED, NULL, rts_copy, NULL},
    {"SyncStream", 0, NULL, rts_nop, NULL},
    {"FreeMemory", 0, NULL, rts_nop, NULL},
};

const uint32_t cpu_ops_rts_count = sizeof(cpu_ops_rts) / sizeof(cpu_ops_rts[0]);

/* First value of the int (or int list) attribute @p key, else @p dflt. */
static uint32_t attr_first(const kiln_graph *g, kiln_node_id n, const char *key, uint32_t dflt)
{
    const int64_t *v;
    uint32_t c;
    if (cpu_attr_ints(g, n, key, &v, &c))
        return c && v[0] >= 0 && v[0] <= UINT32_MAX ? (uint32_t)v[0] : dflt;
    int64_t x = cpu_attr_int(g, n, key, -1);
    return x >= 0 && x <= UINT32_MAX ? (uint32_t)x : dflt;
}

void rts_task_fill(const kiln_graph *g, kiln_node_id n, kiln_task_desc *task)
{
    const char *op = kiln_node_op_str(g, n);
    if (strncmp(op, "Memcpy", 6) == 0 || strcmp(op, "CopyH2D") == 0 ||
        strcmp(op, "CopyD2H") == 0 || strcmp(op, "CopyD2D") == 0) {
        task->kind = KILN_TASK_MEMCPY;
    } else if (strcmp(op, "Send") == 0) {
        task->kind = KILN_TASK_EVENT_RECORD;
        task->event_id = attr_first(g, n, "send_event_ids", 0);
    } else if (strcmp(op, "Recv") == 0) {
        task->kind = KILN_TASK_EVENT_WAIT;
        task->event_id = attr_first(g, n, "recv_event_ids", 0);
    } else if (strcmp(op, "StreamActive") == 0) {
        task->kind = KILN_TASK_STREAM_ACTIVE;
    } else if (strcmp(op, "StreamSwitch") == 0) {
        task->kind = KILN_TASK_STREAM_SWITCH;
        task->target_stream_id = attr_first(g, n, "active_stream_list", 0);
    } else {
        return;
    }
    task->kernel_name = NULL;
}
