/*
 * kiln_graph.h - the graph IR as plugins see it.
 *
 * A root graph owns its subgraphs (While cond/body, If then/else, Case branches,
 * PartitionedCall).  A node has an interned op type and name, typed attributes,
 * input anchors (each fed by at most one producer output), output anchors (each
 * with any number of consumers), control edges, and one tensor descriptor per
 * input and output.
 *
 * Handles and ownership
 *   - kiln_node_id is a dense uint32_t index; 0 means "none".  Ids are stable for
 *     the life of a pass; kiln_graph_compact() renumbers them between passes.
 *   - Pointers returned by accessors (descriptors, attribute sets, strings) are
 *     borrowed and stay valid until the graph is compacted or destroyed.
 *   - Functions named _create return ownership; pair them with _destroy.
 *   - Strings passed in are copied (interned); callers keep theirs.
 *
 * Complexity: node and edge insert/remove are O(1) (remove of a node is
 * O(degree)); lookups by name are O(1) expected.
 *
 * Thread rules (docs/threads.md): one thread mutates a graph at a time;
 * distinct graphs (including subgraphs of one root) may be read concurrently.
 * Analysis queries (topological order, reachability, the symbol table) fill
 * caches, so they count as mutations.  Parallel tasks (the optimize_subgraph
 * stage) each own the graphs of one root graph; a task must not touch
 * another's.  kiln_intern, kiln_sym_lookup and kiln_sym_str are thread-safe
 * (one intern table per context, shared by all its graphs): a symbol is valid
 * in every graph of the context.
 */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include "kiln_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_ctx kiln_ctx;
typedef struct kiln_graph kiln_graph;
typedef struct kiln_tensor_desc kiln_tensor_desc;
typedef struct kiln_attrs kiln_attrs;
typedef uint32_t kiln_node_id; /* 0 = none */
typedef uint32_t kiln_sym;     /* interned string; 0 = none */

/** One anchor of a node: output or input @c index of @c node. */
typedef struct kiln_anchor {
    kiln_node_id node;
    uint32_t index;
} kiln_anchor;

/* Data types.  APPEND ONLY. */
#define KILN_DTYPE_MAP(X)                                                  \
    X(FLOAT32, 0, "float32", 4)                                            \
    X(FLOAT16, 1, "float16", 2)                                            \
    X(BFLOAT16, 2, "bfloat16", 2)                                          \
    X(FLOAT64, 3, "float64", 8)                                            \
    X(INT8, 4, "int8", 1)                                                  \
    X(INT16, 5, "int16", 2)                                                \
    X(INT32, 6, "int32", 4)                                                \
    X(INT64, 7, "int64", 8)                                                \
    X(UINT8, 8, "uint8", 1)                                                \
    X(UINT16, 9, "uint16", 2)                                              \
    X(UINT32, 10, "uint32", 4)                                             \
    X(UINT64, 11, "uint64", 8)                                             \
    X(BOOL, 12, "bool", 1)                                                 \
    X(STRING, 13, "string", 0)

typedef enum kiln_dtype {
#define KILN__DT(name, value, str, size) KILN_DT_##name = value,
    KILN_DTYPE_MAP(KILN__DT)
#undef KILN__DT
    KILN_DT_COUNT
} kiln_dtype;

/** Attribute value types.  APPEND ONLY. */
typedef enum kiln_attr_type {
    KILN_ATTR_NONE = 0,
    KILN_ATTR_BOOL = 1,
    KILN_ATTR_INT = 2,
    KILN_ATTR_FLOAT = 3,
    KILN_ATTR_STRING = 4,
    KILN_ATTR_LIST_INT = 5,
    KILN_ATTR_LIST_FLOAT = 6,
    KILN_ATTR_LIST_STRING = 7,
    KILN_ATTR_LIST_BOOL = 8,
    KILN_ATTR_LIST_LIST_INT = 9,
    KILN_ATTR_DTYPE = 10,
    KILN_ATTR_TENSOR = 11
} kiln_attr_type;

