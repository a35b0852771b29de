/*
 * trainer.c: the generic main of a trainer executable.
 *
 * Linked with one generated model, the runtime, and a shim that defines
 *     const rt_model *const rt_trainer_model = &NAME_model;
 * it uses nothing but that descriptor. This is the host program, not the
 * embedded code, so it may allocate and print.
 *
 * A forward-only model (no loss: the descriptor's train_step and sgd are
 * NULL) runs its forward where a trainer runs a train step: --dump writes
 * inputs, parameters and outputs, --bench times the forward, and --steps is
 * refused.
 *
 * Built with RT_MPI (remat build --mpi) it is the data-parallel trainer
 * under mpirun: rank r of K runs micro-batches r*A .. r*A+A-1 of the K*A
 * that one process with --accumulate K*A would run per step, the last one
 * through train_step_hooked so that each bucket of final gradients is
 * summed across the ranks while the backward goes on (trainer_mpi.c);
 * then every rank scales the sum by 1/(K*A) and takes the same optimizer
 * step. Rank 0 alone prints the losses and writes checkpoints. Without
 * RT_MPI the same code runs with K = 1 and no hook.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "remat_rt.h"

#ifdef RT_MPI
#include "trainer_mpi.h"
#define RANK dp_rank()
#define RANKS dp_size()
#else
#define RANK 0
#define RANKS 1
#endif

extern const rt_model *const rt_trainer_model;

#ifdef RT_BLAS
/* OpenBLAS's (remat build links it); not in every cblas.h. */
void openblas_set_num_threads(int n);
#endif

#define BENCH_WARMUP 3

/* error messages always start "trainer: "; the usage names argv[0] */
static const char *prog = "trainer";
static const char *argv0 = "trainer";

static void usage(FILE *f)
{
    const rt_model *m = rt_trainer_model;
    fprintf(f,
"usage: %s ACTION [OPTIONS]\n"
"%s the model '%s' (policy %s) linked into this program%s.\n"
"\n"
"Actions (exactly one):\n"
"  --dump DIR     run one train step (forward + backward, step 0) and write\n"
"                 .npy files into DIR (created if missing): input.NAME.npy for\n"
"                 every input (int64 for integer inputs), param.NAME.npy for\n"
"                 every parameter (as the step read it), output.NAME.npy for\n"
"                 every graph output (float32, as the step computed it),\n"
"                 loss.npy (0-d), forward.npy (0-d: the inference forward's\n"
"                 loss on the same data), grad.NAME.npy for every trainable\n"
"                 parameter, after.NAME.npy for every parameter the step\n"
"                 updated in place (BatchNormalization's running\n"
"                 statistics), and mask.NODE.npy for every Dropout node (1\n"
"                 kept, 0 dropped). A forward-only model runs its forward\n"
"                 (Dropout passes through) and writes the inputs,\n"
"                 parameters and outputs.\n"
"  --steps N      train for N optimizer steps on the seeded (or --load) batch\n"
"                 every step, or on --data's batches, and print 'step K loss\n"
"                 L' for step 1, every max(1, N/10) steps and the last step\n"
"                 (every step with --data); not for a forward-only model.\n"
"                 On a terminal, stderr shows the progress (--bench too).\n"
"  --bench N      run %d warm-up train steps (no SGD), time N more one by one\n"
"                 and print 'median_ms T' and 'min_ms T' in milliseconds; a\n"
"                 forward-only model times its forward.\n"
"\n"
"Options:\n"
"  --seed N       seed of the parameters (model init), of the inputs (float\n"
"                 inputs uniform in [-1, 1), integer inputs uniform over the\n"
"                 non-negative values their readers accept) and of Dropout's\n"
"                 masks; default 0. Train step K (from 1) draws its masks as\n"
"                 step K-1.\n"
"  --load DIR     read input.NAME.npy and param.NAME.npy from DIR instead of\n"
"                 seeding (not with --seed; Dropout's seed is then 0). Every\n"
"                 input and every trainable parameter must be there; a\n"
"                 parameter that is not trainable (a constant) may be left\n"
"                 out and then keeps the model's own value (its init, seed 0).\n"
"  --lr F         learning rate; default 0.01 (SGD), 0.001 (AdamW).\n"
"  --bits         with --steps: end each loss line with the loss's float32\n"
"                 bits in hex ('step K loss L bits 0x3e8f5c29'), to compare\n"
"                 runs bit for bit (the firmware test does).\n"
"  --threads N    run the runtime's kernels on N threads (1 to %d; default\n"
"                 1: the same bits for every N), GEMMs included: a large\n"
"                 GEMM is cut into N parts, each an OpenBLAS call on one\n"
"                 thread (OpenBLAS's own threads are set to 1), so in a\n"
"                 build with OpenBLAS the bits may depend on N. Without\n"
"                 --threads OpenBLAS keeps its own count\n"
"                 (OPENBLAS_NUM_THREADS).\n",
            argv0, m->train_step ? "Trains" : "Runs",
            m->name ? m->name : "?", m->policy ? m->policy : "?",
            m->train_step ? "" : " (forward only: it has no loss)",
            BENCH_WARMUP, RT_MAX_THREADS);
    fprintf(f,
"\n"
"With --steps (docs/training.md has the exact update rules):\n"
"  --optimizer O  sgd (default) or adamw, as torch.optim.SGD and AdamW.\n"
"  --momentum F, --dampening F, --nesterov\n"
"                 SGD's; default 0, 0, off (Nesterov needs momentum > 0 and\n"
"                 dampening 0).\n"
"  --weight-decay F\n"
"                 SGD: L2 added to the gradient (default 0); AdamW: decoupled\n"
"                 decay (default 0.01).\n"
"  --betas B1,B2, --eps F\n"
"                 AdamW's; default 0.9,0.999 and 1e-8.\n"
"  --clip-grad-norm F\n"
"                 scale the gradients to global 2-norm F when above it\n"
"                 (clip_grad_norm_), before the update.\n"
"  --accumulate K sum the gradients of K micro-batches (each its own train\n"
"                 step, Dropout's step counting micro-batches), scale the\n"
"                 sum by 1/K, then update once; the loss printed is the\n"
"                 micro-batches' mean.\n"
"  --fused        apply the optimizer inside the backward, each parameter as\n"
"                 soon as its gradient is final: no gradient buffer, the\n"
"                 same parameters (docs/training.md); not with --accumulate\n"
"                 or --clip-grad-norm, which need every gradient at once.\n"
"  --data DIR     train on DIR/input.NAME.npy, each (batches, NAME's shape)\n"
"                 (int64 for integer inputs), batch after batch, in epochs.\n"
"  --save DIR     after training write every parameter (param.NAME.npy), the\n"
"                 optimizer state (momentum.NAME.npy; exp_avg.NAME.npy and\n"
"                 exp_avg_sq.NAME.npy), the last batch (input.NAME.npy),\n"
"                 step.npy and checkpoint.txt into DIR.saving, then rename it\n"
"                 DIR: a failed save leaves the previous DIR whole.\n"
"  --resume DIR   continue from a --save checkpoint (its parameters, state,\n"
"                 step, seed and batch) for N more steps, bitwise as if never\n"
"                 stopped when given the same options.\n"
"  --weights FILE the weights file of a model whose initial values are not\n"
"                 in its code (more than 262,144 of them); default: this\n"
"                 program's path with .weights added, where remat build\n"
"                 writes it.\n"
"  --bucket-kb N  (a trainer built with remat build --mpi, run under\n"
"                 mpirun -n K) start each gradient all-reduce once N KiB\n"
"                 of gradients are final; default 1024. The results do not\n"
"                 depend on N (docs/mpi.md).\n"
"  --mpi-timeout S\n"
"                 (--mpi) the longest a rank waits for the others before it\n"
"                 ends them all as stopped or dead; default 60 seconds.\n"
"  -h, --help     print this help and exit.\n"
"\n"
"In file names, every '/' of a tensor name is written as '%%2F'.\n"
"Exit status: 0 on success, 1 on an error (including a NaN or Inf loss or\n"
"gradient: nothing is saved then), 2 on a usage error.\n");
}

/* Every rank reads the same command line: rank 0 alone says what is
 * wrong with it. */
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    if (RANK == 0) {
        fprintf(stderr, "%s: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (try --help)\n");
    }
#ifdef RT_MPI
    dp_finalize();
#endif
    exit(2);
}

/* ---- the progress line ------------------------------------------------------ */

/* A long run shows where it is on one stderr line rewritten with \r, only
 * when stderr is a terminal (main sets meter_on): a pipe or a log file
 * gets no such lines. Blanked before anything else is printed. */
static int meter_on;
static int meter_len;   /* characters shown */

static void meter_clear(void)
{
    if (meter_len > 0) {
        fprintf(stderr, "\r%*s\r", meter_len, "");
        fflush(stderr);
    }
    meter_len = 0;
}

