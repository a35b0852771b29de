/*
 * binary.c: the broadcasting binary ops Add, Sub, Mul, Div, Mod (fmod) and Pow, with
 * Where and Expand. They walk an rt_bcast map (remat_rt.h) one innermost
 * row at a time, through rt_bc_run and rt_bc_run_split (rt_impl.h), which
 * reduce.c and structural.c's Transpose walk their maps with too. A
 * gradient that is a sum over a broadcast dim is summed one entry at a
 * time by rt_bc_sums (rt_impl.h; ReduceSum's forward too), an rt_sum in
 * the walk's order, entries split over the threads.
 */
#include "rt_impl.h"

/* ---- broadcasting binary ops ---------------------------------------------- */

/* Runs `row` over innermost rows [lo, hi) of m's index space (rank >= 1,
 * no empty dim), keeping the offsets of a and b up to date with an odometer
 * over the outer dims, started at row lo's digits. */
static void bc_rows(const rt_bcast *m, const bc_args *p, bc_row row,
                    size_t lo, size_t hi)
{
    int idx[RT_MAX_RANK] = {0};
    const int r = m->rank, n = m->dims[r - 1];
    ptrdiff_t oa = 0, ob = 0;
    size_t q = lo, k;
    int d;
    for (d = r - 2; d >= 0; d--) {
        idx[d] = (int)(q % (size_t)m->dims[d]);
        q /= (size_t)m->dims[d];
        oa += (ptrdiff_t)idx[d] * m->sa[d];
        ob += (ptrdiff_t)idx[d] * m->sb[d];
    }
    for (k = lo; k < hi; k++) {
        row(p, (ptrdiff_t)k * n, oa, ob, n, m->sa[r - 1], m->sb[r - 1]);
        for (d = r - 2; d >= 0; d--) {
            oa += m->sa[d];
            ob += m->sb[d];
            if (++idx[d] < m->dims[d])
                break;
            idx[d] = 0;
            oa -= (ptrdiff_t)m->dims[d] * m->sa[d];
            ob -= (ptrdiff_t)m->dims[d] * m->sb[d];
        }
    }
}

/* The number of innermost rows, 0 when a dim is empty; -1 for a scalar. */
static long bc_count_rows(const rt_bcast *m)
{
    long rows = 1;
    int d;
    if (m->rank <= 0)
        return -1;
    for (d = 0; d < m->rank; d++)
        if (m->dims[d] <= 0)
            return 0;
    for (d = 0; d < m->rank - 1; d++)
        rows *= m->dims[d];
    return rows;
}

/* Runs `row` over every innermost row of m's index space, in order. */
RT_PRIVATE void rt_bc_run(const rt_bcast *m, const bc_args *p, bc_row row)
{
    const long rows = bc_count_rows(m);
    if (rows < 0) /* a scalar */
        row(p, 0, 0, 0, 1, 0, 0);
    else
        bc_rows(m, p, row, 0, (size_t)rows);
}

typedef struct {
    const rt_bcast *m;
    const bc_args *p;
    bc_row row;
} bc_job;

static void bc_part_rows(void *ctx, size_t lo, size_t hi)
{
    const bc_job *j = ctx;
    bc_rows(j->m, j->p, j->row, lo, hi);
}

/* Elements [lo, hi) of a map that is one row. */
static void bc_part_elems(void *ctx, size_t lo, size_t hi)
{
    const bc_job *j = ctx;
    const int r = j->m->rank, sa = j->m->sa[r - 1], sb = j->m->sb[r - 1];
    j->row(j->p, (ptrdiff_t)lo, (ptrdiff_t)lo * sa, (ptrdiff_t)lo * sb,
           (int)(hi - lo), sa, sb);
}

/* rt_bc_run split over threads, for a row function whose elements are
 * independent: each writes its own output (not a sum over a broadcast
 * dim). Rows when there are several, else the one row's elements. */
