/* The cost model (compiler/middle/cost.c): what a node costs in time, the rates
 * file, and the budget solver minimizing time rather than FLOPs. */
#define _DEFAULT_SOURCE     /* mkstemp, setenv */
#include "testutil.h"

#include <math.h>
#include <unistd.h>

/* The graph of body, shaped (no policy needed to price a node). */
static Graph *shaped(Ctx *c, const char *body)
{
    const char *xml = model_xml(c, body);
    Graph *g;
    ck_assert_msg(parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) == 0 &&
                  infer_shapes(c, g) == 0, "%s", c->err);
    return g;
}

static const Node *node_named(const Graph *g, const char *name)
{
    for (int k = 0; k < g->nnodes; k++)
        if (strcmp(g->nodes[k].name, name) == 0)
            return &g->nodes[k];
    ck_abort_msg("no node %s", name);
    return NULL;
}

/* A Transpose of n x 8 floats, and a Reshape (a view) of it. */
static double transpose_cost(Ctx *c, int n, double *view)
{
    const char *body = ctx_printf(c,
        "<input name='x' shape='%d 8'/>"
        "<node name='t' op='Transpose' in='x' out='y' perm='1 0'/>"
        "<node name='r' op='Reshape' in='y' out='z' shape='-1'/>"
        "<output name='z'/>", n);
    Graph *g = shaped(c, body);
    *view = node_cost(rates_builtin(), g, node_named(g, "r"));
    return node_cost(rates_builtin(), g, node_named(g, "t"));
}

START_TEST(transpose_costs_its_bytes)
{
    Ctx c;
    ctx_init(&c);
    double view, small = transpose_cost(&c, 4, &view);
    ck_assert_double_gt(small, 0);
    ck_assert_double_eq(view, 0);       /* a view is a pointer */
    double big = transpose_cost(&c, 4096, &view);
    ck_assert_double_gt(big, small);
    /* no FLOPs: 4096 x 8 floats read and written, at the memory rate */
    double want = nearbyint(2 * 4 * 4096 * 8 / rates_builtin()->bytes_per_s *
                            PS_PER_S);
    ck_assert_double_eq(big, want);
    ctx_free(&c);
}
END_TEST

/* Two free decisions and room to save one: xt, a Transpose of the input
 * (1024 floats: a copy, no FLOPs), read by dW1; or b, Tanh of a parameter
 * (512 floats, 4 FLOPs each), read by its own backward. The budget, 4096
 * bytes, holds xt or b, not both. Recomputing xt moves 8 KiB; recomputing
 * b moves 4 KiB and does 2048 FLOPs. With cheap bytes the copy is the one
 * to rebuild; where bytes are dear, the copy is saved and Tanh rebuilt. */
static const char *copy_or_flops =
    "<input name='x' shape='64 16'/>"
    "<initializer name='W1' shape='64 8' init='uniform'/>"
    "<initializer name='W2' shape='16 32' init='uniform'/>"
    "<node name='t' op='Transpose' in='x' out='xt' perm='1 0'/>"
    "<node name='m1' op='MatMul' in='xt W1' out='o1'/>"
    "<node name='th' op='Tanh' in='W2' out='b'/>"
    "<node name='s1' op='ReduceSum' in='o1' out='r1' keepdims='0'/>"
    "<node name='s2' op='ReduceSum' in='b' out='r2' keepdims='0'/>"
    "<node name='add' op='Add' in='r1 r2' out='loss'/>"
    "<output name='loss'/>";

static Compiled within_4096(Ctx *c, const Rates *rates)
{
    const char *xml = model_xml(c, copy_or_flops);
    Graph *g;
    Policy *p;
    Budget b = {BUDGET_BYTES, 4096, 0, rates, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    ck_assert_msg(policy_load(c, "sac", &p) == 0 &&
                  parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) == 0 &&
                  compile_parsed(c, g, policy_soften(c, p), &b, &m) == 0,
                  "%s", c->err);
    ck_assert(m.remat->proven);
    return m;
}

START_TEST(dear_bytes_save_the_copy)
{
    Ctx c;
    ctx_init(&c);
    static const Rates cheap_bytes = {1e9, 1e9, 1e12};
    Compiled m = within_4096(&c, &cheap_bytes);
    ck_assert_int_eq(keep_of(&m, "xt"), KEEP_RECOMPUTE);
    ck_assert_int_eq(keep_of(&m, "b"), KEEP_SAVE);
    static const Rates dear_bytes = {1e9, 1e9, 1e6};
    m = within_4096(&c, &dear_bytes);
    ck_assert_int_eq(keep_of(&m, "xt"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "b"), KEEP_RECOMPUTE);
    /* Tanh's 2048 FLOPs at 1e9 and its 4096 bytes at 1e6 */
    Summary s;
    summarize(&m, &s);
    ck_assert_double_eq_tol(s.recompute_seconds, 2048e-9 + 4096e-6, 1e-12);
    ck_assert_double_eq(s.recompute_flops, 2048);
    ctx_free(&c);
}
END_TEST

