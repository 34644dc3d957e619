/* attr_key.h - hashing and comparing attribute sets and tensor descriptors,
 * for the passes that merge equal nodes (CSE, ConstantFuseSamePass). */
#ifndef KILN_PLUGIN_PASSES_ATTR_KEY_H
#define KILN_PLUGIN_PASSES_ATTR_KEY_H

#include <kiln/kiln.h>

/** FNV-1a over @p n bytes, continuing from @p h. */
uint64_t ak_bytes(uint64_t h, const void *p, size_t n);
/** Hash of every attribute of @p a (keys, types, values; sorted by key). */
uint64_t ak_attrs_hash(uint64_t h, const kiln_attrs *a);
/** Whether @p a and @p b hold the same keys with the same types and values. */
bool ak_attrs_equal(const kiln_attrs *a, const kiln_attrs *b);
/** Hash of a descriptor's dtype, rank and dims. */
uint64_t ak_desc_hash(uint64_t h, const kiln_tensor_desc *d);
/** Same dtype, rank and dims. */
bool ak_desc_equal(const kiln_tensor_desc *a, const kiln_tensor_desc *b);

#endif
