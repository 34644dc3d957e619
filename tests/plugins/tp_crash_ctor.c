/* tp_crash_ctor.c - a plugin whose constructor crashes (runs inside dlopen). */
#include <kiln/kiln.h>

__attribute__((constructor, no_sanitize_undefined)) static void crash_on_load(void)
{
    /* the pointer itself is volatile: the optimiser cannot see the null and drop
     * the store (or the whole function) as undefined behaviour */
    volatile int *volatile p = 0;
    *p = 42;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)r, (void)e;
    return KILN_OK;
}

KILN_PLUGIN_DEFINE("kiln.test.crash_ctor", "1.0.0", "MIT", "crashes in a constructor", init, NULL)
