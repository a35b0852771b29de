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

# --max-ram sizes the columns itself when --conv-scratch is not given:
# whole columns where they fit (no conv_scratch_bytes line), else the
# first of 64KiB, 16KiB, 4KiB and one row per lane that fits, among the
# plans that recompute each tensor once, then among those that rebuild
# at each use; no fit at all names the least RAM at one row. resnet8's least RAM with whole
# columns is 2,359,460 bytes (params and grads 310,824 each, io 24,596,
# the least arena 1,713,216); bounded, the least arena falls (above)
ramfig() {   # KEY FILE
    sed -n "s/^$1: //p" "$2"
}
"$remat" schedule "$r8" --max-ram 2400000 > "$work/mr1" &&
    [ "$(ramfig ram_bytes "$work/mr1")" -le 2400000 ] &&
    ! grep -q '^conv_scratch_bytes' "$work/mr1" && ok ||
    bad "resnet8 --max-ram 2400000: $(grep -E '^(ram_bytes|conv_scratch)' "$work/mr1" | tr '\n' ' ')"
"$remat" schedule "$r8" --max-ram 1400000 > "$work/mr2" &&
    [ "$(ramfig ram_bytes "$work/mr2")" -le 1400000 ] &&
    [ "$(ramfig conv_scratch_bytes "$work/mr2")" = 65536 ] && ok ||
    bad "resnet8 --max-ram 1400000: $(grep -E '^(ram_bytes|conv_scratch)' "$work/mr2" | tr '\n' ' ')"
"$remat" schedule "$r8" --max-ram 1287000 > "$work/mr3" &&
    [ "$(ramfig ram_bytes "$work/mr3")" -le 1287000 ] &&
    [ "$(ramfig conv_scratch_bytes "$work/mr3")" = 1 ] && ok ||
    bad "resnet8 --max-ram 1287000: $(grep -E '^(ram_bytes|conv_scratch)' "$work/mr3" | tr '\n' ' ')"
# the generated code carries the bound: its windows have a col_cap
"$remat" compile "$r8" --max-ram 1287000 -o "$work/mr3.c" &&
    grep -q '\.col_cap = ' "$work/mr3.c" && ok || bad "resnet8 --max-ram 1287000: no col_cap in the C"
# (the least is found among plans that rebuild at each use, not proven)
run 1 "$remat" schedule "$r8" --max-ram 100000 &&
    grep -qE 'max-ram 100000 bytes cannot be met: (needs at least|the least found \(not proven\) is) [0-9]* bytes: .* \(convolution columns a row at a time\)$' "$work/err" &&
    [ "$(sed -nE 's/.*(needs at least|is) ([0-9]*) bytes.*/\2/p' "$work/err")" -lt 1287000 ] && ok ||
    bad "resnet8 --max-ram 100000: $(cat "$work/err")"
# given, --conv-scratch is kept: no other bound is tried; a plan that
# recomputes each tensor once needs more than 1,300,000 bytes with 64KiB
# of columns (1,400,000 above), so one that rebuilds at each use answers
run 0 "$remat" schedule "$r8" --max-ram 1300000 --conv-scratch 64KiB &&
    [ "$(ramfig conv_scratch_bytes "$work/out")" = 65536 ] &&
    [ "$(ramfig rebuild "$work/out")" = yes ] && ok ||
    bad "--max-ram 1300000 --conv-scratch 64KiB: $(cat "$work/err") $(grep -E '^(ram_bytes|conv_scratch|rebuild)' "$work/out" | tr '\n' ' ')"

finish test_conv_scratch
