#!/usr/bin/env bash
# The MLPerf Tiny models (tests/tiny/tiny_models.py) trained on a Cortex-M4
# under qemu (mps2-an386) whose linker script gives the program 256 KB of
# RAM: .data, .bss (parameters, inputs, arena, gradients) and a 4 KB stack
# together (examples/cortex-m/mps2-an386-256k.ld), flash as large as the
# weights need. Each configuration below is one `par` line (run in the
# background; `config` says what it checks): the model and batch, its
# BatchNorms in training or eval mode, plain SGD fused into the backward
# or not, the RAM (256k, or 4m for the board's whole SSRAM), whether the
# image must fit or must fail to link, remat's flags, and the globs of
# the parameters that train (the rest are frozen with --freeze). An image
# that fits keeps its frozen parameters in flash (NAME_frozen's address),
# trains 5 steps from the ONNX model's own weights (the generated init
# copies them; past 262,144 values they come from NAME.weights, linked
# into flash), and its
# losses must equal, bit for bit, those of the host trainer that `remat
# build --no-blas --cflags -ffp-contract=off` makes with the same flags
# (docs/firmware.md says why those flags), and the trainer's initial
# parameters must be the torch module's bit for bit. Last, docs/tiny.md's
# table of what fits and what does not must be what scripts/tiny_table.py
# writes.
# Needs Debian's gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
SEED=3
STEPS=5
ARM="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
FW_WARN="-std=c99 -Wall -Wextra -pedantic -Wcast-align -Werror"
export REMAT_CACHE_DIR=$work/cache

need=""
command -v arm-none-eabi-gcc >/dev/null || need="$need gcc-arm-none-eabi"
[ -n "$need" ] || [ -f "$(arm-none-eabi-gcc $ARM -print-file-name=libc.a)" ] ||
    need="$need libnewlib-arm-none-eabi"
command -v qemu-system-arm >/dev/null || need="$need qemu-system-arm"
if [ -n "$need" ]; then
    bad "missing tools; run: sudo apt-get install -y$need"
    # ---- docs/tiny.md's table is what scripts/tiny_table.py writes today --------
cp docs/tiny.md "$work/tiny.md"
if $PY scripts/tiny_table.py --remat "$remat" --doc "$work/tiny.md" >/dev/null 2>"$work/table.err"; then
    if cmp -s docs/tiny.md "$work/tiny.md"; then ok; else
        bad "docs/tiny.md's table is stale; run scripts/tiny_table.py --doc docs/tiny.md:"
        diff docs/tiny.md "$work/tiny.md" | head -10
    fi
else
    tail -3 "$work/table.err"; bad "scripts/tiny_table.py failed"
fi

finish test_tiny
    exit
fi

# onnx NAME BATCH train|eval: the model exported once per batch and mode,
# in training mode, or with every BatchNorm in eval mode (partial
# fine-tuning: a frozen layer's BatchNorm folds into its convolution)
onnx() {
    local f=$work/onnx/$1-$2-$3/$1.onnx eval=()
    [ "$3" = eval ] && eval=(--eval-bn)
    if [ ! -f "$f" ]; then
        mkdir -p "$(dirname "$f")"
        $PY tests/tiny/tiny_models.py "$1" "$2" "$f" "${eval[@]}" >"$f.log" 2>&1 ||
            { cat "$f.log" >&2; return 1; }
    fi
    echo "$f"
}

# link DIR NAME OPT RAM: the image DIR/firmware.elf from DIR/model.c, the
# single-file runtime, tests/firmware/tiny.c and the Cortex-M example's
# start-up and linker script (examples/cortex-m); the linker's complaint in
# DIR/link.log
link() {
    local d=$1 up script defs=""
    up=$(echo "$2" | tr '[:lower:]' '[:upper:]')
    # 4m: the same map with the board's whole 4 MB of SSRAM2/3 as RAM
    script=examples/cortex-m/mps2-an386-256k.ld
    if [ "$4" = 4m ]; then
        script=$work/mps2-an386-4m.ld
        sed 's/LENGTH = 256K/LENGTH = 4M/' examples/cortex-m/mps2-an386-256k.ld >"$script"
    fi
    [ "$3" = fused ] && defs="-DFW_FUSED"
    local extra=()
    if [ -f "$d/model.weights" ]; then
        # the image past what the C file holds, in flash, 8-byte aligned
        printf '.section .rodata.fw_weights,"a"\n.balign 8\n.global fw_weights\nfw_weights:\n.incbin "%s"\n' \
            "$d/model.weights" >"$d/weights.S"
        extra=("$d/weights.S")
        defs="$defs -DFW_WEIGHTS"
    fi
    cp dist/remat_rt.c dist/remat_rt.h "$d/" &&
    arm-none-eabi-gcc $FW_WARN -O2 $ARM -ffp-contract=off -DRT_NO_BLAS -DRT_NO_STDIO \
        -DFW_UPPER="$up" -DFW_LOWER="$2" -DFW_SEED=$SEED -DFW_STEPS=$STEPS $defs \
        -I"$d" -Iexamples/cortex-m -ffunction-sections -fdata-sections \
        tests/firmware/tiny.c examples/cortex-m/startup.c "$d/model.c" "$d/remat_rt.c" \
        "${extra[@]}" -nostartfiles -T $script --specs=nosys.specs \
        -Wl,--gc-sections -lm -o "$d/firmware.elf" >"$d/link.log" 2>&1
}

