/*
 * test_embed_cache.c - the model cache through the embedding API
 * (kiln_embed.h, docs/model_cache.md), as an embedder uses it: the lookup
 * leaves the model's graph as imported (GE's MC7), a miss stores what the
 * compile built and kiln_model_cache_write copies exactly kiln_model_write's
 * bytes, a second model hits, the input key finds the compile before import,
 * and GE's key returns the model saved under it whatever the graph (MC6).
 * Only the installed header is used.
 */
#include "kiln_test.h"
#include <kiln/kiln_embed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char msg[2048];
static char dir[] = "/tmp/kiln-embed-cache-XXXXXX";

#define EXPECT_OK(call)                                                                        \
    do {                                                                                       \
        kiln_status st_ = (call);                                                              \
        if (st_ != KILN_OK) {                                                                  \
            kiln_error_format(err, msg, sizeof(msg));                                          \
            fprintf(stderr, "\n%s:%d: %s: %s\n", __FILE__, __LINE__, #call, msg);             \
        }                                                                                      \
        CU_ASSERT_EQUAL_FATAL(st_, KILN_OK);                                                   \
    } while (0)

static const char *in_dir(const char *name, char *buf)
{
    snprintf(buf, 600, "%s/%s", dir, name);
    return buf;
}

static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL;
    kiln_error *e = kiln_error_create();
    kiln_status st = kiln_input_read(path, &buf, len, e);
    kiln_error_destroy(e);
    return st == KILN_OK ? buf : NULL;
}

static bool same_files(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    kiln_free(x);
    kiln_free(y);
    return same;
}

static const char *model_path(const char *name, char *buf)
{
    snprintf(buf, 600, "%s/tests/data/run/%s", kiln_test_env("KILN_SOURCE_DIR", ".."), name);
    return buf;
}

static kiln_session *session(kiln_error *err, const char *k1, const char *v1, const char *k2,
                             const char *v2)
{
    kiln_session *s = kiln_session_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    EXPECT_OK(kiln_session_load_manifest(s, NULL, err));
    EXPECT_OK(kiln_session_set_option(s, k1, v1, err));
    if (k2)
        EXPECT_OK(kiln_session_set_option(s, k2, v2, err));
    return s;
}

