/*
 * kiln_op.h - the op registry: what kiln knows about an op type, whatever
 * engine runs it (libFirm's ir_op_ops, ONNX's op schemas).
 *
 * An op-set plugin registers one kiln_op_def per op type (kiln_register_op):
 * its flags, its input/output arity ranges, and optionally a dtype/shape
 * inference function and a folding function.  Engines say which ops they can
 * RUN (kiln_engine_desc.ops); the registry says what an op IS.  Passes ask the
 * registry instead of comparing op-type strings: kiln_op_find(g, sym) is an
 * array index by interned symbol, O(1).
 *
 * Registration rules: the type must be non-empty, min <= max for inputs and
 * outputs, struct_size at least the ABI 1.1 size (through `fold`); one op
 * type is registered by one plugin only (a second registration is refused,
 * naming both plugins).  Op types form one namespace whatever the domain; a
 * vendor prefixes its own types ("AcmeGelu") or uses a domain for display.
 *
 * Thread rules: the registry is written only while plugins load (one
 * thread); afterwards it is read-only and every lookup is lock-free and safe
 * from any thread.  A def returned by a lookup is the host's copy and lives as
 * long as the context.
 *
 * See docs/ops.md.
 */
#ifndef KILN_OP_H
#define KILN_OP_H

#include "kiln_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_registrar kiln_registrar;

/* ---- flags (APPEND ONLY) ---------------------------------------------------- */

/** A source with no inputs that a partitioner puts in the input cluster
 * (Data, Const, Constant, Variable). */
#define KILN_OP_DATA_LIKE 0x001u
/** Output element i depends only on input element i (after broadcast). */
#define KILN_OP_ELEMENTWISE 0x002u
/** The first two inputs may be swapped (Add, Mul, Max, ...). */
#define KILN_OP_COMMUTATIVE 0x004u
/** The outputs depend only on the input shapes, not their values (Shape, Size). */
#define KILN_OP_SHAPE_ONLY 0x008u
/** Owns subgraphs (If, Case, While, PartitionedCall). */
#define KILN_OP_CONTROL_FLOW 0x010u
/** Has state or a side effect: never folded, never merged by CSE. */
#define KILN_OP_STATEFUL 0x020u
/** An output aliases an input (RefIdentity, Assign, Variable's ref outputs). */
#define KILN_OP_REFERENCE 0x040u
/** Never evaluated at compile time (too large, random, or costly to fold). */
#define KILN_OP_NO_FOLD 0x080u
/** Its single output is its `value` tensor attribute (Const, Constant). */
#define KILN_OP_CONSTANT 0x100u
/** The graph's output sink (NetOutput). */
#define KILN_OP_GRAPH_OUTPUT 0x200u

/** max_inputs / max_outputs: no upper bound (variadic). */
#define KILN_OP_VARIADIC 0xFFFFFFFFu

/* ---- what inference and folding see ----------------------------------------- */

/** Highest rank inference tracks; a larger rank is treated as unknown. */
#define KILN_OP_MAX_RANK 8

/** A shape: rank -1 = unknown rank; a dim -1 = unknown dim. */
typedef struct kiln_op_shape {
    int32_t rank;
    int64_t d[KILN_OP_MAX_RANK];
} kiln_op_shape;

/** A known constant tensor, dense row-major. */
typedef struct kiln_op_value {
    kiln_dtype dtype;
    kiln_op_shape s; /* fully known */
    void *data;      /* NULL = value unknown */
    size_t nbytes;
    bool borrowed;   /* data is not owned by this value (host bookkeeping) */
} kiln_op_value;

/** One input or output of the node being inferred. */
typedef struct kiln_op_io {
    bool present;             /* inputs: connected; outputs: always true */
    kiln_dtype dtype;
    kiln_op_shape s;
    const kiln_op_value *val; /* inputs: the known value, or NULL */
} kiln_op_io;

typedef struct kiln_op_def kiln_op_def;

