/* tp_wrong_major.c - a descriptor claiming ABI 2.0. */
#include <kiln/kiln.h>

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)r;
    (void)e;
    return KILN_OK;
}

static const kiln_plugin_desc desc = {sizeof(kiln_plugin_desc), 2, 0, "kiln.test.major2", "1",
                                      "MIT", "wrong major", "test", init, NULL, {0}};

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);
KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void)
{
    return &desc;
}
