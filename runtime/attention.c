/*
 * attention.c: fused scaled dot-product attention (rt_attention_*), in
 * FlashAttention's tiling with an online softmax, so that its scratch does
 * not grow with the sequence; heads in a fixed number of lanes. The sums
 * across key blocks (the softmax's l, the backward's D, y's and dq's
 * accumulation of block products) are compensated (rt_comp_add), so their
 * error does not grow with the keys; within a block they are 8-lane float
 * sums (l, D) and the GEMM's (P V, ds K).
 *
 * Two layouts, one code: ONNX's 4-D (batch, heads, sequence, size), whose
 * head's rows are contiguous, and its 3-D (batch, sequence, heads * size),
 * the layout the projections before and after write, whose head's rows are
 * heads * size apart. A head is found by attn_head and its rows stepped by
 * a row stride (lq for q, k and their gradients, lv for v, y and theirs);
 * the 4-D layout is the 3-D one with one head per batch entry, so both
 * give the same bits (the GEMMs read a block through its leading
 * dimension).
 */
#include "rt_impl.h"

/* Attention works on blocks of RT_ATTN_BQ queries against blocks of up to
 * RT_ATTN_BK keys (FlashAttention's tiling): each product of a block pair is
 * one small GEMM, and the softmax statistics (row max m, row sum l) live per
 * query block, updated key block by key block (online softmax). Scratch
 * therefore grows with neither sq nor, past RT_ATTN_BK, skv. With causal a
 * query block stops at the key of its last row (the upper half is skipped
 * block-wise); inside a block each row masks the keys after its own. */
#ifndef RT_ATTN_BQ
#define RT_ATTN_BQ 32
#endif
#ifndef RT_ATTN_BK
#define RT_ATTN_BK 64
#endif

/* Heads are independent, so the kernels run them in RT_ATTN_LANES groups
 * (heads [L bh / lanes, (L + 1) bh / lanes) for lane L), each with its own
 * part of the scratch, on the runtime's threads; a head is computed the
 * same whichever lane or thread runs it. Fixed rather than the thread
 * count, because the scratch is sized when the graph is compiled. */
#define RT_ATTN_LANES 2

/* Below this many score entries (bh sq skv) the heads stay on the calling
 * thread: gpt's 16 heads of 64x64 (64K) gain from two. */
#define RT_PAR_ATTN ((size_t)1 << 14)

static int attn_min(int a, int b)
{
    return a < b ? a : b;
}

/* The lanes' ranges of heads [lo, hi) of lane jobs [lo, hi), one lane at
 * a time; run(ctx, lane, b0, b1) does heads [b0, b1) with lane's scratch. */
typedef struct {
    void (*run)(void *ctx, int lane, int b0, int b1);
    void *ctx;
    int bh;
} attn_lanes;

static void attn_lane_part(void *ctx, size_t lo, size_t hi)
{
    const attn_lanes *j = ctx;
    size_t lane;
    for (lane = lo; lane < hi; lane++)
        j->run(j->ctx, (int)lane, (int)(lane * (size_t)j->bh / RT_ATTN_LANES),
               (int)((lane + 1) * (size_t)j->bh / RT_ATTN_LANES));
}

static void attn_run_lanes(void (*run)(void *, int, int, int), void *ctx,
                           int bh, int sq, int skv)
{
    attn_lanes j;
    j.run = run;
    j.ctx = ctx;
    j.bh = bh;
    if ((size_t)bh * (size_t)sq * (size_t)skv < RT_PAR_ATTN)
        run(ctx, 0, 0, bh);
    else
        rt_parallel_parts(RT_ATTN_LANES, 1, 1, attn_lane_part, &j);
}

/* Keys 0..end-1 are the ones some query of rows i0..i0+mq-1 sees. */
static int attn_keys_end(int i0, int mq, int skv, int causal)
{
    return causal ? attn_min(skv, i0 + mq) : skv;
}

/* How many keys of the block j0..j0+nk-1 query i sees (a prefix). */
static int attn_row_keys(int i, int j0, int nk, int causal)
{
    int n = causal ? i + 1 - j0 : nk;
    return n < 0 ? 0 : attn_min(n, nk);
}

/* An additive mask of one head (NULL: none): row i's entries at mask +
 * i * row, key j's at + j (row 0 where every query sees one row). */
