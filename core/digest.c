/*
 * digest.c - SHA-256 of files through nettle, and the digest memo (see
 * digest.h).  A file is streamed in 64 KiB blocks: O(file size) time, O(1)
 * memory.  The memo answers from a file's identity and timestamps instead:
 * O(entries) per lookup, a few hundred entries at most.
 */
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void kiln__to_hex(const unsigned char *d, unsigned n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * n] = 0;
}

/* Hash what is left of @p fd; @p path names it in errors. */
static kiln_status sha256_fd(int fd, const char *path, char hex[KILN_SHA256_HEX_LEN + 1],
                             kiln_error *err)
{
    struct sha256_ctx md;
    sha256_init(&md);
    unsigned char *buf = kiln__malloc(1 << 16);
    if (!buf)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory hashing %s", path);
    kiln_status st = KILN_OK;
    for (;;) {
        ssize_t n = read(fd, buf, 1 << 16);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        sha256_update(&md, (size_t)n, buf);
    }
    kiln__free(buf);
    if (st != KILN_OK)
        return st;
    unsigned char d[SHA256_DIGEST_SIZE];
    sha256_digest(&md, SHA256_DIGEST_SIZE, d);
    kiln__to_hex(d, SHA256_DIGEST_SIZE, hex);
    return KILN_OK;
}

kiln_status kiln__sha256_file(const char *path, char hex[KILN_SHA256_HEX_LEN + 1], kiln_error *err)
{
    hex[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    kiln_status st = sha256_fd(fd, path, hex, err);
    close(fd);
    if (st != KILN_OK)
        hex[0] = 0;
    return st;
}

/* ---- the digest memo ------------------------------------------------------------- */

#define MEMO_FILE "kiln-digests"
#define MEMO_VERSION 1
#define MEMO_MAX 4096 /* entries; a longer file is started afresh */

int kiln__digest_memo_min_age_s = 3;

typedef struct memo_ent {
    kiln_file_sig sig;
    char hex[KILN_SHA256_HEX_LEN + 1];
} memo_ent;

/* One memo per process, for the directory it was last used with; every
 * access holds the lock (sessions may run on several threads). */
static struct {
    pthread_mutex_t lock;
    char *dir;
    memo_ent *e;
    uint32_t n, cap;
} memo = {.lock = PTHREAD_MUTEX_INITIALIZER};

void kiln__file_sig_of(const struct stat *sb, kiln_file_sig *sig)
{
    memset(sig, 0, sizeof(*sig));
    sig->dev = (uint64_t)sb->st_dev;
    sig->ino = (uint64_t)sb->st_ino;
    sig->size = (int64_t)sb->st_size;
    sig->mtime_s = (int64_t)sb->st_mtim.tv_sec;
    sig->mtime_ns = (int64_t)sb->st_mtim.tv_nsec;
    sig->ctime_s = (int64_t)sb->st_ctim.tv_sec;
    sig->ctime_ns = (int64_t)sb->st_ctim.tv_nsec;
}

static bool sig_eq(const kiln_file_sig *a, const kiln_file_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s &&
           a->mtime_ns == b->mtime_ns && a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

static char *memo_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof(MEMO_FILE) + 2;
    char *p = kiln__malloc(n);
    if (p)
        kiln__fmt(p, n, "%s%s" MEMO_FILE, dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/");
    return p;
}

/* Put @p e in the table, replacing an entry of the same file.  Lock held. */
static void memo_put(const memo_ent *e)
{
    for (uint32_t i = 0; i < memo.n; i++)
        if (memo.e[i].sig.dev == e->sig.dev && memo.e[i].sig.ino == e->sig.ino) {
            memo.e[i] = *e;
            return;
        }
    if (memo.n == memo.cap) {
        uint32_t cap = memo.cap ? memo.cap * 2 : 64;
        memo_ent *ne = kiln__realloc(memo.e, cap * sizeof(*ne));
        if (!ne)
            return; /* a memo is an optimisation: forget the entry */
        memo.e = ne;
        memo.cap = cap;
    }
    memo.e[memo.n++] = *e;
}

/* Make the table @p dir's (read its file when another directory's was
 * loaded).  Lock held.  Unreadable or malformed lines are skipped. */
static void memo_load(const char *dir)
{
    if (memo.dir && strcmp(memo.dir, dir) == 0)
        return;
    kiln__free(memo.dir);
    memo.dir = kiln__strdup(dir);
    memo.n = 0;
    char *p = memo_path(dir);
    FILE *f = p ? fopen(p, "re") : NULL;
    uint32_t lines = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof(line), f)) {
            memo_ent e;
            int v = 0;
            lines++;
            memset(&e, 0, sizeof(e));
            if (sscanf(line,
                       "%d %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                       " %" SCNd64 " %64[0-9a-f]",
                       &v, &e.sig.dev, &e.sig.ino, &e.sig.size, &e.sig.mtime_s, &e.sig.mtime_ns,
                       &e.sig.ctime_s, &e.sig.ctime_ns, e.hex) == 9 &&
                v == MEMO_VERSION && strlen(e.hex) == KILN_SHA256_HEX_LEN)
                memo_put(&e);
        }
        fclose(f);
    }
    if (p && lines > MEMO_MAX) { /* grown past use: start again */
        unlink(p);
        memo.n = 0;
    }
    kiln__free(p);
}

