#!/usr/bin/env bash
# The compiler and the trainers under AddressSanitizer and UBSan, and the
# compiler under valgrind memcheck:
# - the error catalogue (tests/e2e/test_bad.sh) passes with build/asan/remat
#   (`make build/asan/remat`), and with build/remat under valgrind, whose
#   logs must show no memory error and no definite or indirect leak (memory
#   libxml2 keeps reachable in its globals is not a leak);
# - one successful compile (mlp12 under sac) is clean under valgrind too;
# - build/asan/remat writes byte for byte what build/remat writes (compile
#   and schedule), for every graph under every built-in policy;
# - for every graph under sac, a trainer built with the sanitizers from that
#   code, linked with OpenBLAS and again with the portable GEMM (whose every
#   load the sanitizer sees), runs `--seed 1 --dump` and `--steps 3` with
#   exit 0 and nothing on stderr, and dumps what the normal trainer dumps to
#   a relative 1e-4 (it is built without -march=native, so it may round
#   differently); a forward-only model runs `--bench 3` for `--steps 3`;
# - `remat build` works under the sanitizers, and its trainer dumps bit for
#   bit what the normal trainer built here does (so that one is built as
#   build.c builds it).
. "$(dirname "$0")/lib.sh"
policies="none full sac sac-aggressive"
normal=$root/build/remat
asan=$root/build/asan/remat
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
vg="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --error-exitcode=99
    --suppressions=$root/tests/e2e/valgrind.supp"
export UBSAN_OPTIONS=print_stacktrace=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$work/vg"
if [ ! -x "$asan" ] || ! command -v valgrind > /dev/null; then
    bad "needs build/asan/remat (make build/asan/remat) and valgrind (scripts/deps.sh)"
    finish test_sanitize
    exit
fi

# Counts test_bad.sh's checks (its log in $2) as ours; its failures are
# reported under label $1.
tally() {   # label log
    local line p f
    line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$2" | tail -1)
    [ -n "$line" ] || { cat "$2"; bad "$1: test_bad.sh did not finish"; return; }
    grep -v ' passed, ' "$2" | sed "s|^FAIL: |FAIL: $1: |"
    p=${line%% *}
    f=${line#*, }
    pass=$((pass + p))
    fail=$((fail + ${f%% *}))
}

# Every valgrind log in $work/vg must be empty (--quiet prints only errors).
vg_clean() {   # label
    local f n=0
    for f in "$work"/vg/*.log; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        [ -s "$f" ] && { head -30 "$f"; bad "$1: valgrind reported ${f##*/}"; }
    done
    [ "$n" -gt 0 ] && ok || bad "$1: valgrind wrote no log"
    rm -f "$work"/vg/*.log
}

# valgrind takes ~1 s a case: the catalogue runs under it in two halves in
# the background while the sanitizer checks run.
vg_pids=()
for k in 0 1; do
    BAD_SHARD=$k/2 REMAT=$normal REMAT_WRAP="$vg --log-file=$work/vg/bad.%p.log" \
        tests/e2e/test_bad.sh > "$work/bad_vg$k.log" 2>&1 &
    vg_pids+=($!)
done

REMAT=$asan tests/e2e/test_bad.sh > "$work/bad_asan.log" 2>&1
tally "catalogue under build/asan/remat" "$work/bad_asan.log"

# --- the sanitizer build of the compiler writes what the normal one does ----
outputs() {   # exe graph policy dir: compile and schedule into dir
    mkdir -p "$4"
    "$1" compile "$2" --policy "$3" -o "$4/model.c" &&
        "$1" schedule "$2" --policy "$3" > "$4/schedule"
}
same_output() {   # graph policy dir
    local g=$1 p=$2 d=$3 f
    outputs "$normal" "$g" "$p" "$d/n" || { bad "$g $p: build/remat failed"; return 1; }
    outputs "$asan" "$g" "$p" "$d/a" || { bad "$g $p: build/asan/remat failed"; return 1; }
    for f in model.c model.h schedule; do
        cmp -s "$d/n/$f" "$d/a/$f" || { bad "$g $p: $f differs under asan"; return 1; }
    done
    ok
}

# --- trainers ------------------------------------------------------------------
# The runtime and the trainer main, compiled once per kind: normal with
# build.c's flags (checked below against `remat build`), and with the
# sanitizers linked to OpenBLAS or to the portable GEMM.
kit() {   # kind flags...: $work/rt_KIND.o and $work/trainer_KIND/*.o
    local k=$1 f built=1
    shift
    mkdir -p "$work/trainer_$k"
    cc -std=c99 "$@" -Iruntime -c dist/remat_rt.c -o "$work/rt_$k.o" || built=0
    for f in npy trainer trainer_args trainer_io; do
        cc -std=c99 "$@" -Iruntime -c runtime/$f.c -o "$work/trainer_$k/$f.o" || built=0
    done
    [ $built = 1 ] || bad "the runtime does not build ($k)"
}

kit normal -O3 -march=native -DRT_BLAS
kit blas $san -DRT_BLAS
kit noblas $san -DRT_NO_BLAS

run_clean() {   # label exe args...: exit 0 and nothing on stderr
    local label=$1
    shift
    if "$@" > "$work/run.out" 2> "$work/run.err" && [ ! -s "$work/run.err" ]; then
        ok; else head -30 "$work/run.err"; bad "$label: $*"; return 1; fi
}

# $dir/t_KIND from $dir/unit.c, the generated code and the trainer's shim.
trainer() {   # dir kind flags...
    local d=$1 k=$2
    shift 2
    cc -std=c99 "$@" -I"$d" -Iruntime "$d/unit.c" "$work/rt_$k.o" \
        "$work/trainer_$k"/*.o -lopenblas -lm -o "$d/t_$k" && return
    bad "$d: trainer ($k) does not build"
    return 1
}

# The normal trainer's dump, then the sanitizer trainers' runs.
check_trainers() {   # graph dir (holding model.c)
    local g=$1 d=$2 k model
    model=$(sed -n 's/.*<model name="\([A-Za-z0-9_]*\)".*/\1/p' "$g" | head -1)
    printf '#include "model.c"\nconst rt_model *const rt_trainer_model = &%s_model;\n' \
        "$model" > "$d/unit.c"
    trainer "$d" normal -O3 -march=native &&
        run_clean "$g normal" "$d/t_normal" --seed 1 --dump "$d/dump_normal"
    for k in blas noblas; do
        trainer "$d" $k $san || continue
        run_clean "$g $k" "$d/t_$k" --seed 1 --dump "$d/dump_$k" &&
            pairs+=("$d/dump_$k" "$d/dump_normal")
        # a forward-only model has no --steps: time its forward instead
        if grep -q '_HAS_TRAIN_STEP 0$' "$d/model.h"; then
            run_clean "$g $k" "$d/t_$k" --seed 1 --bench 3
        else
            run_clean "$g $k" "$d/t_$k" --seed 1 --steps 3
        fi
    done
}

