#!/usr/bin/env bash
# End-to-end test of what a device holds (docs/memory.md, "RAM and flash"):
# ram_bytes and flash_bytes against sums worked by hand from the graphs'
# shapes (mlp_tiny with and without --freeze, under each optimizer, fused
# or not; BatchNorm's running statistics; int64 constants; a forward-only
# graph), the terms adding up, --json equal to the text, the header's
# NAME_RAM_BYTES and NAME_FLASH_BYTES equal to schedule's, pareto's and
# memory's figures equal to schedule's, and --max-ram: proven where a plan
# that recomputes each tensor once fits (the least recompute within the
# bound, as --max-arena of what the fixed terms leave), below that a plan
# that rebuilds at each use (not proven, gradients bitwise none's), refused
# in one line naming the least RAM found and its terms where none does,
# and its usage errors.
# Needs /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

py=/usr/bin/python3
g=tests/graphs/mlp_tiny.xml

# fig NAME FILE: the value of a `NAME: value` line
fig() { sed -n "s/^$1: //p" "$2"; }

# ---- mlp_tiny by hand ----------------------------------------------------------
# 4 blocks of two Gemms, each a 32x32 weight and a 32 bias: 8 x 1,056 =
# 8,448 floats, 33,792 bytes. Inputs x and target, 8x32 each, 2,048 bytes;
# the one output, the loss, 4: io 2,052. Frozen b0.*: its two Gemms
# (2,112 floats, 8,448 bytes) go to flash and 25,344 bytes train.
P=33792; IO=2052
# check NAME WANT_PARAMS WANT_OPT WANT_GRADS WANT_FLASH ARENA_KEY ARGS...:
# the terms against the hand-worked ones, the arena against the plan's own
# figure (arena_bytes, or fused_arena_bytes when fused), the total their sum
check() {
    local name=$1 p=$2 o=$3 gr=$4 fl=$5 akey=$6
    shift 6
    run 0 "$remat" schedule "$g" "$@" || { bad "$name: schedule"; return; }
    cp "$work/out" "$work/$name.txt"
    local s=$work/$name.txt a
    a=$(fig "$akey" "$s")
    [ "$(fig ram_params_bytes "$s")" = "$p" ] && [ "$(fig ram_optimizer_bytes "$s")" = "$o" ] &&
        [ "$(fig ram_gradient_bytes "$s")" = "$gr" ] && [ "$(fig ram_io_bytes "$s")" = "$IO" ] &&
        [ "$(fig ram_arena_bytes "$s")" = "$a" ] && [ "$(fig flash_bytes "$s")" = "$fl" ] &&
        [ "$(fig ram_bytes "$s")" = "$((p + o + gr + IO + a))" ] && ok ||
        bad "$name: $(grep -E '^(ram|flash)' "$s" | tr '\n' ' ') wanted params $p optimizer $o grads $gr flash $fl arena $akey $a"
    run 0 "$remat" schedule "$g" "$@" --json && cp "$work/out" "$work/$name.json" &&
        $py - "$work/$name.json" "$s" <<'EOF' && ok || bad "$name: --json differs from the text"
import json, sys
d = json.load(open(sys.argv[1]))['summary']
for line in open(sys.argv[2]):
    k, _, v = line.rstrip('\n').partition(': ')
    if k.startswith('ram_') or k in ('flash_bytes', 'optimizer'):
        assert str(d[k]) == v, (k, d[k], v)
EOF
}
check sgd        $P 0              $P    0    arena_bytes
check momentum   $P $P             $P    0    arena_bytes --momentum 0.9
check momentum0  $P 0              $P    0    arena_bytes --optimizer sgd --momentum 0
check adamw      $P $((2 * P))     $P    0    arena_bytes --optimizer adamw
check fused      $P 0              0     0    fused_arena_bytes --fused
check adamfused  $P $((2 * P))     0     0    fused_arena_bytes --optimizer adamw --fused
# b0's weights and biases frozen (2 x (32x32 + 32) floats, 8,448 bytes):
# drawn at compile time (--seed) they are flash; drawn by init at run time
# they sit in the params buffer, RAM, though nothing trains them
F=25344
check frozen     $F 0              $F    8448 arena_bytes --freeze 'b0.*' --seed 1
check frozenmom  $F $F             $F    8448 arena_bytes --freeze 'b0.*' --momentum 0.5 --seed 1
check frozenadam $F $((2 * F))     0     8448 fused_arena_bytes --freeze 'b0.*' --optimizer adamw --fused --seed 1
check frozenrt   $P 0              $F    0    arena_bytes --freeze 'b0.*'
# every weight frozen: nothing trains, nothing in RAM but the arena and io
check allfrozen  0  0              0     $P   arena_bytes --freeze '*' --momentum 0.9 --seed 1
check allfrozenrt $P 0             0     0    arena_bytes --freeze '*' --momentum 0.9
grep -qx 'optimizer: sgd momentum 0.9' "$work/momentum.txt" &&
    grep -qx 'optimizer: adamw, fused' "$work/adamfused.txt" && ok ||
    bad "the optimizer line: $(fig optimizer "$work/momentum.txt"), $(fig optimizer "$work/adamfused.txt")"

