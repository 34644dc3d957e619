/*
 * infer.h - internal interface of libkiln_onnx_ops.so: the ONNX op set
 * (opset.c, the op functions of infer_ops_*.c) and the InferShapes pass.
 *
 * The pass (infer_pass.c) walks a graph in topological order and, for every
 * node, fills an infer_node (kiln_op_node) with what is known about its inputs (dtype, shape
 * with -1 for unknown dims / rank -1 for unknown rank, and the constant value
 * when one is known) and calls the inference function the op registry holds
 * for the node's op type (kiln_node_op_def: the ONNX defs of opset.c, or any
 * other plugin's), which fills the outputs' dtype and shape.  The pass then
 * writes them into the output descriptors and asks infer_fold.c whether the
 * node's value can be computed (all inputs known, small outputs): with the
 * kernel of whichever engine runs the op (kiln_engine_kernel), else with the
 * op's fold function (for the ONNX ops the small built-in evaluator of
 * infer_ops_eval.c, integer/bool shape arithmetic).  Known values feed later
 * nodes (Reshape targets, Slice bounds, ConstantOfShape, Resize sizes, If
 * conditions); an If whose condition is known is inlined (infer_fold.c).
 *
 * Values are owned by the per-graph state (gstate in infer_pass.c) of one
 * pass run; a Const's value borrows its `value` attribute.
 *
 * Op coverage (the 46 op types of the real models, plus a few neighbours):
 *   infer_ops_elem.c   Add Sub Mul Div Pow Max Min (numpy broadcast)
 *                      Equal GreaterOrEqual Greater Less LessOrEqual (-> bool)
 *                      Relu Sigmoid Sqrt Log Neg LeakyRelu HardSigmoid Clip
 *                      Softmax Identity Exp Tanh Abs Not Cast
 *                      ReduceMax ReduceMean ReduceMin ReduceSum
 *   infer_ops_nn.c     Conv ConvTranspose MaxPool AveragePool
 *                      GlobalAveragePool GlobalMaxPool Gemm MatMul
 *                      BatchNormalization LSTM Resize
 *   infer_ops_shape.c  Const Constant ConstantOfShape Shape Size Reshape
 *                      Flatten Gather Concat Slice Squeeze Unsqueeze
 *                      Transpose Pad
 *   infer_pass.c       Data NetOutput If (and the subgraphs of other ops)
 *
 * Conventions of an op function: it reads nd->in[] (present == false for an
 * unconnected optional input) and attributes, writes dtype and shape of every
 * nd->out[], leaves a dim -1 (or the rank -1) when it cannot be derived, and
 * fails only for inputs no execution could accept (incompatible broadcast,
 * Reshape element count, channel mismatch, axis out of range), with
 * infer_fail() naming the node and the shapes involved.  Attribute forms of
 * old opsets (Slice starts/ends, Squeeze axes, Pad pads, Reshape shape) and
 * input forms of new ones are both accepted.
 */
#ifndef KILN_ONNX_INFER_H
#define KILN_ONNX_INFER_H

#include <kiln/kiln.h>

#define INFER_MAX_RANK KILN_OP_MAX_RANK
#define INFER_FOLD_MAX_ELEMS 4096

/* The public types of kiln_op.h under the names the op functions use. */
typedef kiln_op_shape infer_shape; /* rank -1 = unknown rank; dims -1 = unknown dim */
typedef kiln_op_value infer_val;   /* a known constant tensor (data malloc'd unless borrowed) */
typedef kiln_op_io infer_io;       /* one input or output as the op functions see it */
typedef kiln_op_node infer_node;
typedef kiln_op_infer_fn infer_fn;

typedef struct infer_op {
    const char *op_type;
    infer_fn fn;
} infer_op;

/* ---- op tables (infer_ops_*.c) -------------------------------------------- */
extern const infer_op infer_ops_elem[];
extern const uint32_t infer_ops_elem_count;
extern const infer_op infer_ops_nn[];
extern const uint32_t infer_ops_nn_count;
extern const infer_op infer_ops_shape[];
extern const uint32_t infer_ops_shape_count;

/** The inference function of @p op_type, or NULL. */
infer_fn infer_find_op(const char *op_type);
/** The inference of GE op @p op_type (Assign, AssignAdd, AssignSub), NULL for the others. */
infer_fn infer_find_ge_op(const char *op_type);

