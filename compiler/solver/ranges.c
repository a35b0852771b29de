/*
 * ranges.c: whole numbers at points 0..n-1 under additions over ranges of
 * points, with the least over a range and a hash of the points from one
 * on, each in O(log n). solve_arena.c's walk keeps the room left at each
 * point of the backward this way: a decision adds to a range (the
 * statements where a buffer is live), and on reaching a node the walk asks
 * for the least room over the statements it has closed and for a hash of
 * the rest, which used to cost a pass over every statement (a 96-layer GPT
 * has 4,400 points; the walk reaches a node millions of times).
 *
 * The least: a segment tree whose nodes hold the addition made to their
 * whole range and the least of their range with it. The hash: the sum of
 * value times a random odd weight per point, mod 2^64, which is linear in
 * the values, so an addition d over [from, to) changes the hash of a
 * suffix by d times the weights' sum over the overlap. Two Fenwick trees
 * over where additions start and stop give that sum for any suffix: with
 * D[p] the additions starting at p less those stopping there and W(p) the
 * weights' sum below p, the values' part of the hash below x is
 * W(x) * sum(D[p], p < x) - sum(D[p] * W(p), p < x).
 */
#include "solver.h"

#include <limits.h>
#include <string.h>

static uint64_t weight(uint64_t seed, uint64_t i)
{
    uint64_t h = seed ^ (i + 0x9e3779b97f4a7c15ULL);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return (h ^ (h >> 31)) | 1;
}

static void tree_build(Ranges *r, int node, int lo, int hi, const int64_t *v)
{
    if (hi - lo == 1) {
        r->least[node] = v[lo];
        return;
    }
    int mid = (lo + hi) / 2;
    tree_build(r, 2 * node, lo, mid, v);
    tree_build(r, 2 * node + 1, mid, hi, v);
    r->least[node] = r->least[2 * node] < r->least[2 * node + 1]
                         ? r->least[2 * node] : r->least[2 * node + 1];
}

void ranges_init(Ctx *c, Ranges *r, const int64_t *values, int n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    size_t nodes = 4 * ((size_t)n + 1);
    r->least = ctx_alloc(c, nodes * sizeof *r->least);
    r->add = ctx_alloc(c, nodes * sizeof *r->add);
    if (n > 0)
        tree_build(r, 1, 0, n, values);
    for (int f = 0; f < 2; f++) {
        r->w[f] = ctx_alloc(c, ((size_t)n + 1) * sizeof *r->w[f]);
        r->base[f] = ctx_alloc(c, ((size_t)n + 1) * sizeof *r->base[f]);
        r->dw[f] = ctx_alloc(c, ((size_t)n + 1) * sizeof *r->dw[f]);
        for (int i = 0; i < n; i++) {
            uint64_t o = weight(f + 1, (uint64_t)i);
            r->w[f][i + 1] = r->w[f][i] + o;
            r->base[f][i + 1] = r->base[f][i] + o * (uint64_t)values[i];
        }
    }
    r->d = ctx_alloc(c, ((size_t)n + 1) * sizeof *r->d);
}

static void tree_add(Ranges *r, int node, int lo, int hi, int from, int to,
                     int64_t d)
{
    if (to <= lo || hi <= from)
        return;
    if (from <= lo && hi <= to) {
        r->add[node] += d;
        r->least[node] += d;
        return;
    }
    int mid = (lo + hi) / 2;
    tree_add(r, 2 * node, lo, mid, from, to, d);
    tree_add(r, 2 * node + 1, mid, hi, from, to, d);
    int64_t a = r->least[2 * node], b = r->least[2 * node + 1];
    r->least[node] = (a < b ? a : b) + r->add[node];
}

static int64_t tree_min(const Ranges *r, int node, int lo, int hi, int from,
                        int to)
{
    if (to <= lo || hi <= from)
        return INT64_MAX;
    if (from <= lo && hi <= to)
        return r->least[node];
    int mid = (lo + hi) / 2;
    int64_t a = tree_min(r, 2 * node, lo, mid, from, to);
    int64_t b = tree_min(r, 2 * node + 1, mid, hi, from, to);
    int64_t m = a < b ? a : b;
    return m == INT64_MAX ? m : m + r->add[node];
}

/* Fenwick trees, 1-based inside: point p is index p + 1. */
static void fen_add(uint64_t *t, int n, int p, uint64_t v)
{
    for (int i = p + 1; i <= n; i += i & -i)
        t[i] += v;
}

static uint64_t fen_below(const uint64_t *t, int x)
{
    uint64_t s = 0;
    for (int i = x; i > 0; i -= i & -i)
        s += t[i];
    return s;
}

static void starts(Ranges *r, int p, int64_t d)
{
    if (p >= r->n)
        return;
    fen_add(r->d, r->n, p, (uint64_t)d);
    for (int f = 0; f < 2; f++)
        fen_add(r->dw[f], r->n, p, (uint64_t)d * r->w[f][p]);
}

void ranges_add(Ranges *r, int from, int to, int64_t d)
{
    from = from < 0 ? 0 : from;
    to = to > r->n ? r->n : to;
    if (from >= to || d == 0)
        return;
    tree_add(r, 1, 0, r->n, from, to, d);
    starts(r, from, d);
    starts(r, to, -d);
}

int64_t ranges_min(const Ranges *r, int from, int to)
{
    from = from < 0 ? 0 : from;
    to = to > r->n ? r->n : to;
    return from < to ? tree_min(r, 1, 0, r->n, from, to) : INT64_MAX;
}

/* Family f's hash of the points below x. */
static uint64_t hash_below(const Ranges *r, int f, int x)
{
    return r->base[f][x] + r->w[f][x] * fen_below(r->d, x) -
           fen_below(r->dw[f], x);
}

void ranges_hash(const Ranges *r, int from, uint64_t *h1, uint64_t *h2)
{
    from = from < 0 ? 0 : from > r->n ? r->n : from;
    *h1 = hash_below(r, 0, r->n) - hash_below(r, 0, from);
    *h2 = hash_below(r, 1, r->n) - hash_below(r, 1, from);
}