# BatchNorm: trainable w1 (54), bn1 scale and bias (6), w2 (135), bn2 scale
# and bias (10): 205 floats, 820 bytes; the running statistics (3 + 3 +
# 5 + 5 floats, 64 bytes) are written by the step: RAM, not flash. io: x
# 4x2x6x6 (288) and target 4x5 (20) and the loss: 1,236 bytes.
run 0 "$remat" schedule tests/graphs/batchnorm_ops.xml && cp "$work/out" "$work/bn" &&
    [ "$(fig ram_params_bytes "$work/bn")" = 884 ] && [ "$(fig ram_gradient_bytes "$work/bn")" = 820 ] &&
    [ "$(fig ram_io_bytes "$work/bn")" = 1236 ] && [ "$(fig flash_bytes "$work/bn")" = 0 ] && ok ||
    bad "batchnorm_ops: $(grep -E '^(ram|flash)' "$work/bn" | tr '\n' ' ')"
# frozen scale and bias drawn at compile time are flash (8 + 8 floats, 64
# bytes); the statistics, which training mode updates, stay
run 0 "$remat" schedule tests/graphs/batchnorm_ops.xml --freeze 'bn*' --seed 7 && cp "$work/out" "$work/bnf" &&
    [ "$(fig ram_params_bytes "$work/bnf")" = $((4 * (54 + 135 + 16))) ] &&
    [ "$(fig flash_bytes "$work/bnf")" = 64 ] && ok ||
    bad "batchnorm_ops --freeze 'bn*': $(grep -E '^(ram|flash)' "$work/bnf" | tr '\n' ' ')"
# eval-mode BatchNorm (training_mode 0) never writes its statistics, so
# they are constants: trainable w1 (54), bn1 scale and bias (6) and b2 (5)
# are 65 floats, 260 bytes of RAM; bn1's statistics (6), the frozen w2
# (135) and all of bn2 (20) are 161 floats, 644 bytes of flash, as many as
# the header's NAME_frozen[] holds
run 0 "$remat" schedule tests/graphs/batchnorm_eval.xml --seed 1 && cp "$work/out" "$work/be" &&
    [ "$(fig ram_params_bytes "$work/be")" = 260 ] && [ "$(fig flash_bytes "$work/be")" = 644 ] &&
    run 0 "$remat" compile tests/graphs/batchnorm_eval.xml --seed 1 -o "$work/be.c" &&
    grep -qx '#define BATCHNORM_EVAL_FROZEN_FLOATS 161' "$work/be.h" &&
    grep -qx '#define BATCHNORM_EVAL_PARAM_FLOATS 65' "$work/be.h" && ok ||
    bad "batchnorm_eval: $(grep -E '^(ram_params|flash)' "$work/be" | tr '\n' ' ')"
