/*
 * trainer_mpi.c: data parallelism over MPI for the trainer (remat build
 * --mpi; trainer_mpi.h says what each function does).
 *
 * Every rank holds the whole model and runs the same program on its own
 * micro-batches. The train step calls the gradient hook (rt_grad_hook) as
 * buckets of gradients become final; the hook starts an MPI_Iallreduce
 * (a sum, in place) on each and returns at once, so the reduction runs
 * while the backward computes the rest. Only before the update does the
 * trainer wait for them all (dp_finish_grads). Every rank then holds the
 * same summed gradients and applies the same optimizer step, so the
 * parameters stay bitwise identical without ever being sent.
 *
 * MPICH progresses a non-blocking collective only inside MPI calls, so the
 * hook's progress call tests the started ones at every gradient the
 * backward finishes: the reductions move on between its statements.
 *
 * Faults: errors are returned, not fatal, and every wait is a loop of
 * MPI_Test against a deadline, so a rank that stops answering ends the
 * others with one line ("no answer ... within T s") and MPI_Abort rather
 * than a hang. A rank that dies outright is seen by the launcher (Hydra),
 * which kills the rest and names the dead process and its signal.
 */
#define _POSIX_C_SOURCE 200809L

#include "trainer_mpi.h"

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* enough requests for one per parameter of any shipped graph; past it a
 * bucket waits for the oldest */
#define DP_MAX_REQ 1024

static struct {
    int rank, size;
    double timeout_s;
    long step;
    rt_grad_hook hook;
    MPI_Request req[DP_MAX_REQ];
    int nreq;
    double first_bucket_ms, backward_end_ms, wait_ms, wait_end_ms;
    int buckets, step_buckets;      /* this step's, the last finished one's */
    size_t last_count;              /* floats of the last bucket started */
} dp;

const char *const dp_value_names[DP_VALUES] = {
    "parameter floats", "gradient floats", "input floats",
    "integer input count", "parameter table", "optimizer", "learning rate",
    "--steps", "--accumulate", "--seed", "--bucket-kb",
    "--data batches"};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void fail(const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fprintf(stderr, "trainer: rank %d: step %ld: %s failed (%s): another "
            "rank has died or left\n", dp.rank, dp.step, what, text);
    dp_abort(1);
}

/* A rank ended by a signal it can catch says so in one line before it
 * dies of it; the launcher then ends the others. */
static void on_signal(int sig)
{
    char line[160], *p = line;
    const char *parts[3] = {"trainer: rank ", ": ended by signal ", " ("};
    long nums[2];
    int k;
    nums[0] = dp.rank;
    nums[1] = sig;
    for (k = 0; k < 2; k++) {
        const char *s = parts[k];
        char digits[24];
        int n = 0;
        long v = nums[k];
        while (*s)
            *p++ = *s++;
        do
            digits[n++] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        while (n > 0)
            *p++ = digits[--n];
    }
    {
        const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT"
                         : sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS"
                         : sig == SIGFPE ? "SIGFPE" : "SIGABRT";
        const char *s = parts[2];
        while (*s)
            *p++ = *s++;
        while (*name)
            *p++ = *name++;
        *p++ = ')';
        *p++ = '\n';
    }
    if (write(2, line, (size_t)(p - line)) < 0)
        _exit(128 + sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_signals(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGSEGV, SIGBUS, SIGFPE,
                               SIGABRT};
    size_t i;
    for (i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = (int)SA_RESETHAND;
        sigaction(sigs[i], &sa, NULL);
    }
}

void dp_init(int *argc, char ***argv)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "trainer: MPI_Init failed\n");
        exit(1);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &dp.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &dp.size);
    dp.timeout_s = 60.0;
    catch_signals();
}

int dp_rank(void)
{
    return dp.rank;
}

int dp_size(void)
{
    return dp.size;
}

/* The pause lets mpirun forward the line just written before MPI_Abort
 * has it tear every rank down. */
void dp_abort(int status)
{
    struct timespec pause = {0, 200000000};
    fflush(stdout);
    fflush(stderr);
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

/* Tests reqs[0..n), which moves them on; 1 when all are done. One
 * MPI_Test each: GCC's -Wstringop-overflow misreads MPI_Testall's
 * MPI_STATUSES_IGNORE. */
static int test_all(MPI_Request *reqs, int n, const char *what)
{
    int i, flag, all = 1, rc;
    for (i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL)
            continue;
        rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            fail(what, rc);
        all &= flag;
    }
    return all;
}

