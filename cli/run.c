/*
 * run.c - `kiln run`: import or load the model, bind the inputs, compile,
 * execute on a runtime component.  (Being written: until a runtime plugin is
 * loaded it says which component is missing.)
 */
#include "cli.h"

int kiln_cli_run(kiln_cli *c)
{
    if (c->npositional != 1) {
        fprintf(stderr, "kiln run: expected one MODEL argument\n");
        return 2;
    }
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    int rc = 1;
    if (kiln_cli_pipeline(c, ctx, &p, &err) != KILN_OK)
        kiln_cli_fail(&err);
    else
        fprintf(stderr, "kiln run: no loaded plugin provides a runtime (a runtime and the CPU "
                        "engine execute the model); add them to the manifest\n");
    kiln_pipeline_clear(&p);
    kiln_ctx_destroy(ctx);
    return rc;
}
