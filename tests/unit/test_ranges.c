/* test_ranges.c: ranges.c against a plain array under random additions:
 * the least over every range, and the hash of a suffix, equal where the
 * suffixes are equal and (here, with 64-bit hashes) different where not. */
#include "testutil.h"
#include "solver/solver.h"

#include <stdint.h>

static uint64_t rng = 88172645463325252ULL;

static int64_t next(int64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)n);
}

static int64_t least(const int64_t *v, int from, int to)
{
    int64_t m = INT64_MAX;
    for (int i = from; i < to; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

START_TEST(matches_an_array)
{
    for (int n = 1; n <= 37; n += 6) {
        Ctx c;
        ctx_init(&c);
        int64_t *v = ctx_alloc(&c, (size_t)n * sizeof *v);
        for (int i = 0; i < n; i++)
            v[i] = next(1000) - 500;
        Ranges r;
        ranges_init(&c, &r, v, n);
        for (int step = 0; step < 400; step++) {
            int from = (int)next(n + 1), to = (int)next(n + 1);
            int64_t d = next(2001) - 1000;
            ranges_add(&r, from, to, d);
            for (int i = from; i < to; i++)
                v[i] += d;
            for (int a = 0; a <= n; a++)
                for (int b = a; b <= n; b++)
                    ck_assert_msg(ranges_min(&r, a, b) == least(v, a, b),
                                  "n %d step %d: least over [%d, %d)", n,
                                  step, a, b);
        }
        /* a second set of ranges built from the final values: every
         * suffix hashes the same */
        Ranges fresh;
        ranges_init(&c, &fresh, v, n);
        for (int from = 0; from <= n; from++) {
            uint64_t h1, h2, g1, g2;
            ranges_hash(&r, from, &h1, &h2);
            ranges_hash(&fresh, from, &g1, &g2);
            ck_assert(h1 == g1 && h2 == g2);
        }
        /* one point changed: the suffixes holding it hash differently,
         * the others the same */
        int at = (int)next(n);
        ranges_add(&fresh, at, at + 1, 64);
        for (int from = 0; from <= n; from++) {
            uint64_t h1, h2, g1, g2;
            ranges_hash(&r, from, &h1, &h2);
            ranges_hash(&fresh, from, &g1, &g2);
            ck_assert((h1 == g1) == (from > at) && (h2 == g2) == (from > at));
        }
        ctx_free(&c);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ranges");
    TCase *t = tcase_create("ranges");
    tcase_add_test(t, matches_an_array);
    suite_add_tcase(s, t);
    return run_suite(s);
}
