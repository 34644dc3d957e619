/*
 * create.c - kiln's "session create" through the library API, the figure ONNX
 * Runtime's warm InferenceSession.create is compared with (bench/models.sh,
 * the fixed-cost table; bench/README.md "models").
 *
 *   bench_create MANIFEST MODEL [RUNS]
 *
 * One session loads MANIFEST and every deferred plugin once.  Then, per run,
 * the model is imported from its file, compiled by the full pipeline (in
 * memory: nothing is written) and prepared for its runtime (kernels bound,
 * weights packed), and destroyed.  The first run is the cold one (first use
 * of the engines' libraries); prints one line:
 *   cold_ms warm_compile_ms warm_create_ms
 * where warm_compile_ms is the median of import + compile and warm_create_ms
 * the median of import + compile + prepare over the RUNS warm runs ("-" for a
 * model with dynamic input shapes, which cannot be prepared before its inputs
 * are known; ORT's create prepares without them).
 */
#include "bench_util.h"

#include <kiln/kiln_embed.h>

#include <stdio.h>
#include <stdlib.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool prepared = true; /* false once a prepare failed: dynamic shapes */

/* Import, compile and (while it works) prepare @p path once; the two times
 * in *tc, *tp (ms). */
static bool once(kiln_session *s, const char *path, double *tc, double *tp, kiln_error *err)
{
    kiln_model *m = NULL;
    double t0 = now();
    bool ok = kiln_model_import(s, path, NULL, &m, err) == KILN_OK &&
              kiln_model_compile(m, NULL, err) == KILN_OK;
    double t1 = now();
    if (ok && prepared && kiln_model_prepare(m, err) != KILN_OK)
        prepared = false;
    double t2 = now();
    kiln_model_destroy(m);
    *tc = (t1 - t0) * 1e3;
    *tp = (t2 - t0) * 1e3;
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_create MANIFEST MODEL [RUNS]\n");
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 10;
    if (runs < 1)
        runs = 1;
    kiln_session *s = kiln_session_create();
    kiln_error *err = kiln_error_create();
    if (!s || !err)
        return 1;
    kiln_session_set_verbosity(s, -2);
    if (kiln_session_load_manifest(s, argv[1], err) != KILN_OK ||
        kiln_session_load_deferred(s, err) != KILN_OK) {
        fprintf(stderr, "bench_create: %s\n", kiln_error_message(err));
        return 1;
    }
    double *tc = calloc((size_t)runs, sizeof(double)), *tp = calloc((size_t)runs, sizeof(double));
    double cold_c, cold_p;
    if (!tc || !tp || !once(s, argv[2], &cold_c, &cold_p, err)) {
        fprintf(stderr, "bench_create: %s: %s\n", argv[2], kiln_error_message(err));
        return 1;
    }
    for (int r = 0; r < runs; r++)
        if (!once(s, argv[2], &tc[r], &tp[r], err)) {
            fprintf(stderr, "bench_create: %s: %s\n", argv[2], kiln_error_message(err));
            return 1;
        }
    if (prepared)
        printf("%.2f %.2f %.2f\n", cold_p, median(tc, runs), median(tp, runs));
    else
        printf("%.2f %.2f -\n", cold_c, median(tc, runs));
    free(tc);
    free(tp);
    kiln_error_destroy(err);
    kiln_session_destroy(s);
    return 0;
}