# qemu ELF OUT: "step K 0xBITS" lines from the semihosting output
qemu() {
    timeout 300 qemu-system-arm -M mps2-an386 -nographic -semihosting \
        -kernel "$1" </dev/null >"$2.log" 2>&1 || { cat "$2.log"; return 1; }
    sed -n 's/^step \([0-9]*\) bits \(0x[0-9a-f]*\)$/step \1 \2/p' "$2.log" >"$2"
}

# config NAME BATCH train|eval sgd|fused 256k|4m fits|overflows "REMAT FLAGS" TRAIN...
# (--optimizer sgd, and --fused when fused, are added to the flags)
config() {
    local name=$1 batch=$2 bn=$3 opt=$4 ram=$5 want=$6 given=$7
    local flags="--optimizer sgd $given"
    shift 7
    [ "$opt" = fused ] && flags="$flags --fused"
    local label="$name batch $batch ($bn BN) $opt $ram $given, trains $*"
    local d=$work/$name-$batch-$bn-$opt-$ram-$(echo "$given $*" | tr -c 'a-z0-9\n' _)
    mkdir -p "$d"
    local f freeze=() fused=()
    f=$(onnx "$name" "$batch" "$bn") || { bad "$label: torch export"; return; }
    while read -r p; do
        [ -n "$p" ] && freeze+=(--freeze "$p")
    done < <($PY scripts/tiny_table.py --freeze-args "$f" "$@")
    # shellcheck disable=SC2086
    "$remat" compile "$f" $flags "${freeze[@]}" -o "$d/model.c" >"$d/compile.log" 2>&1 ||
        { cat "$d/compile.log"; bad "$label: remat compile"; return; }
    if [ "$want" = overflows ]; then
        if link "$d" "$name" "$opt" "$ram"; then
            bad "$label: linked, yet it should not fit in $ram of RAM"
        elif grep -q "region \`RAM' overflowed" "$d/link.log"; then
            ok; echo "$label: does not fit, as wanted: $(grep -o 'overflowed by [0-9]* bytes' "$d/link.log" | head -1)"
        else
            cat "$d/link.log"; bad "$label: the link failed, but not for RAM"
        fi
        return
    fi
    link "$d" "$name" "$opt" "$ram" || { cat "$d/link.log"; bad "$label: link"; return; }
    ok
    if arm-none-eabi-nm "$d/firmware.elf" | grep -qwE 'malloc|_malloc_r|calloc|free'; then
        bad "$label: the firmware links an allocator"; else ok; fi
    qemu "$d/firmware.elf" "$d/fw" || { bad "$label: qemu run"; return; }
    [ "$(wc -l <"$d/fw")" -eq $STEPS ] && ok || bad "$label: $(wc -l <"$d/fw") losses, wanted $STEPS"
    # shellcheck disable=SC2086
    "$remat" build "$f" $flags "${freeze[@]}" --no-blas --cflags "-ffp-contract=off" \
        -o "$d/trainer" >"$d/build.log" 2>&1 || { cat "$d/build.log"; bad "$label: remat build"; return; }
    # the weights trained from are the torch module's (the ONNX
    # initializers), not values init drew from the seed
    if "$d/trainer" --seed $SEED --dump "$d/dump" >/dev/null &&
        $PY - "$name" "$d/dump" <<'PYEOF'; then ok; else bad "$label: the trainer's initial parameters are not the torch module's"; fi
import os, sys
import numpy as np
import torch
sys.path.insert(0, "tests/tiny")
import tiny_models
name, dump = sys.argv[1:]
cls = tiny_models.resnet8() if name == "resnet8" else tiny_models.TINY_MODELS[name]
torch.manual_seed(0)    # as tiny_models.py exports
n = 0
# the parameters (the running statistics moved when the export ran the
# module in training mode)
for k, v in cls().named_parameters():
    f = os.path.join(dump, "param.%s.npy" % k)
    if os.path.exists(f):
        if np.load(f).tobytes() != v.detach().numpy().tobytes():
            sys.exit("param.%s differs from the module's" % k)
        n += 1
print("%d parameters are the module's, bit for bit" % n)
sys.exit(n == 0)
PYEOF
    [ "$opt" = fused ] && fused=(--fused)
    "$d/trainer" --seed $SEED --steps $STEPS --bits "${fused[@]}" |
        sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/step \1 \2/p' >"$d/host"
    if [ -s "$d/fw" ] && cmp -s "$d/fw" "$d/host"; then ok; else
        bad "$label: firmware losses differ from the host's (firmware | host):"
        paste "$d/fw" "$d/host"
    fi
    local bss stack ram
    bss=$(arm-none-eabi-size -A "$d/firmware.elf" | awk '$1 == ".bss" || $1 == ".data" {s += $2} END {print s}')
    stack=$(sed -n 's/^stack \([0-9]*\) bytes$/\1/p' "$d/fw.log")
    [ -n "$stack" ] && ok || bad "$label: no stack line"
    # shellcheck disable=SC2086
    ram=$("$remat" schedule "$f" $flags "${freeze[@]}" --json |
        sed -n 's/.*"ram_bytes": \([0-9]*\).*/\1/p')
    in_flash "$d" "$label" "${#freeze[@]}"
    echo "$label: RAM $bss bytes of .data and .bss (remat's ram_bytes $ram), the stack at most $stack of its 4096; losses $(awk '{printf "%s ", $3}' "$d/fw")"
}

