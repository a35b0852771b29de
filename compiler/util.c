/*
 * util.c: the compilation context and the small things every stage uses.
 *
 * A Ctx owns every allocation of one compilation as a list of chunks, freed
 * once by ctx_free (ggml's context): no stage frees anything, and a test can
 * run many compilations in one process cleanly under sanitizers. The context
 * also holds the one error message a failing stage leaves for main.c.
 *
 * Files are written whole or not at all: to a temporary file beside the
 * target, then renamed over it.
 */
#define _POSIX_C_SOURCE 200809L
#include "remat.h"
#include "../runtime/remat_rt.h"

#include <sys/stat.h>
#include <unistd.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct Chunk {
    Chunk *next;
    size_t used, cap;       /* bytes of data[] handed out, and its size */
    max_align_t data[];
};

/* Small allocations are carved from shared chunks: a large graph makes
 * millions of them (names, emitted lines), and one calloc each cost more
 * time and memory than the compile. Under AddressSanitizer each allocation
 * gets its own chunk again, so an overflow past one is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define CHUNK_BYTES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHUNK_BYTES 0
#endif
#endif
#ifndef CHUNK_BYTES
#define CHUNK_BYTES ((size_t)1 << 20)
#endif

void ctx_init(Ctx *c) { memset(c, 0, sizeof *c); }

struct Defer {
    Defer *next;
    void (*fn)(void *);
    void *p;
};

void ctx_defer(Ctx *c, void (*fn)(void *), void *p)
{
    Defer *d = ctx_alloc(c, sizeof *d);
    d->fn = fn;
    d->p = p;
    d->next = c->defers;
    c->defers = d;
}

void ctx_free(Ctx *c)
{
    for (Defer *d = c->defers; d; d = d->next)
        d->fn(d->p);
    c->defers = NULL;
    Chunk *k = c->chunks;
    while (k) {
        Chunk *next = k->next;
        free(k);
        k = next;
    }
    c->chunks = NULL;
}

void ctx_reset(Ctx *c)
{
    Chunk *keep = c->chunks;
    if (!keep || keep->cap != CHUNK_BYTES || CHUNK_BYTES == 0) {
        ctx_free(c);
        return;
    }
    c->chunks = keep->next;     /* the rest: big ones and full chunks */
    ctx_free(c);
    memset(keep->data, 0, keep->used);
    keep->used = 0;
    keep->next = NULL;
    c->chunks = keep;
}

static Chunk *new_chunk(size_t cap)
{
    Chunk *k = calloc(1, sizeof(Chunk) + cap);
    if (!k) {
        fprintf(stderr, "remat: out of memory (%zu bytes)\n", cap);
        exit(1);
    }
    k->cap = cap;
    return k;
}

void *ctx_alloc(Ctx *c, size_t size)
{
    size_t align = sizeof(max_align_t);
    size_t need = (size + 1 + align - 1) / align * align;   /* +1: a NUL */
    Chunk *k = c->chunks;
    if (k && k->cap - k->used >= need) {
        void *p = (char *)k->data + k->used;
        k->used += need;
        return p;
    }
    if (need > CHUNK_BYTES / 4) {
        /* a big one stands alone, behind the current chunk */
        Chunk *big = new_chunk(need);
        big->used = need;
        if (k) {
            big->next = k->next;
            k->next = big;
        } else
            c->chunks = big;
        return big->data;
    }
    k = new_chunk(CHUNK_BYTES);
    k->next = c->chunks;
    c->chunks = k;
    k->used = need;
    return k->data;
}

char *ctx_strdup(Ctx *c, const char *s)
{
    size_t n = strlen(s);
    char *d = ctx_alloc(c, n + 1);
    memcpy(d, s, n);
    return d;
}

