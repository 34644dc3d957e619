/*
 * seq_loop.c - executing While nodes for both runtimes (seq_runtime.h,
 * docs/run.md "While and Loop"), and the step recorder of the profiles.
 *
 * A loop owns its buffers: two sets of loop-carried values (the values the
 * body reads in this iteration and the ones it is writing for the next, so
 * a body that swaps or passes values through never reads what it already
 * overwrote), one growing buffer per scan output, and the iteration counter
 * and condition scalars the ONNX body reads.  Buffers grow on demand and are
 * counted against the model's memory budget (seq_mem).
 */
#include "seq_runtime.h"

#include <pthread.h>

#include <time.h>

/* A tensor the loop owns: dims and data grown on demand. */
typedef struct seq_obuf {
    kiln_tensor t;
    int64_t *dims;
    uint32_t dcap;
    void *data;
    size_t cap;
} seq_obuf;

struct seq_loop {
    kiln_graph *g;       /* the graph holding the While node */
    kiln_node_id node;
    bool onnx;           /* ONNX Loop form; else GE While (cond + body) */
    uint32_t nin, nout;
    uint32_t ncarry;     /* loop-carried values */
    uint32_t nscan;      /* ONNX scan outputs */
    kiln_graph *sub_graph[2]; /* ONNX: body, -; GE: cond, body */
    seq_plan *sub[2];
    seq_mem *mem;
    seq_obuf *carry[2];  /* ncarry each: current and next */
    seq_obuf *scan;      /* nscan */
    kiln_tensor *in;     /* nin: what the body reads */
    kiln_tensor *views;  /* nout + 1: a subgraph's outputs */
    int64_t iter;        /* ONNX: iteration number the body reads */
    uint8_t cond;        /* ONNX: condition the body reads / the final one */
    int64_t zero_dims[1];
};

/* ---- owned buffers ------------------------------------------------------------ */

/* Make @p b a copy of @p src (grown when needed; growth is charged to @p mem). */
static kiln_status obuf_set(seq_obuf *b, seq_mem *mem, const kiln_tensor *src, kiln_error *err)
{
    if (src->rank > b->dcap) {
        int64_t *d = kiln_alloc(sizeof(int64_t) * src->rank);
        if (!d)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln_free(b->dims);
        b->dims = d;
        b->dcap = src->rank;
    }
    if (src->nbytes > b->cap) {
        int64_t more = (int64_t)(src->nbytes - b->cap);
        if (mem && mem->limit > 0 && more > mem->limit - mem->used)
            return kiln_errorf(err, KILN_ERR_LIMIT,
                               "a loop value of %zu bytes exceeds the memory limit of %lld bytes "
                               "(max_memory: kiln run --max-memory)",
                               src->nbytes, (long long)mem->limit);
        void *d = kiln_alloc(src->nbytes);
        if (!d)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%zu bytes)", src->nbytes);
        kiln_free(b->data);
        b->data = d;
        if (mem)
            mem->used += more;
        b->cap = src->nbytes;
    }
    if (src->rank)
        memcpy(b->dims, src->dims, sizeof(int64_t) * src->rank);
    if (src->nbytes)
        memcpy(b->data, src->data, src->nbytes);
    b->t = (kiln_tensor){src->dtype, src->rank, b->dims, b->data, src->nbytes};
    return KILN_OK;
}

static void obuf_free(seq_obuf *b, uint32_t n)
{
    for (uint32_t i = 0; b && i < n; i++) {
        kiln_free(b[i].dims);
        kiln_free(b[i].data);
    }
    kiln_free(b);
}

