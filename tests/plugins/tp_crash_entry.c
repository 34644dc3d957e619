/* tp_crash_entry.c - a plugin whose entry function crashes. */
#include <kiln/kiln.h>

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);

__attribute__((no_sanitize_undefined)) const kiln_plugin_desc *kiln_plugin_entry(void)
{
    volatile int *p = (volatile int *)0;
    *p = 42;
    return NULL;
}
