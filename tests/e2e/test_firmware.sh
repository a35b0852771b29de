#!/usr/bin/env bash
# The generated code on a microcontroller: tests/graphs/mlp_tiny.xml under
# policies none and sac, cross-compiled with arm-none-eabi-gcc for a
# Cortex-M4 with hard float (the runtime with -DRT_NO_BLAS -DRT_NO_STDIO),
# linked bare-metal with static buffers (the Cortex-M example's start-up
# and linker script for qemu's mps2-an386, examples/cortex-m/, and
# tests/firmware/main.c, doing what `trainer --seed 3 --steps 5`
# does, then what `trainer --seed 3 --steps 5 --optimizer adamw
# --clip-grad-norm 0.1` does, then `--optimizer adamw --fused`, and an image
# with the fused step alone; one with its weights frozen in flash), run
# under qemu-system-arm with semihosting.
# Its losses, SGD's and AdamW's, must equal, bit for bit, those of the host
# trainer that `remat build --no-blas --cflags -ffp-contract=off` makes, and
# the forward's loss the trainer's forward.npy. docs/firmware.md says why
# those are the conditions; the checks below show two of them matter: FMA
# contraction and libm's expf.
# Needs Debian's gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
SEED=3
STEPS=5
ASTEPS=5    # AdamW steps, torch's defaults (the trainer's: lr 0.001)
CLIP=0.1    # --clip-grad-norm: mlp_tiny's gradient norm is 0.40 to 0.49: it clips
G=tests/graphs/mlp_tiny.xml
EX=examples/cortex-m   # its start-up code and linker script
ARM="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
FW_WARN="-std=c99 -Wall -Wextra -pedantic -Wcast-align -Werror"
export REMAT_CACHE_DIR=$work/cache

# ---- tools: missing ones fail the test, naming the packages ------------------
need=""
command -v arm-none-eabi-gcc >/dev/null || need="$need gcc-arm-none-eabi"
[ -n "$need" ] || [ -f "$(arm-none-eabi-gcc $ARM -print-file-name=libc.a)" ] ||
    need="$need libnewlib-arm-none-eabi"
command -v qemu-system-arm >/dev/null || need="$need qemu-system-arm"
if [ -n "$need" ]; then
    bad "missing tools; run: sudo apt-get install -y$need"
    finish test_firmware
    exit
fi
ok

# firmware DIR [CFLAGS...]: the four files a firmware project copies, DIR's
# model.c and model.h and the single-file runtime dist/remat_rt.c and .h
# (copied into DIR), cross-compiled and linked with tests/firmware/main.c
# and examples/cortex-m's start-up and linker script into
# DIR/firmware.elf
firmware() {
    local d=$1
    shift
    cp dist/remat_rt.c dist/remat_rt.h "$d/" &&
    arm-none-eabi-gcc $FW_WARN -O2 $ARM "$@" -DRT_NO_BLAS -DRT_NO_STDIO \
        -DFW_UPPER=MLP_TINY -DFW_LOWER=mlp_tiny -DFW_SEED=$SEED -DFW_STEPS=$STEPS \
        -DFW_ADAMW_STEPS=$ASTEPS -DFW_CLIP=$CLIP \
        -I"$d" -I"$EX" -ffunction-sections -fdata-sections \
        tests/firmware/main.c "$EX/startup.c" "$d/model.c" "$d/remat_rt.c" \
        -nostartfiles -T "$EX/mps2-an386.ld" --specs=nosys.specs \
        -Wl,--gc-sections -lm -o "$d/firmware.elf"
}

# qemu ELF OUT: runs it (semihosting output is on stderr); the lines that
# carry bits go to OUT, one "LABEL 0xBITS" each
qemu() {
    timeout 60 qemu-system-arm -M mps2-an386 -nographic -semihosting \
        -kernel "$1" </dev/null >"$2.log" 2>&1 || { cat "$2.log"; return 1; }
    sed -n 's/^\(.*\) bits \(0x[0-9a-f]*\)$/\1 \2/p' "$2.log" >"$2"
}

