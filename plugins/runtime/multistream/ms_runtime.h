/*
 * ms_runtime.h - internal interface of the multi-stream runtime plugin
 * (libkiln_runtime_ms.so, runtime component "multistream"; docs/run.md).
 *
 * The runtime executes the build stage's decisions as they are recorded on
 * the graph (docs/build.md): the schedule (kiln_schedule_*: one task list per
 * stream, events between streams), the memory plan (output descriptors'
 * `offset`/`memory_type`, one arena per memory type of the sizes in the root's
 * `_kiln_memory_types`/`_kiln_memory_sizes`), workspaces.
 *
 *   buffers   one per memory symbol of the root (kiln_symtab_*): an arena
 *             range when the plan placed it, the caller's tensor for a root
 *             Data (zero-copy input), the caller's output tensor, allocated per
 *             run, for a NetOutput input (zero-copy output), a Const's value,
 *             else a buffer of its own (no plan, or a dynamic size)
 *   tasks     one per node with a stream, in stream order; a task waits for
 *             the events of its `_recv_event_ids`, runs (an engine kernel, a
 *             copy, an If branch or a PartitionedCall subgraph through the
 *             sequential runtime's plans), then records `_send_event_ids`
 *   workers   one thread per stream beyond the first; the caller's thread runs
 *             stream 0.  Events are counters under a mutex: a record adds one,
 *             a wait blocks until the count reaches the record it pairs with
 *             (an event id may be reused: the n-th record of an id is the one
 *             its waiter pairs with in the schedule).
 *
 *   ms_load.c  building a loaded model (buffers, tasks, kernels, events)
 *   ms_exec.c  running it (workers, events, poisoning), the plugin
 *
 * Test mode: KILN_TEST_MS_DROP_EVENT=K drops the wait of the K-th event pair
 * (kiln_schedule_events order), delays its sender by 50 ms and fills the
 * arenas with 0xff, so the receiver reads memory its producer has not
 * written yet: the differential tests must then fail (docs/testing.md).
 *
 * Under AddressSanitizer every arena byte is poisoned outside the lifetime
 * the plan gave it: a buffer is unpoisoned when its first task starts and
 * poisoned when its last use finishes, so a kernel that touches memory the
 * plan has handed to another buffer is reported.
 */
#ifndef KILN_MS_RUNTIME_H
#define KILN_MS_RUNTIME_H

#include "seq_runtime.h"
#include "io_reuse.h"

#include <pthread.h>
#include <stdatomic.h>

#define MS_NONE UINT32_MAX

typedef enum ms_buf_kind {
    MS_BUF_OWN = 0, /* a buffer of its own, allocated at load */
    MS_BUF_DYN,     /* not in the plan, from the allocator stack per run (ms_dyn.c) */
    MS_BUF_ARENA,   /* arena + planned offset */
    MS_BUF_INPUT,   /* the caller's input tensor (zero-copy) */
    MS_BUF_OUTPUT,  /* the caller's output tensor, allocated per run (zero-copy) */
    MS_BUF_CONST    /* a Const's value attribute */
} ms_buf_kind;

typedef struct ms_buf {
    ms_buf_kind kind;
    uint32_t io;        /* INPUT: input index; OUTPUT: output index */
    uint32_t arena;     /* ARENA: arena index */
    int64_t offset;     /* ARENA: offset in the arena */
    int64_t size;       /* bytes (the largest tensor of the symbol) */
    void *ptr;          /* current address (set per run for INPUT/OUTPUT) */
    uint32_t uses;      /* tasks that read or write it (poisoning) */
    uint32_t first;     /* first task writing it, MS_NONE when none (poisoning) */
    atomic_uint pending; /* uses left in this run */
    /* OWN buffers a While updates in place that would otherwise be the caller's
     * input or a Const's value: filled at the start of every run */
    bool copy_input;     /* from input `io` (no zero-copy for it) */
    const void *copy_src; /* from a Const's value, copy_bytes bytes */
    size_t copy_bytes;
    uint64_t dyn_users;  /* DYN: the streams that touch it, birth stream excluded */
    kiln_node_id var;    /* the variable whose memory this is (0: none): set at load,
                          * kept from run to run, never poisoned */
} ms_buf;