/* Append element @p e (iteration @p it) to scan buffer @p b: dims [it+1, e.dims...]. */
static kiln_status scan_append(seq_loop *l, seq_obuf *b, uint32_t j, const kiln_tensor *e,
                               kiln_error *err)
{
    const char *nn = kiln_node_name_str(l->g, l->node);
    if (l->iter > 0) {
        bool same = e->dtype == b->t.dtype && e->rank + 1 == b->t.rank;
        for (uint32_t k = 0; same && k < e->rank; k++)
            same = e->dims[k] == b->t.dims[k + 1];
        if (!same)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "While node %s: scan output %u changes its dtype or shape at "
                               "iteration %lld", nn, j, (long long)l->iter);
    }
    size_t need = e->nbytes * (size_t)(l->iter + 1);
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : e->nbytes * 4;
        if (cap < need)
            cap = need;
        int64_t more = (int64_t)(cap - b->cap);
        if (l->mem && l->mem->limit > 0 && more > l->mem->limit - l->mem->used)
            return kiln_errorf(err, KILN_ERR_LIMIT,
                               "While node %s: scan output %u needs %zu bytes, past the memory "
                               "limit of %lld bytes (max_memory)", nn, j, cap,
                               (long long)l->mem->limit);
        void *d = kiln_alloc(cap ? cap : 1);
        if (!d)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%zu bytes)", cap);
        if (b->t.nbytes)
            memcpy(d, b->data, b->t.nbytes);
        kiln_free(b->data);
        b->data = d;
        b->cap = cap;
        if (l->mem)
            l->mem->used += more;
    }
    if (e->rank + 1 > b->dcap) {
        int64_t *d = kiln_alloc(sizeof(int64_t) * (e->rank + 1));
        if (!d)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln_free(b->dims);
        b->dims = d;
        b->dcap = e->rank + 1;
    }
    if (e->nbytes)
        memcpy((char *)b->data + e->nbytes * (size_t)l->iter, e->data, e->nbytes);
    b->dims[0] = l->iter + 1;
    if (e->rank)
        memcpy(b->dims + 1, e->dims, sizeof(int64_t) * e->rank);
    b->t = (kiln_tensor){e->dtype, e->rank + 1, b->dims, b->data, need};
    return KILN_OK;
}

/* ---- preparing -------------------------------------------------------------------- */

void seq_loop_free(seq_loop *l)
{
    if (!l)
        return;
    seq_plan_free(l->sub[0]);
    seq_plan_free(l->sub[1]);
    obuf_free(l->carry[0], l->ncarry);
    obuf_free(l->carry[1], l->ncarry);
    obuf_free(l->scan, l->nscan);
    kiln_free(l->in);
    kiln_free(l->views);
    kiln_free(l);
}

/* The plan of subgraph @p i, built now when it was deferred. */
static kiln_status loop_plan(seq_loop *l, int i, kiln_error *err)
{
    if (l->sub[i])
        return KILN_OK;
    kiln_status st = seq_plan_build(l->sub_graph[i], false, l->mem, &l->sub[i], err);
    if (st != KILN_OK)
        return kiln_error_push(err, "While node %s, subgraph %s", kiln_node_name_str(l->g, l->node),
                               kiln_graph_name(l->sub_graph[i]));
    return KILN_OK;
}

