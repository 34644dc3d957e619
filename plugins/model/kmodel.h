/*
 * kmodel.h - libkiln_kmodel.so internals: the build passes MergeWeights and
 * TaskGenerator, and the `kmodel` frontend that writes and loads the
 * executable model file (docs/model_format.md, docs/build.md).
 */
#ifndef KILN_PLUGIN_KMODEL_H
#define KILN_PLUGIN_KMODEL_H

#include <kiln/kiln.h>
#include <stddef.h>
#include <stdint.h>

/* ---- attributes of the build contract (docs/build.md) ------------------- */
#define KM_ATTR_WEIGHT_OFFSET "_kiln_weight_offset"
#define KM_ATTR_WEIGHT_SIZE "_kiln_weight_size"
#define KM_ATTR_WEIGHT_DEDUP "_kiln_weight_deduplicated"
#define KM_ATTR_WEIGHT_CONSTS "_kiln_weight_constants"
#define KM_ATTR_TASK_KIND "_kiln_task_kind"
#define KM_ATTR_KERNEL "_kiln_kernel"
#define KM_ATTR_TASK_ARGS "_kiln_task_args"
#define KM_ATTR_TASK_EVENT "_kiln_task_event_id"
#define KM_ATTR_TASK_TARGET "_kiln_task_target_stream_id"
#define KM_ATTR_ENGINE "_kiln_engine"
#define KM_ATTR_STREAM "_kiln_stream_id"
#define KM_ATTR_SEND "_send_event_ids"
#define KM_ATTR_RECV "_recv_event_ids"
#define KM_ATTR_STREAM_NUM "_kiln_stream_num"
#define KM_ATTR_EVENT_NUM "_kiln_event_num"
/* Set on the root by the loader: the graph came from a model file (built). */
#define KM_ATTR_BUILT "_kiln_built_model"
/* Set on the root by the loader, for `kiln info`; never written to a file. */
#define KM_INFO_PREFIX "_kiln_kmodel_"

/* Alignment of each entry of the weight blob (bytes). */
#define KM_WEIGHT_ALIGN 64
/* Bytes of argument blob an engine may write per task. */
#define KM_TASK_ARGS_CAP 4096

/* ---- weights (merge_weights.c) ----------------------------------------- */

/** One constant of the blob: node @c node of graph @c graph. */
typedef struct km_weight {
    kiln_graph *graph;
    kiln_node_id node;
    int64_t offset; /* in the blob */
    int64_t size;   /* bytes of the value */
    const void *data;
    int dedup; /* 1 when it shares an earlier constant's bytes */
    int64_t key; /* size and sampled bytes (merge_weights.c): equal values, equal keys */
} km_weight;

typedef struct km_weights {
    km_weight *items;
    uint32_t count;
    uint32_t deduplicated;
    int64_t blob_size; /* end of the last entry, aligned to KM_WEIGHT_ALIGN */
} km_weights;

/** True for Const and Constant nodes. */
int km_is_const(const kiln_graph *g, kiln_node_id n);
/** True for nodes that never get a task: Data, RefData, Const, Constant, Variable, NetOutput. */
int km_is_data_like(const kiln_graph *g, kiln_node_id n);
/* The same by symbol: the six op types resolved once (km_data_like_init),
 * a node tested with one load and six compares. */
typedef struct km_data_like {
    kiln_sym op[6];
} km_data_like;
void km_data_like_init(km_data_like *d, const kiln_graph *g);
int km_data_like_has(const km_data_like *d, const kiln_graph *g, kiln_node_id n);
/**
 * Lay every Const/Constant value of @p root and its subgraphs (root first,
 * then subgraphs in creation order, nodes in id order) into one blob: each
 * entry KM_WEIGHT_ALIGN-aligned, equal values stored once (SHA-256 of the
 * bytes, then a byte compare).  A Const without a tensor `value` has no entry.
 * O(total bytes + n).  km_weights_free releases @p w.
 */