/* ---- helpers (infer_ops_elem.c) ------------------------------------------- */
/** Record "node <name> (<op>): <msg>" and return @p code. */
kiln_status infer_fail(const infer_node *nd, kiln_error *err, kiln_status code, const char *fmt,
                       ...) KILN_PRINTF(4, 5);
/** "[1,3,-1]" / "[?]" for unknown rank, into @p buf. */
const char *infer_shape_str(const infer_shape *s, char *buf, size_t size);
void infer_shape_unknown(infer_shape *s);
/** Rank @p rank with every dim unknown; the unknown rank when @p rank < 0. */
void infer_shape_ranked_unknown(infer_shape *s, int32_t rank);
bool infer_shape_known(const infer_shape *s);
int64_t infer_shape_numel(const infer_shape *s); /* -1 when not fully known */
/** Input @p i must be connected; else "input <i> is not connected". */
kiln_status infer_need_input(const infer_node *nd, uint32_t i, kiln_error *err);
/** Numpy broadcast of @p a and @p b into @p out; error names the node and shapes. */
kiln_status infer_broadcast(const infer_node *nd, const infer_shape *a, const infer_shape *b,
                            infer_shape *out, kiln_error *err);
/** Normalise a possibly negative axis against @p rank; false when out of range. */
bool infer_axis(int64_t axis, int32_t rank, int64_t *out);
/** Element @p i of a known integer/bool/float value as int64. */
int64_t infer_val_int(const infer_val *v, size_t i);
double infer_val_f64(const infer_val *v, size_t i);
/** Number of elements of a value. */
size_t infer_val_numel(const infer_val *v);
/** Attribute list_int or, failing that, the value of input @p idx; false if neither. */
bool infer_ints(const infer_node *nd, const char *attr, uint32_t idx, int64_t *out, uint32_t max,
                uint32_t *n);
int64_t infer_attr_int(const infer_node *nd, const char *key, int64_t dflt);
/** ONNX TensorProto element type -> kiln dtype; false when unknown. */
bool infer_onnx_dtype(int64_t onnx_type, kiln_dtype *out);

/* ---- values and folding (infer_fold.c, infer_ops_eval.c) ------------------- */
void infer_val_free(infer_val *v);
kiln_status infer_val_alloc(infer_val *v, kiln_dtype dt, const infer_shape *s);
/** Value of a tensor attribute. */
kiln_status infer_val_from_tensor(infer_val *v, const kiln_tensor_value *t);
/**
 * Compute the outputs of @p nd (all inputs known, outputs inferred and small)
 * into @p out[nout]: with the kernel of the engine that would run the node
 * (kiln_engine_kernel), else with the op's fold function (nd->def->fold).
 * Returns false (and leaves @p out empty) when neither can.
 */
bool infer_fold_eval(const infer_node *nd, infer_val *out);
/** The fold function of the ONNX op defs: the built-in evaluator below. */
kiln_status infer_fold_builtin(const infer_node *nd, infer_val *out, kiln_error *err);
/** Built-in evaluator (integer/bool shape ops); false when it does not handle the node. */
bool infer_eval_builtin(const infer_node *nd, infer_val *out);
/** Turn @p n into a Const holding @p v (fold=true). */
kiln_status infer_make_const(kiln_graph *g, kiln_node_id n, const infer_val *v, kiln_error *err);
/**
 * Replace If node @p n of @p g by its subgraph @p branch: the branch's nodes
 * are copied into @p g (nested subgraphs deep-copied), Data nodes wired to
 * the If's inputs by _parent_node_index and the If's consumers to the
 * NetOutput inputs; the If is removed.
 */
kiln_status infer_inline_if(kiln_graph *g, kiln_node_id n, kiln_graph *branch, kiln_error *err);

/* ---- the op set and the pass (opset.c, infer_pass.c) ----------------------- */
/** Register every ONNX op def (and kiln's graph ops) with @p r. */
kiln_status onnx_register_ops(kiln_registrar *r, kiln_error *err);
/** The graph pass InferShapes (infer_pass.c): engine- and op-set-independent. */
extern const kiln_pass_desc infer_shapes_pass;

#endif
