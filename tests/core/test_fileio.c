/*
 * test_fileio.c - output sets, the table of live temporaries and its signal
 * cleanup, writes through symlinks and into non-regular files (core/fileio.c).
 */
#include "kiln_test.h"
#include "fileio.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void mkdir_fresh(void)
{
    snprintf(dir, sizeof(dir), "/tmp/kiln_fileio2_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
}

static int entries(const char *d)
{
    int n = 0;
    DIR *dd = opendir(d);
    struct dirent *e;
    while (dd && (e = readdir(dd)) != NULL)
        n += e->d_name[0] != '.';
    if (dd)
        closedir(dd);
    return n;
}

static void rm_all(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static kiln_status write_text(FILE *f, void *ud, kiln_error *err)
{
    (void)err;
    fputs(ud, f);
    return KILN_OK;
}

static kiln_status wr(const char *path, const char *text, kiln_error *err)
{
    return kiln_file_write_atomic(path, write_text, (void *)(uintptr_t)text, err);
}

static char *slurp(const char *path)
{
    char *buf = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_file_read_all(path, &buf, NULL, &err) != KILN_OK)
        return NULL;
    return buf;
}

static void path_in(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

/* Nothing is visible before the commit; the commit makes everything visible. */
static void test_defer_commit(void)
{
    mkdir_fresh();
    char a[128], b[128];
    path_in(a, sizeof(a), "a.txt");
    path_in(b, sizeof(b), "b.txt");
    kiln_error err;
    kiln_error_clear(&err);
    kiln_file_defer_begin();
    CU_ASSERT_EQUAL(wr(a, "A\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(wr(b, "B\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(access(a, F_OK), -1);
    CU_ASSERT_EQUAL(access(b, F_OK), -1);
    CU_ASSERT_EQUAL(entries(dir), 2); /* the two temporaries */
    CU_ASSERT_EQUAL(kiln_file_defer_commit(&err), KILN_OK);
    char *s = slurp(a);
    CU_ASSERT_STRING_EQUAL(s ? s : "", "A\n");
    kiln__free(s);
    CU_ASSERT_EQUAL(entries(dir), 2);
    rm_all();
}

/* Abort: the previous files stay byte for byte, no temporary is left. */
static void test_defer_abort(void)
{
    mkdir_fresh();
    char a[128], b[128];
    path_in(a, sizeof(a), "a.txt");
    path_in(b, sizeof(b), "b.txt");
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(wr(a, "old\n", &err), KILN_OK);
    kiln_file_defer_begin();
    CU_ASSERT_EQUAL(wr(a, "new\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(wr(b, "B\n", &err), KILN_OK);
    kiln_file_defer_abort();
    char *s = slurp(a);
    CU_ASSERT_STRING_EQUAL(s ? s : "", "old\n");
    kiln__free(s);
    CU_ASSERT_EQUAL(access(b, F_OK), -1);
    CU_ASSERT_EQUAL(entries(dir), 1);
    rm_all();
}

/* A rename failing midway: the error says what was written and what was not,
 * the rest of the set is removed. */
static void test_defer_commit_fails_midway(void)
{
    mkdir_fresh();
    char a[128], b[128], c[128], inside[160];
    path_in(a, sizeof(a), "a.txt");
    path_in(b, sizeof(b), "b.txt");
    path_in(c, sizeof(c), "c.txt");
    kiln_error err;
    kiln_error_clear(&err);
    kiln_file_defer_begin();
    CU_ASSERT_EQUAL(wr(a, "A\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(wr(b, "B\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(wr(c, "C\n", &err), KILN_OK);
    /* b.txt becomes a non-empty directory: rename(2) over it fails */
    CU_ASSERT_EQUAL_FATAL(mkdir(b, 0755), 0);
    snprintf(inside, sizeof(inside), "%s/x", b);
    FILE *f = fopen(inside, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(kiln_file_defer_commit(&err), KILN_ERR_IO);
    char msg[2048];
    kiln_error_format(&err, msg, sizeof(msg));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "cannot rename"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "written: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "a.txt"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not written: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "c.txt"));
    CU_ASSERT_EQUAL(access(a, F_OK), 0);
    CU_ASSERT_EQUAL(access(c, F_OK), -1);
    CU_ASSERT_EQUAL(entries(dir), 2); /* a.txt and the directory b.txt */
    rm_all();
}

/* A temporary from kiln_file_tmp_create is an O_EXCL mkstemp file beside its
 * target, recorded for the signal cleanup. */
static void test_tmp_registry(void)
{
    mkdir_fresh();
    char out[128];
    path_in(out, sizeof(out), "out.onnx");
    kiln_tmpfile *t[40];
    kiln_error err;
    kiln_error_clear(&err);
    /* more than one chunk of slots */
    for (int i = 0; i < 40; i++)
        CU_ASSERT_EQUAL_FATAL(kiln_file_tmp_create(out, &t[i], NULL, &err), KILN_OK);
    struct stat sb;
    CU_ASSERT_EQUAL(lstat(kiln_file_tmp_path(t[0]), &sb), 0);
    CU_ASSERT_TRUE(S_ISREG(sb.st_mode));
    CU_ASSERT_EQUAL(strncmp(kiln_file_tmp_path(t[0]), out, strlen(out)), 0);
    CU_ASSERT_EQUAL(entries(dir), 40);
    kiln__tmpfiles_unlink_all();
    CU_ASSERT_EQUAL(entries(dir), 0);
    for (int i = 0; i < 40; i++)
        kiln_file_tmp_discard(t[i]);
    rm_all();
}

/* SIGTERM while a temporary is live: the handler removes it and the process
 * dies of the signal. */
static void test_signal_cleanup(void)
{
    mkdir_fresh();
    char out[128];
    path_in(out, sizeof(out), "out.json");
    int pfd[2];
    CU_ASSERT_EQUAL_FATAL(pipe(pfd), 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        kiln_file_cleanup_on_signals();
        kiln_tmpfile *t;
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_file_tmp_create(out, &t, NULL, &err) != KILN_OK)
            _exit(3);
        char c = 1;
        if (write(pfd[1], &c, 1) != 1)
            _exit(4);
        pause();
        _exit(5);
    }
    close(pfd[1]);
    char c;
    CU_ASSERT_EQUAL(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    CU_ASSERT_EQUAL(entries(dir), 1);
    kill(pid, SIGTERM);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    CU_ASSERT_EQUAL(entries(dir), 0);
    rm_all();
}

/* A symlink to a regular file is written through (the link stays a link);
 * an existing non-regular file gets the bytes copied in, never renamed over. */
static void test_symlink_and_special(void)
{
    mkdir_fresh();
    char real[128], link[128];
    path_in(real, sizeof(real), "real.txt");
    path_in(link, sizeof(link), "link.txt");
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(wr(real, "old\n", &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(symlink("real.txt", link), 0);
    CU_ASSERT_EQUAL(wr(link, "new\n", &err), KILN_OK);
    struct stat sb;
    CU_ASSERT_EQUAL(lstat(link, &sb), 0);
    CU_ASSERT_TRUE(S_ISLNK(sb.st_mode));
    char *s = slurp(real);
    CU_ASSERT_STRING_EQUAL(s ? s : "", "new\n");
    kiln__free(s);
    CU_ASSERT_EQUAL(wr("/dev/null", "x\n", &err), KILN_OK);
    CU_ASSERT_EQUAL(stat("/dev/null", &sb), 0);
    CU_ASSERT_TRUE(S_ISCHR(sb.st_mode));
    CU_ASSERT_EQUAL(entries(dir), 2);
    rm_all();
}

/* Directories are named as such, for the reader and the input check. */
static void test_directory_inputs(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    char *buf = NULL;
    CU_ASSERT_EQUAL(kiln_file_read_all("/tmp", &buf, NULL, &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "is a directory"));
    kiln_error_clear(&err);
    CU_ASSERT_NOT_EQUAL(kiln_file_check_input("/tmp", &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "/tmp is a directory"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_file_check_input("/nonexistent-kiln", &err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "no such file"));
}

int main(void)
{
    static const kiln_test_case tests[] = {
        {"test_defer_commit", test_defer_commit},
        {"test_defer_abort", test_defer_abort},
        {"test_defer_commit_fails_midway", test_defer_commit_fails_midway},
        {"test_tmp_registry", test_tmp_registry},
        {"test_signal_cleanup", test_signal_cleanup},
        {"test_symlink_and_special", test_symlink_and_special},
        {"test_directory_inputs", test_directory_inputs},
        {NULL, NULL},
    };
    return kiln_test_run("fileio", tests);
}
