#!/usr/bin/env bash
# The budget solver at depth (docs/solver.md): U-Nets (scripts/make_unet.py,
# with and without --emb) and GPTs (scripts/make_gpt.py --layers), each
# through `remat pareto` and `remat schedule --budget 0.5` under
# /usr/bin/time: seconds, peak memory, and whether the answer is proven
# optimal; `--budget 1`'s seconds and memory, the whole frontier with
# one plan scheduled (where pareto schedules every plan); and --max-arena
# halfway between full's arena and none's: seconds, memory, proven. Prints
# markdown. REMAT: another build of the compiler (e.g. the
# one before a change, for the before column). Timings are this machine's.
# Usage: scripts/solver_table.sh [GRAPH-SPEC...]   (default: the table's:
#        unet8 unet16 unet24 unet32 unet32_emb gpt24 gpt48 gpt96)
set -u
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
export REMAT_RATES=builtin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
specs=${*:-unet8 unet16 unet24 unet32 unet32_emb gpt24 gpt48 gpt96}
echo "| graph | nodes | pareto: s | MB | plans | --budget 0.5: s | MB | proven | --budget 1: s | MB | --max-arena mid: s | MB | proven |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"
for spec in $specs; do
    g=$work/$spec.xml
    case $spec in
        unet*_emb) /usr/bin/python3 scripts/make_unet.py --emb "${spec//[^0-9]/}" > "$g" ;;
        unet*) /usr/bin/python3 scripts/make_unet.py "${spec#unet}" > "$g" ;;
        gpt*) /usr/bin/python3 scripts/make_gpt.py --layers "${spec#gpt}" > "$g" ;;
        *) echo "unknown graph $spec" >&2; exit 2 ;;
    esac
    nodes=$(grep -c '<node ' "$g")
    /usr/bin/time -f "%e %M" -o "$work/t" "$remat" pareto "$g" > "$work/p" 2> "$work/e"
    read -r ps pk < <(tail -1 "$work/t")
    if head -1 "$work/p" | grep -q 'optimal plans'; then
        plans=$(head -1 "$work/p" | sed 's/.*: \([0-9]*\) optimal plans\(.*\)/\1\2/; s/, proven$//')
    else
        plans="failed: states exceed 16384"
    fi
    /usr/bin/time -f "%e %M" -o "$work/t" "$remat" schedule "$g" --budget 0.5 > "$work/s" 2>&1
    read -r bs bk < <(tail -1 "$work/t")
    proven=$(sed -n 's/^proven_optimal: //p' "$work/s")
    /usr/bin/time -f "%e %M" -o "$work/t" "$remat" schedule "$g" --budget 1 > "$work/s1" 2>&1
    read -r ws wk < <(tail -1 "$work/t")
    # --max-arena halfway between full's arena and none's
    lo=$("$remat" schedule "$g" --policy full | sed -n 's/^arena_bytes: //p')
    hi=$("$remat" schedule "$g" --policy none | sed -n 's/^arena_bytes: //p')
    /usr/bin/time -f "%e %M" -o "$work/t" "$remat" schedule "$g" \
        --max-arena $(( (lo + hi) / 2 )) > "$work/a" 2>&1
    read -r as ak < <(tail -1 "$work/t")
    aproven=$(sed -n 's/^proven_optimal: \(yes\|no\).*/\1/p' "$work/a")
    printf "| %s | %s | %s | %.0f | %s | %s | %.0f | %s | %s | %.0f | %s | %.0f | %s |\n" \
        "$spec" "$nodes" "$ps" "$(echo "$pk / 1024" | bc -l)" "$plans" "$bs" \
        "$(echo "$bk / 1024" | bc -l)" "$proven" "$ws" "$(echo "$wk / 1024" | bc -l)" \
        "$as" "$(echo "$ak / 1024" | bc -l)" "${aproven:-no plan}"
done