/** A tensor attribute value (borrowed view; data is little-endian, row-major). */
typedef struct kiln_tensor_value {
    kiln_dtype dtype;
    uint32_t rank;
    const int64_t *dims;
    const void *data;
    size_t nbytes;
} kiln_tensor_value;

/* ---- context ---------------------------------------------------------- */

/** Intern @p str in the graph's context; returns its symbol (never 0 unless OOM). */
KILN_API kiln_sym kiln_intern(kiln_graph *g, const char *str);
/** Symbol of @p str if already interned, else 0 (no insertion). */
KILN_API kiln_sym kiln_sym_lookup(const kiln_graph *g, const char *str);
/** The string of a symbol ("" for 0).  Borrowed, valid for the context's life. */
KILN_API const char *kiln_sym_str(const kiln_graph *g, kiln_sym s);

/* ---- graphs ----------------------------------------------------------- */

KILN_API const char *kiln_graph_name(const kiln_graph *g);
/** Live node count (tombstones excluded). */
KILN_API uint32_t kiln_graph_node_count(const kiln_graph *g);
/** One past the largest node id ever handed out; size per-node side tables by this. */
KILN_API uint32_t kiln_graph_id_limit(const kiln_graph *g);
/** Next live node after @p prev (0 starts); 0 at the end.  Id order. */
KILN_API kiln_node_id kiln_graph_next_node(const kiln_graph *g, kiln_node_id prev);
/** Node named @p name, or 0. */
KILN_API kiln_node_id kiln_graph_find_node(const kiln_graph *g, const char *name);
/** Counter bumped by every edit; equal values mean an unchanged graph. */
KILN_API uint64_t kiln_graph_mutation(const kiln_graph *g);
/** Parent graph (NULL for the root). */
KILN_API kiln_graph *kiln_graph_parent(const kiln_graph *g);
/** Node of the parent graph that owns this subgraph (0 for the root). */
KILN_API kiln_node_id kiln_graph_parent_node(const kiln_graph *g);
/** The root graph of @p g (itself for a root). */
KILN_API kiln_graph *kiln_graph_root(kiln_graph *g);
/** Graph attributes; created on first mutable access. */
KILN_API kiln_attrs *kiln_graph_attrs(kiln_graph *g);
/** Nesting depth: root = 1, +1 per subgraph level. */
KILN_API uint32_t kiln_graph_depth(const kiln_graph *g);
/** Number of subgraphs owned by the root, at all nesting levels (root only). */
KILN_API uint32_t kiln_graph_all_subgraph_count(const kiln_graph *root);
/** The i-th of all subgraphs of a root, in creation order. */
KILN_API kiln_graph *kiln_graph_all_subgraph(const kiln_graph *root, uint32_t i);
/** True when @p g (and its subgraphs) ran out of memory in an edit; sticky. */
KILN_API bool kiln_graph_oom(const kiln_graph *g);

/* ---- nodes ------------------------------------------------------------ */

/**
 * Add a node with @p nin unconnected inputs and @p nout outputs (default
 * descriptors: float32, unknown rank, ND).  Returns 0 when @p name is taken or
 * on OOM.  Amortised O(1).
 */
KILN_API kiln_node_id kiln_graph_add_node(kiln_graph *g, const char *name, const char *op,
                                          uint32_t nin, uint32_t nout);
/**
 * Remove a node: drops all its data and control edges and tombstones it, and
 * frees its subgraphs.  KILN_ERR_INVALID (nothing changed) when @p n is not a
 * live node, or when one of its subgraphs, at any depth, is being walked by
 * the node-pass driver (a node pass visiting a node of a While body may not
 * remove the While node).
 */
