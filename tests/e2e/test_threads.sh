#!/usr/bin/env bash
# The trainer's --threads: the runtime's kernels give the same bits on any
# thread count, on gpt (LayerNorm, Softmax, Dropout, Gather, the loss),
# mlp12 (Gelu, the residual Adds, the biases) and cnn (Conv's two lanes of
# images and its dw, db partial, MaxPool).
#
# With the portable GEMM (--no-blas) a --dump and a few --steps on 2 and 3
# threads equal 1 thread's byte for byte: that covers the GEMMs the runtime
# cuts into one part per thread too (gpt's and mlp12's are all large
# enough), since the portable GEMM computes an element in one order
# whatever the part. With OpenBLAS they need not: its sgemm on a part of C
# gives other bits than on the whole (measured: a 256x128x128 cut in two
# rows differs). So the BLAS check asks what holds: the same bits on every
# run with one thread count, and 2 threads' losses within 1e-5 of 1's.
. "$(dirname "$0")/lib.sh"

dump() {   # BIN DIR ARGS...: a --seed 3 --dump into DIR
    local bin=$1 dir=$2
    shift 2
    run 0 "$bin" --seed 3 --dump "$dir" "$@"
}

for g in gpt mlp12 cnn; do
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
    run 0 "$bin" --seed 3 --steps 5 --threads 1 && cp "$work/out" "$work/$g.b1"
    run 0 "$bin" --seed 3 --steps 5 --threads 2 && cp "$work/out" "$work/$g.b2"
    if run 0 "$bin" --seed 3 --steps 5 --threads 2 && cmp -s "$work/out" "$work/$g.b2"
    then ok
    else bad "$g: two runs with --threads 2 differ"; fi
    if awk 'NR == FNR { a[FNR] = $4; next }
            { d = $4 - a[FNR]; if (d < 0) d = -d; if (d > 1e-5 * $4 || FNR != ++n) exit 1 }
            END { if (n != 5) exit 1 }' "$work/$g.b1" "$work/$g.b2"; then ok
    else bad "$g: --threads 2's losses are not within 1e-5 of 1 thread's"; fi
done

# The pool under ThreadSanitizer: the kernels' test in one process
# (CK_FORK=no), so that the workers outlive a case and see the next jobs.
if cc -std=c99 -O1 -g -fsanitize=thread -DRT_NO_BLAS -Iruntime \
        tests/unit/test_kernels_threads.c dist/remat_rt.c \
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