RT_PRIVATE void rt_bc_run_split(const rt_bcast *m, const bc_args *p, bc_row row)
{
    const long rows = bc_count_rows(m);
    bc_job job;
    size_t n;
    if (rows <= 0) {
        rt_bc_run(m, p, row);
        return;
    }
    job.m = m;
    job.p = p;
    job.row = row;
    n = (size_t)m->dims[m->rank - 1];
    if (rows == 1)
        rt_parallel_for(n, 16, n, RT_PAR_CHEAP, bc_part_elems, &job);
    else
        rt_parallel_for((size_t)rows, 1, (size_t)rows * n, RT_PAR_CHEAP,
                        bc_part_rows, &job);
}

/* ---- sums over broadcast dims (rt_impl.h) -------------------------------- */

typedef struct {
    const int *dims;
    const int *const *st;
    int ns, target;
    ptrdiff_t wst[RT_MAX_RANK]; /* the walked tensor's (contiguous) strides */
    int kd[RT_MAX_RANK], nk;    /* kept dims: they number the entries */
    int rd[RT_MAX_RANK], nr;    /* reduced dims: summed over */
    float *grad;
    bc_term term;
    const bc_args *p;
    size_t chunks;              /* lanes: chunks of RT_SUM_LANES per group */
} sums_job;

/* The entries of a group of the last dim summed side by side: every term
 * of RT_SUM_LANES entries for one position of the reduced dims, in memory
 * order, each lane an rt_sum kept as arrays (the same blocks, the same
 * bits as one rt_sum per entry). */
#define RT_SUM_LANES 32

/* Offsets off[0..ns] of the entry numbered e by the kept dims a < nk
 * (the last kept dim fastest). */
static void sums_entry(const sums_job *j, size_t e, int nk, ptrdiff_t *off)
{
    int a, k;
    for (k = 0; k <= j->ns; k++)
        off[k] = 0;
    for (a = nk - 1; a >= 0; a--) {
        const int d = j->kd[a];
        const ptrdiff_t i = (ptrdiff_t)(e % (size_t)j->dims[d]);
        e /= (size_t)j->dims[d];
        off[0] += i * j->wst[d];
        for (k = 0; k < j->ns; k++)
            off[1 + k] += i * j->st[k][d];
    }
}

/* One step of the reduced dims' odometer; 0 when it wraps (done). */
static int sums_step(const sums_job *j, int *idx, ptrdiff_t *off)
{
    int a, k;
    for (a = j->nr - 1; a >= 0; a--) {
        const int d = j->rd[a];
        off[0] += j->wst[d];
        for (k = 0; k < j->ns; k++)
            off[1 + k] += j->st[k][d];
        if (++idx[a] < j->dims[d])
            return 1;
        idx[a] = 0;
        off[0] -= (ptrdiff_t)j->dims[d] * j->wst[d];
        for (k = 0; k < j->ns; k++)
            off[1 + k] -= (ptrdiff_t)j->dims[d] * j->st[k][d];
    }
    return 0;
}

/* Items [lo, hi): chunk c of group g is item g * chunks + c, lanes
 * [c * RT_SUM_LANES, ...) of the last dim. */
