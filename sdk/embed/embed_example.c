/*
 * embed_example.c - compile and run a model in-process with libkiln
 * (kiln_embed.h, docs/embedding.md).
 *
 *   embed_example MODEL [-m MANIFEST] [-p PLUGIN]... [-O KEY=VALUE]...
 *                 [--passes PIPELINE] [--disable-pass REGEX] [-o OUT]...
 *
 * Imports MODEL (.json, or any format a frontend plugin of the manifest
 * reads, such as .onnx), binds every float32 input to deterministic data
 * (element k of input i is ((k + i) % 5) - 2), compiles it with the manifest's
 * pipeline (the default manifest unless -m), writes each OUT (format by
 * extension: .json, .dot, .onnx), runs it once and prints every output:
 *
 *   output 0 relu: float32 [2,3] 0 0 1 3 0 0
 *
 * Errors print "embed_example: <frames>: <message>" and exit 1.
 */
#include <kiln/kiln_embed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(kiln_error *err)
{
    char msg[2048];
    kiln_error_format(err, msg, sizeof(msg));
    fprintf(stderr, "embed_example: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *manifest = NULL, *passes = NULL;
    const char *plugins[16], *opts[16], *outs[16], *disable[16];
    int np = 0, no = 0, nout = 0, nd = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        const char *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(arg, "-m") && val)
            manifest = argv[++a];
        else if (!strcmp(arg, "-p") && val && np < 16)
            plugins[np++] = argv[++a];
        else if (!strcmp(arg, "-O") && val && no < 16)
            opts[no++] = argv[++a];
        else if (!strcmp(arg, "-o") && val && nout < 16)
            outs[nout++] = argv[++a];
        else if (!strcmp(arg, "--passes") && val)
            passes = argv[++a];
        else if (!strcmp(arg, "--disable-pass") && val && nd < 16)
            disable[nd++] = argv[++a];
        else if (arg[0] != '-' && !model_path)
            model_path = arg;
        else {
            fprintf(stderr, "usage: embed_example MODEL [-m MANIFEST] [-p PLUGIN]... "
                            "[-O KEY=VALUE]... [--passes P] [--disable-pass R]... [-o OUT]...\n");
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "embed_example: no MODEL\n");
        return 2;
    }

    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    kiln_model *m = NULL;
    float **data = NULL;
    uint32_t nin = 0;
    int rc = 1;
    if (!err || !s) {
        fprintf(stderr, "embed_example: out of memory\n");
        goto done;
    }
    /* 1. the session: manifest, extra plugins, overrides (in the CLI's order) */
    if (kiln_session_load_manifest(s, manifest, err) != KILN_OK)
        goto fail;
    for (int i = 0; i < np; i++)
        if (kiln_session_load_plugin(s, plugins[i], err) != KILN_OK)
            goto fail;
    for (int i = 0; i < no; i++) {
        char key[256];
        const char *eq = strchr(opts[i], '=');
        if (!eq || (size_t)(eq - opts[i]) >= sizeof(key)) {
            fprintf(stderr, "embed_example: -O expects KEY=VALUE\n");
            rc = 2;
            goto done;
        }
        memcpy(key, opts[i], (size_t)(eq - opts[i]));
        key[eq - opts[i]] = 0;
        if (kiln_session_set_option(s, key, eq + 1, err) != KILN_OK)
            goto fail;
    }
    if (passes && kiln_session_set_passes(s, passes, err) != KILN_OK)
        goto fail;
    for (int i = 0; i < nd; i++)
        if (kiln_session_select_passes(s, disable[i], false, err) != KILN_OK)
            goto fail;

    /* 2. the model and its inputs */
    if (kiln_model_import(s, model_path, NULL, &m, err) != KILN_OK)
        goto fail;
    nin = kiln_model_input_count(m);
    data = calloc(nin + 1u, sizeof(float *));
    if (!data)
        goto done;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_dtype dt;
        int32_t rank;
        const int64_t *dims;
        kiln_model_input_desc(m, i, &dt, &rank, &dims);
        size_t count = 1;
        for (int32_t k = 0; k < rank; k++)
            count *= dims[k] > 0 ? (size_t)dims[k] : 1; /* a dynamic dim becomes 1 */
        int64_t shape[16];
        if (dt != KILN_DT_FLOAT32 || rank < 0 || rank > 16) {
            fprintf(stderr, "embed_example: input %s: only float32 inputs of known rank\n",
                    kiln_model_input_name(m, i));
            goto done;
        }
        for (int32_t k = 0; k < rank; k++)
            shape[k] = dims[k] > 0 ? dims[k] : 1;
        if (!(data[i] = malloc(count * sizeof(float))))
            goto done;
        for (size_t k = 0; k < count; k++)
            data[i][k] = (float)((int)((k + i) % 5) - 2);
        kiln_tensor t = {KILN_DT_FLOAT32, (uint32_t)rank, shape, data[i], count * sizeof(float)};
        if (kiln_model_set_input_at(m, i, &t, err) != KILN_OK)
            goto fail;
    }

    /* 3. compile, verify, write */
    if (kiln_model_compile(m, NULL, err) != KILN_OK || kiln_model_verify(m, err) != KILN_OK)
        goto fail;
    for (int i = 0; i < nout; i++)
        if (kiln_model_write(m, outs[i], NULL, err) != KILN_OK)
            goto fail;

    /* 4. run and print the outputs */
    if (kiln_model_run(m, err) != KILN_OK)
        goto fail;
    for (uint32_t j = 0; j < kiln_model_output_count(m); j++) {
        const kiln_tensor *t = kiln_model_output(m, j);
        printf("output %u %s: %s [", j, kiln_model_output_name(m, j), kiln_dtype_name(t->dtype));
        size_t count = 1;
        for (uint32_t k = 0; k < t->rank; k++) {
            printf("%s%lld", k ? "," : "", (long long)t->dims[k]);
            count *= (size_t)t->dims[k];
        }
        printf("]");
        for (size_t k = 0; k < count && k < 16 && t->dtype == KILN_DT_FLOAT32; k++)
            printf(" %g", (double)((const float *)t->data)[k]);
        printf("\n");
    }
    rc = 0;
    goto done;
fail:
    rc = fail(err);
done:
    kiln_model_destroy(m);
    for (uint32_t i = 0; data && i < nin; i++)
        free(data[i]);
    free(data);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
    return rc;
}
