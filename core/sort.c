/*
 * sort.c - kiln__sort_pairs_u64 (sort.h): LSD radix sort by 16-bit digits,
 * skipping the digits every key shares; ping-pongs between the arrays and a
 * scratch copy, then copies back when the last pass ended in the scratch.
 */
#include "sort.h"

#include <stdlib.h>
#include <string.h>

#define DIGIT_BITS 16
#define DIGITS (1u << DIGIT_BITS)

static void insertion(uint64_t *k, uint32_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = k[i];
        uint32_t y = v ? v[i] : 0;
        size_t j = i;
        for (; j > 0 && k[j - 1] > x; j--) {
            k[j] = k[j - 1];
            if (v)
                v[j] = v[j - 1];
        }
        k[j] = x;
        if (v)
            v[j] = y;
    }
}

bool kiln__sort_pairs_u64(uint64_t *keys, uint32_t *vals, size_t n)
{
    if (n < 256) {
        insertion(keys, vals, n);
        return true;
    }
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    for (size_t i = 0; i < n; i++) {
        all_or |= keys[i];
        all_and &= keys[i];
    }
    uint64_t varies = all_or ^ all_and; /* the bits that differ between keys */
    if (!varies)
        return true;
    uint64_t *tk = kiln__malloc(n * sizeof(*tk));
    uint32_t *tv = vals ? kiln__malloc(n * sizeof(*tv)) : NULL;
    size_t *cnt = kiln__malloc(DIGITS * sizeof(*cnt));
    if (!tk || (vals && !tv) || !cnt) {
        kiln__free(tk);
        kiln__free(tv);
        kiln__free(cnt);
        return false;
    }
    uint64_t *sk = keys, *dk = tk;
    uint32_t *sv = vals, *dv = tv;
    for (unsigned shift = 0; shift < 64; shift += DIGIT_BITS) {
        if (!((varies >> shift) & (DIGITS - 1)))
            continue;
        memset(cnt, 0, DIGITS * sizeof(*cnt));
        for (size_t i = 0; i < n; i++)
            cnt[(sk[i] >> shift) & (DIGITS - 1)]++;
        size_t sum = 0;
        for (size_t d = 0; d < DIGITS; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = cnt[(sk[i] >> shift) & (DIGITS - 1)]++;
            dk[at] = sk[i];
            if (sv)
                dv[at] = sv[i];
        }
        uint64_t *t = sk;
        sk = dk;
        dk = t;
        uint32_t *u = sv;
        sv = dv;
        dv = u;
    }
    if (sk != keys) {
        memcpy(keys, sk, n * sizeof(*keys));
        if (vals)
            memcpy(vals, sv, n * sizeof(*vals));
    }
    kiln__free(tk);
    kiln__free(tv);
    kiln__free(cnt);
    return true;
}
