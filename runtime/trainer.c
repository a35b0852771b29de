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
 */
#define _POSIX_C_SOURCE 200809L

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

#include "remat_rt.h"

extern const rt_model *const rt_trainer_model;

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
"  --steps N      train with SGD for N steps on the same data every step and\n"
"                 print 'step K loss L' for step 1, every max(1, N/10) steps\n"
"                 and the last step (not for a forward-only model).\n"
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
"  --lr F         SGD learning rate for --steps; default 0.01.\n"
"  --bits         with --steps: end each loss line with the loss's float32\n"
"                 bits in hex ('step K loss L bits 0x3e8f5c29'), to compare\n"
"                 runs bit for bit (the firmware test does).\n"
"  --weights FILE the weights file of a model whose initial values are not\n"
"                 in its code (more than 262,144 of them); default: this\n"
"                 program's path with .weights added, where remat build\n"
"                 writes it.\n"
"  -h, --help     print this help and exit.\n"
"\n"
"In file names, every '/' of a tensor name is written as '%%2F'.\n"
"Exit status: 0 on success, 1 on an error (including a NaN or Inf loss or\n"
"gradient), 2 on a usage error.\n",
            argv0, m->train_step ? "Trains" : "Runs",
            m->name ? m->name : "?", m->policy ? m->policy : "?",
            m->train_step ? "" : " (forward only: it has no loss)",
            BENCH_WARMUP);
}

static void usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try --help)\n");
    exit(2);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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
    int bits;     /* --bits */
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

static void parse_args(int argc, char **argv, options *o)
{
    int i;
    int n_actions;
    memset(o, 0, sizeof *o);
    o->lr = 0.01f;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[32];
        const char *eq;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--bits") == 0) {   /* a flag: takes no value */
            o->bits = 1;
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
        if (strcmp(name, "--seed") != 0 && strcmp(name, "--dump") != 0 &&
            strcmp(name, "--load") != 0 && strcmp(name, "--steps") != 0 &&
            strcmp(name, "--lr") != 0 && strcmp(name, "--bench") != 0 &&
            strcmp(name, "--weights") != 0)
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
            if (o->dump_dir)
                usage_error("--dump given twice");
            if (*val == '\0')
                usage_error("--dump needs a directory");
            o->dump_dir = val;
        } else if (strcmp(name, "--load") == 0) {
            if (o->load_dir)
                usage_error("--load given twice");
            if (*val == '\0')
                usage_error("--load needs a directory");
            o->load_dir = val;
        } else if (strcmp(name, "--weights") == 0) {
            if (o->weights)
                usage_error("--weights given twice");
            o->weights = val;
        } else if (strcmp(name, "--steps") == 0) {
            if (o->steps)
                usage_error("--steps given twice");
            o->steps = parse_count(name, val);
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
    if (o->have_lr && !o->steps)
        usage_error("--lr is only used with --steps");
    if (o->bits && !o->steps)
        usage_error("--bits is only used with --steps");
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
    if (!m)
        die("no model linked in");
    /* a forward-only model has neither train_step nor sgd */
    if (!m->init || !m->forward || !m->train_step != !m->sgd)
        die("model descriptor: a function pointer is missing");
    check_table("parameter", m->params, m->n_params, m->param_floats);
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
        const float *g = grads + t->offset;
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

static void alloc_buffers(const rt_model *m, buffers *b)
{
    if (m->int_input_count > SIZE_MAX / sizeof(int64_t))
        die("the integer inputs are too large (%zu)", m->int_input_count);
    b->arena = alloc64(m->arena_bytes, "arena");
    b->params = alloc64(float_bytes(m->param_floats, "parameters"),
                        "parameters");
    b->grads = !m->train_step ? NULL :
        alloc64(float_bytes(m->param_floats, "gradients"), "gradients");
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
        if (m->params[i].trainable)
            write_tensor(o->dump_dir, "grad", &m->params[i], b->grads);
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

static void train(const rt_model *m, const options *o, buffers *b)
{
    long every = o->steps / 10 > 1 ? o->steps / 10 : 1;
    long k;
    for (k = 1; k <= o->steps; k++) {
        float loss = train_step(m, o, b, (uint64_t)(k - 1));
        check_loss(k, loss);
        check_grads(m, b->grads, k);   /* before SGD spreads it */
        if (k == 1 || k % every == 0 || k == o->steps) {
            uint32_t u;
            memcpy(&u, &loss, sizeof u);
            if (o->bits)
                printf("step %ld loss %.6f bits 0x%08lx\n", k, (double)loss,
                       (unsigned long)u);
            else
                printf("step %ld loss %.6f\n", k, (double)loss);
            fflush(stdout);
        }
        m->sgd(b->params, b->grads, o->lr);
    }
}

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
        double t0 = now_ms();
        float loss = 0.0f;
        if (m->train_step)
            loss = train_step(m, o, b, (uint64_t)(BENCH_WARMUP + k));
        else
            forward(m, b);
        ms[k] = now_ms() - t0;
        check_loss(BENCH_WARMUP + 1 + k, loss);
    }
    qsort(ms, (size_t)o->bench, sizeof *ms, cmp_double);
    printf("median_ms %.4f\n",
           o->bench % 2 ? ms[o->bench / 2]
                        : 0.5 * (ms[o->bench / 2 - 1] + ms[o->bench / 2]));
    printf("min_ms %.4f\n", ms[0]);
    free(ms);
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
    parse_args(argc, argv, &o);
    if (!o.weights && argc > 0 && argv[0]) {
        static char path[4096];
        snprintf(path, sizeof path, "%s.weights", argv[0]);
        o.weights = path;
    }
    check_model(m);
    if (o.steps && !m->train_step)
        usage_error("the model '%s' is forward only (it has no loss): "
                    "--steps needs a train step; use --dump or --bench",
                    m->name ? m->name : "?");
    alloc_buffers(m, &b);
    fill_buffers(m, &o, &b);
    if (o.dump_dir)
        dump(m, &o, &b);
    else if (o.steps)
        train(m, &o, &b);
    else
        bench(m, &o, &b);
    if (fflush(stdout) != 0 || ferror(stdout))
        die("cannot write to standard output");
    free_buffers(&b);
    return 0;
}
