/*
 * streams.h - StreamAllocator of libkiln_streams.so (GE compiler/graph/build/
 * stream/: LogicalStreamAllocator, StreamAllocator; docs/streams.md).
 *
 * The pass works on the root graph in four steps, each in its own file:
 *   logical.c  GE's logical streams over the recorded partitions (AssignByLabel,
 *              IndependentStream, AssignByDependency, NodeStreamUpdate,
 *              UpdateForSkippedEngine, OptimizeIneffectiveMultiStream,
 *              renumbering), single-stream mode and --max-streams;
 *   events.c   one event per cross-stream edge, GE's redundant-event removal
 *              and kiln's exact one, SplitStreams, RefreshContinuousEvents and
 *              event-id reuse;
 *   plugin.c   options, the attributes written on the graph, the schedule check.
 */
#ifndef KILN_PLUGIN_STREAMS_H
#define KILN_PLUGIN_STREAMS_H

#include <kiln/kiln.h>

#include <stdbool.h>
#include <stdint.h>

#define SA_GE_LOCAL "ge_local"
#define SA_INPUT_NODES "inputNodesSubGraph"

/* Attributes read (GE's spellings) and written (docs/build.md). */
#define SA_ATTR_ENGINE "_kiln_engine"
#define SA_ATTR_STREAM_LABEL "_stream_label"
#define SA_ATTR_USER_STREAM_LABEL "_user_stream_label"
#define SA_ATTR_FORCE_ATTACH "_force_attach_stream"
#define SA_ATTR_RTS_LABEL_NODE "_rts_label_node"
#define SA_ATTR_PARALLEL_GROUP "_parallel_group"
#define SA_HCOM_PARALLEL_GROUP "-1" /* GE kHcomParallelGroupName */
#define SA_ATTR_CONT_LABEL "_continuous_stream_label"
#define SA_ATTR_TASK_NUM "_kiln_task_num"
#define SA_ATTR_ID "_kiln_id"
#define SA_ATTR_STREAM "_kiln_stream_id"
#define SA_ATTR_SEND "_send_event_ids"
#define SA_ATTR_RECV "_recv_event_ids"
#define SA_ATTR_LOGIC_STREAM "_logic_stream_id"
#define SA_ATTR_STREAM_NUM "_kiln_stream_num"
#define SA_ATTR_EVENT_NUM "_kiln_event_num"

/* GE's reserve of every stream's task budget: 7 profiling + 20 reserved tasks. */
#define SA_TASK_RESERVE 27

/** The pass options (docs/streams.md). */
typedef struct sa_opts {
    const char *independent;  /* comma-separated engines */
    const char *attach;
    const char *skip;
    const char *max_parallel; /* "engine:N,..." */
    int64_t max_task;
    bool untasked_on_stream;  /* keep GE's stream on nodes without a task */
    bool ge_event_opt;        /* OptimizeBySendEvents / OptimizeByRecvEvents */
    bool reduce_events;       /* kiln's exact redundant-event removal */
    bool reuse_events;
} sa_opts;

/** One partition of the root graph: GE's Subgraph of the stream allocator
 * (64 bytes: a graph of a million nodes may have a third as many). */
typedef struct sa_sub {
    const char *engine;
    const char *label;       /* "" = none */
    uint32_t *preds, *succs; /* subgraph indices, ascending, distinct */
    uint32_t npreds, nsuccs;
    uint32_t rank;           /* partition rank; UINT32_MAX: the subgraph of node
                                @p node alone (sa_sub_name names either) */
    kiln_node_id node;
    int32_t stream;          /* -1 = none yet */
    int32_t reused;          /* subgraph whose stream it reuses, -1 */
    int32_t max_parallel;    /* GE max_parallel_num, at most INT32_MAX */
    bool user_label : 1;     /* a node carries _user_stream_label */
    bool independent : 1, attach : 1, skip : 1, force_attach : 1, visited : 1;
    bool temp : 1;           /* stream is a per-engine temporary (AssignByDependency) */
} sa_sub;

/** One event: @p sender records it after it runs, @p receiver waits before it runs. */
typedef struct sa_event {
    kiln_node_id sender, receiver;
    bool dead;
} sa_event;

