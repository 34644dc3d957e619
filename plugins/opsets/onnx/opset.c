/*
 * opset.c - the op defs of libkiln_onnx_ops.so: every ONNX op kiln knows
 * (domain "ai.onnx": the op types of the real models, of infer_ops_*.c and of
 * the engines' op tables) and GE's graph ops that kiln's passes recognise
 * (domain "ge": Data, NetOutput, Variable, the control-flow and memory ops).
 *
 * Each row gives the op's flags (kiln_op.h) and arity ranges as the ONNX
 * operator schemas give them across the opsets kiln reads (optional inputs
 * count: an importer keeps an anchor for every position up to the last
 * present one).  The inference function comes from the tables of
 * infer_ops_*.c (infer_find_op, once at load); every ONNX op that is not
 * data-like, stateful or no-fold folds with the built-in evaluator when no
 * engine kernel evaluates it (infer_fold_builtin).  GE's graph ops declare
 * their outputs (no inference) and accept any arity.
 */
#include "infer.h"

#define V KILN_OP_VARIADIC
#define EW KILN_OP_ELEMENTWISE
#define COMM KILN_OP_COMMUTATIVE

typedef struct op_row {
    const char *type;
    uint32_t flags;
    uint32_t in_lo, in_hi, out_lo, out_hi;
    const char *summary;
} op_row;

static const op_row onnx_rows[] = {
    /* elementwise, numpy broadcast */
    {"Add", EW | COMM, 2, 2, 1, 1, "a + b"},
    {"Sub", EW, 2, 2, 1, 1, "a - b"},
    {"Mul", EW | COMM, 2, 2, 1, 1, "a * b"},
    {"Div", EW, 2, 2, 1, 1, "a / b"},
    {"Pow", EW, 2, 2, 1, 1, "a ^ b"},
    {"Max", EW | COMM, 1, V, 1, 1, "element-wise maximum of the inputs"},
    {"Min", EW | COMM, 1, V, 1, 1, "element-wise minimum of the inputs"},
    {"Sum", EW | COMM, 1, V, 1, 1, "element-wise sum of the inputs"},
    {"Equal", EW | COMM, 2, 2, 1, 1, "a == b (bool)"},
    {"Greater", EW, 2, 2, 1, 1, "a > b (bool)"},
    {"GreaterOrEqual", EW, 2, 2, 1, 1, "a >= b (bool)"},
    {"Less", EW, 2, 2, 1, 1, "a < b (bool)"},
    {"LessOrEqual", EW, 2, 2, 1, 1, "a <= b (bool)"},
    {"Relu", EW, 1, 1, 1, 1, NULL},
    {"Sigmoid", EW, 1, 1, 1, 1, NULL},
    {"Sqrt", EW, 1, 1, 1, 1, NULL},
    {"Log", EW, 1, 1, 1, 1, NULL},
    {"Exp", EW, 1, 1, 1, 1, NULL},
    {"Tanh", EW, 1, 1, 1, 1, NULL},
    {"Abs", EW, 1, 1, 1, 1, NULL},
    {"Neg", EW, 1, 1, 1, 1, NULL},
    {"Not", EW, 1, 1, 1, 1, NULL},
    {"LeakyRelu", EW, 1, 1, 1, 1, NULL},
    {"HardSigmoid", EW, 1, 1, 1, 1, NULL},
    {"HardSwish", EW, 1, 1, 1, 1, "x * max(0, min(1, x / 6 + 0.5))"},
    {"Erf", EW, 1, 1, 1, 1, NULL},
    {"Gelu", EW, 1, 1, 1, 1, "x * (erf(x / sqrt(2)) + 1) * 0.5 (approximate none or tanh)"},
    {"QuickGelu", EW, 1, 1, 1, 1,
     "x * sigmoid(alpha * x), alpha 1.702 by default (ONNX Runtime's com.microsoft op)"},
    {"Clip", EW, 1, 3, 1, 1, "min/max as attributes or inputs 1 and 2"},
    {"Cast", EW, 1, 1, 1, 1, "to the dtype of attribute `to`"},
    {"Identity", EW, 1, 1, 1, 1, NULL},
    {"Softmax", 0, 1, 1, 1, 1, NULL},
    /* reductions: axes as attribute or input 1 */
    {"ReduceMax", 0, 1, 2, 1, 1, NULL},
    {"ReduceMean", 0, 1, 2, 1, 1, NULL},
    {"ReduceMin", 0, 1, 2, 1, 1, NULL},
    {"ReduceSum", 0, 1, 2, 1, 1, NULL},
    /* NN */
    {"Conv", 0, 2, 3, 1, 1, NULL},
    {"ConvTranspose", 0, 2, 3, 1, 1, NULL},
    {"MaxPool", 0, 1, 1, 1, 2, NULL},
    {"AveragePool", 0, 1, 1, 1, 1, NULL},
    {"GlobalAveragePool", 0, 1, 1, 1, 1, NULL},
    {"GlobalMaxPool", 0, 1, 1, 1, 1, NULL},
    {"Gemm", 0, 2, 3, 1, 1, NULL},
    {"MatMul", 0, 2, 2, 1, 1, NULL},
    {"FusedMatMul", 0, 2, 2, 1, 1,
     "alpha * MatMul(op(A), op(B)), op = transpose of the last two dims when transA / transB "
     "(ONNX Runtime's com.microsoft FusedMatMul; MatMulScaleFusionPass, "
     "MatMulTransposeFusionPass)"},
    {"BatchNormalization", 0, 5, 5, 1, 5, NULL},
    {"LayerNormalization", 0, 2, 3, 1, 3,
     "X, Scale, B; normalised over the dims from `axis` (Mean, InvStdDev: training outputs)"},
    {"LSTM", KILN_OP_NO_FOLD, 3, 8, 0, 3, "never folded (sequence state, costly)"},
    {"Resize", 0, 1, 4, 1, 1, "X, roi, scales, sizes (opset 11+) or X, scales (opset 10)"},
    {"Upsample", 0, 1, 2, 1, 1, "X, scales"},
    /* shapes and data movement */
    {"Const", KILN_OP_DATA_LIKE | KILN_OP_CONSTANT, 0, 0, 1, 1, "the `value` attribute"},
    {"Constant", KILN_OP_DATA_LIKE | KILN_OP_CONSTANT, 0, 0, 1, 1, "the `value` attribute"},
    {"ConstantOfShape", 0, 1, 1, 1, 1, NULL},
    {"Shape", KILN_OP_SHAPE_ONLY, 1, 1, 1, 1, "the input's shape (int64)"},
    {"Size", KILN_OP_SHAPE_ONLY, 1, 1, 1, 1, "the input's element count (int64)"},
    {"Reshape", 0, 1, 2, 1, 1, "target shape as input 1 or attribute `shape`"},
    {"Flatten", 0, 1, 1, 1, 1, NULL},
    {"Gather", 0, 2, 2, 1, 1, NULL},
    {"Concat", 0, 1, V, 1, 1, NULL},
    {"Slice", 0, 1, 5, 1, 1, "starts/ends/axes/steps as inputs or attributes"},
    {"Squeeze", 0, 1, 2, 1, 1, NULL},
    {"Unsqueeze", 0, 1, 2, 1, 1, NULL},
    {"Transpose", 0, 1, 1, 1, 1, NULL},
    {"Pad", 0, 1, 4, 1, 1, NULL},
    {"TransData", KILN_OP_NO_FOLD, 1, 1, 1, 1,
     "GE's format transform, NCHW <-> NHWC (attributes src_format, dst_format)"},
    /* control flow (If is inferred by the pass itself: branches, inlining) */
    {"If", KILN_OP_CONTROL_FLOW, 1, V, 0, V, "cond, then the values the branches read"},
    {"Loop", KILN_OP_CONTROL_FLOW, 2, V, 0, V, "body"},
    {"Scan", KILN_OP_CONTROL_FLOW, 1, V, 1, V, "body"},
};

