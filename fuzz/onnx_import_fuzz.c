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
 *
 * Built with KILN_FUZZ_RUN (the onnx_run_fuzz target) the imported graph goes
 * on, as `kiln run` takes it: the CPU engine plugin and the sequential
 * runtime are registered too, every unknown dim of a root input is bound to
 * 2, InferShapes runs (it folds constants, so the kernels run there too),
 * and a graph whose every tensor is static and small (FUZZ_MAX_BYTES) is
 * loaded and run on inputs filled with a pattern.  Passes and the runtime
 * may refuse a graph -- with a message -- but never crash, leak or hit
 * undefined behaviour.
 */
#include "fuzz_io.h"
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

/* The plugins' entry points (KILN_PLUGIN_DEFINE, renamed per plugin by fuzz/CMakeLists.txt). */
const kiln_plugin_desc *kiln_plugin_entry(void);
#ifdef KILN_FUZZ_RUN
const kiln_plugin_desc *kiln_plugin_entry_onnx_ops(void);
const kiln_plugin_desc *kiln_plugin_entry_aicore(void);
const kiln_plugin_desc *kiln_plugin_entry_vector(void);
const kiln_plugin_desc *kiln_plugin_entry_hostcpu(void);
const kiln_plugin_desc *kiln_plugin_entry_rts(void);
const kiln_plugin_desc *kiln_plugin_entry_seq(void);
#include "manifest.h"
#include "stage.h"
/* Largest tensor and total bytes a run may touch (keeps every input fast). */
#define FUZZ_MAX_BYTES (16u << 20)
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef KILN_FUZZ_RUN
/* A refusal must come with a message. */
static void refused(const char *what, kiln_status st, const kiln_error *err)
{
    char buf[2048] = "";
    kiln_error_format(err, buf, sizeof(buf));
    if (st == KILN_OK || !buf[0])
        fuzz_die(what, err);
}

/* True when every output of every root node is static and the sum is small. */
static bool small_and_static(kiln_graph *g)
{
    uint64_t total = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
            const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
            int64_t numel = kiln_desc_numel(d);
            size_t esz = kiln_dtype_size(kiln_desc_dtype(d));
            if (numel < 0 || esz == 0 || (uint64_t)numel > FUZZ_MAX_BYTES / esz)
                return false;
            total += (uint64_t)numel * esz;
            if (total > FUZZ_MAX_BYTES)
                return false;
        }
    return true;
}

/* InferShapes, then load and run on the sequential runtime. */
static void run_graph(kiln_ctx *ctx, kiln_graph *g)
{
    kiln_error err;
    kiln_error_clear(&err);
    /* Bind unknown input dims to 2, as `kiln run` binds them from the inputs. */
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (strcmp(kiln_node_op_str(g, n), "Data") != 0 || kiln_node_output_count(g, n) == 0)
            continue;
        kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        int32_t rank = kiln_desc_rank(d);
        if (rank <= 0 || rank > 8)
            continue;
        int64_t dims[8];
        for (int32_t k = 0; k < rank; k++)
            dims[k] = kiln_desc_dims(d)[k] < 0 ? 2 : kiln_desc_dims(d)[k];
        (void)kiln_desc_set_shape(g, d, rank, dims);
    }
    kiln_pipeline p;
    memset(&p, 0, sizeof(p));
    kiln_status st = kiln__pipeline_parse_text(ctx, "InferShapes", &p, &err);
    if (st != KILN_OK)
        fuzz_die("pipeline text InferShapes", &err);
    p.instr.bisect_limit = -1;
    kiln_stage_run run;
    memset(&run, 0, sizeof(run));
    st = kiln_stage_run_pipeline(ctx, &p, g, &run, &err);
    kiln_stage_run_fini(&run);
    kiln_pipeline_clear(&p);
    if (st != KILN_OK) {
        refused("InferShapes failed without a message", st, &err);
        return;
    }
    if (kiln_graph_verify(g, &err) != KILN_OK)
        fuzz_die("InferShapes left a graph the verifier rejects", &err);
    if (!small_and_static(g))
        return;
    const kiln_component *rt = kiln_registry_find(ctx, KILN_COMP_RUNTIME, "sequential");
    if (!rt)
        fuzz_die("the sequential runtime is not registered", NULL);
    /* Inputs: the root Data nodes by index, filled with a pattern. */
    uint32_t nin = 0, nout = 0;
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        nin += strcmp(kiln_node_op_str(g, n), "Data") == 0;
        if (strcmp(kiln_node_op_str(g, n), "NetOutput") == 0)
            no = n;
    }
    nout = no ? kiln_node_input_count(g, no) : 0;
    kiln_tensor *in = calloc(nin + 1u, sizeof(kiln_tensor));
    kiln_tensor *out = calloc(nout + 1u, sizeof(kiln_tensor));
    if (!in || !out)
        fuzz_die("out of memory", NULL);
    bool ok = true;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && ok; n = kiln_graph_next_node(g, n)) {
        int64_t idx;
        if (strcmp(kiln_node_op_str(g, n), "Data") != 0)
            continue;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx) || idx < 0 ||
            idx >= (int64_t)nin || in[idx].data) {
            ok = false;
            break;
        }
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
        kiln_tensor *t = &in[idx];
        t->dtype = kiln_desc_dtype(d);
        t->rank = (uint32_t)kiln_desc_rank(d);
        t->dims = kiln_desc_dims(d);
        t->nbytes = (size_t)kiln_desc_numel(d) * kiln_dtype_size(t->dtype);
        t->data = malloc(t->nbytes + 1);
        if (!t->data)
            fuzz_die("out of memory", NULL);
        for (size_t b = 0; b < t->nbytes; b++) /* small values of every dtype, some negative */
            ((uint8_t *)t->data)[b] = (uint8_t)((b * 37u + 11u) % 7u == 0 ? 0x80 : (b * 13u) & 0x3f);
    }
    void *inst = NULL, *model = NULL;
    kiln_error_clear(&err);
    if (ok && (!rt->d.runtime.create || (st = rt->d.runtime.create(NULL, &err, &inst)) == KILN_OK)) {
        if ((st = rt->d.runtime.load(inst, g, &model, &err)) == KILN_OK) {
            st = rt->d.runtime.run(inst, model, in, nin, out, nout, &err);
            if (st != KILN_OK)
                refused("the runtime failed without a message", st, &err);
            rt->d.runtime.unload(inst, model);
        } else {
            refused("the runtime refused to load without a message", st, &err);
        }
        if (rt->d.runtime.destroy)
            rt->d.runtime.destroy(inst);
    }
    for (uint32_t i = 0; i < nin; i++)
        free(in[i].data);
    for (uint32_t j = 0; j < nout; j++) {
        kiln_free((void *)(uintptr_t)out[j].dims);
        kiln_free(out[j].data);
    }
    free(in);
    free(out);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_in_path[0])
        fuzz_io_setup("onnx_import_fuzz", ".onnx");
    fuzz_put_input(data, size);

    /* A fresh context per input: nothing (interned names, registry) carries over. */
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        fuzz_die("kiln_ctx_create failed", NULL);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_plugin_register_static(ctx, kiln_plugin_entry(), NULL, &err) != KILN_OK)
        fuzz_die("registering the onnx plugin failed", &err);