# int64 constants: rows (6), width, pad, ignore (1 each), fill (6): 15 x 8
run 0 "$remat" schedule tests/graphs/int64_constants.xml &&
    [ "$(fig flash_bytes "$work/out")" = 120 ] && ok ||
    bad "int64_constants: flash_bytes $(fig flash_bytes "$work/out"), wanted 120"
# forward only: nothing writes a parameter, so every one is flash (table
# 10x6, w 6x5, b 5, scale 5: 100 floats), no optimizer and no gradients
run 0 "$remat" schedule tests/graphs/forward_only.xml --optimizer adamw && cp "$work/out" "$work/fo" &&
    [ "$(fig flash_bytes "$work/fo")" = 400 ] && [ "$(fig ram_params_bytes "$work/fo")" = 0 ] &&
    [ "$(fig ram_optimizer_bytes "$work/fo")" = 0 ] && [ "$(fig ram_gradient_bytes "$work/fo")" = 0 ] && ok ||
    bad "forward_only: $(grep -E '^(ram|flash)' "$work/fo" | tr '\n' ' ')"

# ---- the header, memory and pareto say the same ------------------------------
for args in "" "--momentum 0.9" "--optimizer adamw --fused" "--freeze b0.* --fused"; do
    # shellcheck disable=SC2086
    run 0 "$remat" schedule "$g" $args && cp "$work/out" "$work/s" &&
        run 0 "$remat" compile "$g" $args -o "$work/m.c" &&
        [ "$(sed -n 's/^#define MLP_TINY_RAM_BYTES //p' "$work/m.h")" = "$(fig ram_bytes "$work/s")" ] &&
        [ "$(sed -n 's/^#define MLP_TINY_FLASH_BYTES //p' "$work/m.h")" = "$(fig flash_bytes "$work/s")" ] &&
        ok || bad "header macros for '$args' differ from schedule's"
    run 0 "$remat" memory "$g" $args &&
        [ "$(fig ram_bytes "$work/out")" = "$(fig ram_bytes "$work/s")" ] &&
        [ "$(fig flash_bytes "$work/out")" = "$(fig flash_bytes "$work/s")" ] &&
        ok || bad "memory for '$args' differs from schedule's"
done
# pareto: each row's ram_bytes (the last column) is schedule's for that plan
# (the row's saved bytes select it, as a budget in bytes: a bare 0 would
# be a fraction, full's saved bytes)
for args in "" "--optimizer adamw --fused"; do
    # shellcheck disable=SC2086
    run 0 "$remat" pareto "$g" $args && cp "$work/out" "$work/p" || { bad "pareto $args"; continue; }
    while read -r saved ram; do
        run 0 "$remat" schedule "$g" --budget "${saved}B" $args &&
            [ "$(fig ram_bytes "$work/out")" = "$ram" ] && ok ||
            bad "pareto '$args': the row saving $saved has ram_bytes $ram, schedule $(fig ram_bytes "$work/out")"
    done < <(awk 'NR > 2 {print $2, $NF}' "$work/p")
    run 0 "$remat" pareto "$g" $args --json &&
        $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[2:]]
assert [p["ram_bytes"] for p in d["plans"]] == [int(r[-1]) for r in rows]
' "$work/out" "$work/p" && ok || bad "pareto '$args' --json ram_bytes differ from the text"
done

# ---- --max-ram ----------------------------------------------------------------
# At none's RAM (81,924: no recompute) the answer recomputes nothing; a byte
# below, the least recompute within 12,287 bytes of arena, as --max-arena
# 12287 answers; both proven.
run 0 "$remat" schedule "$g" --max-ram 81924 && cp "$work/out" "$work/r0" &&
    [ "$(fig recompute_flops "$work/r0")" = 0 ] && [ "$(fig ram_bytes "$work/r0")" = 81924 ] &&
    [ "$(fig max_ram_bytes "$work/r0")" = 81924 ] && [ "$(fig proven_optimal "$work/r0")" = yes ] &&
    ok || bad "--max-ram 81924: $(grep -E '^(ram_bytes|recompute_flops|proven)' "$work/r0" | tr '\n' ' ')"
