/*
 * test_cache.c - the model cache (core/cache.c, core/cache_key.c): GE's MC
 * scenarios (GE_SEMANTICS_BUILD.md §5.2, model_cache_unittest.cc) on the
 * cache API, kiln's checks of entries (size and SHA-256), the lock between
 * processes, and what the automatic key depends on.
 */
#include "kiln_test.h"
#include "cache.h"
#include "ctx.h"
#include "fileio.h"
#include "graph_int.h"
#include "pipeline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static char path[512];
static FILE *log_f; /* warnings, read back by the tests */

static void fresh(void)
{
    snprintf(dir, sizeof(dir), "/tmp/kiln_cache_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    if (log_f)
        fclose(log_f);
    log_f = tmpfile();
}

static void rm_all(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static const char *in_dir(const char *name)
{
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static char *slurp(const char *p)
{
    char *buf = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    return kiln_file_read_all(p, &buf, NULL, &err) == KILN_OK ? buf : NULL;
}

static void put(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static char *log_text(void)
{
    static char buf[4096];
    fflush(log_f);
    rewind(log_f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, log_f);
    buf[n] = 0;
    return buf;
}

static kiln_status produce_text(const char *p, void *ud, kiln_error *err)
{
    (void)err;
    put(p, ud);
    return KILN_OK;
}

static kiln_cache *open_ge(const char *key, kiln_status want)
{
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln__cache_open(KILN_CACHE_GE, dir, key, "json", log_f, &c, &err);
    CU_ASSERT_EQUAL(st, want);
    if (st != want)
        fprintf(stderr, "open %s: %s\n", key, kiln_error_message(&err));
    return c;
}

static void save(kiln_cache *c, const char *text)
{
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_save(c, produce_text, (void *)(uintptr_t)text, &err), KILN_OK);
}

/* Load into <dir>/out.json; returns what was written there, or NULL on a miss. */
static char *load(kiln_cache *c)
{
    kiln_error err;
    kiln_error_clear(&err);
    bool hit = true;
    char out[600];
    snprintf(out, sizeof(out), "%s/out.json", dir);
    unlink(out);
    CU_ASSERT_EQUAL(kiln__cache_load(c, out, &hit, &err), KILN_OK);
    if (!hit) {
        CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0); /* no partial output */
        return NULL;
    }
    return slurp(out);
}

/* "Cache result n": the idx holds n entries of @p key and each file exists. */
static int cache_result(const char *key)
{
    char name[256];
    snprintf(name, sizeof(name), "%s.idx", key);
    json_t *doc = json_load_file(in_dir(name), 0, NULL);
    json_t *list = json_object_get(doc, "cache_file_list"), *e;
    size_t i;
    int n = 0;
    json_array_foreach(list, i, e)
    {
        const char *k = json_string_value(json_object_get(e, "graph_key"));
        const char *f = json_string_value(json_object_get(e, "cache_file_name"));
        if (k && f && strcmp(k, key) == 0 && access(in_dir(f), F_OK) == 0)
            n++;
    }
    json_decref(doc);
    return n;
}

static int count_files(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* MC1, MC2: no options, or only the directory: disabled, nothing written. */
static void test_mc1_mc2_disabled(void)
{
    fresh();
    kiln_cache *c = (kiln_cache *)1;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, NULL, NULL, "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(kiln__cache_save(NULL, produce_text, (void *)(uintptr_t) "x", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, dir, "", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, "", "k", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(c);
    bool hit = true;
    CU_ASSERT_EQUAL(kiln__cache_load(NULL, in_dir("o.json"), &hit, &err), KILN_OK);
    CU_ASSERT_FALSE(hit);
    CU_ASSERT_EQUAL(count_files(), 0);
    rm_all();
}

/* MC4: a missing directory is PARAM_INVALID (GE); the automatic mode creates it. */
static void test_mc4_dir_missing(void)
{
    fresh();
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, in_dir("ut_cache_dir_not_exit/"), "graph_key_1",
                                     "json", log_f, &c, &err),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "ut_cache_dir_not_exit"));
    kiln_error_clear(&err);
    put(in_dir("file"), "x");
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, in_dir("file"), "k", "json", log_f, &c, &err),
                    KILN_ERR_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "not a directory"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, in_dir("auto"), "abc", "json", log_f, &c, &err),
                    KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(c);
    struct stat sb;
    CU_ASSERT_TRUE(stat(in_dir("auto"), &sb) == 0 && S_ISDIR(sb.st_mode));
    CU_ASSERT_STRING_EQUAL(strrchr(kiln__cache_dir(c), '/'), "/"); /* trailing '/' added */
    kiln__cache_close(c);
    rm_all();
}