static void sums_lanes_part(void *ctx, size_t lo, size_t hi)
{
    const sums_job *j = ctx;
    const int ns = j->ns, last = j->kd[j->nk - 1];
    const size_t len = (size_t)j->dims[last];
    float part[RT_SUM_LANES];
    rt_sum acc[RT_SUM_LANES];
    int idx[RT_MAX_RANK];
    size_t item;
    for (item = lo; item < hi; item++) {
        const size_t j0 = item % j->chunks * RT_SUM_LANES;
        const int w = (int)(len - j0 < RT_SUM_LANES ? len - j0 : RT_SUM_LANES);
        ptrdiff_t off[4], lane[4];
        int a, k, l, n = 0;
        sums_entry(j, item / j->chunks, j->nk - 1, off);
        off[0] += (ptrdiff_t)j0 * j->wst[last];
        for (k = 0; k < ns; k++)
            off[1 + k] += (ptrdiff_t)j0 * j->st[k][last];
        for (a = 0; a < j->nr; a++)
            idx[a] = 0;
        for (l = 0; l < w; l++) {
            rt_sum_init(&acc[l]);
            part[l] = 0.0f;
        }
        do {
            if (j->term == NULL) { /* scale * dy, dy walked: lanes adjacent */
                const float *dy = j->p->dy + off[0], sc = j->p->scale;
                for (l = 0; l < w; l++)
                    part[l] += sc * dy[l];
            } else {
                for (l = 0; l < w; l++) {
                    lane[0] = off[0] + (ptrdiff_t)l * j->wst[last];
                    for (k = 0; k < ns; k++)
                        lane[1 + k] = off[1 + k] + (ptrdiff_t)l * j->st[k][last];
                    part[l] += j->term(j->p, lane);
                }
            }
            if (++n == RT_SUM_BLOCK) {
                for (l = 0; l < w; l++) {
                    rt_sum_fold(&acc[l], part[l]);
                    part[l] = 0.0f;
                }
                n = 0;
            }
        } while (sums_step(j, idx, off));
        for (l = 0; l < w; l++) {
            acc[l].part = part[l];
            j->grad[off[1 + j->target] +
                    (ptrdiff_t)l * j->st[j->target][last]] +=
                rt_sum_value(&acc[l]);
        }
    }
}

/* Entries [lo, hi), numbered by the kept dims' digits, the last fastest;
 * each the rt_sum of its terms, the reduced dims walked with an odometer
 * in the walk's order. */
static void sums_part(void *ctx, size_t lo, size_t hi)
{
    const sums_job *j = ctx;
    sums_job outer = *j; /* the reduced dims but the last */
    int idx[RT_MAX_RANK], inner = 0;
    size_t e;
    if (j->term == NULL && j->nr > 0 && j->rd[j->nr - 1] == j->nk + j->nr - 1)
        inner = j->dims[j->rd[--outer.nr]];
    for (e = lo; e < hi; e++) {
        ptrdiff_t off[4];
        int a;
        rt_sum s;
        sums_entry(j, e, j->nk, off);
        for (a = 0; a < j->nr; a++)
            idx[a] = 0;
        rt_sum_init(&s);
        /* the odometer comes back to the entry's own offsets */
        if (inner > 0) { /* scale * dy, the last dim reduced: a plain loop */
            const float sc = j->p->scale;
            do {
                const float *dy = j->p->dy + off[0];
                int i;
                for (i = 0; i < inner; i++)
                    rt_sum_add(&s, sc * dy[i]);
            } while (sums_step(&outer, idx, off));
        } else {
            do
                rt_sum_add(&s, j->term != NULL
                                   ? j->term(j->p, off)
                                   : j->p->scale * j->p->dy[off[0]]);
            while (sums_step(j, idx, off));
        }
        j->grad[off[1 + j->target]] += rt_sum_value(&s);
    }
}

RT_PRIVATE void rt_bc_sums(int rank, const int *dims, const int *const *st,
                           int ns, int target, float *grad, bc_term term,
                           const bc_args *p)
{
    sums_job j;
    size_t entries = 1, total = 1;
    int d;
    for (d = 0; d < rank; d++)
        if (dims[d] <= 0)
            return; /* nothing to add */
    j.dims = dims;
    j.st = st;
    j.ns = ns;
    j.target = target;
    j.grad = grad;
    j.term = term;
    j.p = p;
    j.nk = j.nr = 0;
    for (d = rank - 1; d >= 0; d--) {
        j.wst[d] = (ptrdiff_t)total;
        total *= (size_t)dims[d];
    }
    for (d = 0; d < rank; d++) {
        if (dims[d] > 1 && st[target][d] == 0) {
            j.rd[j.nr++] = d;
        } else {
            j.kd[j.nk++] = d;
            entries *= (size_t)dims[d];
        }
    }
    if (j.nk > 0 && j.kd[j.nk - 1] == rank - 1 && dims[rank - 1] > 1 &&
        j.nr > 0) {
        /* the last dim is kept: its entries side by side, in memory order */
        const size_t len = (size_t)dims[rank - 1];
        j.chunks = (len + RT_SUM_LANES - 1) / RT_SUM_LANES;
        rt_parallel_for(entries / len * j.chunks, 1, total, RT_PAR_CHEAP,
                        sums_lanes_part, &j);
        return;
    }
    rt_parallel_for(entries, 1, total, RT_PAR_CHEAP, sums_part, &j);
}

