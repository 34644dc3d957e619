/*
 * fileio.c - whole-file reads and atomic file output (see fileio.h).
 *
 * Atomic write protocol: mkstemp("<path>.tmpXXXXXX") in the destination's
 * directory -> fdopen -> write_fn -> fflush -> fsync -> fclose -> rename.  Any
 * failing step unlinks the temporary, so neither a partial destination nor a
 * stray temporary survives.  The temporary is created 0600 by mkstemp; before
 * the rename it is given the mode of the file it replaces, or 0644 for a new
 * file (reading the umask would need umask(2), which changes process state).
 *
 * Complexity: linear in the bytes written or read.
 */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* fsync @p fd; a file system that cannot sync (EINVAL/EROFS: pipes, special
 * file systems) is not an error. */
static kiln_status sync_fd(int fd, const char *path, kiln_error *err)
{
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return kiln_errorf(err, KILN_ERR_IO, "cannot sync %s: %s", path, strerror(errno));
    return KILN_OK;
}

kiln_status kiln_file_commit(const char *tmp, const char *path, kiln_error *err)
{
    kiln_status st = KILN_OK;
    int fd = open(tmp, O_RDONLY);
    if (fd < 0)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", tmp, strerror(errno));
    else if ((st = sync_fd(fd, path, err)) == KILN_OK && rename(tmp, path) != 0)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot rename %s to %s: %s", tmp, path,
                         strerror(errno));
    if (fd >= 0)
        close(fd);
    if (st != KILN_OK)
        unlink(tmp);
    return st;
}

kiln_status kiln_file_write_atomic(const char *path, kiln_file_write_fn write_fn, void *ud,
                                   kiln_error *err)
{
    kiln_status st = KILN_OK;
    FILE *f = NULL;
    int fd = -1;
    size_t plen = strlen(path);
    char *tmp = kiln__malloc(plen + sizeof(".tmpXXXXXX"));
    if (!tmp)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing %s", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmpXXXXXX", sizeof(".tmpXXXXXX"));

    fd = mkstemp(tmp);
    if (fd < 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot create temporary file for %s: %s", path,
                         strerror(errno));
        kiln__free(tmp);
        return st;
    }
    struct stat sb;
    mode_t mode = 0644;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        mode = sb.st_mode & 07777;
    if (fchmod(fd, mode) != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot set mode of %s: %s", tmp, strerror(errno));
        goto fail;
    }
    f = fdopen(fd, "wb");
    if (!f) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1; /* owned by f now */

    st = write_fn(f, ud, err);
    if (st != KILN_OK)
        goto fail;
    if (ferror(f) || fflush(f) != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    if ((st = sync_fd(fileno(f), path, err)) != KILN_OK)
        goto fail;
    int rc = fclose(f);
    f = NULL;
    if (rc != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot rename %s to %s: %s", tmp, path,
                         strerror(errno));
        goto fail;
    }
    kiln__free(tmp);
    return KILN_OK;

fail:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    kiln__free(tmp);
    return st;
}

kiln_status kiln_file_read_all(const char *path, char **buf, size_t *len, kiln_error *err)
{
    *buf = NULL;
    if (len)
        *len = 0;
    kiln_status st = KILN_OK;
    char *data = NULL;
    size_t cap = 0, n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open %s: %s", path, strerror(errno));

    /* Size hint from fstat; the loop below still handles files that grow or
     * report 0 (pipes, /proc). */
    struct stat sb;
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
                st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
                goto fail;
            }
            break;
        }
    }
    fclose(f);
    data[n] = 0;
    *buf = data;
    if (len)
        *len = n;
    return KILN_OK;

fail:
    fclose(f);
    kiln__free(data);
    return st;
}