KILN_API kiln_status kiln_graph_remove_node(kiln_graph *g, kiln_node_id n);
KILN_API bool kiln_node_is_live(const kiln_graph *g, kiln_node_id n);
KILN_API kiln_sym kiln_node_op(const kiln_graph *g, kiln_node_id n);
KILN_API const char *kiln_node_op_str(const kiln_graph *g, kiln_node_id n);
KILN_API kiln_sym kiln_node_name(const kiln_graph *g, kiln_node_id n);
KILN_API const char *kiln_node_name_str(const kiln_graph *g, kiln_node_id n);
/** Rename; fails with ERR_DUPLICATE when the name is taken. */
KILN_API kiln_status kiln_node_set_name(kiln_graph *g, kiln_node_id n, const char *name);
KILN_API kiln_status kiln_node_set_op(kiln_graph *g, kiln_node_id n, const char *op);
KILN_API uint32_t kiln_node_input_count(const kiln_graph *g, kiln_node_id n);
KILN_API uint32_t kiln_node_output_count(const kiln_graph *g, kiln_node_id n);
/** Resize a node's input/output anchor lists; removed anchors lose their edges. */
KILN_API kiln_status kiln_node_set_input_count(kiln_graph *g, kiln_node_id n, uint32_t nin);
KILN_API kiln_status kiln_node_set_output_count(kiln_graph *g, kiln_node_id n, uint32_t nout);
/** Node attributes; NULL when it has none (read accessors accept NULL). */
KILN_API const kiln_attrs *kiln_node_attrs(const kiln_graph *g, kiln_node_id n);
/** Node attributes, created if absent. */
KILN_API kiln_attrs *kiln_node_attrs_mut(kiln_graph *g, kiln_node_id n);
/** Scratch field for passes (not serialised, not preserved across compaction). */
KILN_API uint32_t kiln_node_link(const kiln_graph *g, kiln_node_id n);
KILN_API void kiln_node_set_link(kiln_graph *g, kiln_node_id n, uint32_t v);

/* ---- data edges ------------------------------------------------------- */

/** Producer feeding input @p i of @p n ({0,0} when unconnected). */
KILN_API kiln_anchor kiln_node_input_peer(const kiln_graph *g, kiln_node_id n, uint32_t i);
/** Number of consumers of output @p o of @p n. */
KILN_API uint32_t kiln_node_output_use_count(const kiln_graph *g, kiln_node_id n, uint32_t o);
/**
 * Consumers of output @p o: pass 0 as @p cursor to get the first, then the
 * previous return value's cursor.  Iterates in edge-creation order.
 *   for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c))
 *       kiln_anchor dst = kiln_use_dst(g, c);
 * Removing the current edge while iterating is allowed if the next cursor was
 * read first.
 */
KILN_API uint32_t kiln_use_first(const kiln_graph *g, kiln_node_id n, uint32_t o);
KILN_API uint32_t kiln_use_next(const kiln_graph *g, uint32_t cursor);
KILN_API kiln_anchor kiln_use_dst(const kiln_graph *g, uint32_t cursor);
/** Connect output (src, so) to input (dst, di).  ERR_INVALID if di is already fed. */
KILN_API kiln_status kiln_edge_add(kiln_graph *g, kiln_node_id src, uint32_t so, kiln_node_id dst,
                                   uint32_t di);
/** Disconnect input @p di of @p dst (no-op if unconnected). */
KILN_API kiln_status kiln_edge_remove(kiln_graph *g, kiln_node_id dst, uint32_t di);

/* ---- control edges ---------------------------------------------------- */

/** Add control edge src => dst; adding an existing one is a no-op. */
KILN_API kiln_status kiln_ctrl_add(kiln_graph *g, kiln_node_id src, kiln_node_id dst);
KILN_API kiln_status kiln_ctrl_remove(kiln_graph *g, kiln_node_id src, kiln_node_id dst);
KILN_API bool kiln_ctrl_exists(const kiln_graph *g, kiln_node_id src, kiln_node_id dst);
/** Control edge iteration, same cursor protocol as the use lists. */
KILN_API uint32_t kiln_ctrl_in_first(const kiln_graph *g, kiln_node_id n);
KILN_API uint32_t kiln_ctrl_in_next(const kiln_graph *g, uint32_t cursor);
KILN_API uint32_t kiln_ctrl_out_first(const kiln_graph *g, kiln_node_id n);
KILN_API uint32_t kiln_ctrl_out_next(const kiln_graph *g, uint32_t cursor);
KILN_API kiln_node_id kiln_ctrl_src(const kiln_graph *g, uint32_t cursor);
KILN_API kiln_node_id kiln_ctrl_dst(const kiln_graph *g, uint32_t cursor);
KILN_API uint32_t kiln_node_ctrl_in_count(const kiln_graph *g, kiln_node_id n);
KILN_API uint32_t kiln_node_ctrl_out_count(const kiln_graph *g, kiln_node_id n);