/* Whether a gradient written through strides s is a sum over some dim
 * (stride 0 along a dim longer than 1): then its elements are not
 * independent and the backward stays on one thread. */
static int bc_sums(const rt_bcast *m, const int *s)
{
    int d;
    for (d = 0; d < m->rank; d++)
        if (m->dims[d] > 1 && s[d] == 0)
            return 1;
    return 0;
}

/* Forward rows. The unit-stride branch is the plain loop that equal shapes
 * (collapsed by the compiler to rank 1) run, and that vectorises. */
#define RT_BINARY_ROW(name, OP)                                              \
    static void name(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,           \
                     ptrdiff_t ob, int n, int sa, int sb)                    \
    {                                                                        \
        float *y = p->y + oy;                                                \
        const float *a = p->a + oa, *b = p->b + ob;                          \
        int j;                                                               \
        if (sa == 1 && sb == 1) {                                            \
            for (j = 0; j < n; j++)                                          \
                y[j] = a[j] OP b[j];                                         \
        } else {                                                             \
            for (j = 0; j < n; j++)                                          \
                y[j] = a[(ptrdiff_t)j * sa] OP b[(ptrdiff_t)j * sb];         \
        }                                                                    \
    }

RT_BINARY_ROW(add_row, +)
RT_BINARY_ROW(sub_row, -)
RT_BINARY_ROW(mul_row, *)
RT_BINARY_ROW(div_row, /)

static void binary(float *y, const float *a, const float *b,
                   const rt_bcast *m, bc_row row)
{
    bc_args p = BC_ARGS_NONE;
    p.y = y;
    p.a = a;
    p.b = b;
    rt_bc_run_split(m, &p, row);
}

void rt_add_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, add_row);
}

void rt_sub_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, sub_row);
}

void rt_mul_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, mul_row);
}

void rt_div_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, div_row);
}

/* Backward rows. A stride of 0 makes every element of the row land on the
 * same gradient entry, which is exactly the sum over the broadcast dim.
 * Each update reads and writes memory afresh, so da == db (and a == b, as in
 * Mul(d, d)) simply accumulates both contributions. */
static void add_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        if (p->da != NULL)
            p->da[oa + (ptrdiff_t)j * sa] += dy[j];
        if (p->db != NULL)
            p->db[ob + (ptrdiff_t)j * sb] += p->scale * dy[j];
    }
}

/* The terms of each gradient's sum over broadcast dims, the same values
 * the rows add (off: dy's, a's, b's offsets). Add's are NULL: scale * dy,
 * rt_bc_sums's own loop. */

static float mul_da_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->dy[off[0]] * p->b[off[2]];
}

static float mul_db_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->dy[off[0]] * p->a[off[1]];
}

static float div_da_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->dy[off[0]] / p->b[off[2]];
}

static float div_db_term(const bc_args *p, const ptrdiff_t *off)
{
    const float q = p->dy[off[0]] / p->b[off[2]];
    return -(q * (p->a[off[1]] / p->b[off[2]]));
}

static void mul_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        if (p->da != NULL)
            p->da[ia] += dy[j] * p->b[ib];
        if (p->db != NULL)
            p->db[ib] += dy[j] * p->a[ia];
    }
}

/* d(a/b)/db = -a/b^2, computed as (dy/b) * (a/b) so that b*b cannot
 * overflow or underflow on its own. */