static char *ctx_vprintf(Ctx *c, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = ctx_alloc(c, (size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *ctx_printf(Ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = ctx_vprintf(c, fmt, ap);
    va_end(ap);
    return s;
}

/* Messages quote the input, and an attribute may hold any character
 * (value="a&#10;b"): control characters are written as C escapes so that a
 * message stays one line and prints nothing a terminal would act on. */
static void escape_controls(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 5 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != 0x7f)
            out[n++] = (char)ch;
        else if (ch == '\n' || ch == '\t' || ch == '\r')
            n += (size_t)snprintf(out + n, cap - n, "\\%c",
                                  ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r');
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", ch);
    }
    out[n] = '\0';
}

int ctx_error(Ctx *c, const char *file, int line, const char *fmt, ...)
{
    char msg[768], where[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(where, sizeof where, "%s:%d: %s", file, line, msg);
    else
        snprintf(where, sizeof where, "%s: %s", file, msg);
    escape_controls(c->err, sizeof c->err, where);
    return -1;
}

/* Progress is for a person at a terminal: main sets c->progress only when
 * stderr is one, so a pipe or a log file never holds these lines. The line
 * is rewritten with \r and padded with spaces over the longer one before
 * it: no terminal escape codes needed. A line is cut to 79 characters:
 * one wider than the terminal would wrap, and \r would not reach its
 * start. */
void progress(Ctx *c, const char *fmt, ...)
{
    if (!c->progress)
        return;
    char line[80];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    n = n < 0 ? 0 : n >= (int)sizeof line ? (int)sizeof line - 1 : n;
    fprintf(stderr, "\r%s%*s", line, c->progress_len > n ?
            c->progress_len - n : 0, "");
    fflush(stderr);
    c->progress_len = n;
}

void progress_clear(Ctx *c)
{
    if (!c->progress || c->progress_len == 0)
        return;
    fprintf(stderr, "\r%*s\r", c->progress_len, "");
    fflush(stderr);
    c->progress_len = 0;
}

void buf_init(Buf *b, Ctx *c)
{
    memset(b, 0, sizeof *b);
    b->ctx = c;
}

void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *d = ctx_alloc(b->ctx, cap);   /* the old one goes with the ctx */
        if (b->len)
            memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

int write_file_atomic(Ctx *c, const char *path, const char *data, size_t len)
{
    char *tmp = ctx_printf(c, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return ctx_error(c, path, 0, "cannot write: %s", strerror(errno));
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return ctx_error(c, path, 0, "cannot write: %s", strerror(e));
    }
    return 0;
}

/* Writes both files to temporaries, then renames the first (the likelier
 * to fail, say when OUT.c is a folder) and only then the second: a failure
 * leaves both targets as they were. */
int write_pair_atomic(Ctx *c, const char *p1, Buf *b1, const char *p2, Buf *b2)
{
    const char *t1 = ctx_printf(c, "%s.tmp.%ld", p1, (long)getpid());
    const char *t2 = ctx_printf(c, "%s.tmp.%ld", p2, (long)getpid());
    if (write_file_atomic(c, t1, b1->data ? b1->data : "", b1->len))
        return ctx_error(c, p1, 0, "cannot write: %s", strerror(errno));
    if (write_file_atomic(c, t2, b2->data ? b2->data : "", b2->len)) {
        remove(t1);
        return ctx_error(c, p2, 0, "cannot write: %s", strerror(errno));
    }
    if (rename(t1, p1) != 0 || rename(t2, p2) != 0) {
        int e = errno;
        remove(t1);
        remove(t2);
        return ctx_error(c, p1, 0, "cannot write: %s", strerror(e));
    }
    return 0;
}

void buf_json_string(Buf *b, const char *s)
{
    buf_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            buf_printf(b, "\\u%04x", *p);
        else
            buf_printf(b, "%c", *p);
    }
    buf_printf(b, "\"");
}

void buf_json_number(Buf *b, double v)
{
    char s[40];
    if (!isfinite(v)) {
        buf_printf(b, "null");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e18) {
        buf_printf(b, "%.0f", v);
        return;
    }
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, v);
        if (strtod(s, NULL) == v)
            break;
    }
    buf_printf(b, "%s", s);
}

int buf_write_file(Buf *b, const char *path)
{
    return write_file_atomic(b->ctx, path, b->data ? b->data : "", b->len);
}

const char *fmt_float(Ctx *c, float v)
{
    char s[48];
    /* C has no infinity literal without <math.h>; IEEE division gives one,
     * and a constant expression may use it (a static table too). */
    if (isinf(v))
        return v > 0 ? "(1.0f / 0.0f)" : "(-1.0f / 0.0f)";
    snprintf(s, sizeof s, "%.9g", (double)v);
    /* 9 significant digits read back to the same float; the literal needs a
     * '.' or an exponent before the 'f' suffix. */
    if (!strpbrk(s, ".en"))
        strcat(s, ".0");
    return ctx_printf(c, "%sf", s);
}

