/*
 * digest.h - SHA-256 of files (nettle), for the paused tuning
 * state: it records the digest of every manifest and plugin file that decided
 * the build, and `kiln compile --resume` refuses a state whose files changed.
 * Only core/ and the CLI include this header.
 */
#ifndef KILN_CORE_DIGEST_H
#define KILN_CORE_DIGEST_H

#include "base.h"

#define KILN_SHA256_HEX_LEN 64 /* lowercase hex digits; buffers take one more for the NUL */

/**
 * SHA-256 of the content of @p path as lowercase hex in @p hex (NUL-terminated).
 * The file is read in blocks, so memory does not grow with its size.
 * Errors: KILN_ERR_IO naming the file and strerror, KILN_ERR_NOMEM.
 */
kiln_status kiln__sha256_file(const char *path, char hex[KILN_SHA256_HEX_LEN + 1],
                              kiln_error *err);

#endif /* KILN_CORE_DIGEST_H */
