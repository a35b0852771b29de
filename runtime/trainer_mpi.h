/*
 * trainer_mpi.h: the data-parallel side of the trainer (remat build --mpi).
 *
 * trainer.c calls these under RT_MPI and nothing of MPI itself; without
 * RT_MPI it defines one-process stand-ins (rank 0 of 1), so the single
 * process trainer is the same program with K = 1.
 */
#ifndef REMAT_TRAINER_MPI_H
#define REMAT_TRAINER_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "remat_rt.h"

/* What every rank must share before the first step; the names of v's
 * entries are dp_value_names. */
#define DP_VALUES 12
#define DP_LR 6          /* v[DP_LR] holds a double's bits */
typedef struct {
    char model[64];      /* name and policy */
    char inputs[192];    /* every input's name and shape */
    uint64_t v[DP_VALUES];
} dp_fingerprint;
extern const char *const dp_value_names[DP_VALUES];

/* MPI_Init; errors come back as values (so a dead peer is reported, not
 * a hang). Exits with a message when MPI cannot start. */
void dp_init(int *argc, char ***argv);
int dp_rank(void);
int dp_size(void);
/* Ends every rank: after the caller's message, with this status. */
void dp_abort(int status);
/* Every rank compares its fingerprint with rank 0's; on a difference rank
 * 0 prints one line naming the rank and what differs, and every rank
 * exits 1. timeout_s bounds every wait on the other ranks. */
void dp_agree(const dp_fingerprint *f, double timeout_s);
/* -1 when every rank passed the same h, else the first rank whose differs
 * from rank 0's. */
int dp_same(uint64_t h, const char *what);
/* The hook that starts an all-reduce (a sum) of each bucket of
 * bucket_floats floats as the backward finishes it. */
rt_grad_hook *dp_hook(size_t bucket_floats);
/* Waits for every bucket started since the last call: the gradient
 * buffer then holds the sum over the ranks. step names the step in errors. */
void dp_finish_grads(long step);
/* The test suite's faults (REMAT_TEST_MPI_FAULT), at the start of a step;
 * 1 when this rank is to change a parameter's bits (flip:R:S). */
int dp_test_fault(long step);
/* The sum of x over the ranks (the loss). */
double dp_sum(double x, long step);
/* Milliseconds of a blocking all-reduce of n floats, the median of reps:
 * the communication that the overlap hides. */
double dp_allreduce_ms(float *buf, size_t n, int reps);
/* The last step's milliseconds waited in dp_finish_grads and from the
 * first bucket to the end of the backward (the window the overlap can
 * use), its buckets, and the floats of its last bucket (which starts as
 * the backward ends and cannot be hidden). */
void dp_last_step(double *wait_ms, double *window_ms, int *buckets,
                  size_t *last_floats);
void dp_mark_backward_end(void);
/* The last step's communication left after every rank's backward had
 * ended: its wait ended that long after the last rank's backward did.
 * A rank's wait also holds the time it waits for slower ranks, which is
 * not communication; this leaves that out. The ranks' clocks must agree
 * (CLOCK_MONOTONIC: one machine). A collective: every rank calls it. */
double dp_exposed_ms(void);
void dp_finalize(void);

#endif