typedef struct {
    const float *at;
    size_t row;
} attn_mask;

/* s = scale * Q K^T (+ the mask) for query rows i0.. (mq) and keys j0..
 * (nk), stride nk; q's and k's rows lq apart. */
static void attn_scores(float *s, const float *q, const float *k, int i0,
                        int mq, int j0, int nk, int e, int lq, float scale,
                        const attn_mask *mask)
{
    int i, j;
    rt_sgemm(0, 1, mq, nk, e, scale, q + (size_t)i0 * lq, lq,
             k + (size_t)j0 * lq, lq, 0.0f, s, nk);
    for (i = 0; mask->at != NULL && i < mq; i++) {
        const float *mi = mask->at + (size_t)(i0 + i) * mask->row + j0;
        float *si = s + (size_t)i * nk;
        for (j = 0; j < nk; j++)
            si[j] += mi[j];
    }
}

/* The whole mask as the kernels are given it: batch entries mask_b
 * apart (0 broadcasts), rows mask_q apart, each entry serving mask_heads
 * heads in a row. */
typedef struct {
    const float *at;
    size_t mask_b, mask_q;
    int mask_heads;
} attn_mask_spec;

static attn_mask_spec attn_mask_spec_of(const float *mask, size_t mask_b,
                                        size_t mask_q, int mask_heads)
{
    attn_mask_spec w;
    w.at = mask;
    w.mask_b = mask_b;
    w.mask_q = mask_q;
    w.mask_heads = mask_heads;
    return w;
}

/* Head b's mask: batch entry b / mask_heads's. */
static attn_mask attn_head_mask(const attn_mask_spec *w, int b)
{
    attn_mask m;
    m.at = w->at != NULL ? w->at + (size_t)(b / w->mask_heads) * w->mask_b
                         : NULL;
    m.row = w->mask_q;
    return m;
}

/* Head b's first row in a tensor of s rows of d per head, heads per batch
 * entry, (batch, s, heads * d) laid out: b / heads's block, b % heads's
 * columns. */
static size_t attn_head(int b, int heads, int s, int d)
{
    return (size_t)(b / heads) * s * heads * d + (size_t)(b % heads) * d;
}

/* exp(x) for x <= 0 without a libm call, so that a row's loop vectorizes:
 * x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to r^6
 * (relative error about 1e-7), 2^n built in the exponent bits. Below -87
 * the result would leave the normal range: 0 there (under 1e-38, nothing
 * against a row whose largest term is 1; a saturated softmax stays exactly
 * one-hot), computed on the clamped x so that no lane overflows. */
RT_INLINE float attn_exp(float x)
{
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds */
    const float under = x < -87.0f ? 0.0f : 1.0f;
    float n, r, p, two_n;
    int32_t bits;
    x = x < -87.0f ? -87.0f : x;
    n = (x * 1.44269504f + round) - round;
    r = (x - n * 0.693145752f) - n * 1.42860677e-6f; /* ln2, hi + lo */
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
        r * (1.0f / 120 + r * (1.0f / 720))))));
    bits = ((int32_t)n + 127) * (1 << 23);
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n * under;
}

/* Reductions over a row in 8 interleaved lanes, so that they vectorize
 * (a single running float would fix the order and forbid it). */
#define ATTN_LANES 8

static float attn_row_max(const float *s, int n, float m)
{
    float lane[ATTN_LANES];
    int j, t;
    for (t = 0; t < ATTN_LANES; t++)
        lane[t] = m;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] = s[j + t] > lane[t] ? s[j + t] : lane[t];
    for (; j < n; j++)
        m = s[j] > m ? s[j] : m;
    for (t = 0; t < ATTN_LANES; t++)
        m = lane[t] > m ? lane[t] : m;
    return m;
}

static float attn_lanes_sum(const float *lane, float sum)
{
    int t;
    for (t = 0; t < ATTN_LANES; t++)
        sum += lane[t];
    return sum;
}

static float attn_row_sum(const float *a, int n)
{
    float lane[ATTN_LANES] = {0}, sum = 0.0f;
    int j, t;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] += a[j + t];
    for (; j < n; j++)
        sum += a[j];
    return attn_lanes_sum(lane, sum);
}

