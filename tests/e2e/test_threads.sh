#!/usr/bin/env bash
# The trainer's --threads: the runtime's kernels give the same bits on any
# thread count, on gpt (LayerNorm, Softmax, Dropout, Gather, the loss) and
# mlp12 (Gelu, the residual Adds, the biases).
#
# With the portable GEMM (--no-blas) a --dump and a few --steps on 2 and 3
# threads equal 1 thread's byte for byte. With OpenBLAS they need not:
# OpenBLAS's sgemm gives other bits on 2 threads than on 1 (measured here:
# gpt's gradients differ), and --threads N sets its thread count too. So the
# BLAS check pins OpenBLAS's count: `--threads 2` must equal the runtime on
# 1 thread with OpenBLAS on 2 (OPENBLAS_NUM_THREADS=2, no --threads).
. "$(dirname "$0")/lib.sh"

dump() {   # BIN DIR ARGS...: a --seed 3 --dump into DIR
    local bin=$1 dir=$2
    shift 2
    run 0 "$bin" --seed 3 --dump "$dir" "$@"
}

for g in gpt mlp12; do
    bin=$work/$g
    if ! run 0 "$remat" build "graphs/$g.xml" --policy none --no-blas -o "$bin"; then
        bad "$g: remat build --no-blas"
        continue
    fi
    dump "$bin" "$work/$g.1" --threads 1 || bad "$g: dump on 1 thread"
    for t in 2 3; do
        if dump "$bin" "$work/$g.$t" --threads "$t" &&
            same_dirs "$work/$g.1" "$work/$g.$t"; then ok
        else bad "$g --no-blas: --threads $t --dump differs from --threads 1"; fi
    done
    run 0 "$bin" --seed 3 --steps 3 --bits --threads 1 && cp "$work/out" "$work/$g.steps1"
    if run 0 "$bin" --seed 3 --steps 3 --bits --threads 2 &&
        cmp -s "$work/out" "$work/$g.steps1"; then ok
    else bad "$g --no-blas: --steps 3 --bits on 2 threads differs from 1"; fi

    bin=$work/$g.blas
    if ! run 0 "$remat" build "graphs/$g.xml" --policy none -o "$bin"; then
        bad "$g: remat build"
        continue
    fi
    if dump "$bin" "$work/$g.b2" --threads 2 &&
        OPENBLAS_NUM_THREADS=2 run 0 "$bin" --seed 3 --dump "$work/$g.ob2" &&
        same_dirs "$work/$g.ob2" "$work/$g.b2"; then ok
    else bad "$g: --threads 2 differs from OpenBLAS alone on 2 threads"; fi
done

# The pool under ThreadSanitizer: the kernels' test in one process
# (CK_FORK=no), so that the workers outlive a case and see the next jobs.
if cc -std=c99 -O1 -g -fsanitize=thread -DRT_NO_BLAS -Iruntime \
        tests/unit/test_kernels_threads.c runtime/remat_rt.c \
        $(pkg-config --libs check) -pthread -lm -o "$work/tsan" 2>"$work/err"; then
    if CK_FORK=no "$work/tsan" >"$work/out" 2>&1 && ! grep -q "ThreadSanitizer" "$work/out"
    then ok
    else sed 's/^/     /' "$work/out" | head -40; bad "test_kernels_threads under ThreadSanitizer"; fi
else
    bad "build test_kernels_threads with -fsanitize=thread"
fi

# usage errors
bin=$work/mlp12
for bad_n in 0 17 x; do
    if run 2 "$bin" --bench 1 --threads "$bad_n" && grep -q -- "--threads" "$work/err"; then ok
    else bad "--threads $bad_n is a usage error"; fi
done
if run 2 "$bin" --bench 1 --threads 2 --threads 2; then ok
else bad "--threads given twice is a usage error"; fi
if run 0 "$bin" --help && grep -q -- "--threads N" "$work/out"; then ok
else bad "--help documents --threads"; fi

finish test_threads
