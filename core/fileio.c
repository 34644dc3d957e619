/*
 * fileio.c - whole-file reads and atomic file output (see fileio.h).
 *
 * Atomic write protocol: mkstemp("<path>.tmpXXXXXX") in the destination's
 * directory -> fchmod to the final mode -> fdopen -> write_fn -> fflush ->
 * fsync (with KILN_FSYNC=1) -> fclose -> rename (at once, or at the output
 * set's commit).  Any
 * failing step unlinks the temporary, so neither a partial destination nor a
 * stray temporary survives.  The final mode is the mode of the file replaced,
 * or 0644 for a new file (reading the umask would need umask(2), which changes
 * process state).
 *
 * Temporaries on signals: every live temporary's name sits in a slot of a
 * table that only grows (chunks of slots, never freed, linked by atomic
 * pointers).  A slot is FREE, BUSY (being filled: the handler skips it) or
 * LIVE.  The signal handler walks the table and unlinks the LIVE names: atomic
 * loads and unlink(2), both async-signal-safe.  mkstemp runs on the slot's own
 * buffer while the slot is BUSY and the cleanup signals are blocked in the
 * calling thread, so no temporary exists unrecorded.  A temporary is renamed
 * or unlinked before its slot is freed; the handler unlinking a name that was
 * just renamed away gets ENOENT and does no harm.
 *
 * Complexity: linear in the bytes written or read; registering a temporary is
 * linear in the number of live temporaries (a handful).
 */
#include "fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the table of live temporaries --------------------------------------- */

enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE };
#define SLOT_PATH 4096 /* PATH_MAX: longer names fail in open(2) anyway */
#define CHUNK_SLOTS 16

struct kiln_tmpfile {
    atomic_int state;
    bool to_stdout; /* destination "-", or not a regular file: copied in at commit */
    char *dest;     /* resolved destination (through symlinks), NULL = as given */
    char path[SLOT_PATH];
};

typedef struct tmp_chunk {
    struct tmp_chunk *_Atomic next;
    struct kiln_tmpfile slot[CHUNK_SLOTS];
} tmp_chunk;

static tmp_chunk chunk0;

static const int cleanup_sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE,
                                   SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ};

void kiln__tmpfiles_unlink_all(void)
{
    for (tmp_chunk *c = &chunk0; c; c = atomic_load(&c->next))
        for (int i = 0; i < CHUNK_SLOTS; i++)
            if (atomic_load(&c->slot[i].state) == SLOT_LIVE)
                unlink(c->slot[i].path);
}

/* A FREE slot made BUSY, or NULL on OOM. */
static kiln_tmpfile *slot_claim(void)
{
    for (tmp_chunk *c = &chunk0;;) {
        for (int i = 0; i < CHUNK_SLOTS; i++) {
            int want = SLOT_FREE;
            if (atomic_compare_exchange_strong(&c->slot[i].state, &want, SLOT_BUSY))
                return &c->slot[i];
        }
        tmp_chunk *n = atomic_load(&c->next);
        if (!n) {
            /* Never freed: the handler may be walking the table at any time. */
            tmp_chunk *fresh = kiln__calloc(1, sizeof(*fresh));
            if (!fresh)
                return NULL;
            if (!atomic_compare_exchange_strong(&c->next, &n, fresh))
                kiln__free(fresh); /* another thread linked one first: n is it */
            else
                n = fresh;
        }
        c = n;
    }
}

static void slot_release(kiln_tmpfile *t)
{
    kiln__free(t->dest);
    t->dest = NULL;
    atomic_store(&t->state, SLOT_FREE);
}

