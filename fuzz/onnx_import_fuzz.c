/*
 * onnx_import_fuzz.c - libFuzzer target for the ONNX frontend's importer
 * (make fuzz, docs/onnx.md).  Not part of make test.
 *
 * The plugin's real sources (plugins/frontends/onnx/ *.c and the protobuf-c
 * code generated from Debian's onnx.proto) and the kernel's sources are
 * compiled into this binary with -fsanitize=fuzzer,address,undefined.  The
 * plugin is registered through its own entry point with
 * kiln_plugin_register_static(), exactly as the loader would after dlopen(),
 * and its import hook is called on a path: each input is written to a memfd
 * and handed over as /proc/self/fd/N.
 *
 * Per input: import; on success the graph must pass kiln_graph_verify (the
 * importer must never produce an invalid graph), the JSON writer must work,
 * and the exporter must not crash (it may refuse the graph).  On failure the
 * error message must name the file.  Anything else aborts.
 */
#include "plugin.h"
#include "graph_int.h"
#include "graph_json.h"
#include "verify.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The plugin's entry point (KILN_PLUGIN_DEFINE in plugins/frontends/onnx/plugin.c). */
const kiln_plugin_desc *kiln_plugin_entry(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_fd = -1, out_fd = -1;
static char in_path[64], out_path[64];

static void die(const char *what, const kiln_error *err)
{
    char buf[2048] = "";
    if (err)
        kiln_error_format(err, buf, sizeof(buf));
    fprintf(stderr, "onnx_import_fuzz: %s: %s\n", what, buf);
    abort();
}

static void setup(void)
{
    in_fd = memfd_create("kiln-fuzz-in.onnx", 0);
    out_fd = memfd_create("kiln-fuzz-out.onnx", 0);
    if (in_fd < 0 || out_fd < 0)
        die("memfd_create failed", NULL);
    snprintf(in_path, sizeof(in_path), "/proc/self/fd/%d", in_fd);
    snprintf(out_path, sizeof(out_path), "/proc/self/fd/%d", out_fd);
}

static void put_input(const uint8_t *data, size_t size)
{
    if (ftruncate(in_fd, 0) != 0)
        die("ftruncate failed", NULL);
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(in_fd, data + off, size - off, (off_t)off);
        if (w <= 0)
            die("pwrite failed", NULL);
        off += (size_t)w;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (in_fd < 0)
        setup();
    put_input(data, size);

    /* A fresh context per input: nothing (interned names, registry) carries over. */
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        die("kiln_ctx_create failed", NULL);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_plugin_register_static(ctx, kiln_plugin_entry(), NULL, &err) != KILN_OK)
        die("registering the onnx plugin failed", &err);
    const kiln_component *fe = kiln_registry_find(ctx, KILN_COMP_FRONTEND, "onnx");
    if (!fe || !fe->d.frontend.import_file || !fe->d.frontend.export_file)
        die("the onnx frontend is not registered", NULL);

    kiln_graph *g = kiln_graph_create(ctx, "fuzz.onnx");
    if (!g)
        die("kiln_graph_create failed", NULL);
    kiln_status st = fe->d.frontend.import_file(g, in_path, &err);
    if (st != KILN_OK) {
        /* Refused: a clean error that names the file. */
        char buf[2048];
        kiln_error_format(&err, buf, sizeof(buf));
        if (kiln_error_code(&err) != st || !strstr(buf, in_path))
            die("import error without the file name or with a mismatched code", &err);
    } else {
        if (kiln_graph_verify(g, &err) != KILN_OK)
            die("the importer produced a graph the verifier rejects", &err);
        char *json = kiln_graph_to_json_string(g, &err);
        if (!json)
            die("the JSON writer failed on an imported graph", &err);
        kiln__free(json);
        /* Export may refuse (e.g. a Loop whose final condition is used), never crash. */
        kiln_error_clear(&err);
        if (ftruncate(out_fd, 0) != 0)
            die("ftruncate failed", NULL);
        (void)fe->d.frontend.export_file(g, out_path, &err);
    }
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    return 0;
}
