#!/usr/bin/env bash
# The memory the fused train step saves (docs/training.md, "The update
# fused into the backward"): for every shipped graph (graphs/*.xml, and the
# firmware test's tests/graphs/mlp_tiny.xml) under none, sac and full, the
# unfused step's arena plus its gradient buffer against the fused step's
# arena alone, from `remat schedule` (arena_bytes, gradient_bytes,
# fused_arena_bytes). Parameters, inputs and optimizer state are the same
# in both and left out. Prints markdown rows. Usage: scripts/fused_table.sh
set -eu
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
fmt() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
echo "| graph | policy | gradient buffer | arena | unfused: arena + gradients | fused arena | saved | fused / unfused |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for g in graphs/*.xml tests/graphs/mlp_tiny.xml; do
    for p in none sac full; do
        out=$("$remat" schedule "$g" --policy "$p")
        get() { echo "$out" | sed -n "s/^$1: //p"; }
        arena=$(get arena_bytes) grad=$(get gradient_bytes) fused=$(get fused_arena_bytes)
        unfused=$((arena + grad))
        printf "| %s | %s | %s | %s | %s | %s | %s | %.2f |\n" "$(basename "$g" .xml)" "$p" \
            "$(fmt "$grad")" "$(fmt "$arena")" "$(fmt "$unfused")" "$(fmt "$fused")" \
            "$(fmt $((unfused - fused)))" "$(echo "$fused / $unfused" | bc -l)"
    done
done