/* MC5: save, then a new cache object loads it; names are <key>_<stamp>.<ext>. */
static void test_mc5_save_and_load(void)
{
    fresh();
    kiln_cache *c = open_ge("graph_key_1", KILN_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 0);
    const char *name = strrchr(kiln__cache_entry(c), '/') + 1;
    CU_ASSERT_EQUAL(strlen(name), strlen("graph_key_1_YYYYmmddHHMMSS.json"));
    CU_ASSERT_EQUAL(strncmp(name, "graph_key_1_20", 14), 0);
    save(c, "{\"model\": 1}\n");
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(cache_result("graph_key_1"), 1);
    char *idx = slurp(in_dir("graph_key_1.idx"));
    CU_ASSERT_PTR_NOT_NULL(strstr(idx, "\n    \"cache_file_list\": [\n        {")); /* 4-space indent */
    kiln__free(idx);
    c = open_ge("graph_key_1", KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 1);
    char *got = load(c);
    CU_ASSERT_PTR_NOT_NULL(got);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "{\"model\": 1}\n");
    kiln__free(got);
    kiln__cache_close(c);
    rm_all();
}

/* MC6/MC7: a GE key names models, not graphs: whatever was saved under it loads,
 * and the saved content is exactly what the save was handed. */
static void test_mc6_key_not_graph(void)
{
    fresh();
    kiln_cache *c = open_ge("graph_key_flow_model1", KILN_OK);
    save(c, "built from another graph");
    kiln__cache_close(c);
    c = open_ge("graph_key_flow_model1", KILN_OK);
    char *got = load(c);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "built from another graph");
    kiln__free(got);
    kiln__cache_close(c);
    /* another key sees nothing */
    c = open_ge("graph_key_other", KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 0);
    CU_ASSERT_PTR_NULL(load(c));
    kiln__cache_close(c);
    rm_all();
}

/* MC8: a key that cannot be a file name is PARAM_INVALID; no hash fallback. */
static void test_mc8_invalid_key(void)
{
    fresh();
    CU_ASSERT_PTR_NULL(open_ge("can/not/be/file/name", KILN_ERR_PARAM));
    CU_ASSERT_PTR_NULL(open_ge("sp ace", KILN_ERR_PARAM));
    char k[KILN_CACHE_KEY_MAX + 2];
    memset(k, 'a', sizeof(k));
    k[KILN_CACHE_KEY_MAX + 1] = 0;
    CU_ASSERT_PTR_NULL(open_ge(k, KILN_ERR_PARAM)); /* 129 */
    k[KILN_CACHE_KEY_MAX] = 0;
    kiln_cache *c = open_ge(k, KILN_OK); /* 128 */
    CU_ASSERT_PTR_NOT_NULL(c);
    kiln__cache_close(c);
    CU_ASSERT_TRUE(kiln__cache_key_valid("A-z_09"));
    CU_ASSERT_FALSE(kiln__cache_key_valid("a.b"));
    CU_ASSERT_EQUAL(access(in_dir("can"), F_OK), -1);
    rm_all();
}

/* MC9: the candidates are fixed at open: deleting the idx afterwards does not
 * stop this object from loading, twice. */
static void test_mc9_candidates_fixed(void)
{
    fresh();
    kiln_cache *c = open_ge("graph_key_flow_model2", KILN_OK);
    save(c, "m");
    kiln__cache_close(c);
    c = open_ge("graph_key_flow_model2", KILN_OK);
    char *got = load(c);
    CU_ASSERT_PTR_NOT_NULL(got);
    kiln__free(got);
    CU_ASSERT_EQUAL(unlink(in_dir("graph_key_flow_model2.idx")), 0);
    got = load(c);
    CU_ASSERT_PTR_NOT_NULL(got);
    kiln__free(got);
    kiln__cache_close(c);
    rm_all();
}

