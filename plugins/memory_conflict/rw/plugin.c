/*
 * plugin.c - registers the passes of libkiln_mem_rw_conflict.so: GE's
 * semantic-level read/write conflict handling (docs/memory_rw_conflict.md).
 */
#include "rw_conflict.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &kiln_handle_memory_rw_conflict_pass);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &kiln_check_rw_conflict_pass);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.mem_rw_conflict", "0.1.0", "Apache-2.0",
                   "GE HandleMemoryRWConflict / CheckRWConflict: Identity copies for "
                   "read/write memory conflicts",
                   init, NULL)
