/*
 * fuzz_onnx.c: a libFuzzer target over the ONNX front end and everything
 * after it. The input is a model file: protobuf-c decodes it, onnx.c
 * folds, rewrites and lowers it to the format's XML, parse.c reads that,
 * and the pipeline compiles it as `remat compile model.onnx` would. Bad
 * input must end in one message that names the file, on one line; a
 * crash, a hang or a leak the sanitizers and libFuzzer catch.
 */
#include "remat.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const file = "tests/onnx/fuzz.onnx";
    Ctx c;
    ctx_init(&c);
    Graph *g;
    Policy *p;
    Compiled m;
    Imported im;
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ImportOptions opt = {NULL, 1};
    if (policy_load(&c, builtin_policies[size % 4], &p))
        abort();
    if (onnx_import(&c, file, (const char *)data, size, &opt, &im) ||
        parse_graph_imported(&c, file, &im, &g) ||
        compile_parsed(&c, g, p, NULL, &m) ||
        emit_c(&c, &m, "fuzz.h", &cf, &hf, NULL)) {
        if (strncmp(c.err, file, strlen(file)) != 0 || strchr(c.err, '\n'))
            abort();
    }
    ctx_free(&c);
    return 0;
}
