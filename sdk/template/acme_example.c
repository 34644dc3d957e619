/*
 * acme_example.c - a vendor node pass built out of tree against the kiln SDK.
 *
 * AcmeExamplePass collapses Relu -> Relu chains (relu(relu(x)) == relu(x)):
 * the second Relu is isolated (its consumers re-fed from the first) and
 * deleted through GEPass, which re-passes the neighbours so longer chains
 * collapse in one sweep.  Every surviving Relu gets the vendor attribute
 * "acme_fused" so a test can see the pass ran.
 *
 * Build: see CMakeLists.txt (find_package(kiln) + kiln_add_plugin).
 * Only <kiln/kiln.h> is included; every kiln_* call goes through the host
 * table handed to the plugin at load time, so the .so links against nothing.
 */
#include <kiln/kiln.h>
#include <string.h>

static bool is_relu(kiln_graph *g, kiln_node_id n)
{
    return strcmp(kiln_node_op_str(g, n), "Relu") == 0;
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    if (!is_relu(g, n))
        return KILN_OK;
    kiln_attrs_set_bool(kiln_node_attrs_mut(g, n), "acme_fused", true);
    kiln_anchor src = kiln_node_input_peer(g, n, 0);
    if (!src.node || !is_relu(g, src.node))
        return KILN_OK;
    static const int32_t io_map[] = {0};
    kiln_pass_explain(ctx, g, n, "relu(relu(x)) == relu(x)");
    return kiln_pass_isolate_and_delete(ctx, g, n, io_map, 1, false);
}

static const kiln_pass_desc acme_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "AcmeExamplePass",
    .summary = "collapse Relu->Relu chains (vendor example)",
    .run_node = run,
};

static kiln_status init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err)
{
    (void)host;
    (void)err;
    return kiln_register_pass(reg, &acme_pass);
}

KILN_PLUGIN_DEFINE("com.acme.example", "0.1.0", "Apache-2.0", "ACME example fusion", init, NULL)