kiln_status km_weights_plan(kiln_graph *root, km_weights *w, kiln_error *err);
void km_weights_free(km_weights *w);
/** SHA-256 (nettle) of @p n bytes into @p out; always true. */
int km_sha256(const void *p, size_t n, uint8_t out[32]);

extern const kiln_pass_desc km_merge_weights_pass;
extern const kiln_pass_desc km_task_generator_pass;

/* ---- tasks (task_gen.c) ------------------------------------------------- */

/** One task of a stream's sequence, as the model file stores it. */
typedef struct km_task {
    uint32_t kind;     /* kiln_task_kind */
    kiln_node_id node; /* 0 for none */
    uint32_t event_id;
} km_task;

typedef struct km_stream_seq {
    km_task *tasks;
    uint32_t count, cap;
} km_stream_seq;

typedef struct km_sequences {
    km_stream_seq *streams;
    uint32_t stream_count;
    uint32_t event_count; /* one past the largest event id */
} km_sequences;

/**
 * The per-stream task sequences of graph @p g (the root: the schedule's order
 * and streams; a subgraph: its topological order): each node with a stream
 * that is not Data-like -- its _kiln_task_kind, or NONE for a node the
 * runtime performs itself (no engine task) -- preceded by an
 * EVENT_WAIT per _recv_event_ids and followed by an EVENT_RECORD per
 * _send_event_ids.  When no node has _kiln_stream_id (StreamAllocator has not
 * run) there is one stream.  O(n + events).  km_sequences_free releases it.
 */
kiln_status km_sequences_build(kiln_graph *g, km_sequences *s, kiln_error *err);
void km_sequences_free(km_sequences *s);
/** Whether any node of @p g carries _kiln_stream_id (StreamAllocator ran). */
int km_has_streams(const kiln_graph *g);

/* ---- the model file (kmodel_file.c, kmodel_write.c, kmodel_read.c) ------ */

#define KM_MAGIC "KILNMDL\0"
#define KM_FORMAT_MAJOR 1
#define KM_FORMAT_MINOR 0
#define KM_HEADER_SIZE 64
#define KM_SECTION_ENTRY_SIZE 64
#define KM_MAX_SECTIONS 64
#define KM_PAGE 4096

enum { KM_SEC_META = 1, KM_SEC_GRAPH = 2, KM_SEC_WEIGHTS = 3 };

/** A section as the table lists it. */
typedef struct km_section {
    uint32_t kind;
    uint32_t flags;
    uint64_t offset, size;
    uint8_t sha256[32];
} km_section;

/** Name of a section kind ("META", "GRAPH", "WEIGHTS", "kind 7"); @p buf for unknowns. */
const char *km_section_name(uint32_t kind, char *buf, size_t size);

/** Write @p g as a model file to @p path (the frontend's export_file). */
kiln_status km_export_file(kiln_graph *g, const char *path, kiln_error *err);
/** Load the model file @p path into the empty root graph @p g (import_file). */
kiln_status km_import_file(kiln_graph *g, const char *path, kiln_error *err);
/** Load a model file held in memory (the fuzz target); @p name labels errors. */
kiln_status km_import_buffer(kiln_graph *g, const uint8_t *buf, size_t len, const char *name,
                             kiln_error *err);

extern const kiln_frontend_desc km_frontend;



/* ---- a bump allocator for the protobuf-c structs of one write ----------- */
typedef struct km_arena_block km_arena_block;
typedef struct km_arena {
    km_arena_block *head;
    int oom;
} km_arena;
/** @p n zeroed bytes, 16-aligned; NULL (and a->oom set) on OOM. */
void *km_arena_alloc(km_arena *a, size_t n);
void km_arena_free(km_arena *a);
/** Little-endian encoding helpers of the header and section table. */
void km_put_u16(uint8_t *p, uint16_t v);
void km_put_u32(uint8_t *p, uint32_t v);
void km_put_u64(uint8_t *p, uint64_t v);
uint16_t km_get_u16(const uint8_t *p);
uint32_t km_get_u32(const uint8_t *p);
uint64_t km_get_u64(const uint8_t *p);
#endif
