/*
 * npy.c: reading and writing .npy files (float32 and int64), for the
 * trainer and for the compiler (init="file"). Host-only: not part of the
 * single-file runtime dist/remat_rt.c, since no generated code calls it.
 * With RT_NO_STDIO it is empty.
 */
#include "remat_rt.h"

#ifndef RT_NO_STDIO
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#endif

/* ---- .npy files ----------------------------------------------------------- */

#ifndef RT_NO_STDIO

#define NPY_MAGIC       "\x93NUMPY"
#define NPY_MAGIC_LEN   6
#define NPY_ALIGN       64   /* magic + length + dict is padded to this */
#define NPY_MAX_HEADER  4096 /* numpy's own float headers are < 256 bytes */
#define NPY_MAX_DIMS    32   /* numpy's limit; parsed only to report it */
#define NPY_CHUNK       256  /* floats converted per fread / fwrite */

/* Writes a formatted reason into `why`, if the caller gave one. */
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Python's tuple spelling, as numpy writes it: (), (5,), (3, 4). */
static void shape_str(char *s, size_t len, int rank, const long long *dims)
{
    size_t used = 0;
    int d;
    s[0] = '\0';
    for (d = 0; d < rank && used < len; d++)
        used += (size_t)snprintf(s + used, len - used, "%s%lld",
                                 d == 0 ? "(" : ", ", dims[d]);
    if (used < len)
        snprintf(s + used, len - used, rank == 0 ? "()" : rank == 1 ? ",)" : ")");
}

/* Elements are stored little-endian whatever the host's byte order. */
static void put_le(unsigned char *p, uint64_t u, size_t size)
{
    size_t b;
    for (b = 0; b < size; b++)
        p[b] = (unsigned char)(u >> (8 * b));
}

static uint64_t get_le(const unsigned char *p, size_t size)
{
    uint64_t u = 0;
    size_t b;
    for (b = 0; b < size; b++)
        u |= (uint64_t)p[b] << (8 * b);
    return u;
}

/* The two element types: float32 parameters and data, int64 indices. */
typedef struct {
    const char *descr;
    const char *what;
    size_t size;
} npy_type;

static const npy_type npy_f32 = {"<f4", "float32", 4};
static const npy_type npy_i64 = {"<i8", "int64", 8};

static void put_elem(unsigned char *p, const void *data, size_t i,
                     const npy_type *t)
{
    uint32_t u;
    if (t->size == 8) {
        put_le(p, (uint64_t)((const int64_t *)data)[i], 8);
        return;
    }
    memcpy(&u, (const float *)data + i, sizeof u);
    put_le(p, u, 4);
}

static void get_elem(void *data, size_t i, const unsigned char *p,
                     const npy_type *t)
{
    uint32_t u;
    if (t->size == 8) {
        uint64_t v = get_le(p, 8);
        int64_t x;
        memcpy(&x, &v, sizeof x);   /* two's complement, as numpy wrote it */
        ((int64_t *)data)[i] = x;
        return;
    }
    u = (uint32_t)get_le(p, 4);
    memcpy((float *)data + i, &u, sizeof u);
}

/* Fills head with magic, version 1.0, length and the padded dict; returns
 * the total header size, a multiple of NPY_ALIGN. */