kiln_status seq_loop_prepare(kiln_graph *g, kiln_node_id n, seq_mem *mem, seq_loop **out,
                             kiln_error *err)
{
    *out = NULL;
    const char *nn = kiln_node_name_str(g, n), *op = NULL;
    seq_loop *l = kiln_alloc(sizeof(*l));
    if (!l)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(l, 0, sizeof(*l));
    l->g = g;
    l->node = n;
    l->mem = mem;
    l->nin = kiln_node_input_count(g, n);
    l->nout = kiln_node_output_count(g, n);
    const kiln_attrs *a = kiln_node_attrs(g, n);
    l->onnx = kiln_attrs_get_string(a, "_onnx_op", &op) && strcmp(op, "Loop") == 0;
    kiln_status st = KILN_OK;
    if (l->onnx) {
        int64_t carried = -1;
        l->sub_graph[0] = seq_branch_of(g, n, "body");
        if (!kiln_attrs_get_int(a, "_onnx_loop_carried", &carried))
            carried = (int64_t)l->nin - 2;
        if (!l->sub_graph[0])
            st = kiln_errorf(err, KILN_ERR_INVALID, "While node %s (ONNX Loop) has no body "
                             "subgraph", nn);
        else if (l->nin < 2 || carried < 0 || carried > (int64_t)l->nin - 2 ||
                 (int64_t)l->nout < 1 + carried)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "While node %s (ONNX Loop): %u inputs and %u outputs do not fit "
                             "[M, cond, %lld loop-carried values, captures] -> [cond, values, "
                             "scans]", nn, l->nin, l->nout, (long long)carried);
        l->ncarry = (uint32_t)(carried > 0 ? carried : 0);
        l->nscan = st == KILN_OK ? l->nout - 1 - l->ncarry : 0;
    } else {
        l->sub_graph[0] = seq_branch_of(g, n, "cond");
        l->sub_graph[1] = seq_branch_of(g, n, "body");
        if (!l->sub_graph[0] || !l->sub_graph[1])
            st = kiln_errorf(err, KILN_ERR_INVALID, "While node %s needs subgraphs cond and body "
                             "(or _onnx_op \"Loop\" with a body)", nn);
        else if (l->nin != l->nout)
            st = kiln_errorf(err, KILN_ERR_INVALID, "While node %s has %u inputs and %u outputs; "
                             "a While's loop variables are both", nn, l->nin, l->nout);
        l->ncarry = l->nin;
    }
    if (st == KILN_OK) {
        l->carry[0] = kiln_alloc(sizeof(seq_obuf) * (l->ncarry + 1u));
        l->carry[1] = kiln_alloc(sizeof(seq_obuf) * (l->ncarry + 1u));
        l->scan = kiln_alloc(sizeof(seq_obuf) * (l->nscan + 1u));
        l->in = kiln_alloc(sizeof(kiln_tensor) * (l->nin + 1u));
        l->views = kiln_alloc(sizeof(kiln_tensor) * (l->nout + 1u));
        if (!l->carry[0] || !l->carry[1] || !l->scan || !l->in || !l->views)
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        else {
            memset(l->carry[0], 0, sizeof(seq_obuf) * (l->ncarry + 1u));
            memset(l->carry[1], 0, sizeof(seq_obuf) * (l->ncarry + 1u));
            memset(l->scan, 0, sizeof(seq_obuf) * (l->nscan + 1u));
        }
    }
    for (int i = 0; st == KILN_OK && i < 2; i++)
        if (l->sub_graph[i] && seq_shapes_static(l->sub_graph[i]))
            st = loop_plan(l, i, err);
    if (st != KILN_OK) {
        seq_loop_free(l);
        return st;
    }
    *out = l;
    return KILN_OK;
}

/* ---- running -------------------------------------------------------------------- */

/* The integer value of the trip count M (int64 or int32 scalar). */
static kiln_status trip_count(const seq_loop *l, const kiln_tensor *t, int64_t *m, kiln_error *err)
{
    if (t->dtype == KILN_DT_INT64 && t->nbytes >= 8 && t->data)
        memcpy(m, t->data, 8);
    else if (t->dtype == KILN_DT_INT32 && t->nbytes >= 4 && t->data) {
        int32_t v;
        memcpy(&v, t->data, 4);
        *m = v;
    } else
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "While node %s (ONNX Loop): the trip count M must be an int64 "
                           "scalar, got %s with %zu bytes",
                           kiln_node_name_str(l->g, l->node),
                           (unsigned)t->dtype < KILN_DT_COUNT ? kiln_dtype_name(t->dtype) : "?",
                           t->nbytes);
    return KILN_OK;
}

/* Run subgraph @p i with l->in as its inputs; l->views receive its @p nout outputs. */
static kiln_status run_body(seq_loop *l, int i, uint32_t nout, kiln_error *err)
{
    kiln_status st = loop_plan(l, i, err);
    if (st != KILN_OK)
        return st;
    const char *role = kiln_graph_name(l->sub_graph[i]);
    st = seq_sub_run(l->sub[i], l->g, l->node, "While", role, l->in, l->nin, l->views, nout, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "While node %s, iteration %lld",
                               kiln_node_name_str(l->g, l->node), (long long)l->iter);
    return KILN_OK;
}

/* Copy the body's carried outputs l->views[first..] into set @p dst; a dtype
 * other than the current value's (@p cur) is an error. */