/* ---- tensor descriptors ----------------------------------------------- */
/* Every setter takes the owning graph and bumps its mutation counter, so
 * cached analyses (the memory symbol table reads ref_input) see the edit. */

/**
 * Descriptor of input @p i.  An input without a descriptor of its own reads its
 * producer's output descriptor (GRAPH_FORMAT.md); NULL when it has neither.
 */
KILN_API const kiln_tensor_desc *kiln_node_input_desc(const kiln_graph *g, kiln_node_id n,
                                                      uint32_t i);
/** Input @p i's own descriptor, created as a copy of what it reads now. */
KILN_API kiln_tensor_desc *kiln_node_input_desc_mut(kiln_graph *g, kiln_node_id n, uint32_t i);
/** True when input @p i has a descriptor of its own. */
KILN_API bool kiln_node_input_has_desc(const kiln_graph *g, kiln_node_id n, uint32_t i);
KILN_API kiln_tensor_desc *kiln_node_output_desc(kiln_graph *g, kiln_node_id n, uint32_t o);
/** Copy dtype, shape, format, ref_input, size/offset/memory type and attributes. */
KILN_API kiln_status kiln_desc_copy(kiln_graph *g, kiln_tensor_desc *dst,
                                    const kiln_tensor_desc *src);

KILN_API kiln_dtype kiln_desc_dtype(const kiln_tensor_desc *d);
/** Set the dtype; ERR_INVALID for a value outside kiln_dtype. */
KILN_API kiln_status kiln_desc_set_dtype(kiln_graph *g, kiln_tensor_desc *d, kiln_dtype dt);
/** Rank, or -1 for unknown rank. */
KILN_API int32_t kiln_desc_rank(const kiln_tensor_desc *d);
/** Dims (-1 = unknown dim); NULL for rank <= 0. */
KILN_API const int64_t *kiln_desc_dims(const kiln_tensor_desc *d);
/** Set the shape; @p rank -1 = unknown rank. */
KILN_API kiln_status kiln_desc_set_shape(kiln_graph *g, kiln_tensor_desc *d, int32_t rank,
                                         const int64_t *dims);
KILN_API const char *kiln_desc_format(const kiln_graph *g, const kiln_tensor_desc *d);
KILN_API void kiln_desc_set_format(kiln_graph *g, kiln_tensor_desc *d, const char *format);
/** Input this output references (GE reference ops), or -1. */
KILN_API int32_t kiln_desc_ref_input(const kiln_tensor_desc *d);
/** Make this output a reference to input @p k (-1: none); ERR_INVALID if k > 32767. */
KILN_API kiln_status kiln_desc_set_ref_input(kiln_graph *g, kiln_tensor_desc *d, int32_t k);
/** Size in bytes, or -1 when not set.  Offset likewise.  Written by memory planning. */
KILN_API int64_t kiln_desc_size(const kiln_tensor_desc *d);
KILN_API void kiln_desc_set_size(kiln_graph *g, kiln_tensor_desc *d, int64_t size);
KILN_API int64_t kiln_desc_offset(const kiln_tensor_desc *d);
KILN_API void kiln_desc_set_offset(kiln_graph *g, kiln_tensor_desc *d, int64_t offset);
/** Memory type name ("HBM", "P2P", "HOST") or NULL. */
KILN_API const char *kiln_desc_memory_type(const kiln_graph *g, const kiln_tensor_desc *d);
KILN_API void kiln_desc_set_memory_type(kiln_graph *g, kiln_tensor_desc *d, const char *mt);
/** Descriptor attributes; NULL when none. */
KILN_API const kiln_attrs *kiln_desc_attrs(const kiln_tensor_desc *d);
KILN_API kiln_attrs *kiln_desc_attrs_mut(kiln_graph *g, kiln_tensor_desc *d);
/** Element count (product of dims); -1 when any dim or the rank is unknown, or
 * when the product does not fit in int64 (kiln_dims_numel tells the two apart). */