static float attn_row_dot(const float *a, const float *b, int n)
{
    float lane[ATTN_LANES] = {0}, sum = 0.0f;
    int j, t;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] += a[j + t] * b[j + t];
    for (; j < n; j++)
        sum += a[j] * b[j];
    return attn_lanes_sum(lane, sum);
}

/* s[j] = exp(s[j] - m) * c for the nv visible keys, 0 for the rest. */
static void attn_exp_row(float *s, int nv, int nk, float m, float c)
{
    int j;
    for (j = 0; j < nv; j++)
        s[j] = attn_exp(s[j] - m) * c;
    for (; j < nk; j++)
        s[j] = 0.0f;
}

/* Folds a key block into one row's statistics: the nv visible scores of s
 * become exp(s - m) against the new running max m, the masked rest 0, and
 * l + llo (a compensated total, rt_comp_add: its error does not grow with
 * the key blocks) gains their sum. Returns the factor exp(m_old - m) that
 * sums taken against the old max need (0 while the row had seen nothing,
 * m_old = -inf). */
static float attn_fold_row(float *s, int nv, int nk, float *m, float *l,
                           float *llo)
{
    const float mx = attn_row_max(s, nv, *m);
    float c;
    if (mx == -INFINITY) {  /* every score so far masked (-inf): nothing */
        attn_exp_row(s, 0, nk, 0.0f, 1.0f);
        return 1.0f;
    }
    c = nv > 0 ? expf(*m - mx) : 1.0f;
    attn_exp_row(s, nv, nk, mx, 1.0f);
    *l *= c;
    *llo *= c;
    rt_comp_add(l, llo, attn_row_sum(s, nv));
    *m = mx;
    return c;
}

/* hi[t] + lo[t] += v[t]: a key block's product folded into a compensated
 * total (y, dq) across key blocks; ATTN_LANES at a time, so that it
 * vectorizes (each element's operations are rt_comp_add's, in its
 * order: the same bits). */
static void attn_fold_into(float *restrict hi, float *restrict lo,
                           const float *restrict v, int n)
{
    int t = 0, l;
    for (; t + ATTN_LANES <= n; t += ATTN_LANES)
        for (l = 0; l < ATTN_LANES; l++) {
            const float a = hi[t + l], b = v[t + l], s = a + b;
            const float bb = s - a, aa = s - bb;
            lo[t + l] += (a - aa) + (b - bb);
            hi[t + l] = s;
        }
    for (; t < n; t++)
        rt_comp_add(&hi[t], &lo[t], v[t]);
}

/* hi[t] = hi[t] + lo[t], the totals' values. */
static void attn_fold_finish(float *hi, const float *lo, int n)
{
    int t;
    for (t = 0; t < n; t++)
        hi[t] = rt_comp_value(hi[t], lo[t]);
}

static void attn_scale_row(float *x, int n, float c)
{
    int t;
    for (t = 0; t < n; t++)
        x[t] *= c;
}

/* One lane's: a score block, then m, l and l's compensation per query;
 * past one key block, a block's product P V and y's compensation. */
static size_t attn_lane_scratch(int skv, int ev)
{
    return skv > 0 ? (size_t)RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK) +
                         3 * RT_ATTN_BQ +
                         (skv > RT_ATTN_BK ? 2 * (size_t)RT_ATTN_BQ * ev : 0)
                   : 0;
}

size_t rt_attention_scratch(int skv, int ev)
{
    return RT_ATTN_LANES * attn_lane_scratch(skv, ev);
}

/* One query block of one head: y rows accumulate P V unnormalized, rescaled
 * whenever a row's max grows, and are divided by l at the end. Past one
 * key block, each block's P V goes to pv and is folded into y with
 * compensation (ylo), so that y's error does not grow with the key
 * blocks; with one block y gets the product directly (the same bits). */
typedef struct {
    float *y;
    const float *q, *k, *v;
    attn_mask_spec mask;
    int heads, sq, skv, e, ev, lq, lv, causal;
    float scale, *scratch;
} attn_fwd;