# in_flash DIR LABEL N: with frozen parameters (N > 0), the generated
# NAME_frozen array is linked in CODE (flash, below 0x20000000), and no
# frozen parameter is left in RAM: the parameter buffer holds what trains
in_flash() {
    [ "$3" -gt 0 ] || return 0
    local at
    at=$(arm-none-eabi-nm "$1/firmware.elf" | awk '$3 ~ /_frozen$/ {print $1}' | head -1)
    if [ -z "$at" ]; then
        bad "$2: no NAME_frozen array linked: the frozen parameters are in RAM"
    elif [ $((16#$at)) -lt $((16#20000000)) ]; then
        ok; echo "$2: NAME_frozen at 0x$at, in flash"
    else
        bad "$2: NAME_frozen at 0x$at, in RAM"
    fi
}

# par CONFIG...: config in the background, its output and counts to a file
# of its own (the runs take a minute each; together they share the cores)
npar=0
par() {
    npar=$((npar + 1))
    ( pass=0; fail=0; config "$@"; echo "counts $pass $fail" ) >"$work/par.$npar" 2>&1 &
}
# gather: wait for them all, print what each said in order, add the counts
gather() {
    local i p f
    wait
    for i in $(seq 1 $npar); do
        # (a line may end in qemu's terminal codes, so not anchored at ^)
        sed 's/counts [0-9]* [0-9]*$//; /^$/d' "$work/par.$i"
        read -r _ p f < <(grep -o 'counts [0-9]* [0-9]*$' "$work/par.$i" ||
                          echo "counts 0 1")
        pass=$((pass + p)); fail=$((fail + f))
    done
}

# Each at the plan `--max-ram 256000` picks (256 KiB less the 4 KiB
# stack and 2 KiB for the C library's statics, as scripts/tiny_table.py):
# the keyword spotter in full, at a plan that rebuilds at each use (no
# plan that recomputes each tensor once fits: docs/solver.md); the sparse
# ones exported with every BatchNorm in eval mode (docs/tiny.md),
# ResNet-8's the table's largest sparse update that fits.
RESNET_SPARSE="*.bias fc.* stages.2.short.* stages.2.bn2.*"
par tiny_kws 1 train fused 256k fits "--max-ram 256000" "*"
par tiny_ad 1 eval fused 256k fits "--max-ram 256000" "*.bias"
# shellcheck disable=SC2086
par resnet8 1 eval fused 256k fits "--conv-scratch 16384 --max-ram 256000" $RESNET_SPARSE
# ---- what must not: the linker refuses the RAM, no run needed ----------------
# the keyword spotter's full training at the least RAM of the plans that
# recompute each tensor once (323,812 bytes), and MobileNet's classifier alone at its least
# (407,572 bytes, the table's 398 KiB): no configuration of it fits
par tiny_kws 1 train fused 256k overflows "--max-ram 323812" "*"
par tiny_vww 1 eval fused 256k overflows "--conv-scratch 16384 --max-ram 407572" "fc.*"
gather

# ---- docs/tiny.md's table is what scripts/tiny_table.py writes today --------
cp docs/tiny.md "$work/tiny.md"
if $PY scripts/tiny_table.py --remat "$remat" --doc "$work/tiny.md" >/dev/null 2>"$work/table.err"; then
    if cmp -s docs/tiny.md "$work/tiny.md"; then ok; else
        bad "docs/tiny.md's table is stale; run scripts/tiny_table.py --doc docs/tiny.md:"
        diff docs/tiny.md "$work/tiny.md" | head -10
    fi
else
    tail -3 "$work/table.err"; bad "scripts/tiny_table.py failed"
fi

finish test_tiny
