#!/usr/bin/env bash
# The MLPerf Tiny models (tests/tiny/tiny_models.py) trained on a Cortex-M4
# under qemu (mps2-an386) whose linker script gives the program 256 KB of
# RAM: .data, .bss (parameters, inputs, arena, gradients) and a 4 KB stack
# together (tests/firmware/mps2-an386-256k.ld), flash as large as the
# weights need. Each configuration below is one `config` line: the model
# and batch, plain SGD fused into the backward or not, the RAM (256k, or
# 4m for the board's whole SSRAM), whether the image must fit or must fail
# to link, remat's flags, and the globs of the parameters that train (the
# rest are frozen with --freeze). An image that fits trains 5 steps from
# the ONNX model's own weights (the generated init copies them; past
# 262,144 values they come from NAME.weights, linked into flash), and its
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

# onnx NAME BATCH: the model exported once per batch, in training mode
onnx() {
    local f=$work/onnx/$1-$2/$1.onnx
    if [ ! -f "$f" ]; then
        mkdir -p "$(dirname "$f")"
        $PY tests/tiny/tiny_models.py "$1" "$2" "$f" >"$f.log" 2>&1 ||
            { cat "$f.log" >&2; return 1; }
    fi
    echo "$f"
}

# link DIR NAME OPT RAM: the image DIR/firmware.elf from DIR/model.c, the
# single-file runtime and tests/firmware; the linker's complaint in
# DIR/link.log
link() {
    local d=$1 up script defs=""
    up=$(echo "$2" | tr '[:lower:]' '[:upper:]')
    # 4m: the same map with the board's whole 4 MB of SSRAM2/3 as RAM
    script=tests/firmware/mps2-an386-256k.ld
    if [ "$4" = 4m ]; then
        script=$work/mps2-an386-4m.ld
        sed 's/LENGTH = 256K/LENGTH = 4M/' tests/firmware/mps2-an386-256k.ld >"$script"
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
        -I"$d" -Itests/firmware -ffunction-sections -fdata-sections \
        tests/firmware/tiny.c tests/firmware/startup.c "$d/model.c" "$d/remat_rt.c" \
        "${extra[@]}" -nostartfiles -T $script --specs=nosys.specs \
        -Wl,--gc-sections -lm -o "$d/firmware.elf" >"$d/link.log" 2>&1
}

# qemu ELF OUT: "step K 0xBITS" lines from the semihosting output
qemu() {
    timeout 300 qemu-system-arm -M mps2-an386 -nographic -semihosting \
        -kernel "$1" </dev/null >"$2.log" 2>&1 || { cat "$2.log"; return 1; }
    sed -n 's/^step \([0-9]*\) bits \(0x[0-9a-f]*\)$/step \1 \2/p' "$2.log" >"$2"
}

# config NAME BATCH sgd|fused 256k|4m fits|overflows "REMAT FLAGS" TRAIN...
config() {
    local name=$1 batch=$2 opt=$3 ram=$4 want=$5 flags=$6
    shift 6
    local label="$name batch $batch $opt $ram, trains $*"
    local d=$work/$name-$batch-$opt-$ram-$(echo "$*" | tr -c 'a-z0-9\n' _)
    mkdir -p "$d"
    local f freeze=() fused=()
    f=$(onnx "$name" "$batch") || { bad "$label: torch export"; return; }
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
    local bss stack
    bss=$(arm-none-eabi-size -A "$d/firmware.elf" | awk '$1 == ".bss" || $1 == ".data" {s += $2} END {print s}')
    stack=$(sed -n 's/^stack \([0-9]*\) bytes$/\1/p' "$d/fw.log")
    [ -n "$stack" ] && ok || bad "$label: no stack line"
    echo "$label: RAM $bss bytes of .data and .bss, the stack at most $stack of its 4096; losses $(awk '{printf "%s ", $3}' "$d/fw")"
}

# ---- what fits today: the parameters are in RAM, frozen or not ---------------
# (frozen ones move to flash on the flash branch; then more lines fit)
config tiny_kws 1 fused 256k fits "" "fc.*"
config tiny_kws 1 sgd 256k fits "" "fc.*"
# the most of the keyword spotter that links today: the classifier and the
# last pointwise conv with its BatchNorm, at the plan of least arena
# (scripts/tiny_table.py's way: pareto's least, 128,000 bytes)
config tiny_kws 1 fused 256k fits "--max-arena 128000" "fc.*" "blocks.3.pw.*" "blocks.3.bn2.*"
config tiny_kws 1 sgd 256k fits "--max-arena 128000" "fc.*" "blocks.3.pw.*" "blocks.3.bn2.*"
# ---- what must not: the linker refuses the RAM, no run needed ----------------
# the whole last block (its least arena, 160,000 bytes), and full training
config tiny_kws 1 fused 256k overflows "--max-arena 160000" "fc.*" "blocks.3.*"
config tiny_kws 1 fused 256k overflows "" "*"
config tiny_ad 2 fused 256k overflows "" "*.bias"
# ---- past 262,144 initial values: the weights image linked into flash --------
config tiny_ad 2 fused 4m fits "" "*.bias"

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
