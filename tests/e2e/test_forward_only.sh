#!/usr/bin/env bash
# A graph without a loss compiles forward only (tests/graphs/forward_only.xml:
# outputs probs and feat, 4x5 each, and a scalar s marked loss="false"):
# NAME_forward alone, no backward, train step or SGD; the reports say so;
# its trainer dumps inputs, parameters and outputs, and the outputs match
# PyTorch (tests/ref/reference.py); --load needs only the inputs and the
# trainable parameters. A training graph dumps its outputs too, the loss
# among them.
. "$(dirname "$0")/lib.sh"
G=tests/graphs/forward_only.xml
PY=/usr/bin/python3
expect() {   # description expected actual
    if [ "$2" = "$3" ]; then ok; else bad "$1: expected '$2', got '$3'"; fi
}
# runs the trainer $T: stdout to $work/out, stderr to $work/err; succeeds
# when its exit status is $1
T=$work/fo
run() {
    local want=$1 rc=0
    shift
    "$T" "$@" > "$work/out" 2> "$work/err" || rc=$?
    [ "$rc" -eq "$want" ] || { echo "  $T $*: exit $rc, wanted $want"; cat "$work/err"; return 1; }
}
one_line() { [ "$(wc -l < "$work/err")" -eq 1 ] && grep -qF -- "$1" "$work/err"; }

# --- the generated code ---------------------------------------------------------
for p in none full sac; do
    "$remat" compile "$G" --policy $p -o "$work/$p.c" || { bad "compile $p"; continue; }
    cc -std=c99 -Wall -Wextra -pedantic -Wcast-align=strict -Werror -Iruntime -c "$work/$p.c" -o "$work/$p.o" \
        && ok || bad "$p: warnings"
done
h=$work/none.h c=$work/none.c
grep -q '^#define FORWARD_ONLY_HAS_TRAIN_STEP 0$' "$h" && ok || bad "header lacks HAS_TRAIN_STEP 0"
grep -q '^float forward_only_forward(' "$c" && ok || bad "no forward function"
grep -qE '^(float|void) forward_only_(train_step|sgd)\(' "$h" && bad "the header declares a train step or sgd" || ok
grep -qE '^(float|void) forward_only_(train_step|sgd)\(' "$c" && bad "a train step or sgd is defined" || ok
grep -qE 'rt_[a-z_0-9]*_backward|grads' "$c" && bad "forward-only code has a backward" || ok
grep -q '    forward_only_init, forward_only_forward, NULL, NULL,' "$c" && ok \
    || bad "the descriptor's train_step and sgd are not NULL"
# every policy gives the same code: nothing is saved or recomputed
sed 's/none/X/g' "$work/none.c" > "$work/a" && sed 's/full/X/g' "$work/full.c" > "$work/b"
cmp -s "$work/a" "$work/b" && ok || bad "none and full differ on a forward-only graph"
# the model's own descriptor, from C: train_step and sgd are NULL
cat > "$work/probe.c" <<'EOF'
#include "none.h"
#include <stdio.h>
int main(void)
{
#if FORWARD_ONLY_HAS_TRAIN_STEP
    return 1;
#else
    return forward_only_model.train_step != NULL || forward_only_model.sgd != NULL;
#endif
}
EOF
cc -std=c99 -Wall -Wextra -pedantic -Wcast-align=strict -Werror -I"$work" -Iruntime "$work/probe.c" "$c" \
    dist/remat_rt.c -lopenblas -lm -o "$work/probe" && "$work/probe" && ok \
    || bad "the descriptor has a train step"
# a training graph says it has one
"$remat" compile tests/graphs/embedding_loss.xml -o "$work/el.c"
grep -q '^#define EMBEDDING_LOSS_HAS_TRAIN_STEP 1$' "$work/el.h" && ok || bad "training header lacks HAS_TRAIN_STEP 1"

# --- the reports -----------------------------------------------------------------
"$remat" schedule "$G" --policy full > "$work/sched"
head -1 "$work/sched" | grep -q 'forward only' && ok || bad "schedule does not say forward only"
expect "saved_bytes" 0 "$(sed -n 's/^saved_bytes: //p' "$work/sched")"
expect "recompute_executions" 0 "$(sed -n 's/^recompute_executions: //p' "$work/sched")"
expect "forward_executions" 8 "$(sed -n 's/^forward_executions: //p' "$work/sched")"
expect "tensor lines" 8 "$(grep -c '  forward only: no backward$' "$work/sched")"
# the table's rows: after its header, before the figures (name: value)
expect "decisions other than -" 0 "$(awk 'rows && !/:/ && $6 != "-"; /^tensor /{rows=1}' "$work/sched" | wc -l)"
"$remat" pareto "$G" > "$work/pareto" && ok || bad "pareto fails"
expect "pareto plans" 1 "$(grep -cE '^ +[0-9.]+ +0 +[0-9]+ +0 +0\.0+ +[0-9]+$' "$work/pareto")"
grep -q 'forward only' "$work/pareto" && ok || bad "pareto does not say forward only"
"$remat" schedule "$G" --budget 0.5 | grep -q '^saved_bytes: 0$' && ok || bad "a budget is not trivially met"
"$remat" schedule "$G" --max-arena 100 2> "$work/err"
expect "--max-arena below the forward's arena: exit" 1 $?
grep -q 'max-arena 100 bytes cannot be met' "$work/err" && ok || bad "max-arena message: $(cat "$work/err")"