static void div_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float q = dy[j] / p->b[ib];
        if (p->da != NULL)
            p->da[ia] += q;
        if (p->db != NULL)
            p->db[ib] -= q * (p->a[ia] / p->b[ib]);
    }
}

/* A gradient that is a sum over broadcast dims is summed entry by entry
 * (rt_bc_sums, with the op's term); one that is not, row by row, split
 * over the threads. */
static void binary_back(float *da, float *db, const float *dy, const float *a,
                        const float *b, const rt_bcast *m, float scale,
                        bc_row row, bc_term da_term, bc_term db_term)
{
    bc_args p = BC_ARGS_NONE;
    const int *const st[2] = {m->sa, m->sb};
    if (da == NULL && db == NULL)
        return;
    p.da = da;
    p.db = db;
    p.dy = dy;
    p.a = a;
    p.b = b;
    p.scale = scale;
    if (da != NULL && bc_sums(m, m->sa)) {
        bc_args one = p; /* da's term is never scaled (Sub's db's is) */
        one.scale = 1.0f;
        rt_bc_sums(m->rank, m->dims, st, 2, 0, da, da_term, &one);
        p.da = NULL;
    }
    if (db != NULL && bc_sums(m, m->sb)) {
        rt_bc_sums(m->rank, m->dims, st, 2, 1, db, db_term, &p);
        p.db = NULL;
    }
    if (p.da != NULL || p.db != NULL)
        rt_bc_run_split(m, &p, row);
}

void rt_add_backward(float *da, float *db, const float *dy, const rt_bcast *m)
{
    binary_back(da, db, dy, NULL, NULL, m, 1.0f, add_back_row, NULL, NULL);
}

/* Elements of an element count: the product of the map's dims where the
 * stride is not 0 (a broadcast input's own size). */
static size_t bc_numel(const rt_bcast *m, const int *stride)
{
    size_t n = 1;
    int d;
    for (d = 0; d < m->rank; d++)
        if (stride[d] != 0)
            n *= (size_t)m->dims[d];
    return n;
}

/* Written, an input of the output's shape gets a copy of dy (nothing at
 * all when it is dy's own buffer: the gradient written in place), and a
 * broadcast one is zeroed and summed into; the rest add as before. */
static float *add_write(float *d, const float *dy, const rt_bcast *m,
                        const int *stride)
{
    if (bc_sums(m, stride)) {
        rt_zero(d, bc_numel(m, stride));
        return d;
    }
    if (d != dy)
        rt_copy(d, dy, bc_numel(m, stride));
    return NULL;
}

void rt_add_backward_set(float *da, float *db, const float *dy,
                         const rt_bcast *m, unsigned set)
{
    if (da != NULL && (set & 1u))
        da = add_write(da, dy, m, m->sa);
    if (db != NULL && (set & 2u))
        db = add_write(db, dy, m, m->sb);
    rt_add_backward(da, db, dy, m);
}

/* Sub is Add with the second gradient negated (scale -1). */
void rt_sub_backward(float *da, float *db, const float *dy, const rt_bcast *m)
{
    binary_back(da, db, dy, NULL, NULL, m, -1.0f, add_back_row, NULL, NULL);
}

void rt_mul_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, mul_back_row, mul_da_term,
                mul_db_term);
}

void rt_div_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, div_back_row, div_da_term,
                div_db_term);
}

/* ---- Mod, fmod=1 (issue 25) ------------------------------------------------------ */

static void fmod_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                     ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *a = p->a + oa, *b = p->b + ob;
    int j;
    for (j = 0; j < n; j++)
        y[j] = fmodf(a[(ptrdiff_t)j * sa], b[(ptrdiff_t)j * sb]);
}

void rt_fmod_forward(float *y, const float *a, const float *b,
                     const rt_bcast *m)
{
    binary(y, a, b, m, fmod_row);
}

/* n = trunc(a / b) as fmod takes it: a - fmodf(a, b) is n b (fmodf is
 * exact), and its quotient by b rounds to n while n < 2^23; a / b itself
 * may round up to the next integer and give the wrong n. */