KILN_API int64_t kiln_desc_numel(const kiln_tensor_desc *d);

/** *out = a * b; false (and *out unspecified) when the product overflows int64.
 * The one checked multiplication for element counts and byte sizes. */
static inline bool kiln_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/** *out = product of @p rank dims.  KILN_ERR_INVALID when a dim is negative
 * (unknown), KILN_ERR_LIMIT when the product of the nonzero dims overflows
 * int64 (then a partial product, such as a kernel's outer extent, could
 * overflow too, so such a shape is refused even when another dim is 0). */
static inline kiln_status kiln_dims_numel(const int64_t *dims, uint32_t rank, int64_t *out)
{
    int64_t n = 1;
    bool zero = false;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return KILN_ERR_INVALID;
        if (dims[i] == 0)
            zero = true;
        else if (!kiln_mul_i64(n, dims[i], &n))
            return KILN_ERR_LIMIT;
    }
    *out = zero ? 0 : n;
    return KILN_OK;
}

/** Bytes per element of @p dt (0 for string). */
KILN_API size_t kiln_dtype_size(kiln_dtype dt);
KILN_API const char *kiln_dtype_name(kiln_dtype dt);
/** Parse "float32" etc.; false if unknown. */
KILN_API bool kiln_dtype_parse(const char *name, kiln_dtype *out);

/* ---- attributes ------------------------------------------------------- */
/*
 * Attribute sets are sorted by key.  Getters return false when the key is
 * absent or holds another type; @p a may be NULL.  List getters return a
 * borrowed array and its length.  Setters replace any previous value; a
 * list holds at most 2^27 - 1 entries (KILN_ERR_LIMIT beyond).
 */
KILN_API uint32_t kiln_attrs_count(const kiln_attrs *a);
/** Key and type of the i-th attribute in key order. */
KILN_API const char *kiln_attrs_key_at(const kiln_attrs *a, uint32_t i, kiln_attr_type *type);
KILN_API kiln_attr_type kiln_attrs_type(const kiln_attrs *a, const char *key);
KILN_API bool kiln_attrs_has(const kiln_attrs *a, const char *key);
KILN_API bool kiln_attrs_remove(kiln_attrs *a, const char *key);
KILN_API void kiln_attrs_clear(kiln_attrs *a);
/** Copy every attribute of @p src into @p dst (overwriting equal keys). */
KILN_API kiln_status kiln_attrs_copy(kiln_attrs *dst, const kiln_attrs *src);

KILN_API bool kiln_attrs_get_bool(const kiln_attrs *a, const char *key, bool *out);
KILN_API bool kiln_attrs_get_int(const kiln_attrs *a, const char *key, int64_t *out);
KILN_API bool kiln_attrs_get_float(const kiln_attrs *a, const char *key, double *out);
KILN_API bool kiln_attrs_get_string(const kiln_attrs *a, const char *key, const char **out);
KILN_API bool kiln_attrs_get_dtype(const kiln_attrs *a, const char *key, kiln_dtype *out);
KILN_API bool kiln_attrs_get_list_int(const kiln_attrs *a, const char *key, const int64_t **v,
                                      uint32_t *n);
KILN_API bool kiln_attrs_get_list_float(const kiln_attrs *a, const char *key, const double **v,
                                        uint32_t *n);
KILN_API bool kiln_attrs_get_list_bool(const kiln_attrs *a, const char *key, const uint8_t **v,
                                       uint32_t *n);
/** Strings of a list_string attribute. */
KILN_API bool kiln_attrs_get_list_string(const kiln_attrs *a, const char *key,
                                         const char *const **v, uint32_t *n);
/** Number of inner lists of a list_list_int attribute; inner lists via _at. */
KILN_API bool kiln_attrs_get_list_list_int(const kiln_attrs *a, const char *key, uint32_t *n);
KILN_API bool kiln_attrs_get_list_list_int_at(const kiln_attrs *a, const char *key, uint32_t i,
                                              const int64_t **v, uint32_t *len);