/**
 * The node handed to inference and folding.  Inputs describe the producers'
 * outputs; outputs are pre-set to the node's current descriptors and the
 * inference function overwrites them.  The host fills it; APPEND ONLY.
 */
typedef struct kiln_op_node {
    kiln_graph *g;
    kiln_node_id n;
    const kiln_attrs *attrs;
    const char *op;   /* op type */
    const char *name; /* node name */
    uint32_t nin, nout;
    kiln_op_io *in;
    kiln_op_io *out;
    const kiln_op_def *def; /* the registered def (the host's copy) */
} kiln_op_node;

/**
 * Inference: write the dtype and shape of every nd->out[]; leave a dim -1 (or
 * the rank -1) when it cannot be derived.  Fail (naming the node and the
 * shapes) only for inputs no execution could accept.
 */
typedef kiln_status (*kiln_op_infer_fn)(kiln_op_node *nd, kiln_error *err);
/**
 * Folding: every connected input has a known value (nd->in[i].val); out[o] is
 * allocated by the caller with the inferred dtype and shape (zero-filled).
 * Compute the values into out[o].data and return KILN_OK; any other status
 * means "not folded" (the node is kept, nothing is reported).
 */
typedef kiln_status (*kiln_op_fold_fn)(const kiln_op_node *nd, kiln_op_value *out,
                                       kiln_error *err);

/** One op type.  APPEND ONLY; the host copies min(struct_size, sizeof) bytes. */
struct kiln_op_def {
    uint32_t struct_size;
    const char *type;    /* "Add", "AcmeGelu" */
    const char *domain;  /* "ai.onnx", "com.acme"; NULL = "" (display only) */
    const char *summary; /* one line, optional */
    uint32_t flags;      /* KILN_OP_* */
    uint32_t min_inputs, max_inputs;   /* max KILN_OP_VARIADIC = unbounded */
    uint32_t min_outputs, max_outputs; /* idem */
    kiln_op_infer_fn infer; /* optional: NULL = outputs kept as declared */
    kiln_op_fold_fn fold;   /* optional: used when no engine kernel evaluates the node */
    void *user;             /* optional, for the plugin's own use */
    void *reserved[4];
};

/** Smallest op def the host accepts. */
#define KILN_OP_DEF_MIN_SIZE (offsetof(kiln_op_def, fold) + sizeof(kiln_op_fold_fn))

/* ---- registration and lookup --------------------------------------------------- */

/**
 * Register op type d->type (the host copies the def; the strings it points to
 * must stay valid while the plugin is loaded).  Errors, each naming the
 * plugin file: KILN_ERR_VERSION for a struct_size below KILN_OP_DEF_MIN_SIZE,
 * KILN_ERR_INVALID for a NULL/empty type or a min above its max,
 * KILN_ERR_DUPLICATE when another plugin (named) registered the type.
 */
KILN_API kiln_status kiln_register_op(kiln_registrar *r, const kiln_op_def *d);
/** The def of op type @p type (a symbol of @p g's context), or NULL.  O(1). */
KILN_API const kiln_op_def *kiln_op_find(const kiln_graph *g, kiln_sym type);
/** The def of op type @p type by name, or NULL (one hash lookup). */
KILN_API const kiln_op_def *kiln_op_find_str(const kiln_graph *g, const char *type);
/** The def of node @p n's op type, or NULL (unregistered op or dead node). */
KILN_API const kiln_op_def *kiln_node_op_def(const kiln_graph *g, kiln_node_id n);
/** The KILN_OP_* flags of node @p n's op type; 0 when the op is not registered. */
KILN_API uint32_t kiln_node_op_flags(const kiln_graph *g, kiln_node_id n);
/** Name of the plugin that registered op @p type ("<built-in>" for none), or NULL. */
KILN_API const char *kiln_op_plugin(const kiln_graph *g, kiln_sym type);

#ifdef __cplusplus
}
#endif

#endif /* KILN_OP_H */