/* MC11: the lock file cannot be opened -> FAILED (here: it is a directory). */
static void test_mc11_lock_fails(void)
{
    fresh();
    CU_ASSERT_EQUAL(mkdir(in_dir("k1.lock"), 0755), 0);
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, dir, "k1", "json", log_f, &c, &err),
                    KILN_ERR_IO);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "k1.lock"));
    rm_all();
}

/*
 * MC11 (second case): flock itself fails.  This executable's flock() takes the
 * place of libc's for libkiln (the dynamic linker finds the executable's
 * definition first); it fails with ENOLCK while flock_fails is set and is the
 * system call otherwise.
 */
static int flock_fails;
int flock(int fd, int operation)
{
    if (flock_fails) {
        errno = ENOLCK;
        return -1;
    }
    return (int)syscall(SYS_flock, fd, operation);
}

static void test_mc11_flock_fails(void)
{
    fresh();
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    flock_fails = 1;
    kiln_status st = kiln__cache_open(KILN_CACHE_GE, dir, "k1", "json", log_f, &c, &err);
    flock_fails = 0;
    CU_ASSERT_EQUAL(st, KILN_ERR_IO);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "cannot lock"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "k1.lock"));
    /* the lock works again once flock does */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, dir, "k1", "json", log_f, &c, &err), KILN_OK);
    kiln__cache_close(c);
    rm_all();
}

/* MC13: cache.conf values must be booleans; debug mode disables saving;
 * manual check is read. */
static void test_mc13_conf(void)
{
    fresh();
    put(in_dir("cache.conf"), "{\"cache_manual_check\":\"failed\",\"cache_debug_mode\":\"failed\"}");
    CU_ASSERT_PTR_NULL(open_ge("k", KILN_ERR_PARSE));
    put(in_dir("cache.conf"), "[1]");
    CU_ASSERT_PTR_NULL(open_ge("k", KILN_ERR_PARSE));
    put(in_dir("cache.conf"), "{\"cache_manual_check\":true,\"cache_debug_mode\":true}");
    kiln_cache *c = open_ge("k", KILN_OK);
    CU_ASSERT_TRUE(kiln__cache_debug_mode(c));
    CU_ASSERT_TRUE(kiln__cache_manual_check(c));
    save(c, "never written");
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(access(in_dir("k.idx"), F_OK), -1);
    put(in_dir("cache.conf"), "{\"cache_debug_mode\":false}");
    c = open_ge("k", KILN_OK);
    CU_ASSERT_FALSE(kiln__cache_debug_mode(c));
    CU_ASSERT_FALSE(kiln__cache_manual_check(c));
    save(c, "written");
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(cache_result("k"), 1);
    rm_all();
}

/* GE's om-without-idx path: <key>.<ext> alone is the one candidate (no digest:
 * trusted in GE mode, refused by the automatic key). */
static void test_entry_without_index(void)
{
    fresh();
    put(in_dir("k2.json"), "plain");
    put(in_dir("k2.dot"), "other format");
    kiln_cache *c = open_ge("k2", KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 1);
    char *got = load(c);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "plain");
    kiln__free(got);
    kiln__cache_close(c);
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "k2", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(load(c));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "no SHA-256 recorded"));
    kiln__cache_close(c);
    rm_all();
}

/* Entries are appended, never deduplicated; only this format's are candidates. */
static void test_index_appends(void)
{
    fresh();
    kiln_cache *c = open_ge("k3", KILN_OK);
    save(c, "one");
    kiln__cache_close(c);
    sleep(1); /* a new time stamp, a new name */
    c = open_ge("k3", KILN_OK);
    save(c, "two");
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(cache_result("k3"), 2);
    c = open_ge("k3", KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 2);
    char *got = load(c); /* the first in file order */
    CU_ASSERT_STRING_EQUAL(got ? got : "", "one");
    kiln__free(got);
    kiln__cache_close(c);
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_GE, dir, "k3", "kmodel", log_f, &c, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 0);
    kiln__cache_close(c);
    rm_all();
}

/* A corrupt or truncated entry is a miss with a warning naming the file; the
 * next candidate is used, and a save in the automatic mode replaces it. */
