/*
 * plugin.c - registers the passes of libkiln_partition.so: EnginePlacer and
 * EnginePartitioner (the partition stage; docs/partition.md).
 */
#include "partition.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &kp_engine_placer);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &kp_engine_partitioner);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.partition", "0.1.0", "Apache-2.0",
                   "engine placement and GE's engine partitioning", init, NULL)
