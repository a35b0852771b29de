#!/usr/bin/env bash
# --max-arena on the shipped graphs (docs/memory.md): for bounds at five
# points between full's arena and none's, the plan's arena, recompute
# FLOPs and estimated seconds (at the built-in rates, docs/cost-model.md),
# whether it is proven optimal, and the seconds `remat schedule` took
# (this machine's). Prints markdown.
set -u
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
export REMAT_RATES=builtin
fig() { sed -n "s/^$1: //p" "$2"; }
t=$(mktemp)
trap 'rm -f "$t" "$t.time"' EXIT
echo "| graph | --max-arena | arena_bytes | recompute_flops | recompute_seconds | proven | s |"
echo "|---|---:|---:|---:|---:|---|---:|"
for g in graphs/*.xml; do
    lo=$("$remat" schedule "$g" --policy full | sed -n 's/^arena_bytes: //p')
    hi=$("$remat" schedule "$g" --policy none | sed -n 's/^arena_bytes: //p')
    [ "$hi" -lt "$lo" ] && { x=$lo; lo=$hi; hi=$x; }
    for i in 0 1 2 3 4; do
        a=$(( lo + (hi - lo) * i / 4 ))
        if /usr/bin/time -f %e -o "$t.time" "$remat" schedule "$g" --max-arena "$a" > "$t" 2>/dev/null; then
            echo "| $(basename "$g" .xml) | $a | $(fig arena_bytes "$t") | $(fig recompute_flops "$t") | $(fig recompute_seconds "$t") | $(fig proven_optimal "$t" | cut -d' ' -f1) | $(tail -1 "$t.time") |"
        else
            echo "| $(basename "$g" .xml) | $a | no plan fits | | | | $(tail -1 "$t.time") |"
        fi
    done
done