static void test_automatic_key(void)
{
    kiln_error *err = kiln_error_create();
    char cache[600], mp[600], out1[600], plain[600], out2[600], rep[600], out3[600];
    kiln_session *s = session(err, "kiln.cache_dir", in_dir("c", cache), NULL, NULL);
    kiln_model *m = NULL;
    bool hit = true;
    /* the probe before import: nothing yet, but it records the input key */
    EXPECT_OK(kiln_session_cache_probe(s, model_path("add_relu.json", mp), NULL, NULL, 0, NULL,
                                       in_dir("out1.json", out1), NULL, &hit, err));
    CU_ASSERT_FALSE(hit);
    CU_ASSERT_STRING_EQUAL(kiln_session_cache_status(s, NULL, NULL, NULL), "disabled");
    EXPECT_OK(kiln_model_import(s, mp, NULL, &m, err));
    char *before = kiln_model_to_json(m, err);
    EXPECT_OK(kiln_model_cache_lookup(m, NULL, in_dir("out1.json", out1), NULL, &hit, err));
    CU_ASSERT_FALSE(hit);
    const char *key = NULL, *entry = NULL;
    CU_ASSERT_STRING_EQUAL(kiln_model_cache_status(m, &key, &entry, NULL), "miss");
    CU_ASSERT(key && strlen(key) == 64);
    char *after = kiln_model_to_json(m, err);
    CU_ASSERT(before && after && strcmp(before, after) == 0); /* MC7: the graph is untouched */
    kiln_free(before);
    kiln_free(after);
    CU_ASSERT_EQUAL(kiln_model_cache_write(m, out1, err), KILN_ERR_NOT_FOUND); /* nothing yet */
    kiln_error_clear(err);
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_OK(kiln_model_cache_store(m, err));
    EXPECT_OK(kiln_model_cache_write(m, out1, err));
    EXPECT_OK(kiln_model_write(m, in_dir("plain.json", plain), NULL, err));
    CU_ASSERT_TRUE(same_files(out1, plain));
    kiln_model_cache_status(m, NULL, &entry, NULL);
    CU_ASSERT(entry && strstr(entry, key) && strstr(entry, ".json"));
    kiln_model_destroy(m);

    /* a second model of the same file: a hit, the same bytes */
    EXPECT_OK(kiln_model_import(s, mp, NULL, &m, err));
    EXPECT_OK(kiln_model_cache_lookup(m, NULL, in_dir("out2.json", out2), NULL, &hit, err));
    CU_ASSERT_TRUE(hit);
    CU_ASSERT_STRING_EQUAL(kiln_model_cache_status(m, NULL, NULL, NULL), "hit");
    CU_ASSERT_TRUE(same_files(out2, plain));
    kiln_model_destroy(m);
    kiln_session_destroy(s);

    /* a fresh session finds it by the input key, before any import (the store
     * recorded the alias) */
    s = session(err, "kiln.cache_dir", cache, NULL, NULL);
    EXPECT_OK(kiln_session_cache_probe(s, mp, NULL, NULL, 0, NULL, in_dir("out3.json", out3), NULL,
                                       &hit, err));
    CU_ASSERT_TRUE(hit);
    CU_ASSERT_STRING_EQUAL(kiln_session_cache_status(s, NULL, NULL, NULL), "hit");
    CU_ASSERT_TRUE(same_files(out3, plain));
    EXPECT_OK(kiln_session_write_cache_report(s, mp, in_dir("r.json", rep), err));
    char *r = slurp(rep, NULL);
    CU_ASSERT(r && strstr(r, "\"model_cache\"") && strstr(r, "\"hit\""));
    kiln_free(r);
    /* other input shapes: another input key, no hit */
    const char *shape[] = {"x=2x3"};
    EXPECT_OK(kiln_session_cache_probe(s, mp, NULL, shape, 1, NULL, out3, NULL, &hit, err));
    CU_ASSERT_FALSE(hit);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

/* MC6: under a GE key, a model built from another graph is what loads. */
static void test_ge_key(void)
{
    kiln_error *err = kiln_error_create();
    char ge[600], mp[600], o1[600], o2[600], mp2[600];
    CU_ASSERT_EQUAL_FATAL(mkdir(in_dir("ge", ge), 0755), 0);
    kiln_session *s = session(err, "ge.graph_compiler_cache_dir", ge, "ge.graph_key",
                              "graph_key_flow_model1");
    kiln_model *m = NULL;
    bool hit = true;
    EXPECT_OK(kiln_model_import(s, model_path("add_relu.json", mp), NULL, &m, err));
    EXPECT_OK(kiln_model_cache_lookup(m, NULL, in_dir("g1.json", o1), NULL, &hit, err));
    CU_ASSERT_FALSE(hit);
    EXPECT_OK(kiln_model_compile(m, NULL, err));
    EXPECT_OK(kiln_model_cache_store(m, err));
    EXPECT_OK(kiln_model_cache_write(m, o1, err));
    kiln_model_destroy(m);
    /* another graph, the same key */
    FILE *f = fopen(in_dir("other.json", mp2), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"kiln_graph\": 1, \"name\": \"test_load_graph\", \"nodes\": [\n"
          " {\"name\": \"x\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, \"outputs\": "
          "[{\"shape\": [1], \"dtype\": \"float32\"}]},\n"
          " {\"name\": \"out\", \"type\": \"NetOutput\", \"inputs\": [\"x:0\"]}]}\n",
          f);
    fclose(f);
    EXPECT_OK(kiln_model_import(s, mp2, NULL, &m, err));
    EXPECT_OK(kiln_model_cache_lookup(m, NULL, in_dir("g2.json", o2), NULL, &hit, err));
    CU_ASSERT_TRUE(hit);
    CU_ASSERT_TRUE(same_files(o1, o2));
    kiln_model_destroy(m);
    kiln_session_destroy(s);

    /* MC8 through the API: a bad key is an error, status "error" */
    s = session(err, "ge.graph_compiler_cache_dir", ge, "ge.graph_key", "can/not/be/file/name");
    EXPECT_OK(kiln_model_import(s, mp, NULL, &m, err));
    CU_ASSERT_EQUAL(kiln_model_cache_lookup(m, NULL, o2, NULL, &hit, err), KILN_ERR_PARAM);
    CU_ASSERT_STRING_EQUAL(kiln_model_cache_status(m, NULL, NULL, NULL), "error");
    kiln_error_clear(err);
    kiln_model_destroy(m);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    static const kiln_test_case cases[] = {
        {"test_automatic_key", test_automatic_key},
        {"test_ge_key", test_ge_key},
        {NULL, NULL},
    };
    int rc = kiln_test_run("embed_cache", cases);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