static void meter_show(const char *fmt, ...)
{
    char line[80];      /* wider than the terminal would wrap */
    va_list ap;
    int n;
    if (!meter_on)
        return;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    n = n < 0 ? 0 : n >= (int)sizeof line ? (int)sizeof line - 1 : n;
    fprintf(stderr, "\r%s%*s", line, meter_len > n ? meter_len - n : 0, "");
    fflush(stderr);
    meter_len = n;
}

/* Under mpirun an error may be one rank's alone (its file, its data): it
 * names the rank and ends them all, as the others would wait for it. */
static void die(const char *fmt, ...)
{
    va_list ap;
    char line[2048];
    int n = RANKS > 1 ? snprintf(line, sizeof line, "%s: rank %d: ", prog,
                                 RANK)
                      : snprintf(line, sizeof line, "%s: ", prog);
    /* one write: mpirun forwards what it has read when it tears down */
    meter_clear();
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
#ifdef RT_MPI
    dp_abort(1);
#endif
    exit(1);
}

/* ---- command line ------------------------------------------------------- */

typedef struct {
    const char *dump_dir;
    const char *load_dir;
    const char *weights;   /* the model's weights file, when it has one */
    uint64_t seed;
    int have_seed;
    long steps;   /* 0: not asked */
    long bench;   /* 0: not asked */
    float lr;
    int have_lr;
    /* the optimizer and what goes with --steps */
    int adamw;                   /* 0: SGD */
    int have_optimizer;
    rt_sgd_config sgd;
    rt_adamw_config adam;
    int have_sgd_opt, have_adam_opt;   /* for the wrong-optimizer check */
    int have_wd;
    float clip;                  /* 0: no clipping */
    long accumulate;             /* micro-batches per step, >= 1 */
    const char *save_dir;
    const char *resume_dir;
    const char *data_dir;
    int bits;     /* --bits */
    int fused;    /* --fused: train_step_fused, no gradient buffer */
    long threads; /* 0: not given */
    long bucket_kb;      /* --bucket-kb; 0: not given */
    double mpi_timeout;  /* --mpi-timeout; 0: not given */
} options;

static uint64_t parse_u64(const char *opt, const char *s)
{
    char *end;
    unsigned long long v;
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        usage_error("%s wants a non-negative integer, got '%s'", opt, s);
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        usage_error("%s wants a non-negative integer, got '%s'", opt, s);
    return (uint64_t)v;
}

static long parse_count(const char *opt, const char *s)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*s == '\0' || errno != 0 || *end != '\0' || v < 1 || v > 1000000000L)
        usage_error("%s wants a positive integer, got '%s'", opt, s);
    return v;
}

static float parse_lr(const char *opt, const char *s)
{
    char *end;
    float v;
    errno = 0;
    v = strtof(s, &end);
    if (*s == '\0' || errno != 0 || *end != '\0' || !isfinite(v) || v < 0.0f)
        usage_error("%s wants a finite non-negative number, got '%s'", opt, s);
    return v;
}

/* a finite number >= lo (and < hi when hi > lo) */
static double parse_real(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (*s == '\0' || errno != 0 || *end != '\0' || !isfinite(v) || v < lo ||
        (hi > lo && v >= hi)) {
        if (hi > lo)
            usage_error("%s wants a number in [%g, %g), got '%s'", opt, lo, hi,
                        s);
        usage_error("%s wants a finite number >= %g, got '%s'", opt, lo, s);
    }
    return v;
}

static const char *const value_options[] = {
    "--seed", "--dump", "--load", "--steps", "--lr", "--bench", "--weights",
    "--optimizer", "--momentum", "--dampening", "--weight-decay", "--betas",
    "--eps", "--clip-grad-norm", "--accumulate", "--save", "--resume",
    "--data", "--threads", "--bucket-kb", "--mpi-timeout", NULL};

static int is_value_option(const char *name)
{
    int i;
    for (i = 0; value_options[i]; i++)
        if (strcmp(name, value_options[i]) == 0)
            return 1;
    return 0;
}

/* A folder argument without trailing slashes (cut in place, in argv):
 * --save puts DIR.saving and DIR.old beside DIR, not inside it. */
static const char *dir_value(const char *name, const char *old, char *val)
{
    size_t n = strlen(val);
    if (old)
        usage_error("%s given twice", name);
    if (n == 0)
        usage_error("%s needs a directory", name);
    while (n > 1 && val[n - 1] == '/')
        val[--n] = '\0';
    return val;
}

/* What only the data-parallel trainer takes, and what it cannot do. */
static void check_mpi_options(options *o)
{
#ifndef RT_MPI
    if (o->bucket_kb || o->mpi_timeout > 0.0)
        usage_error("%s needs a trainer built with remat build --mpi",
                    o->bucket_kb ? "--bucket-kb" : "--mpi-timeout");
#else
    if (RANKS > 1 && o->dump_dir)
        usage_error("--dump is one process's step: run it without mpirun");
    if (RANKS > 1 && o->fused)
        usage_error("--fused updates each parameter before the ranks' "
                    "gradients are summed: leave it out under mpirun");
    if ((o->bucket_kb || o->mpi_timeout > 0.0) && o->dump_dir)
        usage_error("--bucket-kb and --mpi-timeout are for --steps and "
                    "--bench");
#endif
    if (!o->bucket_kb)
        o->bucket_kb = 1024;
    if (!(o->mpi_timeout > 0.0))
        o->mpi_timeout = 60.0;
}