/* Waits for reqs[0..n) with a deadline: a rank that stops answering (hung,
 * stopped, on a dead host) ends this one with a line naming the wait. */
static void wait_all(MPI_Request *reqs, int n, const char *what)
{
    double deadline = now_ms() + dp.timeout_s * 1e3;
    long spins = 0;
    while (!test_all(reqs, n, what))
        if (++spins % 1024 == 0 && now_ms() > deadline) {
            fprintf(stderr, "trainer: rank %d: step %ld: no answer to %s "
                    "from the other ranks within %g s (--mpi-timeout): a "
                    "rank has stopped or died\n", dp.rank, dp.step, what,
                    dp.timeout_s);
            dp_abort(1);
        }
}

/* The first field where f and g differ, written into why; 0 when none. */
static int differs(const dp_fingerprint *f, const dp_fingerprint *g,
                   int rank, char *why, size_t len)
{
    int i;
    if (strcmp(f->model, g->model) != 0 || strcmp(f->inputs, g->inputs) != 0) {
        snprintf(why, len, "rank %d runs %s (%s), rank 0 %s (%s): every rank "
                 "needs the same model and batch shapes", rank, g->model,
                 g->inputs, f->model, f->inputs);
        return 1;
    }
    for (i = 0; i < DP_VALUES; i++)
        if (i == DP_LR && f->v[i] != g->v[i]) {
            double a, b;
            memcpy(&a, &f->v[i], sizeof a);
            memcpy(&b, &g->v[i], sizeof b);
            snprintf(why, len, "rank %d's learning rate (%g) differs from "
                     "rank 0's (%g): every rank needs the same options",
                     rank, b, a);
            return 1;
        } else if (f->v[i] != g->v[i]) {
            snprintf(why, len, "rank %d's %s (%llu) differs from rank 0's "
                     "(%llu): every rank needs the same model and options",
                     rank, dp_value_names[i], (unsigned long long)g->v[i],
                     (unsigned long long)f->v[i]);
            return 1;
        }
    return 0;
}

