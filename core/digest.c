/*
 * digest.c - SHA-256 of files through OpenSSL's libcrypto EVP interface (see
 * digest.h).  The file is streamed in 64 KiB blocks: O(file size) time,
 * O(1) memory.
 */
#include "digest.h"

#include <errno.h>
#include <openssl/evp.h>

kiln_status kiln__sha256_file(const char *path, char hex[KILN_SHA256_HEX_LEN + 1],
                              kiln_error *err)
{
    hex[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = kiln__malloc(1 << 16);
    kiln_status st = KILN_OK;
    if (!md || !buf) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory hashing %s", path);
        goto done;
    }
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "cannot hash %s: SHA-256 unavailable", path);
        goto done;
    }
    size_t n;
    while ((n = fread(buf, 1, 1 << 16, f)) > 0)
        if (EVP_DigestUpdate(md, buf, n) != 1) {
            st = kiln_errorf(err, KILN_ERR_INTERNAL, "cannot hash %s", path);
            goto done;
        }
    if (ferror(f)) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(md, d, &dlen) != 1 || dlen * 2 != KILN_SHA256_HEX_LEN) {
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "cannot hash %s", path);
        goto done;
    }
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < dlen; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * dlen] = 0;
done:
    EVP_MD_CTX_free(md);
    kiln__free(buf);
    fclose(f);
    return st;
}