# the host trainer's: "forward 0x..." from --dump's forward.npy, then
# "step K 0x..." from --steps --bits, then "adamw step K 0x..." from
# --optimizer adamw --clip-grad-norm --bits (a run of its own: fresh
# parameters, zeroed state)
host() {   # trainer OUT
    "$1" --seed $SEED --dump "$2.dump" >/dev/null &&
        "$PY" -c 'import numpy as np, sys
print("forward 0x%08x" % np.load(sys.argv[1]).astype(np.float32).reshape(1).view(np.uint32)[0])' \
            "$2.dump/forward.npy" >"$2" &&
        "$1" --seed $SEED --steps $STEPS --bits |
            sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/step \1 \2/p' >>"$2" &&
        "$1" --seed $SEED --steps $ASTEPS --optimizer adamw --clip-grad-norm $CLIP --bits |
            sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/adamw step \1 \2/p' >>"$2" &&
        "$1" --seed $SEED --steps $ASTEPS --optimizer adamw --fused --bits |
            sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/fused step \1 \2/p' >>"$2"
}

# ---- each policy: firmware against the host ----------------------------------
for p in none sac; do
    d=$work/$p
    mkdir -p "$d"
    "$remat" compile $G --policy $p -o "$d/model.c" || { bad "$p: compile"; continue; }
    if firmware "$d" -ffp-contract=off; then ok; else bad "$p: cross-compile"; continue; fi
    # no allocator in the image: every buffer is static
    if arm-none-eabi-nm "$d/firmware.elf" | grep -qwE 'malloc|_malloc_r|calloc|free'; then
        bad "$p: the firmware links an allocator"; else ok; fi
    if qemu "$d/firmware.elf" "$d/fw"; then ok; else bad "$p: qemu run"; continue; fi
    [ "$(wc -l <"$d/fw")" -eq $((STEPS + 1 + 2 * ASTEPS)) ] && ok ||
        bad "$p: firmware printed $(wc -l <"$d/fw") losses, wanted $((STEPS + 1 + 2 * ASTEPS))"
    "$remat" build $G --policy $p --no-blas --cflags "-ffp-contract=off" -o "$d/trainer" ||
        { bad "$p: remat build"; continue; }
    host "$d/trainer" "$d/host" || { bad "$p: host trainer"; continue; }
    if cmp -s "$d/fw" "$d/host"; then ok; else
        bad "$p: firmware losses differ from the host's (firmware | host):"
        paste "$d/fw" "$d/host"
    fi
done
# every policy computes the same bits
cmp -s "$work/none/fw" "$work/sac/fw" && ok || bad "none and sac firmware losses differ"
echo "firmware losses (bits), equal to the host trainer's:"
sed 's/^/  /' "$work/none/fw"

# ---- an application that trains with the fused step alone -------------------
# -DFW_FUSED_ONLY: the forward and the fused AdamW run, no gradient buffer
# and no train_step arena linked in. Same bits as the host; its RAM (.bss)
# is printed beside the full image's.
for p in none sac; do
    d=$work/$p-fused
    mkdir -p "$d"
    cp "$work/$p/model.c" "$work/$p/model.h" "$d/"
    if firmware "$d" -ffp-contract=off -DFW_FUSED_ONLY && qemu "$d/firmware.elf" "$d/fw"; then
        grep -E '^(forward|fused)' "$work/$p/host" | cmp -s - "$d/fw" && ok ||
            bad "$p: the fused-only firmware's losses differ from the host's"
        full=$(arm-none-eabi-size -A "$work/$p/firmware.elf" | awk '$1 == ".bss" {print $2}')
        fused=$(arm-none-eabi-size -A "$d/firmware.elf" | awk '$1 == ".bss" {print $2}')
        echo "$p: .bss of the fused-only image $fused bytes, of the full one $full"
        [ -n "$fused" ] && [ "$fused" -lt "$full" ] && ok || bad "$p: the fused-only image is not smaller"
        # what it holds is what remat counts for AdamW fused (docs/memory.md):
        # all of ram_bytes, and beyond it only the image's few padding floats
        # (each static array is one element longer) and the runtime's statics
        ram=$("$remat" schedule $G --policy $p --optimizer adamw --fused | sed -n 's/^ram_bytes: //p')
        [ -n "$ram" ] && [ "$fused" -ge "$ram" ] && [ "$fused" -le $((ram + 64)) ] && ok ||
            bad "$p: .bss of the fused-only image $fused bytes, remat's ram_bytes ${ram:-?}"
    else
        bad "$p: fused-only firmware build or run"
    fi
done

