/*
 * trainer_io.c: the trainer's files: tensors as .npy files (--dump,
 * --load), --data's batches, and --save / --resume's checkpoints, written
 * into DIR.saving and renamed, so that a failed save leaves the previous
 * checkpoint whole.
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

/* ---- files ---------------------------------------------------------------- */

/* DIR/PREFIX.NAME.npy with '/' in NAME written as %2F; malloc'd. */
char *tensor_path(const char *dir, const char *prefix, const char *name)
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
void make_dirs(const char *dir)
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

void write_tensor(const char *dir, const char *prefix,
                  const rt_tensor_info *t, const float *base)
{
    char *path = tensor_path(dir, prefix, t->name);
    /* an int64 output: its int64s at an even offset (rt_store_i64) */
    int rc = t->is_int
        ? rt_npy_write_i64(path, (const int64_t *)(const void *)(base +
                           t->offset), t->rank, t->dims)
        : rt_npy_write(path, base + t->offset, t->rank, t->dims);
    if (rc != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* 1 when PATH does not exist (other failures are read_tensor's to report). */
int missing(const char *path)
{
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOENT;
}

static void die_missing(const char *path, const char *what)
{
    die("cannot read %s: no such file; --load needs every input and every "
        "trainable parameter (%s)", path, what);
}

void read_tensor(const char *dir, const char *prefix,
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

void check_frozen(const rt_model *m, const char *dir)
{
    int i;
    for (i = 0; i < m->n_frozen; i++) {
        const rt_tensor_info *t = &m->frozen_params[i];
        rt_tensor_info at0 = *t;    /* read into v, at its offset 0 */
        char *path = tensor_path(dir, "param", t->name);
        float *v;
        if (missing(path)) {
            free(path);
            continue;
        }
        v = malloc(t->count * sizeof *v + 1);
        if (!v)
            die("out of memory");
        at0.offset = 0;
        read_tensor(dir, "param", &at0, v);
        if (memcmp(v, m->frozen + t->offset, t->count * sizeof *v) != 0)
            die("%s: '%s' is frozen and its values are compiled into this "
                "program; the file holds others (leave it out, or rebuild "
                "with these values: remat build --seed, or an init=\"file\" "
                "initializer)", path, t->name);
        free(v);
        free(path);
    }
}

void write_ints(const char *dir, const rt_tensor_info *t,
                const int64_t *base)
{
    char *path = tensor_path(dir, "input", t->name);
    if (rt_npy_write_i64(path, base + t->offset, t->rank, t->dims) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* Dies on value v at element j of batch b (-1: --load, no batch) of the
 * int64 input t read from path: one line with the file, the batch, the
 * element (and its coordinates when t has two dimensions or more), the
 * value and exactly what t accepts. */
static void refuse_int(const char *path, const rt_tensor_info *t, long b,
                       size_t j, int64_t v)
{
    char where[64 + 24 * RT_MAX_RANK];
    size_t len = 0, rest = j;
    int d;
    if (b >= 0)
        len += (size_t)sprintf(where, "batch %ld ", b);
    len += (size_t)sprintf(where + len, "element %zu", j);
    if (t->rank >= 2) {
        size_t at[RT_MAX_RANK];
        for (d = t->rank - 1; d >= 0; d--) {
            size_t n = t->dims[d] > 0 ? (size_t)t->dims[d] : 1;
            at[d] = rest % n;
            rest /= n;
        }
        len += (size_t)sprintf(where + len, " (at [");
        for (d = 0; d < t->rank; d++)
            len += (size_t)sprintf(where + len, "%s%zu", d ? ", " : "", at[d]);
        sprintf(where + len, "])");
    }
    if (t->has_ignore)
        die("%s: %s is %lld; '%s' must be in [%lld, %lld) or the ignore "
            "index %lld", path, where, (long long)v, t->name,
            (long long)t->lo, (long long)t->hi, (long long)t->ignore);
    die("%s: %s is %lld, outside [%lld, %lld), the values the model's "
        "readers of '%s' accept", path, where, (long long)v,
        (long long)t->lo, (long long)t->hi, t->name);
}

/* An int64 input from DIR, every value within what its readers accept. */
void read_ints(const char *dir, const rt_tensor_info *t, int64_t *base)
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
    for (j = 0; j < t->count; j++)
        if (!RT_INT_ACCEPTS(t, base[t->offset + j]))
            refuse_int(path, t, -1, j, base[t->offset + j]);
    free(path);
}

/* mask.NODE.npy: the mask train step `step` drew for one Dropout node. */
void write_mask(const char *dir, const rt_dropout_info *d,
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
            if (!RT_INT_ACCEPTS(t, v[j]))
                refuse_int(path, t, (long)(j / t->count), j % t->count, v[j]);
    }
    if (*first != path)
        free(path);
    return data;
}

void load_data(const rt_model *m, const options *o, batches *bs)
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
void use_batch(const rt_model *m, const batches *bs, buffers *b,
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

/* a followed by b; malloc'd. */
char *join(const char *a, const char *b)
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
void save_checkpoint(const rt_model *m, const options *o, buffers *b,
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

void resume(const rt_model *m, options *o, buffers *b, float *state,
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
