/*
 * onnx_internal.h - shared declarations of the ONNX frontend plugin
 * (libkiln_onnx.so): the protobuf-c types generated at build time from
 * Debian's /usr/include/onnx/onnx.proto, a small string map, an arena for
 * export-time protobuf structures, and the functions each source file offers.
 *
 *   plugin.c       registration, file reading/writing, unknown-field check
 *   onnx_util.c    string map, arena, UTF-8 check, unique naming
 *   onnx_attr.c    dtypes, tensors, attributes, value types <-> descriptors
 *   onnx_import.c  ModelProto -> kiln graph (scopes, If/Loop, captures)
 *   onnx_export.c  kiln graph -> ModelProto
 *
 * The mapping itself is documented in docs/onnx.md.  In short:
 *   - graph inputs -> Data (`index`), initializers / Constant -> Const (`value`),
 *     graph outputs -> one NetOutput, other nodes keep their ONNX op type;
 *   - If -> If (then_branch / else_branch), Loop -> While (`body`, attrs
 *     _onnx_op = "Loop", _onnx_loop_carried = N, extra output 0 = final cond);
 *   - values a subgraph reads from enclosing graphs become extra inputs of
 *     the parent node and Data nodes with _parent_node_index in the subgraph;
 *   - ONNX value names ride on output descriptors (_onnx_name), symbolic dims
 *     as -1 plus _onnx_dim_params, node domains as _onnx_domain, model-level
 *     fields as onnx_* root graph attributes.
 * Node ids follow the file order, and the exporter writes nodes back in id
 * order, so model.onnx -> json -> onnx -> json reproduces the JSON exactly.
 */
#ifndef KILN_ONNX_INTERNAL_H
#define KILN_ONNX_INTERNAL_H

#include <kiln/kiln.h>
#include "onnx.pb-c.h"

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* Attribute names the frontend reads and writes (docs/onnx.md). */
#define OX_ATTR_DOMAIN "_onnx_domain"          /* node: non-default op domain */
#define OX_ATTR_CONSTANT "_onnx_constant"      /* Const: came from a Constant node */
#define OX_ATTR_OP "_onnx_op"                  /* While: "Loop" */
#define OX_ATTR_LOOP_CARRIED "_onnx_loop_carried" /* While: N loop-carried values */
#define OX_ATTR_NAME "_onnx_name"              /* output desc: ONNX value name */
#define OX_ATTR_DIM_PARAMS "_onnx_dim_params"  /* desc: symbolic dim names */
#define OX_ATTR_PARENT "_parent_node_index"

/* Graph attributes of the root graph. */
#define OX_G_OPSETS "onnx_opset_import"
#define OX_G_IR "onnx_ir_version"
#define OX_G_PRODUCER "onnx_producer_name"
#define OX_G_PRODUCER_VERSION "onnx_producer_version"
#define OX_G_DOMAIN "onnx_domain"
#define OX_G_MODEL_VERSION "onnx_model_version"
#define OX_G_GRAPH_NAME "onnx_graph_name"
#define OX_G_METADATA "onnx_metadata_props"

#define OX_STR(s) ((s) ? (s) : "")

/* ---- string map (open addressing, borrowed keys) ------------------------ */

typedef struct ox_map {
    const char **keys;
    uint64_t *vals;
    size_t cap; /* power of two or 0 */
    size_t count;
} ox_map;

void ox_map_free(ox_map *m);
/** Insert or replace; false on OOM.  The key must outlive the map. */
bool ox_map_put(ox_map *m, const char *key, uint64_t val);
bool ox_map_get(const ox_map *m, const char *key, uint64_t *val);

static inline uint64_t ox_pack_anchor(kiln_node_id n, uint32_t idx)
{
    return ((uint64_t)n << 32) | idx;
}

static inline kiln_anchor ox_unpack_anchor(uint64_t v)
{
    kiln_anchor a = {(kiln_node_id)(v >> 32), (uint32_t)v};
    return a;
}

/* ---- arena -------------------------------------------------------------- */

typedef struct ox_arena_block ox_arena_block;
typedef struct ox_arena {
    ox_arena_block *head;
} ox_arena;

/** Zeroed, 16-byte aligned memory; NULL on OOM.  Freed with the arena. */
void *ox_arena_alloc(ox_arena *a, size_t size);
char *ox_arena_strdup(ox_arena *a, const char *s);
char *ox_arena_printf(ox_arena *a, const char *fmt, ...) KILN_PRINTF(2, 3);
void ox_arena_free(ox_arena *a);

