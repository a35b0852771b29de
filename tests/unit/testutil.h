/* testutil.h: small graphs from strings, for the compiler's unit tests. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include "remat.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A model with the given body inside <graph>. */
static inline const char *model_xml(Ctx *c, const char *body)
{
    return ctx_printf(c, "<?xml version=\"1.0\"?>\n<model name=\"t\" "
                         "format=\"1\"><graph>\n%s\n</graph></model>\n", body);
}

/* Parses and compiles under a built-in policy; fails the test on error. */
static inline Compiled compile_body(Ctx *c, const char *body, const char *policy)
{
    const char *xml = model_xml(c, body);
    Graph *g = NULL;
    Policy *p = NULL;
    Compiled m;
    memset(&m, 0, sizeof m);
    int rc = policy_load(c, policy, &p) ||
             parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) ||
             compile_parsed(c, g, p, NULL, &m);
    ck_assert_msg(rc == 0, "compile failed: %s", c->err);
    return m;
}

/* Compiles a body that must fail; returns the message. */
static inline const char *error_of(Ctx *c, const char *body)
{
    const char *xml = model_xml(c, body);
    Graph *g = NULL;
    Policy *p = NULL;
    Compiled m;
    int rc = policy_load(c, "none", &p) ||
             parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) ||
             compile_parsed(c, g, p, NULL, &m);
    ck_assert_msg(rc != 0, "expected an error, compiled fine");
    return c->err;
}

#define ck_assert_contains(hay, needle)                                        \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' lacks '%s'", (hay),  \
                  (needle))

static inline int tensor_id(const Compiled *m, const char *name)
{
    int t = tensor_lookup(m->g, name);
    ck_assert_msg(t >= 0, "no tensor %s", name);
    return t;
}

static inline Keep keep_of(const Compiled *m, const char *name)
{
    return m->remat->keep[tensor_id(m, name)];
}

/* Runs one suite; the exit status says whether it passed. */
static inline int run_suite(Suite *s)
{
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