run 0 "$remat" schedule "$g" --max-ram 81923 && cp "$work/out" "$work/r1" &&
    run 0 "$remat" schedule "$g" --max-arena 12287 && cp "$work/out" "$work/a1" &&
    [ "$(fig proven_optimal "$work/r1")" = yes ] && [ "$(fig ram_bytes "$work/r1")" -le 81923 ] &&
    [ "$(fig recompute_flops "$work/r1")" -gt 0 ] &&
    [ "$(fig recompute_seconds "$work/r1")" = "$(fig recompute_seconds "$work/a1")" ] &&
    [ "$(fig max_arena_bytes "$work/r1")" = 12287 ] && ok ||
    bad "--max-ram 81923: $(grep -E '^(ram_bytes|recompute|proven|max_)' "$work/r1" | tr '\n' ' ')"
# --json says the same
run 0 "$remat" schedule "$g" --max-ram 81923 --json &&
    $py -c '
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert s["max_ram_bytes"] == 81923 and s["proven_optimal"] == "yes" and s["ram_bytes"] <= 81923, s
' "$work/out" && ok || bad "--max-ram --json"
# the least RAM of the plans that recompute each tensor once: full's
# arena (7,168) is the least of those, so with SGD 33,792 + 33,792 +
# 7,168 + 2,052 = 76,804 fits, proven. A byte less, only a plan that
# rebuilds at each use fits (docs/solver.md): it says so, is not called
# proven, and its gradients are none's bit for bit. Below the least of
# those (`--max-ram 1` names it, not proven, with its terms) a bound is
# refused with that line, and nothing is written.
least=$((P + P + 7168 + IO))
run 0 "$remat" schedule "$g" --max-ram $least && [ "$(fig proven_optimal "$work/out")" = yes ] &&
    [ "$(fig rebuild "$work/out")" = no ] &&
    [ "$(fig ram_bytes "$work/out")" = $least ] && ok || bad "--max-ram $least: not proven or not $least"
run 0 "$remat" schedule "$g" --max-ram $((least - 1)) && [ "$(fig rebuild "$work/out")" = yes ] &&
    [ "$(fig ram_bytes "$work/out")" -le $((least - 1)) ] &&
    fig proven_optimal "$work/out" | grep -q '^no (no plan that recomputes a tensor once fits' &&
    ok || bad "--max-ram $((least - 1)): no plan that rebuilds"
"$remat" build "$g" --policy none -o "$work/t_none" && "$work/t_none" --seed 4 --dump "$work/d_none" >/dev/null &&
    "$remat" build "$g" --max-ram $((least - 1)) -o "$work/t_rebuilt" &&
    "$work/t_rebuilt" --seed 4 --dump "$work/d_rebuilt" >/dev/null &&
    same_dirs "$work/d_none" "$work/d_rebuilt" && ok ||
    bad "--max-ram $((least - 1)): the rebuilding plan's gradients differ from none's"
# terms HOW OPT GRADS: "N P A I" from "cannot be met: HOW N bytes: ..."
terms() {
    sed -n "s/.*cannot be met: $1 \([0-9]*\) bytes: params \([0-9]*\), optimizer $2, grads $3, arena \([0-9]*\), io \([0-9]*\)$/\1 \2 \3 \4/p" "$work/err"
}
found='the least found (not proven) is'