static void on_cleanup_signal(int sig)
{
    int saved = errno;
    kiln__tmpfiles_unlink_all();
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

void kiln_file_cleanup_on_signals(void)
{
    static atomic_int installed;
    if (atomic_exchange(&installed, 1))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_cleanup_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < KILN_ARRAY_LEN(cleanup_sigs); i++) {
        struct sigaction old;
        if (sigaction(cleanup_sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* nohup / background job: keep ignoring it */
        sigaction(cleanup_sigs[i], &sa, NULL);
    }
}

kiln_status kiln_file_tmp_create(const char *path, kiln_tmpfile **out, int *fdp, kiln_error *err)
{
    *out = NULL;
    if (fdp)
        *fdp = -1;
    /* Where the bytes go: "-" and existing non-regular files (/dev/null, a
     * FIFO, /dev/stdout onto a pipe) get a copy at commit, never a rename over
     * them; a symlink to a regular file is written through (the rename goes
     * over its target, as fopen would write there). */
    struct stat sb, lsb;
    bool exists = strcmp(path, "-") != 0 && stat(path, &sb) == 0;
    bool to_stdout = strcmp(path, "-") == 0 || (exists && !S_ISREG(sb.st_mode));
    char real[PATH_MAX];
    const char *target = path;
    if (exists && !to_stdout && lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode) &&
        realpath(path, real))
        target = real;
    const char *dir = to_stdout ? getenv("TMPDIR") : NULL;
    if (to_stdout && (!dir || !dir[0]))
        dir = "/tmp";
    char name[SLOT_PATH];
    int n = to_stdout ? kiln__fmt(name, sizeof(name), "%s/kiln-stdout.tmpXXXXXX", dir)
                      : kiln__fmt(name, sizeof(name), "%s.tmpXXXXXX", target);
    if (n < 0 || (size_t)n >= sizeof(name))
        return kiln_errorf(err, KILN_ERR_IO, "cannot create temporary file for %s: %s", path,
                           strerror(ENAMETOOLONG));
    kiln_tmpfile *t = slot_claim();
    if (!t)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing %s", path);
    memcpy(t->path, name, (size_t)n + 1);
    t->to_stdout = to_stdout;
    t->dest = NULL;
    if (target != path || (to_stdout && strcmp(path, "-") != 0)) {
        if (!(t->dest = kiln__strdup(target))) {
            slot_release(t);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing %s", path);
        }
    }

    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < KILN_ARRAY_LEN(cleanup_sigs); i++)
        sigaddset(&block, cleanup_sigs[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(t->path);
    int mk_errno = errno;
    if (fd >= 0)
        atomic_store(&t->state, SLOT_LIVE);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        slot_release(t);
        return kiln_errorf(err, KILN_ERR_IO, "cannot create temporary file for %s: %s", path,
                           strerror(mk_errno));
    }
    mode_t mode = exists ? sb.st_mode & 07777 : 0644;
    if (!to_stdout && fchmod(fd, mode) != 0) {
        kiln_status st =
            kiln_errorf(err, KILN_ERR_IO, "cannot set mode of %s: %s", t->path, strerror(errno));
        close(fd);
        kiln_file_tmp_discard(t);
        return st;
    }
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    *out = t;
    /* test hook (tests/e2e/outputs.sh): stop with the temporary in place, so
     * that a signal arrives in the middle of a write whatever the machine's load */
    if (getenv("KILN_TEST_STOP_WITH_TEMP"))
        raise(SIGSTOP);
    return KILN_OK;
}

const char *kiln_file_tmp_path(const kiln_tmpfile *tmp) { return tmp->path; }

void kiln_file_tmp_discard(kiln_tmpfile *tmp)
{
    if (!tmp)
        return;
    unlink(tmp->path);
    slot_release(tmp);
}

/* Whether outputs are fsynced before their rename: KILN_FSYNC=1 (read once).
 * Off by default: the rename alone makes an output whole or absent for every
 * reader and across a crash or kill of kiln; fsync adds durability across a
 * crash of the machine, at a disk flush per output (milliseconds, often more
 * than compiling a small model). */
static bool want_sync(void)
{
    static atomic_int on = -1; /* -1: not read yet */
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("KILN_FSYNC");
        v = e && e[0] && strcmp(e, "0") != 0;
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v != 0;
}

/* fsync @p fd when KILN_FSYNC asks for it; a file system that cannot sync
 * (EINVAL/EROFS: pipes, special file systems) is not an error. */
static kiln_status sync_fd(int fd, const char *path, kiln_error *err)
{
    if (!want_sync())
        return KILN_OK;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return kiln_errorf(err, KILN_ERR_IO, "cannot sync %s: %s", path, strerror(errno));
    return KILN_OK;
}

static kiln_status sync_path(const char *tmp, const char *path, kiln_error *err)
{
    if (!want_sync())
        return KILN_OK;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW);
    if (fd < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", tmp, strerror(errno));
    kiln_status st = sync_fd(fd, path, err);
    close(fd);
    return st;
}

/* Copy the temporary @p tmp to standard output (@p dest NULL) or into the
 * non-regular file @p dest. */
static kiln_status copy_to_stdout(const char *tmp, const char *dest, kiln_error *err)
{
    int out = STDOUT_FILENO;
    if (dest && (out = open(dest, O_WRONLY | O_TRUNC | O_NOCTTY)) < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", dest, strerror(errno));
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) {
        if (dest)
            close(out);
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", tmp, strerror(errno));
    }
    fflush(stdout);
    kiln_status st = KILN_OK;
    char buf[1 << 16];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof(buf));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", tmp, strerror(errno));
            break;
        }
        if (got == 0)
            break;
        for (ssize_t off = 0; off < got;) {
            ssize_t k = write(out, buf + off, (size_t)(got - off));
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0) {
                st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s",
                                 dest ? dest : "standard output", strerror(errno));
                break;
            }
            off += k;
        }
        if (st != KILN_OK)
            break;
    }
    close(fd);
    if (dest && close(out) != 0 && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s", dest, strerror(errno));
    return st;
}

