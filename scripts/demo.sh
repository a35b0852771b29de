#!/usr/bin/env bash
# The demo: for each graph (the arguments; by default every graph in
# graphs/), compiles it under every built-in policy, builds a trainer for
# each, and prints one table (saved and arena bytes, forward and recompute
# executions, ms per train step, loss after a few SGD steps), then what each
# policy saves and costs relative to `none`, then every optimal plan from
# budget 0 to 1 (`remat pareto`), whose curve it draws in
# build/demo/NAME-pareto.svg.
# Timing: one BLAS thread; the trainers alternate over several rounds and
# each figure is the median of its rounds' medians. A round times 40 train
# steps, fewer on a graph whose step is slow (what fits in about 0.4 s at
# none's speed), so that the whole demo takes a few minutes on 2 cores; each
# table's header says how many.
set -eu
cd "$(dirname "$0")/.."
torch_model=0
[ $# -gt 0 ] || { torch_model=1; set -- graphs/mlp12.xml $(ls graphs/*.xml | grep -v '/mlp12.xml$'); }
policies="none full sac sac-aggressive"
rounds=5
steps=20
export OPENBLAS_NUM_THREADS=1
# Recompute priced at the built-in rates (docs/cost-model.md), so that the
# pareto table is docs/benchmarks.md's on any machine, calibrated or not.
export REMAT_RATES=builtin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

demo() {   # graph
    local graph=$1 w p r pids="" bench
    local name=${graph##*/}
    name=${name%.*}
    w=$work/$name
    mkdir -p "$w"
    fig() { sed -n "s/^$2: //p" "$w/$1.sched"; }
    # two builds at a time: the C compiler is most of the wait
    for p in $policies; do
        build/remat schedule "$graph" --policy "$p" > "$w/$p.sched"
        build/remat build "$graph" --policy "$p" -o "$w/$p.trainer" & pids="$pids $!"
        if [ "$(echo $pids | wc -w)" -ge 2 ]; then
            for pid in $pids; do wait "$pid"; done
            pids=""
        fi
    done
    for pid in $pids; do wait "$pid"; done
    for p in $policies; do
        "$w/$p.trainer" --steps $steps --lr 0.05 > "$w/$p.steps"
    done
    # train steps per round: 40, or what fits in ~400 ms at none's speed
    bench=$("$w/none.trainer" --bench 3 | awk '/^median_ms/ {
        n = int(400 / $2); print (n > 40) ? 40 : (n < 5) ? 5 : n }')
    for r in $(seq $rounds); do
        for p in $policies; do
            "$w/$p.trainer" --bench "$bench" | sed -n 's/^median_ms //p' >> "$w/$p.ms"
        done
    done

    echo "remat demo: $graph, $(nproc) cores, OPENBLAS_NUM_THREADS=1"
    echo "(ms/step: median of $rounds alternating rounds of $bench train steps each)"
    echo
    printf '%-15s %12s %12s %10s %10s %9s %12s\n' policy "saved bytes" "arena bytes" \
        "fwd execs" "recomputes" "ms/step" "loss@$steps"
    for p in $policies; do
        median "$w/$p.ms" > "$w/$p.med"
        printf "%-15s %12d %12d %10d %10d %9.3f %12s\n" "$p" "$(fig $p saved_bytes)" \
            "$(fig $p arena_bytes)" "$(fig $p forward_executions)" \
            "$(fig $p recompute_executions)" "$(cat "$w/$p.med")" \
            "$(tail -1 "$w/$p.steps" | awk '{print $4}')"
    done
    echo
    echo "relative to none:"
    local base_saved base_ms
    base_saved=$(fig none saved_bytes)
    base_ms=$(cat "$w/none.med")
    for p in $policies; do
        [ "$p" = none ] && continue
        awk -v p="$p" -v s="$(fig $p saved_bytes)" -v b="$base_saved" \
            -v ms="$(cat "$w/$p.med")" -v bms="$base_ms" \
            -v fl="$(fig $p recompute_flops)" 'BEGIN {
            printf "  %-15s keeps %5.1f%% of the saved bytes (%d fewer), %d recompute FLOPs, %+5.1f%% time per step\n",
                p, 100 * s / b, b - s, fl, 100 * (ms / bms - 1) }'
    done
    local svg
    svg=build/demo/$name-pareto.svg
    mkdir -p build/demo
    echo
    echo "every optimal plan, budget 0 at full's saved bytes and 1 at none's (build/remat pareto $graph -o $svg):"
    build/remat pareto "$graph" -o "$svg"
}

first=1
for g in "$@"; do
    [ $first -eq 1 ] || echo
    first=0
    demo "$g"
done

# A PyTorch model as a user brings one: the GPT of tests/onnx/torch_models.py
# (q/k/v Linears, masked_fill causal mask, softmax, view/transpose,
# cross-entropy) exported with torch.onnx.export, imported (what was folded
# and rewritten), then the same table as for the shipped graphs. Its file
# is torch_gpt.onnx, so that its model, table and picture
# (build/demo/torch_gpt-pareto.svg) are named torch_gpt, never mistaken
# for graphs/gpt.xml's.
if [ "$torch_model" -eq 1 ]; then
    d=build/demo/torch
    mkdir -p "$d"
    echo
    echo "remat demo: a PyTorch model (tests/onnx/torch_models.py gpt, torch.onnx.export)"
    /usr/bin/python3 tests/onnx/torch_models.py gpt "$d" > "$d/export.log" 2>&1
    mv "$d/gpt.onnx" "$d/torch_gpt.onnx"
    build/remat import "$d/torch_gpt.onnx" -o "$d/torch_gpt.xml"
    echo
    demo "$d/torch_gpt.onnx"
    echo
    echo "the round trip: trained with AdamW on data, saved, loaded back into PyTorch"
    /usr/bin/python3 scripts/torch_roundtrip.py build/remat build/demo/roundtrip 2>/dev/null
fi
