/*
 * gradcheck.c: a generated model's gradients against central finite
 * differences of its own forward.
 *
 * The forward function and the backward share no code path but the forward
 * kernels, so a wrong backward (a missing term, a transposed GEMM, a wrong
 * broadcast sum) shows up as a disagreement. The model is float32, so each
 * check is chosen to have signal well above float rounding:
 *   - along the gradient's own direction, per parameter tensor: the
 *     difference quotient must equal |g| (catches scale and sign errors);
 *   - along a random direction, per tensor;
 *   - at single elements: the two with the largest |g| and two at random.
 * Errors are relative to the tensor's gradient norm (max norm for elements).
 * The loss differences are taken in double from float losses. Measured on
 * mlp12: direction errors up to ~4e-3, element errors up to ~2e-2 (float
 * rounding of a mean over 8192 squares, against a step on one element);
 * a 10% error in a gradient must fail. This is the coarse, independent
 * check; tests/ref/reference.py is the precise one (torch, float64).
 *
 * Links against a generated model through `rt_trainer_model`, like the
 * trainer. Prints one line per tensor and exits 1 if any check exceeds its
 * tolerance.
 */
#define _POSIX_C_SOURCE 200809L
#include "remat_rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const rt_model *const rt_trainer_model;

static const rt_model *M;
static float *params, *inputs, *grads, *scratch_grads;
static int64_t *ints;
static void *arena;
/* train_step updated a parameter in place: the model has BatchNormalization,
 * which normalizes with the batch's statistics in training and with the
 * running ones in inference */
static int updates;

#define SEED 7

/* The loss as the gradients saw it: the forward (inference) function, or,
 * for a model with Dropout or BatchNormalization, train_step's
 * training-mode forward with the same masks (same seed and step); the
 * running statistics it updates again do not enter that loss. */
static double loss_at(void)
{
    if (M->n_dropouts || updates)
        return M->train_step(params, inputs, ints, NULL, scratch_grads, SEED,
                             0, arena);
    return M->forward(params, inputs, ints, NULL, arena);
}

/* (L(p + h d) - L(p - h d)) / 2h over one tensor's elements. */
static double central(float *p, const double *d, size_t n, double h)
{
    float *keep = malloc(n * sizeof *keep);
    memcpy(keep, p, n * sizeof *keep);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(keep[i] + h * d[i]);
    double up = loss_at();
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(keep[i] - h * d[i]);
    double down = loss_at();
    /* the step actually taken, after rounding to float */
    memcpy(p, keep, n * sizeof *keep);
    free(keep);
    return (up - down) / (2 * h);
}

/* Richardson's extrapolation of two central differences cancels the h^2
 * term, so curvature (Div, Tanh, Sigmoid on small graphs) does not mask the
 * comparison while the step stays large against float rounding. */
static double richardson(float *p, const double *d, size_t n, double h)
{
    return (4 * central(p, d, n, h / 2) - central(p, d, n, h)) / 3;
}

/* The error of the estimate closest to `expect` over steps 1e-1, 1e-2 and
 * 1e-3: a large step is spoiled by a Relu kink within reach, a small one by
 * float rounding. A wrong gradient disagrees at every step (the --corrupt
 * self-test below checks that a 10% error is caught). */
static double directional_err(float *p, const double *d, size_t n,
                              double expect)
{
    double best = INFINITY;
    for (double h = 1e-1; h > 5e-4; h /= 10) {
        double e = fabs(richardson(p, d, n, h) - expect);
        best = e < best ? e : best;
    }
    return best;
}

static double dot(const float *g, const double *d, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * d[i];
    return s;
}

static double norm2(const float *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    return sqrt(s);
}

typedef struct {
    double dir, elem;       /* worst direction and element errors */
} Errors;