/* Put the temporary in place now: copy it out (stdout) or rename it. */
static kiln_status finish(kiln_tmpfile *t, const char *path, kiln_error *err)
{
    kiln_status st;
    if (t->dest && !t->to_stdout)
        path = t->dest;
    if (t->to_stdout)
        st = copy_to_stdout(t->path, t->dest, err);
    else if (rename(t->path, path) != 0)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot rename %s to %s: %s", t->path, path,
                         strerror(errno));
    else
        st = KILN_OK;
    if (t->to_stdout || st != KILN_OK)
        unlink(t->path);
    slot_release(t);
    return st;
}

/* ---- output sets ----------------------------------------------------------- */

typedef struct held {
    kiln_tmpfile *tmp;
    char *path;
} held;

static struct {
    bool on;
    held *v;
    uint32_t n, cap;
} defer;

void kiln_file_defer_begin(void)
{
    defer.on = true;
    defer.n = 0;
}

static void defer_reset(void)
{
    for (uint32_t i = 0; i < defer.n; i++)
        kiln__free(defer.v[i].path);
    kiln__free(defer.v);
    memset(&defer, 0, sizeof(defer));
}

void kiln_file_defer_abort(void)
{
    for (uint32_t i = 0; i < defer.n; i++)
        kiln_file_tmp_discard(defer.v[i].tmp);
    defer_reset();
}

/* Append ", name" to @p buf (bounded). */
static void list_add(char *buf, size_t size, const char *name)
{
    size_t used = strlen(buf);
    if (used < size)
        kiln__fmt(buf + used, size - used, "%s%s", used ? ", " : "",
                  strcmp(name, "-") ? name : "standard output");
}

kiln_status kiln_file_defer_commit(kiln_error *err)
{
    kiln_status st = KILN_OK;
    uint32_t i = 0;
    char done[256] = "";
    /* Standard output first: it is the step most likely to fail (a closed
     * pipe), and it cannot be taken back, while a rename not yet made can. */
    for (int pass = 0; pass < 2 && st == KILN_OK; pass++)
        for (i = 0; i < defer.n && st == KILN_OK; i++) {
            held *h = &defer.v[i];
            if (!h->tmp || h->tmp->to_stdout != (pass == 0))
                continue;
            kiln_tmpfile *t = h->tmp;
            h->tmp = NULL;
            if ((st = finish(t, h->path, err)) == KILN_OK)
                list_add(done, sizeof(done), h->path);
        }
    if (st != KILN_OK) {
        char left[256] = "";
        for (uint32_t k = 0; k < defer.n; k++)
            if (defer.v[k].tmp) {
                list_add(left, sizeof(left), defer.v[k].path);
                kiln_file_tmp_discard(defer.v[k].tmp);
                defer.v[k].tmp = NULL;
            }
        if (done[0] || left[0])
            kiln_error_push(err, "outputs: %s%s%s%s%s", done[0] ? "written: " : "", done,
                            done[0] && left[0] ? "; " : "", left[0] ? "not written: " : "", left);
    }
    defer_reset();
    return st;
}

kiln_status kiln_file_tmp_commit(kiln_tmpfile *tmp, const char *path, kiln_error *err)
{
    kiln_status st = KILN_OK;
    if (!tmp->to_stdout && (st = sync_path(tmp->path, path, err)) != KILN_OK) {
        kiln_file_tmp_discard(tmp);
        return st;
    }
    if (!defer.on)
        return finish(tmp, path, err);
    char *p = kiln__strdup(path);
    if (!p || !KILN_GROW(defer.v, defer.cap, defer.n + 1)) {
        kiln__free(p);
        kiln_file_tmp_discard(tmp);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing %s", path);
    }
    defer.v[defer.n++] = (held){tmp, p};
    return KILN_OK;
}

