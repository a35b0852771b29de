#!/usr/bin/env bash
# End-to-end test of frozen parameters (--freeze GLOB, docs/training.md):
# every compiling command takes it, a glob that matches nothing is an
# error; a frozen parameter has no gradient slot and no optimizer state,
# keeps its values bitwise through training, and changes nothing that is
# computed for the others; and a frozen model saves less than the full one
# (mlp12 and gpt with their first half frozen, the last layers alone, the
# biases alone).
# Needs cc, OpenBLAS and /usr/bin/python3 with numpy.
. "$(dirname "$0")/lib.sh"

# key FILE NAME: the value of a `NAME: value` line of a schedule report
key() { sed -n "s/^$2: //p" "$1"; }

# mlp12's first half: blocks b0 to b5
half_mlp=(--freeze 'b0.*' --freeze 'b1.*' --freeze 'b2.*' --freeze 'b3.*'
          --freeze 'b4.*' --freeze 'b5.*')

# ---- the command line -------------------------------------------------------------
for cmd in compile build; do
    run 0 "$remat" "$cmd" graphs/mlp12.xml --freeze 'b0.*' -o "$work/$cmd.c" \
        && ok || bad "$cmd --freeze"
done
run 0 "$remat" schedule graphs/mlp12.xml "${half_mlp[@]}" && cp "$work/out" "$work/s_half" &&
    run 0 "$remat" schedule graphs/mlp12.xml && cp "$work/out" "$work/s_full" && ok ||
    bad "schedule --freeze"
run 0 "$remat" diff graphs/mlp12.xml --policy none --policy sac --freeze 'b*' \
    && grep -q '^saved_bytes: ' "$work/out" && ok || bad "diff --freeze"
run 0 "$remat" pareto graphs/mlp12.xml --freeze 'b1?.*' && grep -q 'optimal plans' "$work/out" \
    && ok || bad "pareto --freeze"
run 0 "$remat" compile --help && grep -q -- '--freeze GLOB' "$work/out" && ok || bad "compile --help lacks --freeze"
run 2 "$remat" import graphs/mlp12.xml --freeze 'b0.*' -o "$work/i.xml" \
    && grep -q 'unknown option --freeze' "$work/err" && ok || bad "import takes no --freeze"
run 2 "$remat" schedule graphs/mlp12.xml --freeze && grep -q -- '--freeze needs a value' "$work/err" \
    && ok || bad "--freeze without a glob"

# A glob that matches no parameter: one line naming it and the nearest names,
# exit 1, nothing written
for cmd in compile schedule build pareto diff; do
    out=()
    case $cmd in
        compile) out=(-o "$work/no.c") ;;
        build) out=(-o "$work/no_exe") ;;
        pareto) out=(-o "$work/no.svg") ;;
        diff) out=(--policy none --policy sac) ;;
    esac
    run 1 "$remat" "$cmd" graphs/mlp12.xml --freeze 'b0.*' --freeze 'blk0.*' "${out[@]}" &&
        [ "$(cat "$work/err")" = "graphs/mlp12.xml: --freeze 'blk0.*' matches no parameter of model 'mlp12'; nearest: 'b0.fc1.weight', 'b0.fc1.bias', 'b0.fc2.weight'" ] &&
        [ ! -e "$work/no.c" ] && [ ! -e "$work/no_exe" ] && [ ! -e "$work/no.svg" ] &&
        ok || bad "$cmd --freeze blk0.*: $(head -1 "$work/err")"
done
run 1 "$remat" schedule graphs/gpt.xml --freeze '*.bais' &&
    grep -qF "nearest: 'l0.ln1.bias', 'l0.q.bias', 'l0.v.bias'" "$work/err" && ok ||
    bad "gpt *.bais: $(cat "$work/err")"

# ---- what the backward keeps -----------------------------------------------------------
# mlp12 with its first half frozen: nothing in b0..b4 is read by the
# backward, b5.out (b6's input) is saved for b6.fc1.weight's gradient
grep -E '^b[0-4]\.' "$work/s_half" | grep -vq ' -  *not read by the backward$' &&
    bad "a frozen block's activation is kept" || ok
grep -q '^b5.out .* SAVE ' "$work/s_half" && ok || bad "b5.out not saved"
[ "$(key "$work/s_half" saved_bytes)" -lt "$(key "$work/s_full" saved_bytes)" ] && ok ||
    bad "frozen saved bytes not below full's"

