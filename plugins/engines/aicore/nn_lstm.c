/*
 * nn_lstm.c - ONNX LSTM on the CPU (forward, reverse, bidirectional).
 *
 * Inputs X [seq, batch, I] (layout 1: [batch, seq, I]), W [dirs, 4H, I],
 * R [dirs, 4H, H], optional B [dirs, 8H] (Wb then Rb), sequence_lens [batch],
 * initial_h / initial_c [dirs, batch, H] (layout 1: [batch, dirs, H]) and
 * P [dirs, 3H] (peepholes i, o, f).  Outputs Y [seq, dirs, batch, H]
 * (layout 1: [batch, seq, dirs, H]), Y_h and Y_c shaped like initial_h; any
 * may be absent.  Gate order iofc; attributes hidden_size, direction,
 * activations (f, g, h per direction; default Sigmoid, Tanh, Tanh) with
 * activation_alpha/beta consumed in order, clip, input_forget, layout.
 *
 * Per direction: one sgemm computes X * W^T for every step at once (+ both
 * biases); each step copies its rows into a [batch, 4H] gate block and one
 * sgemm adds H_{t-1} * R^T.  Steps past a batch entry's sequence length
 * leave its state alone and its Y rows zero; the reverse direction walks
 * each entry from its own last valid step.
 */
#include "nn_ops.h"

#include "nn_blas.h"
#include <math.h>
#include <string.h>

typedef enum act_kind {
    ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_AFFINE, ACT_LEAKY, ACT_THRESH, ACT_SCALED_TANH,
    ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} act_kind;

typedef struct act {
    act_kind kind;
    float alpha, beta;
} act;

typedef struct lstm_state {
    int64_t hidden;   /* -1: from W */
    int dirs;         /* 1 or 2 */
    bool reverse;     /* direction = reverse (dirs == 1) */
    bool layout1, input_forget, has_clip;
    float clip;
    act acts[6];      /* f, g, h per direction */
    nn_buf scratch;
} lstm_state;

static const struct {
    const char *name;
    act_kind kind;
    int nalpha, nbeta;
    float alpha, beta;
} act_names[] = {
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0, 0},        {"Tanh", ACT_TANH, 0, 0, 0, 0},
    {"Relu", ACT_RELU, 0, 0, 0, 0},              {"Affine", ACT_AFFINE, 1, 1, 1.0f, 0.0f},
    {"LeakyRelu", ACT_LEAKY, 1, 0, 0.01f, 0},    {"ThresholdedRelu", ACT_THRESH, 1, 0, 1.0f, 0},
    {"ScaledTanh", ACT_SCALED_TANH, 1, 1, 1.0f, 1.0f},
    {"HardSigmoid", ACT_HARD_SIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 0, 1.0f, 0},             {"Softsign", ACT_SOFTSIGN, 0, 0, 0, 0},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0, 0},
};

