/*
 * sort.h - a stable LSD radix sort of (64-bit key, 32-bit value) pairs for
 * the analyses' large sorts (schedule events, memory plan checks): O(n) per
 * 16-bit digit that is not the same in every key, no comparator calls.  Being
 * stable, it orders equal keys as a stable merge sort (glibc's qsort) does:
 * by their position in the input.  Only core/ includes this header.
 */
#ifndef KILN_CORE_SORT_H
#define KILN_CORE_SORT_H

#include "base.h"

/**
 * Sort @p keys ascending, moving @p vals (may be NULL) along, stably.
 * Returns false on out of memory (arrays untouched).  Below a few hundred
 * elements an insertion sort does it.
 */
bool kiln__sort_pairs_u64(uint64_t *keys, uint32_t *vals, size_t n);

#endif