KILN_API bool kiln_attrs_get_tensor(const kiln_attrs *a, const char *key, kiln_tensor_value *out);

KILN_API kiln_status kiln_attrs_set_bool(kiln_attrs *a, const char *key, bool v);
KILN_API kiln_status kiln_attrs_set_int(kiln_attrs *a, const char *key, int64_t v);
KILN_API kiln_status kiln_attrs_set_float(kiln_attrs *a, const char *key, double v);
KILN_API kiln_status kiln_attrs_set_string(kiln_attrs *a, const char *key, const char *v);
KILN_API kiln_status kiln_attrs_set_dtype(kiln_attrs *a, const char *key, kiln_dtype v);
KILN_API kiln_status kiln_attrs_set_list_int(kiln_attrs *a, const char *key, const int64_t *v,
                                             uint32_t n);
KILN_API kiln_status kiln_attrs_set_list_float(kiln_attrs *a, const char *key, const double *v,
                                               uint32_t n);
KILN_API kiln_status kiln_attrs_set_list_bool(kiln_attrs *a, const char *key, const uint8_t *v,
                                              uint32_t n);
KILN_API kiln_status kiln_attrs_set_list_string(kiln_attrs *a, const char *key,
                                                const char *const *v, uint32_t n);
/** @p lists[i] has @p lens[i] elements. */
KILN_API kiln_status kiln_attrs_set_list_list_int(kiln_attrs *a, const char *key,
                                                  const int64_t *const *lists,
                                                  const uint32_t *lens, uint32_t n);
/** Copies the dims and data. */
KILN_API kiln_status kiln_attrs_set_tensor(kiln_attrs *a, const char *key,
                                           const kiln_tensor_value *v);

/*
 * Tensor blocks: reference-counted byte buffers that tensor attributes share
 * instead of copying, for a producer that has the bytes in memory it can
 * allocate itself (a frontend decoding a model's weights into them).
 * kiln_tensor_block_new returns @p n writable bytes (16-byte aligned; NULL
 * when out of memory) with one reference, the caller's;
 * kiln_attrs_set_tensor_block stores a tensor whose data lies inside @p block
 * (v->data .. v->data + v->nbytes, anywhere in it) by taking a reference
 * instead of copying: the bytes must not change afterwards.  Each graph
 * holding the attribute, and each copy of it, holds a reference;
 * kiln_tensor_block_release drops the caller's, and the last release frees the
 * block.  @p block NULL behaves as kiln_attrs_set_tensor; data outside the
 * block is KILN_ERR_INVALID.
 */
KILN_API void *kiln_tensor_block_new(size_t n);
KILN_API void kiln_tensor_block_release(void *block);
KILN_API kiln_status kiln_attrs_set_tensor_block(kiln_attrs *a, const char *key,
                                                 const kiln_tensor_value *v, void *block);

/* ---- subgraphs -------------------------------------------------------- */

/**
 * Create a subgraph of node @p n under role @p role ("body", "then_branch", ...).
 * The root graph owns it; @p name must be unique among the root's subgraphs.
 */
KILN_API kiln_graph *kiln_node_add_subgraph(kiln_graph *g, kiln_node_id n, const char *role,
                                            const char *name);
KILN_API uint32_t kiln_node_subgraph_count(const kiln_graph *g, kiln_node_id n);
/** The i-th subgraph of @p n in creation order; *role (optional) receives its role. */
KILN_API kiln_graph *kiln_node_subgraph(const kiln_graph *g, kiln_node_id n, uint32_t i,
                                        const char **role);

/* ---- GE graph edits --------------------------------------------------- */

/**
 * GE InsertNodeBefore: insert a new 1-in/1-out node @p name of type @p op on
 * input @p di of @p dst.  producer -> new -> dst; the new node's descriptors copy
 * the producer's output descriptor; all in-control edges of dst (except those
 * from AtomicAddrClean/MemSet nodes) move to the new node; whitelisted string
 * attributes (_user_stream_label, ...) are inherited from dst.  Returns the new
 * node or 0 (input unconnected, name taken, OOM).
 */