static kiln_status take_carried(seq_loop *l, uint32_t first, const seq_obuf *cur, seq_obuf *dst,
                                kiln_error *err)
{
    for (uint32_t i = 0; i < l->ncarry; i++) {
        const kiln_tensor *v = &l->views[first + i];
        if (v->dtype != cur[i].t.dtype)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "While node %s: loop-carried value %u changes dtype from %s to %s "
                               "at iteration %lld",
                               kiln_node_name_str(l->g, l->node), i,
                               kiln_dtype_name(cur[i].t.dtype), kiln_dtype_name(v->dtype),
                               (long long)l->iter);
        kiln_status st = obuf_set(&dst[i], l->mem, v, err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status run_onnx(seq_loop *l, const kiln_tensor *in, kiln_tensor *out,
                            kiln_error *err)
{
    int64_t m = INT64_MAX;
    bool cond = true;
    kiln_status st = KILN_OK;
    if (in[0].dtype != KILN_DT_COUNT && (st = trip_count(l, &in[0], &m, err)) != KILN_OK)
        return st;
    if (in[1].dtype != KILN_DT_COUNT &&
        (st = seq_cond_value(l->g, l->node, &in[1], &cond, err)) != KILN_OK)
        return st;
    seq_obuf *cur = l->carry[0], *next = l->carry[1];
    for (uint32_t i = 0; i < l->ncarry; i++)
        if ((st = obuf_set(&cur[i], l->mem, &in[2 + i], err)) != KILN_OK)
            return st;
    for (uint32_t j = 0; j < l->nscan; j++)
        l->scan[j].t.nbytes = 0;
    for (l->iter = 0; l->iter < m && cond; l->iter++) {
        l->cond = cond;
        l->in[0] = (kiln_tensor){KILN_DT_INT64, 0, l->zero_dims, &l->iter, 8};
        l->in[1] = (kiln_tensor){KILN_DT_BOOL, 0, l->zero_dims, &l->cond, 1};
        for (uint32_t i = 0; i < l->ncarry; i++)
            l->in[2 + i] = cur[i].t;
        for (uint32_t k = 2 + l->ncarry; k < l->nin; k++)
            l->in[k] = in[k]; /* captures */
        if ((st = run_body(l, 0, l->nout, err)) != KILN_OK)
            return st;
        if ((st = seq_cond_value(l->g, l->node, &l->views[0], &cond, err)) != KILN_OK)
            return kiln_error_push(err, "the body's condition output");
        if ((st = take_carried(l, 1, cur, next, err)) != KILN_OK)
            return st;
        for (uint32_t j = 0; j < l->nscan; j++)
            if ((st = scan_append(l, &l->scan[j], j, &l->views[1 + l->ncarry + j], err)) != KILN_OK)
                return st;
        seq_obuf *t = cur;
        cur = next;
        next = t;
    }
    l->cond = cond;
    out[0] = (kiln_tensor){KILN_DT_BOOL, 0, l->zero_dims, &l->cond, 1};
    for (uint32_t i = 0; i < l->ncarry; i++)
        out[1 + i] = cur[i].t;
    for (uint32_t j = 0; j < l->nscan; j++) {
        seq_obuf *b = &l->scan[j];
        if (l->iter == 0) { /* no iteration: [0, element dims from the descriptor] */
            const kiln_tensor_desc *d = kiln_node_output_desc(l->g, l->node, 1 + l->ncarry + j);
            int32_t r = kiln_desc_rank(d);
            uint32_t rank = r > 0 ? (uint32_t)r : 1;
            if (rank > b->dcap) {
                kiln_free(b->dims);
                if (!(b->dims = kiln_alloc(sizeof(int64_t) * rank)))
                    return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
                b->dcap = rank;
            }
            for (uint32_t k = 0; k < rank; k++)
                b->dims[k] = k == 0 || r <= 0 || kiln_desc_dims(d)[k] < 0 ? 0 : kiln_desc_dims(d)[k];
            b->t = (kiln_tensor){kiln_desc_dtype(d), rank, b->dims, b->data, 0};
        }
        out[1 + l->ncarry + j] = b->t;
    }
    return KILN_OK;
}

static kiln_status run_ge(seq_loop *l, const kiln_tensor *in, kiln_tensor *out, kiln_error *err)
{
    seq_obuf *cur = l->carry[0], *next = l->carry[1];
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < l->ncarry; i++)
        if ((st = obuf_set(&cur[i], l->mem, &in[i], err)) != KILN_OK)
            return st;
    for (l->iter = 0;; l->iter++) {
        bool go = false;
        for (uint32_t i = 0; i < l->ncarry; i++)
            l->in[i] = cur[i].t;
        if ((st = run_body(l, 0, 1, err)) != KILN_OK)
            return st;
        if ((st = seq_cond_value(l->g, l->node, &l->views[0], &go, err)) != KILN_OK)
            return kiln_error_push(err, "the cond subgraph's output");
        if (!go)
            break;
        for (uint32_t i = 0; i < l->ncarry; i++)
            l->in[i] = cur[i].t; /* the cond plan ran: rebind for the body */
        if ((st = run_body(l, 1, l->nout, err)) != KILN_OK)
            return st;
        if ((st = take_carried(l, 0, cur, next, err)) != KILN_OK)
            return st;
        seq_obuf *t = cur;
        cur = next;
        next = t;
    }
    for (uint32_t i = 0; i < l->ncarry; i++)
        out[i] = cur[i].t;
    return KILN_OK;
}

kiln_status seq_loop_run(seq_loop *l, const kiln_tensor *in, uint32_t nin, kiln_tensor *out,
                         uint32_t nout, kiln_error *err)
{
    if (nin != l->nin || nout != l->nout)
        return kiln_errorf(err, KILN_ERR_INVALID, "While node %s: %u inputs and %u outputs given, "
                           "the node has %u and %u", kiln_node_name_str(l->g, l->node), nin, nout,
                           l->nin, l->nout);
    uint32_t first = l->onnx ? 2 : 0;
    for (uint32_t i = first; i < first + l->ncarry; i++)
        if (in[i].dtype == KILN_DT_COUNT)
            return kiln_errorf(err, KILN_ERR_INVALID, "While node %s: loop variable input %u is "
                               "unconnected", kiln_node_name_str(l->g, l->node), i);
    return l->onnx ? run_onnx(l, in, out, err) : run_ge(l, in, out, err);
}

/* ---- the step recorder ------------------------------------------------------------- */

/* The calling thread's recorder, in a pthread key rather than a _Thread_local:
 * a dlopen'ed library's ELF TLS stays in the thread's DTV after dlclose, and
 * LeakSanitizer's tracer (GCC 12) crashes scanning it at exit. */
static pthread_key_t prof_key;
static pthread_once_t prof_once = PTHREAD_ONCE_INIT;
static bool prof_key_ok;

static void prof_key_make(void)
{
    prof_key_ok = pthread_key_create(&prof_key, NULL) == 0;
}

seq_prof *seq_prof_get(void)
{
    pthread_once(&prof_once, prof_key_make);
    return prof_key_ok ? pthread_getspecific(prof_key) : NULL;
}

void seq_prof_set(seq_prof *p)
{
    pthread_once(&prof_once, prof_key_make);
    if (prof_key_ok)
        (void)pthread_setspecific(prof_key, p);
}

int64_t seq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

size_t seq_prof_add(seq_prof *p, const seq_prof_rec *r)
{
    if (p->n >= SEQ_PROF_MAX) { /* a long --repeat: keep the first runs */
        p->oom = true;
        return SIZE_MAX;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        seq_prof_rec *v = kiln_alloc(sizeof(*v) * cap);
        if (!v) {
            p->oom = true;
            return SIZE_MAX;
        }
        if (p->n)
            memcpy(v, p->v, sizeof(*v) * p->n);
        kiln_free(p->v);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n] = *r;
    return p->n++;
}

void seq_prof_reset(seq_prof *p)
{
    p->n = 0;
    p->run = 0;
    p->depth = 0;
    p->oom = false;
}

void seq_prof_free(seq_prof *p)
{
    kiln_free(p->v);
    memset(p, 0, sizeof(*p));
}
