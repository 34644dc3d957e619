/*
 * nn_matmul.c - ONNX MatMul and Gemm on the CPU through cblas_sgemm.
 *
 * MatMul follows numpy.matmul: a 1-D A is [1, K] and a 1-D B is [K, 1] (the
 * added dim is dropped from the result); the batch dims (all but the last
 * two) broadcast multidirectionally.  When B has no batch (the common
 * "activations x weight" case) and A's batch is not broadcast, the whole
 * batch folds into one sgemm of (batch * M) rows; otherwise one sgemm per
 * output matrix, with broadcast strides into A and B.
 *
 * FusedMatMul (MatMulScaleFusionPass, MatMulTransposeFusionPass): alpha *
 * MatMul(op(A), op(B)), op = a transpose of the last two dims when transA /
 * transB (a rank-1 operand is never transposed); the same batching, with the
 * transposes and alpha handed to sgemm.
 *
 * Gemm: Y = alpha * op(A) * op(B) + beta * C with op = transpose when
 * transA/transB; C (optional) broadcasts unidirectionally to [M, N]
 * (scalar, [N], [1], [M, 1], [1, N], [M, N]).  Y is pre-filled with beta * C
 * and sgemm accumulates into it.
 */
#include "nn_ops.h"

#include "nn_blas.h"
#include <string.h>

/* Inputs 0..@p nin-1 float32 with A and B present, output 0 a float32 buffer. */
static kiln_status check_ab(const kiln_kernel_args *a, uint32_t nin, kiln_error *err)
{
    kiln_status st = nn_check_float_inputs(a, 0, nin, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0) || !cpu_has_input(a, 1))
        return cpu_fail(a, err, KILN_ERR_INVALID, "A and B are required");
    return KILN_OK;
}

/* ---- MatMul, FusedMatMul ---------------------------------------------------- */

typedef struct matmul_state {
    bool ta, tb;
    float alpha;
} matmul_state;

static kiln_status matmul(const kiln_kernel_args *a, const matmul_state *ms, kiln_error *err)
{
    kiln_status st = check_ab(a, 2, err);
    if (st)
        return st;
    NN_BLAS_REQUIRE(a, err);
    const kiln_tensor *A = &a->inputs[0], *B = &a->inputs[1];
    if (A->rank < 1 || B->rank < 1 || A->rank > CPU_MAX_RANK || B->rank > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_INVALID, "MatMul needs inputs of rank 1 to %d",
                        CPU_MAX_RANK);
    const bool a1 = A->rank == 1, b1 = B->rank == 1;
    const bool ta = ms->ta && !a1, tb = ms->tb && !b1;
    const int64_t M = a1 ? 1 : A->dims[A->rank - (ta ? 1 : 2)];
    const int64_t K = A->dims[A->rank - (ta ? 2 : 1)];
    const int64_t KB = b1 ? B->dims[0] : B->dims[B->rank - (tb ? 1 : 2)];
    const int64_t N = b1 ? 1 : B->dims[B->rank - (tb ? 2 : 1)];
    const blasint lda = (blasint)(ta ? M : K), ldb = (blasint)(tb ? K : N);
    if (K != KB)
        return cpu_fail(a, err, KILN_ERR_INVALID, "inner dims differ: %lld and %lld",
                        (long long)K, (long long)KB);
    /* batch dims, right-aligned */
    const uint32_t ra = a1 ? 0 : A->rank - 2, rb = b1 ? 0 : B->rank - 2;
    const uint32_t rbat = ra > rb ? ra : rb;
    int64_t bd[CPU_MAX_RANK], sa[CPU_MAX_RANK], sb[CPU_MAX_RANK];
    int64_t na = 1, nb = 1, nbat = 1;
    int64_t stra = M * K, strb = K * N;
    for (int32_t i = (int32_t)rbat - 1; i >= 0; i--) {
        const int32_t ia = i - (int32_t)(rbat - ra), ib = i - (int32_t)(rbat - rb);
        const int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return cpu_fail(a, err, KILN_ERR_INVALID, "batch dims %lld and %lld do not broadcast",
                            (long long)da, (long long)db);
        bd[i] = da > db ? da : db;
        if (da == 0 || db == 0)
            bd[i] = 0;
        sa[i] = da == 1 ? 0 : stra;
        sb[i] = db == 1 ? 0 : strb;
        stra *= da;
        strb *= db;
        na *= da;
        nb *= db;
        nbat *= bd[i];
    }
    int64_t od[CPU_MAX_RANK + 2];
    uint32_t orank = 0;
    for (uint32_t i = 0; i < rbat; i++)
        od[orank++] = bd[i];
    if (!a1)
        od[orank++] = M;
    if (!b1)
        od[orank++] = N;
    if ((st = cpu_check_out_dims(a, 0, orank, od, err)) != KILN_OK)
        return st;
    const float *pa = A->data, *pb = B->data;
    float *y = a->outputs[0].data;
    if (nbat == 0 || M == 0 || N == 0)
        return KILN_OK;
    if (K == 0) {
        memset(y, 0, (size_t)(nbat * M * N) * sizeof(float));
        return KILN_OK;
    }
    const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (nb == 1 && na == nbat && !ta) { /* fold the batch into the rows */
        nn_sgemm(CblasRowMajor, opa, opb, (blasint)(nbat * M), (blasint)N, (blasint)K,
                    ms->alpha, pa, lda, pb, ldb, 0.0f, y, (blasint)N);
        return KILN_OK;
    }
    int64_t idx[CPU_MAX_RANK] = {0}, offa = 0, offb = 0;
    for (int64_t t = 0; t < nbat; t++) {
        nn_sgemm(CblasRowMajor, opa, opb, (blasint)M, (blasint)N, (blasint)K, ms->alpha,
                    pa + offa, lda, pb + offb, ldb, 0.0f, y + t * M * N, (blasint)N);
        for (int32_t d = (int32_t)rbat - 1; d >= 0; d--) { /* odometer */
            offa += sa[d];
            offb += sb[d];
            if (++idx[d] < bd[d])
                break;
            offa -= sa[d] * bd[d];
            offb -= sb[d] * bd[d];
            idx[d] = 0;
        }
    }
    return KILN_OK;
}

