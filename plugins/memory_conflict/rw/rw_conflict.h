/*
 * rw_conflict.h - shared declarations of libkiln_mem_rw_conflict.so (GE
 * mem_rw_conflict_optimize, GE_SEMANTICS 2; docs/memory_rw_conflict.md).
 *
 *   rw_types.c                   RW-type analysis: ref relations, output and
 *                                input RW types, the combination rule, the
 *                                4x3 decision matrix, subgraph marking, the
 *                                run context (rw_ctx) and its end.
 *   split_identity.c             Identity creation (GE naming and clean
 *                                descriptors), SplitIdentity, RemoveNoUseIdentity.
 *   handle_memory_rw_conflict.c  the graph pass HandleMemoryRWConflict.
 *   check_rw_conflict.c          the graph pass CheckRWConflict (GE 2.8).
 *
 * All state of one run lives in an rw_ctx (GE keeps it in thread-locals).
 */
#ifndef KILN_MEM_RW_CONFLICT_H
#define KILN_MEM_RW_CONFLICT_H

#include "../common/mc_common.h"

/* GE InputRWType, same order (used as matrix column). */
typedef enum rw_in {
    RW_IN_READ_ONLY = 0,
    RW_IN_WRITEABLE = 1,
    RW_IN_SCOPE_WRITEABLE = 2,
    RW_IN_INVALID = 3
} rw_in;

/* GE OutputRWType, same order (used as matrix row). */
typedef enum rw_out {
    RW_OUT_READ_ONLY_CONST = 0,
    RW_OUT_READ_ONLY = 1,
    RW_OUT_SOFT_READ = 2,
    RW_OUT_WRITEABLE = 3,
    RW_OUT_INVALID = 4
} rw_out;

/* GE ConflictResult. */
typedef enum rw_result { RW_DO_NOTHING = 0, RW_WRONG_GRAPH = 1, RW_INSERT_IDENTITY = 2 } rw_result;

/* What MarkRWTypeForSubgraph recorded for one Data node of a subgraph. */
typedef struct rw_data_rec {
    kiln_node_id node;
    int64_t parent_index;
    rw_in type; /* input RW type of the Data (combined over its consumers) */
} rw_data_rec;

/* Per-subgraph records (GE subgraph_inputs_ / subgraph_netoutput_ / node_rwtype_map_). */
typedef struct rw_sub {
    bool marked;
    kiln_node_id netoutput; /* 0 = none recorded */
    uint32_t nout_types;
    rw_out *out_types; /* per NetOutput input index */
    uint32_t ndata;
    rw_data_rec *data;
} rw_sub;

/* One run of the pass over a root graph and all its subgraphs. */
typedef struct rw_ctx {
    kiln_graph *root;
    kiln_pass_ctx *pc;
    uint32_t nsub; /* kiln_graph_all_subgraph_count(root) */
    rw_sub *subs;  /* index i = kiln_graph_all_subgraph(root, i) */
    uint32_t seq;  /* next N of <producer>_Identity<N> (GE's global counter) */
    uint32_t inserted, removed;
    bool changed;
    /* op classes of this run as symbols (rw_ctx_init interns them) */
    mc_symset data_like, var_like, const_ops, whiles, identity_like;
    /* op types and keys read per anchor that the pass never writes, looked
     * up once (0: no node has it, the test is false without a string compare) */
    kiln_sym phony_concat, phony_split, framework_op, input_mutable, special_input_size;
    /* node keys the pass reads per node / per use: 0 = no node has them (an
     * Identity the pass inserts gets _cannot_be_deleted: see `inserted`) */
    kiln_sym skip_rw_conflict, cannot_be_deleted;
    /* root nodes below ref_lim (ids are never reused; the pass gives no
     * existing node a ref output): refbits[n] = 0 when no output of n is a
     * ref output (MarkRefRelations finds them); NULL: not known */
    uint8_t *refbits;
    uint32_t ref_lim;
} rw_ctx;

/* One entry of the GE GetAllNodes snapshot. */
typedef struct rw_item {
    kiln_graph *g;
    kiln_node_id n;
} rw_item;

typedef struct rw_list {
    rw_item *v;
    uint32_t count, cap;
} rw_list;

/* ---- rw_types.c ------------------------------------------------------- */