bool kiln__digest_memo_lookup(const char *dir, const kiln_file_sig *sig,
                              char hex[KILN_SHA256_HEX_LEN + 1])
{
    hex[0] = 0;
    if (!dir || !dir[0])
        return false;
    bool found = false;
    pthread_mutex_lock(&memo.lock);
    memo_load(dir);
    for (uint32_t i = 0; i < memo.n && !found; i++)
        if (sig_eq(&memo.e[i].sig, sig)) {
            memcpy(hex, memo.e[i].hex, KILN_SHA256_HEX_LEN + 1);
            found = true;
        }
    pthread_mutex_unlock(&memo.lock);
    return found;
}

void kiln__digest_memo_record(const char *dir, const kiln_file_sig *before,
                              const kiln_file_sig *after, const char *hex)
{
    if (!dir || !dir[0] || !sig_eq(before, after) || strlen(hex) != KILN_SHA256_HEX_LEN)
        return; /* the file changed while it was read: its digest is no one's */
    /* A file changed within the timestamps' granularity of its last change
     * would keep its signature: only a file left alone for a while is
     * remembered (git's "racily clean" rule). */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t last = before->ctime_s > before->mtime_s ? before->ctime_s : before->mtime_s;
    if ((int64_t)now.tv_sec - last < kiln__digest_memo_min_age_s)
        return;
    memo_ent e;
    memset(&e, 0, sizeof(e));
    e.sig = *before;
    memcpy(e.hex, hex, KILN_SHA256_HEX_LEN + 1);
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "%d %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
                     " %" PRId64 " %s\n",
                     MEMO_VERSION, e.sig.dev, e.sig.ino, e.sig.size, e.sig.mtime_s, e.sig.mtime_ns,
                     e.sig.ctime_s, e.sig.ctime_ns, e.hex);
    pthread_mutex_lock(&memo.lock);
    memo_load(dir);
    memo_put(&e);
    char *p = memo_path(dir);
    /* one write(2) of a short line with O_APPEND: concurrent compiles
     * append whole lines; a failure only costs the next compile a hash */
    int fd = p ? open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) != n) {
            /* best effort */
        }
        close(fd);
    }
    kiln__free(p);
    pthread_mutex_unlock(&memo.lock);
}

kiln_status kiln__sha256_file_memo(const char *dir, const char *path,
                                   char hex[KILN_SHA256_HEX_LEN + 1], kiln_error *err)
{
    if (!dir || !dir[0])
        return kiln__sha256_file(path, hex, err);
    hex[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    struct stat sb;
    kiln_file_sig before, after;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    }
    kiln__file_sig_of(&sb, &before);
    if (S_ISREG(sb.st_mode) && kiln__digest_memo_lookup(dir, &before, hex)) {
        close(fd);
        return KILN_OK;
    }
    kiln_status st = sha256_fd(fd, path, hex, err);
    if (st == KILN_OK && S_ISREG(sb.st_mode) && fstat(fd, &sb) == 0) {
        kiln__file_sig_of(&sb, &after);
        kiln__digest_memo_record(dir, &before, &after, hex);
    }
    close(fd);
    if (st != KILN_OK)
        hex[0] = 0;
    return st;
}
