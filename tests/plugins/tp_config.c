/*
 * tp_config.c - reads its manifest entry's "config" in init
 * (kiln_plugin_config; tests/core/test_manifest.c):
 *   "Name"       a JSON string: registers graph pass Name whose summary is
 *                "<manifest>|<json path>|<config text>|<AcmeDup known><NoSuchOp known><FakeOpVec known>"
 *   an object    init fails with a message naming the manifest and the path
 *   (none)       registers nothing
 */
#include <kiln/kiln.h>
#include <stdio.h>
#include <string.h>

static char pass_name[64], summary[1024];

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    (void)g;
    return KILN_PASS_NOT_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    const char *file = NULL, *jpath = NULL;
    const char *cfg = kiln_plugin_config(r, &file, &jpath);
    if (!cfg)
        return KILN_OK;
    size_t n = strlen(cfg);
    if (cfg[0] != '"' || n < 3 || n - 2 >= sizeof(pass_name))
        return kiln_errorf(e, KILN_ERR_INVALID, "%s: %s: expected a pass name, got %s", file, jpath,
                           cfg);
    memcpy(pass_name, cfg + 1, n - 2);
    pass_name[n - 2] = 0;
    snprintf(summary, sizeof(summary), "%s|%s|%s|%d%d%d", file, jpath, cfg,
             kiln_registrar_op_known(r, "AcmeDup"), kiln_registrar_op_known(r, "NoSuchOp"),
             kiln_registrar_op_known(r, "FakeOpVec"));
    static kiln_pass_desc d;
    memset(&d, 0, sizeof(d));
    d.struct_size = sizeof(d);
    d.kind = KILN_PASS_KIND_GRAPH;
    d.name = pass_name;
    d.summary = summary;
    d.run_graph = run;
    return kiln_register_pass(r, &d);
}

KILN_PLUGIN_DEFINE("test.config", "1.0", "MIT", "reads its manifest config", init, NULL)
