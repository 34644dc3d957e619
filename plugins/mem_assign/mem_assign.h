/*
 * mem_assign.h - MemoryAssigner's shared state (libkiln_mem_assign.so):
 * ma_buffers.c turns the root graph into memory symbols, continuous
 * components and blocks (one kiln_mem_problem per memory type),
 * memory_assigner.c runs the planner, ma_write.c writes the plan back.
 * docs/memory_planning.md ("MemoryAssigner") describes the rules.
 */
#ifndef KILN_MEM_ASSIGN_H
#define KILN_MEM_ASSIGN_H

#include <kiln/kiln.h>

#define MA_NONE UINT32_MAX
#define MA_MAX_TYPES 16

/* Why a symbol is (not) planned. */
typedef enum ma_kind {
    MA_PLAN = 0,      /* planned by the memory planner */
    MA_ABSENT = 1,    /* no anchor in the root graph (subgraph-internal) */
    MA_ZERO_COPY = 2, /* a model input or output: the user's memory */
    MA_WEIGHT = 3,    /* a constant: the weight blob (MergeWeights) */
    MA_ONCHIP = 4,    /* L1 / UB: not an arena GE plans */
    MA_DYNAMIC = 5    /* unknown size (-1) */
} ma_kind;

/* Bits of a candidate block's `alignment` while the blocks are built
 * (ma_buffers.c; cleared before the planner sees them): */
#define MA_B_WHOLE 1u /* live the whole run */
#define MA_B_FIXED 2u /* fixed address */
#define MA_B_WS 4u    /* a workspace: id is its index in ws_size */
#define MA_B_DEAD 8u  /* merged into its component's root, or not planned after all */

typedef struct ma_type {
    const char *name;
    /* the planner's blocks: one per component root (id = its symbol) and per
     * workspace (id = its index), in the order of their key (see
     * ma_build_problems); while they are built, `offset` holds the key */
    kiln_mem_block *blocks;
    uint32_t nblocks, cap;
    int64_t peak, load, fixed_end;
    uint32_t buffers, dynamic;
} ma_type;

/* Op types and attribute keys read per node or anchor, resolved once: 0
 * means never interned, i.e. on no node (the test is skipped). */
typedef struct ma_names {
    kiln_sym data[4], var[3], cnst[4], netoutput;
    kiln_sym fixed_addr, out_mem_type, cont_in, cont_out, nopad_in, nopad_out;
    kiln_sym reuse_input, input_mem_types, ws_bytes, ws_offsets, engine;
} ma_names;

typedef struct ma_state {
    kiln_pass_ctx *ctx;
    ma_names nm;
    kiln_graph *root;
    kiln_error *err;
    const kiln_symtab *st;
    const kiln_schedule *s;
    /* per memory symbol (1 + 1 + 4 bytes; a large graph has a million) */
    uint32_t nsym;
    uint8_t *kind;      /* ma_kind */
    uint8_t *stype;     /* memory type index */
    uint32_t *blk;      /* a planned symbol's block in its type's problem (its
                         * component root's after ma_build_problems), else MA_NONE */
    /* weighted union-find over the continuous groups (offset(s) =
     * offset(parent) + rel; a root's rel: its offset minus its block's),
     * allocated by the first group: NULL = every symbol alone, rel 0 */
    uint32_t *parent;
    int64_t *rel;
    uint32_t *out_base; /* per node id: first index into out_size */
    int64_t *out_size;  /* running size of each root output */
    uint32_t *ws_base;  /* per node id: first index into ws_size / ws_off (+1
                         * sentinel); NULL when no node has a workspace */
    int64_t *ws_size, *ws_off;
    uint32_t *ws_block; /* per workspace: block in the HBM problem */
    uint32_t limit;     /* kiln_graph_id_limit(root) */
    int64_t align;
    ma_type types[MA_MAX_TYPES];
    uint32_t ntypes;
    uint32_t steps, streams;
} ma_state;

/* ma_buffers.c */
void ma_names_init(ma_state *m);
/** Whether the op of @p n is one of @p ops (@p cnt symbols, 0 entries never match). */
bool ma_op_in(const kiln_graph *g, kiln_node_id n, const kiln_sym *ops, uint32_t cnt);
/** Node attribute @p key (symbol @p sym, 0 = on no node) is true. */
bool ma_node_bool(const kiln_graph *g, kiln_node_id n, kiln_sym sym, const char *key);
kiln_status ma_collect(ma_state *m);
kiln_status ma_build_problems(ma_state *m);
uint32_t ma_find(ma_state *m, uint32_t s, int64_t *rel);
uint32_t ma_type_index(ma_state *m, const char *name);
const char *ma_type_name(int64_t code);
void ma_free(ma_state *m);
/* ma_write.c */
kiln_status ma_write(ma_state *m, const char *planner, bool report_buffers);
/* ma_subgraphs.c: plan every subgraph with static sizes (@p enabled), else
 * remove their plans; root totals `_kiln_memory_subgraph*` */
kiln_status ma_plan_subgraphs(ma_state *m, const char *planner, bool enabled);

#endif
