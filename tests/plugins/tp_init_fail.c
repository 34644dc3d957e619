/* tp_init_fail.c - init fails with a message. */
#include <kiln/kiln.h>

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)r;
    return kiln_errorf(e, KILN_ERR_PLUGIN_INIT, "device /dev/acme0 not present");
}

KILN_PLUGIN_DEFINE("kiln.test.initfail", "1.0.0", "MIT", "init fails", init, NULL)
