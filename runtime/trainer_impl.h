/*
 * trainer_impl.h: what the trainer's three files share; private to them.
 * trainer.c is main, the training loop, --dump and --bench;
 * trainer_args.c the command line; trainer_io.c the files.
 */
#ifndef TRAINER_IMPL_H
#define TRAINER_IMPL_H

#include <stdint.h>
#include <stdio.h>

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

#define BENCH_WARMUP 3

/* trainer.c's: the program's name in messages, and in the usage */
extern const char *prog;
extern const char *argv0;

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

/* The caller's buffers of one model. */
typedef struct {
    float *params, *grads, *inputs, *outputs;
    int64_t *ints;
    void *arena;
} buffers;

/* Every input's batches, each input's own array. */
typedef struct {
    long n;
    void **per_input;   /* n_inputs float arrays, then n_int_inputs int64 */
} batches;

/* What a checkpoint holds beside the tensors (checkpoint.txt). */
typedef struct {
    uint64_t seed;
    uint64_t step;      /* optimizer steps done */
    uint64_t micro;     /* micro-batches done (Dropout's step, --data's batch) */
} progress;

/* ---- trainer.c */

void die(const char *fmt, ...);

/* ---- trainer_args.c: the command line */

void usage_error(const char *fmt, ...);
void parse_args(int argc, char **argv, options *o);

/* ---- trainer_io.c: files, --data, checkpoints */

char *tensor_path(const char *dir, const char *prefix, const char *name);
char *join(const char *a, const char *b);
void make_dirs(const char *dir);
void write_tensor(const char *dir, const char *prefix,
                  const rt_tensor_info *t, const float *base);
int missing(const char *path);
/* --load DIR: a frozen parameter compiled into the program (rt_model's
 * frozen) keeps its values; a param.NAME.npy of it in DIR must hold
 * exactly those, else it dies naming the file. */
void check_frozen(const rt_model *m, const char *dir);
void read_tensor(const char *dir, const char *prefix,
                 const rt_tensor_info *t, float *base);
void write_ints(const char *dir, const rt_tensor_info *t,
                const int64_t *base);
void read_ints(const char *dir, const rt_tensor_info *t, int64_t *base);
void write_mask(const char *dir, const rt_dropout_info *d,
                uint64_t seed, uint64_t step);
void load_data(const rt_model *m, const options *o, batches *bs);
void use_batch(const rt_model *m, const batches *bs, buffers *b,
               uint64_t k);
void save_checkpoint(const rt_model *m, const options *o, buffers *b,
                     const float *state, const progress *pg);
void resume(const rt_model *m, options *o, buffers *b, float *state,
            progress *pg);

#endif /* TRAINER_IMPL_H */