static void attn_forward_block(const attn_fwd *a, float *y, const float *q,
                               const float *k, const float *v,
                               const attn_mask *mask, int i0, int mq,
                               float *scratch)
{
    const int skv = a->skv, e = a->e, ev = a->ev, lq = a->lq, lv = a->lv;
    float *s = scratch;
    float *m = s + (size_t)RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK);
    float *l = m + RT_ATTN_BQ, *llo = l + RT_ATTN_BQ;
    float *pv = llo + RT_ATTN_BQ, *ylo = pv + (size_t)RT_ATTN_BQ * ev;
    float *yb = y + (size_t)i0 * lv;
    const int end = attn_keys_end(i0, mq, skv, a->causal);
    const size_t rows = (size_t)mq * ev;
    int i, j0;
    for (i = 0; i < mq; i++)
        memset(yb + (size_t)i * lv, 0, (size_t)ev * sizeof *y);
    if (end > RT_ATTN_BK)
        memset(ylo, 0, rows * sizeof *ylo);
    for (i = 0; i < mq; i++) {
        m[i] = -INFINITY;
        l[i] = llo[i] = 0.0f;
    }
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_scores(s, q, k, i0, mq, j0, nk, e, lq, a->scale, mask);
        for (i = 0; i < mq; i++) {
            const float c =
                attn_fold_row(s + (size_t)i * nk,
                              attn_row_keys(i0 + i, j0, nk, a->causal), nk,
                              &m[i], &l[i], &llo[i]);
            if (c != 1.0f && j0 > 0) {
                attn_scale_row(yb + (size_t)i * lv, ev, c);
                attn_scale_row(ylo + (size_t)i * ev, ev, c);
            }
        }
        if (j0 == 0) {
            rt_sgemm(0, 0, mq, ev, nk, 1.0f, s, nk, v, lv, 1.0f, yb, lv);
        } else {
            rt_sgemm(0, 0, mq, ev, nk, 1.0f, s, nk, v + (size_t)j0 * lv, lv,
                     0.0f, pv, ev);
            for (i = 0; i < mq; i++)
                attn_fold_into(yb + (size_t)i * lv, ylo + (size_t)i * ev,
                               pv + (size_t)i * ev, ev);
        }
    }
    for (i = 0; end > RT_ATTN_BK && i < mq; i++)
        attn_fold_finish(yb + (size_t)i * lv, ylo + (size_t)i * ev, ev);
    for (i = 0; i < mq; i++) {
        const float li = rt_comp_value(l[i], llo[i]);
        if (li > 0.0f)
            attn_scale_row(yb + (size_t)i * lv, ev, 1.0f / li);
    }
}

static void attn_forward_heads(void *ctx, int lane, int b0, int b1)
{
    const attn_fwd *a = ctx;
    float *scratch =
        a->scratch + (size_t)lane * attn_lane_scratch(a->skv, a->ev);
    int b, i0;
    for (b = b0; b < b1; b++) {
        const float *qb = a->q + attn_head(b, a->heads, a->sq, a->e);
        const float *kb = a->k + attn_head(b, a->heads, a->skv, a->e);
        const float *vb = a->v + attn_head(b, a->heads, a->skv, a->ev);
        float *yb = a->y + attn_head(b, a->heads, a->sq, a->ev);
        const attn_mask mask = attn_head_mask(&a->mask, b);
        for (i0 = 0; i0 < a->sq; i0 += RT_ATTN_BQ)
            attn_forward_block(a, yb, qb, kb, vb, &mask, i0,
                               attn_min(RT_ATTN_BQ, a->sq - i0), scratch);
    }
}

void rt_attention_forward_3d(float *y, const float *q, const float *k,
                             const float *v, int batch, int heads, int sq,
                             int skv, int e, int ev, float scale, int causal,
                             float *scratch)
{
    rt_attention_forward_mask_3d(y, q, k, v, NULL, 0, 0, 1, batch, heads, sq,
                                 skv, e, ev, scale, causal, scratch);
}

void rt_attention_forward_mask_3d(float *y, const float *q, const float *k,
                                  const float *v, const float *mask,
                                  size_t mask_b, size_t mask_q, int mask_heads,
                                  int batch, int heads, int sq, int skv, int e,
                                  int ev, float scale, int causal,
                                  float *scratch)
{
    attn_fwd a;
    if (skv <= 0) { /* no query sees a key: zeros, and scratch is empty */
        memset(y, 0, (size_t)batch * heads * sq * ev * sizeof *y);
        return;
    }
    a.y = y;
    a.q = q;
    a.k = k;
    a.v = v;
    a.mask = attn_mask_spec_of(mask, mask_b, mask_q, mask_heads);
    a.heads = heads;
    a.sq = sq;
    a.skv = skv;
    a.e = e;
    a.ev = ev;
    a.lq = heads * e;
    a.lv = heads * ev;
    a.causal = causal;
    a.scale = scale;
    a.scratch = scratch;
    attn_run_lanes(attn_forward_heads, &a, batch * heads, sq, skv);
}

