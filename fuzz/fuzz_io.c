/*
 * fuzz_io.c - the harnesses' memfd files and fatal report (fuzz_io.h).
 */
#include "fuzz_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

char fuzz_in_path[64], fuzz_out_path[64];
int fuzz_out_fd = -1;
static int in_fd = -1;
static const char *harness_name = "fuzz";

_Noreturn void fuzz_die(const char *what, const kiln_error *err)
{
    char buf[2048] = "";
    if (err)
        kiln_error_format(err, buf, sizeof(buf));
    fprintf(stderr, "%s: %s: %s\n", harness_name, what, buf);
    abort();
}

void fuzz_io_setup(const char *harness, const char *ext)
{
    char name[64];
    harness_name = harness;
    snprintf(name, sizeof(name), "kiln-fuzz-in%s", ext);
    in_fd = memfd_create(name, 0);
    snprintf(name, sizeof(name), "kiln-fuzz-out%s", ext);
    fuzz_out_fd = memfd_create(name, 0);
    if (in_fd < 0 || fuzz_out_fd < 0)
        fuzz_die("memfd_create failed", NULL);
    snprintf(fuzz_in_path, sizeof(fuzz_in_path), "/proc/self/fd/%d", in_fd);
    snprintf(fuzz_out_path, sizeof(fuzz_out_path), "/proc/self/fd/%d", fuzz_out_fd);
}

void fuzz_put_input(const uint8_t *data, size_t size)
{
    if (ftruncate(in_fd, 0) != 0)
        fuzz_die("ftruncate failed", NULL);
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(in_fd, data + off, size - off, (off_t)off);
        if (w <= 0)
            fuzz_die("pwrite failed", NULL);
        off += (size_t)w;
    }
}