#ifdef KILN_FUZZ_RUN
    if (kiln_plugin_register_static(ctx, kiln_plugin_entry_onnx_ops(), NULL, &err) != KILN_OK ||
        kiln_plugin_register_static(ctx, kiln_plugin_entry_aicore(), NULL, &err) != KILN_OK ||
        kiln_plugin_register_static(ctx, kiln_plugin_entry_vector(), NULL, &err) != KILN_OK ||
        kiln_plugin_register_static(ctx, kiln_plugin_entry_hostcpu(), NULL, &err) != KILN_OK ||
        kiln_plugin_register_static(ctx, kiln_plugin_entry_rts(), NULL, &err) != KILN_OK ||
        kiln_plugin_register_static(ctx, kiln_plugin_entry_seq(), NULL, &err) != KILN_OK)
        fuzz_die("registering the op set, engine or runtime plugins failed", &err);
#endif
    const kiln_component *fe = kiln_registry_find(ctx, KILN_COMP_FRONTEND, "onnx");
    if (!fe || !fe->d.frontend.import_file || !fe->d.frontend.export_file)
        fuzz_die("the onnx frontend is not registered", NULL);

    kiln_graph *g = kiln_graph_create(ctx, "fuzz.onnx");
    if (!g)
        fuzz_die("kiln_graph_create failed", NULL);
    kiln_status st = fe->d.frontend.import_file(g, fuzz_in_path, &err);
    if (st != KILN_OK) {
        /* Refused: a clean error that names the file. */
        char buf[2048];
        kiln_error_format(&err, buf, sizeof(buf));
        if (kiln_error_code(&err) != st || !strstr(buf, fuzz_in_path))
            fuzz_die("import error without the file name or with a mismatched code", &err);
    } else {
        if (kiln_graph_verify(g, &err) != KILN_OK)
            fuzz_die("the importer produced a graph the verifier rejects", &err);
        char *json = kiln_graph_to_json_string(g, &err);
        if (!json)
            fuzz_die("the JSON writer failed on an imported graph", &err);
        kiln__free(json);
        /* Export may refuse (e.g. a Loop whose final condition is used), never crash. */
        kiln_error_clear(&err);
        if (ftruncate(fuzz_out_fd, 0) != 0)
            fuzz_die("ftruncate failed", NULL);
        (void)fe->d.frontend.export_file(g, fuzz_out_path, &err);
#ifdef KILN_FUZZ_RUN
        run_graph(ctx, g);
#endif
    }
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    return 0;
}