static void parse_args(int argc, char **argv, options *o)
{
    int i;
    int n_actions;
    int have_momentum = 0, have_dampening = 0, have_betas = 0, have_eps = 0;
    int have_clip = 0;
    memset(o, 0, sizeof *o);
    o->lr = 0.01f;
    o->accumulate = 1;
    o->adam.beta1 = 0.9;         /* torch.optim.AdamW's defaults */
    o->adam.beta2 = 0.999;
    o->adam.eps = 1e-8;
    o->adam.weight_decay = 0.01;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *val = NULL;
        char name[32];
        char *eq;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--bits") == 0) {   /* a flag: takes no value */
            o->bits = 1;
            continue;
        }
        if (strcmp(a, "--fused") == 0) {
            if (o->fused)
                usage_error("--fused given twice");
            o->fused = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            usage_error("unexpected argument '%s'", a);
        /* --opt VALUE or --opt=VALUE */
        eq = strchr(a, '=');
        if (eq) {
            size_t len = (size_t)(eq - a);
            if (len >= sizeof name)
                usage_error("unknown option '%s'", a);
            memcpy(name, a, len);
            name[len] = '\0';
            val = eq + 1;
        } else {
            if (strlen(a) >= sizeof name)
                usage_error("unknown option '%s'", a);
            strcpy(name, a);
        }
        if (strcmp(name, "--nesterov") == 0) {
            if (val)
                usage_error("--nesterov takes no value");
            if (o->sgd.nesterov)
                usage_error("--nesterov given twice");
            o->sgd.nesterov = 1;
            o->have_sgd_opt = 1;
            continue;
        }
        if (!is_value_option(name))
            usage_error("unknown option '%s'", a);
        if (!val) {
            if (i + 1 >= argc)
                usage_error("%s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "--seed") == 0) {
            if (o->have_seed)
                usage_error("--seed given twice");
            o->seed = parse_u64(name, val);
            o->have_seed = 1;
        } else if (strcmp(name, "--dump") == 0) {
            o->dump_dir = dir_value(name, o->dump_dir, val);
        } else if (strcmp(name, "--load") == 0) {
            o->load_dir = dir_value(name, o->load_dir, val);
        } else if (strcmp(name, "--save") == 0) {
            o->save_dir = dir_value(name, o->save_dir, val);
        } else if (strcmp(name, "--resume") == 0) {
            o->resume_dir = dir_value(name, o->resume_dir, val);
        } else if (strcmp(name, "--data") == 0) {
            o->data_dir = dir_value(name, o->data_dir, val);
        } else if (strcmp(name, "--optimizer") == 0) {
            if (o->have_optimizer)
                usage_error("--optimizer given twice");
            if (strcmp(val, "sgd") == 0)
                o->adamw = 0;
            else if (strcmp(val, "adamw") == 0)
                o->adamw = 1;
            else
                usage_error("--optimizer wants sgd or adamw, got '%s'", val);
            o->have_optimizer = 1;
        } else if (strcmp(name, "--momentum") == 0) {
            if (have_momentum++)
                usage_error("--momentum given twice");
            o->sgd.momentum = parse_real(name, val, 0.0, 0.0);
            o->have_sgd_opt = 1;
        } else if (strcmp(name, "--dampening") == 0) {
            if (have_dampening++)
                usage_error("--dampening given twice");
            o->sgd.dampening = parse_real(name, val, 0.0, 0.0);
            o->have_sgd_opt = 1;
        } else if (strcmp(name, "--weight-decay") == 0) {
            if (o->have_wd++)
                usage_error("--weight-decay given twice");
            o->sgd.weight_decay = o->adam.weight_decay =
                parse_real(name, val, 0.0, 0.0);
        } else if (strcmp(name, "--betas") == 0) {
            char b1[64];
            const char *comma = strchr(val, ',');
            if (have_betas++)
                usage_error("--betas given twice");
            if (!comma || (size_t)(comma - val) >= sizeof b1)
                usage_error("--betas wants B1,B2, got '%s'", val);
            memcpy(b1, val, (size_t)(comma - val));
            b1[comma - val] = '\0';
            o->adam.beta1 = parse_real("--betas' B1", b1, 0.0, 1.0);
            o->adam.beta2 = parse_real("--betas' B2", comma + 1, 0.0, 1.0);
            o->have_adam_opt = 1;
        } else if (strcmp(name, "--eps") == 0) {
            if (have_eps++)
                usage_error("--eps given twice");
            o->adam.eps = parse_real(name, val, 0.0, 0.0);
            o->have_adam_opt = 1;
        } else if (strcmp(name, "--clip-grad-norm") == 0) {
            if (have_clip++)
                usage_error("--clip-grad-norm given twice");
            o->clip = (float)parse_real(name, val, 0.0, 0.0);
            if (!(o->clip > 0.0f))
                usage_error("--clip-grad-norm wants a positive number, got "
                            "'%s'", val);
        } else if (strcmp(name, "--accumulate") == 0) {
            if (o->accumulate != 1)
                usage_error("--accumulate given twice");
            o->accumulate = parse_count(name, val);
        } else if (strcmp(name, "--weights") == 0) {
            if (o->weights)
                usage_error("--weights given twice");
            o->weights = val;
        } else if (strcmp(name, "--steps") == 0) {
            if (o->steps)
                usage_error("--steps given twice");
            o->steps = parse_count(name, val);
        } else if (strcmp(name, "--threads") == 0) {
            if (o->threads)
                usage_error("--threads given twice");
            o->threads = parse_count(name, val);
            if (o->threads > RT_MAX_THREADS)
                usage_error("--threads wants 1 to %d, got '%s'",
                            RT_MAX_THREADS, val);
        } else if (strcmp(name, "--bucket-kb") == 0) {
            if (o->bucket_kb)
                usage_error("--bucket-kb given twice");
            o->bucket_kb = parse_count(name, val);
        } else if (strcmp(name, "--mpi-timeout") == 0) {
            if (o->mpi_timeout > 0.0)
                usage_error("--mpi-timeout given twice");
            o->mpi_timeout = parse_real(name, val, 0.0, 0.0);
            if (!(o->mpi_timeout > 0.0))
                usage_error("--mpi-timeout wants a positive number of "
                            "seconds, got '%s'", val);
        } else if (strcmp(name, "--lr") == 0) {
            if (o->have_lr)
                usage_error("--lr given twice");
            o->lr = parse_lr(name, val);
            o->have_lr = 1;
        } else { /* --bench */
            if (o->bench)
                usage_error("--bench given twice");
            o->bench = parse_count(name, val);
        }
    }
    n_actions = (o->dump_dir != NULL) + (o->steps != 0) + (o->bench != 0);
    if (n_actions == 0) {
        if (argc > 1)
            usage_error("no action: give one of --dump, --steps, --bench");
        usage(stderr);
        exit(2);
    }
    if (n_actions > 1)
        usage_error("give only one of --dump, --steps, --bench");
    if (o->have_seed && o->load_dir)
        usage_error("--seed and --load exclude each other");
    if (!o->have_lr && o->adamw)
        o->lr = 0.001f;   /* torch.optim.AdamW's default */
    if (!o->steps) {
        const char *only = o->have_lr ? "--lr" : o->have_optimizer ?
            "--optimizer" : o->have_sgd_opt ? "--momentum, --dampening and "
            "--nesterov are" : o->have_adam_opt ? "--betas and --eps are" :
            o->have_wd ? "--weight-decay" : have_clip ? "--clip-grad-norm" :
            o->accumulate != 1 ? "--accumulate" : o->save_dir ? "--save" :
            o->resume_dir ? "--resume" : o->data_dir ? "--data" : NULL;
        if (only)
            usage_error("%s%s only used with --steps", only,
                        strstr(only, " are") ? "" : " is");
    }
    if (o->adamw && o->have_sgd_opt)
        usage_error("--momentum, --dampening and --nesterov are SGD's; "
                    "--optimizer is adamw");
    if (!o->adamw && o->have_adam_opt)
        usage_error("--betas and --eps are AdamW's; give --optimizer adamw");
    if (o->sgd.nesterov && (o->sgd.momentum <= 0.0 || o->sgd.dampening != 0.0))
        usage_error("--nesterov needs a positive --momentum and zero "
                    "--dampening (as torch.optim.SGD)");
    if (o->resume_dir && (o->have_seed || o->load_dir))
        usage_error("--resume takes the seed and the parameters from its "
                    "checkpoint: not with --seed or --load");
    if (o->bits && !o->steps)
        usage_error("--bits is only used with --steps");
    if (o->fused && !o->steps)
        usage_error("--fused is only used with --steps");
    check_mpi_options(o);
    if (o->fused && (o->accumulate != 1 || have_clip))
        usage_error("--fused updates each parameter inside the backward, "
                    "without a gradient buffer, but %s needs every gradient "
                    "at once: leave out --fused",
                    have_clip ? "--clip-grad-norm" : "--accumulate");
}

/* ---- model descriptor checks -------------------------------------------- */

static void check_table(const char *what, const rt_tensor_info *t, int n,
                        size_t floats)
{
    int i, d;
    if (n < 0 || (n > 0 && !t))
        die("model descriptor: bad %s table", what);
    for (i = 0; i < n; i++) {
        size_t count = 1;
        if (!t[i].name)
            die("model descriptor: %s %d has no name", what, i);
        if (t[i].rank < 0 || t[i].rank > RT_MAX_RANK)
            die("model descriptor: %s '%s' has rank %d", what, t[i].name,
                t[i].rank);
        for (d = 0; d < t[i].rank; d++) {
            if (t[i].dims[d] < 0)
                die("model descriptor: %s '%s' has a negative dimension",
                    what, t[i].name);
            count *= (size_t)t[i].dims[d];
        }
        if (count != t[i].count)
            die("model descriptor: %s '%s' has count %zu but its shape has "
                "%zu elements", what, t[i].name, t[i].count, count);
        if (t[i].offset > floats || t[i].count > floats - t[i].offset)
            die("model descriptor: %s '%s' lies outside its buffer", what,
                t[i].name);
    }
}

static void check_model(const rt_model *m)
{
    int i;
    if (!m)
        die("no model linked in");
    /* a forward-only model has neither train_step nor sgd */
    if (!m->init || !m->forward || !m->train_step != !m->sgd ||
        !m->train_step != !m->train_step_acc ||
        !m->train_step != !m->sgd_step ||
        !m->train_step != !m->adamw_step ||
        !m->train_step != !m->clip_grad_norm ||
        !m->train_step != !m->train_step_fused ||
        !m->train_step != !m->train_step_hooked)
        die("model descriptor: a function pointer is missing");
    if (m->forward_arena_bytes > m->arena_bytes)
        die("model descriptor: the forward's arena exceeds arena_bytes");
    check_table("parameter", m->params, m->n_params, m->param_floats);
    for (i = 0; m->train_step && i < m->n_params; i++) {
        const rt_tensor_info *t = &m->params[i];
        if (t->trainable && (t->grad_offset > m->grad_floats ||
                             t->count > m->grad_floats - t->grad_offset))
            die("model descriptor: parameter '%s' lies outside the gradient "
                "buffer", t->name);
    }
    check_table("input", m->inputs, m->n_inputs, m->input_floats);
    check_table("integer input", m->int_inputs, m->n_int_inputs,
                m->int_input_count);
    check_table("output", m->outputs, m->n_outputs, m->output_floats);
    if (m->n_dropouts < 0 || (m->n_dropouts > 0 && !m->dropouts))
        die("model descriptor: bad dropout table");
}

/* ---- memory -------------------------------------------------------------- */

/* 64-byte aligned, zeroed, never NULL (a 0-byte request gets 1 byte). It is
 * exactly the bytes asked for, not rounded up, so that a kernel reading past
 * the end of a buffer shows under AddressSanitizer. */
static void *alloc64(size_t bytes, const char *what)
{
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    int rc;
    rc = posix_memalign(&p, 64, n);
    if (rc != 0 || !p)
        die("cannot allocate %zu bytes for the %s: %s", bytes, what,
            strerror(rc ? rc : ENOMEM));
    memset(p, 0, n);
    return p;
}

static size_t float_bytes(size_t n, const char *what)
{
    if (n > SIZE_MAX / sizeof(float))
        die("the %s is too large (%zu floats)", what, n);
    return n * sizeof(float);
}

/* ---- files ---------------------------------------------------------------- */

