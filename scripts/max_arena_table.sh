#!/usr/bin/env bash
# --max-arena at five bounds from full's arena to none's (docs/memory.md):
# the plan's arena, recompute FLOPs and estimated seconds (at the built-in
# rates, docs/cost-model.md), whether it is proven optimal, and the CPU
# seconds and peak MB `remat schedule` took (this machine's). Prints
# markdown. The graphs: the shipped ones, or those named: a file, or
# gptN (scripts/make_gpt.py --layers N) or unetD (scripts/make_unet.py D).
# Usage: scripts/max_arena_table.sh [GRAPH...]
set -u
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
export REMAT_RATES=builtin
fig() { sed -n "s/^$1: //p" "$2"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t=$work/out
echo "| graph | --max-arena | arena_bytes | recompute_flops | recompute_seconds | proven | s | MB |"
echo "|---|---:|---:|---:|---:|---|---:|---:|"
for spec in ${*:-graphs/*.xml}; do
    case $spec in
        *.xml) g=$spec ;;
        gpt*) g=$work/$spec.xml; /usr/bin/python3 scripts/make_gpt.py --layers "${spec#gpt}" > "$g" ;;
        unet*) g=$work/$spec.xml; /usr/bin/python3 scripts/make_unet.py "${spec#unet}" > "$g" ;;
        *) echo "unknown graph $spec" >&2; exit 2 ;;
    esac
    name=$(basename "$g" .xml)
    lo=$("$remat" schedule "$g" --policy full | sed -n 's/^arena_bytes: //p')
    hi=$("$remat" schedule "$g" --policy none | sed -n 's/^arena_bytes: //p')
    [ "$hi" -lt "$lo" ] && { x=$lo; lo=$hi; hi=$x; }
    for i in 0 1 2 3 4; do
        a=$(( lo + (hi - lo) * i / 4 ))
        if /usr/bin/time -f "%U %S %M" -o "$t.time" "$remat" schedule "$g" --max-arena "$a" > "$t" 2>/dev/null; then
            read -r us ss kb < <(tail -1 "$t.time")
            echo "| $name | $a | $(fig arena_bytes "$t") | $(fig recompute_flops "$t") | $(fig recompute_seconds "$t") | $(fig proven_optimal "$t" | cut -d' ' -f1) | $(awk -v u="$us" -v s="$ss" 'BEGIN {printf "%.2f", u + s}') | $(( kb / 1024 )) |"
        else
            echo "| $name | $a | no plan fits | | | | | |"
        fi
    done
done
