/*
 * test_json_dump.c - kiln's JSON tree writer (core/json_dump.c) against
 * jansson's own: byte for byte on fixed and on random trees, the one-line
 * scalar arrays, the base indent, and a failing file.
 */
#include "kiln_test.h"
#include "base.h"
#include "json_dump.h"

#include <math.h>
#include <stdint.h>

static char *ours(const json_t *j, kiln_json_fmt fmt)
{
    kiln_jbuf b = {0};
    CU_ASSERT_TRUE_FATAL(kiln__json_dump(&b, j, &fmt));
    CU_ASSERT_TRUE_FATAL(kiln__jbuf_put(&b, "", 1));
    return b.buf;
}

static void same_as_jansson(const json_t *j, int step, int prec)
{
    char *want = json_dumps(j, JSON_INDENT(step) | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER |
                                   JSON_REAL_PRECISION(prec));
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    char *got = ours(j, (kiln_json_fmt){.step = step, .prec = prec});
    CU_ASSERT_STRING_EQUAL(got, want);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\nwant: %s\ngot:  %s\n", want, got);
    kiln__free(got);
    free(want);
}

static void test_scalars(void)
{
    static const double reals[] = {0.0, -0.0, 1.0, -1.5, 0.1, 1e20, 1e-5, 1.5e-300, 1e300,
                                   123456789012345678.0, 3.4028234663852886e38, 2.5e-7, 100.0,
                                   1e16, 1e17, 5e-324};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        for (int prec = 0; prec <= 17; prec += 1) {
            json_t *r = json_real(reals[i]);
            same_as_jansson(r, 2, prec);
            json_decref(r);
        }
    static const json_int_t ints[] = {0, 1, -1, 9, 10, -10, 1234567, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        json_t *v = json_integer(ints[i]);
        same_as_jansson(v, 2, 0);
        json_decref(v);
    }
    static const char text[] = "a\"b\\c/d\b\f\n\r\t\x01\x1f\x7f \xc3\xa9 \xe2\x82\xac";
    json_t *s = json_stringn(text, sizeof text - 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    same_as_jansson(s, 2, 0);
    json_decref(s);
    json_t *z = json_stringn("nul\0inside", 10); /* jansson writes \u0000 */
    same_as_jansson(z, 2, 0);
    json_decref(z);
    same_as_jansson(json_null(), 2, 0);
    same_as_jansson(json_true(), 2, 0);
    same_as_jansson(json_false(), 2, 0);
}

/* A random tree of depth at most @p depth; deterministic from *seed. */
static uint32_t rnd(uint32_t *seed)
{
    *seed = *seed * 1664525u + 1013904223u;
    return *seed >> 8;
}

static json_t *random_tree(uint32_t *seed, int depth)
{
    uint32_t k = rnd(seed) % (depth > 0 ? 9 : 6);
    switch (k) {
    case 0: return json_null();
    case 1: return json_boolean(rnd(seed) & 1);
    case 2: return json_integer((json_int_t)rnd(seed) - (1 << 23));
    case 3: return json_real(ldexp((double)rnd(seed) - (1 << 23), (int)(rnd(seed) % 200) - 100));
    case 4:
    case 5: {
        char buf[12];
        size_t n = rnd(seed) % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(1 + rnd(seed) % 126);
        return json_stringn(buf, n);
    }
    case 6:
    case 7: {
        json_t *a = json_array();
        for (uint32_t i = 0, n = rnd(seed) % 5; i < n; i++)
            json_array_append_new(a, random_tree(seed, depth - 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (uint32_t i = 0, n = rnd(seed) % 5; i < n; i++) {
            char key[8];
            snprintf(key, sizeof key, "k%u", rnd(seed) % 50);
            json_object_set_new(o, key, random_tree(seed, depth - 1));
        }
        return o;
    }
    }
}

static void test_random_trees(void)
{
    uint32_t seed = 12345;
    for (int i = 0; i < 2000; i++) {
        json_t *t = random_tree(&seed, 5);
        same_as_jansson(t, 1 + i % 4, i % 18);
        json_decref(t);
    }
}

static void test_inline_and_base(void)
{
    json_t *j = json_pack("{s:[i,i,i],s:[],s:{},s:[[i],s],s:[s,f,n]}", "shape", 1, 3, 224,
                          "empty", "obj", "nest", 2, "x", "mix", "a, b", 0.5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    char *got = ours(j, (kiln_json_fmt){.step = 2, .base = 4, .inline_scalars = true});
    CU_ASSERT_STRING_EQUAL(got, "{\n"
                                "      \"shape\": [1, 3, 224],\n"
                                "      \"empty\": [],\n"
                                "      \"obj\": {},\n"
                                "      \"nest\": [\n"
                                "        [2],\n"
                                "        \"x\"\n"
                                "      ],\n"
                                "      \"mix\": [\"a, b\", 0.5, null]\n"
                                "    }");
    kiln__free(got);
    json_decref(j);
}

/* Streamed to a file in blocks: the same text as the buffer, and a failed
 * write is reported. */
static void test_file(void)
{
    json_t *a = json_array();
    for (int i = 0; i < 50000; i++)
        json_array_append_new(a, json_pack("{s:i,s:s}", "i", i, "s", "value"));
    char *want = json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    FILE *f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_TRUE(kiln__json_dumpf(f, a, 2));
    long n = ftell(f);
    CU_ASSERT_EQUAL((size_t)n, strlen(want) + 1);
    char *got = calloc(1, (size_t)n + 1);
    rewind(f);
    CU_ASSERT_EQUAL(fread(got, 1, (size_t)n, f), (size_t)n);
    CU_ASSERT_EQUAL(memcmp(got, want, strlen(want)), 0);
    CU_ASSERT_EQUAL(got[n - 1], '\n');
    free(got);
    free(want);
    fclose(f);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        CU_ASSERT_FALSE(kiln__json_dumpf(full, a, 2));
        fclose(full);
    }
    json_decref(a);
}

int main(void)
{
    static const kiln_test_case tests[] = {
        {"test_scalars", test_scalars},
        {"test_random_trees", test_random_trees},
        {"test_inline_and_base", test_inline_and_base},
        {"test_file", test_file},
        {NULL, NULL},
    };
    return kiln_test_run("json_dump", tests);
}