typedef enum ms_task_kind {
    MS_T_KERNEL = 0,
    MS_T_COPY,
    MS_T_IF,
    MS_T_CALL,
    MS_T_WHILE,
    MS_T_CASE,
    MS_T_NOP
} ms_task_kind;

typedef struct ms_wait {
    uint32_t event; /* event id */
    uint32_t need;  /* count the event must reach */
    uint32_t sender; /* task index of the record it pairs with (profiles) */
    uint32_t aev;    /* its event of the allocator stack (ms_dyn.c) */
} ms_wait;

typedef struct ms_task {
    kiln_node_id node;
    ms_task_kind kind;
    uint32_t nin, nout;
    uint32_t *in_buf;   /* nin buffer indices, MS_NONE = unconnected */
    uint32_t *out_buf;  /* nout buffer indices */
    kiln_tensor *args;  /* nin + nout tensors, data set at each run */
    uint32_t *touch;    /* distinct buffers used (poisoning), ntouch entries */
    uint32_t ntouch;
    kiln_kernel_fn fn;
    void *state;
    const char *engine;
    void *ws;           /* workspace (arena) or NULL */
    size_t ws_size;
    ms_wait *waits;
    uint32_t nwait;
    uint32_t *records;  /* event ids recorded after the task */
    uint32_t nrecord;
    seq_plan *sub[2];   /* IF: then/else plans; CALL: sub[0] */
    kiln_graph *sub_graph[2];
    seq_loop *loop;     /* WHILE: the loop (seq_loop.c) */
    seq_cases *cases;   /* CASE: its branches (seq_case.c) */
    kiln_tensor *sub_io; /* IF/CALL/WHILE/CASE: nin + nout scratch, the subgraph's inputs and
                            output views (allocated at load, not per run) */
    uint32_t stream;    /* the stream running it */
    size_t prof_idx;    /* profile: its record in the stream's seq_prof this run */
    /* dynamic memory (ms_dyn.c): DYN buffers it allocates (its first writer) and
     * frees (its stream's last use), the allocator events its records carry */
    uint32_t *dyn_alloc, ndyn_alloc;
    uint32_t *dyn_free, ndyn_free;
    uint32_t *dyn_send, ndyn_send;
} ms_task;

/* A profiled event wait: receiver's record waited for sender's (per stream). */
typedef struct ms_flow_rec {
    uint32_t event;
    uint32_t send_stream, recv_stream;
    size_t send_idx, recv_idx;
} ms_flow_rec;

typedef struct ms_flows {
    ms_flow_rec *v;
    size_t n, cap;
} ms_flows;

typedef struct ms_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t count;
} ms_event;

typedef struct ms_stream {
    uint32_t *tasks; /* task indices in order */
    uint32_t ntasks;
} ms_stream;

typedef struct ms_model ms_model;

typedef struct ms_worker {
    ms_model *m;
    uint32_t stream;
    pthread_t thread;
    bool started;
} ms_worker;

