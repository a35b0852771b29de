/*
 * cost.c: what a recompute costs, in time.
 *
 * The budget solver (solve.c) picks the plan whose recomputes take the
 * least estimated time. One run of a node is priced as
 *
 *     seconds = flops / flop_rate + bytes / bytes_per_s
 *
 * flops: the op table's count (OpInfo.flops); flop_rate: gemm_flops_per_s
 * for the ops that run rt_sgemm (Gemm, MatMul, Conv, Attention), else
 * other_flops_per_s; bytes: every input read and every output written,
 * once each (float32 4 bytes an element, int64 8). So a Transpose, a
 * Concat or a Slice, which do no arithmetic, cost the bytes they copy; a
 * view (an alias row: Reshape, Flatten, ...) is a pointer and costs
 * nothing, as it holds no buffer of its own. The model ignores caches,
 * overlap of arithmetic with memory traffic and threads: it is a price
 * that makes copies cost something and keeps GEMMs dear, not a profiler.
 *
 * Costs are whole picoseconds, each node's rounded once (a node that does
 * anything costs at least 1): their sums are then exact in a double
 * whatever the order they are added in, so the solver's components, the
 * schedule's walk and the tests' enumerations agree to the bit, and ties
 * between plans stay ties, as with integer FLOPs.
 *
 * The rates come from `remat calibrate` (rates_calibrate: the runtime's own
 * kernels, timed in this process), stored in a small `key value` file
 * (rates_path); without one, rates_builtin's constants. docs/cost-model.md
 * has the file format.
 */
#define _DEFAULT_SOURCE     /* clock_gettime */
#include "../remat.h"
#include "../../runtime/remat_rt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* `remat calibrate` on the development machine (x86-64, 2 cores shared
 * with other builds; the compiler's own runtime: portable GEMM at -O2, no
 * BLAS, one thread), four runs of 5.2 to 5.8e9, 6.1 to 6.3e8 and 3.1 to
 * 3.2e10, rounded; see docs/cost-model.md. */
static const Rates builtin = {5.5e9, 6.2e8, 3.1e10};

const Rates *rates_builtin(void)
{
    return &builtin;
}

/* The ops whose FLOPs run through rt_sgemm (their rows' gemm_rate) go at
 * the GEMM's rate, every other op's at the other rate. */
static double flop_rate_of(const Rates *rt, OpKind op)
{
    return op_table[op].gemm_rate ? rt->gemm_flops_per_s
                                  : rt->other_flops_per_s;
}

/* Seconds as whole picoseconds, at least 1 for any work. */
static double picoseconds(double seconds)
{
    double ps = nearbyint(seconds * PS_PER_S);
    return ps < 1 ? 1 : ps;
}

/* The bytes n reads, and those it writes. */
static void node_bytes(const Graph *g, const Node *n, double *in, double *out)
{
    *in = *out = 0;
    for (int i = 0; i < n->nin; i++)
        *in += tensor_bytes(&g->tensors[n->in[i]]);
    for (int o = 0; o < n->nout; o++)
        *out += tensor_bytes(&g->tensors[n->out[o]]);
}

double node_cost(const Rates *rt, const Graph *g, const Node *n)
{
    return output_cost(rt, g, n, -1);
}

/* o < 0: the whole node. A node of several outputs (Split) is rebuilt
 * whole, but the solver decides each output alone: each rebuilt output is
 * charged its share of the node, in proportion to its bytes. */
double output_cost(const Rates *rt, const Graph *g, const Node *n, int o)
{
    if (op_table[n->op].alias)
        return 0;
    double in, out;
    node_bytes(g, n, &in, &out);
    double share = o < 0 || n->nout == 1 ? 1
                   : out > 0 ? tensor_bytes(&g->tensors[n->out[o]]) / out : 0;
    return picoseconds(share * (op_table[n->op].flops(g, n) /
                                flop_rate_of(rt, n->op) +
                                (in + out) / rt->bytes_per_s));
}

