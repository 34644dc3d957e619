/*
 * plugin.c - registers MemoryAssigner and PlacedLowering, the passes of libkiln_mem_assign.so
 * (docs/memory_planning.md).  The planners themselves are other plugins'
 * components (kind memory-planner).
 */
#include "mem_assign.h"

extern const kiln_pass_desc kiln_memory_assigner_pass;
extern const kiln_pass_desc kiln_placed_lowering_pass;

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &kiln_memory_assigner_pass);
    return st == KILN_OK ? kiln_register_pass(r, &kiln_placed_lowering_pass) : st;
}

KILN_PLUGIN_DEFINE("kiln.mem_assign", "0.1.0", "Apache-2.0",
                   "MemoryAssigner: feature-map memory planned per memory symbol", init, NULL)
