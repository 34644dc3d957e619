/*
 * digest.h - SHA-256 of files (nettle), for the paused tuning state (it
 * records the digest of every manifest and plugin file that decided the
 * build; `kiln compile --resume` refuses a state whose files changed) and for
 * the model cache's keys and entry checks.  Only core/ and the CLI include
 * this header.
 *
 * The digest memo spares the model cache re-reading files it has hashed
 * before (the model, libkiln, every plugin, the entries it checks): a file
 * in `<cache dir>/kiln-digests` is known by its device, inode, size and
 * modification and status-change times (nanoseconds), and a file whose
 * signature still matches has the recorded digest.  Any write changes the
 * status-change time, which no user call can set back, so a changed file is
 * hashed again.  Only files whose last change is at least
 * kiln__digest_memo_min_age_s seconds old are recorded (a change within the
 * timestamps' granularity would keep the signature), and only when the
 * signature was the same before and after the read.  docs/model_cache.md.
 */
#ifndef KILN_CORE_DIGEST_H
#define KILN_CORE_DIGEST_H

#include "base.h"

#include <sys/stat.h>

#define KILN_SHA256_HEX_LEN 64 /* lowercase hex digits; buffers take one more for the NUL */

/**
 * SHA-256 of the content of @p path as lowercase hex in @p hex (NUL-terminated).
 * The file is read in blocks, so memory does not grow with its size.
 * Errors: KILN_ERR_IO naming the file and strerror, KILN_ERR_NOMEM.
 */
kiln_status kiln__sha256_file(const char *path, char hex[KILN_SHA256_HEX_LEN + 1], kiln_error *err);

/** @p n bytes of @p d as lowercase hex in @p hex (2n digits and a NUL). */
void kiln__to_hex(const unsigned char *d, unsigned n, char *hex);

/** A file's identity and timestamps, what the digest memo knows it by. */
typedef struct kiln_file_sig {
    uint64_t dev, ino;
    int64_t size;
    int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
} kiln_file_sig;

/** Seconds since its last change before a file's digest is remembered (3;
 * the tests lower it). */
extern int kiln__digest_memo_min_age_s;

void kiln__file_sig_of(const struct stat *sb, kiln_file_sig *sig);

/**
 * kiln__sha256_file through the memo of directory @p dir (NULL or "": no
 * memo): the recorded digest when the file's signature matches one in the
 * memo, else the file is hashed and, when eligible, recorded.  A memo that
 * cannot be read or written only costs hashing.  Thread-safe.
 */
kiln_status kiln__sha256_file_memo(const char *dir, const char *path,
                                   char hex[KILN_SHA256_HEX_LEN + 1], kiln_error *err);

/** The memo of @p dir's digest for signature @p sig; false when it has none. */
bool kiln__digest_memo_lookup(const char *dir, const kiln_file_sig *sig,
                              char hex[KILN_SHA256_HEX_LEN + 1]);

/** Remember @p hex for a file read between signatures @p before and @p after
 * (nothing when they differ or the file changed too recently). */
void kiln__digest_memo_record(const char *dir, const kiln_file_sig *before,
                              const kiln_file_sig *after, const char *hex);

#endif /* KILN_CORE_DIGEST_H */
