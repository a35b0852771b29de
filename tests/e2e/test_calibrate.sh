#!/usr/bin/env bash
# The cost model's rates (docs/cost-model.md): `remat calibrate` writes a
# rates file that the compiling commands read, at $REMAT_RATES or under
# $XDG_CONFIG_HOME or ~/.config; a hand-written file with dear bytes
# changes gpt's plan within a budget and the seconds reported;
# REMAT_RATES=builtin ignores the file and a missing file is the built-in
# rates, silently; a malformed file is one line naming the file and the
# line, exit 1.
. "$(dirname "$0")/lib.sh"
g=graphs/gpt.xml
fig() { sed -n "s/^$1: //p" "$2"; }
decisions() { grep -v '^[a-z_]*: ' "$1"; }

# calibrate: quick, prints the three rates and where it wrote them, the
# folders made, nothing left beside the file
rates=$work/cfg/remat/rates
start=$(date +%s)
if REMAT_RATES=$rates run 0 "$remat" calibrate; then ok; else bad "calibrate"; fi
[ $(($(date +%s) - start)) -le 5 ] && ok || bad "calibrate took over 5 s"
grep -q "^wrote $rates\$" "$work/out" && ok || bad "calibrate: no 'wrote $rates'"
for k in gemm_flops_per_s other_flops_per_s bytes_per_s; do
    awk -v k="$k" '$1 == k && $2 > 0 {found = 1} END {exit !found}' "$rates" \
        && grep -q "^$k " "$work/out" && ok || bad "calibrate: no positive $k"
done
[ "$(ls "$(dirname "$rates")")" = rates ] && ok \
    || bad "calibrate left more than the file: $(ls "$(dirname "$rates")")"
# the file parses: a budget is solved at its rates
REMAT_RATES=$rates run 0 "$remat" schedule "$g" --budget 0.5 && ok \
    || bad "schedule with the calibrated file"

# where it goes without REMAT_RATES
(unset REMAT_RATES; XDG_CONFIG_HOME=$work/xdg "$remat" calibrate >/dev/null) \
    && [ -s "$work/xdg/remat/rates" ] && ok || bad "calibrate: not under \$XDG_CONFIG_HOME"
(unset REMAT_RATES XDG_CONFIG_HOME; HOME=$work/home "$remat" calibrate >/dev/null) \
    && [ -s "$work/home/.config/remat/rates" ] && ok || bad "calibrate: not under ~/.config"
REMAT_RATES=builtin run 1 "$remat" calibrate && [ "$(wc -l < "$work/err")" = 1 ] \
    && ok || bad "calibrate with REMAT_RATES=builtin: not one error line"
run 2 "$remat" calibrate extra && ok || bad "calibrate extra: not a usage error"
"$remat" --help | grep -q '^  calibrate ' && ok || bad "--help does not list calibrate"

# dear bytes: another plan within the same budget, and its seconds
dear=$work/dear
printf '# bytes a thousand a second\ngemm_flops_per_s 1e9\nother_flops_per_s 1e9\nbytes_per_s 1e3\n' > "$dear"
REMAT_RATES=builtin "$remat" schedule "$g" --budget 0.5 > "$work/builtin"
REMAT_RATES=$dear "$remat" schedule "$g" --budget 0.5 > "$work/dear.s"
[ "$(fig proven_optimal "$work/dear.s")" = yes ] && ok || bad "dear bytes: not proven"
[ "$(fig saved_bytes "$work/dear.s")" -le "$(fig budget_bytes "$work/dear.s")" ] \
    && ok || bad "dear bytes: over the budget"
decisions "$work/builtin" > "$work/d1"
decisions "$work/dear.s" > "$work/d2"
cmp -s "$work/d1" "$work/d2" && bad "dear bytes: the same plan as the built-in rates" || ok
awk -v s="$(fig recompute_seconds "$work/dear.s")" 'BEGIN {exit !(s > 1)}' && ok \
    || bad "dear bytes: recompute_seconds $(fig recompute_seconds "$work/dear.s")"
# the file is the default: through XDG_CONFIG_HOME too
mkdir -p "$work/xdg2/remat" && cp "$dear" "$work/xdg2/remat/rates"
(unset REMAT_RATES; XDG_CONFIG_HOME=$work/xdg2 "$remat" schedule "$g" --budget 0.5) \
    > "$work/xdg2.s" && cmp -s "$work/xdg2.s" "$work/dear.s" && ok \
    || bad "the rates under \$XDG_CONFIG_HOME are not read by default"
# builtin ignores it; a missing file is builtin, silently
(export XDG_CONFIG_HOME=$work/xdg2; REMAT_RATES=builtin "$remat" schedule "$g" --budget 0.5) \
    > "$work/b2.s" && cmp -s "$work/b2.s" "$work/builtin" && ok \
    || bad "REMAT_RATES=builtin read the file"
REMAT_RATES=$work/missing run 0 "$remat" schedule "$g" --budget 0.5 &&
    [ ! -s "$work/err" ] && cmp -s "$work/out" "$work/builtin" && ok \
    || bad "a missing rates file is not the built-in rates, silently"
# pareto prices its staircase at the file's rates too
REMAT_RATES=$dear run 0 "$remat" pareto "$g" && ! cmp -s "$work/out" \
    <(REMAT_RATES=builtin "$remat" pareto "$g") && ok \
    || bad "pareto does not read the rates file"

# malformed: one line, file:line:, exit 1, for every compiling command
bad_rates=$work/bad
printf '# rates\ngemm_flops_per_s 1e9\nother_flops_per_s many\nbytes_per_s 1e9\n' > "$bad_rates"
for cmd in "schedule $g --budget 0.5" "schedule $g" "pareto $g" \
           "compile $g -o $work/x.c"; do
    # shellcheck disable=SC2086
    if REMAT_RATES=$bad_rates run 1 "$remat" $cmd && [ "$(wc -l < "$work/err")" = 1 ] &&
        grep -q "^$bad_rates:3: 'other_flops_per_s' needs one positive number" "$work/err"
    then ok; else bad "malformed rates, $cmd: $(head -3 "$work/err")"; fi
done
[ ! -e "$work/x.c" ] && ok || bad "compile wrote its output despite bad rates"
printf 'gemm_flops_per_s 1e9\n' > "$bad_rates"
REMAT_RATES=$bad_rates run 1 "$remat" schedule "$g" &&
    grep -q "^$bad_rates:1: no 'other_flops_per_s' line" "$work/err" && ok \
    || bad "a rates file lacking keys: $(cat "$work/err")"
finish test_calibrate
