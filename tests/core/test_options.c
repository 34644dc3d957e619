/*
 * test_options.c - typed option sets (core/options.c): declared defaults,
 * text parsing per type, ranges, unknown keys, the public getters, schemas
 * with a different struct_size (older / newer plugin minors) and allocation
 * failure.
 */
#include "kiln_test.h"
#include "options.h"
#include <string.h>

static const kiln_option_def schema[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "max", "4", "upper bound", 0, 10},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "verbose", "true", "chatty", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_FLOAT, "ratio", "0.5", "a ratio", 0, 1},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "mode", NULL, "a mode", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_INT, "unbounded", NULL, "no range", 0, 0},
};

static kiln_options *make(void)
{
    kiln_options *o = kiln__options_create(schema, KILN_ARRAY_LEN(schema));
    CU_ASSERT_FATAL(o != NULL);
    return o;
}

static void test_options_defaults_applied(void)
{
    kiln_options *o = make();
    /* mode and unbounded have no default: not set */
    CU_ASSERT_EQUAL(kiln__options_count(o), 3);
    CU_ASSERT_STRING_EQUAL(kiln__options_key(o, 0), "max");
    CU_ASSERT_STRING_EQUAL(kiln__options_value_text(o, 0), "4");
    CU_ASSERT_FALSE(kiln__options_is_set(o, 0));
    int64_t i = 0;
    bool b = false;
    double f = 0;
    const char *s = NULL;
    CU_ASSERT_TRUE(kiln_options_get_int(o, "max", &i));
    CU_ASSERT_EQUAL(i, 4);
    CU_ASSERT_TRUE(kiln_options_get_bool(o, "verbose", &b));
    CU_ASSERT_TRUE(b);
    CU_ASSERT_TRUE(kiln_options_get_float(o, "ratio", &f));
    CU_ASSERT_DOUBLE_EQUAL(f, 0.5, 1e-12);
    CU_ASSERT_FALSE(kiln_options_get_string(o, "mode", &s));
    CU_ASSERT_FALSE(kiln_options_get_int(o, "unbounded", &i));
    CU_ASSERT_EQUAL(kiln__options_schema_count(o), 5);
    CU_ASSERT_EQUAL(kiln__options_lookup(o, "mode")->type, KILN_OPT_STRING);
    CU_ASSERT_PTR_NULL(kiln__options_lookup(o, "nope"));
    kiln__options_destroy(o);
}

static void test_options_set_text_typed(void)
{
    kiln_options *o = make();
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "max", "007", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "verbose", "0", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "ratio", "1e-1", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "mode", "fast, safe", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "unbounded", "-9000000000", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_error_code(&err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_count(o), 5);
    /* canonical text */
    CU_ASSERT_STRING_EQUAL(kiln__options_value_text(o, 0), "7");
    CU_ASSERT_STRING_EQUAL(kiln__options_value_text(o, 1), "false");
    CU_ASSERT_STRING_EQUAL(kiln__options_value_text(o, 2), "0.1");
    CU_ASSERT_STRING_EQUAL(kiln__options_value_text(o, 3), "fast, safe");
    CU_ASSERT_TRUE(kiln__options_is_set(o, 0));
    int64_t i = 0;
    CU_ASSERT_TRUE(kiln_options_get_int(o, "unbounded", &i));
    CU_ASSERT_EQUAL(i, -9000000000LL);
    kiln__options_destroy(o);
}

static void expect_bad(kiln_options *o, const char *key, const char *value, kiln_status code,
                       const char *needle)
{
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln__options_set_text(o, key, value, &err), code);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), needle));
    if (!strstr(kiln_error_message(&err), needle))
        fprintf(stderr, "\n  message: %s (wanted '%s')\n", kiln_error_message(&err), needle);
}

static void test_options_rejects_bad_values(void)
{
    kiln_options *o = make();
    expect_bad(o, "max", "abc", KILN_ERR_INVALID, "option 'max' expects int, got 'abc'");
    expect_bad(o, "max", "3.5", KILN_ERR_INVALID, "expects int");
    expect_bad(o, "max", "", KILN_ERR_INVALID, "expects int");
    expect_bad(o, "max", " 3", KILN_ERR_INVALID, "expects int");
    expect_bad(o, "max", "99999999999999999999", KILN_ERR_INVALID, "expects int");
    expect_bad(o, "verbose", "yes", KILN_ERR_INVALID, "expects bool");
    expect_bad(o, "ratio", "nan", KILN_ERR_INVALID, "expects float");
    expect_bad(o, "ratio", "0.5x", KILN_ERR_INVALID, "expects float");
    expect_bad(o, "nope", "1", KILN_ERR_NOT_FOUND, "unknown option 'nope' (declared: max, ");
    /* a failed set leaves the previous value */
    int64_t i = 0;
    CU_ASSERT_TRUE(kiln_options_get_int(o, "max", &i));
    CU_ASSERT_EQUAL(i, 4);
    kiln__options_destroy(o);
}

static void test_options_range_checked(void)
{
    kiln_options *o = make();
    expect_bad(o, "max", "11", KILN_ERR_INVALID, "option 'max' = 11 is out of range [0, 10]");
    expect_bad(o, "max", "-1", KILN_ERR_INVALID, "out of range");
    expect_bad(o, "ratio", "1.5", KILN_ERR_INVALID, "out of range [0, 1]");
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "max", "10", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "ratio", "0", &err), KILN_OK);
    kiln__options_destroy(o);
}