/**
 * GE GetAllNodes of the root: pre-order, each node then the nodes of each of
 * its subgraphs.  @p l->v is allocated (kiln_free it).  ERR_NOMEM.
 */
kiln_status rw_all_nodes(rw_ctx *c, rw_list *l);

const char *rw_in_name(rw_in t);
const char *rw_out_name(rw_out t);
/** Data, RefData, AippData, AnnData (the RW analysis' Data-like set). */
bool rw_is_data_like(const kiln_graph *g, kiln_node_id n);
bool rw_has_subgraphs(const kiln_graph *g, kiln_node_id n);
bool rw_is_subgraph_data(const kiln_graph *g, kiln_node_id n);
bool rw_is_subgraph_netoutput(const kiln_graph *g, kiln_node_id n);
/** Data consumers over all outputs of @p n. */
uint32_t rw_data_out_count(const kiln_graph *g, kiln_node_id n);
/** Input of @p n that output @p o references (ref_input), or -1. */
int32_t rw_ref_input_of_output(kiln_graph *g, kiln_node_id n, uint32_t o);
/** First output of @p n referencing input @p i, or -1 (GE refs_input_2_output_). */
int32_t rw_ref_output_of_input(kiln_graph *g, kiln_node_id n, uint32_t i);
/** The record index of subgraph @p g, or UINT32_MAX for the root / unknown. */
uint32_t rw_sub_index(const rw_ctx *c, const kiln_graph *g);

kiln_status rw_ctx_init(rw_ctx *c, kiln_graph *root, kiln_pass_ctx *pc);
void rw_ctx_fini(rw_ctx *c);
/**
 * End a pass run: free @p l->v and @p c, record "out of memory" for a
 * failure @p st that left no message on the pass, and return the pass
 * result (CHANGED when the run edited the graph).
 */
kiln_pass_result rw_run_finish(rw_ctx *c, rw_list *l, kiln_status st);
/** GE MarkRefRelations: set `reference`=true on every node with a ref output. */
void rw_mark_ref_relations(rw_ctx *c);
/** GE MarkRWTypeForAllSubgraph (reverse creation order, While subgraphs skipped). */
kiln_status rw_mark_all_subgraphs(rw_ctx *c);

/** GE GetSingleNodeOutputRWTypeByIndex. */
rw_out rw_single_output_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t o);
/** GE GetOutputRWTypeByIndex (use_cache: recorded NetOutput types). */
rw_out rw_output_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t o);
/** GE GetSingleNodeInputRWTypeByIndex. */
rw_in rw_single_input_type(const rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t i);
/** GE GetInputRWTypeByIndex; @p strict: an unmarked subgraph gives Invalid. */
rw_in rw_input_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t i, bool strict);
/** GE GetInputRwTypeInConflict, one fold step. */
rw_in rw_in_combine(rw_in acc, rw_in t);
/** GE GetConflictResultBetweenNode (the 4x3 matrix). */
rw_result rw_matrix(rw_out o, rw_in i);

/* ---- split_identity.c ------------------------------------------------- */

/**
 * GE CreateIdentityOpDesc + InsertNodeBefore: an Identity named
 * <name_src>_Identity<N> on input @p di of @p dst, its descriptors the clean
 * copy of output (@p desc_src, @p desc_out).  Returns the node or 0.
 */
kiln_node_id rw_identity_before(rw_ctx *c, kiln_graph *g, kiln_node_id dst, uint32_t di,
                                kiln_node_id desc_src, uint32_t desc_out);
/** Same with GE InsertNodeAfter semantics, re-feeding only input (@p dst, @p di). */
kiln_node_id rw_identity_after(rw_ctx *c, kiln_graph *g, kiln_node_id src, uint32_t so,
                               kiln_node_id dst, uint32_t di);
/** GE SplitIdentity. */
kiln_status rw_split_identity(rw_ctx *c, kiln_graph *g, kiln_node_id n);
/** GE RemoveNoUseIdentity. */
kiln_status rw_remove_no_use_identity(rw_ctx *c, kiln_graph *g, kiln_node_id n);

/* ---- pass descriptors ------------------------------------------------- */

extern const kiln_pass_desc kiln_handle_memory_rw_conflict_pass;
extern const kiln_pass_desc kiln_check_rw_conflict_pass;

#endif
