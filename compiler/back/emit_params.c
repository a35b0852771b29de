/*
 * emit_params.c: which parameters the generated code reads from flash.
 *
 * A frozen parameter (trainable="false", --freeze) that no train step
 * updates is never written by any generated function. When its values are
 * known at compile time it need not be in the caller's writable params
 * buffer at all: it goes into the C file's static const NAME_frozen[],
 * which a linker places in read-only memory (.rodata, a microcontroller's
 * flash). Its values are known when init fills it with a constant, when
 * they are data read at compile time (init="file", an ONNX initializer,
 * embedded even where the trainable ones go to NAME.weights), and when
 * init draws them from
 * the seed and the compile was given one (--seed N): then the compiler
 * makes init's draws itself, with the runtime's own initializers and the
 * same stream numbers, so the values are those init(params, N) would have
 * written, bit for bit. Without --seed a drawn frozen parameter stays in
 * params, where init draws it at run time. ram.c's frozen_tensors decides,
 * so that flash_bytes counts what is here.
 *
 * NAME_frozen[] is printed with fmt_float's 9 significant digits, which
 * read back to the same float, eight to a line: the same graph, policy and
 * seed give the same bytes.
 */
#include "../remat.h"
#include "../../runtime/remat_rt.h"

#include <string.h>

/* Tensor x's values as init would write them, into v; stream is its
 * number among init's parameters (emit.c's emit_init counts the same). */
static void initial_values(const Compiled *m, const Tensor *x, int stream,
                           float *v)
{
    size_t n = (size_t)x->numel;
    switch (x->init) {
    case INIT_ZEROS: rt_fill(v, n, 0.0f); break;
    case INIT_ONES: rt_fill(v, n, 1.0f); break;
    case INIT_CONSTANT: rt_fill(v, n, x->init_a); break;
    case INIT_UNIFORM:
        rt_init_uniform(v, n, x->init_a, x->init_b, m->g->seed,
                        (uint64_t)stream);
        break;
    case INIT_NORMAL:
        rt_init_normal(v, n, x->init_a, x->init_b, m->g->seed, (uint64_t)stream);
        break;
    case INIT_FILE: memcpy(v, x->data, n * sizeof *v); break;
    }
}

void emit_frozen_data(Emit *e, const Compiled *m, size_t floats)
{
    const Graph *g = e->g;
    if (floats == 0)
        return;
    float *v = ctx_alloc(e->ctx, floats * sizeof *v);
    int stream = 0, drawn = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind != T_PARAM || x->is_int)
            continue;
        if (e->frozen[t]) {
            initial_values(m, x, stream, v + e->offset[t]);
            drawn |= x->init == INIT_UNIFORM || x->init == INIT_NORMAL;
        }
        stream++;
    }
    emit(e, "/* The frozen parameters' values, known at compile time: read only,");
    emit(e, " * so they stay in flash (%s_frozen_params[] says where each is).%s",
         g->name, drawn ? "" : " */");
    if (drawn)
        emit(e, " * The drawn ones are %s_init's draws with seed %llu (--seed). */",
             g->name, (unsigned long long)m->g->seed);
    emit(e, "static const float %s_frozen[%zu] = {", g->name, floats);
    for (size_t i = 0; i < floats; i += 8) {
        Buf b;
        buf_init(&b, e->ctx);
        for (size_t j = i; j < i + 8 && j < floats; j++)
            buf_printf(&b, "%s,", fmt_float(e->ctx, v[j]));
        emit(e, "    %s", b.data);
    }
    emit(e, "};");
    emit(e, "");
}
