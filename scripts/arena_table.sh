#!/usr/bin/env bash
# How close the arena plans come to their lower bound (docs/memory.md): for
# every shipped graph (graphs/*.xml) under every built-in policy,
# `remat schedule`'s arena_bytes against peak_live_bytes, then the worst
# ratio over those and every test graph (tests/graphs/*.xml). Prints
# markdown. Usage: scripts/arena_table.sh
set -eu
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
fmt() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
policies="none full sac sac-aggressive"
echo "| graph | policy | saved bytes | peak live bytes | arena bytes | arena / peak |"
echo "|---|---|---:|---:|---:|---:|"
worst=1 worst_at="-"
for g in graphs/*.xml tests/graphs/*.xml; do
    for p in $policies; do
        out=$("$remat" schedule "$g" --policy "$p")
        get() { echo "$out" | sed -n "s/^$1: //p"; }
        arena=$(get arena_bytes) peak=$(get peak_live_bytes) saved=$(get saved_bytes)
        ratio=$(echo "$arena / $peak" | bc -l)
        if [ "$(echo "$ratio > $worst" | bc -l)" = 1 ]; then
            worst=$ratio worst_at="$(basename "$g" .xml) $p"
        fi
        case $g in graphs/*)
            printf "| %s | %s | %s | %s | %s | %.4f |\n" "$(basename "$g" .xml)" "$p" \
                "$(fmt "$saved")" "$(fmt "$peak")" "$(fmt "$arena")" "$ratio" ;;
        esac
    done
done
printf "\nworst arena / peak over %s graphs x 4 policies: %.4f (%s)\n" \
    "$(ls graphs/*.xml tests/graphs/*.xml | wc -l)" "$worst" "$worst_at"