/* ---- the rates file -------------------------------------------------------- */

static const char *const keys[] = {"gemm_flops_per_s", "other_flops_per_s",
                                   "bytes_per_s"};
#define NKEYS 3

static double *field_of(Rates *rt, int k)
{
    return k == 0 ? &rt->gemm_flops_per_s
           : k == 1 ? &rt->other_flops_per_s : &rt->bytes_per_s;
}

static double rate_of(const Rates *rt, int k)
{
    return k == 0 ? rt->gemm_flops_per_s
           : k == 1 ? rt->other_flops_per_s : rt->bytes_per_s;
}

const char *rates_path(Ctx *c)
{
    const char *env = getenv("REMAT_RATES");
    if (env && *env)
        return strcmp(env, "builtin") == 0 ? NULL : env;
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        return ctx_printf(c, "%s/remat/rates", xdg);
    if (home && *home)
        return ctx_printf(c, "%s/.config/remat/rates", home);
    return NULL;
}

/* One `key value` line (comments and blank lines already skipped). */
static int parse_line(Ctx *c, const char *file, int line, char *s, Rates *rt,
                      int *seen)
{
    char *key = strtok(s, " \t\r\n"), *val = strtok(NULL, " \t\r\n");
    char *extra = strtok(NULL, " \t\r\n");
    int k = 0;
    while (k < NKEYS && strcmp(key, keys[k]) != 0)
        k++;
    if (k == NKEYS)
        return ctx_error(c, file, line, "unknown key '%s'%s; the keys are "
                         "gemm_flops_per_s, other_flops_per_s and bytes_per_s",
                         key, did_you_mean(c, key, keys, NKEYS));
    if (seen[k])
        return ctx_error(c, file, line, "'%s' given twice; give each key "
                         "once", key);
    char *end = NULL;
    errno = 0;
    double v = val ? strtod(val, &end) : 0;
    if (!val || *end || errno || !isfinite(v) || v <= 0 || extra)
        return ctx_error(c, file, line, "'%s' needs one positive number "
                         "after it (e.g. '%s 1.5e9'), got '%s%s%s'", key, key,
                         val ? val : "", extra ? " " : "", extra ? extra : "");
    *field_of(rt, k) = v;
    seen[k] = 1;
    return 0;
}

int rates_read(Ctx *c, const char *file, Rates *rt)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return ctx_error(c, file, 0, "cannot open: %s", strerror(errno));
    char line[512];
    int n = 0, seen[NKEYS] = {0}, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        n++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n')
            rc = ctx_error(c, file, n, "line longer than %d characters; a "
                           "line is 'key value'", (int)sizeof line - 2);
        char *s = line + strspn(line, " \t\r\n");
        if (rc == 0 && *s && *s != '#')
            rc = parse_line(c, file, n, s, rt, seen);
    }
    if (rc == 0 && ferror(f))
        rc = ctx_error(c, file, 0, "cannot read: %s", strerror(errno));
    fclose(f);
    for (int k = 0; rc == 0 && k < NKEYS; k++)
        if (!seen[k])
            rc = ctx_error(c, file, n, "no '%s' line; the file needs "
                           "gemm_flops_per_s, other_flops_per_s and "
                           "bytes_per_s (remat calibrate writes one)", keys[k]);
    return rc;
}

int rates_load(Ctx *c, Rates *rt, const char **from)
{
    *rt = builtin;
    *from = "builtin";
    const char *path = rates_path(c);
    if (!path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f && errno == ENOENT)
        return 0;           /* never calibrated: the built-in rates */
    if (f)
        fclose(f);
    *from = path;
    return rates_read(c, path, rt);
}

void rates_text(Buf *b, const Rates *rt)
{
    buf_printf(b, "# remat's cost model: rates for pricing recomputes "
               "(docs/cost-model.md)\n# key value; written by remat "
               "calibrate, may be edited by hand\n");
    for (int k = 0; k < NKEYS; k++)
        buf_printf(b, "%s %.6g\n", keys[k], rate_of(rt, k));
}

