/*
 * kmodel_import_fuzz.c - libFuzzer target for the executable model file's
 * loader (plugins/model, docs/model_format.md; make fuzz).  Not part of make
 * test.
 *
 * The plugin's sources (with the protobuf-c code generated from
 * kmodel.proto) and the kernel's are compiled into this binary with
 * -fsanitize=fuzzer,address,undefined; the plugin is registered through its
 * entry point with kiln_plugin_register_static() and its import hook is
 * called on /proc/self/fd/N of a memfd holding the input.
 *
 * Every other input (odd size) first gets its size and the SHA-256 of each
 * section its table places inside the data written into the header and the
 * table, so that mutations
 * reach the protobuf decoding and the graph checks behind the hash check;
 * the even ones test the hash check itself.
 *
 * Per input: import.  A refusal must carry a message naming the file.  An
 * accepted file's graph goes to the verifier (as the host's compile and write
 * do; a rejection must carry a message); a valid one must be written by the
 * JSON writer, and writing it back as a model file and loading that must work
 * (the writer and the loader agree on everything the loader accepts).
 * Anything else aborts.  A useful seed corpus: the .kmodel files of
 * `kiln compile examples/*.json -o X.kmodel`.
 */
#include "fuzz_io.h"
#include "plugin.h"
#include "graph_int.h"
#include "graph_json.h"
#include "verify.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const kiln_plugin_desc *kiln_plugin_entry_kmodel(void);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Write into @p b its size @p n and the SHA-256 of every section its table
 * places inside the data. */
static void fix_hashes(uint8_t *b, size_t n)
{
    if (n < 64)
        return;
    for (int i = 0; i < 8; i++)
        b[24 + i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint64_t hsize = le(b + 12, 4), count = le(b + 16, 4), esize = le(b + 20, 4);
    if (hsize < 64 || esize < 64 || count > 64 || hsize + count * esize > n)
        return;
    for (uint64_t i = 0; i < count; i++) {
        uint8_t *e = b + hsize + i * esize;
        uint64_t off = le(e + 8, 8), len = le(e + 16, 8);
        unsigned int dl = 0;
        if (off <= n && len <= n - off)
            EVP_Digest(b + off, (size_t)len, e + 24, &dl, EVP_sha256(), NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_in_path[0])
        fuzz_io_setup("kmodel_import_fuzz", ".kmodel");
    if (size % 2) {
        uint8_t *copy = malloc(size);
        if (!copy)
            fuzz_die("out of memory", NULL);
        memcpy(copy, data, size);
        fix_hashes(copy, size);
        fuzz_put_input(copy, size);
        free(copy);
    } else {
        fuzz_put_input(data, size);
    }
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        fuzz_die("kiln_ctx_create failed", NULL);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_plugin_register_static(ctx, kiln_plugin_entry_kmodel(), NULL, &err) != KILN_OK)
        fuzz_die("registering the kmodel plugin failed", &err);
    const kiln_component *fe = kiln_registry_find(ctx, KILN_COMP_FRONTEND, "kmodel");
    if (!fe || !fe->d.frontend.import_file || !fe->d.frontend.export_file)
        fuzz_die("the kmodel frontend is not registered", NULL);
    kiln_graph *g = kiln_graph_create(ctx, "fuzz.kmodel");
    if (!g)
        fuzz_die("kiln_graph_create failed", NULL);
    kiln_status st = fe->d.frontend.import_file(g, fuzz_in_path, &err);
    if (st != KILN_OK) {
        char buf[2048];
        kiln_error_format(&err, buf, sizeof(buf));
        if (kiln_error_code(&err) != st || !strstr(buf, fuzz_in_path))
            fuzz_die("import error without the file name or with a mismatched code", &err);
    } else {
        /* The host verifies a loaded model before it runs or writes it
         * (kiln_model_compile, kiln_model_write): a rejection must carry a
         * message; only a valid graph goes on. */
        if ((st = kiln_graph_verify(g, &err)) != KILN_OK) {
            char buf[2048] = "";
            kiln_error_format(&err, buf, sizeof(buf));
            if (!buf[0])
                fuzz_die("the verifier rejected a loaded graph without a message", &err);
            kiln_graph_destroy(g);
            kiln_ctx_destroy(ctx);
            return 0;
        }
        char *json = kiln_graph_to_json_string(g, &err);
        if (!json)
            fuzz_die("the JSON writer failed on a loaded graph", &err);
        kiln__free(json);
        if (ftruncate(fuzz_out_fd, 0) != 0)
            fuzz_die("ftruncate failed", NULL);
        if (fe->d.frontend.export_file(g, fuzz_out_path, &err) != KILN_OK)
            fuzz_die("writing a loaded model back failed", &err);
        kiln_graph *g2 = kiln_graph_create(ctx, "again.kmodel");
        if (!g2 || fe->d.frontend.import_file(g2, fuzz_out_path, &err) != KILN_OK)
            fuzz_die("loading a model written from a loaded one failed", &err);
        kiln_graph_destroy(g2);
    }
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    return 0;
}