static size_t npy_make_header(char *head, size_t cap, int rank,
                              const long long *dims, const npy_type *t)
{
    char shape[RT_MAX_RANK * 24 + 8];
    size_t len, total;
    shape_str(shape, sizeof shape, rank, dims);
    len = NPY_MAGIC_LEN + 4 +
          (size_t)snprintf(head + NPY_MAGIC_LEN + 4, cap - NPY_MAGIC_LEN - 4,
                           "{'descr': '%s', 'fortran_order': False, "
                           "'shape': %s, }", t->descr, shape);
    total = (len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN; /* +1: '\n' */
    memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
    head[6] = 1;
    head[7] = 0;
    head[8] = (char)((total - 10) & 0xff);
    head[9] = (char)((total - 10) >> 8);
    memset(head + len, ' ', total - 1 - len);
    head[total - 1] = '\n';
    return total;
}

static int npy_write(const char *path, const void *data, int rank,
                     const int *dims, const npy_type *t)
{
    char head[256]; /* the dict for RT_MAX_RANK 10-digit dims fits in 192 */
    unsigned char buf[NPY_CHUNK * 8];
    long long ldims[RT_MAX_RANK];
    size_t count = 1, total, i, j, k;
    FILE *f;
    int d, ok;
    if (rank < 0 || rank > RT_MAX_RANK) {
        errno = EINVAL;
        return -1;
    }
    for (d = 0; d < rank; d++) {
        if (dims[d] < 0) {
            errno = EINVAL;
            return -1;
        }
        ldims[d] = dims[d];
        count *= (size_t)dims[d];
    }
    total = npy_make_header(head, sizeof head, rank, ldims, t);
    f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    ok = fwrite(head, 1, total, f) == total;
    for (i = 0; ok && i < count; i += k) {
        k = count - i < NPY_CHUNK ? count - i : NPY_CHUNK;
        for (j = 0; j < k; j++)
            put_elem(buf + t->size * j, data, i + j, t);
        ok = fwrite(buf, t->size, k, f) == k;
    }
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

int rt_npy_write(const char *path, const float *data, int rank, const int *dims)
{
    return npy_write(path, data, rank, dims, &npy_f32);
}

int rt_npy_write_i64(const char *path, const int64_t *data, int rank,
                     const int *dims)
{
    return npy_write(path, data, rank, dims, &npy_i64);
}

/* What rt_npy_read needs from the header dict; -1 / "" until seen. */
typedef struct {
    char descr[16];
    int fortran;
    int rank;
    long long dims[NPY_MAX_DIMS];
} npy_header;

static void skip_ws(const char **s)
{
    while (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r')
        (*s)++;
}

/* A Python string literal in ' or " (numpy never needs escapes here). */
static int parse_str(const char **s, char *out, size_t cap)
{
    const char q = **s;
    size_t n = 0;
    if (q != '\'' && q != '"')
        return -1;
    for ((*s)++; **s != q; (*s)++) {
        if (**s == '\0' || n + 1 >= cap)
            return -1;
        out[n++] = **s;
    }
    (*s)++;
    out[n] = '\0';
    return 0;
}

static int parse_bool(const char **s, int *v)
{
    if (strncmp(*s, "True", 4) == 0) {
        *v = 1;
        *s += 4;
    } else if (strncmp(*s, "False", 5) == 0) {
        *v = 0;
        *s += 5;
    } else {
        return -1;
    }
    return 0;
}

/* A non-negative integer; Python 2 era files may carry an 'L' suffix. */
static int parse_dim(const char **s, long long *v)
{
    if (**s < '0' || **s > '9')
        return -1;
    for (*v = 0; **s >= '0' && **s <= '9'; (*s)++) {
        if (*v > (LLONG_MAX - 9) / 10)
            return -1;
        *v = *v * 10 + (**s - '0');
    }
    if (**s == 'L')
        (*s)++;
    return 0;
}

/* A tuple of dims: (), (5,), (3, 4), with any spacing and a trailing comma. */
static int parse_shape(const char **s, npy_header *h)
{
    if (**s != '(')
        return -1;
    (*s)++;
    for (h->rank = 0;; h->rank++) {
        skip_ws(s);
        if (**s == ')')
            break;
        if (h->rank == NPY_MAX_DIMS || parse_dim(s, &h->dims[h->rank]) != 0)
            return -1;
        skip_ws(s);
        if (**s == ',')
            (*s)++;
        else if (**s != ')')
            return -1;
    }
    (*s)++;
    return 0;
}

static int parse_value(const char **s, const char *key, npy_header *h)
{
    if (strcmp(key, "descr") == 0)
        return parse_str(s, h->descr, sizeof h->descr);
    if (strcmp(key, "fortran_order") == 0)
        return parse_bool(s, &h->fortran);
    return parse_shape(s, h);
}

/* The header dict, keys in any order; numpy writes exactly these three. */
static int parse_dict(const char *s, npy_header *h, char *why, size_t whylen)
{
    char key[32];
    h->descr[0] = '\0';
    h->fortran = h->rank = -1;
    skip_ws(&s);
    if (*s != '{')
        return say(why, whylen, "header is not a dict"), -2;
    for (s++;; s++) {
        skip_ws(&s);
        if (*s == '}')
            break;
        if (parse_str(&s, key, sizeof key) != 0)
            return say(why, whylen, "malformed key in header"), -2;
        if (strcmp(key, "descr") && strcmp(key, "fortran_order") &&
            strcmp(key, "shape"))
            return say(why, whylen, "unexpected key '%s' in header", key), -2;
        skip_ws(&s);
        if (*s != ':')
            return say(why, whylen, "expected ':' after '%s'", key), -2;
        s++;
        skip_ws(&s);
        if (parse_value(&s, key, h) != 0)
            return say(why, whylen, "malformed value for '%s'", key), -2;
        skip_ws(&s);
        if (*s == '}')
            break;
        if (*s != ',')
            return say(why, whylen, "expected ',' or '}' after '%s'", key), -2;
    }
    if (h->descr[0] == '\0' || h->fortran < 0 || h->rank < 0)
        return say(why, whylen, "header lacks 'descr', 'fortran_order' "
                   "or 'shape'"), -2;
    return 0;
}

/* Reads magic, version and header length, then the dict text into buf. */
static int read_header_text(FILE *f, char *buf, size_t cap, char *why,
                            size_t whylen)
{
    unsigned char pre[12];
    size_t hlen, lenbytes;
    if (fread(pre, 1, 8, f) != 8 && ferror(f))    /* a folder: EISDIR */
        return say(why, whylen, "read error: %s", strerror(errno)), -1;
    if (feof(f) || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return say(why, whylen, "not a .npy file (no \\x93NUMPY magic)"), -2;
    if (pre[6] < 1 || pre[6] > 3) /* 3.0 only allows utf-8 in the dict */
        return say(why, whylen, "unsupported .npy version %d.%d", pre[6],
                   pre[7]), -2;
    lenbytes = pre[6] == 1 ? 2 : 4;
    if (fread(pre + 8, 1, lenbytes, f) != lenbytes)
        return say(why, whylen, "truncated header"), -2;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen >= cap)
        return say(why, whylen, "header of %lu bytes is longer than %lu",
                   (unsigned long)hlen, (unsigned long)(cap - 1)), -2;
    if (fread(buf, 1, hlen, f) != hlen)
        return say(why, whylen, "truncated header"), -2;
    buf[hlen] = '\0';
    return 0;
}

/* dtype, order, then the shape against (rank, dims). */
static int check_header(const npy_header *h, int rank, const int *dims,
                        const npy_type *t, char *why, size_t whylen)
{
    long long want[RT_MAX_RANK];
    char got_s[NPY_MAX_DIMS * 24 + 8], want_s[RT_MAX_RANK * 24 + 8];
    int d, same = h->rank == rank;
    if (strcmp(h->descr, t->descr) != 0)
        return say(why, whylen, "dtype '%s' is not %s '%s'", h->descr, t->what,
                   t->descr), -2;
    if (h->fortran)
        return say(why, whylen, "fortran_order is True; only C order is "
                   "supported"), -2;
    for (d = 0; d < rank; d++) {
        want[d] = dims[d];
        if (same && h->dims[d] != want[d])
            same = 0;
    }
    if (same)
        return 0;
    shape_str(got_s, sizeof got_s, h->rank, h->dims);
    shape_str(want_s, sizeof want_s, rank, want);
    return say(why, whylen, "shape %s but expected %s", got_s, want_s), -3;
}

/* count little-endian elements into data; a short read is an I/O error if
 * the stream says so, otherwise a file that ends early. */
static int read_elems(FILE *f, void *data, size_t count, const npy_type *t,
                      char *why, size_t whylen)
{
    const size_t z = t->size;
    unsigned char buf[NPY_CHUNK * 8];
    size_t i, j, k, got;
    for (i = 0; i < count; i += k) {
        k = count - i < NPY_CHUNK ? count - i : NPY_CHUNK;
        got = fread(buf, 1, z * k, f);
        if (got != z * k) {
            if (ferror(f))
                return say(why, whylen, "read error: %s", strerror(errno)), -1;
            return say(why, whylen, "truncated data: %lu of %lu bytes",
                       (unsigned long)(z * i + got),
                       (unsigned long)(z * count)), -2;
        }
        for (j = 0; j < k; j++)
            get_elem(data, i + j, buf + z * j, t);
    }
    /* bytes past the data mean the header's shape is not the file's */
    got = fread(buf, 1, sizeof buf, f);
    if (got > 0) {
        unsigned long extra = (unsigned long)got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            extra += (unsigned long)got;
        return say(why, whylen, "%lu bytes after the data; the file holds "
                   "more than its shape says", extra), -2;
    }
    return 0;
}

static int npy_read(const char *path, void *data, int rank, const int *dims,
                    const npy_type *t, char *why, size_t whylen)
{
    char text[NPY_MAX_HEADER];
    npy_header h;
    size_t count = 1;
    FILE *f;
    int d, rc;
    if (rank < 0 || rank > RT_MAX_RANK)
        return say(why, whylen, "expected rank %d is outside 0..%d", rank,
                   RT_MAX_RANK), -3;
    for (d = 0; d < rank; d++)
        count *= dims[d] > 0 ? (size_t)dims[d] : 0;
    f = fopen(path, "rb");
    if (f == NULL)
        return say(why, whylen, "cannot open %s: %s", path, strerror(errno)), -1;
    rc = read_header_text(f, text, sizeof text, why, whylen);
    if (rc == 0)
        rc = parse_dict(text, &h, why, whylen);
    if (rc == 0)
        rc = check_header(&h, rank, dims, t, why, whylen);
    if (rc == 0 && data != NULL)
        rc = read_elems(f, data, count, t, why, whylen);
    fclose(f);
    return rc;
}

int rt_npy_read(const char *path, float *data, int rank, const int *dims,
                char *why, size_t whylen)
{
    return npy_read(path, data, rank, dims, &npy_f32, why, whylen);
}

int rt_npy_read_i64(const char *path, int64_t *data, int rank,
                    const int *dims, char *why, size_t whylen)
{
    return npy_read(path, data, rank, dims, &npy_i64, why, whylen);
}

#endif /* RT_NO_STDIO */