static void test_options_getters_check_type(void)
{
    kiln_options *o = make();
    int64_t i;
    bool b;
    double f;
    const char *s;
    CU_ASSERT_FALSE(kiln_options_get_int(o, "verbose", &i));
    CU_ASSERT_FALSE(kiln_options_get_bool(o, "max", &b));
    CU_ASSERT_TRUE(kiln_options_get_float(o, "max", &f)); /* ints read as floats */
    CU_ASSERT_DOUBLE_EQUAL(f, 4.0, 0);
    CU_ASSERT_TRUE(kiln_options_get_string(o, "verbose", &s)); /* any value as text */
    CU_ASSERT_STRING_EQUAL(s, "true");
    CU_ASSERT_FALSE(kiln_options_get_int(NULL, "max", &i));
    CU_ASSERT_FALSE(kiln_options_get_int(o, "missing", &i));
    CU_ASSERT_TRUE(kiln_options_get_int(o, "max", NULL));
    kiln__options_destroy(o);
    /* an empty set (a pass without options) */
    o = kiln__options_create(NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(kiln__options_count(o), 0);
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "x", "1", &err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "no options are declared"));
    kiln__options_destroy(o);
}

/* A plugin built against a newer minor: bigger kiln_option_def. */
typedef struct newer_def {
    kiln_option_def base;
    uint64_t added_later;
} newer_def;

/* A plugin built against an older minor: no min/max yet. */
typedef struct older_def {
    uint32_t struct_size;
    kiln_option_type type;
    const char *name;
    const char *default_value;
    const char *help;
} older_def;

static void test_options_schema_struct_size_stride(void)
{
    static const newer_def newer[] = {
        {{sizeof(newer_def), KILN_OPT_INT, "a", "1", "", 0, 5}, 42},
        {{sizeof(newer_def), KILN_OPT_STRING, "b", "x", "", 0, 0}, 43},
    };
    kiln_options *o = kiln__options_create(&newer[0].base, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    const char *s = NULL;
    CU_ASSERT_TRUE(kiln_options_get_string(o, "b", &s));
    CU_ASSERT_STRING_EQUAL(s, "x");
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "a", "6", &err), KILN_ERR_INVALID);
    kiln__options_destroy(o);

    static const older_def older[] = {
        {sizeof(older_def), KILN_OPT_INT, "a", "1", ""},
        {sizeof(older_def), KILN_OPT_INT, "b", "2", ""},
    };
    o = kiln__options_create((const kiln_option_def *)(const void *)older, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    int64_t i = 0;
    CU_ASSERT_TRUE(kiln_options_get_int(o, "b", &i));
    CU_ASSERT_EQUAL(i, 2);
    /* min/max absent: zero-filled, so no range */
    CU_ASSERT_EQUAL(kiln__options_set_text(o, "a", "1000", &err), KILN_OK);
    kiln__options_destroy(o);
}

static void test_options_bad_default_and_duplicates_ignored(void)
{
    static const kiln_option_def odd[] = {
        {sizeof(kiln_option_def), KILN_OPT_INT, "n", "many", "", 0, 0},
        {sizeof(kiln_option_def), KILN_OPT_INT, "n", "3", "", 0, 0},
        {sizeof(kiln_option_def), KILN_OPT_INT, NULL, "3", "", 0, 0},
    };
    kiln_options *o = kiln__options_create(odd, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(kiln__options_schema_count(o), 1);
    CU_ASSERT_EQUAL(kiln__options_count(o), 0); /* "many" is not an int: unset */
    kiln__options_destroy(o);
}

static void test_options_allocation_failure(void)
{
    int completed = 0;
    for (long n = 1; n < 50 && !completed; n++) {
        kiln__fault_set(n);
        kiln_options *o = kiln__options_create(schema, KILN_ARRAY_LEN(schema));
        kiln_error err = {0};
        kiln_status st = o ? kiln__options_set_text(o, "mode", "m", &err) : KILN_ERR_NOMEM;
        long hits = kiln__fault_hits();
        kiln__fault_set(0);
        CU_ASSERT(st == KILN_OK || st == KILN_ERR_NOMEM);
        if (st == KILN_ERR_NOMEM && o) {
            const char *s;
            CU_ASSERT_FALSE(kiln_options_get_string(o, "mode", &s)); /* unchanged */
        }
        if (hits == 0 && st == KILN_OK)
            completed = 1;
        kiln__options_destroy(o);
    }
    CU_ASSERT_TRUE(completed);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_options_defaults_applied", test_options_defaults_applied},
        {"test_options_set_text_typed", test_options_set_text_typed},
        {"test_options_rejects_bad_values", test_options_rejects_bad_values},
        {"test_options_range_checked", test_options_range_checked},
        {"test_options_getters_check_type", test_options_getters_check_type},
        {"test_options_schema_struct_size_stride", test_options_schema_struct_size_stride},
        {"test_options_bad_default_and_duplicates_ignored",
         test_options_bad_default_and_duplicates_ignored},
        {"test_options_allocation_failure", test_options_allocation_failure},
        {NULL, NULL},
    };
    return kiln_test_run("options", cases);
}