# ---- gradients, state and values -------------------------------------------------
# name: the extra arguments of each case
declare -A cases=(
    [mlp_half]="graphs/mlp12.xml ${half_mlp[*]}"
    [mlp_last]="graphs/mlp12.xml --freeze b?.*"
    [mlp_bias]="graphs/mlp12.xml --freeze *.weight"
    [gpt_half]="graphs/gpt.xml --freeze wte --freeze wpe --freeze l0.* --freeze l1.*"
    [gpt_last]="graphs/gpt.xml --freeze wte --freeze wpe --freeze l0.* --freeze l1.* --freeze l2.*"
    [gpt_bias]="graphs/gpt.xml --freeze *.weight --freeze *.scale --freeze wte --freeze wpe"
)
# header DIR/NAME.h MACRO: a #define's value
macro() { sed -n "s/^#define [A-Z0-9_]*_$2 //p" "$1"; }
# frozen_floats GRAPH ARGS...: the floats of the parameters the --freeze
# globs match, from the graph's own shapes (python's fnmatch, not remat's);
# then, after a space, those of them whose init is a constant fill (zeros,
# ones, constant: known at compile time without --seed, so in flash)
frozen_floats() {
    /usr/bin/python3 - "$@" <<'PY'
import fnmatch, re, sys
xml = open(sys.argv[1]).read()
globs = [a for a in sys.argv[2:] if a not in ("--freeze", "--seed")]
n = known = 0
for tag in re.findall(r'<initializer [^>]*>', xml):
    name = re.search(r' name="([^"]*)"', tag).group(1)
    shape = re.search(r' shape="([^"]*)"', tag).group(1)
    init = re.search(r' init="([^"]*)"', tag).group(1)
    if any(fnmatch.fnmatchcase(name, g) for g in globs):
        k = 1
        for d in shape.split():
            k *= int(d)
        n += k
        if init in ("zeros", "ones", "constant"):
            known += k
print(n, known)
PY
}
PY=/usr/bin/python3
for g in mlp12 gpt; do
    "$remat" compile "graphs/$g.xml" --policy sac -o "$work/${g}_full.c" &&
        "$remat" build "graphs/$g.xml" --policy sac -o "$work/${g}_full" &&
        "$work/${g}_full" --seed 1 --dump "$work/${g}_full.dump" >/dev/null &&
        ok || bad "$g: full build"
