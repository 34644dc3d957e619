/*
 * digest.c - SHA-256 of files through nettle (see
 * digest.h).  The file is streamed in 64 KiB blocks: O(file size) time,
 * O(1) memory.
 */
#include "digest.h"

#include <errno.h>
#include <nettle/sha2.h>

kiln_status kiln__sha256_file(const char *path, char hex[KILN_SHA256_HEX_LEN + 1],
                              kiln_error *err)
{
    hex[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    struct sha256_ctx md;
    sha256_init(&md);
    unsigned char *buf = kiln__malloc(1 << 16);
    kiln_status st = KILN_OK;
    if (!buf) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory hashing %s", path);
        goto done;
    }
    size_t n;
    while ((n = fread(buf, 1, 1 << 16, f)) > 0)
        sha256_update(&md, n, buf);
    if (ferror(f)) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    unsigned char d[SHA256_DIGEST_SIZE];
    unsigned dlen = SHA256_DIGEST_SIZE;
    sha256_digest(&md, dlen, d);
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < dlen; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * dlen] = 0;
done:
    kiln__free(buf);
    fclose(f);
    return st;
}
