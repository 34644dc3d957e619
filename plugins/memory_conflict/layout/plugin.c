/*
 * plugin.c - registers HandleMemoryLayoutConflict (libkiln_mem_layout_conflict.so).
 * The conditional checkers it consults live in libkiln_mem_conflict_checkers.so
 * (../checkers); without them every conditional pair is "no conflict".
 */
#include "mlc_pass.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(r, &mlc_handle_memory_layout_conflict_pass);
}

KILN_PLUGIN_DEFINE("kiln.mem_layout_conflict", "0.1.0", "Apache-2.0",
                   "HandleMemoryLayoutConflict: GE's memory layout conflict pass", init, NULL)