/* The 4-D layout: one head per batch entry of the 3-D one. */
void rt_attention_forward(float *y, const float *q, const float *k,
                          const float *v, int bh, int sq, int skv, int e,
                          int ev, float scale, int causal, float *scratch)
{
    rt_attention_forward_3d(y, q, k, v, bh, 1, sq, skv, e, ev, scale, causal,
                            scratch);
}

/* The backward of one head, FlashAttention-2's way without a stored
 * logsumexp: per query block a first pass over its key blocks rebuilds m, l
 * and D_i = sum_j p_ij dp_ij (= dy_i . y_i) online, a second turns each key
 * block's scores into p and ds = scale p (dp - D) and adds the four GEMMs.
 * When the block sees one key block only, the second pass reuses the first's
 * scores and dp instead of recomputing them. */
typedef struct {
    float *dq, *dk, *dv;
    const float *dy, *q, *k, *v; /* the head's */
    attn_mask mask;
    int sq, skv, e, ev, lq, lv, causal;
    float scale;
    /* scratch: 2 blocks, 5 rows of stats (l and D with their
     * compensation), past one key block dq's block product and its
     * compensation */
    float *s, *dp, *m, *l, *llo, *d, *dlo, *dqb, *dqlo;
} attn_bwd;

/* One lane's: p, then ds, two score blocks; m, l, D and the compensation
 * of l and D per query; past one key block, a block's ds K and dq's
 * compensation. */
static size_t attn_bwd_lane_scratch(int skv, int e)
{
    return skv > 0 ? (size_t)2 * RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK) +
                         5 * RT_ATTN_BQ +
                         (skv > RT_ATTN_BK ? 2 * (size_t)RT_ATTN_BQ * e : 0)
                   : 0;
}

size_t rt_attention_backward_scratch(int skv, int e)
{
    return RT_ATTN_LANES * attn_bwd_lane_scratch(skv, e);
}

static int attn_bwd_needs_ds(const attn_bwd *a)
{
    return a->dq != NULL || a->dk != NULL;
}

/* dp = dY V^T for the block pair (stride nk). */
static void attn_dp(const attn_bwd *a, int i0, int mq, int j0, int nk)
{
    rt_sgemm(0, 1, mq, nk, a->ev, 1.0f, a->dy + (size_t)i0 * a->lv, a->lv,
             a->v + (size_t)j0 * a->lv, a->lv, 0.0f, a->dp, nk);
}

/* First pass: m, l and D of rows i0.. from scratch (l and D summed over
 * the key blocks with compensation, then left as their values); leaves
 * the last key block's exp(s - m) in a->s and its dp in a->dp. */
static void attn_bwd_stats(const attn_bwd *a, int i0, int mq, int end)
{
    const int ds = attn_bwd_needs_ds(a);
    int i, j0;
    for (i = 0; i < mq; i++) {
        a->m[i] = -INFINITY;
        a->l[i] = a->llo[i] = a->d[i] = a->dlo[i] = 0.0f;
    }
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_scores(a->s, a->q, a->k, i0, mq, j0, nk, a->e, a->lq, a->scale,
                    &a->mask);
        if (ds)
            attn_dp(a, i0, mq, j0, nk);
        for (i = 0; i < mq; i++) {
            float *si = a->s + (size_t)i * nk;
            const int nv = attn_row_keys(i0 + i, j0, nk, a->causal);
            const float c = attn_fold_row(si, nv, nk, &a->m[i], &a->l[i],
                                          &a->llo[i]);
            if (ds) {
                a->d[i] *= c;
                a->dlo[i] *= c;
                rt_comp_add(&a->d[i], &a->dlo[i],
                            attn_row_dot(si, a->dp + (size_t)i * nk, nv));
            }
        }
    }
    for (i = 0; i < mq; i++) {
        const float d = rt_comp_value(a->d[i], a->dlo[i]);
        a->l[i] = rt_comp_value(a->l[i], a->llo[i]);
        a->d[i] = a->l[i] > 0.0f ? d / a->l[i] : 0.0f;
    }
}

