/*
 * plugin.c - libkiln_hostcpu.so (plugin "kiln.hostcpu"): the engine
 * "hostcpu", GE's host-CPU engine: shape computation, data movement and
 * Identity (host_ops.c).  Priority 10, the lowest of the built-in engines but
 * hccl's compile-only one: the fallback, as host CPU is in GE.  Its
 * optimize_original_graph removes same-shape reshape-likes and folds the
 * static dims picked out of Shapes (host_fold.c).  Data, Const, NetOutput and If are
 * handled by the runtime itself (docs/engines.md).
 */
#include "basic_ops.h"
#include "host_opt.h"

CPU_ENGINE(
    host_engine,
    {
        .name = "hostcpu",
        .summary = "host-CPU kernels: shape computation (Shape, Reshape, Squeeze, ...), data "
                   "movement (Transpose, Concat, Gather, Slice, Pad), Identity",
        .priority = 10,
        .table = cpu_ops_host,
        .count = &cpu_ops_host_count,
        .optimize_original_graph = host_optimize_original,
    })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    return host_engine_register(r, e);
}

KILN_PLUGIN_DEFINE("kiln.hostcpu", "0.1.0", "Apache-2.0",
                   "host-CPU engine (engine hostcpu): shape computation, data movement", init, NULL)