static Errors check_tensor(const rt_tensor_info *t, uint64_t seed)
{
    Errors r = {0, 0};
    size_t n = t->count;
    float *p = params + t->offset, *g = grads + t->grad_offset;
    double *d = calloc(n, sizeof *d), gn = norm2(g, n);
    if (gn == 0) {
        free(d);
        return r;
    }
    /* the gradient's direction */
    for (size_t i = 0; i < n; i++)
        d[i] = g[i] / gn;
    r.dir = directional_err(p, d, n, gn) / gn;
    /* a random direction */
    double dn = 0;
    for (size_t i = 0; i < n; i++) {
        d[i] = rt_rand_uniform(seed, 77, i) - 0.5;
        dn += d[i] * d[i];
    }
    for (size_t i = 0; i < n; i++)
        d[i] /= sqrt(dn);
    double e = directional_err(p, d, n, dot(g, d, n)) / gn;
    r.dir = e > r.dir ? e : r.dir;
    /* single elements: the two largest |g|, two random */
    size_t pick[4] = {0, 0, rt_rand_u32(seed, 78, 0) % n,
                      rt_rand_u32(seed, 78, 1) % n};
    for (size_t i = 0; i < n; i++)
        if (fabs(g[i]) > fabs(g[pick[0]]))
            pick[0] = i;
    for (size_t i = 0; i < n; i++)
        if (i != pick[0] && (pick[1] == pick[0] || fabs(g[i]) > fabs(g[pick[1]])))
            pick[1] = i;
    double gmax = fabs(g[pick[0]]);
    memset(d, 0, n * sizeof *d);
    for (int k = 0; k < 4; k++) {
        d[pick[k]] = 1;
        e = directional_err(p, d, n, g[pick[k]]) / gmax;
        d[pick[k]] = 0;
        r.elem = e > r.elem ? e : r.elem;
    }
    free(d);
    return r;
}

int main(int argc, char **argv)
{
    double tol_dir = 1e-2, tol_elem = 5e-2;
    uint64_t seed = SEED;
    M = rt_trainer_model;
    params = calloc(M->param_floats + 1, sizeof *params);
    grads = calloc(M->grad_floats + 1, sizeof *grads);
    scratch_grads = calloc(M->grad_floats + 1, sizeof *grads);
    inputs = calloc(M->input_floats + 1, sizeof *inputs);
    ints = calloc(M->int_input_count + 1, sizeof *ints);
    if (posix_memalign(&arena, 64, M->arena_bytes + 64))
        return 1;
    M->init(params, seed);
    for (int i = 0; i < M->n_inputs; i++)
        rt_init_uniform(inputs + M->inputs[i].offset, M->inputs[i].count, -1, 1,
                        seed, 1000 + (uint64_t)i);
    /* indices and labels over the non-negative values their readers take */
    for (int i = 0; i < M->n_int_inputs; i++) {
        const rt_tensor_info *t = &M->int_inputs[i];
        int64_t lo = t->lo > 0 ? t->lo : 0;
        /* an input every reader takes whole (Cast, the comparisons, the
         * logical ops, Where's condition) is a 0/1 mask, as the trainer
         * draws it */
        uint64_t span = (uint64_t)(t->hi - lo) > 0xffffffffu
                            ? 2u : (uint64_t)(t->hi - lo);
        for (size_t k = 0; k < t->count; k++)
            ints[t->offset + k] = lo + (int64_t)(rt_rand_u32(seed, 2000 + i, k)
                                                 % span);
    }
    /* Non-zero biases, so that every path carries signal. */
    for (int i = 0; i < M->n_params; i++)
        if (norm2(params + M->params[i].offset, M->params[i].count) == 0)
            rt_init_uniform(params + M->params[i].offset, M->params[i].count,
                            -0.1f, 0.1f, seed, 500 + (uint64_t)i);
    float *before = malloc((M->param_floats + 1) * sizeof *before);
    memcpy(before, params, M->param_floats * sizeof *before);
    double loss = M->train_step(params, inputs, ints, NULL, grads, seed, 0,
                                arena);
    updates = memcmp(before, params, M->param_floats * sizeof *before) != 0;
    free(before);
    /* --corrupt: scale one gradient by 1.1, to show this check sees it */
    if (argc > 1 && strcmp(argv[1], "--corrupt") == 0)
        for (int i = 0; i < M->n_params; i++)
            if (M->params[i].trainable) {
                for (size_t k = 0; k < M->params[i].count; k++)
                    grads[M->params[i].grad_offset + k] *= 1.1f;
                break;
            }
    double fwd = loss_at();
    int bad = loss != fwd;
    printf("%s (%s): loss %.6f; %s %s train_step\n", M->name, M->policy,
           loss, M->n_dropouts || updates ? "train_step again" : "forward",
           bad ? "DIFFERS FROM" : "equals");
    int checked = 0;
    for (int i = 0; i < M->n_params; i++) {
        const rt_tensor_info *t = &M->params[i];
        if (!t->trainable)
            continue;
        Errors e = check_tensor(t, seed);
        int fail = e.dir > tol_dir || e.elem > tol_elem;
        checked++;
        printf("  %-24s relative error: directions %.1e, elements %.1e%s\n",
               t->name, e.dir, e.elem, fail ? "  FAIL" : "");
        bad |= fail;
    }
    printf("gradcheck: %d tensors, %s\n", checked, bad ? "FAILED" : "ok");
    free(params);
    free(grads);
    free(scratch_grads);
    free(ints);
    free(inputs);
    free(arena);
    return bad;
}