static void test_corrupt_entries(void)
{
    fresh();
    kiln_cache *c = open_ge("k4", KILN_OK);
    save(c, "first model");
    char first[600];
    snprintf(first, sizeof(first), "%s", kiln__cache_entry(c));
    kiln__cache_close(c);
    sleep(1);
    c = open_ge("k4", KILN_OK);
    save(c, "second model");
    kiln__cache_close(c);
    put(first, "first modeL"); /* same size, other bytes */
    c = open_ge("k4", KILN_OK);
    char *got = load(c);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "second model");
    kiln__free(got);
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "is corrupt (SHA-256"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), first));
    kiln__cache_close(c);

    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "abc", "json", log_f, &c, &err), KILN_OK);
    save(c, "auto model");
    kiln__cache_close(c);
    put(in_dir("abc.json"), "auto mod"); /* truncated */
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "abc", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(load(c));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "abc.json is corrupt (8 bytes, the index says 10)"));
    save(c, "auto model");
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(cache_result("abc"), 1); /* replaced, not appended */
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "abc", "json", log_f, &c, &err), KILN_OK);
    got = load(c);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "auto model");
    kiln__free(got);
    kiln__cache_close(c);
    /* a malformed index: a warning and no candidate */
    put(in_dir("abc.idx"), "{not json");
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "abc", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__cache_candidate_count(c), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "abc.idx"));
    kiln__cache_close(c);
    rm_all();
}

/* The lock: a second process opening the same key waits until the first
 * closed, and then finds its entry. */
static void test_lock_between_processes(void)
{
    fresh();
    int ready[2];
    CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        kiln_cache *c = NULL;
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln__cache_open(KILN_CACHE_AUTO, dir, "lk", "json", NULL, &c, &err) != KILN_OK)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        usleep(300 * 1000);
        if (kiln__cache_save(c, produce_text, (void *)(uintptr_t) "from the child", &err) != KILN_OK)
            _exit(1);
        kiln__cache_close(c);
        _exit(0);
    }
    char b;
    CU_ASSERT_EQUAL(read(ready[0], &b, 1), 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "lk", "json", log_f, &c, &err), KILN_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CU_ASSERT(waited > 0.1);
    char *got = load(c);
    CU_ASSERT_STRING_EQUAL(got ? got : "", "from the child");
    kiln__free(got);
    kiln__cache_close(c);
    int status;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(ready[1]);
    rm_all();
}

/* The input-key alias and the checked copy of a stored entry. */
static void test_alias_and_checked_copy(void)
{
    fresh();
    char key[KILN_SHA256_HEX_LEN + 1];
    const char *k64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    CU_ASSERT_FALSE(kiln__cache_alias_read(dir, "in1", key));
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_alias_write(dir, "in1", k64, &err), KILN_OK);
    CU_ASSERT_TRUE(kiln__cache_alias_read(dir, "in1", key));
    CU_ASSERT_STRING_EQUAL(key, k64);
    put(in_dir("in2.alias"), "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n");
    CU_ASSERT_FALSE(kiln__cache_alias_read(dir, "in2", key)); /* not lowercase hex */
    put(in_dir("in3.alias"), "0123\n");
    CU_ASSERT_FALSE(kiln__cache_alias_read(dir, "in3", key));

    kiln_cache *c = NULL;
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "cp", "json", log_f, &c, &err), KILN_OK);
    CU_ASSERT_PTR_NULL(kiln__cache_saved_sha256(c));
    save(c, "stored model");
    char sha[KILN_SHA256_HEX_LEN + 1];
    snprintf(sha, sizeof(sha), "%s", kiln__cache_saved_sha256(c));
    CU_ASSERT_EQUAL(kiln__cache_saved_size(c), 12);
    char entry[600];
    snprintf(entry, sizeof(entry), "%s", kiln__cache_entry(c));
    kiln__cache_close(c);
    CU_ASSERT_EQUAL(kiln__cache_copy_checked(entry, sha, 12, in_dir("copy.json"), &err), KILN_OK);
    char *got = slurp(in_dir("copy.json"));
    CU_ASSERT_STRING_EQUAL(got ? got : "", "stored model");
    kiln__free(got);
    put(entry, "stored modeL");
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__cache_copy_checked(entry, sha, 12, in_dir("copy2.json"), &err),
                    KILN_ERR_PARSE);
    CU_ASSERT_NOT_EQUAL(access(in_dir("copy2.json"), F_OK), 0);
    rm_all();
}

/* ---- the automatic key ------------------------------------------------------------- */