/* mkdir -p of the folder a file goes in. */
static int make_dirs(Ctx *c, const char *file)
{
    char *dir = ctx_strdup(c, path_dir(c, file));
    for (char *p = dir + 1; ; p++) {
        char keep = *p;
        if (keep != '/' && keep != '\0')
            continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return ctx_error(c, dir, 0, "cannot make the folder: %s",
                             strerror(errno));
        *p = keep;
        if (!keep)
            return 0;
    }
}

int rates_write(Ctx *c, const char *path, const Rates *rt)
{
    Buf b;
    buf_init(&b, c);
    rates_text(&b, rt);
    return make_dirs(c, path) || buf_write_file(&b, path);
}

/* ---- calibrate: the runtime's kernels, timed ------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define REPS 20
#define N_POINTWISE (1 << 20)   /* floats: 4 MiB, past most L2 caches */
#define N_GEMM 192

typedef enum { K_COPY, K_RELU, K_TANH, K_GEMM } Kernel;

static void run_kernel(Kernel k, float *y, const float *x)
{
    switch (k) {
    case K_COPY: rt_copy(y, x, N_POINTWISE); break;
    case K_RELU: rt_relu_forward(y, x, N_POINTWISE); break;
    case K_TANH: rt_tanh_forward(y, x, N_POINTWISE); break;
    case K_GEMM:
        rt_sgemm(0, 0, N_GEMM, N_GEMM, N_GEMM, 1.0f, x, N_GEMM,
                 x + N_GEMM * N_GEMM, N_GEMM, 0.0f, y, N_GEMM);
        break;
    }
}

/* The best of REPS runs, seconds. */
static double best_time(Kernel k, float *y, const float *x)
{
    double best = HUGE_VAL;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        run_kernel(k, y, x);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best > 1e-9 ? best : 1e-9;
}

/* The op table's FLOPs of op over n floats (a one-input pointwise op). */
static double table_flops(OpKind op, long n)
{
    Tensor t = {.numel = n, .rank = 1, .dims = {n}};
    Graph g = {.tensors = &t, .ntensors = 1};
    Node nd = {.op = op, .row = &op_table[op], .nin = 1, .nout = 1};
    return op_table[op].flops(&g, &nd);
}

/* flops over what is left of t once bytes' time at bytes_per_s is taken
 * off (at least a tenth of t: the model is additive, a kernel is not). */
static double flop_rate(double flops, double t, double bytes, double bps)
{
    double left = t - bytes / bps;
    return flops / (left > 0.1 * t ? left : 0.1 * t);
}

int rates_calibrate(Ctx *c, Rates *rt)
{
    float *x = ctx_alloc(c, sizeof(float) * N_POINTWISE);
    float *y = ctx_alloc(c, sizeof(float) * N_POINTWISE);
    for (long i = 0; i < N_POINTWISE; i++)
        x[i] = (float)((i % 1000) - 500) / 250.0f;
    double n = N_POINTWISE, moved = 2 * 4 * n;     /* read and write */
    rt->bytes_per_s = moved / best_time(K_COPY, y, x);
    double t_relu = best_time(K_RELU, y, x), t_tanh = best_time(K_TANH, y, x);
    double f_pw = table_flops(OP_RELU, N_POINTWISE) +
                  table_flops(OP_TANH, N_POINTWISE);
    rt->other_flops_per_s = flop_rate(f_pw, t_relu + t_tanh, 2 * moved,
                                      rt->bytes_per_s);
    double m = N_GEMM, gemm_bytes = 3 * 4 * m * m;
    rt->gemm_flops_per_s = flop_rate(2 * m * m * m, best_time(K_GEMM, y, x),
                                     gemm_bytes, rt->bytes_per_s);
    return 0;
}