/* p = exp(s - m) / l in a->s for the block pair; recomputed from q, k (and
 * dp from dy, v) unless the first pass's single block is still there. */
static void attn_bwd_probs(const attn_bwd *a, int i0, int mq, int j0, int nk,
                           int reuse)
{
    int i;
    if (!reuse) {
        attn_scores(a->s, a->q, a->k, i0, mq, j0, nk, a->e, a->lq, a->scale,
                    &a->mask);
        if (attn_bwd_needs_ds(a))
            attn_dp(a, i0, mq, j0, nk);
    }
    for (i = 0; i < mq; i++) {
        float *si = a->s + (size_t)i * nk;
        const int nv = attn_row_keys(i0 + i, j0, nk, a->causal);
        const float inv = 1.0f / a->l[i], mi = a->m[i];
        if (a->l[i] == 0.0f)    /* every score masked: no probability */
            attn_exp_row(si, 0, nk, 0.0f, 1.0f);
        else if (reuse)
            attn_scale_row(si, nk, inv);
        else
            attn_exp_row(si, nv, nk, mi, inv);
    }
}

/* Second pass over one key block: dv += p^T dy, then ds (in a->dp),
 * dq += ds k, dk += ds^T q. With more than one key block (many), dq's
 * rows gain each block's ds k with compensation (a->dqlo), finished by
 * attn_bwd_query_block. */
static void attn_bwd_block(const attn_bwd *a, int i0, int mq, int j0, int nk,
                           int many)
{
    const float *p = a->s;
    int i, j;
    if (a->dv != NULL)
        rt_sgemm(1, 0, nk, a->ev, mq, 1.0f, p, nk, a->dy + (size_t)i0 * a->lv,
                 a->lv, 1.0f, a->dv + (size_t)j0 * a->lv, a->lv);
    if (!attn_bwd_needs_ds(a))
        return;
    for (i = 0; i < mq; i++) {
        const float *pi = p + (size_t)i * nk;
        float *dsi = a->dp + (size_t)i * nk;
        for (j = 0; j < nk; j++)
            dsi[j] = a->scale * pi[j] * (dsi[j] - a->d[i]);
    }
    if (a->dq != NULL && many) {
        rt_sgemm(0, 0, mq, a->e, nk, 1.0f, a->dp, nk, a->k + (size_t)j0 * a->lq,
                 a->lq, 0.0f, a->dqb, a->e);
        for (i = 0; i < mq; i++)
            attn_fold_into(a->dq + (size_t)(i0 + i) * a->lq,
                           a->dqlo + (size_t)i * a->e,
                           a->dqb + (size_t)i * a->e, a->e);
    } else if (a->dq != NULL) {
        rt_sgemm(0, 0, mq, a->e, nk, 1.0f, a->dp, nk, a->k + (size_t)j0 * a->lq,
                 a->lq, 1.0f, a->dq + (size_t)i0 * a->lq, a->lq);
    }
    if (a->dk != NULL)
        rt_sgemm(1, 0, nk, a->e, mq, 1.0f, a->dp, nk, a->q + (size_t)i0 * a->lq,
                 a->lq, 1.0f, a->dk + (size_t)j0 * a->lq, a->lq);
}

static void attn_bwd_query_block(const attn_bwd *a, int i0, int mq)
{
    const int end = attn_keys_end(i0, mq, a->skv, a->causal);
    const int reuse = end <= RT_ATTN_BK;
    int i, j0;
    attn_bwd_stats(a, i0, mq, end);
    if (!reuse && a->dq != NULL)
        memset(a->dqlo, 0, (size_t)mq * a->e * sizeof *a->dqlo);
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_bwd_probs(a, i0, mq, j0, nk, reuse);
        attn_bwd_block(a, i0, mq, j0, nk, !reuse);
    }
    for (i = 0; !reuse && a->dq != NULL && i < mq; i++)
        attn_fold_finish(a->dq + (size_t)(i0 + i) * a->lq,
                         a->dqlo + (size_t)i * a->e, a->e);
}

