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
 *
 * Its command line is in trainer_args.c, its files (tensors, --data,
 * checkpoints) in trainer_io.c; trainer_impl.h is what the three share.
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

#ifdef RT_BLAS
/* OpenBLAS's (remat build links it); not in every cblas.h. */
void openblas_set_num_threads(int n);
#endif

/* error messages always start "trainer: "; the usage names argv[0] */
const char *prog = "trainer";
const char *argv0 = "trainer";

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
void die(const char *fmt, ...)
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
        /* an int64 output: two floats an element, from an even offset */
        if (t[i].is_int && !strcmp(what, "output"))
            count = (t[i].offset & 1) ? (size_t)-1 : 2 * count;
        if (t[i].offset > floats || count > floats - t[i].offset)
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
    check_table("frozen parameter", m->frozen_params, m->n_frozen,
                m->frozen_floats);
    if (m->frozen_floats > 0 && !m->frozen)
        die("model descriptor: frozen parameters without their values");
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
        /* with --data the batches are the inputs: DIR holds parameters */
        for (i = 0; i < m->n_inputs && !o->data_dir; i++)
            read_tensor(o->load_dir, "input", &m->inputs[i], b->inputs);
        for (i = 0; i < m->n_int_inputs && !o->data_dir; i++)
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
        check_frozen(m, o->load_dir);
        return;
    }
    init_params(m, o, b->params, o->seed);
    for (i = 0; i < m->n_inputs; i++)
        rt_init_uniform(b->inputs + m->inputs[i].offset, m->inputs[i].count,
                        -1.0f, 1.0f, o->seed, 1000 + (uint64_t)i);
    for (i = 0; i < m->n_int_inputs; i++)
        rt_init_int_uniform(&m->int_inputs[i], b->ints, o->seed,
                            2000 + (uint64_t)i);
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
    /* the frozen ones compiled into the program: their values, the same
     * files a build with them in params writes */
    for (i = 0; i < m->n_frozen; i++)
        write_tensor(o->dump_dir, "param", &m->frozen_params[i], m->frozen);
    /* float32 outputs, and int64 ones ('<i8', a bool's 0 and 1) */
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