void dp_agree(const dp_fingerprint *f, double timeout_s)
{
    dp_fingerprint *all = malloc((size_t)dp.size * sizeof *all);
    MPI_Request req;
    char why[512];
    int r, bad = 0, rc;
    dp.timeout_s = timeout_s;
    if (!all) {
        fprintf(stderr, "trainer: rank %d: out of memory\n", dp.rank);
        dp_abort(1);
    }
    rc = MPI_Iallgather(f, (int)sizeof *f, MPI_BYTE, all, (int)sizeof *f,
                        MPI_BYTE, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        fail("the ranks' comparison", rc);
    wait_all(&req, 1, "the ranks' comparison");
    for (r = 1; r < dp.size && !bad; r++)
        bad = differs(&all[0], &all[r], r, why, sizeof why);
    free(all);
    if (!bad)
        return;
    if (dp.rank == 0)
        fprintf(stderr, "trainer: %s\n", why);
    MPI_Finalize();   /* every rank saw the same difference */
    exit(1);
}

int dp_same(uint64_t h, const char *what)
{
    uint64_t *all = malloc((size_t)dp.size * sizeof *all);
    MPI_Request req;
    int r, bad = -1, rc;
    if (!all) {
        fprintf(stderr, "trainer: rank %d: out of memory\n", dp.rank);
        dp_abort(1);
    }
    rc = MPI_Iallgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T,
                        MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        fail(what, rc);
    wait_all(&req, 1, what);
    for (r = 1; r < dp.size && bad < 0; r++)
        if (all[r] != all[0])
            bad = r;
    free(all);
    return bad;
}

/* The hook: an in-place sum of one bucket, started now, finished before
 * the update; the earlier buckets tested so that they move on. */
static void start_bucket(void *ctx, float *grads, size_t offset, size_t count)
{
    int rc;
    (void)ctx;
    if (dp.buckets++ == 0)
        dp.first_bucket_ms = now_ms();
    dp.last_count = count;
    if (dp.nreq == DP_MAX_REQ) {
        wait_all(dp.req, dp.nreq, "a gradient all-reduce");
        dp.nreq = 0;
    }
    if (count > (size_t)INT32_MAX) {
        fprintf(stderr, "trainer: rank %d: a bucket of %zu floats is more "
                "than one MPI call takes; give a smaller --bucket-kb\n",
                dp.rank, count);
        dp_abort(1);
    }
    rc = MPI_Iallreduce(MPI_IN_PLACE, grads + offset, (int)count, MPI_FLOAT,
                        MPI_SUM, MPI_COMM_WORLD, &dp.req[dp.nreq++]);
    if (rc != MPI_SUCCESS)
        fail("a gradient all-reduce", rc);
    test_all(dp.req, dp.nreq, "a gradient all-reduce");
}

/* Between the backward's statements: MPICH moves a non-blocking
 * collective on only inside MPI calls. */
static void progress(void *ctx)
{
    (void)ctx;
    test_all(dp.req, dp.nreq, "a gradient all-reduce");
}

rt_grad_hook *dp_hook(size_t bucket_floats)
{
    memset(&dp.hook, 0, sizeof dp.hook);
    dp.hook.bucket = start_bucket;
    dp.hook.progress = progress;
    dp.hook.bucket_floats = bucket_floats;
    return &dp.hook;
}

void dp_mark_backward_end(void)
{
    dp.backward_end_ms = now_ms();
}

void dp_finish_grads(long step)
{
    double t0 = now_ms();
    dp.step = step;
    wait_all(dp.req, dp.nreq, "a gradient all-reduce");
    dp.nreq = 0;
    dp.wait_end_ms = now_ms();
    dp.wait_ms = dp.wait_end_ms - t0;
    dp.step_buckets = dp.buckets;
    dp.buckets = 0;
}

/* REMAT_TEST_MPI_FAULT=kill:R:S, term:R:S or stop:R:S: the test suite's
 * stand-in for a rank that dies (SIGKILL, SIGTERM) or hangs (SIGSTOP) at
 * the start of step S; flip:R:S, for ranks whose parameters drift apart. */
int dp_test_fault(long step)
{
    const char *env = getenv("REMAT_TEST_MPI_FAULT");
    char kind[8];
    int rank;
    long at;
    dp.step = step;
    if (!env || sscanf(env, "%7[a-z]:%d:%ld", kind, &rank, &at) != 3 ||
        rank != dp.rank || at != step)
        return 0;
    if (strcmp(kind, "flip") == 0)
        return 1;
    raise(strcmp(kind, "stop") == 0 ? SIGSTOP
          : strcmp(kind, "term") == 0 ? SIGTERM : SIGKILL);
    return 0;
}

double dp_sum(double x, long step)
{
    MPI_Request req;
    double sum = 0.0;
    int rc;
    dp.step = step;
    rc = MPI_Iallreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                        &req);
    if (rc != MPI_SUCCESS)
        fail("the loss's all-reduce", rc);
    wait_all(&req, 1, "the loss's all-reduce");
    return sum;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dp_allreduce_ms(float *buf, size_t n, int reps)
{
    double ms[64], mid;
    int k, rc;
    if (reps > 64)
        reps = 64;
    for (k = 0; k < reps; k++) {
        MPI_Request req;
        double t0 = now_ms();
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS)
            fail("the timed all-reduce", rc);
        wait_all(&req, 1, "the timed all-reduce");
        ms[k] = now_ms() - t0;
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp);
    mid = ms[reps / 2];
    /* every rank reports rank 0's figure */
    rc = MPI_Bcast(&mid, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        fail("the timed all-reduce", rc);
    return mid;
}

void dp_last_step(double *wait_ms, double *window_ms, int *buckets,
                  size_t *last_floats)
{
    *wait_ms = dp.wait_ms;
    *window_ms = dp.backward_end_ms - dp.first_bucket_ms;
    *buckets = dp.step_buckets;
    *last_floats = dp.last_count;
}

double dp_exposed_ms(void)
{
    double *ends = malloc((size_t)dp.size * sizeof *ends), last;
    MPI_Request req;
    int r, rc;
    if (!ends) {
        fprintf(stderr, "trainer: rank %d: out of memory\n", dp.rank);
        dp_abort(1);
    }
    rc = MPI_Iallgather(&dp.backward_end_ms, 1, MPI_DOUBLE, ends, 1,
                        MPI_DOUBLE, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        fail("the timing exchange", rc);
    wait_all(&req, 1, "the timing exchange");
    last = ends[0];
    for (r = 1; r < dp.size; r++)
        if (ends[r] > last)
            last = ends[r];
    free(ends);
    return dp.wait_end_ms > last ? dp.wait_end_ms - last : 0.0;
}

void dp_finalize(void)
{
    MPI_Finalize();
}
