/*
 * ctx.c - context lifetime and session options.
 */
#include "ctx.h"
#include "graph_int.h"
#include "plugin.h"
#include "checker.h"

kiln_ctx *kiln_ctx_create(void)
{
    kiln_ctx *ctx = kiln__calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    if (!kiln__intern_init(&ctx->strings))
        goto fail;
    /* The attribute keys the cached analyses read: an edit of one of them
     * invalidates the analysis (graph_int.h, attrs.c), an edit of any other
     * key keeps it. */
    static const char *const sched_keys[] = {"_kiln_id", "_kiln_stream_id", "_send_event_ids",
                                             "_recv_event_ids"};
    static const char *const symtab_keys[] = {"reuse_input",
                                              "reuse_input_index",
                                              "_parent_node_index",
                                              "_onnx_op",
                                              "_onnx_loop_carried",
                                              "_no_padding_continuous_output",
                                              "ref_var_src_var_name"};
    for (size_t i = 0; i < sizeof(sched_keys) / sizeof(sched_keys[0]); i++)
        kiln__intern_watch(&ctx->strings, sched_keys[i], KILN_WATCH_SCHED);
    for (size_t i = 0; i < sizeof(symtab_keys) / sizeof(symtab_keys[0]); i++)
        kiln__intern_watch(&ctx->strings, symtab_keys[i], KILN_WATCH_SYMTAB);
    ctx->registry = kiln__registry_create();
    ctx->checkers = kiln__checker_table_create();
    if (!ctx->registry || !ctx->checkers)
        goto fail;
    return ctx;
fail:
    kiln_ctx_destroy(ctx);
    return NULL;
}

void kiln_ctx_destroy(kiln_ctx *ctx)
{
    if (!ctx)
        return;
    kiln__checker_table_destroy(ctx->checkers);
    kiln__engine_index_destroy(ctx);
    kiln__registry_destroy(ctx->registry);
    for (uint32_t i = 0; i < ctx->nsession_options; i++) {
        kiln__free(ctx->session_options[i].key);
        kiln__free(ctx->session_options[i].value);
    }
    kiln__free(ctx->session_options);
    kiln__intern_free(&ctx->strings);
    kiln__free(ctx);
}

kiln_status kiln_ctx_set_option(kiln_ctx *ctx, const char *key, const char *value)
{
    for (uint32_t i = 0; i < ctx->nsession_options; i++) {
        if (strcmp(ctx->session_options[i].key, key) == 0) {
            char *v = kiln__strdup(value);
            if (!v)
                return KILN_ERR_NOMEM;
            kiln__free(ctx->session_options[i].value);
            ctx->session_options[i].value = v;
            return KILN_OK;
        }
    }
    if (!KILN_GROW(ctx->session_options, ctx->session_options_cap, ctx->nsession_options + 1))
        return KILN_ERR_NOMEM;
    char *k = kiln__strdup(key), *v = kiln__strdup(value);
    if (!k || !v) {
        kiln__free(k);
        kiln__free(v);
        return KILN_ERR_NOMEM;
    }
    ctx->session_options[ctx->nsession_options].key = k;
    ctx->session_options[ctx->nsession_options].value = v;
    ctx->nsession_options++;
    return KILN_OK;
}

const char *kiln_ctx_option(const kiln_ctx *ctx, const char *key)
{
    for (uint32_t i = 0; i < ctx->nsession_options; i++)
        if (strcmp(ctx->session_options[i].key, key) == 0)
            return ctx->session_options[i].value;
    return NULL;
}
