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

typedef struct ma_sym {
    int64_t size;      /* bytes: max over its root outputs; -1 unknown */
    int64_t rel;       /* offset relative to its union-find parent */
    uint32_t parent;   /* weighted union-find over continuous groups */
    uint32_t type;     /* memory type index */
    uint32_t first;    /* first live step */
    uint32_t last;     /* kiln_schedule_release_step of its uses */
    int32_t stream;    /* producer's stream, -1 none */
    uint32_t block;    /* block index in its type's problem, MA_NONE when none */
    uint64_t key;      /* order key: min (step << 32 | index) of its root outputs */
    int64_t offset;    /* assigned offset, -1 when not planned */
    uint8_t kind;      /* ma_kind */
    bool whole;        /* variable or fixed address: live the whole run */
    bool fixed;        /* fixed address (MarkSameAddrPass `_alloc_fixed_addr`) */
} ma_sym;

typedef struct ma_type {
    const char *name;
    kiln_mem_block *blocks;
    uint32_t *block_sym;  /* per block: its component's root symbol, or MA_NONE (workspace) */
    uint64_t *block_key;  /* per block: the order the planner sees them in */
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
    uint32_t nsym;
    ma_sym *sym;
    uint32_t *out_base; /* per node id: first index into out_size */
    int64_t *out_size;  /* running size of each root output */
    uint32_t *ws_base;  /* per node id: first index into ws_size / ws_off (+1 sentinel) */
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