/* ---- the rates file ---------------------------------------------------------- */

/* A temporary file holding text; its path. */
static const char *temp_file(Ctx *c, const char *text)
{
    char *path = ctx_strdup(c, "/tmp/remat-rates-XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* rates_read's message for text, with the file's name taken out. */
static const char *read_error(Ctx *c, const char *text)
{
    const char *path = temp_file(c, text);
    Rates rt;
    int rc = rates_read(c, path, &rt);
    remove(path);
    ck_assert_msg(rc != 0, "read fine: %s", text);
    ck_assert(strncmp(c->err, path, strlen(path)) == 0);
    return c->err + strlen(path);
}

START_TEST(rates_file_round_trip)
{
    Ctx c;
    ctx_init(&c);
    Rates want = {1.25e9, 3e8, 7.5e9}, got;
    char *top = ctx_strdup(&c, "/tmp/remat-rates-XXXXXX");
    ck_assert(mkdtemp(top) != NULL);
    const char *path = ctx_printf(&c, "%s/sub/dir/rates", top);
    ck_assert(rates_write(&c, path, &want) == 0);
    ck_assert(rates_read(&c, path, &got) == 0);
    ck_assert_double_eq(got.gemm_flops_per_s, want.gemm_flops_per_s);
    ck_assert_double_eq(got.other_flops_per_s, want.other_flops_per_s);
    ck_assert_double_eq(got.bytes_per_s, want.bytes_per_s);
    /* REMAT_RATES: the file, builtin, or a missing file (built-in) */
    const char *from;
    setenv("REMAT_RATES", path, 1);
    ck_assert(rates_load(&c, &got, &from) == 0 && strcmp(from, path) == 0);
    ck_assert_double_eq(got.bytes_per_s, 7.5e9);
    setenv("REMAT_RATES", "builtin", 1);
    ck_assert(rates_load(&c, &got, &from) == 0 && strcmp(from, "builtin") == 0);
    ck_assert_double_eq(got.bytes_per_s, rates_builtin()->bytes_per_s);
    setenv("REMAT_RATES", ctx_printf(&c, "%s.missing", path), 1);
    ck_assert(rates_load(&c, &got, &from) == 0 && strcmp(from, "builtin") == 0);
    unsetenv("REMAT_RATES");
    ck_assert(remove(path) == 0 &&
              rmdir(ctx_printf(&c, "%s/sub/dir", top)) == 0 &&
              rmdir(ctx_printf(&c, "%s/sub", top)) == 0 && rmdir(top) == 0);
    ctx_free(&c);
}
END_TEST

START_TEST(rates_file_errors)
{
    Ctx c;
    ctx_init(&c);
    const char *full = "gemm_flops_per_s 1e9\nother_flops_per_s 1e8\n";
    ck_assert_str_eq(read_error(&c, ctx_printf(&c, "# rates\n%sbyte_per_s 4e9\n",
                                                full)),
                     ":4: unknown key 'byte_per_s' (did you mean "
                     "'bytes_per_s'?); the keys are gemm_flops_per_s, "
                     "other_flops_per_s and bytes_per_s");
    static const char *const not_a_rate[] = {"fast", "-4", "", "1 2"};
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(
            read_error(&c, ctx_printf(&c, "%sbytes_per_s%s%s\n", full,
                                      *not_a_rate[i] ? " " : "", not_a_rate[i])),
            ctx_printf(&c, ":3: 'bytes_per_s' needs one positive number after "
                       "it (e.g. 'bytes_per_s 1.5e9'), got '%s'",
                       not_a_rate[i]));
    ck_assert_str_eq(read_error(&c, ctx_printf(&c, "%sgemm_flops_per_s 2e9\n",
                                                full)),
                     ":3: 'gemm_flops_per_s' given twice; give each key once");
    ck_assert_str_eq(read_error(&c, full),
                     ":2: no 'bytes_per_s' line; the file needs "
                     "gemm_flops_per_s, other_flops_per_s and bytes_per_s "
                     "(remat calibrate writes one)");
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost");
    TCase *t = tcase_create("cost");
    tcase_add_test(t, transpose_costs_its_bytes);
    tcase_add_test(t, dear_bytes_save_the_copy);
    tcase_add_test(t, rates_file_round_trip);
    tcase_add_test(t, rates_file_errors);
    suite_add_tcase(s, t);
    return run_suite(s);
}
