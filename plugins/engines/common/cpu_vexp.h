/*
 * cpu_vexp.h - a vectorisable float exp for the CPU engines' kernels
 * (Softmax, Sigmoid, QuickGelu, Swish, the fused element-wise programs).
 *
 * glibc's expf is a call per element, which no loop vectorises; cpu_expf is
 * straight-line arithmetic a compiler turns into AVX-512 / AVX2 / SSE2 code
 * (functions that loop over it carry CPU_VEC_CLONES, so the loader picks the
 * widest the machine has).  Method (Cephes expf): x = n ln2 + r, |r| <= ln2/2,
 * with n rounded by the 1.5 * 2^23 trick and ln2 split in two (Cody-Waite),
 * exp(r) by a degree-6 polynomial, then 2^n put in the exponent bits.  Inputs
 * are clamped to [-87.3, 88.3], the range whose result is a normal float:
 * below it the result is ~1.2e-38 instead of a denormal or 0, above it
 * ~2e38 instead of inf (a softmax after its max subtraction, a sigmoid of
 * either sign, never see the difference).  Relative error below 2 ulp over
 * the range (tests/core/test_vexp.c checks it against expf).  kiln builds as
 * ISO C: no multiply-add is contracted, so every clone rounds alike.
 */
#ifndef KILN_CPU_VEXP_H
#define KILN_CPU_VEXP_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define CPU_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_VEC_CLONES
#endif

static inline float cpu_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    /* n = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer */
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = (p * r) * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return e * scale;
}

#endif