static kiln_graph *small_graph(int64_t alpha)
{
    kiln_graph *g = kiln_test_graph("keyg");
    kiln_node_id d = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id r = kiln_test_node(g, "r", "LeakyRelu", 1, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, d, 0, r, 0);
    kiln_test_edge(g, r, 0, o, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(g, r), "alpha", alpha), KILN_OK);
    return g;
}

static void key_of(kiln_graph *g, const kiln_pipeline *p, const char *format, char *hex)
{
    kiln_error err;
    kiln_error_clear(&err);
    const kiln_cache_key_inputs in = {.format = format};
    CU_ASSERT_EQUAL(kiln__cache_key(kiln_test_ctx(), p, g, &in, hex, &err), KILN_OK);
    CU_ASSERT_EQUAL(strlen(hex), KILN_SHA256_HEX_LEN);
}

static void test_auto_key(void)
{
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    p.instr.bisect_limit = -1;
    char a[65], b[65], x[65];
    kiln_graph *g1 = small_graph(1), *g2 = small_graph(1), *g3 = small_graph(2);
    key_of(g1, &p, "json", a);
    key_of(g2, &p, "json", b);
    CU_ASSERT_STRING_EQUAL(a, b); /* same graph, built twice */
    key_of(g3, &p, "json", x);
    CU_ASSERT_STRING_NOT_EQUAL(a, x); /* one attribute differs */
    key_of(g1, &p, "kmodel", x);
    CU_ASSERT_STRING_NOT_EQUAL(a, x); /* the output format */
    p.instr.bisect_limit = 3;
    key_of(g1, &p, "json", x);
    CU_ASSERT_STRING_NOT_EQUAL(a, x); /* the pipeline */
    p.instr.bisect_limit = -1;
    kiln_ctx *ctx = kiln_test_ctx();
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, KILN_CACHE_DIR_OPTION, "/somewhere"), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, KILN_CACHE_GE_KEY_OPTION, "k"), KILN_OK);
    key_of(g1, &p, "json", x);
    CU_ASSERT_STRING_EQUAL(a, x); /* the cache's own options are not part of it */
    CU_ASSERT_EQUAL(kiln_ctx_set_option(ctx, "kiln.threads", "2"), KILN_OK);
    key_of(g1, &p, "json", x);
    CU_ASSERT_STRING_NOT_EQUAL(a, x); /* any other session option is */
    kiln_graph_destroy(g1);
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g3);

    /* the input key: the model file's path and digest and the extra arguments */
    fresh();
    kiln_error err;
    kiln_error_clear(&err);
    const char *shape[] = {"x=1x4"};
    kiln_cache_key_inputs in = {.format = "json", .input_path = in_dir("m.json"),
                                .input_sha256 = "00"};
    char i1[65], i2[65], i3[65];
    CU_ASSERT_EQUAL(kiln__cache_key(ctx, &p, NULL, &in, i1, &err), KILN_OK);
    in.input_sha256 = "01";
    CU_ASSERT_EQUAL(kiln__cache_key(ctx, &p, NULL, &in, i2, &err), KILN_OK);
    CU_ASSERT_STRING_NOT_EQUAL(i1, i2);
    in.extra = shape;
    in.nextra = 1;
    CU_ASSERT_EQUAL(kiln__cache_key(ctx, &p, NULL, &in, i3, &err), KILN_OK);
    CU_ASSERT_STRING_NOT_EQUAL(i2, i3);
    in.input_sha256 = NULL;
    CU_ASSERT_EQUAL(kiln__cache_key(ctx, &p, NULL, &in, i3, &err), KILN_ERR_INVALID);
    rm_all();
}

/* The digest memo (digest.h): a file it recorded is answered from its
 * signature; any write (its status-change time moves, whatever is done to
 * its modification time) makes it hashed again; a file changed too
 * recently is not recorded; a cache entry checked once is trusted while
 * unchanged, and a changed one is still caught. */
