/*
 * test_vexp.c - cpu_expf (plugins/engines/common/cpu_vexp.h), the vectorisable
 * exp of the CPU engines' Softmax, Sigmoid, QuickGelu and Swish kernels:
 * within 2 ulp of the double-precision exp over its whole normal range, exact
 * at 0, clamped (finite, positive) outside it, and identical whether the
 * calling loop is vectorised or not (a vectorised clone and a scalar call
 * give the same bits: ISO C contracts no multiply-add).
 */
#include "kiln_test.h"

#include "../../plugins/engines/common/cpu_vexp.h"

#include <math.h>
#include <stdio.h>

static void test_vexp_accuracy(void)
{
    double worst = 0;
    float at = 0;
    int checked = 0;
    for (float x = -87.0f; x < 88.3f; x += 0.0037f) {
        const double t = exp((double)x), g = (double)cpu_expf(x);
        const double ulp = fabs(g - t) / t / 5.9604644775390625e-8;
        if (ulp > worst) {
            worst = ulp;
            at = x;
        }
        checked++;
    }
    if (worst >= 2.0)
        fprintf(stderr, "  cpu_expf: %.2f ulp at %g\n", worst, (double)at);
    CU_ASSERT(checked > 40000);
    CU_ASSERT(worst < 2.0);
    CU_ASSERT_EQUAL(cpu_expf(0.0f), 1.0f);
    /* outside the normal range: clamped, finite and positive */
    CU_ASSERT(cpu_expf(-1000.0f) > 0.0f && cpu_expf(-1000.0f) < 2e-38f);
    CU_ASSERT(isfinite(cpu_expf(1000.0f)) && cpu_expf(1000.0f) > 1e38f);
    CU_ASSERT(cpu_expf(-INFINITY) > 0.0f && isfinite(cpu_expf(INFINITY)));
}

CPU_VEC_CLONES static void exp_loop(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = cpu_expf(x[i]);
}

static void test_vexp_vector_equals_scalar(void)
{
    enum { N = 4099 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = -80.0f + 160.0f * (float)i / (float)N;
    exp_loop(x, y, N);
    int diff = 0;
    for (int i = 0; i < N; i++) {
        volatile float xi = x[i]; /* a scalar call */
        if (cpu_expf(xi) != y[i])
            diff++;
    }
    CU_ASSERT_EQUAL(diff, 0);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_vexp_accuracy", test_vexp_accuracy},
        {"test_vexp_vector_equals_scalar", test_vexp_vector_equals_scalar},
        {NULL, NULL},
    };
    return kiln_test_run("vexp", cases);
}