# --- the trainer -------------------------------------------------------------------
"$remat" build "$G" -o "$T" || { bad "build"; finish test_forward_only; exit; }
run 0 --seed 2 --dump "$work/d" && ok || bad "--dump"
expect "dumped files" "input.tokens.npy input.x.npy output.feat.npy output.probs.npy output.s.npy param.b.npy param.scale.npy param.table.npy param.w.npy " \
    "$(cd "$work/d" && ls | tr '\n' ' ')"
# the outputs against PyTorch in float64 (Dropout passing through), and the
# check fails when an output is 1% off
$PY tests/ref/reference.py --tol 1e-5 "$G" "$work/d" && ok || bad "outputs differ from torch"
cp -r "$work/d" "$work/dbad"
$PY -c 'import sys, numpy as np; p = sys.argv[1]; np.save(p, np.load(p) * np.float32(1.01))' \
    "$work/dbad/output.probs.npy"
$PY tests/ref/reference.py --tol 1e-5 "$G" "$work/dbad" > /dev/null && bad "reference missed a 1% output error" || ok
# s is the sum of feat, and probs' rows sum to 1
$PY - "$work/d" <<'EOF' && ok || bad "outputs inconsistent"
import sys, numpy as np
d = sys.argv[1] + "/"
feat, probs, s = (np.load(d + f"output.{n}.npy") for n in ("feat", "probs", "s"))
assert feat.shape == (4, 5) and probs.shape == (4, 5) and s.shape == (), (feat.shape, s.shape)
assert abs(float(s) - feat.astype(np.float64).sum()) <= 1e-5, (s, feat.sum())
assert np.allclose(probs.sum(axis=1), 1, atol=1e-6), probs.sum(axis=1)
EOF
run 2 --steps 3 && one_line "forward only (it has no loss): --steps needs a train step" && ok \
    || bad "--steps on a forward-only model"
run 0 --bench 3 && grep -q '^median_ms ' "$work/out" && ok || bad "--bench times the forward"
run 0 --help && grep -q 'forward only' "$work/out" && ok || bad "--help does not say forward only"

# --load: the inputs and the trainable parameters only (scale is a constant)
mkdir "$work/l"
cp "$work"/d/input.*.npy "$work"/d/param.table.npy "$work"/d/param.w.npy "$work"/d/param.b.npy "$work/l/"
run 0 --load "$work/l" --dump "$work/d2" && ok || bad "--load with inputs and trainable params"
for f in "$work"/d/*.npy; do
    cmp -s "$f" "$work/d2/${f##*/}" || bad "--load: ${f##*/} differs"
done
# scale is a constant fill the compiler knows: static const, in flash
# (docs/training.md#frozen-parameters-in-flash), so --load takes its file
# only with the values compiled in, and refuses others in one line
cp "$work/d/param.scale.npy" "$work/l/"
run 0 --load "$work/l" --dump "$work/d3" && cmp -s "$work/d/output.feat.npy" "$work/d3/output.feat.npy" \
    && ok || bad "--load of the compiled-in scale's own values"
$PY -c 'import sys, numpy as np; np.save(sys.argv[1], np.full(5, 2, np.float32))' "$work/l/param.scale.npy"
run 1 --load "$work/l" --dump "$work/d4" &&
    grep -q "'scale' is frozen and its values are compiled into this program" "$work/err" && ok \
    || bad "--load of other values for the compiled-in scale: $(cat "$work/err")"
rm "$work/l/param.w.npy"
run 1 --load "$work/l" --dump "$work/d4" &&
    one_line "$work/l/param.w.npy: no such file; --load needs every input and every trainable parameter (this parameter is trainable)" \
    && ok || bad "missing trainable parameter: $(cat "$work/err")"
cp "$work/d/param.w.npy" "$work/l/" && rm "$work/l/input.tokens.npy"
run 1 --load "$work/l" --dump "$work/d5" && one_line "$work/l/input.tokens.npy: no such file" \
    && ok || bad "missing int64 input: $(cat "$work/err")"
[ -e "$work/d4" ] || [ -e "$work/d5" ] && bad "a failed --load wrote a dump" || ok

# --- a training graph dumps its outputs too: the loss among them -----------------
T=$work/el
"$remat" build tests/graphs/embedding_loss.xml -o "$T" && run 0 --seed 1 --dump "$work/e" && ok || bad "embedding_loss trainer"
$PY - "$work/e" <<'EOF' && ok || bad "output.loss.npy is not the loss"
import sys, numpy as np
d = sys.argv[1] + "/"
out, loss = np.load(d + "output.loss.npy"), np.load(d + "loss.npy")
assert out.dtype == np.float32 and out.shape == loss.shape == (), (out.dtype, out.shape)
assert out == loss and np.isfinite(loss), (out, loss)
EOF

finish test_forward_only