# ---- frozen weights in flash ------------------------------------------------------
# Every weight frozen (--freeze '*.weight') and drawn at compile time with
# the firmware's seed (--seed 3): the weights are the model's static const
# array, so the image's .rodata holds their 8 x 32 x 32 floats and its .bss
# (the params buffer, gradients, state) is smaller, the same freeze with the
# weights drawn at run time into params being the other image; the losses
# equal the host trainer's built the same way, bit for bit.
for v in flash ram; do
    d=$work/frozen-$v
    mkdir -p "$d"
    seed=(); [ $v = flash ] && seed=(--seed $SEED)
    if "$remat" compile $G --policy sac --freeze '*.weight' "${seed[@]}" -o "$d/model.c" &&
       firmware "$d" -ffp-contract=off && qemu "$d/firmware.elf" "$d/fw" &&
       "$remat" build $G --policy sac --freeze '*.weight' "${seed[@]}" --no-blas \
           --cflags "-ffp-contract=off" -o "$d/trainer" &&
       host "$d/trainer" "$d/host"; then
        cmp -s "$d/fw" "$d/host" && ok || { bad "frozen $v: firmware losses differ from the host's"; paste "$d/fw" "$d/host"; }
    else
        bad "frozen $v: build or run"
    fi
done
cmp -s "$work/frozen-flash/fw" "$work/frozen-ram/fw" && ok ||
    bad "the weights in flash give other losses than in RAM"