#define DL KILN_OP_DATA_LIKE
#define ST KILN_OP_STATEFUL
#define REF KILN_OP_REFERENCE
#define CF KILN_OP_CONTROL_FLOW

/* GE's graph ops (GE_SEMANTICS.md): no inference, any arity. */
static const op_row ge_rows[] = {
    {"Data", DL, 0, V, 0, V, "a graph input (subgraphs: _parent_node_index)"},
    {"RefData", DL | REF, 0, V, 0, V, "a graph input updated in place"},
    {"AippData", DL, 0, V, 0, V, NULL},
    {"AnnData", DL, 0, V, 0, V, NULL},
    {"NetOutput", KILN_OP_GRAPH_OUTPUT, 0, V, 0, V, "the graph's outputs"},
    {"Variable", DL | ST | REF, 0, V, 0, V, "a persistent tensor"},
    {"VarHandleOp", DL | ST, 0, V, 0, V, NULL},
    {"ConstPlaceHolder", DL | KILN_OP_NO_FOLD, 0, V, 0, V, NULL},
    {"FileConstant", DL | KILN_OP_NO_FOLD, 0, V, 0, V, "a constant read from a file"},
    {"Case", CF, 0, V, 0, V, NULL},
    {"While", CF | ST, 0, V, 0, V, NULL},
    {"StatelessIf", CF, 0, V, 0, V, NULL},
    {"StatelessCase", CF, 0, V, 0, V, NULL},
    {"StatelessWhile", CF, 0, V, 0, V, NULL},
    {"PartitionedCall", CF, 0, V, 0, V, NULL},
    {"Switch", ST, 0, V, 0, V, NULL},
    {"RefSwitch", ST | REF, 0, V, 0, V, NULL},
    {"SwitchN", ST, 0, V, 0, V, NULL},
    {"Merge", ST, 0, V, 0, V, NULL},
    {"StreamSwitch", ST, 0, V, 0, V, NULL},
    {"StreamMerge", ST, 0, V, 0, V, NULL},
    {"LoopCond", ST, 0, V, 0, V, NULL},
    {"NextIteration", ST, 0, V, 0, V, NULL},
    {"RefNextIteration", ST | REF, 0, V, 0, V, NULL},
    {"LabelSwitchByIndex", ST, 0, V, 0, V, NULL},
    {"MemcpyAsync", ST, 0, V, 0, V, "a copy on the device stream"},
    {"MemcpyAddrAsync", ST, 0, V, 0, V, NULL},
    {"CopyH2D", ST, 0, V, 0, V, "host memory to device-like memory (PlacedLowering)"},
    {"CopyD2H", ST, 0, V, 0, V, "device-like memory to host memory, after a SyncStream"},
    {"CopyD2D", ST, 0, V, 0, V, "between device-like memory types (HBM, P2P)"},
    {"SyncStream", ST, 0, V, 0, V, "waits for the stream's earlier tasks"},
    {"FreeMemory", ST, 0, V, 0, V, "ends its input's life (host copy of PlacedLowering)"},
    {"AtomicAddrClean", ST, 0, V, 0, V, "zeroes atomic outputs"},
    {"MemSet", ST, 0, V, 0, V, NULL},
    {"Assign", ST | REF, 0, V, 0, V, "writes input 1 into the ref input 0"},
    {"AssignAdd", ST | REF, 0, V, 0, V, NULL},
    {"AssignSub", ST | REF, 0, V, 0, V, NULL},
    {"AssignVariableOp", ST, 0, V, 0, V, NULL},
    {"AssignAddVariableOp", ST, 0, V, 0, V, NULL},
    {"AssignSubVariableOp", ST, 0, V, 0, V, NULL},
    {"ReadVariableOp", ST, 0, V, 0, V, NULL},
    {"HcomBroadcast", ST, 0, V, 0, V, NULL},
    {"HcomAllReduce", ST, 0, V, 0, V, NULL},
    {"HcomAllGather", ST, 0, V, 0, V, NULL},
    {"HcomReduceScatter", ST, 0, V, 0, V, NULL},
    {"PhonyConcat", 0, 0, V, 0, V, NULL},
    {"PhonySplit", 0, 0, V, 0, V, NULL},
    {"FrameworkOp", ST, 0, V, 0, V, NULL},
};