static inline float act_apply(const act *f, float x)
{
    switch (f->kind) {
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ACT_TANH: return tanhf(x);
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_AFFINE: return f->alpha * x + f->beta;
    case ACT_LEAKY: return x >= 0 ? x : f->alpha * x;
    case ACT_THRESH: return x > f->alpha ? x : 0;
    case ACT_SCALED_TANH: return f->alpha * tanhf(f->beta * x);
    case ACT_HARD_SIGMOID: {
        float v = f->alpha * x + f->beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case ACT_ELU: return x >= 0 ? x : f->alpha * (expf(x) - 1);
    case ACT_SOFTSIGN: return x / (1 + fabsf(x));
    default: return logf(1 + expf(x));
    }
}

/* Floats of scratch for seq, batch, H: G, gates, h, c and the bias sum. */
static size_t lstm_scratch(int64_t seq, int64_t batch, int64_t H)
{
    return (size_t)(seq * batch * 4 * H + batch * 4 * H + 2 * batch * H + 4 * H);
}

NN_PREPARE(nn_lstm_prepare)
{
    lstm_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    s->hidden = cpu_attr_int(g, n, "hidden_size", -1);
    const char *dir = cpu_attr_str(g, n, "direction", "forward");
    if (strcmp(dir, "forward") != 0 && strcmp(dir, "reverse") != 0 &&
        strcmp(dir, "bidirectional") != 0)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "unknown direction '%s'", dir);
    s->dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    s->reverse = strcmp(dir, "reverse") == 0;
    s->layout1 = cpu_attr_int(g, n, "layout", 0) != 0;
    s->input_forget = cpu_attr_int(g, n, "input_forget", 0) != 0;
    const kiln_attrs *at = kiln_node_attrs(g, n);
    s->has_clip = kiln_attrs_has(at, "clip");
    s->clip = (float)cpu_attr_float(g, n, "clip", 0.0);
    const char *const *names = NULL;
    const double *alphas = NULL, *betas = NULL;
    uint32_t nn = 0, na = 0, nb = 0, ia = 0, ib = 0;
    kiln_attrs_get_list_string(at, "activations", &names, &nn);
    kiln_attrs_get_list_float(at, "activation_alpha", &alphas, &na);
    kiln_attrs_get_list_float(at, "activation_beta", &betas, &nb);
    static const char *const dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
    for (int k = 0; k < 3 * s->dirs; k++) {
        const char *name = nn ? names[(uint32_t)k % nn] : dflt[k % 3];
        size_t j = 0, count = sizeof(act_names) / sizeof(act_names[0]);
        while (j < count && strcmp(act_names[j].name, name) != 0)
            j++;
        if (j == count)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "activation '%s'", name);
        s->acts[k].kind = act_names[j].kind;
        s->acts[k].alpha = act_names[j].nalpha && ia < na ? (float)alphas[ia++] : act_names[j].alpha;
        s->acts[k].beta = act_names[j].nbeta && ib < nb ? (float)betas[ib++] : act_names[j].beta;
    }
    int64_t x[3], w[3];
    if (nn_input_dims(g, n, 0, x, 3) == 3 && nn_input_dims(g, n, 1, w, 3) == 3) {
        const int64_t H = s->hidden > 0 ? s->hidden : w[1] / 4;
        const int64_t seq = s->layout1 ? x[1] : x[0], batch = s->layout1 ? x[0] : x[1];
        if ((st = nn_buf_alloc(&s->scratch, lstm_scratch(seq, batch, H), g, n, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

void nn_lstm_release(void *state)
{
    lstm_state *s = state;
    if (s)
        nn_buf_free(&s->scratch);
    cpu_state_free(state);
}

static float clipf(const lstm_state *s, float v)
{
    return !s->has_clip ? v : v > s->clip ? s->clip : v < -s->clip ? -s->clip : v;
}

/* Valid steps of batch entry @p b: sequence_lens[b], or @p seq without it. */
static inline int64_t seq_len(const kiln_tensor *SL, int64_t b, int64_t seq)
{
    if (!SL)
        return seq;
    return SL->dtype == KILN_DT_INT32 ? ((const int32_t *)SL->data)[b]
                                      : ((const int64_t *)SL->data)[b];
}

static kiln_status check_dims(const kiln_kernel_args *a, uint32_t i, int64_t d0, int64_t d1,
                              int64_t d2, uint32_t rank, kiln_error *err)
{
    const kiln_tensor *t = &a->inputs[i];
    const int64_t want[3] = {d0, d1, d2};
    bool ok = t->rank == rank;
    for (uint32_t k = 0; ok && k < rank; k++)
        ok = t->dims[k] == want[k];
    return ok ? KILN_OK
              : cpu_fail(a, err, KILN_ERR_INVALID, "input %u has the wrong shape", i);
}

NN_KERNEL(nn_lstm_run)
{
    const lstm_state *s = state;
    kiln_status st = nn_check_float_inputs(a, 0, 3, false, err);
    if (!st)
        st = nn_check_float_inputs(a, 5, 8, false, err);
    if (st)
        return st;
    NN_BLAS_REQUIRE(a, err);
    if (!cpu_has_input(a, 0) || !cpu_has_input(a, 1) || !cpu_has_input(a, 2))
        return cpu_fail(a, err, KILN_ERR_INVALID, "X, W and R are required");
    const kiln_tensor *X = &a->inputs[0], *W = &a->inputs[1];
    if (X->rank != 3 || W->rank != 3)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X and W must have rank 3");
    const int64_t seq = s->layout1 ? X->dims[1] : X->dims[0];
    const int64_t batch = s->layout1 ? X->dims[0] : X->dims[1], In = X->dims[2];
    const int64_t H = s->hidden > 0 ? s->hidden : W->dims[1] / 4, D = s->dirs;
    const int64_t H4 = 4 * H;
    if ((st = check_dims(a, 1, D, H4, In, 3, err)) || (st = check_dims(a, 2, D, H4, H, 3, err)))
        return st;
    const bool hb = cpu_has_input(a, 3), hh = cpu_has_input(a, 5), hc = cpu_has_input(a, 6);
    const bool hp = cpu_has_input(a, 7);
    const int64_t sd0 = s->layout1 ? batch : D, sd1 = s->layout1 ? D : batch;
    if ((hb && (st = check_dims(a, 3, D, 8 * H, 0, 2, err))) ||
        (hh && (st = check_dims(a, 5, sd0, sd1, H, 3, err))) ||
        (hc && (st = check_dims(a, 6, sd0, sd1, H, 3, err))) ||
        (hp && (st = check_dims(a, 7, D, 3 * H, 0, 2, err))))
        return st;
    const kiln_tensor *SL = cpu_has_input(a, 4) ? &a->inputs[4] : NULL;
    if (SL && ((SL->dtype != KILN_DT_INT32 && SL->dtype != KILN_DT_INT64) ||
               cpu_numel(SL) != batch))
        return cpu_fail(a, err, KILN_ERR_INVALID, "sequence_lens must be %lld int32 values",
                        (long long)batch);
    float *Y = a->output_count > 0 ? a->outputs[0].data : NULL;
    float *Yh = a->output_count > 1 ? a->outputs[1].data : NULL;
    float *Yc = a->output_count > 2 ? a->outputs[2].data : NULL;
    const int64_t ydims[4] = {s->layout1 ? batch : seq, s->layout1 ? seq : D,
                              s->layout1 ? D : batch, H};
    const int64_t hdims[3] = {sd0, sd1, H};
    if ((Y && (st = cpu_check_out_dims(a, 0, 4, ydims, err))) ||
        (Yh && (st = cpu_check_out_dims(a, 1, 3, hdims, err))) ||
        (Yc && (st = cpu_check_out_dims(a, 2, 3, hdims, err))))
        return st;
    float *owned = NULL, *buf = nn_scratch(&s->scratch, lstm_scratch(seq, batch, H), &owned);
    if (!buf)
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for the LSTM scratch");
    float *G = buf, *gates = G + seq * batch * H4, *h = gates + batch * H4, *c = h + batch * H;
    float *bsum = c + batch * H;
    if (Y)
        memset(Y, 0, (size_t)(seq * D * batch * H) * sizeof(float));
    const float *x = X->data;
    for (int64_t dir = 0; dir < D; dir++) {
        const bool rev = s->reverse || dir == 1;
        const act *f = &s->acts[3 * dir], *gact = f + 1, *hact = f + 2;
        const float *Wd = (const float *)W->data + dir * H4 * In;
        const float *Rd = (const float *)a->inputs[2].data + dir * H4 * H;
        const float *P = hp ? (const float *)a->inputs[7].data + dir * 3 * H : NULL;
        const float *B = hb ? (const float *)a->inputs[3].data + dir * 8 * H : NULL;
        for (int64_t j = 0; j < H4; j++)
            bsum[j] = B ? B[j] + B[H4 + j] : 0.0f;
        if (seq * batch > 0 && In > 0)
            nn_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)(seq * batch),
                        (blasint)H4, (blasint)In, 1.0f, x, (blasint)In, Wd, (blasint)In, 0.0f, G,
                        (blasint)H4);
        else
            memset(G, 0, (size_t)(seq * batch * H4) * sizeof(float));
        for (int64_t b = 0; b < batch; b++) {
            const int64_t off = s->layout1 ? (b * D + dir) * H : (dir * batch + b) * H;
            for (int64_t j = 0; j < H; j++) {
                h[b * H + j] = hh ? ((const float *)a->inputs[5].data)[off + j] : 0.0f;
                c[b * H + j] = hc ? ((const float *)a->inputs[6].data)[off + j] : 0.0f;
            }
        }
        for (int64_t step = 0; step < seq; step++) {
            for (int64_t b = 0; b < batch; b++) {
                const int64_t len = seq_len(SL, b, seq);
                const int64_t t = rev ? len - 1 - step : step;
                if (step < len)
                    memcpy(gates + b * H4, G + (s->layout1 ? b * seq + t : t * batch + b) * H4,
                           (size_t)H4 * sizeof(float));
            }
            if (H > 0)
                nn_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)batch, (blasint)H4,
                            (blasint)H, 1.0f, h, (blasint)H, Rd, (blasint)H, 1.0f, gates,
                            (blasint)H4);
            for (int64_t b = 0; b < batch; b++) {
                const int64_t len = seq_len(SL, b, seq);
                if (step >= len)
                    continue;
                const int64_t t = rev ? len - 1 - step : step;
                float *gr = gates + b * H4, *hb_ = h + b * H, *cb = c + b * H;
                for (int64_t j = 0; j < H; j++) {
                    const float cp = cb[j];
                    float pi = gr[j] + bsum[j], po = gr[H + j] + bsum[H + j];
                    float pf = gr[2 * H + j] + bsum[2 * H + j];
                    const float pc = gr[3 * H + j] + bsum[3 * H + j];
                    if (P) {
                        pi += P[j] * cp;
                        pf += P[2 * H + j] * cp;
                    }
                    const float it = act_apply(f, clipf(s, pi));
                    const float ft = s->input_forget ? 1.0f - it : act_apply(f, clipf(s, pf));
                    const float ct = ft * cp + it * act_apply(gact, clipf(s, pc));
                    if (P)
                        po += P[H + j] * ct;
                    const float ot = act_apply(f, clipf(s, po));
                    cb[j] = ct;
                    hb_[j] = ot * act_apply(hact, ct);
                }
                if (Y) {
                    float *yr = Y + (s->layout1 ? ((b * seq + t) * D + dir) * H
                                                : ((t * D + dir) * batch + b) * H);
                    memcpy(yr, hb_, (size_t)H * sizeof(float));
                }
            }
        }
        for (int64_t b = 0; b < batch; b++) {
            const int64_t off = s->layout1 ? (b * D + dir) * H : (dir * batch + b) * H;
            if (Yh)
                memcpy(Yh + off, h + b * H, (size_t)H * sizeof(float));
            if (Yc)
                memcpy(Yc + off, c + b * H, (size_t)H * sizeof(float));
        }
    }
    kiln_free(owned);
    return KILN_OK;
}