sect() { arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s {print $2}'; }
bss_ram=$(sect "$work/frozen-ram/firmware.elf" .bss)
bss_flash=$(sect "$work/frozen-flash/firmware.elf" .bss)
text_ram=$(sect "$work/frozen-ram/firmware.elf" .text)
text_flash=$(sect "$work/frozen-flash/firmware.elf" .text)
echo "weights frozen: .bss $bss_flash bytes with them in flash, $bss_ram in RAM;" \
     ".text (code and read-only data, in CODE) $text_flash against $text_ram"
# params loses the 8192 weight floats (32,768 bytes); the CODE region
# (mps2-an386.ld puts .rodata into .text, at 0) gains them, less init's
# draws of them: the array is 0x8000 bytes at an address below RAM's
# 0x20000000
[ -n "$bss_flash" ] && [ $((bss_ram - bss_flash)) -ge 32768 ] &&
    [ "$text_flash" -gt "$text_ram" ] &&
    arm-none-eabi-nm -S "$work/frozen-flash/firmware.elf" |
        grep -Eq '^[01][0-9a-f]{7} 00008000 [rRtT] mlp_tiny_frozen$' && ok ||
    bad "frozen weights: .bss $bss_flash vs $bss_ram, .text $text_flash vs $text_ram"

# ---- the AdamW comparison covers the clipping: without it, other bits --------
# (AdamW is nearly blind to a gradient's scale, but a coefficient that changes
# from step to step moves the moments, so the losses move from step 2 on)
if "$work/none/trainer" --seed $SEED --steps $ASTEPS --optimizer adamw --bits |
    sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/adamw step \1 \2/p' \
        >"$work/noclip" && [ "$(wc -l <"$work/noclip")" -eq $ASTEPS ]; then
    if grep '^adamw' "$work/none/host" | cmp -s - "$work/noclip"; then
        bad "AdamW with --clip-grad-norm $CLIP gives the unclipped bits: the clip is not tested"
    else ok; fi
else
    bad "host trainer: AdamW without clipping"
fi

# ---- the plain GEMM loop (-DRT_GEMM_SMALL) sums in the tiles' order ----------
d=$work/small
mkdir -p "$d"
cp "$work/none/model.c" "$work/none/model.h" "$d/"
if firmware "$d" -ffp-contract=off -DRT_GEMM_SMALL && qemu "$d/firmware.elf" "$d/fw"; then
    cmp -s "$d/fw" "$work/none/host" && ok ||
        bad "firmware with RT_GEMM_SMALL differs from the host's bits"
else
    bad "small: firmware build or run"
fi

# ---- the comparison can fail: FMA contraction changes the bits ---------------
# GNU C's default -ffp-contract=fast fuses a*b+c into vfma on the M4.
d=$work/fma
mkdir -p "$d"
cp "$work/none/model.c" "$work/none/model.h" "$d/"
if firmware "$d" -ffp-contract=fast && qemu "$d/firmware.elf" "$d/fw"; then
    if ! cmp -s "$d/fw" "$work/none/host" && [ -s "$d/fw" ]; then ok; else
        bad "firmware with -ffp-contract=fast gave the host's bits: the comparison cannot tell"
    fi
else
    bad "fma: firmware build or run"
fi

# ---- libm: the tanh-approximate Gelu calls expf, glibc's and newlib's --------
# They may differ in the last bit, so this is close, not equal: a few ulps.
d=$work/libm
mkdir -p "$d"
sed 's|<node name="b2.act" op="Gelu" in="b2.h1" out="b2.g"/>|<node name="b2.act" op="Gelu" in="b2.h1" out="b2.g" approximate="tanh"/>|' \
    $G >"$d/g.xml"
if grep -q 'approximate="tanh"' "$d/g.xml" &&
    "$remat" compile "$d/g.xml" -o "$d/model.c" && firmware "$d" -ffp-contract=off &&
    qemu "$d/firmware.elf" "$d/fw" &&
    "$remat" build "$d/g.xml" --no-blas --cflags "-ffp-contract=off" -o "$d/trainer" &&
    host "$d/trainer" "$d/host"; then
    if "$PY" - "$d/fw" "$d/host" <<'EOF'; then ok; else bad "libm: firmware and host more than 16 ulp apart"; fi
import sys
a = [int(l.split()[-1], 16) for l in open(sys.argv[1])]
b = [int(l.split()[-1], 16) for l in open(sys.argv[2])]
assert len(a) == len(b) > 1, (a, b)
ulps = [abs(x - y) for x, y in zip(a, b)]
print("tanh-approximate Gelu (expf): firmware - host in ulps per loss:", ulps)
sys.exit(max(ulps) > 16)
EOF
else
    bad "libm: build or run"
fi

# ---- the header in C++, and the forward in NAME_FORWARD_ARENA_BYTES ----------
# Linking C++ against the C objects needs the extern "C" guards; the arena is
# exactly the forward's size under AddressSanitizer, so an overrun shows.
d=$work/none
cat >"$d/probe.cpp" <<'EOF'
#include <cstdio>
#include <cstring>
#include <vector>
#include "model.h"
int main()
{
    static_assert(MLP_TINY_FORWARD_ARENA_BYTES <= MLP_TINY_ARENA_BYTES, "arena");
    std::vector<float> params(MLP_TINY_PARAM_FLOATS), inputs(MLP_TINY_INPUT_FLOATS);
    unsigned char *arena = new unsigned char[MLP_TINY_FORWARD_ARENA_BYTES];
    mlp_tiny_init(params.data(), 3);
    for (int i = 0; i < MLP_TINY_N_INPUTS; i++)
        rt_init_uniform(inputs.data() + mlp_tiny_inputs[i].offset,
                        mlp_tiny_inputs[i].count, -1.0f, 1.0f, 3, 1000 + i);
    float loss = mlp_tiny_forward(params.data(), inputs.data(), NULL, NULL, arena);
    unsigned u;
    std::memcpy(&u, &loss, 4);
    std::printf("forward 0x%08x\n", u);
    delete[] arena;
    return 0;
}
EOF
if cc -std=c99 -O2 -ffp-contract=off -fsanitize=address -DRT_NO_BLAS -I"$d" \
        -c "$d/model.c" -o "$d/model.o" &&
    cc -std=c99 -O2 -ffp-contract=off -fsanitize=address -DRT_NO_BLAS -I"$d" \
        -c "$d/remat_rt.c" -o "$d/rt.o" &&
    g++ -std=c++11 -Wall -Wextra -pedantic -Werror -fsanitize=address -I"$d" \
        "$d/probe.cpp" "$d/model.o" "$d/rt.o" -lm -o "$d/probe"; then
    ok
    if "$d/probe" >"$d/probe.out" && [ "$(cat "$d/probe.out")" = "$(head -1 "$d/host")" ]; then
        ok; else bad "C++ forward in FORWARD_ARENA_BYTES: $(cat "$d/probe.out")"; fi
else
    bad "the generated header and remat_rt.h do not link from C++"
fi

# ---- remat build for another machine: $CC and --cflags -----------------------
# A $CC that logs its arguments: set, it means no -march=native.
printf '#!/bin/sh\necho "$*" >>"%s/cc.log"\nexec cc "$@"\n' "$work" >"$work/logcc"
chmod +x "$work/logcc"
if CC="$work/logcc" "$remat" build $G --no-blas --cflags "-O2 -DFW_PROBE=1" -o "$work/t_cc" &&
    "$work/t_cc" --seed 1 --steps 1 >/dev/null; then
    ok
    grep -q -- '-march=native' "$work/cc.log" && bad "CC set, yet -march=native" || ok
    grep -q -- '-O3 -ffp-contract=off -DRT_NO_BLAS -O2 -DFW_PROBE=1' "$work/cc.log" && ok ||
        bad "--cflags not after the built-in flags: $(head -1 "$work/cc.log")"
else
    bad "CC=... remat build --cflags"
fi
"$remat" build $G --cflags 2>/dev/null; [ $? -eq 2 ] && ok || bad "--cflags without a value: not exit 2"

finish test_firmware