/* ---- naming ------------------------------------------------------------- */

/**
 * Write into @p buf (size @p size) a node name not yet used in @p g: @p base
 * itself, else base_k for the first free k >= *next (1 when *next is 0), and
 * then set *next to k + 1.  Returns false when it does not fit.
 */
bool ox_unique_node_name(const kiln_graph *g, const char *base, uint32_t *next, char *buf,
                         size_t size);

/** True when the @p n bytes at @p s are well-formed UTF-8 (what the JSON writer accepts). */
bool ox_utf8_valid(const char *s, size_t n);

/* ---- dtypes, tensors, attributes, value types (onnx_attr.c) ------------- */

/** ONNX TensorProto.DataType -> kiln dtype; false when kiln has no equivalent. */
bool ox_dtype_from_onnx(int32_t onnx, kiln_dtype *out);
int32_t ox_dtype_to_onnx(kiln_dtype dt);
const char *ox_onnx_dtype_name(int32_t onnx);

/**
 * Decode a TensorProto into @p out.  The data may point into the message
 * (raw_data) or into *owned (typed fields), which the caller frees with free().
 * @p what names the tensor in errors.
 */
kiln_status ox_tensor_decode(const Onnx__TensorProto *t, const char *what,
                             kiln_tensor_value *out, void **owned, kiln_error *err);
/** Fill @p t (already initialised) from a kiln tensor; data is borrowed. */
kiln_status ox_tensor_encode(ox_arena *a, const kiln_tensor_value *v, Onnx__TensorProto *t,
                             kiln_error *err);

/** Copy the non-graph attribute @p ap onto @p attrs; @p node names it in errors. */
kiln_status ox_attr_import(kiln_attrs *attrs, const Onnx__AttributeProto *ap, const char *node,
                           kiln_error *err);
/** The attribute type, inferred from the set fields when the file left it out. */
Onnx__AttributeProto__AttributeType ox_attr_type(const Onnx__AttributeProto *ap);
/**
 * Export every attribute of @p attrs whose key does not start with '_' (and is
 * not @p skip) to *out / *n (arena memory).
 */
kiln_status ox_attrs_export(ox_arena *a, const kiln_attrs *attrs, const char *skip,
                            const char *node, Onnx__AttributeProto ***out, size_t *n,
                            kiln_error *err);

/** Set dtype, shape and symbolic dim names of @p d from @p tp (NULL: no-op). */
kiln_status ox_type_apply(kiln_graph *g, kiln_tensor_desc *d, const Onnx__TypeProto *tp,
                          const char *value, kiln_error *err);
/** A TypeProto describing @p d (arena memory). */
Onnx__TypeProto *ox_type_make(ox_arena *a, const kiln_tensor_desc *d);
/** True when @p d says more than "float32, unknown rank" (worth a value_info). */
bool ox_desc_informative(const kiln_tensor_desc *d);

/* ---- import / export ----------------------------------------------------- */

/*
 * The protobuf-c allocator of imports.  An allocation of OX_BLOCK_MIN bytes or
 * more (a weight's raw_data) is a kiln tensor block (kiln_tensor_block_new)
 * behind a 16-byte header, so the importer stores weights as tensor
 * attributes that share the decoded bytes instead of copying them again
 * (ox_pb_block); freeing the message drops its reference only.
 */
#define OX_BLOCK_MIN 16384
extern ProtobufCAllocator ox_pb_allocator;
/** The tensor block of @p data, the start of an ox_pb_allocator allocation;
 * NULL when that allocation is not a block (smaller than OX_BLOCK_MIN). */
void *ox_pb_block(const void *data);

/** Build the empty root graph @p g from @p m (already checked for unknown
 * fields); @p blocks: @p m was unpacked with ox_pb_allocator. */
kiln_status ox_import_model(kiln_graph *g, const Onnx__ModelProto *m, bool blocks,
                            kiln_error *err);
/** Build a ModelProto for @p g in @p a; *out points into the arena. */
kiln_status ox_export_model(kiln_graph *g, ox_arena *a, Onnx__ModelProto **out,
                            kiln_error *err);

#endif /* KILN_ONNX_INTERNAL_H */
