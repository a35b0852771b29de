/*
 * fuzz_compile.c: a libFuzzer target over the whole compile pipeline.
 *
 * The input is a graph file. It goes through what `remat compile` runs
 * (parse, shapes, autodiff, remat, schedule, plan, emit), in memory, under
 * a built-in policy picked by the input's size so that every policy meets
 * every kind of graph. One ctx_free releases everything: with the leak
 * check on, that proves no path, failing or not, leaves memory behind.
 *
 * The document is named as if it were in tests/graphs/ (libFuzzer runs
 * from the repository's root), so that init="file" paths resolve as they
 * do for the seed graphs there and the .npy reader is fuzzed too.
 *
 * Bad input must end in one message naming the file, never in a crash, a
 * hang or a multi-line message; the last is checked here (a crash, a hang
 * and a leak the sanitizers and libFuzzer catch).
 */
#include "remat.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What main.c would print: the file name first, on one line. */
static void check_message(const Ctx *c, const char *file)
{
    if (strncmp(c->err, file, strlen(file)) != 0 || strchr(c->err, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const file = "tests/graphs/fuzz.xml";
    Ctx c;
    ctx_init(&c);
    Graph *g;
    Policy *p;
    Compiled m;
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    if (policy_load(&c, builtin_policies[size % 4], &p))
        abort();                /* the built-ins always load */
    if (parse_graph_memory(&c, file, (const char *)data, size, &g) ||
        compile_parsed(&c, g, p, NULL, &m) || emit_c(&c, &m, "fuzz.h", &cf, &hf, NULL))
        check_message(&c, file);
    ctx_free(&c);
    return 0;
}