done
set -f      # the cases hold globs for remat, not for the shell
for c in mlp_half mlp_last mlp_bias gpt_half gpt_last gpt_bias; do
    read -r -a args <<< "${cases[$c]}"
    graph=${args[0]} freeze=("${args[@]:1}")
    g=$(basename "$graph" .xml)
    full=$work/${g}_full
    exe=$work/$c
    set +f
    if ! "$remat" compile "$graph" --policy sac "${freeze[@]}" -o "$exe.c" ||
       ! "$remat" build "$graph" --policy sac "${freeze[@]}" -o "$exe" ||
       ! "$exe" --seed 1 --dump "$exe.dump" >/dev/null; then
        bad "$c: build or dump"; set -f; continue
    fi
    # NAME_GRAD_FLOATS and the optimizer state smaller by exactly the frozen
    # parameters' floats; the parameter buffer the same
    read -r want known <<< "$(frozen_floats "$graph" "${freeze[@]}")"
    [ "$want" -gt 0 ] &&
        [ $(( $(macro "$full.h" GRAD_FLOATS) - $(macro "$exe.h" GRAD_FLOATS) )) -eq "$want" ] &&
        [ $(( $(macro "$full.h" ADAMW_STATE_FLOATS) - $(macro "$exe.h" ADAMW_STATE_FLOATS) )) -eq $((2 * want)) ] &&
        ok || bad "$c: GRAD_FLOATS $(macro "$exe.h" GRAD_FLOATS) is not full's $(macro "$full.h" GRAD_FLOATS) less $want"
    # the frozen parameters filled with a constant (the biases, LayerNorm's
    # scale) are in flash, out of the parameter buffer; the drawn ones stay
    [ "$(macro "$exe.h" FROZEN_FLOATS)" = "$known" ] &&
        [ $(( $(macro "$full.h" PARAM_FLOATS) - $(macro "$exe.h" PARAM_FLOATS) )) -eq "$known" ] &&
        ok || bad "$c: PARAM_FLOATS $(macro "$exe.h" PARAM_FLOATS), FROZEN_FLOATS $(macro "$exe.h" FROZEN_FLOATS): want full's $(macro "$full.h" PARAM_FLOATS) less $known"
    # a grad file for exactly the parameters left trainable, each equal to
    # full training's bitwise; the same loss
    nfrozen=0 same=1
    for f in "$full.dump"/param.*.npy; do
        p=$(basename "$f" .npy); p=${p#param.}
        if [ -e "$exe.dump/grad.$p.npy" ]; then
            cmp -s "$exe.dump/grad.$p.npy" "$full.dump/grad.$p.npy" || { same=0; echo "     $c: grad.$p differs from full training's"; }
        else
            nfrozen=$((nfrozen + 1))
        fi
    done
    [ "$same" = 1 ] && cmp -s "$exe.dump/loss.npy" "$full.dump/loss.npy" && ok ||
        bad "$c: the trainable gradients or the loss differ from full training's"
    nglob=$(sed -n '/_params\[[0-9]*\] = {/,/^};/p' "$exe.c" |
            grep -c '^    {"[^"]*", [0-9]*, [0-9]*, [0-9]*, {[0-9, ]*}, 0,')
    [ "$nfrozen" -gt 0 ] && [ "$nfrozen" -eq "$nglob" ] && ok ||
        bad "$c: $nfrozen parameters without a grad file, $nglob frozen in the table"
    # saved bytes strictly below full training's
    s_full=$(sed -n 's/^ \* saved bytes: *\([0-9]*\).*/\1/p' "$full.c")
    s_frozen=$(sed -n 's/^ \* saved bytes: *\([0-9]*\).*/\1/p' "$exe.c")
    [ "$s_frozen" -lt "$s_full" ] && ok || bad "$c: saved bytes $s_frozen not below full's $s_full"
    # 20 steps of AdamW: every frozen parameter bitwise as it began, every
    # trainable one moved; the checkpoint has no state for the frozen ones
    if "$exe" --seed 1 --steps 20 --optimizer adamw --lr 1e-3 --save "$exe.ck" >/dev/null; then
        kept=1 moved=1 state=1
        for f in "$exe.ck"/param.*.npy; do
            p=$(basename "$f" .npy); p=${p#param.}
            if [ -e "$exe.dump/grad.$p.npy" ]; then
                cmp -s "$f" "$exe.dump/param.$p.npy" && { moved=0; echo "     $c: $p did not move"; }
                [ -e "$exe.ck/exp_avg.$p.npy" ] || state=0
            else
                cmp -s "$f" "$exe.dump/param.$p.npy" || { kept=0; echo "     $c: frozen $p changed"; }
                [ -e "$exe.ck/exp_avg.$p.npy" ] && state=0
            fi
        done
        [ "$kept$moved$state" = 111 ] && ok || bad "$c: after 20 steps: kept $kept moved $moved state $state"
    else
        bad "$c: --steps 20"
    fi
    # 10 steps, then 10 resumed from the checkpoint: the same as 20 (the
    # state read back at the grad offsets)
    if [ "$c" = mlp_half ] || [ "$c" = gpt_bias ]; then
        "$exe" --seed 1 --steps 10 --optimizer adamw --lr 1e-3 --save "$exe.ck10" >/dev/null &&
            "$exe" --steps 10 --optimizer adamw --lr 1e-3 --resume "$exe.ck10" --save "$exe.ck20" >/dev/null &&
            [ "$(cd "$exe.ck" && ls)" = "$(cd "$exe.ck20" && ls)" ] &&
            (for f in "$exe.ck"/*.npy; do cmp -s "$f" "$exe.ck20/$(basename "$f")" || exit 1; done) &&
            ok || bad "$c: 10 + 10 resumed steps differ from 20"
    fi
    set -f
done
set +f

# ---- frozen parameters in flash (docs/firmware.md) --------------------------------
# mlp_tiny with every weight frozen, drawn at compile time (--seed 1): the
# parameter buffer holds the 8 biases alone (8 x 32 floats), the 8 weights
# (8 x 32 x 32) are NAME_frozen[], static const, in .rodata; everything a
# run computes is bitwise what the same freeze with the weights drawn at run
# time into params (today's layout) computes.
G=tests/graphs/mlp_tiny.xml
fz=(--policy sac --freeze '*.weight')
if "$remat" compile $G "${fz[@]}" --seed 1 -o "$work/tf.c" &&
   "$remat" compile $G "${fz[@]}" -o "$work/tr.c" &&
   "$remat" build $G "${fz[@]}" --seed 1 -o "$work/tf" &&
   "$remat" build $G "${fz[@]}" -o "$work/tr"; then
    [ "$(macro "$work/tf.h" PARAM_FLOATS)" = 256 ] &&
        [ "$(macro "$work/tf.h" GRAD_FLOATS)" = 256 ] &&
        [ "$(macro "$work/tf.h" FROZEN_FLOATS)" = 8192 ] &&
        [ "$(macro "$work/tf.h" N_FROZEN)" = 8 ] &&
        [ "$(macro "$work/tr.h" PARAM_FLOATS)" = 8448 ] &&
        [ "$(macro "$work/tr.h" FROZEN_FLOATS)" = 0 ] && ok ||
        bad "mlp_tiny --seed: PARAM_FLOATS $(macro "$work/tf.h" PARAM_FLOATS) FROZEN_FLOATS $(macro "$work/tf.h" FROZEN_FLOATS)"
    grep -q '^static const float mlp_tiny_frozen\[8192\] = {$' "$work/tf.c" &&
        grep -q 'const float \*v_b0_fc1_weight = mlp_tiny_frozen + 0;' "$work/tf.c" &&
        ! grep -q 'params + [0-9]*, 1024,' "$work/tf.c" && ok ||
        bad "mlp_tiny --seed: no static const mlp_tiny_frozen read by the functions"
    # the linker's view: a local read-only object of 8192 floats, so
    # .rodata of 32 KB or more, where the run-time build has less
    if cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -Idist -c "$work/tf.c" -o "$work/tf.o" &&
       cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -Idist -c "$work/tr.c" -o "$work/tr.o"; then
        objdump -t "$work/tf.o" | grep -Eq '^[0-9a-f]+ l +O \.rodata[^ ]*[[:space:]]+0*8000 mlp_tiny_frozen$' &&
            nm "$work/tf.o" | grep -q ' r mlp_tiny_frozen$' && ok ||
            bad "mlp_tiny_frozen is not a local .rodata object of 32768 bytes: $(objdump -t "$work/tf.o" | grep ' mlp_tiny_frozen$')"
        rosize() { size -A "$1" | awk '$1 ~ /^\.rodata/ { n += $2 } END { print n + 0 }'; }
        [ "$(rosize "$work/tf.o")" -ge 32768 ] && [ "$(rosize "$work/tr.o")" -lt 32768 ] && ok ||
            bad "frozen build's .rodata $(rosize "$work/tf.o"), the run-time build's $(rosize "$work/tr.o")"
    else
        bad "mlp_tiny --seed: the C is not warning-free"
    fi
    # one step: every file (loss, forward, gradients, every parameter with
    # the compiled-in ones, outputs) the same bits
    "$work/tf" --seed 1 --dump "$work/tf.dump" >/dev/null &&
        "$work/tr" --seed 1 --dump "$work/tr.dump" >/dev/null &&
        same_dirs "$work/tf.dump" "$work/tr.dump" && ok ||
        bad "mlp_tiny --seed: --dump differs from the weights drawn at run time"
    # 20 AdamW steps: the checkpoint holds the trainable parameters and their
    # state, bitwise the run-time build's; the compiled-in weights are not in it
    if "$work/tf" --seed 1 --steps 20 --optimizer adamw --save "$work/tf.ck" >/dev/null &&
       "$work/tr" --seed 1 --steps 20 --optimizer adamw --save "$work/tr.ck" >/dev/null; then
        n=0 same=1
        for f in "$work/tf.ck"/*; do
            n=$((n + 1)); cmp -s "$f" "$work/tr.ck/$(basename "$f")" || same=0
        done
        [ "$same" = 1 ] && [ ! -e "$work/tf.ck/param.b0.fc1.weight.npy" ] &&
            [ -e "$work/tr.ck/param.b0.fc1.weight.npy" ] &&
            [ "$(ls "$work/tf.ck"/param.*.npy | wc -l)" = 8 ] && ok ||
            bad "mlp_tiny --seed: after 20 steps (same $same, $n files)"
        # resumed: 10 + 10 steps equal 20
        "$work/tf" --seed 1 --steps 10 --optimizer adamw --save "$work/tf.ck10" >/dev/null &&
            "$work/tf" --steps 10 --optimizer adamw --resume "$work/tf.ck10" --save "$work/tf.ck20" >/dev/null &&
            same_dirs "$work/tf.ck" "$work/tf.ck20" && ok || bad "mlp_tiny --seed: 10 + 10 resumed steps"
    else
        bad "mlp_tiny --seed: --steps 20"
    fi
    # --load: a dump's own frozen files are accepted, others refused
    run 0 "$work/tf" --load "$work/tf.dump" --dump "$work/tf.dump2" &&
        same_dirs "$work/tf.dump" "$work/tf.dump2" && ok || bad "--load of the frozen build's dump"
    cp -r "$work/tf.dump" "$work/tf.other"
    cp "$work/tf.dump/param.b1.fc1.weight.npy" "$work/tf.other/param.b0.fc1.weight.npy"
    run 1 "$work/tf" --load "$work/tf.other" --dump "$work/tf.dump3" &&
        grep -q "^trainer: $work/tf.other/param.b0.fc1.weight.npy: 'b0.fc1.weight' is frozen and its values are compiled into this program" "$work/err" &&
        ok || bad "--load of other frozen values: $(cat "$work/err")"
    # reproducible, and the seed is in the values
    mkdir -p "$work/again" "$work/seed2" &&
        "$remat" compile $G "${fz[@]}" --seed 1 -o "$work/again/tf.c" &&
        cmp -s "$work/tf.c" "$work/again/tf.c" && cmp -s "$work/tf.h" "$work/again/tf.h" && ok ||
        bad "mlp_tiny --seed 1 twice: different bytes"
    "$remat" compile $G "${fz[@]}" --seed 2 -o "$work/seed2/tf.c" &&
        ! cmp -s "$work/tf.c" "$work/seed2/tf.c" && cmp -s "$work/tf.h" "$work/seed2/tf.h" && ok ||
        bad "mlp_tiny --seed 2: the same frozen values as --seed 1"
else
    bad "mlp_tiny --seed: compile or build"
fi
# nothing frozen: --seed changes no byte
"$remat" compile graphs/mlp12.xml --policy sac --seed 7 -o "$work/m7.c" &&
    "$remat" compile graphs/mlp12.xml --policy sac -o "$work/m7b.c" &&
    sed 's/m7b\.h/m7.h/' "$work/m7b.c" | cmp -s - "$work/m7.c" && ok ||
    bad "--seed changed a graph with nothing frozen"
for cmd in compile build schedule diff memory pareto; do
    run 0 "$remat" $cmd --help && grep -q -- '--seed N' "$work/out" && ok || bad "$cmd --help lacks --seed"
done
run 2 "$remat" compile $G --seed 1x -o "$work/no.c" &&
    grep -q "^remat compile: --seed takes a whole number from 0 to 18446744073709551615, not '1x'$" "$work/err" &&
    run 2 "$remat" import $G --seed 1 -o "$work/no.xml" && ok || bad "--seed's usage errors"

# Frozen data past the embedding limit (2^18 floats) stays in the C text,
# flash, and only the trainable data goes to NAME.weights: a 640x512 frozen
# weight (327,680 floats) with a trainable 512x4 head. Frozen, the build
# has no weights file and the weight in NAME_frozen[]; unfrozen, the
# weight is in NAME.weights (the whole params image, 1,318,912 bytes); the
# loss and the head's gradients are the same bits.
bw=$work/bigw
mkdir -p "$bw/data"
$PY - "$bw" <<'EOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(5)
np.save(d + '/data/w.npy', (r.standard_normal((640, 512)) * 0.05).astype(np.float32))
open(d + '/big.xml', 'w').write("""<model name="bigw" format="1"><graph>
  <input name="x" shape="2 640"/><input name="target" shape="2 4"/>
  <initializer name="w" shape="640 512" init="file" path="data/w.npy"/>
  <initializer name="head" shape="512 4" init="uniform" low="-0.1" high="0.1"/>
  <node name="fc" op="MatMul" in="x w" out="h"/>
  <node name="act" op="Relu" in="h" out="a"/>
  <node name="out" op="MatMul" in="a head" out="y"/>
  <node name="diff" op="Sub" in="y target" out="d"/>
  <node name="sq" op="Mul" in="d d" out="d2"/>
  <node name="mse" op="ReduceMean" in="d2" out="loss" keepdims="0"/>
  <output name="loss"/></graph></model>
""")
EOF
if "$remat" build "$bw/big.xml" --freeze w -o "$bw/fz" && "$remat" build "$bw/big.xml" -o "$bw/all" &&
   "$remat" compile "$bw/big.xml" --freeze w -o "$bw/fz.c"; then
    [ ! -e "$bw/fz.weights" ] && [ "$(stat -c %s "$bw/all.weights")" = $(( (327680 + 2048) * 4 )) ] &&
        [ "$(macro "$bw/fz.h" FROZEN_FLOATS)" = 327680 ] &&
        [ "$(macro "$bw/fz.h" PARAM_FLOATS)" = 2048 ] &&
        grep -q '^static const float bigw_frozen\[327680\] = {$' "$bw/fz.c" && ok ||
        bad "big frozen data: weights file $(ls "$bw"), FROZEN_FLOATS $(macro "$bw/fz.h" FROZEN_FLOATS)"
    "$bw/fz" --seed 2 --dump "$bw/fz.d" >/dev/null && "$bw/all" --seed 2 --dump "$bw/all.d" >/dev/null &&
        cmp -s "$bw/fz.d/loss.npy" "$bw/all.d/loss.npy" &&
        cmp -s "$bw/fz.d/grad.head.npy" "$bw/all.d/grad.head.npy" &&
        cmp -s "$bw/fz.d/param.w.npy" "$bw/all.d/param.w.npy" && ok ||
        bad "big frozen data: the run differs from the unfrozen build's"
else
    bad "big frozen data: compile or build"
fi

# An ONNX model's initializers are data: frozen ones are in flash without
# --seed, and the run is bitwise the unfrozen model's (the trainable
# gradients, every parameter, the loss). mlp_ln_gelu's input layer and
# first block: 16x8 + 16, 16 + 16, 64x16 + 64, 16x64 + 16 = 2304 floats.
ox=$work/onnx
mkdir -p "$ox"
if "$PY" tests/onnx/torch_models.py mlp_ln_gelu "$ox" >"$ox/log" 2>&1 &&
   "$remat" build "$ox/mlp_ln_gelu.onnx" --policy sac -o "$ox/all" &&
   "$remat" compile "$ox/mlp_ln_gelu.onnx" --policy sac -o "$ox/all.c" &&
   "$remat" compile "$ox/mlp_ln_gelu.onnx" --policy sac --freeze 'inp.*' --freeze 'blocks.0.*' -o "$ox/fz.c" &&
   "$remat" build "$ox/mlp_ln_gelu.onnx" --policy sac --freeze 'inp.*' --freeze 'blocks.0.*' -o "$ox/fz"; then
    [ "$(macro "$ox/fz.h" FROZEN_FLOATS)" = 2304 ] &&
        [ $(( $(macro "$ox/all.h" PARAM_FLOATS) - $(macro "$ox/fz.h" PARAM_FLOATS) )) -eq 2304 ] &&
        grep -q '^static const float mlp_ln_gelu_frozen\[2304\] = {$' "$ox/fz.c" &&
        ! grep -q 'init_blocks_0_fc1_weight' "$ox/fz.c" && ok ||
        bad "onnx: FROZEN_FLOATS $(macro "$ox/fz.h" FROZEN_FLOATS), not 2304 in a static const array"
    if "$ox/all" --seed 1 --dump "$ox/all.dump" >/dev/null && "$ox/fz" --seed 1 --dump "$ox/fz.dump" >/dev/null; then
        same=1
        for f in "$ox/fz.dump"/*; do
            cmp -s "$f" "$ox/all.dump/$(basename "$f")" || { same=0; echo "     onnx: $(basename "$f") differs"; }
        done
        [ "$same" = 1 ] && [ -e "$ox/fz.dump/param.blocks.0.fc1.weight.npy" ] &&
            [ ! -e "$ox/fz.dump/grad.blocks.0.fc1.weight.npy" ] && ok ||
            bad "onnx: the frozen build's dump differs from the unfrozen one's"
    else
        bad "onnx: --dump"
    fi
else
    cat "$ox/log"; bad "onnx: export or build"
fi

finish test_freeze
