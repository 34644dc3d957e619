/*
 * plugin.c - libkiln_rts.so (plugin "kiln.rts"): the engine "rts", GE's
 * runtime-service engine: stream and event control nodes and the copies
 * later stages insert (rts_ops.c).  Priority 20.  Its optimize_subgraph
 * merges back-to-back copies of its partitions (rts_opt.c).
 */
#include "rts_ops.h"

CPU_ENGINE(rts_engine,
           {
               .name = "rts",
               .summary = "stream and event control: MemcpyAsync, MemcpyAddrAsync, Send, Recv, "
                          "StreamActive, StreamSwitch; copies between memory types: CopyH2D, "
                          "CopyD2H, CopyD2D, SyncStream, FreeMemory",
               .priority = 20,
               .table = cpu_ops_rts,
               .count = &cpu_ops_rts_count,
               .task_fill = rts_task_fill,
               .optimize_subgraph = rts_optimize_subgraph,
               .optimize_subgraph_wanted = rts_optimize_subgraph_wanted,
           })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    return rts_engine_register(r, e);
}

KILN_PLUGIN_DEFINE("kiln.rts", "0.1.0", "Apache-2.0",
                   "rts engine (engine rts): stream/event control and copies", init, NULL)