struct ms_model {
    kiln_graph *g;
    ms_buf *bufs;
    uint32_t nbufs;
    ms_task *tasks;
    uint32_t ntasks;
    ms_stream *streams;
    uint32_t nstreams;
    ms_event *events;
    uint32_t nevents;        /* highest event id + 1 */
    void **arenas;           /* one per memory type of the plan */
    int64_t *arena_size;
    uint32_t narenas;
    bool planned;            /* the graph's memory plan is in use */
    uint32_t ninputs, noutputs;
    kiln_node_id *input_node;   /* root Data by index */
    uint32_t *input_buf;
    uint32_t *output_buf;       /* buffer feeding each NetOutput input */
    const kiln_tensor_desc **output_desc; /* descriptor of each output's producer */
    kiln_node_id netoutput;
    seq_mem mem;                /* budget of the subgraph plans */
    int64_t fault_event;        /* test mode (KILN_TEST_MS_DROP_EVENT): event pair dropped */
    kiln_node_id fault_sender;  /* ... whose sender is then delayed */
    /* run state */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv, done_cv;
    uint64_t generation;      /* bumped per run: workers start */
    uint32_t running;         /* workers still running this run */
    bool quit;
    atomic_bool abort;        /* a task failed: waiters give up */
    kiln_error **worker_err;  /* one error object per stream */
    kiln_status *worker_st;
    bool *worker_cancelled;   /* the stream stopped because another failed */
    ms_worker *workers;       /* nstreams entries; [0] unused (the caller) */
    /* profiling (runtime option profile) */
    bool profile;
    uint32_t runs;            /* runs since load */
    seq_prof *prof;           /* nstreams recorders */
    ms_flows *flows;          /* nstreams: the waits each stream recorded */
    kiln_prof_task *out_tasks;    /* the last profile() answer */
    kiln_prof_flow *out_flows;
    kiln_prof_memory *out_memory;
    /* dynamic memory (runtime option allocator, ms_dyn.c) */
    kiln_alloc_stack *dyn;
    char dyn_name[64];
    uint32_t *dyn_pairs;      /* the stack's events: (src, dst) stream pairs */
    uint32_t dyn_nev;
    bool dyn_broken;          /* a failed run's stack could not be replaced */
    bool dyn_streams;         /* the allocator tracks streams: each stream frees */
    /* outputs that must reuse an input's memory (io_reuse.h), checked per run */
    kiln_io_pair *io_pairs;
    size_t nio_pairs;
};

/** Build a loaded model of @p g; errors name the node or buffer at fault. */
kiln_status ms_model_build(kiln_graph *g, int64_t max_memory, ms_model **out, kiln_error *err);
/**
 * A While updates its loop variables in place (GE: output i shares input i's
 * memory symbol).  A variable whose symbol is a model input or a Const gets a
 * buffer of its own, refilled from the input or the value at every run, so
 * neither the caller's tensor nor the graph's constant is ever written.
 * Errors: two outputs of one While in one symbol (a body that passes one
 * variable to another without the copies SubgraphPass inserts), memory.
 */
kiln_status ms_protect_loop_vars(ms_model *m, kiln_error *err);
/**
 * The runtime option allocator (ms_dyn.c): with @p allocator set, the buffers
 * the memory plan does not cover become DYN buffers of a stack of that
 * allocator component (GE RT2's dynamic memory): allocated per run on their
 * first writer's stream, made known to the other streams that use them
 * (AccessMemCrossStream), freed on each stream after its last use, with the
 * events carrying the recycle state; the final clean settles everything at
 * the end of a run.  Nothing changes when no buffer is left out of the plan.
 */
kiln_status ms_dyn_setup(ms_model *m, const char *allocator, kiln_error *err);
kiln_status ms_dyn_task_begin(ms_model *m, ms_task *t, kiln_error *err);
void ms_dyn_task_end(ms_model *m, ms_task *t);
void ms_dyn_waited(ms_model *m, ms_task *t, uint32_t w);
void ms_dyn_send(ms_model *m, ms_task *t);
void ms_dyn_final_clean(ms_model *m);
/** A new stack for the model (after a failed run: what it left allocated goes). */
kiln_status ms_dyn_reset(ms_model *m, kiln_error *err);
void ms_dyn_free(ms_model *m);
/** Free a model (stops its workers first). */
void ms_model_free(ms_model *m);
/**
 * Run stream @p s of @p m once; on failure sets m->abort and wakes every
 * waiter.  A stream stopped by another's failure returns an error with
 * m->worker_cancelled[s] set.
 */
kiln_status ms_stream_run(ms_model *m, uint32_t s, kiln_error *err);

#endif /* KILN_MS_RUNTIME_H */