/* Op types and attribute keys tested per node, resolved once per run: 0
 * means never interned, so no node has that op or key (the test is skipped). */
#define SA_NO_TASK_OPS 12
#define SA_DATA_LIKE_OPS 8
typedef struct sa_names {
    kiln_sym no_task[SA_NO_TASK_OPS];     /* see sa_no_task */
    kiln_sym data_like[SA_DATA_LIKE_OPS]; /* logical.c is_data_like */
    kiln_sym engine, stream_label, user_label, force_attach, rts_label, parallel_group,
        new_stream_id, task_num;
} sa_names;

/** Everything the steps share. Arrays "by node" are indexed by node id. */
typedef struct sa_state {
    kiln_graph *g;
    sa_names nm;
    kiln_pass_ctx *ctx;
    const sa_opts *o;
    uint32_t limit;       /* node id limit */
    kiln_node_id *order;  /* topological order (owned copy) */
    uint32_t n;
    uint32_t *pos;        /* by node: position in order */
    int32_t *stream;      /* by node: stream, -1 none */
    int32_t *logic;       /* by node: logical stream before splitting, -1 none */
    int32_t *sub_of;      /* by node: subgraph index, -1 none (freed after sa_assign_logical) */
    uint32_t *in_start, *in_adj;   /* CSR by node: producers (data and control) */
    uint32_t *out_start, *out_adj; /* consumers (the four freed by sa_make_events) */
    sa_sub *subs;         /* freed after sa_assign_logical, as sub_pool */
    uint32_t nsubs;
    uint32_t *sub_pool;   /* storage of the subgraphs' preds and succs */
    int64_t next_stream;
    uint32_t nstreams;    /* after renumbering */
    uint32_t nlogical;    /* streams before splitting */
    sa_event *ev;
    uint32_t nev, evcap;
    uint32_t *phys;       /* event reuse: physical id by event, NULL when off */
    uint32_t nphys;
    uint32_t lower_bound; /* largest number of events outstanding at once */
    bool phys_exact;      /* nphys is the minimum for the schedule (Dilworth) */
    uint32_t ge_removed, kiln_removed, split_parts;
} sa_state;

/* logical.c */
/**
 * Logical streams of the root graph into st->stream (GE LogicalStreamAllocator).
 * Errors (recorded in the pass error): E10055 / E10056 in single-stream mode,
 * an unassigned non-skipped subgraph, KILN_ERR_NOMEM.
 */
kiln_status sa_assign_logical(sa_state *st);

/* events.c */
/** Events for every cross-stream edge, then GE's and kiln's redundant-event removal. */
/* Per node: its events as receiver / sender, in event order (CSR). */
typedef struct sa_ev_index {
    uint32_t *rs, *ra; /* recv start by node, recv events */
    uint32_t *ss, *sa; /* send */
} sa_ev_index;
kiln_status sa_ev_index_build(sa_state *st, sa_ev_index *x);
void sa_ev_index_free(sa_ev_index *x);

kiln_status sa_make_events(sa_state *st);
/** GE SplitStreams with option max_task; adds the parts and their events. */
kiln_status sa_split_streams(sa_state *st);
/** RefreshContinuousEvents, then event-id reuse (Dilworth's minimum chain cover). */
kiln_status sa_finish_events(sa_state *st);

/* shared helpers (plugin.c) */
/** Whether comma-separated @p list names @p name. */
bool sa_list_has(const char *list, const char *name);
/** Name of subgraph @p s for a message. */
const char *sa_sub_name(const sa_state *st, const sa_sub *s);
/** String attribute @p key of node @p n, "" when absent. */
const char *sa_node_str(const kiln_graph *g, kiln_node_id n, const char *key);
/** Resolve st->nm (plugin.c). */
void sa_names_init(sa_state *st);
/** Whether the op of @p n is one of @p ops (@p cnt symbols, 0 never matches). */
bool sa_op_in(const kiln_graph *g, kiln_node_id n, const kiln_sym *ops, uint32_t cnt);
/** Whether node @p n runs no task (its stream is -1): Data, Const, NetOutput, ... */
bool sa_no_task(const sa_state *st, kiln_node_id n, const char *engine);
/** Record an out-of-memory failure; returns KILN_ERR_NOMEM. */
kiln_status sa_nomem(sa_state *st);

#endif
