/*
 * fuzz_policy.c: a libFuzzer target for policy files.
 *
 * The input is a policy file; it decides a fixed graph that has blocks,
 * nodes outside them, ops of every category the compiler has (matmul,
 * conv, attention, pointwise, reduction, normalization, shape) and names
 * that globs can tell apart, and the result is emitted as `remat compile` would.
 * As in fuzz_compile.c, one ctx_free must release everything, and bad input
 * must end in one message naming the policy file.
 */
#include "remat.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char graph[] =
    "<model name=\"pol\" format=\"1\"><graph>\n"
    "<input name=\"x\" shape=\"4 8\"/>\n"
    "<initializer name=\"w0\" shape=\"8 8\" init=\"uniform\"/>\n"
    "<initializer name=\"w1\" shape=\"8 8\" init=\"normal\" std=\"0.1\"/>\n"
    "<initializer name=\"b\" shape=\"8\" init=\"zeros\"/>\n"
    "<initializer name=\"g\" shape=\"8\" init=\"ones\"/>\n"
    "<initializer name=\"wc\" shape=\"2 2 3 3\" init=\"uniform\" low=\"-0.3\" high=\"0.3\"/>\n"
    "<node name=\"in\" op=\"Relu\" in=\"x\" out=\"e\"/>\n"
    "<block name=\"b0\">\n"
    "<node name=\"b0.fc\" op=\"Gemm\" in=\"e w0 b\" out=\"b0.h\"/>\n"
    "<node name=\"b0.act\" op=\"Gelu\" in=\"b0.h\" out=\"b0.gg\"/>\n"
    "<node name=\"b0.drop\" op=\"Dropout\" in=\"b0.gg\" out=\"b0.g\" ratio=\"0.1\"/>\n"
    "<node name=\"b0.t\" op=\"Tanh\" in=\"b0.g\" out=\"b0.u\" remat=\"must_save\"/>\n"
    "<node name=\"b0.res\" op=\"Add\" in=\"e b0.u\" out=\"b0.out\"/>\n"
    "</block>\n"
    "<block name=\"b1\">\n"
    "<node name=\"b1.mm\" op=\"MatMul\" in=\"b0.out w1\" out=\"b1.h\"/>\n"
    "<node name=\"b1.s\" op=\"Sigmoid\" in=\"b1.h\" out=\"b1.g\"/>\n"
    "<node name=\"b1.mul\" op=\"Mul\" in=\"b1.g b0.out\" out=\"b1.p\"/>\n"
    "<node name=\"b1.div\" op=\"Div\" in=\"b1.p b1.h\" out=\"b1.q\"/>\n"
    "<node name=\"b1.sub\" op=\"Sub\" in=\"b1.q b\" out=\"b1.d\"/>\n"
    "<node name=\"b1.ln\" op=\"LayerNormalization\" in=\"b1.d g b\" out=\"b1.n\"/>\n"
    "<node name=\"b1.sm\" op=\"Softmax\" in=\"b1.n\" out=\"b1.out\"/>\n"
    "</block>\n"
    "<block name=\"b2\">\n"
    "<node name=\"b2.img\" op=\"Reshape\" in=\"b1.out\" out=\"b2.i\" shape=\"1 2 4 4\"/>\n"
    "<node name=\"b2.conv\" op=\"Conv\" in=\"b2.i wc\" out=\"b2.c\" pads=\"1 1 1 1\"/>\n"
    "<node name=\"b2.pool\" op=\"MaxPool\" in=\"b2.c\" out=\"b2.p\" kernel_shape=\"2 2\"/>\n"
    "<node name=\"b2.seq\" op=\"Reshape\" in=\"b1.out\" out=\"b2.s\" shape=\"1 1 4 8\"/>\n"
    "<node name=\"b2.att\" op=\"Attention\" in=\"b2.s b2.s b2.s\" out=\"b2.a\" is_causal=\"1\"/>\n"
    "</block>\n"
    "<node name=\"tr\" op=\"Transpose\" in=\"b1.out\" out=\"t\"/>\n"
    "<node name=\"rows\" op=\"ReduceSum\" in=\"t\" out=\"r\" axes=\"0\"/>\n"
    "<node name=\"gap\" op=\"GlobalAveragePool\" in=\"b2.p\" out=\"gp\"/>\n"
    "<node name=\"m1\" op=\"ReduceMean\" in=\"r\" out=\"l1\" keepdims=\"0\"/>\n"
    "<node name=\"m2\" op=\"ReduceMean\" in=\"gp\" out=\"l2\" keepdims=\"0\"/>\n"
    "<node name=\"m3\" op=\"ReduceMean\" in=\"b2.a\" out=\"l3\" keepdims=\"0\"/>\n"
    "<node name=\"s1\" op=\"Add\" in=\"l1 l2\" out=\"l12\"/>\n"
    "<node name=\"loss\" op=\"Add\" in=\"l12 l3\" out=\"l\"/>\n"
    "<output name=\"l\"/>\n"
    "</graph></model>\n";

static void check_message(const Ctx *c, const char *file)
{
    if (strncmp(c->err, file, strlen(file)) != 0 || strchr(c->err, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const file = "fuzz.policy.xml";
    Ctx c;
    ctx_init(&c);
    Graph *g;
    Policy *p = ctx_alloc(&c, sizeof *p);
    Compiled m;
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    if (parse_graph_memory(&c, "pol.xml", graph, sizeof graph - 1, &g))
        abort();                /* the fixed graph always parses */
    if (parse_policy_memory(&c, file, (const char *)data, size, p))
        check_message(&c, file);
    else if (compile_parsed(&c, g, p, NULL, &m) ||
             emit_c(&c, &m, "pol.h", &cf, &hf, NULL))
        abort();                /* any valid policy compiles a valid graph */
    ctx_free(&c);
    return 0;
}
