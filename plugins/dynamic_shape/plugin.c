/*
 * plugin.c - registers the passes of libkiln_dynamic_shape.so:
 * StagePartitioner and DynamicShapePartitioner (docs/dynamic_shape.md).
 */
#include "dynshape.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &kiln_stage_partition_pass);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &kiln_dynamic_shape_partition_pass);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.dynamic_shape", "0.1.0", "Apache-2.0",
                   "StagePartitioner and DynamicShapePartitioner", init, NULL)