static void test_digest_memo(void)
{
    fresh();
    char other[64];
    snprintf(other, sizeof(other), "/tmp/kiln_cache_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(other));
    char file[600], memo[600];
    snprintf(file, sizeof(file), "%s/model.bin", dir);
    snprintf(memo, sizeof(memo), "%s/kiln-digests", dir);
    put(file, "weights v1");
    kiln_error err;
    kiln_error_clear(&err);
    char plain[65], h[65];
    CU_ASSERT_EQUAL(kiln__sha256_file(file, plain, &err), KILN_OK);

    /* too recent: hashed, not recorded */
    CU_ASSERT_EQUAL(kiln__digest_memo_min_age_s, 3);
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(dir, file, h, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(h, plain);
    CU_ASSERT_NOT_EQUAL(access(memo, F_OK), 0);

    kiln__digest_memo_min_age_s = 0;
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(dir, file, h, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(h, plain);
    char *text = slurp(memo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, plain));
    /* the memo answers: a record with another digest for the same
     * signature is what comes back (read again after another directory) */
    char *at = strstr(text, plain);
    at[0] = at[0] == 'a' ? 'b' : 'a';
    char fake[65];
    memcpy(fake, at, 64);
    fake[64] = 0;
    put(memo, text);
    kiln__free(text);
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(other, file, h, &err), KILN_OK); /* loads other's */
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(dir, file, h, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(h, fake);

    /* same size, modification time put back: still hashed afresh */
    struct stat sb;
    CU_ASSERT_EQUAL(stat(file, &sb), 0);
    put(file, "weights v2");
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    CU_ASSERT_EQUAL(utimensat(AT_FDCWD, file, times, 0), 0);
    CU_ASSERT_EQUAL(kiln__sha256_file(file, plain, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(dir, file, h, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(h, plain);

    /* garbage in the memo file is skipped */
    put(memo, "not a memo\n1 2 3\n");
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(other, file, h, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__sha256_file_memo(dir, file, h, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(h, plain);

    /* a cache entry: the first load hashes and records it, a later load
     * trusts it; a write to it is caught as before */
    kiln_cache *c = NULL;
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "memo", "json", log_f, &c, &err),
                    KILN_OK);
    save(c, "memo model");
    kiln__cache_close(c);
    char entry[600];
    snprintf(entry, sizeof(entry), "%s/memo.json", dir);
    char *got = NULL;
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "memo", "json", log_f, &c, &err),
                        KILN_OK);
        got = load(c);
        CU_ASSERT_STRING_EQUAL(got ? got : "", "memo model");
        kiln__free(got);
        kiln__cache_close(c);
    }
    CU_ASSERT_EQUAL(stat(entry, &sb), 0);
    kiln_file_sig sig;
    kiln__file_sig_of(&sb, &sig);
    CU_ASSERT_TRUE(kiln__digest_memo_lookup(dir, &sig, h));
    put(entry, "memo modeL");
    struct timespec t2[2] = {sb.st_atim, sb.st_mtim};
    CU_ASSERT_EQUAL(utimensat(AT_FDCWD, entry, t2, 0), 0);
    CU_ASSERT_EQUAL(kiln__cache_open(KILN_CACHE_AUTO, dir, "memo", "json", log_f, &c, &err),
                    KILN_OK);
    CU_ASSERT_PTR_NULL(load(c));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "memo.json is corrupt (SHA-256"));
    kiln__cache_close(c);
    kiln__digest_memo_min_age_s = 3;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", other);
    CU_ASSERT_EQUAL(system(cmd), 0);
    rm_all();
}

int main(void)
{
    static const kiln_test_case tests[] = {
        {"test_mc1_mc2_disabled", test_mc1_mc2_disabled},
        {"test_mc4_dir_missing", test_mc4_dir_missing},
        {"test_mc5_save_and_load", test_mc5_save_and_load},
        {"test_mc6_key_not_graph", test_mc6_key_not_graph},
        {"test_mc8_invalid_key", test_mc8_invalid_key},
        {"test_mc9_candidates_fixed", test_mc9_candidates_fixed},
        {"test_mc11_lock_fails", test_mc11_lock_fails},
        {"test_mc11_flock_fails", test_mc11_flock_fails},
        {"test_mc13_conf", test_mc13_conf},
        {"test_entry_without_index", test_entry_without_index},
        {"test_index_appends", test_index_appends},
        {"test_corrupt_entries", test_corrupt_entries},
        {"test_lock_between_processes", test_lock_between_processes},
        {"test_alias_and_checked_copy", test_alias_and_checked_copy},
        {"test_auto_key", test_auto_key},
        {"test_digest_memo", test_digest_memo},
        {NULL, NULL},
    };
    int rc = kiln_test_run("cache", tests);
    if (log_f)
        fclose(log_f);
    return rc;
}