void heap_push(Heap *h, int x)
{
    int i = h->n++;
    while (i > 0 && h->before(h->ctx, x, h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = x;
}

int heap_pop(Heap *h)
{
    int top = h->v[0], x = h->v[--h->n], i = 0;
    for (;;) {
        int k = 2 * i + 1;
        if (k >= h->n)
            break;
        if (k + 1 < h->n && h->before(h->ctx, h->v[k + 1], h->v[k]))
            k++;
        if (!h->before(h->ctx, h->v[k], x))
            break;
        h->v[i] = h->v[k];
        i = k;
    }
    h->v[i] = x;
    return top;
}

/* '*' and '?' over whole names. Greedy with one backtrack point (the last
 * star): a later star makes earlier choices final, so the match takes
 * O(len(p) * len(s)) steps instead of exponential backtracking. */
int glob_match(const char *p, const char *s)
{
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == '?' || *p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else
            return 0;
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

/* Edit distance (insert, delete, substitute, case-blind), stopping at 3:
 * names longer than a screen are never a typo of each other. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    int row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int sub = diag + (tolower((unsigned char)a[i - 1]) !=
                              tolower((unsigned char)b[j - 1]));
            int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

const char *closest_name(const char *s, const char *const *cands, int n)
{
    /* edits a typo may take: none in a name of one or two characters,
     * where any change makes another word */
    size_t len = strlen(s);
    int allowed = len >= 6 ? 2 : len >= 3 ? 1 : 0;
    const char *best = NULL;
    int bd = allowed + 1, ties = 0;
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], s) == 0)
            continue;
        int d = edit_distance(s, cands[i]);
        if (d < bd) {
            best = cands[i];
            bd = d;
            ties = 0;
        } else if (d == bd && best && strcmp(best, cands[i]) != 0)
            ties++;
    }
    return ties ? NULL : best;      /* transC: transA or transB? */
}

const char *did_you_mean(Ctx *c, const char *s, const char *const *cands, int n)
{
    const char *m = closest_name(s, cands, n);
    return m ? ctx_printf(c, " (did you mean '%s'?)", m) : "";
}

const char *path_dir(Ctx *c, const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return ".";
    char *d = ctx_strdup(c, file);
    d[slash - file] = '\0';
    return d[0] ? d : "/";
}

int file_too_big(Ctx *c, const char *file)
{
    return ctx_error(c, file, 0, "file is larger than %d MiB, the most this "
                     "compiler reads", (int)(MAX_FILE_BYTES >> 20));
}

int read_whole_file(Ctx *c, const char *file, size_t max,
                    int (*big_ok)(const char *data, size_t len),
                    char **data, size_t *len)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return ctx_error(c, file, 0, "cannot open: %s", strerror(errno));
    size_t cap = 65536, n = 0;
    char *d = ctx_alloc(c, cap + 1);
    size_t got;
    while ((got = fread(d + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > max || (n > MAX_FILE_BYTES && !(big_ok && big_ok(d, n)))) {
            fclose(f);
            return file_too_big(c, file);
        }
        if (n == cap) {
            char *bigger = ctx_alloc(c, 2 * cap + 1);
            memcpy(bigger, d, n);
            d = bigger;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return ctx_error(c, file, 0, "cannot read: %s", strerror(errno));
    *data = d;
    *len = n;
    return 0;
}

/* "32x256", or "scalar" for rank 0: a shape as messages and reports write it. */
const char *shape_str(Ctx *c, const Tensor *t)
{
    if (t->rank == 0)
        return "scalar";
    Buf b;
    buf_init(&b, c);
    for (int i = 0; i < t->rank; i++)
        buf_printf(&b, "%s%ld", i ? "x" : "", t->dims[i]);
    return b.data;
}

/* Each weight as DIR/PATH (PATH relative to the XML's folder), through a
 * temporary file and a rename, so each .npy is whole or absent. */
int write_weights(Ctx *c, const char *xml_path, const Imported *im)
{
    const char *dir = path_dir(c, xml_path);
    for (int k = 0; k < im->nweights; k++) {
        const Weight *w = &im->weights[k];
        const char *path = ctx_printf(c, "%s/%s", dir, w->path);
        char *folder = ctx_strdup(c, path);
        *strrchr(folder, '/') = '\0';
        if (mkdir(folder, 0777) != 0 && errno != EEXIST)
            return ctx_error(c, folder, 0, "cannot create: %s",
                             strerror(errno));
        int dims[MAX_RANK];
        for (int d = 0; d < w->rank; d++)
            dims[d] = (int)w->dims[d];
        const char *tmp = ctx_printf(c, "%s.tmp%ld", path, (long)getpid());
        if ((w->idata ? rt_npy_write_i64(tmp, w->idata, w->rank, dims)
                      : rt_npy_write(tmp, w->data, w->rank, dims)) != 0 ||
            rename(tmp, path) != 0) {
            int e = errno;
            remove(tmp);
            return ctx_error(c, path, 0, "cannot write: %s", strerror(e));
        }
    }
    return 0;
}

/* Per tensor, how many of the graph's nodes read it, plus 1000 when it is
 * an output (a rewrite may drop a tensor only the node it rewrites
 * reads); in *last, when not NULL, the last node reading it (-1: none).
 * One pass over the nodes. */
int *graph_reader_counts(Ctx *c, const Graph *g, int **last)
{
    int *k = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *k);
    int *r = last ? ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *r) : NULL;
    for (int t = 0; t < g->ntensors; t++) {
        k[t] = 0;
        if (r)
            r[t] = -1;
    }
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].nin; j++) {
            k[g->nodes[i].in[j]]++;
            if (r)
                r[g->nodes[i].in[j]] = i;
        }
    for (int i = 0; i < g->noutputs; i++)
        k[g->outputs[i]] += 1000;
    if (last)
        *last = r;
    return k;
}