NN_KERNEL(nn_matmul_run)
{
    (void)state;
    static const matmul_state plain = {false, false, 1.0f};
    return matmul(a, &plain, err);
}

NN_PREPARE(nn_fused_matmul_prepare)
{
    matmul_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    s->ta = cpu_attr_int(g, n, "transA", 0) != 0;
    s->tb = cpu_attr_int(g, n, "transB", 0) != 0;
    s->alpha = (float)cpu_attr_float(g, n, "alpha", 1.0);
    return KILN_OK;
}

NN_KERNEL(nn_fused_matmul_run)
{
    return matmul(a, state, err);
}

/* ---- Gemm ---------------------------------------------------------------- */

typedef struct gemm_state {
    bool ta, tb;
    float alpha, beta;
    nn_act act; /* fused activation (nn_fusion.c) */
} gemm_state;

NN_PREPARE(nn_gemm_prepare)
{
    gemm_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    s->ta = cpu_attr_int(g, n, "transA", 0) != 0;
    s->tb = cpu_attr_int(g, n, "transB", 0) != 0;
    s->alpha = (float)cpu_attr_float(g, n, "alpha", 1.0);
    s->beta = (float)cpu_attr_float(g, n, "beta", 1.0);
    return nn_act_read(g, n, &s->act, err);
}

/* Fill Y [M, N] with beta * C broadcast unidirectionally; false if C does not fit. */
static bool fill_c(float *y, int64_t M, int64_t N, const kiln_tensor *C, float beta)
{
    int64_t cm = 1, cn = 1;
    if (C->rank == 1)
        cn = C->dims[0];
    else if (C->rank == 2) {
        cm = C->dims[0];
        cn = C->dims[1];
    } else if (C->rank > 2)
        return false;
    if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
        return false;
    const float *c = C->data;
    for (int64_t i = 0; i < M; i++) {
        const float *cr = c + (cm == 1 ? 0 : i * cn);
        float *yr = y + i * N;
        if (cn == 1)
            for (int64_t j = 0; j < N; j++)
                yr[j] = beta * cr[0];
        else
            for (int64_t j = 0; j < N; j++)
                yr[j] = beta * cr[j];
    }
    return true;
}

NN_KERNEL(nn_gemm_run)
{
    const gemm_state *s = state;
    kiln_status st = check_ab(a, 3, err);
    if (st)
        return st;
    NN_BLAS_REQUIRE(a, err);
    const kiln_tensor *A = &a->inputs[0], *B = &a->inputs[1];
    const kiln_tensor *C = cpu_has_input(a, 2) ? &a->inputs[2] : NULL;
    if (A->rank != 2 || B->rank != 2)
        return cpu_fail(a, err, KILN_ERR_INVALID, "Gemm needs 2-D A and B (got rank %u and %u)",
                        A->rank, B->rank);
    const int64_t M = A->dims[s->ta ? 1 : 0], K = A->dims[s->ta ? 0 : 1];
    const int64_t KB = B->dims[s->tb ? 1 : 0], N = B->dims[s->tb ? 0 : 1];
    if (K != KB)
        return cpu_fail(a, err, KILN_ERR_INVALID, "inner dims differ: %lld and %lld",
                        (long long)K, (long long)KB);
    const int64_t od[2] = {M, N};
    if ((st = cpu_check_out_dims(a, 0, 2, od, err)) != KILN_OK)
        return st;
    float *y = a->outputs[0].data;
    const bool use_c = C && s->beta != 0.0f;
    if (use_c && !fill_c(y, M, N, C, s->beta))
        return cpu_fail(a, err, KILN_ERR_INVALID, "C (rank %u) does not broadcast to [%lld, %lld]",
                        C->rank, (long long)M, (long long)N);
    if (M == 0 || N == 0)
        return KILN_OK;
    if (K == 0) {
        if (!use_c)
            memset(y, 0, (size_t)(M * N) * sizeof(float));
        nn_act_apply(&s->act, y, M * N);
        return KILN_OK;
    }
    nn_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                s->tb ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, s->alpha,
                A->data, (blasint)A->dims[1], B->data, (blasint)B->dims[1], use_c ? 1.0f : 0.0f,
                y, (blasint)N);
    nn_act_apply(&s->act, y, M * N);
    return KILN_OK;
}
