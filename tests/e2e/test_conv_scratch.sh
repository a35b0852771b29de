#!/usr/bin/env bash
# --conv-scratch (docs/memory.md): a bound on a Conv's im2col columns.
# On the conv graphs (cnn, tests/graphs/conv_ops and conv_nd, and the
# ResNet-8 and MobileNetV1 stem of tests/conv_scratch/), trainers built
# with the portable GEMM under a bound of one row a band and of 20KiB dump
# loss, outputs and gradients byte-identical to the unbounded build's, on
# one thread and on two; the bounded build's generated code names the
# bound in its window and compiles warning-free; `remat memory` shows the
# scratch it saves on ResNet-8 and the stem, and pareto and diff the
# arena it lets recompute buy (the figures docs/memory.md shows); a bad
# bound is refused with one line.
. "$(dirname "$0")/lib.sh"

graphs="graphs/cnn.xml tests/graphs/conv_ops.xml tests/graphs/conv_nd.xml
        tests/conv_scratch/resnet8.xml tests/conv_scratch/mobilenet_stem.xml"

for g in $graphs; do
    n=$(basename "$g" .xml)
    if ! run 0 "$remat" build "$g" --no-blas -o "$work/$n.whole"; then
        bad "$n: build"; continue; fi
    run 0 "$work/$n.whole" --seed 3 --dump "$work/$n.whole.d" --threads 1 ||
        bad "$n: dump"
    for cap in 1 20KiB; do
        if ! run 0 "$remat" build "$g" --no-blas --conv-scratch "$cap" \
                -o "$work/$n.$cap"; then
            bad "$n --conv-scratch $cap: build"; continue; fi
        for t in 1 2; do
            if run 0 "$work/$n.$cap" --seed 3 --dump "$work/$n.$cap.$t" \
                    --threads "$t" &&
                same_dirs "$work/$n.whole.d" "$work/$n.$cap.$t"; then ok
            else bad "$n --conv-scratch $cap --threads $t: differs from no bound"; fi
        done
    done
done

# the bound is in the generated window, which compiles warning-free
if run 0 "$remat" compile tests/conv_scratch/resnet8.xml --conv-scratch 16KiB \
        -o "$work/r8.c" && grep -q '\.col_cap = 4096};' "$work/r8.c" &&
    cc -std=c99 -Wall -Wextra -pedantic -Werror -Iruntime -c "$work/r8.c" \
        -o "$work/r8.o"; then ok
else bad "resnet8: --conv-scratch 16KiB is not .col_cap = 4096 in warning-free C"; fi
# and unbounded windows are written as before the field
if run 0 "$remat" compile tests/conv_scratch/resnet8.xml -o "$work/r8w.c" &&
    ! grep -q col_cap "$work/r8w.c"; then ok
else bad "resnet8: an unbounded window names col_cap"; fi

# the figures of docs/memory.md's table
figures() {   # graph policy cap: "arena scratch" of remat memory
    local opt=()
    [ "$3" = none ] || opt=(--conv-scratch "$3")
    "$remat" memory "$1" --policy "$2" "${opt[@]}" |
        awk '/^arena_bytes:/ { a = $2 } /^peak_scratch_bytes:/ { s = $2 }
             END { print a, s }'
}
check() {   # graph policy cap want
    local got
    got=$(figures "$1" "$2" "$3")
    if [ "$got" = "$4" ]; then ok
    else bad "$1 --policy $2 --conv-scratch $3: arena, peak scratch $got, want $4"; fi
}
r8=tests/conv_scratch/resnet8.xml
check "$r8" none none "1844288 1188928"
check "$r8" none 64KiB "895232 207104"
check "$r8" full 64KiB "730176 74816"
check "$r8" full 1 "672832 17472"
check tests/conv_scratch/mobilenet_stem.xml none none "322560 248832"
check tests/conv_scratch/mobilenet_stem.xml none 64KiB "221184 0"

# pareto and diff take the bound: unbounded, every plan holds the columns'
# peak (1188928 bytes), so recompute buys little arena (a rebuilt block
# boundary); bounded, recompute buys arena below that peak, in more plans
rows() {   # ARGS...: the arena column of remat pareto --by arena
    "$remat" pareto "$r8" --by arena "$@" | awk '$1 ~ /^-?[0-9.]+$/ {print $3}'
}
whole=$(rows) banded=$(rows --conv-scratch 16KiB)
if [ "$(echo "$whole" | awk '$1 < 1188928' | wc -l)" -eq 0 ] &&
   [ "$(echo "$banded" | wc -l)" -gt "$(echo "$whole" | wc -l)" ] &&
   [ "$(echo "$banded" | sort -n | head -1)" -lt 1188928 ]; then ok
else bad "resnet8: pareto --by arena arenas $(echo $whole), bounded $(echo $banded); want none under 1188928 unbounded, more rows and one under it bounded"; fi
if run 0 "$remat" diff "$r8" --policy none --policy full --conv-scratch 16KiB &&
    grep -q '^arena_bytes: 852224 -> 681024 ' "$work/out"; then ok
else bad "resnet8: diff under --conv-scratch 16KiB is not 852224 -> 681024"; fi

# a bad bound: one line, exit 1
if run 1 "$remat" schedule "$r8" --conv-scratch lots &&
    [ "$(wc -l < "$work/err")" -eq 1 ] && grep -q -- "--conv-scratch" "$work/err"
then ok; else bad "--conv-scratch lots: not one line naming the option"; fi

finish test_conv_scratch
