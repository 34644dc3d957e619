/*
 * plugin.c - registers the conditional memory-layout-conflict checkers of
 * libkiln_mem_conflict_checkers.so, in the order of GE_SEMANTICS.md 3.6.
 * HandleMemoryLayoutConflict (libkiln_mem_layout_conflict.so) finds them
 * through the kernel's checker table (kiln_checker_find / kiln_checker_run).
 */
#include "checkers.h"

static const kiln_checker_desc *const all[] = {
    &mlc_not_support_refresh_input,      &mlc_not_support_refresh_output,
    &mlc_user_in_and_continuous,         &mlc_user_in_and_nopad_output,
    &mlc_user_in_and_nopad_input,        &mlc_user_in_and_rts_output,
    &mlc_user_in_and_unrefresh_output,   &mlc_user_out_and_continuous_input,
    &mlc_user_out_and_immutable_output,  &mlc_user_out_and_unrefresh_input,
    &mlc_user_out_and_unrefresh_output,  &mlc_immutable_and_continuous_output,
    &mlc_immutable_and_nopad_input,      &mlc_immutable_and_rts_output,
    &mlc_cont_in_and_cont_in,            &mlc_cont_out_and_cont_out,
    &mlc_nopad_out_and_nopad_out,        &mlc_nopad_in_and_nopad_in,
    &mlc_cont_out_and_cont_in,           &mlc_nopad_in_and_nopad_out,
    &mlc_continuous_and_rts,             &mlc_rts_in_and_rts_in,
    &mlc_rts_in_and_rts_out,             &mlc_rts_out_and_rts_out,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        kiln_status st = kiln_register_checker(r, all[i]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

KILN_PLUGIN_DEFINE("kiln.mem_conflict_checkers", "0.1.0", "Apache-2.0",
                   "GE's conditional memory-layout-conflict checkers", init, NULL)
