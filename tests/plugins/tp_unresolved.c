/* tp_unresolved.c - references a symbol nothing defines: RTLD_NOW must
 * reject it at load time. */
#include <kiln/kiln.h>

extern int kiln_test_symbol_that_does_not_exist(void);

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)r;
    (void)e;
    return kiln_test_symbol_that_does_not_exist() ? KILN_OK : KILN_ERR_INTERNAL;
}

KILN_PLUGIN_DEFINE("kiln.test.unresolved", "1.0.0", "MIT", "unresolved", init, NULL)
