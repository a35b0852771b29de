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
# globs match, from the graph's own shapes (python's fnmatch, not remat's)
frozen_floats() {
    /usr/bin/python3 - "$@" <<'PY'
import fnmatch, re, sys
xml = open(sys.argv[1]).read()
globs = [a for a in sys.argv[2:] if a != "--freeze"]
n = 0
for name, shape in re.findall(r'<initializer name="([^"]*)" shape="([^"]*)"', xml):
    if any(fnmatch.fnmatchcase(name, g) for g in globs):
        k = 1
        for d in shape.split():
            k *= int(d)
        n += k
print(n)
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
    want=$(frozen_floats "$graph" "${freeze[@]}")
    [ "$want" -gt 0 ] &&
        [ $(( $(macro "$full.h" GRAD_FLOATS) - $(macro "$exe.h" GRAD_FLOATS) )) -eq "$want" ] &&
        [ $(( $(macro "$full.h" ADAMW_STATE_FLOATS) - $(macro "$exe.h" ADAMW_STATE_FLOATS) )) -eq $((2 * want)) ] &&
        [ "$(macro "$full.h" PARAM_FLOATS)" = "$(macro "$exe.h" PARAM_FLOATS)" ] &&
        ok || bad "$c: GRAD_FLOATS $(macro "$exe.h" GRAD_FLOATS) is not full's $(macro "$full.h" GRAD_FLOATS) less $want"
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

finish test_freeze
