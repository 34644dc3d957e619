/*
 * test_lazy_plugins.c - deferred plugin loading (docs/manifest.md, "Deferred
 * loading"): a required manifest plugin whose `provides` declares only
 * engines or runtimes is opened on first need (a compile, an engine query, a
 * listing), not when the manifest loads; its load failure is the failing
 * command's error, named by the manifest and the entry, and stays so.
 * /proc/self/maps tells whether a plugin file is mapped.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"
#include <kiln/kiln_embed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/kiln-lazy-XXXXXX";
static char msg[KILN_ERROR_TEXT_SIZE];

static const char *emsg(const kiln_error *err)
{
    kiln_error_format(err, msg, sizeof(msg));
    return msg;
}

/* Is a file whose name ends in @p name mapped into this process? */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    size_t n = strlen(name);
    while (f && !found && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        size_t l = strlen(line);
        found = l >= n && strcmp(line + l - n, name) == 0;
    }
    if (f)
        fclose(f);
    return found;
}

/* Write manifest @p name in the scratch directory listing plugin @p plugin
 * (in the test plugin directory) with `provides` @p provides. */
static const char *manifest(const char *name, const char *plugin, const char *provides)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"kiln_manifest\": 1, \"plugins\": [{\"path\": \"%s/%s\", \"provides\": %s}]}",
            kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"), plugin, provides);
    fclose(f);
    return path;
}

static const char *model_path(void)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/run/add_relu.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    return path;
}

/* The engine plugin maps on the first engine query, not at manifest load. */
static void test_lazy_engine_on_query(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    const char *m = manifest("ok.json", "libtp_engine.so",
                             "{\"engines\": [\"tp_first\", \"tp_second\"]}");
    CU_ASSERT_FALSE(mapped("/libtp_engine.so"));
    CU_ASSERT_EQUAL_FATAL(kiln_session_load_manifest(s, m, err), KILN_OK);
    CU_ASSERT_FALSE(mapped("/libtp_engine.so"));
    kiln_model *md = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_model_import(s, model_path(), NULL, &md, err), KILN_OK);
    CU_ASSERT_FALSE(mapped("/libtp_engine.so")); /* importing needs no engine */
    kiln_graph *g = kiln_model_graph(md);
    kiln_node_id relu = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (strcmp(kiln_node_op_str(g, n), "Relu") == 0)
            relu = n;
    CU_ASSERT_FATAL(relu != 0);
    const char *e = kiln_engine_for_node(g, relu);
    CU_ASSERT(mapped("/libtp_engine.so"));
    CU_ASSERT(e && strcmp(e, "tp_first") == 0);
    CU_ASSERT_EQUAL(kiln_session_plugin_count(s), 1);
    kiln_model_destroy(md);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* A broken deferred plugin: the manifest loads, an engine query sees no
 * engine, and every compile fails naming the manifest and the entry. */
static void test_lazy_engine_failure(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    const char *m = manifest("abi.json", "libtp_wrong_major.so", "{\"engines\": [\"tp_x\"]}");
    CU_ASSERT_EQUAL_FATAL(kiln_session_load_manifest(s, m, err), KILN_OK);
    kiln_model *md = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_model_import(s, model_path(), NULL, &md, err), KILN_OK);
    kiln_graph *g = kiln_model_graph(md);
    CU_ASSERT_PTR_NULL(kiln_engine_for_node(g, kiln_graph_next_node(g, 0)));
    for (int i = 0; i < 2; i++) { /* the failure is kept, not forgotten */
        kiln_error_clear(err);
        CU_ASSERT_EQUAL(kiln_model_compile(md, NULL, err), KILN_ERR_VERSION);
        emsg(err);
        if (!strstr(msg, "abi.json: $.plugins[0].path: ") || !strstr(msg, "ABI 2.0 but host is"))
            fprintf(stderr, "\ngot '%s'\n", msg);
        CU_ASSERT(strstr(msg, "abi.json: $.plugins[0].path: ") != NULL);
        CU_ASSERT(strstr(msg, "libtp_wrong_major.so: ABI 2.0 but host is") != NULL);
    }
    kiln_model_destroy(md);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* Entries that load at once: an optional plugin, one without `provides`,
 * one that declares a pass; and a base + child listing one deferred file. */
static void test_lazy_which_defer(void)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    const char *m = manifest("passes.json", "libtp_good.so", "{\"passes\": [\"x\"]}");
    /* declares a pass: loads now, so the wrong declaration fails now */
    CU_ASSERT_EQUAL(kiln_session_load_manifest(s, m, err), KILN_ERR_INVALID);
    CU_ASSERT(strstr(emsg(err), "declared-vs-registered mismatch") != NULL);
    kiln_session_destroy(s);

    char base[4200], child[4200];
    snprintf(base, sizeof(base), "%s", manifest("base.json", "libtp_engine.so",
                                                "{\"engines\": [\"tp_first\", \"tp_second\"]}"));
    snprintf(child, sizeof(child), "%s/child.json", dir);
    FILE *f = fopen(child, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"kiln_manifest\": 1, \"extends\": \"base.json\", \"plugins\": [{\"path\": "
               "\"%s/libtp_engine.so\", \"provides\": {\"engines\": [\"tp_first\", "
               "\"tp_second\"]}}], \"engines\": [\"tp_second\"]}",
            kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    fclose(f);
    kiln_error_clear(err);
    s = kiln_session_create();
    /* "engines" names tp_second: the manifest load opens the plugin, once */
    CU_ASSERT_EQUAL(kiln_session_load_manifest(s, child, err), KILN_OK);
    if (kiln_error_code(err))
        fprintf(stderr, "\n%s\n", emsg(err));
    CU_ASSERT_EQUAL(kiln_session_plugin_count(s), 1);
    CU_ASSERT(kiln_session_has_component(s, "engine", "tp_first"));
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    static const kiln_test_case cases[] = {
        {"test_lazy_engine_on_query", test_lazy_engine_on_query},
        {"test_lazy_engine_failure", test_lazy_engine_failure},
        {"test_lazy_which_defer", test_lazy_which_defer},
        {NULL, NULL},
    };
    int rc = kiln_test_run("lazy_plugins", cases);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
