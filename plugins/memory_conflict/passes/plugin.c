/*
 * plugin.c - registers the memory-conflict passes of
 * libkiln_mem_conflict_passes.so (GE compiler/graph/passes/memory_conflict;
 * docs/memory_conflict_passes.md).
 *
 * Requires/preserves: nothing (registration only).  Complexity: O(1).
 */
#include "mc_passes.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    const kiln_pass_desc *const passes[] = {
        &kiln_mc_hccl_memcpy_pass,     &kiln_mc_hccl_continuous_memcpy_pass,
        &kiln_mc_subgraph_pass,        &kiln_mc_inplace_support_check_pass,
        &kiln_mc_atomic_addr_clean_pass, &kiln_mc_memcpy_addr_async_pass,
        &kiln_mc_mark_same_addr_pass,  &kiln_mc_set_input_output_offset_pass,
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
        kiln_status st = kiln_register_pass(r, passes[i]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

KILN_PLUGIN_DEFINE("kiln.mem_conflict_passes", "0.1.0", "Apache-2.0",
                   "GE's dedicated memory-conflict passes (HcclMemcpyPass, SubgraphPass, "
                   "AtomicAddrCleanPass, ...)",
                   init, NULL)
