/*
 * plugin.c - libkiln_hccl.so (plugin "kiln.hccl"): the engine "hccl", GE's
 * HCCL engine (ops kernel lib ops_kernel_info_hccl): the collective
 * communication ops HcomAllReduce, HcomBroadcast, HcomAllGather,
 * HcomReduceScatter, HcomReduce, HcomAllToAllV, HcomSend, HcomReceive.
 *
 * Compile-only.  kiln runs one process on one device and has no collective
 * library, so these ops have no kernel; the engine declares them so that a
 * graph using them is placed, partitioned and built like any other (its
 * nodes get `hccl.<op>` kernel tasks, the memory-conflict passes see them on
 * their engine, as GE's HcclMemcpyPass expects).  Binding one for a run
 * fails with an error naming the node, the op and the engine.
 * Priority 5: below every other built-in engine (no op overlaps anyway; a
 * vendor engine that ships a real collective library wins over it).
 */
#include "basic_ops.h"

/* Every op of the table: refused when a runtime binds the node. */
static CPU_PREPARE(hccl_refuse)
{
    (void)state;
    return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                         "%s is a collective communication op of engine hccl, which is "
                         "compile-only: kiln has no collective library to run it (a vendor "
                         "engine providing %s can take the node)",
                         kiln_node_op_str(g, n), kiln_node_op_str(g, n));
}

/* Never reached: hccl_refuse fails every binding first. */
static CPU_KERNEL(hccl_unreachable)
{
    (void)state;
    return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "engine hccl cannot run collective ops");
}

#define HCCL_OP(name) {name, 0, hccl_refuse, hccl_unreachable, NULL}

static const cpu_op hccl_ops[] = {
    HCCL_OP("HcomAllReduce"),  HCCL_OP("HcomBroadcast"), HCCL_OP("HcomAllGather"),
    HCCL_OP("HcomReduceScatter"), HCCL_OP("HcomReduce"), HCCL_OP("HcomAllToAllV"),
    HCCL_OP("HcomSend"),       HCCL_OP("HcomReceive"),
};
static const uint32_t hccl_op_count = sizeof(hccl_ops) / sizeof(hccl_ops[0]);

CPU_ENGINE(hccl_engine,
           {
               .name = "hccl",
               .summary = "collective communication (compile-only): HcomAllReduce, HcomBroadcast, "
                          "HcomAllGather, HcomReduceScatter, HcomReduce, HcomAllToAllV, HcomSend, "
                          "HcomReceive",
               .priority = 5,
               .table = hccl_ops,
               .count = &hccl_op_count,
           })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    return hccl_engine_register(r, e);
}

KILN_PLUGIN_DEFINE("kiln.hccl", "0.1.0", "Apache-2.0",
                   "HCCL engine (engine hccl): collective communication ops, compile-only", init,
                   NULL)
