#!/usr/bin/env bash
# The demo: compiles graphs/mlp12.xml under every built-in policy, builds a
# trainer for each, and prints one table (saved and arena bytes, forward and
# recompute executions, ms per train step, loss after a few SGD steps), then
# what each policy saves and costs relative to `none`.
# Timing: one BLAS thread; the trainers alternate over several rounds and
# each figure is the median of its rounds' medians.
set -eu
cd "$(dirname "$0")/.."
graph=${1:-graphs/mlp12.xml}
policies="none full sac sac-aggressive"
rounds=5
steps=20
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fig() { sed -n "s/^$2: //p" "$work/$1.sched"; }
for p in $policies; do
    build/remat schedule "$graph" --policy "$p" > "$work/$p.sched"
    build/remat build "$graph" --policy "$p" -o "$work/$p.trainer"
    "$work/$p.trainer" --steps $steps --lr 0.05 > "$work/$p.steps"
done
for r in $(seq $rounds); do
    for p in $policies; do
        "$work/$p.trainer" --bench 40 | sed -n 's/^median_ms //p' >> "$work/$p.ms"
    done
done
median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "remat demo: $graph, $(nproc) cores, OPENBLAS_NUM_THREADS=1"
echo "(ms/step: median of $rounds alternating rounds of 40 train steps each)"
echo
printf '%-15s %12s %12s %10s %10s %9s %12s\n' policy "saved bytes" "arena bytes" \
    "fwd execs" "recomputes" "ms/step" "loss@$steps"
for p in $policies; do
    median "$work/$p.ms" > "$work/$p.med"
    printf "%-15s %12d %12d %10d %10d %9.3f %12s\n" "$p" "$(fig $p saved_bytes)" \
        "$(fig $p arena_bytes)" "$(fig $p forward_executions)" \
        "$(fig $p recompute_executions)" "$(cat "$work/$p.med")" \
        "$(tail -1 "$work/$p.steps" | awk '{print $4}')"
done
echo
echo "relative to none:"
base_saved=$(fig none saved_bytes)
base_ms=$(cat "$work/none.med")
for p in $policies; do
    [ "$p" = none ] && continue
    awk -v p="$p" -v s="$(fig $p saved_bytes)" -v b="$base_saved" \
        -v ms="$(cat "$work/$p.med")" -v bms="$base_ms" \
        -v fl="$(fig $p recompute_flops)" 'BEGIN {
        printf "  %-15s keeps %5.1f%% of the saved bytes (%d fewer), %d recompute FLOPs, %+5.1f%% time per step\n",
            p, 100 * s / b, b - s, fl, 100 * (ms / bms - 1) }'
done
