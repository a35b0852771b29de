#!/usr/bin/env bash
# End-to-end test of frozen parameters (--freeze GLOB, docs/training.md):
# every compiling command takes it, a glob that matches nothing is an
# error, and a frozen model saves less than the full one.
# Needs cc and OpenBLAS.
. "$(dirname "$0")/lib.sh"

# run RC ARGS...: stdout to $work/out, stderr to $work/err, exit RC
run() {
    local want=$1 rc=0
    shift
    "$@" </dev/null >"$work/out" 2>"$work/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "     $*: exit $rc, wanted $want" >&2
        sed 's/^/     stderr: /' "$work/err" >&2
        return 1
    fi
}
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

finish test_freeze
