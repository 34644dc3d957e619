/* tp_short_size.c - a descriptor whose struct_size is too small. */
#include <kiln/kiln.h>

static const kiln_plugin_desc desc = {8, KILN_ABI_MAJOR, 0, "kiln.test.short", "1", "MIT",
                                      "short", "test", NULL, NULL, {0}};

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);
KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void)
{
    return &desc;
}
