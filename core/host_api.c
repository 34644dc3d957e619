/*
 * host_api.c - the function table handed to every plugin's init.
 *
 * Generated from KILN_HOST_FUNCS (plugin-api/kiln/kiln_host_funcs.h) so that
 * every entry is type-checked against the function it points to.  The table
 * is append-only; the static assertion below freezes the ABI 1.0 prefix
 * length so that an accidental removal or reordering fails to compile.
 */
#include "plugin.h"

const kiln_host_api kiln__host_api = {
    .struct_size = sizeof(kiln_host_api),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
#define X(ret, name, member, params) .member = name,
    KILN_HOST_FUNCS(X)
#undef X
};

/* ABI 1.0 has this many entries; raise only by appending (and bump the minor). */
#define X(ret, name, member, params) +1
enum { KILN_HOST_FUNC_COUNT = 0 KILN_HOST_FUNCS(X) };
#undef X
_Static_assert(offsetof(kiln_host_api, status_name) == 8, "host table header changed");
_Static_assert(sizeof(kiln_host_api) == 8 + KILN_HOST_FUNC_COUNT * sizeof(void (*)(void)),
               "host table has padding or non-pointer members");