KILN_API kiln_node_id kiln_graph_insert_before(kiln_graph *g, kiln_node_id dst, uint32_t di,
                                               const char *name, const char *op);
/**
 * GE InsertNodeAfter: new node fed by output (src, so); each listed consumer
 * input in @p dsts (all current consumers when @p ndst is 0) is re-fed from the
 * new node; all out-control edges of src move to the new node unless src is
 * Switch/RefSwitch/SwitchN; whitelisted attributes are inherited from src.
 */
KILN_API kiln_node_id kiln_graph_insert_after(kiln_graph *g, kiln_node_id src, uint32_t so,
                                              const kiln_anchor *dsts, uint32_t ndst,
                                              const char *name, const char *op);
/**
 * GE IsolateNode(node, io_map): every consumer of output i is reconnected to the
 * producer of input io_map[i] (-1: dropped); control predecessors are linked to
 * control successors and to data successors; all edges of @p n are then removed.
 * ERR_PARAM when @p nmap exceeds the output count or an index is out of range.
 */
KILN_API kiln_status kiln_graph_isolate_node(kiln_graph *g, kiln_node_id n, const int32_t *io_map,
                                             uint32_t nmap);
/**
 * Replace @p old by @p repl: input i of old -> input i of repl, consumers of
 * output i -> output i of repl, control edges moved; old is removed.
 */
KILN_API kiln_status kiln_graph_replace_node(kiln_graph *g, kiln_node_id old, kiln_node_id repl);

/* ---- engine partitions (docs/partition.md) ------------------------------ */
/*
 * The partition stage's EnginePartitioner records, on every graph it
 * partitions (the root and each subgraph), the partitions in rank order: rank
 * 0 is the input-nodes partition (engine "inputNodesSubGraph") when the graph
 * has data-like nodes.  The record is graph and node attributes, so graph
 * JSON, dumps and a paused build carry it.  Partition names follow GE:
 * "partition<T>_rank<r>_new_sub_graph<k>".
 */

/** Number of partitions recorded on @p g (0: not partitioned). */
KILN_API uint32_t kiln_graph_partition_count(const kiln_graph *g);
/**
 * Name of partition @p rank ("partition<T>_rank<r>_new_sub_graph<k>", or
 * "partition<T>_rank0_inputNodesSubGraph"), or NULL when out of range.  Formed
 * from the record and interned in the graph's context on first use.
 */
KILN_API const char *kiln_graph_partition_name(const kiln_graph *g, uint32_t rank);
/** Engine of partition @p rank, or NULL when out of range. */
KILN_API const char *kiln_graph_partition_engine(const kiln_graph *g, uint32_t rank);
/** Stream label of partition @p rank (its first node's; "" when none), NULL when out of range. */
KILN_API const char *kiln_graph_partition_stream_label(const kiln_graph *g, uint32_t rank);
/** Rank of the partition node @p n belongs to, or -1 (not partitioned). */
KILN_API int32_t kiln_node_partition(const kiln_graph *g, kiln_node_id n);

#define KILN_PART_SEQ "_kiln_partition_seq"             /* int: T */
#define KILN_PART_SUBGRAPHS "_kiln_partition_sub_graphs" /* list_int: k by rank, -1 = input nodes */
#define KILN_PART_ENGINES "_kiln_partition_engines"     /* list_string by rank */
#define KILN_PART_LABELS "_kiln_partition_stream_labels"
#define KILN_PART_NODE "_kiln_partition"
/* Composite-then-atomic partitioning (EnginePartitioner option composite), by
 * rank: the rank's composite partition (0, 1, ... in rank order; -1 for the
 * input nodes) and its composite engine ("" for the input nodes). */
#define KILN_PART_COMPOSITE_GROUPS "_kiln_partition_composite_groups"   /* list_int */
#define KILN_PART_COMPOSITE_ENGINES "_kiln_partition_composite_engines" /* list_string */

#ifdef __cplusplus
}
#endif

#endif /* KILN_GRAPH_H */
