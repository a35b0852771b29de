#!/usr/bin/env bash
# End-to-end test of `remat build --fma` (docs/training.md): floating-point
# contraction allowed for speed, with bits that differ between machines.
# Held to:
# - gpt's, cnn's and mlp12's gradients and losses against PyTorch in
#   float64 (tests/ref/reference.py) at the tolerance test_graphs.sh holds
#   the default build to, 1e-5;
# - on a CPU with FMA instructions, gpt's gradients not all bitwise those of
#   the default build (else the flag did nothing);
# - every compilation of a build passes -ffp-contract=off (whatever $CC's
#   own default: clang's contracts), or =fast with --fma, never
#   -ffast-math (a $CC that records its arguments).
# Needs cc, OpenBLAS and /usr/bin/python3 with torch.
. "$(dirname "$0")/lib.sh"

for g in gpt cnn mlp12; do
    "$remat" build "graphs/$g.xml" --fma -o "$work/$g.fma" &&
        "$work/$g.fma" --seed 5 --dump "$work/$g.fma.d" > /dev/null && ok ||
        bad "$g --fma: build or dump"
done
/usr/bin/python3 tests/ref/reference.py --tol 1e-5 graphs/gpt.xml "$work/gpt.fma.d" \
    graphs/cnn.xml "$work/cnn.fma.d" graphs/mlp12.xml "$work/mlp12.fma.d" \
    > "$work/ref.log" && ok || { cat "$work/ref.log"; bad "--fma: gradients against PyTorch"; }

"$remat" build graphs/gpt.xml -o "$work/gpt.def" &&
    "$work/gpt.def" --seed 5 --dump "$work/gpt.def.d" > /dev/null && ok || bad "gpt: build or dump"
if grep -qw fma /proc/cpuinfo; then
    n=0
    for f in "$work"/gpt.def.d/grad.*.npy; do
        cmp -s "$f" "$work/gpt.fma.d/${f##*/}" || n=$((n + 1))
    done
    [ "$n" -gt 0 ] && ok || bad "gpt --fma: every gradient bitwise the default build's (no FMA used)"
fi

# the flags each build passes: a $CC that records its arguments, then runs cc
cat > "$work/cc.sh" <<SH
#!/bin/sh
echo "\$*" >> "$work/cc.log"
exec cc "\$@"
SH
chmod +x "$work/cc.sh"
for mode in "" --fma; do
    rm -f "$work/cc.log"
    REMAT_CACHE_DIR="$work/cache" CC="$work/cc.sh" \
        "$remat" build tests/graphs/mlp_tiny.xml $mode -o "$work/tiny" > /dev/null 2>&1 &&
        want=$([ -n "$mode" ] && echo fast || echo off) &&
        [ "$(grep -c -- "-ffp-contract=$want" "$work/cc.log")" = "$(wc -l < "$work/cc.log")" ] &&
        ! grep -q -- "-ffast-math" "$work/cc.log" && ok ||
        bad "build $mode: not every compilation with -ffp-contract=$want"
done

finish test_fma
