/*
 * back.h: what the back end's files share and no other stage needs: where
 * a step's live bytes peak, which memory.c finds and report.c prints in
 * the schedule report too; and which parameters emit.c puts in flash
 * (emit_params.c).
 */
#ifndef BACK_H
#define BACK_H

#include "../remat.h"

/* What holds live bytes: the picture's stacked kinds, bottom to top. */
enum { HOLD_SAVED, HOLD_FORWARD, HOLD_RECOMPUTED, HOLD_GRADIENT, HOLD_SCRATCH,
       NHOLDS };

/* Where a step's live bytes peak and what holds them there. */
typedef struct {
    int statement;          /* the first with the most live bytes; -1: none */
    const char *does;       /* what it does: "backward MatMul l3.fc2" */
    int backward;           /* it is in the backward part of the step */
    double bytes[NHOLDS];   /* the bytes live there, by what holds them */
} Peak;

extern const char *const hold_names[NHOLDS];

/* The peak of s, one of m's schedules (its train step, or its forward). */
void find_peak(Ctx *c, const Compiled *m, const Schedule *s, Peak *p);
/* A sentence on why recomputed values at the peak matter, or NULL when
 * none is live there. */
const char *peak_note(Ctx *c, const Peak *p);
/* The peak as `key: value` lines: peak_statement, peak_does,
 * peak_KIND_bytes per kind, and peak_note when there is one. */
void report_peak(Buf *b, const Peak *p);

/* The int64 values input t accepts, what every reader of it takes (the
 * generated table's lo, hi, has_ignore and ignore; emit.c). */
IntRange int_input_range(const Graph *g, int t);

/* static const float NAME_frozen[floats], each frozen tensor's values at
 * e->offset[t], as init would write them; nothing when floats is 0. */
void emit_frozen_data(Emit *e, const Compiled *m, size_t floats);

#endif