static float fmod_quotient(float a, float b)
{
    return rintf((a - fmodf(a, b)) / b);
}

static float fmod_da_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->dy[off[0]];
}

static float fmod_db_term(const bc_args *p, const ptrdiff_t *off)
{
    return -(fmod_quotient(p->a[off[1]], p->b[off[2]]) * p->dy[off[0]]);
}

static void fmod_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                          ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        if (p->da != NULL)
            p->da[ia] += dy[j];
        if (p->db != NULL)
            p->db[ib] -= fmod_quotient(p->a[ia], p->b[ib]) * dy[j];
    }
}

void rt_fmod_backward(float *da, float *db, const float *dy, const float *a,
                      const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, fmod_back_row, fmod_da_term,
                fmod_db_term);
}

/* a^b; b == 2 (x**2 as torch exports it) as one exact product. */
static float pow1(float a, float b)
{
    return b == 2.0f ? a * a : powf(a, b);
}

static void pow_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                    ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *a = p->a + oa, *b = p->b + ob;
    int j;
    for (j = 0; j < n; j++)
        y[j] = pow1(a[(ptrdiff_t)j * sa], b[(ptrdiff_t)j * sb]);
}

void rt_pow_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, pow_row);
}

/* The two special cases keep 0 * inf from making a NaN: b == 0 (b * a^-1
 * at a == 0) and a == 0 with b >= 0 (a^b * ln a). */
static void pow_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float a = p->a[ia], b = p->b[ib];
        if (p->da != NULL && b != 0.0f)
            p->da[ia] += dy[j] * (b == 2.0f ? 2.0f * a : b * powf(a, b - 1.0f));
        if (p->db != NULL && !(a == 0.0f && b >= 0.0f))
            p->db[ib] += dy[j] * pow1(a, b) * logf(a);
    }
}

static float pow_da_term(const bc_args *p, const ptrdiff_t *off)
{
    const float a = p->a[off[1]], b = p->b[off[2]];
    if (b == 0.0f)
        return 0.0f;
    return p->dy[off[0]] * (b == 2.0f ? 2.0f * a : b * powf(a, b - 1.0f));
}

static float pow_db_term(const bc_args *p, const ptrdiff_t *off)
{
    const float a = p->a[off[1]], b = p->b[off[2]];
    if (a == 0.0f && b >= 0.0f)
        return 0.0f;
    return p->dy[off[0]] * pow1(a, b) * logf(a);
}

void rt_pow_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, pow_back_row, pow_da_term,
                pow_db_term);
}

/* ---- Max, Min and PRelu ----------------------------------------------------- */

/* Max and Min of two: a NaN in either gives NaN (torch.maximum). The sign
 * (p->scale) picks max (1) or min (-1). */
static void extreme2_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *a = p->a + oa, *b = p->b + ob;
    int j;
    for (j = 0; j < n; j++) {
        const float u = a[(ptrdiff_t)j * sa], v = b[(ptrdiff_t)j * sb];
        if (u != u || v != v)
            y[j] = u + v;
        else
            y[j] = (p->scale > 0.0f ? u >= v : u <= v) ? u : v;
    }
}

static void extreme2(float *y, const float *a, const float *b,
                     const rt_bcast *m, float sign)
{
    bc_args p = BC_ARGS_NONE;
    p.y = y;
    p.a = a;
    p.b = b;
    p.scale = sign;
    rt_bc_run_split(m, &p, extreme2_row);
}

void rt_max_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    extreme2(y, a, b, m, 1.0f);
}

void rt_min_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    extreme2(y, a, b, m, -1.0f);
}

/* The gradient goes to the input that was taken; a tie shares it half
 * and half, as torch.maximum's and torch.minimum's backward do. */
static float share(float u, float v, int a_wins)
{
    return u == v ? 0.5f : a_wins ? 1.0f : 0.0f;
}

