/*
 * trainer_args.c: the trainer's command line: its help (usage) and
 * parse_args, which checks every option and their combinations before
 * anything runs, so that a usage error (exit 2) costs no work.
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


#include "trainer_impl.h"

/* One line of the help's file list: name, dtype, shape as numpy prints it
 * and the file name in DIR; what an int64 input accepts. */
static void print_file(FILE *f, const rt_tensor_info *t, const char *prefix,
                       const char *dtype, int width)
{
    char shape[16 * RT_MAX_RANK + 4];
    size_t len = 0;
    char *path = tensor_path(".", prefix, t->name);
    int d;
    shape[len++] = '(';
    for (d = 0; d < t->rank; d++)
        len += (size_t)sprintf(shape + len, "%s%d", d ? ", " : "", t->dims[d]);
    sprintf(shape + len, "%s)", t->rank == 1 ? "," : "");
    fprintf(f, "  %-*s %-7s %-14s ", width, t->name, dtype, shape);
    if (strcmp(dtype, "int64") != 0 || strcmp(prefix, "output") == 0)
        fprintf(f, "%s", path + 2);
    else {
        fprintf(f, "%-*s  values [%lld, %lld)", width + 11, path + 2,
                (long long)t->lo,
                (long long)t->hi);
        if (t->has_ignore)
            fprintf(f, " or %lld", (long long)t->ignore);
    }
    fputc('\n', f);
    free(path);
}

/* The model's inputs and outputs: the files --load, --data and --dump read
 * and write, so that a user knows what to name the data. */
static void print_files(FILE *f, const rt_model *m)
{
    int i, width = 4, trainable = 0;
    for (i = 0; i < m->n_inputs + m->n_int_inputs + m->n_outputs; i++) {
        const rt_tensor_info *t =
            i < m->n_inputs ? &m->inputs[i]
            : i < m->n_inputs + m->n_int_inputs
                ? &m->int_inputs[i - m->n_inputs]
                : &m->outputs[i - m->n_inputs - m->n_int_inputs];
        int n = (int)strlen(t->name);
        if (n > width)
            width = n < 24 ? n : 24;
    }
    for (i = 0; i < m->n_params; i++)
        trainable += m->params[i].trainable != 0;
    fprintf(f, "\nInputs: NAME, dtype, shape, the file --load reads in DIR"
               " (--data: the same\nname, shaped (batches, *shape)):\n");
    for (i = 0; i < m->n_inputs; i++)
        print_file(f, &m->inputs[i], "input", "float32", width);
    for (i = 0; i < m->n_int_inputs; i++)
        print_file(f, &m->int_inputs[i], "input", "int64", width);
    if (m->n_inputs + m->n_int_inputs == 0)
        fprintf(f, "  (none)\n");
    fprintf(f, "Outputs: the files --dump writes:\n");
    for (i = 0; i < m->n_outputs; i++)
        print_file(f, &m->outputs[i], "output",
                   m->outputs[i].is_int ? "int64" : "float32", width);
    fprintf(f, "Parameters: %d (%d trainable), param.NAME.npy each.\n",
            m->n_params, trainable);
    if (m->n_frozen > 0)
        fprintf(f, "Frozen parameters compiled into the program: %d (--dump "
                "writes them;\n--load checks any given; --save leaves them "
                "out).\n", m->n_frozen);
}

static void usage(FILE *f)
{
    const rt_model *m = rt_trainer_model;
    fprintf(f,
"usage: %s ACTION [OPTIONS]\n"
"%s the model '%s' (policy %s) linked into this program%s.\n",
            argv0, m->train_step ? "Trains" : "Runs",
            m->name ? m->name : "?", m->policy ? m->policy : "?",
            m->train_step ? "" : " (forward only: it has no loss)");
    print_files(f, m);
    fprintf(f,
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
"                 non-negative values their readers accept, 0 or 1 where\n"
"                 they accept any: a mask) and of Dropout's masks; default\n"
"                 0. Train step K (from 1) draws its masks as step K-1.\n"
"  --load DIR     read input.NAME.npy and param.NAME.npy from DIR instead of\n"
"                 seeding (not with --seed; Dropout's seed is then 0). Every\n"
"                 input and every trainable parameter must be there (with\n"
"                 --data, the parameters alone: the inputs are its batches);\n"
"                 a parameter that is not trainable (a constant) may be left\n"
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
void usage_error(const char *fmt, ...)
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

/* ---- command line ------------------------------------------------------- */

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

void parse_args(int argc, char **argv, options *o)
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