kiln_status kiln_file_commit(const char *tmp, const char *path, kiln_error *err)
{
    /* A temporary from kiln_file_tmp_create is in the table already. */
    kiln_tmpfile *t = NULL;
    for (tmp_chunk *c = &chunk0; c && !t; c = atomic_load(&c->next))
        for (int i = 0; i < CHUNK_SLOTS && !t; i++)
            if (atomic_load(&c->slot[i].state) == SLOT_LIVE && strcmp(c->slot[i].path, tmp) == 0)
                t = &c->slot[i];
    if (!t) {
        size_t n = strlen(tmp);
        if (n >= SLOT_PATH || !(t = slot_claim())) {
            unlink(tmp);
            return kiln_errorf(err, n >= SLOT_PATH ? KILN_ERR_IO : KILN_ERR_NOMEM,
                               "cannot commit %s: %s", path,
                               n >= SLOT_PATH ? strerror(ENAMETOOLONG) : "out of memory");
        }
        memcpy(t->path, tmp, n + 1);
        t->to_stdout = strcmp(path, "-") == 0;
        t->dest = NULL;
        atomic_store(&t->state, SLOT_LIVE);
    }
    return kiln_file_tmp_commit(t, path, err);
}

kiln_status kiln_file_write_atomic(const char *path, kiln_file_write_fn write_fn, void *ud,
                                   kiln_error *err)
{
    kiln_tmpfile *t;
    int fd;
    char *vbuf = NULL;
    kiln_status st = kiln_file_tmp_create(path, &t, &fd, err);
    if (st != KILN_OK)
        return st;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", t->path, strerror(errno));
        close(fd);
        goto fail;
    }
    /* 256 KiB of stdio buffer (default: one 4 KiB block): one write(2) per
     * 256 KiB of output instead of per block */
    enum { OUT_BUF = 256 * 1024 };
    vbuf = kiln__malloc(OUT_BUF);
    if (vbuf)
        setvbuf(f, vbuf, _IOFBF, OUT_BUF);
    st = write_fn(f, ud, err);
    if (st != KILN_OK)
        goto fail;
    if (ferror(f) || fflush(f) != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!t->to_stdout && (st = sync_fd(fileno(f), path, err)) != KILN_OK)
        goto fail;
    int rc = fclose(f);
    f = NULL;
    kiln__free(vbuf);
    vbuf = NULL;
    if (rc != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!defer.on)
        return finish(t, path, err);
    char *p = kiln__strdup(path);
    if (!p || !KILN_GROW(defer.v, defer.cap, defer.n + 1)) {
        kiln__free(p);
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing %s", path);
        goto fail;
    }
    defer.v[defer.n++] = (held){t, p};
    return KILN_OK;

fail:
    if (f)
        fclose(f);
    kiln__free(vbuf);
    kiln_file_tmp_discard(t);
    return st;
}

/* ---- reading ------------------------------------------------------------- */

kiln_status kiln_file_check_input(const char *path, kiln_error *err)
{
    struct stat sb;
    if (strcmp(path, "-") == 0)
        return KILN_OK;
    if (stat(path, &sb) != 0)
        return kiln_errorf(err, errno == ENOENT ? KILN_ERR_NOT_FOUND : KILN_ERR_IO,
                           "cannot open %s: %s", path,
                           errno == ENOENT ? "no such file" : strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return kiln_errorf(err, KILN_ERR_IO, "%s is a directory, not a file", path);
    return KILN_OK;
}

kiln_status kiln_file_read_all(const char *path, char **buf, size_t *len, kiln_error *err)
{
    *buf = NULL;
    if (len)
        *len = 0;
    kiln_status st = KILN_OK;
    char *data = NULL;
    size_t cap = 0, n = 0;
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", path, strerror(errno));

    /* Size hint from fstat; the loop below still handles files that grow or
     * report 0 (pipes, /proc). */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = kiln_errorf(err, KILN_ERR_IO, "%s is a directory, not a file", path);
        goto fail;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
        cap = (size_t)sb.st_size + 1;
    if (cap < 4096)
        cap = 4096;
    data = kiln__malloc(cap);
    if (!data) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory reading %s", path);
        goto fail;
    }
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap * 2;
            char *nd = kiln__realloc(data, ncap);
            if (!nd) {
                st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory reading %s", path);
                goto fail;
            }
            data = nd;
            cap = ncap;
        }
        size_t got = fread(data + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s",
                                 is_stdin ? "standard input" : path, strerror(errno));
                goto fail;
            }
            break;
        }
    }
    if (!is_stdin)
        fclose(f);
    data[n] = 0;
    *buf = data;
    if (len)
        *len = n;
    return KILN_OK;

fail:
    if (!is_stdin)
        fclose(f);
    kiln__free(data);
    return st;
}