run 1 "$remat" schedule "$g" --max-ram 1 && terms "$found" 0 $P > "$work/ul" &&
    read -r ul up ua ui < "$work/ul" && [ "$up" = $P ] && [ "$ui" = $IO ] &&
    [ "$ul" = $((up + P + ua + ui)) ] && [ "$ul" -lt $least ] && ok ||
    bad "--max-ram 1: $(cat "$work/err")"
run 0 "$remat" schedule "$g" --max-ram "${ul:-0}" &&
    [ "$(fig ram_bytes "$work/out")" -le "${ul:-0}" ] && ok ||
    bad "--max-ram ${ul:-?}: no plan at the least the refusal named"
run 1 "$remat" compile "$g" --max-ram $((${ul:-1} - 1)) -o "$work/none.c" &&
    [ "$(cat "$work/err")" = "$g: max-ram $((${ul:-1} - 1)) bytes cannot be met: the least found (not proven) is ${ul:-?} bytes: params $P, optimizer 0, grads $P, arena ${ua:-?}, io $IO" ] &&
    [ ! -s "$work/out" ] && [ ! -e "$work/none.c" ] && [ ! -e "$work/none.h" ] && ok ||
    bad "--max-ram $((${ul:-1} - 1)): $(cat "$work/err")"
# fused: the fused arena is bounded (no gradient buffer); the least fused
# RAM, a plan that rebuilds at each use, is proven (its arena is what the
# last backward holds in every plan: its gradients, scratch and operands),
# fits, and a byte below is refused with its terms
run 1 "$remat" schedule "$g" --fused --max-ram 40000 && terms "needs at least" 0 0 > "$work/fl" &&
    read -r fl fp fa fi < "$work/fl" &&
    [ "$fp" = $P ] && [ "$fi" = $IO ] && [ "$fl" = $((fp + fa + fi)) ] && ok ||
    bad "--fused --max-ram 40000: $(cat "$work/err")"
run 0 "$remat" schedule "$g" --fused --max-ram "${fl:-0}" &&
    [ "$(fig ram_bytes "$work/out")" = "${fl:-x}" ] &&
    [ "$(fig fused_arena_bytes "$work/out")" = "${fa:-x}" ] && ok ||
    bad "--fused --max-ram ${fl:-?}: no plan at the least it named"
run 1 "$remat" schedule "$g" --fused --max-ram $((${fl:-1} - 1)) && ok ||
    bad "--fused --max-ram one byte below the least: not refused"
# AdamW counts its state: the same bound that fits SGD fits nothing
run 1 "$remat" schedule "$g" --optimizer adamw --max-ram 81924 &&
    grep -q "the least found (not proven) is $((${ul:-0} + 2 * P)) bytes: params $P, optimizer $((2 * P)), grads $P, arena ${ua:-?}" "$work/err" &&
    ok || bad "--optimizer adamw --max-ram 81924: $(cat "$work/err")"
# every command that plans takes it
for cmd in compile build memory; do
    out=(); [ "$cmd" = memory ] || out=(-o "$work/$cmd.c")
    [ "$cmd" = build ] && out=(-o "$work/trainer")
    run 0 "$remat" "$cmd" "$g" --max-ram 81000 "${out[@]}" && ok || bad "$cmd --max-ram"
done
run 0 "$remat" diff "$g" --policy none --max-ram 81000 && grep -q '^ram_bytes: ' "$work/out" &&
    ok || bad "diff --max-ram"
[ "$(sed -n 's/^#define MLP_TINY_RAM_BYTES //p' "$work/compile.h")" -le 81000 ] && ok ||
    bad "compile --max-ram 81000: NAME_RAM_BYTES above it"