pairs=()
for g in graphs/*.xml tests/graphs/*.xml; do
    name=$(basename "$g" .xml)
    for p in $policies; do
        same_output "$g" "$p" "$work/$name/$p" && [ "$p" = sac ] &&
            check_trainers "$g" "$work/$name/$p/a"
    done
done
# --max-arena: the trainer runs in an arena of exactly the bound's bytes
# (the trainer allocates the model's arena_bytes and no more, so a kernel
# writing past the plan's arena is caught). A bound between full's arena
# and none's picks a plan whose arena A is below it; bounding at A itself
# must give that plan again, whose arena is then exactly the bound.
for name in mlp12 gpt; do
    g=graphs/$name.xml d=$work/$name/arena
    lo=$("$normal" schedule "$g" --policy full | sed -n 's/^arena_bytes: //p')
    hi=$("$normal" schedule "$g" --policy none | sed -n 's/^arena_bytes: //p')
    a=$("$asan" schedule "$g" --max-arena $(( (lo + hi) / 2 )) | sed -n 's/^arena_bytes: //p')
    mkdir -p "$d/a"
    if "$asan" compile "$g" --max-arena "$a" -o "$d/a/model.c" &&
        grep -qE "^#define [A-Z0-9]+_ARENA_BYTES $a\$" "$d/a/model.h"; then
        ok; check_trainers "$g" "$d/a"
    else bad "$name --max-arena $a: not a plan of exactly $a bytes"; fi
done

# remat build under the sanitizers (build.c forks the C compiler); its
# trainer dumps what the normal trainer built here does, bit for bit.
d=$work/mlp12/sac/a
if run_clean "remat build" "$asan" build graphs/mlp12.xml --policy sac -o "$d/t_build" &&
    run_clean "remat build's trainer" "$d/t_build" --seed 1 --dump "$d/dump_build"; then
    for f in "$d"/dump_normal/*.npy; do
        cmp -s "$f" "$d/dump_build/${f##*/}" || bad "remat build's trainer: ${f##*/} differs"
    done
fi

# Dumps of the sanitizer trainers against the normal trainer's: the same
# files, each tensor within 1e-4 of the normal one's largest finite
# magnitude, and any infinity (a -inf mask constant) the same in both.
if /usr/bin/python3 - "${pairs[@]}" <<'EOF'; then ok; else bad "sanitizer trainers' dumps differ"; fi
import os, sys
import numpy as np
args, bad = sys.argv[1:], 0
for got, ref in zip(args[::2], args[1::2]):
    names = sorted(os.listdir(ref))
    if sorted(os.listdir(got)) != names:
        print(f"FAIL: {got}: files differ from {ref}"); bad = 1; continue
    for n in names:
        a = np.load(os.path.join(got, n)).astype(np.float64)
        b = np.load(os.path.join(ref, n)).astype(np.float64)
        if a.shape != b.shape:
            print(f"FAIL: {got}/{n} has shape {a.shape}, {ref}/{n} {b.shape}"); bad = 1
            continue
        fin = np.isfinite(b)
        scale = max(np.abs(b[fin]).max(initial=0.0), 1e-30)
        if not (np.isfinite(a) == fin).all() or not (a[~fin] == b[~fin]).all() or \
                not np.abs(a[fin] - b[fin]).max(initial=0.0) <= 1e-4 * scale:
            print(f"FAIL: {got}/{n} differs from {ref}/{n}"); bad = 1
print(f"{len(args) // 2} sanitizer dumps compared")
sys.exit(bad)
EOF

# --- valgrind ---------------------------------------------------------------------
wait "${vg_pids[@]}"
tally "catalogue under valgrind, part 1" "$work/bad_vg0.log"
tally "catalogue under valgrind, part 2" "$work/bad_vg1.log"
vg_clean "catalogue"
mkdir -p "$work/vgok"
$vg --log-file="$work/vg/ok.%p.log" "$normal" compile graphs/mlp12.xml --policy sac \
    -o "$work/vgok/m.c" && ok || bad "compile under valgrind failed"
vg_clean "mlp12 sac compile"
finish test_sanitize