/* The arguments of rt_attention_backward, for its lanes. */
typedef struct {
    float *dq, *dk, *dv, *scratch;
    const float *dy, *q, *k, *v;
    attn_mask_spec mask;
    int heads, sq, skv, e, ev, causal;
    float scale;
} attn_bwd_args;

static void attn_backward_heads(void *ctx, int lane, int b0, int b1)
{
    const attn_bwd_args *w = ctx;
    const size_t blk = (size_t)RT_ATTN_BQ * attn_min(w->skv, RT_ATTN_BK);
    attn_bwd a;
    int b, i0;
    a.sq = w->sq;
    a.skv = w->skv;
    a.e = w->e;
    a.ev = w->ev;
    a.lq = w->heads * w->e;
    a.lv = w->heads * w->ev;
    a.causal = w->causal;
    a.scale = w->scale;
    a.s = w->scratch + (size_t)lane * attn_bwd_lane_scratch(w->skv, w->e);
    a.dp = a.s + blk;
    a.m = a.dp + blk;
    a.l = a.m + RT_ATTN_BQ;
    a.llo = a.l + RT_ATTN_BQ;
    a.d = a.llo + RT_ATTN_BQ;
    a.dlo = a.d + RT_ATTN_BQ;
    a.dqb = a.dlo + RT_ATTN_BQ;
    a.dqlo = a.dqb + (size_t)RT_ATTN_BQ * a.e;
    for (b = b0; b < b1; b++) {
        const size_t oq = attn_head(b, w->heads, a.sq, a.e),
                     ok = attn_head(b, w->heads, a.skv, a.e),
                     oy = attn_head(b, w->heads, a.sq, a.ev),
                     ov = attn_head(b, w->heads, a.skv, a.ev);
        a.dq = w->dq != NULL ? w->dq + oq : NULL;
        a.dk = w->dk != NULL ? w->dk + ok : NULL;
        a.dv = w->dv != NULL ? w->dv + ov : NULL;
        a.dy = w->dy + oy;
        a.q = w->q + oq;
        a.k = w->k + ok;
        a.v = w->v + ov;
        a.mask = attn_head_mask(&w->mask, b);
        for (i0 = 0; i0 < a.sq; i0 += RT_ATTN_BQ)
            attn_bwd_query_block(&a, i0, attn_min(RT_ATTN_BQ, a.sq - i0));
    }
}

void rt_attention_backward_3d(float *dq, float *dk, float *dv,
                              const float *dy, const float *q, const float *k,
                              const float *v, int batch, int heads, int sq,
                              int skv, int e, int ev, float scale, int causal,
                              float *scratch)
{
    rt_attention_backward_mask_3d(dq, dk, dv, dy, q, k, v, NULL, 0, 0, 1,
                                  batch, heads, sq, skv, e, ev, scale, causal,
                                  scratch);
}

void rt_attention_backward_mask_3d(float *dq, float *dk, float *dv,
                                   const float *dy, const float *q,
                                   const float *k, const float *v,
                                   const float *mask, size_t mask_b,
                                   size_t mask_q, int mask_heads, int batch,
                                   int heads, int sq, int skv, int e, int ev,
                                   float scale, int causal, float *scratch)
{
    attn_bwd_args w;
    /* without keys no query sees one: nothing flows back */
    if ((dq == NULL && dk == NULL && dv == NULL) || skv <= 0)
        return;
    w.dq = dq;
    w.dk = dk;
    w.dv = dv;
    w.scratch = scratch;
    w.dy = dy;
    w.q = q;
    w.k = k;
    w.v = v;
    w.mask = attn_mask_spec_of(mask, mask_b, mask_q, mask_heads);
    w.heads = heads;
    w.sq = sq;
    w.skv = skv;
    w.e = e;
    w.ev = ev;
    w.causal = causal;
    w.scale = scale;
    attn_run_lanes(attn_backward_heads, &w, batch * heads, sq, skv);
}

void rt_attention_backward(float *dq, float *dk, float *dv, const float *dy,
                           const float *q, const float *k, const float *v,
                           int bh, int sq, int skv, int e, int ev, float scale,
                           int causal, float *scratch)
{
    rt_attention_backward_3d(dq, dk, dv, dy, q, k, v, bh, 1, sq, skv, e, ev,
                             scale, causal, scratch);
}
