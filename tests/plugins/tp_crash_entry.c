/* tp_crash_entry.c - a plugin whose entry function crashes. */
#include <kiln/kiln.h>

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);

__attribute__((no_sanitize_undefined)) const kiln_plugin_desc *kiln_plugin_entry(void)
{
    /* the pointer itself is volatile: the optimiser cannot see the null and drop
     * the store (or the whole function) as undefined behaviour */
    volatile int *volatile p = 0;
    *p = 42;
    return NULL;
}