static kiln_status register_rows(kiln_registrar *r, const op_row *rows, size_t n,
                                 const char *domain, bool onnx)
{
    for (size_t i = 0; i < n; i++) {
        const op_row *row = &rows[i];
        kiln_op_def d = {
            .struct_size = sizeof(kiln_op_def),
            .type = row->type,
            .domain = domain,
            .summary = row->summary,
            .flags = row->flags,
            .min_inputs = row->in_lo,
            .max_inputs = row->in_hi,
            .min_outputs = row->out_lo,
            .max_outputs = row->out_hi,
        };
        if (!onnx)
            d.infer = infer_find_ge_op(row->type);
        if (onnx) {
            d.infer = infer_find_op(row->type);
            if (!(row->flags & (KILN_OP_DATA_LIKE | KILN_OP_STATEFUL | KILN_OP_NO_FOLD |
                                KILN_OP_CONTROL_FLOW)))
                d.fold = infer_fold_builtin;
        }
        kiln_status st = kiln_register_op(r, &d);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status onnx_register_ops(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    kiln_status st = register_rows(r, onnx_rows, sizeof(onnx_rows) / sizeof(onnx_rows[0]),
                                   "ai.onnx", true);
    if (st == KILN_OK)
        st = register_rows(r, ge_rows, sizeof(ge_rows) / sizeof(ge_rows[0]), "ge", false);
    return st;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    kiln_status st = onnx_register_ops(r, e);
    return st != KILN_OK ? st : kiln_register_pass(r, &infer_shapes_pass);
}

KILN_PLUGIN_DEFINE("kiln.onnx_ops", "0.1.0", "Apache-2.0",
                   "the ONNX op set and GE's graph ops (op registry) and shape inference "
                   "(pass InferShapes)",
                   init, NULL)