# ---- usage errors (the catalogue, tests/bad/, has the one-line ones) ----------
usage() {   # what, then the command
    local what=$1
    shift
    run 2 "$@" && [ "$(wc -l < "$work/err")" -eq 2 ] && ok || bad "$what: not a two-line usage error"
}
usage "--max-ram with --max-arena" "$remat" schedule "$g" --max-ram 9000 --max-arena 9000
usage "--max-ram twice" "$remat" schedule "$g" --max-ram 9000 --max-ram 9000
usage "--optimizer sgdm" "$remat" schedule "$g" --optimizer sgdm
usage "--momentum -1" "$remat" schedule "$g" --momentum -1
usage "--momentum with adamw" "$remat" schedule "$g" --optimizer adamw --momentum 0.9
usage "--fused twice" "$remat" compile "$g" --fused --fused -o "$work/x.c"
usage "pareto --max-ram" "$remat" pareto "$g" --max-ram 9000
usage "import --fused" "$remat" import x.onnx --fused -o "$work/x.xml"

# ---- plain SGD keeps no state: ram_bytes counts none, and the generated
# updates take state NULL (a device links no such buffer): 3 fused steps
# and 3 sgd_step calls with NULL give the bits a zeroed state buffer gives
# (built with UBSan; the generated code offsets state only when it is not
# NULL, which no sanitizer here checks: gcc's does not flag NULL + n)
sn=$work/nullstate
mkdir -p "$sn"
cat >"$sn/main.c" <<'EOF'
#include "m.h"
#include <stdio.h>
#include <string.h>
static float pa[MLP_TINY_PARAM_FLOATS], pb[MLP_TINY_PARAM_FLOATS];
static float qa[MLP_TINY_PARAM_FLOATS], qb[MLP_TINY_PARAM_FLOATS];
static float st[MLP_TINY_SGD_STATE_FLOATS], g[MLP_TINY_GRAD_FLOATS];
static float in[MLP_TINY_INPUT_FLOATS], out[MLP_TINY_OUTPUT_FLOATS + 1];
static unsigned char arena[MLP_TINY_ARENA_BYTES + MLP_TINY_FUSED_ARENA_BYTES];
int main(void)
{
    rt_optimizer o;
    rt_sgd_config c = {0, 0, 0, 0};
    memset(&o, 0, sizeof o);
    o.kind = RT_OPT_SGD;
    o.lr = 0.05f;
    mlp_tiny_init(pa, 3);
    rt_init_uniform(in, MLP_TINY_INPUT_FLOATS, -1.0f, 1.0f, 3, 1000);
    memcpy(pb, pa, sizeof pa);
    memcpy(qa, pa, sizeof pa);
    memcpy(qb, pa, sizeof pa);
    for (o.step = 1; o.step <= 3; o.step++) {
        mlp_tiny_train_step_fused(pa, in, NULL, out, NULL, &o, 3, o.step, arena);
        mlp_tiny_train_step_fused(pb, in, NULL, out, st, &o, 3, o.step, arena);
        mlp_tiny_train_step(qa, in, NULL, out, g, 3, o.step, arena);
        mlp_tiny_sgd_step(qa, g, NULL, 0.05f, &c, o.step);
        mlp_tiny_train_step(qb, in, NULL, out, g, 3, o.step, arena);
        mlp_tiny_sgd_step(qb, g, st, 0.05f, &c, o.step);
    }
    int same = !memcmp(pa, pb, sizeof pa) && !memcmp(qa, qb, sizeof qa);
    printf("%s\n", same ? "same" : "different");
    return !same;
}
EOF
if run 0 "$remat" compile "$g" --fused -o "$sn/m.c" &&
   cc -std=c99 -Wall -Wextra -pedantic -Werror -O1 -fsanitize=undefined \
      -fno-sanitize-recover=all -DRT_NO_BLAS -DRT_NO_THREADS -Idist -I"$sn" \
      "$sn/main.c" "$sn/m.c" dist/remat_rt.c -lm -o "$sn/run" 2>"$sn/cc.err"; then
    run 0 "$sn/run" && [ "$(cat "$work/out")" = same ] && ok ||
        bad "plain SGD with state NULL: $(cat "$work/out" "$work/err")"
else
    bad "plain SGD with state NULL: does not build: $(head -3 "$sn/cc.err")"
fi

finish test_ram
