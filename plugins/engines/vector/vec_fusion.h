/* vec_fusion.h - the vector engine's element-wise chain fusion (vec_fusion.c). */
#ifndef KILN_VEC_FUSION_H
#define KILN_VEC_FUSION_H

#include "basic_ops.h"

/* Opcodes of a KilnFusedElementwise program (docs/engines.md).  Fixed values:
 * programs are stored in graphs. */
enum vf_op {
    VF_ADD = 0,     /* a + b */
    VF_SUB = 1,     /* a - b */
    VF_MUL = 2,     /* a * b */
    VF_DIV = 3,     /* a / b */
    VF_MAX = 4,     /* a >= b ? a : b */
    VF_MIN = 5,     /* a <= b ? a : b */
    VF_NEG = 6,     /* -a */
    VF_SQRT = 7,    /* sqrtf(a) */
    VF_LOG = 8,     /* logf(a) */
    VF_SIGMOID = 9, /* 1 / (1 + expf(-a)) */
    VF_RELU = 10,   /* a > 0 ? a : 0 */
    VF_LEAKY = 11,  /* a >= 0 ? a : a * b */
    VF_HSIG = 12,   /* clamp(alpha * a + beta, 0, 1); b is constant alpha, beta the next one */
    VF_CLIPLO = 13, /* a < b ? b : a */
    VF_CLIPHI = 14, /* a > b ? b : a */
    VF_OP_COUNT
};

/* Registers of a program (inputs and temporaries). */
#define VF_MAX_REGS 16

/** The vector engine's optimize_subgraph hook. */
kiln_status vec_optimize_subgraph(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
/** Its optimize_subgraph_wanted: false when a partition has no two fusible nodes in a row. */
bool vec_optimize_subgraph_wanted(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                  uint32_t rank, const kiln_node_id *nodes, uint32_t count);
/** Register the op KilnFusedElementwise (shape inference: broadcast of the inputs). */
kiln_status vec_register_fused_op(kiln_registrar *r, kiln_error *err);

/** Register HardSwishFusionPass and LayerNormFusionPass (vec_fusion_passes.c). */
kiln_status vec_register_fusion_passes(kiln_registrar *r, kiln_error *err);

CPU_PREPARE(cpu_fused_prepare);
CPU_KERNEL(cpu_fused);

#endif