static void extreme2_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                              ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float u = p->a[ia], v = p->b[ib];
        const int max = p->scale > 0.0f;
        if (p->da != NULL)
            p->da[ia] += share(u, v, max ? u > v : u < v) * dy[j];
        if (p->db != NULL)
            p->db[ib] += share(u, v, max ? v > u : v < u) * dy[j];
    }
}

/* The terms a broadcast sum adds (rt_bc_sums; off: dy's, a's, b's
 * offsets), the row's rule one element at a time. */
static float max_da_term(const bc_args *p, const ptrdiff_t *off)
{
    const float u = p->a[off[1]], v = p->b[off[2]];
    return share(u, v, u > v) * p->dy[off[0]];
}

static float max_db_term(const bc_args *p, const ptrdiff_t *off)
{
    const float u = p->a[off[1]], v = p->b[off[2]];
    return share(u, v, v > u) * p->dy[off[0]];
}

static float min_da_term(const bc_args *p, const ptrdiff_t *off)
{
    const float u = p->a[off[1]], v = p->b[off[2]];
    return share(u, v, u < v) * p->dy[off[0]];
}

static float min_db_term(const bc_args *p, const ptrdiff_t *off)
{
    const float u = p->a[off[1]], v = p->b[off[2]];
    return share(u, v, v < u) * p->dy[off[0]];
}

void rt_max_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, extreme2_back_row, max_da_term,
                max_db_term);
}

void rt_min_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, -1.0f, extreme2_back_row, min_da_term,
                min_db_term);
}

/* PRelu: x where x > 0, else slope * x (the slope broadcast to x). */
static void prelu_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                      ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *x = p->a + oa, *s = p->b + ob;
    int j;
    for (j = 0; j < n; j++) {
        const float v = x[(ptrdiff_t)j * sa];
        y[j] = v > 0.0f ? v : s[(ptrdiff_t)j * sb] * v;
    }
}

void rt_prelu_forward(float *y, const float *x, const float *slope,
                      const rt_bcast *m)
{
    binary(y, x, slope, m, prelu_row);
}

/* dx = dy where x > 0, else dy * slope; dslope = dy * x where x <= 0
 * (summed over the dims the slope is broadcast along). The slope is read
 * only for dx. */
static void prelu_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                           ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float v = p->a[ia];
        if (p->da != NULL)
            p->da[ia] += v > 0.0f ? dy[j] : dy[j] * p->b[ib];
        if (p->db != NULL && !(v > 0.0f))
            p->db[ib] += dy[j] * v;
    }
}

static float prelu_dx_term(const bc_args *p, const ptrdiff_t *off)
{
    const float dy = p->dy[off[0]];
    return p->a[off[1]] > 0.0f ? dy : dy * p->b[off[2]];
}

static float prelu_dslope_term(const bc_args *p, const ptrdiff_t *off)
{
    const float v = p->a[off[1]];
    return v > 0.0f ? 0.0f : p->dy[off[0]] * v;
}

void rt_prelu_backward(float *dx, float *dslope, const float *dy,
                       const float *x, const float *slope, const rt_bcast *m)
{
    binary_back(dx, dslope, dy, x, slope, m, 1.0f, prelu_back_row,
                prelu_dx_term, prelu_dslope_term);
}

/* Elements of a Where's output, and one step of its odometer: idx and the
 * offsets off[0..2] of cond, a and b move to the next element of y
 * (integer.c's Where with an int64 condition walks the same). */
RT_PRIVATE size_t rt_where_count(const rt_where *m)
{
    size_t n = 1;
    int d;
    for (d = 0; d < m->rank; d++)
        n *= m->dims[d] > 0 ? (size_t)m->dims[d] : 0;
    return n;
}