/* DIR/PREFIX.NAME.npy with '/' in NAME written as %2F; malloc'd. */
static char *tensor_path(const char *dir, const char *prefix, const char *name)
{
    size_t len = strlen(dir) + 1 + strlen(prefix) + 1 + 3 * strlen(name) + 5;
    char *p = malloc(len);
    char *q;
    const char *s;
    if (!p)
        die("out of memory");
    q = p + sprintf(p, "%s/%s.", dir, prefix);
    for (s = name; *s; s++) {
        if (*s == '/') {
            memcpy(q, "%2F", 3);
            q += 3;
        } else {
            *q++ = *s;
        }
    }
    strcpy(q, ".npy");
    return p;
}

/* mkdir -p */
static void make_dirs(const char *dir)
{
    char *p = malloc(strlen(dir) + 1);
    char *s;
    struct stat st;
    if (!p)
        die("out of memory");
    strcpy(p, dir);
    for (s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                die("cannot create directory %s: %s", p, strerror(errno));
            *s = c;
            if (c == '\0')
                break;
        }
    }
    if (stat(p, &st) != 0)
        die("cannot create directory %s: %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        die("cannot create directory %s: a file of that name exists", p);
    free(p);
}

static void write_tensor(const char *dir, const char *prefix,
                         const rt_tensor_info *t, const float *base)
{
    char *path = tensor_path(dir, prefix, t->name);
    if (rt_npy_write(path, base + t->offset, t->rank, t->dims) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* 1 when PATH does not exist (other failures are read_tensor's to report). */
static int missing(const char *path)
{
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOENT;
}

static void die_missing(const char *path, const char *what)
{
    die("cannot read %s: no such file; --load needs every input and every "
        "trainable parameter (%s)", path, what);
}

static void read_tensor(const char *dir, const char *prefix,
                        const rt_tensor_info *t, float *base)
{
    char why[256];
    char *path = tensor_path(dir, prefix, t->name);
    if (missing(path))
        die_missing(path, strcmp(prefix, "input") == 0
                              ? "this is an input"
                              : "this parameter is trainable");
    why[0] = '\0';
    if (rt_npy_read(path, base + t->offset, t->rank, t->dims, why,
                    sizeof why) != 0)
        die("cannot read %s: %s", path, why[0] ? why : "unknown error");
    free(path);
}

static void write_ints(const char *dir, const rt_tensor_info *t,
                       const int64_t *base)
{
    char *path = tensor_path(dir, "input", t->name);
    if (rt_npy_write_i64(path, base + t->offset, t->rank, t->dims) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* An int64 input from DIR, every value within what its readers accept. */
static void read_ints(const char *dir, const rt_tensor_info *t, int64_t *base)
{
    char why[256];
    char *path = tensor_path(dir, "input", t->name);
    size_t j;
    if (missing(path))
        die_missing(path, "this is an input");
    why[0] = '\0';
    if (rt_npy_read_i64(path, base + t->offset, t->rank, t->dims, why,
                        sizeof why) != 0)
        die("cannot read %s: %s", path, why[0] ? why : "unknown error");
    for (j = 0; j < t->count; j++) {
        int64_t v = base[t->offset + j];
        if (v < t->lo || v >= t->hi)
            die("%s: element %zu is %lld, outside [%lld, %lld), the values "
                "the model's readers of '%s' accept", path, j, (long long)v,
                (long long)t->lo, (long long)t->hi, t->name);
    }
    free(path);
}

/* Uniform over [max(lo, 0), hi): class labels and token ids, not the
 * negative aliases or an ignore_index below 0. */
static void seed_ints(const rt_tensor_info *t, int64_t *base, uint64_t seed,
                      uint64_t stream)
{
    int64_t lo = t->lo > 0 || t->hi <= 0 ? t->lo : 0;
    double span = (double)(t->hi - lo);
    size_t j;
    for (j = 0; j < t->count; j++) {
        int64_t v = lo + (int64_t)(rt_rand_uniform(seed, stream, j) * span);
        base[t->offset + j] = v < t->hi ? v : t->hi - 1;
    }
}

/* mask.NODE.npy: the mask train step `step` drew for one Dropout node. */
static void write_mask(const char *dir, const rt_dropout_info *d,
                       uint64_t seed, uint64_t step)
{
    char *path = tensor_path(dir, "mask", d->node);
    float *mask = malloc(d->count ? d->count * sizeof *mask : 1);
    if (!mask)
        die("out of memory");
    rt_dropout_mask(mask, (int)d->count, d->ratio, seed, step, d->key);
    if (rt_npy_write(path, mask, d->rank, d->dims) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(mask);
    free(path);
}

/* ---- checks --------------------------------------------------------------- */

static const char *nonfinite_name(float v)
{
    if (isnan(v))
        return "nan";
    return v > 0 ? "inf" : "-inf";
}

static void check_loss(long step, float loss)
{
    if (!isfinite(loss))
        die("step %ld: loss is %s", step, nonfinite_name(loss));
}

/* step 0: the one step of --dump, named without a step number */
static void check_grads(const rt_model *m, const float *grads, long step)
{
    int i;
    size_t j;
    for (i = 0; i < m->n_params; i++) {
        const rt_tensor_info *t = &m->params[i];
        const float *g = grads + t->grad_offset;
        if (!t->trainable)
            continue;
        for (j = 0; j < t->count; j++)
            if (!isfinite(g[j])) {
                if (step > 0)
                    die("step %ld: grad.%s contains %s at element %zu", step,
                        t->name, nonfinite_name(g[j]), j);
                die("grad.%s contains %s at element %zu", t->name,
                    nonfinite_name(g[j]), j);
            }
    }
}

/* ---- timing ---------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- main ------------------------------------------------------------------- */

/* The caller's buffers of one model. */
typedef struct {
    float *params, *grads, *inputs, *outputs;
    int64_t *ints;
    void *arena;
} buffers;

/* With --fused, the fused step's arena and no gradient buffer. */
static void alloc_buffers(const rt_model *m, const options *o, buffers *b)
{
    if (m->int_input_count > SIZE_MAX / sizeof(int64_t))
        die("the integer inputs are too large (%zu)", m->int_input_count);
    b->arena = alloc64(o->fused ? m->fused_arena_bytes : m->arena_bytes,
                       "arena");
    b->params = alloc64(float_bytes(m->param_floats, "parameters"),
                        "parameters");
    b->grads = !m->train_step || o->fused ? NULL :
        alloc64(float_bytes(m->grad_floats, "gradients"), "gradients");
    b->inputs = alloc64(float_bytes(m->input_floats, "inputs"), "inputs");
    b->ints = alloc64(m->int_input_count * sizeof(int64_t), "integer inputs");
    b->outputs = m->output_floats == 0 ? NULL :
        alloc64(float_bytes(m->output_floats, "outputs"), "outputs");
}

static void free_buffers(buffers *b)
{
    free(b->outputs);
    free(b->ints);
    free(b->inputs);
    free(b->grads);
    free(b->params);
    free(b->arena);
}

/* init, then the values of a model whose weights live in a file (the
 * parameter buffer's image, little-endian float32; see the header). */
static void init_params(const rt_model *m, const options *o, float *params,
                        uint64_t seed)
{
    FILE *f;
    float *image;
    size_t n = m->param_floats, i;
    unsigned char b4[4];
    m->init(params, seed);
    if (!m->load_weights)
        return;
    f = fopen(o->weights, "rb");
    if (!f)
        die("%s: cannot open the model's weights (%s); remat build writes "
            "them beside the trainer as EXE.weights, --weights FILE names "
            "another place", o->weights, strerror(errno));
    image = malloc(n * sizeof(float) + 1);
    if (!image)
        die("out of memory for the weights");
    for (i = 0; i < n && fread(b4, 1, 4, f) == 4; i++) {
        uint32_t u = (uint32_t)b4[0] | (uint32_t)b4[1] << 8 |
                     (uint32_t)b4[2] << 16 | (uint32_t)b4[3] << 24;
        memcpy(&image[i], &u, 4);
    }
    if (i < n || fgetc(f) != EOF) {
        fclose(f);
        die("%s: is not this model's weights: it must hold exactly %lu "
            "bytes", o->weights, (unsigned long)(n * 4));
    }
    fclose(f);
    m->load_weights(params, image);
    free(image);
}

static void fill_buffers(const rt_model *m, const options *o, buffers *b)
{
    int i;
    if (o->load_dir) {
        for (i = 0; i < m->n_inputs; i++)
            read_tensor(o->load_dir, "input", &m->inputs[i], b->inputs);
        for (i = 0; i < m->n_int_inputs; i++)
            read_ints(o->load_dir, &m->int_inputs[i], b->ints);
        /* a parameter left out that is not trainable keeps init's value */
        init_params(m, o, b->params, 0);
        for (i = 0; i < m->n_params; i++) {
            const rt_tensor_info *t = &m->params[i];
            char *path = tensor_path(o->load_dir, "param", t->name);
            int keep = !t->trainable && missing(path);
            free(path);
            if (!keep)
                read_tensor(o->load_dir, "param", t, b->params);
        }
        return;
    }
    init_params(m, o, b->params, o->seed);
    for (i = 0; i < m->n_inputs; i++)
        rt_init_uniform(b->inputs + m->inputs[i].offset, m->inputs[i].count,
                        -1.0f, 1.0f, o->seed, 1000 + (uint64_t)i);
    for (i = 0; i < m->n_int_inputs; i++)
        seed_ints(&m->int_inputs[i], b->ints, o->seed, 2000 + (uint64_t)i);
}

/* Train step `step` (0 for the first), its masks drawn with the seed. */
static float train_step(const rt_model *m, const options *o, buffers *b,
                        uint64_t step)
{
    return m->train_step(b->params, b->inputs, b->ints, b->outputs, b->grads,
                         o->seed, step, b->arena);
}

/* One forward (a forward-only model's step), Dropout passing through. */
static void forward(const rt_model *m, buffers *b)
{
    m->forward(b->params, b->inputs, b->ints, b->outputs, b->arena);
}

/* DIR/NAME.npy: one float as a 0-d array. */
static void write_scalar(const char *dir, const char *name, float v)
{
    int dims0[1] = {0};
    char *path = malloc(strlen(dir) + 1 + strlen(name) + sizeof ".npy");
    if (!path)
        die("out of memory");
    sprintf(path, "%s/%s.npy", dir, name);
    if (rt_npy_write(path, &v, 0, dims0) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
}

static void dump(const rt_model *m, const options *o, buffers *b)
{
    int i;
    float *before = alloc64(float_bytes(m->param_floats, "parameters"),
                            "parameters");
    float loss = 0.0f, inference = 0.0f;
    if (m->train_step) {
        inference = m->forward(b->params, b->inputs, b->ints, NULL, b->arena);
        memcpy(before, b->params, m->param_floats * sizeof *before);
        loss = train_step(m, o, b, 0);
        check_loss(1, loss);
        check_grads(m, b->grads, 0);
    } else {
        memcpy(before, b->params, m->param_floats * sizeof *before);
        forward(m, b);
    }
    make_dirs(o->dump_dir);
    for (i = 0; i < m->n_inputs; i++)
        write_tensor(o->dump_dir, "input", &m->inputs[i], b->inputs);
    for (i = 0; i < m->n_int_inputs; i++)
        write_ints(o->dump_dir, &m->int_inputs[i], b->ints);
    for (i = 0; i < m->n_params; i++)
        write_tensor(o->dump_dir, "param", &m->params[i], before);
    /* every output is float32: int64 tensors are graph inputs only */
    for (i = 0; i < m->n_outputs && b->outputs; i++)
        write_tensor(o->dump_dir, "output", &m->outputs[i], b->outputs);
    if (!m->train_step) {
        free(before);
        return;
    }
    write_scalar(o->dump_dir, "loss", loss);
    write_scalar(o->dump_dir, "forward", inference);
    for (i = 0; i < m->n_params; i++)
        if (m->params[i].trainable) {
            rt_tensor_info g = m->params[i];   /* at its grad_offset */
            g.offset = g.grad_offset;
            write_tensor(o->dump_dir, "grad", &g, b->grads);
        }
    /* the running statistics the step updated */
    for (i = 0; i < m->n_params; i++) {
        const rt_tensor_info *t = &m->params[i];
        if (memcmp(before + t->offset, b->params + t->offset,
                   t->count * sizeof *before) != 0)
            write_tensor(o->dump_dir, "after", t, b->params);
    }
    free(before);
    for (i = 0; i < m->n_dropouts; i++)
        write_mask(o->dump_dir, &m->dropouts[i], o->seed, 0);
}

/* ---- --data: many batches of every input ------------------------------- */

typedef struct {
    long n;             /* batches */
    float *floats;      /* n * input_floats, batch-major per input */
    int64_t *ints;      /* n * int_input_count */
} dataset;

/* The first dimension of a .npy file's shape, from its header; -1 when the
 * header holds no shape (rt_npy_read then says what is wrong). */
static long npy_first_dim(const char *path)
{
    char text[4096];
    size_t got;
    const char *p;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    if (got < 10 || memcmp(text, "\x93NUMPY", 6) != 0)
        return -1;
    p = strstr(text + 10, "'shape'");
    if (!p || !(p = strchr(p, '(')))
        return -1;
    p++;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return -1;   /* a 0-d array has no batch dimension */
    return strtol(p, NULL, 10);
}

/* DIR/input.NAME.npy: (batches, *shape). Checks the count against the
 * first file's (*n, or sets it) and reads the batches. */
static void *read_batches(const char *dir, const rt_tensor_info *t, int ints,
                          long *n, const char **first, const options *o)
{
    char why[256];
    char *path = tensor_path(dir, "input", t->name);
    int dims[RT_MAX_RANK];
    long nb;
    size_t elem = ints ? sizeof(int64_t) : sizeof(float);
    void *data;
    int d, rc;
    if (missing(path))
        die("cannot read %s: no such file; --data needs input.NAME.npy for "
            "every input, shaped (batches, %s's shape)", path, t->name);
    if (t->rank >= RT_MAX_RANK)
        die("%s: --data cannot hold batches of the rank-%d input '%s' (at "
            "most rank %d)", path, t->rank, t->name, RT_MAX_RANK - 1);
    nb = npy_first_dim(path);
    dims[0] = nb > 0 && nb < INT32_MAX ? (int)nb : 1;
    for (d = 0; d < t->rank; d++)
        dims[d + 1] = t->dims[d];
    why[0] = '\0';
    rc = ints ? rt_npy_read_i64(path, NULL, t->rank + 1, dims, why, sizeof why)
              : rt_npy_read(path, NULL, t->rank + 1, dims, why, sizeof why);
    if (rc != 0)
        die("%s: %s (--data wants (batches, %s's shape), %s)", path,
            why[0] ? why : "unreadable", t->name, ints ? "int64" : "float32");
    if (nb < 1)
        die("%s: holds no batch", path);
    if (*n == 0) {
        *n = nb;
        *first = path;
    } else if (nb != *n) {
        die("%s: holds %ld batches but %s holds %ld: every --data file needs "
            "the same number", path, nb, *first, *n);
    }
    if (nb < o->accumulate)
        die("%s: holds %ld batches, fewer than the %ld micro-batches of one "
            "step (--accumulate)", path, nb, o->accumulate);
    if ((size_t)nb > SIZE_MAX / elem / (t->count ? t->count : 1))
        die("%s: too large", path);
    data = malloc((size_t)nb * t->count * elem + 1);
    if (!data)
        die("out of memory for %s", path);
    rc = ints ? rt_npy_read_i64(path, data, t->rank + 1, dims, why, sizeof why)
              : rt_npy_read(path, data, t->rank + 1, dims, why, sizeof why);
    if (rc != 0)
        die("%s: %s", path, why[0] ? why : "unreadable");
    if (ints) {
        const int64_t *v = data;
        size_t j;
        for (j = 0; j < (size_t)nb * t->count; j++)
            if (v[j] < t->lo || v[j] >= t->hi)
                die("%s: batch %zu element %zu is %lld, outside [%lld, %lld), "
                    "the values the model's readers of '%s' accept", path,
                    j / t->count, j % t->count, (long long)v[j],
                    (long long)t->lo, (long long)t->hi, t->name);
    }
    if (*first != path)
        free(path);
    return data;
}

/* Every input's batches, each input's own array. */
typedef struct {
    long n;
    void **per_input;   /* n_inputs float arrays, then n_int_inputs int64 */
} batches;

static void load_data(const rt_model *m, const options *o, batches *bs)
{
    int i, total = m->n_inputs + m->n_int_inputs;
    const char *first = NULL;
    bs->n = 0;
    bs->per_input = calloc((size_t)total + 1, sizeof *bs->per_input);
    if (!bs->per_input)
        die("out of memory");
    if (total == 0)
        die("--data: the model '%s' has no input to read", m->name);
    for (i = 0; i < m->n_inputs; i++)
        bs->per_input[i] = read_batches(o->data_dir, &m->inputs[i], 0, &bs->n,
                                        &first, o);
    for (i = 0; i < m->n_int_inputs; i++)
        bs->per_input[m->n_inputs + i] =
            read_batches(o->data_dir, &m->int_inputs[i], 1, &bs->n, &first, o);
    free((char *)first);   /* read_batches kept the first file's path */
}

/* Batch k (mod the count) into the input buffers. */
static void use_batch(const rt_model *m, const batches *bs, buffers *b,
                      uint64_t k)
{
    size_t j = (size_t)(k % (uint64_t)bs->n);
    int i;
    for (i = 0; i < m->n_inputs; i++) {
        const rt_tensor_info *t = &m->inputs[i];
        memcpy(b->inputs + t->offset,
               (const float *)bs->per_input[i] + j * t->count,
               t->count * sizeof(float));
    }
    for (i = 0; i < m->n_int_inputs; i++) {
        const rt_tensor_info *t = &m->int_inputs[i];
        memcpy(b->ints + t->offset,
               (const int64_t *)bs->per_input[m->n_inputs + i] + j * t->count,
               t->count * sizeof(int64_t));
    }
}

/* ---- checkpoints ---------------------------------------------------------- */

/* What a checkpoint holds beside the tensors (checkpoint.txt). */
typedef struct {
    uint64_t seed;
    uint64_t step;      /* optimizer steps done */
    uint64_t micro;     /* micro-batches done (Dropout's step, --data's batch) */
} progress;

static const char *optimizer_name(const options *o)
{
    return o->adamw ? "adamw" : "sgd";
}

/* The state's tensors: "momentum" (SGD with momentum) or "exp_avg" and
 * "exp_avg_sq" (AdamW), one file per trainable parameter each. */
static int state_kinds(const options *o, const char **kinds)
{
    if (o->adamw) {
        kinds[0] = "exp_avg";
        kinds[1] = "exp_avg_sq";
        return 2;
    }
    kinds[0] = "momentum";
    return o->sgd.momentum != 0.0 ? 1 : 0;
}

/* state slot of trainable parameter i, kind k: the state has the gradient
 * buffer's layout (AdamW: twice over) */
static float *state_of(const rt_model *m, float *state, int i, int k)
{
    return state + (size_t)k * m->grad_floats + m->params[i].grad_offset;
}

static char *join(const char *a, const char *b)
{
    char *p = malloc(strlen(a) + strlen(b) + 1);
    if (!p)
        die("out of memory");
    strcpy(p, a);
    strcat(p, b);
    return p;
}

/* Removes DIR and the plain files in it (a checkpoint has no subfolder). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char *path;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        path = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!path)
            die("out of memory");
        sprintf(path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            die("cannot remove %s: %s", path, strerror(errno));
        free(path);
    }
    closedir(d);
    if (rmdir(dir) != 0 && errno != ENOENT)
        die("cannot remove %s: %s", dir, strerror(errno));
}

/* REMAT_TEST_SAVE_CRASH_AFTER=N: the test suite's stand-in for a crash,
 * which exits abruptly after the N-th file of a save. */
static void maybe_crash(void)
{
    static long written;
    const char *env = getenv("REMAT_TEST_SAVE_CRASH_AFTER");
    if (env && ++written >= atol(env)) {
        fprintf(stderr, "%s: REMAT_TEST_SAVE_CRASH_AFTER: stopping mid-save\n",
                prog);
        _exit(137);
    }
}

static void save_tensor(const char *dir, const char *prefix,
                        const rt_tensor_info *t, const float *base)
{
    write_tensor(dir, prefix, t, base);
    maybe_crash();
}

/* Writes the checkpoint into DIR.saving, then puts it in DIR's place: the
 * old DIR is renamed DIR.old, the new one DIR, and DIR.old removed. A crash
 * before the first rename leaves DIR as it was; between the two, DIR.old
 * whole (--resume falls back to it). */
static void save_checkpoint(const rt_model *m, const options *o, buffers *b,
                            const float *state, const progress *pg)
{
    const char *kinds[2];
    int nk = state_kinds(o, kinds), i, k;
    char *tmp = join(o->save_dir, ".saving"), *old = join(o->save_dir, ".old");
    char *meta;
    FILE *f;
    int dims0[1] = {0};
    int64_t step = (int64_t)pg->step;
    struct stat st;

    remove_dir(tmp);   /* what a crashed save left */
    make_dirs(tmp);
    for (i = 0; i < m->n_params; i++)
        save_tensor(tmp, "param", &m->params[i], b->params);
    for (k = 0; k < nk; k++)
        for (i = 0; i < m->n_params; i++) {
            const rt_tensor_info *t = &m->params[i];
            rt_tensor_info u = *t;   /* its slot, at offset 0 */
            u.offset = 0;
            if (t->trainable)
                save_tensor(tmp, kinds[k], &u,
                            state_of(m, (float *)state, i, k));
        }
    /* the batch of the last step: --load reads a checkpoint too */
    for (i = 0; i < m->n_inputs; i++)
        save_tensor(tmp, "input", &m->inputs[i], b->inputs);
    for (i = 0; i < m->n_int_inputs; i++) {
        write_ints(tmp, &m->int_inputs[i], b->ints);
        maybe_crash();
    }
    meta = join(tmp, "/step.npy");
    if (rt_npy_write_i64(meta, &step, 0, dims0) != 0)
        die("cannot write %s: %s", meta, strerror(errno));
    free(meta);
    meta = join(tmp, "/checkpoint.txt");
    f = fopen(meta, "w");
    if (!f || fprintf(f, "remat checkpoint\nmodel %s\noptimizer %s\nseed "
                      "%llu\nstep %llu\nmicro_batches %llu\n", m->name,
                      optimizer_name(o), (unsigned long long)pg->seed,
                      (unsigned long long)pg->step,
                      (unsigned long long)pg->micro) < 0 ||
        fclose(f) != 0)
        die("cannot write %s: %s", meta, strerror(errno));
    free(meta);
    maybe_crash();
    remove_dir(old);
    if (stat(o->save_dir, &st) == 0 && rename(o->save_dir, old) != 0)
        die("cannot rename %s to %s: %s", o->save_dir, old, strerror(errno));
    if (rename(tmp, o->save_dir) != 0)
        die("cannot rename %s to %s: %s", tmp, o->save_dir, strerror(errno));
    remove_dir(old);
    free(tmp);
    free(old);
}

/* Reads checkpoint.txt's "KEY VALUE" line into *v; 0 when absent. */
static int meta_u64(const char *text, const char *key, uint64_t *v)
{
    const char *p = text;
    size_t n = strlen(key);
    for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == ' ') {
            *v = strtoull(p + n + 1, NULL, 10);
            return 1;
        }
    return 0;
}

static void meta_str(const char *text, const char *key, char *out, size_t len)
{
    const char *p = text;
    size_t n = strlen(key);
    out[0] = '\0';
    for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == ' ') {
            size_t k = strcspn(p + n + 1, "\n");
            if (k >= len)
                k = len - 1;
            memcpy(out, p + n + 1, k);
            out[k] = '\0';
            return;
        }
}

static void resume(const rt_model *m, options *o, buffers *b, float *state,
                   progress *pg)
{
    const char *dir = o->resume_dir, *kinds[2];
    char text[1024], model[256], opt[32], why[256];
    char *meta, *old = NULL, *path;
    int nk = state_kinds(o, kinds), i, k;
    int dims0[1] = {0};
    int64_t step;
    size_t got;
    FILE *f;
    meta = join(dir, "/checkpoint.txt");
    if (missing(meta)) {
        /* a save that stopped between its two renames */
        old = join(dir, ".old/checkpoint.txt");
        if (missing(old))
            die("cannot read %s: no such file; --resume wants a folder that "
                "--save wrote", meta);
        free(meta);
        meta = old;
        old = join(dir, ".old");
        dir = old;
        fprintf(stderr, "%s: resuming from %s (a save stopped midway)\n",
                prog, dir);
    }
    f = fopen(meta, "r");
    if (!f)
        die("cannot read %s: %s", meta, strerror(errno));
    got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    if (strncmp(text, "remat checkpoint\n", 17) != 0)
        die("%s: is not a remat checkpoint", meta);
    meta_str(text, "model", model, sizeof model);
    if (strcmp(model, m->name) != 0)
        die("%s: a checkpoint of the model '%s', not of '%s'", meta, model,
            m->name);
    meta_str(text, "optimizer", opt, sizeof opt);
    if (strcmp(opt, optimizer_name(o)) != 0)
        die("%s: its optimizer state is %s's; give --optimizer %s", meta, opt,
            opt);
    if (!meta_u64(text, "seed", &pg->seed) ||
        !meta_u64(text, "step", &pg->step) ||
        !meta_u64(text, "micro_batches", &pg->micro))
        die("%s: a seed, step or micro_batches line is missing", meta);
    free(meta);
    path = join(dir, "/step.npy");
    why[0] = '\0';
    if (rt_npy_read_i64(path, &step, 0, dims0, why, sizeof why) != 0)
        die("cannot read %s: %s", path, why[0] ? why : "unknown error");
    if (step < 0 || (uint64_t)step != pg->step)
        die("%s: step %lld but checkpoint.txt says %llu", path,
            (long long)step, (unsigned long long)pg->step);
    free(path);
    o->seed = pg->seed;
    /* every parameter, frozen ones too; the last batch */
    for (i = 0; i < m->n_params; i++) {
        path = tensor_path(dir, "param", m->params[i].name);
        if (missing(path))
            die("cannot read %s: no such file; a checkpoint holds every "
                "parameter", path);
        free(path);
        read_tensor(dir, "param", &m->params[i], b->params);
    }
    for (i = 0; i < m->n_inputs; i++)
        read_tensor(dir, "input", &m->inputs[i], b->inputs);
    for (i = 0; i < m->n_int_inputs; i++)
        read_ints(dir, &m->int_inputs[i], b->ints);
    for (k = 0; k < nk; k++)
        for (i = 0; i < m->n_params; i++) {
            const rt_tensor_info *t = &m->params[i];
            rt_tensor_info u = *t;   /* its slot, at offset 0 */
            u.offset = 0;
            if (!t->trainable)
                continue;
            path = tensor_path(dir, kinds[k], t->name);
            if (missing(path))
                die("cannot read %s: no such file; the checkpoint has no "
                    "%s state (was it saved with other optimizer options?)",
                    path, kinds[k]);
            free(path);
            read_tensor(dir, kinds[k], &u, state_of(m, state, i, k));
        }
    free(old);
}

/* ---- training --------------------------------------------------------------- */

#ifdef RT_MPI
static rt_grad_hook *grad_hook;   /* dp_hook's, set in main */
#endif

/* Micro-batch j of this rank's, global number `micro` (Dropout's step):
 * the last one hands its final gradients to the hook under mpirun. */
static float micro_step(const rt_model *m, const options *o, buffers *b,
                        long j, uint64_t micro)
{
#ifdef RT_MPI
    if (j == o->accumulate - 1)
        return m->train_step_hooked(b->params, b->inputs, b->ints,
                                    b->outputs, b->grads, o->seed, micro,
                                    b->arena, j > 0, grad_hook);
#endif
    return (j == 0 ? m->train_step : m->train_step_acc)(
        b->params, b->inputs, b->ints, b->outputs, b->grads, o->seed, micro,
        b->arena);
}

/* One optimizer step over --accumulate micro-batches (the unfused path):
 * the gradients summed in the gradient buffer (and over the ranks), checked,
 * clipped, then the optimizer's step. Rank r takes the step's micro-batches
 * r*A to r*A+A-1, numbered as one process with --accumulate K*A numbers
 * them. Returns the mean loss of all K*A. */
static float buffered_step(const rt_model *m, const options *o, buffers *b,
                           batches *data, float *state, uint64_t step,
                           progress *pg)
{
    double sum = 0.0;
    long j, total = o->accumulate * RANKS;
    uint64_t first = pg->micro + (uint64_t)(RANK * o->accumulate);
    for (j = 0; j < o->accumulate; j++) {
        float loss;
        if (o->data_dir)
            use_batch(m, data, b, first + (uint64_t)j);
        loss = micro_step(m, o, b, j, first + (uint64_t)j);
        check_loss((long)step, loss);
        sum += loss;
    }
    pg->micro += (uint64_t)total;
#ifdef RT_MPI
    dp_mark_backward_end();
    dp_finish_grads((long)step);
    sum = dp_sum(sum, (long)step);
#endif
    /* the mean over the micro-batches: PyTorch's recipe scales each loss
     * by 1/K before its backward; the sum scaled once is the same to
     * rounding */
    if (total > 1)
        rt_scale(b->grads, m->grad_floats, (float)(1.0 / (double)total));
    check_grads(m, b->grads, (long)step);   /* before the update spreads it */
    if (o->clip > 0.0f)
        m->clip_grad_norm(b->grads, o->clip);
    if (o->adamw)
        m->adamw_step(b->params, b->grads, state, o->lr, &o->adam, step);
    else
        m->sgd_step(b->params, b->grads, state, o->lr, &o->sgd, step);
    return (float)(sum / (double)total);
}

/* The fused step has no gradient to check before its update: a gradient
 * (or an update) that was not finite shows in the parameter it made. */
static void check_params(const rt_model *m, const float *params, long step)
{
    int i;
    size_t j;
    for (i = 0; i < m->n_params; i++) {
        const rt_tensor_info *t = &m->params[i];
        const float *p = params + t->offset;
        for (j = 0; t->trainable && j < t->count; j++)
            if (!isfinite(p[j]))
                die("step %ld: the fused update made param.%s %s at "
                    "element %zu", step, t->name, nonfinite_name(p[j]), j);
    }
}

/* One optimizer step inside the backward (--fused). */
static float fused_step(const rt_model *m, const options *o, buffers *b,
                        batches *data, float *state, uint64_t step,
                        progress *pg)
{
    rt_optimizer opt;
    float loss;
    memset(&opt, 0, sizeof opt);
    opt.kind = o->adamw ? RT_OPT_ADAMW : RT_OPT_SGD;
    opt.lr = o->lr;
    opt.step = step;
    opt.sgd = o->sgd;
    opt.adamw = o->adam;
    if (o->data_dir)
        use_batch(m, data, b, pg->micro);
    loss = m->train_step_fused(b->params, b->inputs, b->ints, b->outputs,
                               state, &opt, o->seed, pg->micro, b->arena);
    pg->micro++;
    check_loss((long)step, loss);
    check_params(m, b->params, (long)step);
    return loss;
}

#ifdef RT_MPI
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211u;
    return h;
}

/* The tables' names, shapes and places, hashed: two builds of one graph
 * agree, a different graph or batch shape does not. */
static uint64_t tables_hash(const rt_model *m)
{
    uint64_t h = 14695981039346656037u;
    int i;
    for (i = 0; i < m->n_params; i++) {
        const rt_tensor_info *t = &m->params[i];
        h = fnv(h, t->name, strlen(t->name) + 1);
        h = fnv(h, t->dims, sizeof t->dims);
        h = fnv(h, &t->offset, sizeof t->offset);
        h = fnv(h, &t->trainable, sizeof t->trainable);
    }
    return h;
}

/* "x[32,256] y[32]": the inputs, which say the batch's shape. */
static void inputs_text(const rt_model *m, char *out, size_t len)
{
    size_t n = 0;
    int i, d;
    out[0] = '\0';
    for (i = 0; i < m->n_inputs + m->n_int_inputs && n + 1 < len; i++) {
        const rt_tensor_info *t = i < m->n_inputs ? &m->inputs[i]
                                  : &m->int_inputs[i - m->n_inputs];
        n += (size_t)snprintf(out + n, len - n, "%s%s[", i ? " " : "",
                              t->name);
        for (d = 0; d < t->rank && n + 1 < len; d++)
            n += (size_t)snprintf(out + n, len - n, "%s%d", d ? "," : "",
                                  t->dims[d]);
        if (n + 1 < len)
            n += (size_t)snprintf(out + n, len - n, "]");
    }
}

/* Every rank must train the same model with the same options on data of
 * the same length, or the all-reduces would pair unlike buffers (or hang). */
static void agree(const rt_model *m, const options *o, const batches *data)
{
    dp_fingerprint f;
    uint64_t opt = o->adamw;
    memset(&f, 0, sizeof f);
    snprintf(f.model, sizeof f.model, "model '%s' (policy %s)", m->name,
             m->policy);
    inputs_text(m, f.inputs, sizeof f.inputs);
    opt = fnv(opt, &o->sgd, sizeof o->sgd);
    opt = fnv(opt, &o->adam, sizeof o->adam);
    opt = fnv(opt, &o->clip, sizeof o->clip);
    f.v[0] = m->param_floats;
    f.v[1] = m->grad_floats;
    f.v[2] = m->input_floats;
    f.v[3] = m->int_input_count;
    f.v[4] = tables_hash(m);
    f.v[5] = opt;
    {
        double lr = o->lr;
        memcpy(&f.v[DP_LR], &lr, sizeof lr);
    }
    f.v[7] = (uint64_t)o->steps;
    f.v[8] = (uint64_t)o->accumulate;
    f.v[9] = o->seed;
    f.v[10] = (uint64_t)o->bucket_kb;
    f.v[11] = (uint64_t)data->n;
    dp_agree(&f, o->mpi_timeout);
}
#endif

static void print_loss(const options *o, uint64_t step, float loss)
{
    uint32_t u;
    if (RANK != 0)
        return;
    meter_clear();
    memcpy(&u, &loss, sizeof u);
    if (o->bits)
        printf("step %llu loss %.6f bits 0x%08lx\n", (unsigned long long)step,
               (double)loss, (unsigned long)u);
    else
        printf("step %llu loss %.6f\n", (unsigned long long)step,
               (double)loss);
    fflush(stdout);
}

/* The meter during --steps: the step, and with --data the epoch. */
static void show_step(const options *o, const batches *data,
                      const progress *pg, long k, double ms)
{
    double rate = (double)k * 1e3 / (ms + 1e-9);
    if (o->data_dir)
        meter_show("%s: step %ld of %ld (%ld%%), epoch %llu, %.1f steps/s",
                   prog, k, o->steps, k * 100 / o->steps,
                   (unsigned long long)((pg->micro - 1) /
                                        (uint64_t)data->n + 1), rate);
    else
        meter_show("%s: step %ld of %ld (%ld%%), %.1f steps/s", prog, k,
                   o->steps, k * 100 / o->steps, rate);
}

static void train(const rt_model *m, options *o, buffers *b)
{
    size_t state_floats = o->adamw ? m->adamw_state_floats
                                   : m->sgd_state_floats;
    float *state = alloc64(float_bytes(state_floats, "optimizer state"),
                           "optimizer state");
    long every = o->steps / 10 > 1 ? o->steps / 10 : 1;
    long shown = o->steps / 100 > 1 ? o->steps / 100 : 1;  /* meter updates */
    batches data = {0, NULL};
    progress pg = {0, 0, 0};
    double t0 = now_ms();
    long k;
    pg.seed = o->seed;
    if (o->resume_dir)
        resume(m, o, b, state, &pg);
    if (o->data_dir)
        load_data(m, o, &data);
#ifdef RT_MPI
    agree(m, o, &data);
#endif
    for (k = 1; k <= o->steps; k++) {
        uint64_t step = pg.step + (uint64_t)k;   /* from 1 */
        float loss;
        int said;
#ifdef RT_MPI
        if (dp_test_fault((long)step))
            b->params[0] = nextafterf(b->params[0], 1e30f);
#endif
        loss = (o->fused ? fused_step : buffered_step)(m, o, b, &data, state,
                                                       step, &pg);
        said = o->data_dir || k == 1 || k % every == 0 || k == o->steps;
        if (said)
            print_loss(o, step, loss);
        /* after a loss line too, or --data's line a step would hide it */
        if (RANK == 0 && (said || k % shown == 0) && k < o->steps)
            show_step(o, &data, &pg, k, now_ms() - t0);
    }
    meter_clear();
    pg.step += (uint64_t)o->steps;
#ifdef RT_MPI
    /* the update keeps the ranks equal only if the all-reduce handed every
     * rank the same bits; MPI does not promise it, so it is checked */
    k = dp_same(fnv(14695981039346656037u, b->params,
                    m->param_floats * sizeof(float)), "the parameters' check");
    if (k >= 0 && RANK == 0)
        die("rank %ld's parameters are not rank 0's bit for bit after step "
            "%llu: nothing saved", k, (unsigned long long)pg.step);
    if (k >= 0)   /* rank 0 says it and ends every rank */
        dp_sum(0.0, (long)pg.step);
#endif
    if (o->save_dir && RANK == 0)   /* the ranks' parameters are identical */
        save_checkpoint(m, o, b, state, &pg);
#ifdef RT_MPI
    if (o->save_dir && RANK > 0 && getenv("REMAT_TEST_MPI_SAVE_ALL")) {
        /* the test suite's look at every rank's parameters: DIR.rankR */
        options mine = *o;
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".rank%d", RANK);
        mine.save_dir = join(o->save_dir, suffix);
        save_checkpoint(m, &mine, b, state, &pg);
        free((char *)mine.save_dir);
    }
#endif
    free(state);
    if (data.per_input) {
        int i;
        for (i = 0; i < m->n_inputs + m->n_int_inputs; i++)
            free(data.per_input[i]);
        free(data.per_input);
    }
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef RT_MPI
/* A data-parallel step without the update: the hooked train step, then
 * the wait for the last all-reduce. Rank 0 prints the medians of the step,
 * of the wait, of the window from the first bucket to the end of the
 * backward, and of the exposed communication (what was left after the last
 * rank's backward: the wait without the time spent waiting for a slower
 * rank), with a blocking all-reduce of the whole gradient buffer: what the
 * step would wait without the overlap. hidden is the share of that the
 * overlap removed: 1 - exposed / blocking. Ranks on one machine (the
 * exposed figure compares their clocks). */
static void bench_mpi(const rt_model *m, const options *o, buffers *b)
{
    double *ms = malloc(4 * (size_t)o->bench * sizeof *ms), full, exposed;
    int buckets = 0;
    size_t last = 0;
    long k;
    batches none = {0, NULL};
    if (!ms)
        die("out of memory");
    agree(m, o, &none);
    for (k = -BENCH_WARMUP; k < o->bench; k++) {
        uint64_t micro = (uint64_t)(k + BENCH_WARMUP) * (uint64_t)RANKS +
                         (uint64_t)RANK;
        double t0 = now_ms(), w, win;
        check_loss(k + BENCH_WARMUP + 1, m->train_step_hooked(
            b->params, b->inputs, b->ints, b->outputs, b->grads, o->seed,
            micro, b->arena, 0, grad_hook));
        dp_mark_backward_end();
        dp_finish_grads(k + BENCH_WARMUP + 1);
        dp_last_step(&w, &win, &buckets, &last);
        if (k >= 0) {
            ms[k] = now_ms() - t0;
            ms[o->bench + k] = w;
            ms[2 * o->bench + k] = win;
        }
        w = dp_exposed_ms();   /* outside the step's time */
        if (k >= 0)
            ms[3 * o->bench + k] = w;
    }
    full = dp_allreduce_ms(b->grads, m->grad_floats, 25);
    exposed = median(ms + 3 * o->bench, o->bench);
    if (RANK == 0) {
        printf("ranks %d\n", RANKS);
        printf("median_ms %.4f\n", median(ms, o->bench));
        printf("wait_ms %.4f\n", median(ms + o->bench, o->bench));
        printf("exposed_ms %.4f\n", exposed);
        printf("window_ms %.4f\n", median(ms + 2 * o->bench, o->bench));
        printf("allreduce_ms %.4f\n", full);
        printf("gradient_floats %zu\n", m->grad_floats);
        printf("buckets %d\n", buckets);
        printf("last_bucket_floats %zu\n", last);
        printf("hidden %.3f\n", full > 0.0 && exposed < full
                                     ? 1.0 - exposed / full : 0.0);
    }
    free(ms);
}
#endif

/* A forward-only model times its forward; there is no loss to check. */
static void bench(const rt_model *m, const options *o, buffers *b)
{
    double *ms = malloc((size_t)o->bench * sizeof *ms);
    long k;
    if (!ms)
        die("out of memory");
    for (k = 1; k <= BENCH_WARMUP; k++) {
        if (m->train_step)
            check_loss(k, train_step(m, o, b, (uint64_t)(k - 1)));
        else
            forward(m, b);
    }
    for (k = 0; k < o->bench; k++) {
        double t0;
        float loss = 0.0f;
        meter_show("%s: timing run %ld of %ld", prog, k + 1, o->bench);
        t0 = now_ms();      /* the meter's write is not timed */
        if (m->train_step)
            loss = train_step(m, o, b, (uint64_t)(BENCH_WARMUP + k));
        else
            forward(m, b);
        ms[k] = now_ms() - t0;
        check_loss(BENCH_WARMUP + 1 + k, loss);
    }
    meter_clear();
    printf("median_ms %.4f\n", median(ms, o->bench));
    printf("min_ms %.4f\n", ms[0]);
    free(ms);
}

/* The runtime's pool, and OpenBLAS's threads only when asked: without
 * --threads a BLAS build runs as before (OpenBLAS's own default). With
 * it the runtime splits GEMMs over its own threads, each part a
 * one-thread OpenBLAS call: on gpt's small GEMMs OpenBLAS's own threads
 * gained nothing where two parts on two threads took 0.6 of the time
 * (runtime/gemm.c, RT_PAR_GEMM). OpenBLAS's own threads, started
 * when it loads, still spin for about 0.1 s before they sleep: a short
 * run with --threads is steadier under OPENBLAS_NUM_THREADS=1
 * (bench/run.py does that). */
static void set_threads(const options *o)
{
    rt_set_threads(o->threads ? (int)o->threads : 1);
#ifdef RT_BLAS
    if (o->threads)
        openblas_set_num_threads(1);
#endif
}

int main(int argc, char **argv)
{
    const rt_model *m = rt_trainer_model;
    options o;
    buffers b;

    if (argc > 0 && argv[0] && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        argv0 = slash ? slash + 1 : argv[0];
    }
    if (!m) {
        fprintf(stderr, "%s: no model linked in\n", prog);
        return 1;
    }
#ifdef RT_MPI
    dp_init(&argc, &argv);
#endif
    parse_args(argc, argv, &o);
    meter_on = isatty(STDERR_FILENO);
    if (!o.weights && argc > 0 && argv[0]) {
        static char path[4096];
        snprintf(path, sizeof path, "%s.weights", argv[0]);
        o.weights = path;
    }
    check_model(m);
    set_threads(&o);
    if (o.steps && !m->train_step)
        usage_error("the model '%s' is forward only (it has no loss): "
                    "--steps needs a train step; use --dump or --bench",
                    m->name ? m->name : "?");
    alloc_buffers(m, &o, &b);
    fill_buffers(m, &o, &b);
#ifdef RT_MPI
    grad_hook = dp_hook((size_t)o.bucket_kb * 1024 / sizeof(float));
#endif
    if (o.dump_dir)
        dump(m, &o, &b);
    else if (o.steps)
        train(m, &o, &b);
#ifdef RT_MPI
    else if (m->train_step)
        bench_mpi(m, &o, &b);
#endif
    else
        bench(m, &o, &b);
    if (fflush(stdout) != 0 || ferror(stdout))
        die("cannot write to standard output");
    free_buffers(&b);
#ifdef RT_MPI
    dp_finalize();
#endif
    return 0;
}