/* The tensors and nodes marked dead leave the graph, and every index that
 * names one that stays is renumbered (g->order is left to infer_shapes). */
void graph_drop(Ctx *c, Graph *g, const char *dead_t, const char *dead_n)
{
    int *map = ctx_alloc(c, ((size_t)g->ntensors + (size_t)g->nnodes) *
                                sizeof *map);
    int *nmap = map + g->ntensors;
    int nt = 0, nn = 0;
    for (int t = 0; t < g->ntensors; t++)
        map[t] = dead_t[t] ? -1 : nt++;
    for (int i = 0; i < g->nnodes; i++)
        nmap[i] = dead_n[i] ? -1 : nn++;
    for (int t = 0; t < g->ntensors; t++)
        if (map[t] >= 0) {
            Tensor *x = &g->tensors[map[t]];
            *x = g->tensors[t];
            x->producer = x->producer >= 0 ? nmap[x->producer] : -1;
        }
    for (int i = 0; i < g->nnodes; i++)
        if (nmap[i] >= 0) {
            Node *n = &g->nodes[nmap[i]];
            *n = g->nodes[i];
            for (int j = 0; j < n->nin; j++)
                n->in[j] = map[n->in[j]];
            for (int j = 0; j < n->nout; j++)
                n->out[j] = map[n->out[j]];
        }
    for (int i = 0; i < g->noutputs; i++)
        g->outputs[i] = map[g->outputs[i]];
    if (g->loss >= 0)
        g->loss = map[g->loss];
    g->ntensors = nt;
    g->nnodes = nn;
}

/* ---- a set of strings ------------------------------------------------------------ */

static size_t str_hash(const char *s)
{
    size_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

int nameset_has(const NameSet *t, const char *s)
{
    if (!t->cap)
        return 0;
    for (size_t k = str_hash(s) & (t->cap - 1); t->keys[k]; k = (k + 1) & (t->cap - 1))
        if (!strcmp(t->keys[k], s))
            return 1;
    return 0;
}

void nameset_add(Ctx *c, NameSet *t, const char *s)
{
    if ((t->n + 1) * 2 > t->cap) {
        NameSet b = {ctx_alloc(c, (t->cap ? t->cap * 2 : 256) * sizeof(char *)),
                     t->cap ? t->cap * 2 : 256, 0};
        for (size_t k = 0; k < t->cap; k++)
            if (t->keys[k])
                nameset_add(c, &b, t->keys[k]);
        *t = b;
    }
    size_t k = str_hash(s) & (t->cap - 1);
    while (t->keys[k])
        k = (k + 1) & (t->cap - 1);
    t->keys[k] = s;
    t->n++;
}