RT_PRIVATE void rt_where_step(const rt_where *m, int *idx, ptrdiff_t *off)
{
    int d;
    for (d = m->rank - 1; d >= 0; d--) {
        off[0] += m->sc[d];
        off[1] += m->sa[d];
        off[2] += m->sb[d];
        if (++idx[d] < m->dims[d])
            return;
        idx[d] = 0;
        off[0] -= (ptrdiff_t)m->dims[d] * m->sc[d];
        off[1] -= (ptrdiff_t)m->dims[d] * m->sa[d];
        off[2] -= (ptrdiff_t)m->dims[d] * m->sb[d];
    }
}

void rt_where_forward(float *y, const float *cond, const float *a,
                      const float *b, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = rt_where_count(m);
    for (i = 0; i < n; i++) {
        y[i] = cond[off[0]] != 0.0f ? a[off[1]] : b[off[2]];
        rt_where_step(m, idx, off);
    }
}

/* Where's terms: off[1] is cond's offset (the a of bc_args). */
static float where_da_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->a[off[1]] != 0.0f ? p->dy[off[0]] : 0.0f;
}

static float where_db_term(const bc_args *p, const ptrdiff_t *off)
{
    return p->a[off[1]] != 0.0f ? 0.0f : p->dy[off[0]];
}

/* Whether strides s sum over some dim of a Where's map. */
static int where_sums(const rt_where *m, const int *s)
{
    int d;
    for (d = 0; d < m->rank; d++)
        if (m->dims[d] > 1 && s[d] == 0)
            return 1;
    return 0;
}

void rt_where_backward(float *da, float *db, const float *dy,
                       const float *cond, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = rt_where_count(m);
    bc_args p = BC_ARGS_NONE;
    const int *const st[3] = {m->sc, m->sa, m->sb};
    p.a = cond;
    p.dy = dy;
    if (da != NULL && where_sums(m, m->sa)) {
        rt_bc_sums(m->rank, m->dims, st, 3, 1, da, where_da_term, &p);
        da = NULL;
    }
    if (db != NULL && where_sums(m, m->sb)) {
        rt_bc_sums(m->rank, m->dims, st, 3, 2, db, where_db_term, &p);
        db = NULL;
    }
    if (da == NULL && db == NULL)
        return;
    for (i = 0; i < n; i++) {
        if (cond[off[0]] != 0.0f) {
            if (da != NULL)
                da[off[1]] += dy[i];
        } else if (db != NULL) {
            db[off[2]] += dy[i];
        }
        rt_where_step(m, idx, off);
    }
}

/* ---- copies along a map: Expand, Transpose, Slice, float32 and int64 ------- */

/* Rows of rt_bc_copy: y[j] = x[j * sa], float32 or int64 (one row
 * function each, so that the float rows test nothing per row). */
static void copy_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                     ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *x = p->a + oa;
    int j;
    (void)ob;
    (void)sb;
    for (j = 0; j < n; j++)
        y[j] = x[(ptrdiff_t)j * sa];
}

static void copy_row_i64(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    int64_t *y = p->iy + oy;
    const int64_t *x = p->ia + oa;
    int j;
    (void)ob;
    (void)sb;
    for (j = 0; j < n; j++)
        y[j] = x[(ptrdiff_t)j * sa];
}

RT_PRIVATE void rt_bc_copy(const rt_bcast *m, float *y, const float *x,
                           int64_t *iy, const int64_t *ix)
{
    bc_args p = BC_ARGS_NONE;
    p.y = y;
    p.a = x;
    p.iy = iy;
    p.ia = ix;
    rt_bc_run_split(m, &p, iy != NULL ? copy_row_i64 : copy_row);
}

void rt_expand_forward(float *y, const float *x, const rt_bcast *m)
{
    rt_bc_copy(m, y, x, NULL, NULL);
}

void rt_expand_i64_forward(int64_t *y, const int64_t *x, const rt_bcast *m)
{
    rt_bc_copy(m, NULL, NULL, y, x);
}

/* Add's backward row with no second gradient: a stride of 0 sums. */
void rt_expand_backward(float *dx, const float *dy, const rt_bcast *m)
{
    binary_back(dx, NULL, dy, NULL, NULL, m, 1.0f, add_back_row, NULL, NULL);
}
