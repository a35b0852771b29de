#!/usr/bin/env bash
# The table of frozen-parameter cases in docs/training.md ("Frozen
# parameters"): for mlp12 and gpt under sac, full training against
# fine-tuning the last layers, the biases alone, or the second half. Prints
# markdown rows: trainable floats, gradient + AdamW state bytes, saved
# bytes, arena bytes and the trainer's --bench median ms per train step
# (one OpenBLAS thread). Usage: scripts/freeze_table.sh [BENCH_STEPS]
set -eu
cd "$(dirname "$0")/.."
remat=${REMAT:-build/remat}
steps=${1:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
set -f      # the cases hold globs for remat
cases=(
    "mlp12|full training|"
    "mlp12|last 2 of 12 blocks|--freeze b?.*"
    "mlp12|biases only|--freeze *.weight"
    "mlp12|second half (b6..b11)|--freeze b0.* --freeze b1.* --freeze b2.* --freeze b3.* --freeze b4.* --freeze b5.*"
    "gpt|full training|"
    "gpt|last layer, lnf, head|--freeze wte --freeze wpe --freeze l0.* --freeze l1.* --freeze l2.*"
    "gpt|biases only|--freeze *.weight --freeze *.scale --freeze wte --freeze wpe"
    "gpt|second half (l2, l3, lnf, head)|--freeze wte --freeze wpe --freeze l0.* --freeze l1.*"
)
fmt() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
echo "| graph | trains | trainable floats | gradients + AdamW state bytes | saved bytes | arena bytes | ms/step | vs full |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
    IFS='|' read -r g what args <<< "$c"
    read -r -a freeze <<< "$args"
    "$remat" compile "graphs/$g.xml" --policy sac "${freeze[@]}" -o "$work/m.c"
    "$remat" build "graphs/$g.xml" --policy sac "${freeze[@]}" -o "$work/t"
    gf=$(sed -n 's/^#define [A-Z0-9_]*_GRAD_FLOATS //p' "$work/m.h")
    saved=$(sed -n 's/^ \* saved bytes: *\([0-9]*\).*/\1/p' "$work/m.c")
    arena=$("$remat" schedule "graphs/$g.xml" --policy sac "${freeze[@]}" | sed -n 's/^arena_bytes: //p')
    ms=$("$work/t" --bench "$steps" | sed -n 's/^median_ms //p')
    [ -z "$args" ] && full_ms=$ms
    printf "| %s | %s | %s | %s | %s | %s | %.3f | %.2fx |\n" "$g" "$what" \
        "$(fmt "$gf")" "$(fmt $((gf * 3 * 4)))" "$(fmt "$saved")" "$(fmt "$arena")" \
        "$ms" "$(echo "$ms / $full_ms" | bc -l)"
done
